"""A course of many students: the instructor's term through the real nbgrader CLI.

One module-scoped fixture runs a term on assignment 1 with four students:

- roster import from CSV and due dates from CSV (``nbgrader db student/assignment import``);
- ``release_assignment`` into a local exchange; alice and bob ``fetch_assignment``, write their
  answers (the solution; the solution with a planted mistake) and ``submit``; the instructor
  collects them with the course's own step (``make course-collect``, never nbgrader's bare
  ``collect``); carol's untouched release and dave's late solution are put into ``submitted/``
  by hand (dave's timestamp is two started days after the due date);
- the same course graded three times by ``tools/course_parallel.py``: serially (``--jobs 1``,
  nbgrader's own one-command pipeline), with two workers on the sqlite gradebook, and with
  two workers into a real PostgreSQL server (``tests/pg_server.py``: Debian's binaries, a
  temporary cluster owned by an unprivileged user, a Unix socket, stopped at the end);
- feedback released through the exchange (``make course-feedback-release``) and fetched by
  alice and bob.

The tests compare the three runs' exports and feedback byte for byte, and the serial run's grades
with the catalog's expectations.
"""

from __future__ import annotations

import csv
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from pg_server import PostgresServer
from submissions import a1_functions
from submissions.catalog import Submission, build
from submissions.pipeline import ROOT, make_course, max_points, nbgrader, notebooks, stop_group

from torchlight_grader.late import DAY, PercentPerDayLate

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow]

A = "a1_functions"
COURSE_ID = "torchlight-autograd"
BY_NAME = {s.name: s for s in a1_functions.CATALOG}
STUDENTS: dict[str, Submission] = {
    "alice": BY_NAME["solution"],
    "bob": BY_NAME["sign-error"],
    "carol": BY_NAME["release"],
    "dave": BY_NAME["solution"],
}
ROSTER = (
    "id,first_name,last_name,email,lms_user_id\n"
    "alice,Alice,Archer,alice@example.org,1001\n"
    "bob,Bob,Baker,bob@example.org,1002\n"
    "carol,Carol,Cole,,1003\n"
    "dave,Dave,Dunn,dave@example.org,1004\n"
    "erin,Erin,Eve,erin@example.org,1005\n"  # on the roster, never hands anything in
)
DUE = "2099-12-31 23:59:59 UTC"
DAVE_SUBMITTED = "2100-01-02 12:00:00.000000 UTC"  # 1.5 days late: two started days, -20%
FLAGS = ("--Execute.timeout=10", "--SandboxedExecute.total_timeout=120",
         "--IsolatedGrader.seed=20260115", "--IsolatedGrader.cell_timeout=10")  # fmt: skip
EXPORTS = ("grades.csv", "items.csv", "canvas.csv", "integrity.csv")


@dataclass
class Term:
    serial: Path
    parallel: Path
    postgres: Path  # a copy of the submissions, graded into PostgreSQL by ``pg_counts``
    points: dict[str, float]
    homes: dict[str, Path]
    exchange: Path


def grade(course: Path, jobs: int, db_url: str | None = None) -> None:
    start = time.perf_counter()
    cmd = [sys.executable, str(ROOT / "tools" / "course_parallel.py"), "--course", str(course),
           "--jobs", str(jobs), "--assignment", A]  # fmt: skip
    if db_url:
        cmd += ["--db-url", db_url]
    proc = subprocess.run([*cmd, "--", *FLAGS], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr[-5000:]}"
    print(f"{course}: --jobs {jobs}: {time.perf_counter() - start:.1f} s")


def course_step(target: str, course: Path, exchange: Path) -> None:
    """``make course-collect`` / ``make course-feedback-release`` (torchlight_grader/collect.py)."""
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), target, f"COURSE={course}",
                           f"EXCHANGE={exchange}", f"ASSIGNMENT={A}"],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, f"make {target}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    print(proc.stdout)


def setup_gradebook(course: Path, db: list[str]) -> None:
    """Roster, release (into the gradebook) and due dates: the instructor's first week."""
    nbgrader(course, "db", "student", "import", "roster.csv", *db)
    nbgrader(course, "generate_assignment", A, "--force", *db)
    nbgrader(course, "db", "assignment", "import", "duedates.csv", *db)


def as_student(home: Path, *args: str, exchange: Path) -> None:
    home.mkdir(exist_ok=True)
    # Each student has their own nbgrader cache (it lives in their home), as separate OS users do.
    nbgrader(home, *args, f"--course={COURSE_ID}", f"--Exchange.root={exchange}",
             f"--Exchange.cache={home / '.nbgrader-cache'}")  # fmt: skip


