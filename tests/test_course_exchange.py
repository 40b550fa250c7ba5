"""The exchange is a trust boundary: one term between honest students and attackers.

Each deployment (``single``: every student the instructor's OS user; ``accounts``: one OS account
per student, created here with ``useradd``, needs root, as CI runs) runs one term on assignment 1
through the real nbgrader CLI (``release_assignment``, students ``fetch_assignment`` and
``submit`` into a shared exchange, ``fetch_feedback``) and the course's own steps (``make
course-collect``, ``tools/course_parallel.py``, ``make course-feedback-release``), with real
student ids:

- ``mallory`` puts a folder into inbound whose notebook is a symlink to the instructor's source
  notebook and whose ``grades.html`` is a symlink to the gradebook (issue 28.1);
- ``lily`` submits after the due date, then backdates ``timestamp.txt``, the folder name and the
  files' mtimes (issue 28.2, 27.6);
- ``eve`` (accounts only) puts a folder named after ``s8_ok``, newer than s8_ok's, holding the
  untouched release (issue 28.3); and a folder whose student id is a spreadsheet formula (24.6);
- ``bob`` submits a correct notebook with a 9 MB comment cell (28.4, the collect/refuse half);
- ``alice`` submits a wrong answer, is given a manual score, then resubmits the correct one
  (27.2: latest wins, regraded, the stale manual score reported and not applied).

``TL_COLLECT=nbgrader`` runs the same term with the README's former commands (``nbgrader
collect`` and ``nbgrader release_feedback``): the tests fail there (today's main).
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest
from submissions import a1_functions
from submissions.catalog import build
from submissions.pipeline import BIN, ROOT, make_course, max_points, nbgrader, notebooks

from torchlight_grader.collect import LIMITS, RefusedError, check_notebook

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow]

A = "a1_functions"
COURSE_ID = "torchlight-autograd"
CATALOG = {s.name: s for s in a1_functions.CATALOG}
FLAGS = ("--Execute.timeout=10", "--SandboxedExecute.total_timeout=120",
         "--IsolatedGrader.seed=20260115", "--IsolatedGrader.cell_timeout=10")  # fmt: skip
OLD_WAY = os.environ.get("TL_COLLECT") == "nbgrader"
FORMULA = '=HYPERLINK("evil.example")'


@dataclass
class Term:
    course: Path
    exchange: Path
    homes: dict[str, Path]
    points: float
    collect_out: str
    deployment: str


def _run(cmd: list[str], cwd: Path, user: str | None = None, env: dict | None = None) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    if user:
        cmd = ["runuser", "-u", user, "--", "env", f"HOME={cwd}", f"PATH={env['PATH']}", *cmd]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
        )
    return proc.stdout + proc.stderr


class Students:
    def __init__(self, base: Path, exchange: Path, accounts: bool) -> None:
        self.base, self.exchange, self.accounts = base, exchange, accounts
        self.homes: dict[str, Path] = {}
        self.created: list[str] = []

    def add(self, name: str) -> Path:
        home = self.base / "home" / name
        home.mkdir(parents=True)
        if self.accounts:
            try:  # left over from an interrupted run of this test (the names are its own)
                pwd.getpwnam(name)
                subprocess.run(["userdel", name], capture_output=True, check=True)
            except KeyError:
                pass
            proc = subprocess.run(["useradd", "-M", "-d", str(home), "-s", "/bin/sh", name],
                                  capture_output=True, text=True)  # fmt: skip
            assert proc.returncode == 0, f"useradd {name} failed: {proc.stderr}"
            self.created.append(name)
            shutil.chown(home, name, name)
        self.homes[name] = home
        return home

    def user(self, name: str) -> str | None:
        return name if self.accounts else None

    def nbgrader(self, name: str, *args: str) -> str:
        home = self.homes[name]
        return _run([str(BIN / "nbgrader"), *args, f"--course={COURSE_ID}",
                     f"--Exchange.root={self.exchange}", f"--Exchange.cache={home / '.cache'}"],
                    home, self.user(name))  # fmt: skip

    def python(self, name: str, code: str) -> None:
        """Run ``code`` as the student (their own hands on the exchange)."""
        _run([sys.executable, "-c", code], self.homes[name], self.user(name))

    def close(self) -> None:
        for name in self.created:
            subprocess.run(["userdel", name], capture_output=True)


def inbound_entry(exchange: Path, student: str) -> Path:
    found = sorted((exchange / COURSE_ID / "inbound").glob(f"{student}+{A}+*"))
    assert found, f"no inbound entry of {student}"
    return found[-1]


def collect(course: Path, exchange: Path) -> str:
    if OLD_WAY:
        return _run([str(BIN / "nbgrader"), "collect", A, f"--Exchange.root={exchange}"], course)
    return _run(["make", "-s", "-C", str(ROOT), "course-collect", f"COURSE={course}",
                 f"EXCHANGE={exchange}", f"ASSIGNMENT={A}"], ROOT)  # fmt: skip


@pytest.fixture(scope="module", params=["single"])
def term(request: pytest.FixtureRequest) -> Term:
    deployment = request.param
    if deployment == "accounts" and os.geteuid() != 0:
        pytest.fail("the one-account-per-student term creates OS users with useradd and needs "
                    f"root (CI runs as root); this run is uid {os.geteuid()}")  # fmt: skip
    base = Path(tempfile.mkdtemp(prefix=f"tl-exchange-{deployment}-"))
    base.chmod(0o755)  # the students' homes are below it
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o1777)
    prefix = "tlx" if deployment == "accounts" else ""
    people = Students(base, exchange, deployment == "accounts")
    try:
        yield _term(base, exchange, people, prefix, deployment)
    finally:
        people.close()
        shutil.rmtree(base, ignore_errors=True)


def _term(base: Path, exchange: Path, people: Students, prefix: str, deployment: str) -> Term:
    names = {n: f"{prefix}{n}" for n in ("alice", "s8_ok", "lily", "mallory", "bob", "eve")}
    course = make_course(base)
    course.chmod(0o700)  # the instructor's: no student may read it
    for sid in names.values():
        nbgrader(course, "db", "student", "add", sid)
    nbgrader(course, "generate_assignment", A, "--force")
    nbgrader(course, "release_assignment", A, f"--Exchange.root={exchange}")
    source, release = notebooks(course, A)
    solution = build(CATALOG["solution"], source, release)
    wrong = build(CATALOG["sign-error"], source, release)
    for sid in names.values():
        home = people.add(sid)
        people.nbgrader(sid, "fetch_assignment", A)
        assert (home / A / f"{A}.ipynb").exists()

    def hand_in(who: str, nb: object) -> None:
        sid = names[who]
        path = people.homes[sid] / A / f"{A}.ipynb"
        staged = base / "stage" / f"{sid}.ipynb"
        staged.parent.mkdir(exist_ok=True)
        nbformat.write(nb, staged)
        staged.chmod(0o644)
        people.python(sid, f"import shutil; shutil.copyfile({str(staged)!r}, {str(path)!r})")
        people.nbgrader(sid, "submit", A, f"--student={sid}")

    hand_in("alice", wrong)
    hand_in("s8_ok", solution)
    big = nbformat.from_dict(json.loads(nbformat.writes(solution)))
    huge = nbformat.v4.new_code_cell("# " + "x" * (9 * 1024**2))
    del huge["id"]
    big.cells.append(huge)
    hand_in("bob", big)
    # mallory submits, then turns her own inbound folder (nbgrader submit printed its path) into
    # links into the course: the notebook to the instructor's source, grades.html to the gradebook
    hand_in("mallory", release)
    mal = inbound_entry(exchange, names["mallory"])
    people.python(
        names["mallory"],
        f"""
