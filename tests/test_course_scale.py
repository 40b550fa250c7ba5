"""The instructor's whole term, driven by the documented make targets, through the real nbgrader
CLI and a real exchange (issue 27, item 9 and the "Show" list).

One module-scoped fixture runs a term on assignment 1:

- ``make course-roster``, ``make course-release``, ``make course-release-exchange``;
  alice and bob ``fetch_assignment``, write their answers (the solution; for bob first the
  untouched release) and ``submit``; the due date is set to now; dave submits a second later (one
  started day late, -10%) and backdates his ``timestamp.txt``, folder name and mtimes (the
  penalty stays: the time is the one the instructor's side observed); ``make course-collect``;
  carol's untouched release and frank's corrupt notebook (not JSON) are put into ``submitted/``
  by hand;
- ``make course-grade JOBS=2``, stopped by Ctrl-C (SIGINT to the make's process group, as a
  terminal sends it) after the first student, rerun and stopped by SIGTERM (to the grading
  process) after the first student, rerun to the end: each rerun grades only what is left
  (incremental grading, ``graded.json``); frank's failure is one line naming him, the notebook
  and ``NotJSONError``, and his feedback page says so;
- bob resubmits (the solution with a planted sign error, after the due date), frank's
  submission is deleted, ``make course-collect``, ``make course-grade``: only bob is graded;
- (hook: the manual grade through the Formgrader, ``tests/test_course_browser.py``, would go
  here, before the export) ``make course-export``, ``make course-feedback-release``; alice, bob
  and dave ``fetch_feedback``;
- the reference: a copy of the finished course regraded in full (``--full --jobs 1``,
  nbgrader's own serial pipeline); and the final submissions graded by two workers into a real
  PostgreSQL server (``tests/pg_server.py``) that is stopped mid-run (one message, no
  traceback), started again, and the rerun finishes the class.

The tests compare the incremental term's and the PostgreSQL run's exports and feedback with the
full regrade byte for byte, and the full regrade's grades with the catalog's expectations.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest
from pg_server import PostgresServer
from submissions import a1_functions
from submissions.catalog import Submission, build
from submissions.pipeline import ROOT, make_course, max_points, nbgrader, notebooks, stop_group

from torchlight_grader.nbgrader.late import DAY, PercentPerDayLate

# The whole term is one fixture: ~10 min on 2 cores shared by other work (load 10), so it gets
# more than pytest-timeout's default 600 s (which counts a fixture's setup in its first test).
pytestmark = [pytest.mark.nbgrader, pytest.mark.slow, pytest.mark.timeout(1500)]

A = "a1_functions"
COURSE_ID = "torchlight-autograd"
BY_NAME = {s.name: s for s in a1_functions.CATALOG}
STUDENTS: dict[str, Submission] = {
    "alice": BY_NAME["solution"],
    "bob": BY_NAME["sign-error"],  # the resubmission (the first: the untouched release)
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
    "frank,Frank,Fox,frank@example.org,1006\n"  # a corrupt notebook, then deleted
)
CORRUPT = '{"cells": [ this is not JSON'
FLAGS = ("--Execute.timeout=10", "--SandboxedExecute.total_timeout=120",
         "--IsolatedGrader.seed=20260115", "--IsolatedGrader.cell_timeout=10")  # fmt: skip
EXPORTS = ("grades.csv", "items.csv", "canvas.csv", "integrity.csv")


@dataclass
class Stop:
    """A ``make course-grade`` run stopped by a signal."""

    signal: str
    returncode: int  # make's
    stdout: str
    stderr: str
    latency: float  # seconds from the signal to the grading process's exit
    orphans: list[int]  # its descendants still alive (not zombies) after it exited


@dataclass
class Term:
    serial: Path  # the finished course regraded in full (--full --jobs 1)
    parallel: Path  # the term's course, graded incrementally by make course-grade
    postgres: Path  # a copy of the final submissions, graded into PostgreSQL by ``pg_counts``
    points: dict[str, float]
    homes: dict[str, Path]
    exchange: Path
    stops: list[Stop] = field(default_factory=list)
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)


def make(
    target: str, course: Path, *args: str, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = ["make", "-s", "-C", str(ROOT), target, f"COURSE={course}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if ok:
        assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr[-5000:]}"
    return proc


def make_grade(course: Path, exchange: Path, *args: str) -> list[str]:
    return ["make", "-s", "-C", str(ROOT), "course-grade", f"COURSE={course}", f"ASSIGNMENT={A}",
            "JOBS=2", f"GRADE_ARGS={' '.join(FLAGS)}", *args]  # fmt: skip


def grade(course: Path, jobs: int, *args: str, db_url: str | None = None) -> str:
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "torchlight_grader.course.grade", "--course", str(course),
           "--jobs", str(jobs), "--assignment", A, *args]  # fmt: skip
    if db_url:
        cmd += ["--db-url", db_url]
    proc = subprocess.run([*cmd, "--", *FLAGS], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr[-5000:]}"
    print(f"{course}: --jobs {jobs}: {time.perf_counter() - start:.1f} s")
    return proc.stdout


def stopped(cmd: list[str], how: str) -> Stop:
    """Run ``cmd`` (``make course-grade``) and stop it: ``SIGINT`` to its whole process group
    (a terminal's Ctrl-C) once the first student is done, ``SIGTERM`` to the grading process
    alone (``kill``) as soon as a sandbox runs; wait for it to end."""
    err = tempfile.TemporaryFile("w+")  # noqa: SIM115 - read after the process ends
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                            start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[1/" if how == "SIGINT" else "5 submissions: "):
            break
    # the Python process (not a shell make may have started it with)
    tool = next(p for p in psutil.Process(proc.pid).children(recursive=True)
                if p.cmdline()[1:3] == ["-m", "torchlight_grader.course.grade"])  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        tree = tool.children(recursive=True)
        if any(p.name() == "bwrap" for p in tree):
            break
        time.sleep(0.1)
    start = time.monotonic()
    if how == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        tool.send_signal(signal.SIGTERM)
    tool.wait(timeout=60)  # (not our child: its status is make's to report)
    latency = time.monotonic() - start
    out = proc.stdout.read()
    code = proc.wait(timeout=60)
    err.seek(0)
    _, alive = psutil.wait_procs(tree, timeout=2)
    orphans = [p.pid for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    return Stop(how, code, "".join(lines) + out, err.read(), latency, orphans)


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


def backdate(exchange: Path, student: str, due: datetime) -> None:
    """What a student can do to their own inbound entry: timestamp.txt, the folder's name and
    every mtime a day before the due date."""
    entry = sorted((exchange / COURSE_ID / "inbound").glob(f"{student}+{A}+*"))[-1]
    early = due - timedelta(days=1)
    (entry / "timestamp.txt").write_text(f"{early:%Y-%m-%d %H:%M:%S.%f} UTC")
    for f in entry.iterdir():
        os.utime(f, (early.timestamp(), early.timestamp()))
    parts = entry.name.split("+")
    renamed = entry.with_name(
        "+".join([parts[0], A, f"{early:%Y-%m-%d %H:%M:%S.%f} UTC", parts[3]])
    )
    entry.rename(renamed)
    os.utime(renamed, (early.timestamp(), early.timestamp()))


@pytest.fixture(scope="module")
def term(tmp_path_factory: pytest.TempPathFactory) -> Term:
    where = tmp_path_factory.mktemp("term")
    clock = [time.perf_counter()]

    def lap(what: str) -> None:  # where the fixture's time goes (pytest -s shows it)
        clock.append(time.perf_counter())
        print(f"term: {what}: {clock[-1] - clock[-2]:.1f} s")

    course = make_course(where / "term")
    lap("make_course")
    exchange = where / "exchange"
    ex = f"EXCHANGE={exchange}"
    (course / "roster.csv").write_text(ROSTER)
    make("course-roster", course, f"ROSTER={course / 'roster.csv'}")
    make("course-release", course, f"ASSIGNMENT={A}")
    make("course-release-exchange", course, f"ASSIGNMENT={A}", ex)
    lap("roster, release, release to the exchange")

    source, release = notebooks(course, A)
    homes = {name: where / "home" / name for name in ("alice", "bob")}
    (where / "home").mkdir()
    dave = where / "home" / "dave"  # (writes his notebook in place of a fetch: one call less)
    (dave / A).mkdir(parents=True)

    def hand_in(name: str, sub: Submission) -> None:
        home = homes.get(name, dave)
        fetched = home / A / f"{A}.ipynb"
        if not fetched.exists() and name in homes:
            as_student(home, "fetch_assignment", A, exchange=exchange)
            assert fetched.exists(), f"fetch_assignment gave {name} nothing"
        nbformat.write(build(sub, source, release), fetched)
        as_student(home, "submit", A, f"--student={name}", exchange=exchange)

    hand_in("alice", STUDENTS["alice"])
    hand_in("bob", BY_NAME["release"])  # his first version
    # The due date is now: dave submits a second late (one started day: -10%), then backdates.
    due = datetime.now(UTC)
    (course / "duedates.csv").write_text(f"name,duedate\n{A},{due:%Y-%m-%d %H:%M:%S.%f} UTC\n")
    make("course-duedates", course, f"DUEDATES={course / 'duedates.csv'}")
    time.sleep(1.5)
    hand_in("dave", STUDENTS["dave"])
    backdate(exchange, "dave", due)
    make("course-collect", course, f"ASSIGNMENT={A}", ex)
    for name, text in (("carol", None), ("frank", CORRUPT)):  # copied in by hand
        folder = course / "submitted" / name / A
        folder.mkdir(parents=True)
        if text is None:
            nbformat.write(build(STUDENTS[name], source, release), folder / f"{A}.ipynb")
        else:
            (folder / f"{A}.ipynb").write_text(text)
        (folder / "timestamp.txt").write_text("2026-01-15 12:00:00.000000 UTC")
    lap("students fetch and submit, collect")

    t = Term(course, course, where / "postgres" / "course", max_points(source), homes, exchange)
    # Ctrl-C after the first student, SIGTERM at the start, then to the end: each run picks up.
    t.stops.append(stopped(make_grade(course, exchange), "SIGINT"))
    lap("grade, Ctrl-C")
    t.stops.append(stopped(make_grade(course, exchange), "SIGTERM"))
    lap("grade, SIGTERM")
    t.runs.append(subprocess.run(make_grade(course, exchange), capture_output=True, text=True,
                                 timeout=600))  # fmt: skip
    lap("grade to the end")
    # bob resubmits after the due date; frank's corrupt submission is deleted.
    hand_in("bob", STUDENTS["bob"])
    shutil.rmtree(course / "submitted" / "frank")
    make("course-collect", course, f"ASSIGNMENT={A}", ex)
    t.runs.append(make("course-grade", course, f"ASSIGNMENT={A}", "JOBS=2",
                       f"GRADE_ARGS={' '.join(FLAGS)}"))  # fmt: skip
    lap("resubmit, delete, collect, grade")
    for name in EXPORTS:
        t.outputs[name] = (course / name).read_text()
    # Hook: a manual grade through the Formgrader (tests/test_course_browser.py drives it in
    # Chromium) belongs here; course-export then carries it into the exports.
    make("course-export", course)
    make("course-feedback-release", course, f"ASSIGNMENT={A}", ex)
    for name, home in homes.items():
        as_student(home, "fetch_feedback", A, f"--student={name}", exchange=exchange)
    lap("export, feedback release and fetch")

    # The references, from the final submissions: a full regrade of a copy of the finished
    # course, and (pg_counts) a fresh PostgreSQL gradebook.
    shutil.copytree(
        course, t.postgres, symlinks=True,
        ignore=shutil.ignore_patterns("gradebook.db", "graded.json", "autograded", "feedback",
                                      "logs", *EXPORTS),
    )  # fmt: skip
    t.serial = shutil.copytree(course, where / "serial" / "course", symlinks=True)
    t.outputs["full"] = grade(t.serial, 1, "--full")
    lap("the full regrade")
    return t


@pytest.fixture(scope="module")
def pg_counts(term: Term) -> tuple[str, Stop | subprocess.CompletedProcess[str]]:
    """The final submissions graded by two workers into a real PostgreSQL server, which is
    stopped once the first student is done, started again, and the grading rerun; returns the
    number of submissions the server's gradebook holds and the stopped run."""
    with PostgresServer() as pg:
        url = pg.create_database("gradebook")
        setup_gradebook(term.postgres, [f"--CourseDirectory.db_url={url}"])
        cmd = [sys.executable, "-m", "torchlight_grader.course.grade", "--course",
               str(term.postgres), "--jobs", "2", "--assignment", A, "--db-url", url, "--", *FLAGS]  # fmt: skip
        err = tempfile.TemporaryFile("w+")  # noqa: SIM115 - read after the process ends
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        assert proc.stdout is not None
        head = []
        for line in proc.stdout:
            head.append(line)
            if line.startswith("[1/"):
                break
        pg.halt()
        head.append(proc.stdout.read())
        proc.wait(timeout=120)
        err.seek(0)
        down = subprocess.CompletedProcess(cmd, proc.returncode, "".join(head), err.read())
        pg.resume()
        grade(term.postgres, 2, db_url=url)
        return pg.psql("gradebook", "SELECT count(*) FROM submitted_assignment"), down


def rows(course: Path, name: str) -> list[dict[str, str]]:
    with open(course / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def feedback(course: Path) -> dict[str, bytes]:
    """The feedback of every student with a submission (not frank's, deleted)."""
    return {
        str(p.relative_to(course)): p.read_bytes()
        for p in sorted((course / "feedback").rglob("*"))
        if p.is_file() and p.relative_to(course).parts[1] in STUDENTS
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
    # bob's resubmission came after the due date: one started day late, -10%
    assert float(grades["bob"]["raw_score"]) == total - term.points["test_div"]
    assert float(grades["bob"]["score"]) == pytest.approx(0.9 * (total - term.points["test_div"]))
    assert float(grades["carol"]["score"]) == 0
    # dave backdated timestamp.txt, his folder's name and the mtimes: the penalty stays
    assert float(grades["dave"]["raw_score"]) == total
    assert float(grades["dave"]["late_submission_penalty"]) == pytest.approx(0.1 * total)
    assert float(grades["dave"]["score"]) == pytest.approx(0.9 * total)
    assert float(grades["alice"]["late_submission_penalty"]) == 0
    assert grades["frank"]["score"] == grades["erin"]["score"], "deleted: as if never handed in"


def test_canvas_csv_has_the_roster_and_final_scores(term: Term) -> None:
    with open(term.serial / "canvas.csv", newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    total = sum(term.points.values())
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A]
    assert table[1] == ["    Points Possible", "", "", "", "", f"{total:g}"]
    by_id = {r[2]: r for r in table[2:]}
    assert sorted(by_id) == ["alice", "bob", "carol", "dave", "erin", "frank"]
    assert by_id["alice"][:4] == ["Archer, Alice", "1001", "alice", "alice@example.org"]
    assert float(by_id["dave"][5]) == pytest.approx(0.9 * total)
    assert by_id["erin"][5] == "", "no submission: blank (Canvas: no change), never 0"
    assert by_id["frank"][5] == "", "a deleted submission keeps no grade"


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


def test_make_course_export_rewrites_the_grading_runs_exports(term: Term) -> None:
    for name in EXPORTS[:3]:
        assert (term.parallel / name).read_text() == term.outputs[name], name


def test_ctrl_c_and_sigterm_stop_every_worker_at_once_with_a_summary(term: Term) -> None:
    for stop, make_says in zip(term.stops, ("] Interrupt", "] Error 143"), strict=True):
        print(f"{stop.signal}: the grading process ended {stop.latency:.2f} s after the signal")
        assert stop.returncode != 0 and make_says in stop.stderr, (stop.signal, stop.stderr)
        assert stop.orphans == [], f"{stop.signal}: still running after the tool ended"
        assert stop.latency < 20, stop.latency  # the workers are killed, not waited for (40 s)
        assert "Traceback" not in stop.stderr + stop.stdout, stop.stderr
        assert f"interrupted by {stop.signal}: the workers and their sandboxes are stopped" in (
            stop.stderr
        )
        assert "graded in this run and kept" in stop.stderr and "Rerun" in stop.stderr


def test_each_rerun_grades_only_what_the_last_one_left(term: Term) -> None:
    """SIGINT after >= 1 student, SIGTERM at the start, the rest: together the class once."""
    graded: list[str] = []
    for text in (term.stops[0].stdout, term.stops[1].stdout, term.runs[0].stdout):
        done = [line.split()[1].rstrip(":") for line in text.splitlines()
                if line.startswith("[") and (": ok" in line or ": FAILED" in line)]  # fmt: skip
        graded += done
    first, second, third = (t.splitlines()[0] for t in
                            (term.stops[0].stdout, term.stops[1].stdout, term.runs[0].stdout))  # fmt: skip
    assert first.startswith("5 submissions: 0 unchanged (skipped), 5 new"), first
    n1 = int(second.split(": ")[1].split()[0])  # skipped by the second run
    assert 1 <= n1 < 5, second
    assert int(third.split(": ")[1].split()[0]) >= n1, third
    assert sorted(set(graded)) == ["alice", "bob", "carol", "dave", "frank"], graded
    # graded once each; frank's corrupt notebook fails, so each run that reaches him tries again
    assert len([g for g in graded if g != "frank"]) == 4, graded


def test_a_resubmission_regrades_only_that_student(term: Term) -> None:
    out = term.runs[1].stdout
    assert out.splitlines()[0] == (
        "4 submissions: 3 unchanged (skipped), 1 changed: bob/a1_functions"
    ), out
    progress = [line for line in out.splitlines() if line.startswith("[")]
    assert len(progress) == 1 and progress[0].startswith("[1/1] bob: ok"), progress
    assert "all 4 regraded (--full)" in term.outputs["full"]


def test_a_corrupt_notebook_is_one_line_and_a_feedback_page(term: Term) -> None:
    runs = [term.stops[0], term.stops[1], term.runs[0]]
    text = "".join(r.stderr for r in runs)
    line = f"FAILED frank {A}/{A}.ipynb: NotJSONError: Notebook does not appear to be JSON"
    assert text.count(line) >= 1, text
    assert "Traceback" not in text
    final = term.runs[0].stderr  # the last run tried him again (he failed) and sums up
    assert "1 submission(s) could not be graded" in final and "  " + line in final, final
    assert term.runs[0].returncode != 0
    page = (term.parallel / "feedback" / "frank" / A / f"{A}.html").read_text()
    assert "could not be graded" in page and "NotJSONError" in page, page


def test_postgres_stopped_mid_run_is_one_clear_message(
    pg_counts: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    down = pg_counts[1]
    assert down.returncode == 1, down.stderr
    assert "Traceback" not in down.stderr + down.stdout, down.stderr
    assert down.stderr.startswith("the gradebook database stopped answering: postgresql"), (
        down.stderr
    )
    assert len(down.stderr.strip().splitlines()) == 2, down.stderr
    assert "Rerun `make course-grade` when the database is back" in down.stderr


def test_postgres_run_wrote_postgres_only(term: Term, pg_counts: tuple[str, Any]) -> None:
    assert pg_counts[0].strip() == str(len(STUDENTS))
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
        [sys.executable, "-m", "torchlight_grader.course.report", str(term.serial / "grades.csv"),
         str(term.serial / "items.csv"), "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    total = sum(term.points.values())
    scores = sorted([total, 0.9 * (total - term.points["test_div"]), 0.0, 0.9 * total])
    mean, median = sum(scores) / 4, (scores[1] + scores[2]) / 2
    row = page.split(f'data-name="{A}">')[1].split("</tr>")[0]
    # 4 submitted; missing: erin and frank (deleted); late: bob (resubmitted) and dave
    assert f"<td>4</td><td>2</td><td>2</td><td>{mean:.2f}".rstrip("0").rstrip(".") in row, row
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
        assert a1["num_submissions"] == len(STUDENTS), a1  # not frank's, deleted
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