@pytest.fixture(scope="module")
def term(tmp_path_factory: pytest.TempPathFactory) -> Term:
    where = tmp_path_factory.mktemp("term")
    course = make_course(where / "serial")
    (course / "roster.csv").write_text(ROSTER)
    (course / "duedates.csv").write_text(f"name,duedate\n{A},{DUE}\n")
    setup_gradebook(course, [])
    exchange = where / "exchange"
    exchange.mkdir(mode=0o777)
    exchange.chmod(0o1777)
    nbgrader(course, "release_assignment", A, f"--Exchange.root={exchange}")

    source, release = notebooks(course, A)
    homes = {name: where / "home" / name for name in ("alice", "bob")}
    (where / "home").mkdir()
    for name, home in homes.items():
        as_student(home, "fetch_assignment", A, exchange=exchange)
        fetched = home / A / f"{A}.ipynb"
        assert fetched.exists(), f"fetch_assignment gave {name} nothing"
        nbformat.write(build(STUDENTS[name], source, release), fetched)
        as_student(home, "submit", A, f"--student={name}", exchange=exchange)
    course_step("course-collect", course, exchange)  # the course's own collect, never bare
    for name in ("carol", "dave"):
        folder = course / "submitted" / name / A
        folder.mkdir(parents=True)
        nbformat.write(build(STUDENTS[name], source, release), folder / f"{A}.ipynb")
        (folder / "timestamp.txt").write_text(
            DAVE_SUBMITTED if name == "dave" else "2026-01-15 12:00:00.000000 UTC"
        )

    parallel = shutil.copytree(course, where / "parallel" / "course", symlinks=True)
    # Before grading: the PostgreSQL run (its own fixture) starts from the same submissions.
    shutil.copytree(
        course, where / "postgres" / "course", symlinks=True,
        ignore=shutil.ignore_patterns("gradebook.db", "release", "logs"),
    )  # fmt: skip
    grade(course, jobs=1)
    grade(parallel, jobs=2)
    # Only what came through the exchange goes back (carol's and dave's have no secret).
    course_step("course-feedback-release", parallel, exchange)
    for name, home in homes.items():
        as_student(home, "fetch_feedback", A, f"--student={name}", exchange=exchange)
    return Term(
        course, parallel, where / "postgres" / "course", max_points(source), homes, exchange
    )


@pytest.fixture(scope="module")
def pg_counts(term: Term) -> str:
    """The term's submissions graded by two workers into a real PostgreSQL server; returns the
    number of submissions the server's gradebook holds."""
    with PostgresServer() as pg:
        url = pg.create_database("gradebook")
        setup_gradebook(term.postgres, [f"--CourseDirectory.db_url={url}"])
        grade(term.postgres, jobs=2, db_url=url)
        return pg.psql("gradebook", "SELECT count(*) FROM submitted_assignment")


def rows(course: Path, name: str) -> list[dict[str, str]]:
    with open(course / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def feedback(course: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(course)): p.read_bytes()
        for p in sorted((course / "feedback").rglob("*"))
        if p.is_file()
    }


def test_serial_grades_are_the_catalogs(term: Term) -> None:
    items: dict[str, dict[str, float]] = {}
    for r in rows(term.serial, "items.csv"):
        items.setdefault(r["student_id"], {})[r["grade_id"]] = float(r["score"])
    for student, sub in STUDENTS.items():
        assert items[student] == sub.expected(term.points), student
    assert set(items["erin"].values()) == {0.0}  # on the roster, nothing handed in
    total = sum(term.points.values())
    grades = {r["student_id"]: r for r in rows(term.serial, "grades.csv")}
    assert float(grades["alice"]["score"]) == total
    assert float(grades["bob"]["score"]) == total - term.points["test_div"]
    assert float(grades["carol"]["score"]) == 0
    assert float(grades["dave"]["raw_score"]) == total
    assert float(grades["dave"]["late_submission_penalty"]) == pytest.approx(0.2 * total)
    assert float(grades["dave"]["score"]) == pytest.approx(0.8 * total)
    assert float(grades["alice"]["late_submission_penalty"]) == 0


def test_canvas_csv_has_the_roster_and_final_scores(term: Term) -> None:
    with open(term.serial / "canvas.csv", newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    total = sum(term.points.values())
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A]
    assert table[1] == ["    Points Possible", "", "", "", "", f"{total:g}"]
    by_id = {r[2]: r for r in table[2:]}
    assert sorted(by_id) == ["alice", "bob", "carol", "dave", "erin"]
    assert by_id["alice"][:4] == ["Archer, Alice", "1001", "alice", "alice@example.org"]
    assert float(by_id["dave"][5]) == pytest.approx(0.8 * total)
    assert by_id["erin"][5] == "", "no submission: blank (Canvas: no change), never 0"