import os
import pwd
d = {str(mal)!r}
os.remove(d + '/{A}.ipynb')
os.symlink({str(course / "source" / A / f"{A}.ipynb")!r}, d + '/{A}.ipynb')
os.symlink({str(course / "gradebook.db")!r}, d + '/grades.html')
""",
    )
    if deployment == "accounts":
        # eve: a folder named after s8_ok, newer than s8_ok's, holding the untouched release
        s8 = inbound_entry(exchange, names["s8_ok"]).name.split("+")
        later = datetime.strptime(s8[2], "%Y-%m-%d %H:%M:%S.%f %Z") + timedelta(minutes=1)
        fake = (
            exchange
            / COURSE_ID
            / "inbound"
            / f"{names['s8_ok']}+{A}+{later:%Y-%m-%d %H:%M:%S.%f} UTC+e"
        )
        people.python(
            names["eve"],
            f"""
import os, shutil
os.mkdir({str(fake)!r})
shutil.copy({str(people.homes[names["eve"]] / A / f"{A}.ipynb")!r}, {str(fake)!r})
open({str(fake)!r} + '/timestamp.txt', 'w').write({later.strftime("%Y-%m-%d %H:%M:%S.%f UTC")!r})
""",
        )
    formula = exchange / COURSE_ID / "inbound" / f"{FORMULA}+{A}+2026-01-01 00:00:00.000000 UTC+f"
    formula.mkdir()
    nbformat.write(solution, formula / f"{A}.ipynb")
    first = collect(course, exchange)

    # The instructor grades alice's first version by hand: half a point on test_div (later stale).
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.add_submission(A, names["alice"])
        grade = gb.find_grade("test_div", A, A, names["alice"])
        grade.manual_score = 0.5
        gb.db.commit()
    hand_in("alice", solution)  # the corrected resubmission
    # The due date is now: lily submits a few seconds late (one started day: -10%) ...
    due = datetime.now(UTC)
    nbgrader(course, "db", "assignment", "add", A, f"--duedate={due:%Y-%m-%d %H:%M:%S.%f} UTC")
    time.sleep(1.5)
    hand_in("lily", solution)
    # ... then rewrites her timestamp.txt, her folder's name and every mtime to a day earlier.
    entry = inbound_entry(exchange, names["lily"])
    early = due - timedelta(days=1)
    parts = entry.name.split("+")
    renamed = entry.with_name(
        "+".join([parts[0], A, f"{early:%Y-%m-%d %H:%M:%S.%f} UTC", parts[3]])
    )
    people.python(
        names["lily"],
        f"""