@pytest.mark.parametrize("run", ["parallel", "postgres"])
def test_concurrent_runs_equal_the_serial_run(
    term: Term, run: str, request: pytest.FixtureRequest
) -> None:
    if run == "postgres":
        request.getfixturevalue("pg_counts")
    other = getattr(term, run)
    for name in EXPORTS:
        assert (other / name).read_text() == (term.serial / name).read_text(), f"{run}: {name}"
    serial_feedback = feedback(term.serial)
    pages = [name for name in serial_feedback if name.endswith(".html")]
    assert len(pages) == len(STUDENTS)  # one page per student who handed it in
    assert feedback(other) == serial_feedback, run


def test_postgres_run_wrote_postgres_only(term: Term, pg_counts: str) -> None:
    assert pg_counts.strip() == str(len(STUDENTS))
    assert not (term.postgres / "gradebook.db").exists()


def test_students_fetch_their_feedback_through_the_exchange(term: Term) -> None:
    for name, home in term.homes.items():
        pages = list((home / A / "feedback").glob(f"*/{A}.html"))
        assert len(pages) == 1, f"{name} fetched {pages}"
        served = term.parallel / "feedback" / name / A / f"{A}.html"
        assert pages[0].read_bytes() == served.read_bytes()


def test_course_report_summarizes_the_serial_run(term: Term, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "course_report.py"), str(term.serial / "grades.csv"),
         str(term.serial / "items.csv"), "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    total = sum(term.points.values())
    scores = sorted([total, total - term.points["test_div"], 0.0, 0.8 * total])
    mean, median = sum(scores) / 4, (scores[1] + scores[2]) / 2
    row = page.split(f'data-name="{A}">')[1].split("</tr>")[0]
    assert f"<td>4</td><td>1</td><td>1</td><td>{mean:.2f}".rstrip("0").rstrip(".") in row, row
    assert f"<td>{median:.2f}".rstrip("0").rstrip(".") in row
    assert page.count('<rect class="bar"') == 10 and "<svg" in page
    div = page.split('data-name="test_div">')[1].split("</tr>")[0]
    assert "50% (2/4)" in div  # alice and dave pass, bob (sign error) and carol do not
    mul = page.split('data-name="test_mul">')[1].split("</tr>")[0]
    assert "75% (3/4)" in mul


def test_late_policy_is_ten_percent_per_started_day() -> None:
    plugin = PercentPerDayLate(percent_per_day=10.0)
    assert plugin.late_submission_penalty("s", 10.0, 0) is None
    assert plugin.late_submission_penalty("s", 10.0, 1) == 1.0
    assert plugin.late_submission_penalty("s", 10.0, DAY) == 1.0
    assert plugin.late_submission_penalty("s", 10.0, DAY + 1) == 2.0
    assert plugin.late_submission_penalty("s", 10.0, 30 * DAY) == 10.0
    with pytest.raises(ValueError, match="between 0 and 100"):
        PercentPerDayLate(percent_per_day=150.0).late_submission_penalty("s", 1.0, 1)


def test_course_lab_formgrader_lists_the_course_without_the_exchange_banner(term: Term) -> None:
    """``make course-lab`` on the graded course: the Formgrader finds its config, the gradebook
    (with the four submissions) and the local exchange."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exchange = term.serial / "exchange"
    assert not exchange.exists()
    args = f"--no-browser --port={port} --IdentityProvider.token=course-test"
    proc = subprocess.Popen(
        ["make", "-s", "-C", str(ROOT), "course-lab", f"COURSE={term.serial}", f"LAB_ARGS={args}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        assignments = _get_json(port, "/formgrader/api/assignments", proc)
        a1 = next(a for a in assignments if a["name"] == A)
        assert a1["num_submissions"] == len(STUDENTS), a1
        assert a1["max_score"] == sum(term.points.values())
        page = _get(port, "/formgrader/manage_assignments")
        assert "torchlight-autograd" in page or A in page
        assert "does not exist" not in page, "the exchange banner is shown"
        assert exchange.is_dir() and exchange.stat().st_mode & 0o1777 == 0o1777
    finally:
        stop_group(proc, timeout=30)


def _get(port: int, path: str) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Authorization": "token course-test"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def _get_json(port: int, path: str, proc: subprocess.Popen[bytes], wait: float = 180) -> Any:
    deadline = time.monotonic() + wait
    while True:
        try:
            return json.loads(_get(port, path))
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise AssertionError(f"course-lab did not serve {path}:\n{err[-3000:]}") from None
            time.sleep(1)