import os
import pwd
e, r, t = {str(entry)!r}, {str(renamed)!r}, {early.timestamp()!r}
open(e + '/timestamp.txt', 'w').write({early.strftime("%Y-%m-%d %H:%M:%S.%f UTC")!r})
for n in os.listdir(e):
    os.utime(e + '/' + n, (t, t))
os.rename(e, r)
os.utime(r, (t, t))
""",
    )
    second = collect(course, exchange)

    # A page the gradebook does not know, next to an honest student's feedback.
    cmd = [sys.executable, str(ROOT / "tools" / "course_parallel.py"), "--course", str(course),
           "--jobs", "1", "--assignment", A, "--", *FLAGS]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"grading failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    (course / "feedback" / names["s8_ok"] / A / "grades.html").write_text("SECRET-GRADEBOOK")
    if OLD_WAY:
        nbgrader(course, "release_feedback", A, f"--Exchange.root={exchange}")
    else:
        _run(["make", "-s", "-C", str(ROOT), "course-feedback-release", f"COURSE={course}",
              f"EXCHANGE={exchange}", f"ASSIGNMENT={A}"], ROOT)  # fmt: skip
    for who in ("alice", "s8_ok", "lily", "mallory", "bob"):  # everyone who ran submit
        people.nbgrader(names[who], "fetch_feedback", A, f"--student={names[who]}")
    print(first, second, sep="\n")
    points = sum(max_points(source).values())
    return Term(course, exchange, {k: people.homes[v] for k, v in names.items()}, points,
                first + second, deployment)  # fmt: skip


def sid(term: Term, who: str) -> str:
    return ("tlx" if term.deployment == "accounts" else "") + who


def grades(term: Term) -> dict[str, dict[str, str]]:
    with open(term.course / "grades.csv", newline="", encoding="utf-8") as f:
        return {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == A}


def fetched(term: Term, who: str) -> str:
    return "".join(
        p.read_text(errors="replace") for p in (term.homes[who] / A / "feedback").rglob("*.html")
    )


def test_symlinked_inbound_folder_is_refused_and_leaks_nothing(term: Term) -> None:
    mallory = sid(term, "mallory")
    assert not (term.course / "submitted" / mallory).exists(), "mallory's links were collected"
    assert float(grades(term).get(mallory, {}).get("score") or 0) == 0
    assert "symlink" in term.collect_out
    page = fetched(term, "mallory")
    assert "SQLite format" not in page and "### BEGIN SOLUTION" not in page
    assert "was refused" in page and "symlink" in page  # the student is told why


def test_feedback_release_carries_only_the_gradebooks_notebooks(term: Term) -> None:
    assert "SECRET-GRADEBOOK" not in fetched(term, "s8_ok")
    released = [
        p.read_text(errors="replace") for p in (term.exchange / COURSE_ID / "feedback").glob("*")
    ]
    assert not any("SECRET-GRADEBOOK" in text for text in released)
    assert f"{A}.html" in {p.name for p in (term.homes["s8_ok"] / A / "feedback").rglob("*.html")}


def test_backdating_does_not_cancel_the_late_penalty(term: Term) -> None:
    lily = grades(term)[sid(term, "lily")]
    assert float(lily["raw_score"]) == term.points
    assert float(lily["late_submission_penalty"]) == pytest.approx(0.1 * term.points)
    stamp = (term.course / "submitted" / sid(term, "lily") / A / "timestamp.txt").read_text()
    assert datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f %Z").year == datetime.now().year


def test_resubmission_latest_wins_and_the_stale_manual_score_is_reported(term: Term) -> None:
    alice = grades(term)[sid(term, "alice")]
    assert float(alice["score"]) == term.points, alice  # the corrected version, no old 1.0
    stale = term.course / "collect" / f"{A}-stale-manual.csv"
    assert stale.exists(), "no report of the stale manual score"
    rows = list(csv.DictReader(stale.open()))
    assert [(r["student"], r["cell"], r["old_manual_score"]) for r in rows] == [
        (sid(term, "alice"), "test_div", "0.5")
    ]
    assert "STALE manual score 0.5 of " + sid(term, "alice") in term.collect_out


def test_a_huge_notebook_is_refused_at_collect_with_a_message(term: Term) -> None:
    bob = sid(term, "bob")
    assert not (term.course / "submitted" / bob).exists()
    assert f"REFUSED '{bob}'" in term.collect_out and "bytes per file" in term.collect_out
    assert "more than the limit" in fetched(term, "bob")


def test_unsafe_student_id_is_refused_at_collect(term: Term) -> None:
    assert not any(p.name.startswith("=") for p in (term.course / "submitted").iterdir())
    assert "outside the course's safe alphabet" in term.collect_out


def test_honest_students_keep_their_grades(term: Term) -> None:
    table = grades(term)
    assert float(table[sid(term, "s8_ok")]["score"]) == term.points
    nb = nbformat.read(term.course / "submitted" / sid(term, "s8_ok") / A / f"{A}.ipynb", 4)
    answers = [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert all("NotImplementedError" not in s for s in answers), "s8_ok's submission was replaced"
    if term.deployment == "accounts":
        assert "a folder may only be submitted by the student it names" in term.collect_out


@pytest.mark.parametrize("text, why", [
    ('{"cells": [' + ",".join(['{"cell_type": "raw", "source": ""}'] * 3000) + "]}", "3000 cells"),
    ('{"cells": [], "metadata": ' + "[" * 5000 + "]" * 5000 + "}", "nested deeper"),
])  # fmt: skip
def test_cell_count_and_json_depth_limits(text: str, why: str) -> None:
    with pytest.raises(RefusedError, match=why):
        check_notebook("n.ipynb", text.encode(), LIMITS)
