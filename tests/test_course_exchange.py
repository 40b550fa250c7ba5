"""The exchange is a trust boundary: one term per deployment between honest students and attackers.

Each deployment runs one term on assignment 1 through the real nbgrader CLI (roster ``db student
import``, ``release_assignment``, students ``fetch_assignment`` and ``submit`` into a shared
exchange, ``fetch_feedback``) and the course's own steps (``make course-collect``,
``torchlight_grader/course/grade.py``, ``make course-feedback-release``), with real student ids. The two
terms run at the same time (the ``terms`` fixture), each with its own course, exchange and ids.

``single`` (every student is the instructor's OS user; ``make course-collect`` then says "single
OS user"):

- ``mallory`` turns her inbound folder into links into the course: the notebook to the
  instructor's source notebook, ``grades.html`` to the gradebook (issue 28.1);
- ``lily`` submits after the due date, then backdates ``timestamp.txt``, the folder name and the
  files' mtimes (28.2, 27.6);
- ``bob`` submits three huge notebooks: a 50 MB comment cell, 10^5 cells, JSON nested 10^5 deep
  (28.4: refused at collect, a page for him, a report line for the instructor);
- ``alice`` submits a wrong answer, is given a manual score, then resubmits the correct one
  (27.2: latest wins, regraded, the stale manual score reported and not applied);
- unsafe student ids (24.6): inbound folders named ``=HYPERLINK(...)``, ``-rf`` and ``a+b``
  (refused at collect), the same formula and ``-x`` copied into ``submitted/`` by hand (refused at
  autograde), and roster ids ``a/b``, ``+1+1``, ``-2+3``, ``@SUM(A1)`` (no export cell starts with
  ``= + - @``, tab or CR);
- ``s8_ok`` hands in the solution and must keep every point.

``accounts`` (one OS account per student, as on JupyterHub; created here with ``useradd``, which
needs root, as CI runs; removed at the end): a short term with ``tlxs8_ok`` honest, ``tlxmallory``
(the same links, as her own user) and ``tlxeve``, who puts a folder named after s8_ok, newer than
s8_ok's, holding the untouched release (28.3), runs ``nbgrader submit --student=tlxs8_ok`` with
the untouched release, and makes a folder whose id is a formula. The students
run nbgrader as themselves (``runuser``); when they cannot execute this test's interpreter (a
Python under root's mode-700 home), they get a copy of it (hard links where possible) that reads
this environment's site-packages.

``TL_COLLECT=nbgrader`` runs the same terms with the README's former commands (``nbgrader
collect`` and ``nbgrader release_feedback``): the tests fail there (today's main).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest
from submissions import a1_functions
from submissions.catalog import build
from submissions.pipeline import BIN, ROOT, max_points, nbgrader, notebooks, released_course

from torchlight_grader.nbgrader.collect import LIMITS, RefusedError, check_notebook
from torchlight_grader.nbgrader.spreadsheet import FORMULA_START

# a term is one fixture: on a loaded 2-core machine its setup alone passed the 600 s default
pytestmark = [pytest.mark.nbgrader, pytest.mark.slow, pytest.mark.timeout(1200)]

A = "a1_functions"
COURSE_ID = "torchlight-autograd"
CATALOG = {s.name: s for s in a1_functions.CATALOG}
FLAGS = ("--Execute.timeout=10", "--SandboxedExecute.total_timeout=120",
         "--IsolatedGrader.seed=20260115", "--IsolatedGrader.cell_timeout=10")  # fmt: skip
OLD_WAY = os.environ.get("TL_COLLECT") == "nbgrader"
FORMULA = '=HYPERLINK("evil.example")'
#: ids a student can put into inbound folder names (refused at collect) ...
INBOUND_UNSAFE = (FORMULA, "-rf", "a+b")
#: ... copied into submitted/ by the instructor's own hand (refused at autograde) ...
HAND_COPIED_UNSAFE = ('=HYPERLINK("evil.example","2")', "-x")
#: ... and on the roster (an LMS export): the exports must quote them
ROSTER_UNSAFE = ("a/b", "+1+1", "-2+3", "@SUM(A1)")
PREFIX = {"single": "", "accounts": "tlx"}
CAST = {
    "single": ("alice", "s8_ok", "lily", "kim", "mallory", "bob"),
    "accounts": ("s8_ok", "mallory", "eve"),
}


@dataclass
class Term:
    course: Path
    exchange: Path
    homes: dict[str, Path]
    points: float
    collect_out: str
    grade_out: str
    deployment: str
    after: dict[str, str] = field(default_factory=dict)  # kim's manual grade and extension


def _run(cmd: list[str], cwd: Path, user: str | None = None, env: dict | None = None,
         check: bool = True) -> str:  # fmt: skip
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    if user:
        extra = [f"{k}={env[k]}" for k in ("LD_LIBRARY_PATH",) if k in env]
        cmd = ["runuser", "-u", user, "--", "env", f"HOME={cwd}", f"PATH={env['PATH']}", *extra,
               *cmd]  # fmt: skip
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
        )
    return proc.stdout + proc.stderr


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or protected_hardlinks: a copy
        shutil.copy2(src, dst)


def student_interpreter(dest: Path, with_site_packages: bool) -> tuple[Path, Path]:
    """A Python the students' OS users can execute: this interpreter, its shared library and its
    standard library linked (or copied) into ``dest`` (mode 755), reading this environment's
    site-packages through a ``.pth`` file, or, ``with_site_packages``, from a linked copy of them.
    Returns the interpreter and its library folder (for ``LD_LIBRARY_PATH``: its RUNPATH points
    into the original prefix)."""
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "bin").mkdir(parents=True)
    python = dest / "bin" / ver
    _link_or_copy(os.path.realpath(sys.executable), str(python))
    skip = shutil.ignore_patterns("site-packages", "test", "idlelib", "tkinter", "turtledemo",
                                  "ensurepip", "lib2to3", "config-*")  # fmt: skip
    stdlib = dest / "lib" / ver
    shutil.copytree(sysconfig.get_paths()["stdlib"], stdlib, ignore=skip,
                    copy_function=_link_or_copy)  # fmt: skip
    for lib in (Path(sys.base_prefix) / "lib").glob("libpython*.so*"):
        _link_or_copy(str(lib), str(dest / "lib" / lib.name))
    purelib = sysconfig.get_paths()["purelib"]
    if with_site_packages:
        shutil.copytree(purelib, stdlib / "site-packages", symlinks=True,
                        copy_function=_link_or_copy)  # fmt: skip
    else:
        (stdlib / "site-packages").mkdir()
        (stdlib / "site-packages" / "torchlight-course.pth").write_text(
            f"import site; site.addsitedir({purelib!r})\n"
        )
    for folder, dirs, _ in os.walk(dest):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
    dest.chmod(0o755)
    return python, dest / "lib"


class Students:
    """The term's students: the instructor's own OS user, or one ``useradd`` account each."""

    def __init__(self, base: Path, exchange: Path, accounts: bool) -> None:
        self.base, self.exchange, self.accounts = base, exchange, accounts
        self.homes: dict[str, Path] = {}
        self.created: list[str] = []
        self.python_cmd = [sys.executable]
        self.nbgrader_cmd = [str(BIN / "nbgrader")]
        self.env: dict[str, str] = {}

    def add(self, name: str) -> Path:
        home = self.base / "home" / name
        home.mkdir(parents=True)
        if self.accounts:
            try:  # left over from an interrupted run of this test (the names are its own)
                pwd.getpwnam(name)
                subprocess.run(["userdel", name], capture_output=True, check=True)
            except KeyError:
                pass
            proc = subprocess.run(["useradd", "-M", "-U", "-d", str(home), "-s", "/bin/sh", name],
                                  capture_output=True, text=True)  # fmt: skip
            assert proc.returncode == 0, f"useradd {name} failed: {proc.stderr}"
            self.created.append(name)
            shutil.chown(home, name, name)
            if len(self.created) == 1:
                self._find_interpreter(name)
        self.homes[name] = home
        return home

    def _probe(self, name: str) -> str:
        """'' when ``name`` can import nbgrader with ``python_cmd``, else what went wrong."""
        env = [f"{k}={v}" for k, v in self.env.items()]
        proc = subprocess.run(["runuser", "-u", name, "--", "env", *env, *self.python_cmd, "-c",
                               "import nbgrader"], cwd=self.homes[name], capture_output=True,
                              text=True, timeout=600)  # fmt: skip
        return "" if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr[-2000:]}"

    def _find_interpreter(self, name: str) -> None:
        """Students must run nbgrader as themselves: with this interpreter if they can, else a
        copy of it they can read."""
        self.homes[name] = self.base / "home" / name
        if not self._probe(name):
            return
        for with_site_packages in (False, True):
            python, lib = student_interpreter(self.base / "python", with_site_packages)
            self.python_cmd = [str(python)]
            self.nbgrader_cmd = [str(python), "-m", "nbgrader"]
            self.env = {"LD_LIBRARY_PATH": str(lib)}
            failure = self._probe(name)
            if not failure:
                return
        raise AssertionError(f"the students' OS users cannot run nbgrader: {failure}")

    def user(self, name: str) -> str | None:
        return name if self.accounts else None

    def nbgrader(self, name: str, *args: str) -> str:
        home = self.homes[name]
        return _run([*self.nbgrader_cmd, *args, f"--course={COURSE_ID}",
                     f"--Exchange.root={self.exchange}", f"--Exchange.cache={home / '.cache'}"],
                    home, self.user(name), self.env)  # fmt: skip

    def python(self, name: str, code: str) -> None:
        """Run ``code`` as the student (their own hands on the exchange)."""
        _run([*self.python_cmd, "-c", code], self.homes[name], self.user(name), self.env)

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


def _make_term(deployment: str, pristine: Path) -> Iterator[Term]:
    if deployment == "accounts" and os.geteuid() != 0:
        pytest.fail("the one-account-per-student term creates OS users with useradd and needs "
                    f"root (CI runs as root); this run is uid {os.geteuid()}")  # fmt: skip
    base = Path(tempfile.mkdtemp(prefix=f"tl-exchange-{deployment}-"))
    base.chmod(0o755)  # the students' homes are below it
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o1777)
    people = Students(base, exchange, deployment == "accounts")
    try:
        yield _term(base, exchange, people, deployment, pristine)
    finally:
        people.close()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course built and its assignment generated once (the gradebook without students), for
    both terms: ``generate_assignment`` is the slowest instructor step (a copy of the session's
    release, ``released_course``)."""
    return released_course(tmp_path_factory.mktemp("exchange-course"), A)


@pytest.fixture(scope="module")
def terms(pristine: Path) -> Iterator[dict[str, Term]]:
    """Both terms run at the same time, each in its own folders, exchange and student ids (on
    2 cores that takes ~40% off: a term is mostly nbgrader start-ups and sandboxes, which leave
    the other core idle). Each term is cleaned up whatever became of the other."""
    managers = {d: contextlib.contextmanager(_make_term)(d, pristine) for d in PREFIX}
    with contextlib.ExitStack() as stack:
        with ThreadPoolExecutor(len(managers)) as pool:
            started = {d: pool.submit(m.__enter__) for d, m in managers.items()}
        for d, future in started.items():
            if future.exception() is None:  # (a term that failed has cleaned up after itself)
                stack.push(managers[d].__exit__)
        yield {d: future.result() for d, future in started.items()}


@pytest.fixture(scope="module")
def single(terms: dict[str, Term]) -> Term:
    return terms["single"]


@pytest.fixture(scope="module")
def accounts(terms: dict[str, Term]) -> Term:
    return terms["accounts"]


@pytest.fixture(params=["single", "accounts"])
def term(request: pytest.FixtureRequest) -> Term:
    return request.getfixturevalue(request.param)


def huge_notebooks(solution: object) -> dict[str, str]:
    """The three shapes of 28.4, as the JSON text a student can hand in."""
    big = json.loads(nbformat.writes(solution))
    big["cells"].append({"cell_type": "code", "execution_count": None, "metadata": {},
                         "outputs": [], "source": "# " + "x" * (50 * 1000**2)})  # fmt: skip
    cells = {"cells": [{"cell_type": "raw", "metadata": {}, "source": ""}] * 10**5,
             "metadata": {}, "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    deep = ('{"cells": [], "metadata": {"x": ' + "[" * 10**5 + "]" * 10**5 + '}, "nbformat": 4, '
            '"nbformat_minor": 5}')  # fmt: skip
    return {"comment": json.dumps(big), "cells": json.dumps(cells), "deep": deep}


def _term(base: Path, exchange: Path, people: Students, deployment: str, pristine: Path) -> Term:
    single = deployment == "single"
    start = time.perf_counter()

    def mark(step: str) -> None:  # where the term's time goes (shown with -s or on a failure)
        print(f"{deployment} term: {step} at {time.perf_counter() - start:.1f} s")

    names = {n: f"{PREFIX[deployment]}{n}" for n in CAST[deployment]}
    course = Path(shutil.copytree(pristine, base / "course"))
    course.chmod(0o700)  # the instructor's: no student may read it
    roster = ["id", *names.values(), *(ROSTER_UNSAFE if single else ())]
    (course / "roster.csv").write_text("".join(f"{r}\n" for r in roster))
    nbgrader(course, "db", "student", "import", "roster.csv")
    nbgrader(course, "release_assignment", A, f"--Exchange.root={exchange}")
    mark("released")
    source, release = notebooks(course, A)
    solution = build(CATALOG["solution"], source, release)
    wrong = build(CATALOG["sign-error"], source, release)
    inbound = exchange / COURSE_ID / "inbound"
    outbound = exchange / COURSE_ID / "outbound" / A
    for who, sid in names.items():
        home = people.add(sid)
        if who == "s8_ok":
            people.nbgrader(sid, "fetch_assignment", A)
            assert (home / A / f"{A}.ipynb").exists()
        elif who != "eve":  # the others copy the release by hand (an nbgrader start-up less)
            people.python(sid, f"import shutil; shutil.copytree({str(outbound)!r}, {A!r})")

    def hand_in(who: str, nb: object) -> None:
        sid = names[who]
        path = people.homes[sid] / A / f"{A}.ipynb"
        staged = base / "stage" / f"{sid}.ipynb"
        staged.parent.mkdir(exist_ok=True)
        if isinstance(nb, str):
            staged.write_text(nb)
        else:
            nbformat.write(nb, staged)
        staged.chmod(0o644)
        if people.accounts:
            people.python(sid, f"import shutil; shutil.copyfile({str(staged)!r}, {str(path)!r})")
        else:
            shutil.copyfile(staged, path)
        people.nbgrader(sid, "submit", A, f"--student={sid}")

    if single:
        hand_in("alice", wrong)
        for text in huge_notebooks(solution).values():
            hand_in("bob", text)
    hand_in("s8_ok", solution)
    # mallory submits, then turns her own inbound folder (nbgrader submit printed its path) into
    # links into the course: the notebook to the instructor's source, grades.html to the gradebook
    hand_in("mallory", release)
    mal = inbound_entry(exchange, names["mallory"])
    people.python(
        names["mallory"],
        f"""
import os
d = {str(mal)!r}
os.remove(d + '/{A}.ipynb')
os.symlink({str(course / "source" / A / f"{A}.ipynb")!r}, d + '/{A}.ipynb')
os.symlink({str(course / "gradebook.db")!r}, d + '/grades.html')
""",
    )
    # Folders a student makes by hand in inbound (with the untouched release): in the accounts
    # term eve makes one named after s8_ok, a minute newer than s8_ok's, and one named a formula;
    # in the single term the student ids are formulas, an option (-rf) and one holding a '+'.
    s8 = inbound_entry(exchange, names["s8_ok"]).name.split("+")
    later = datetime.strptime(s8[2], "%Y-%m-%d %H:%M:%S.%f %Z") + timedelta(minutes=1)
    stamp = f"{later:%Y-%m-%d %H:%M:%S.%f} UTC"
    forged = [names["s8_ok"], FORMULA] if not single else list(INBOUND_UNSAFE)
    maker = names["eve"] if not single else names["s8_ok"]
    people.python(
        maker,
        f"""
import os, shutil
for i, student in enumerate({forged!r}):
    d = os.path.join({str(inbound)!r}, student + '+{A}+{stamp}+' + 'abcd'[i])
    os.mkdir(d)
    shutil.copy({str(outbound / f"{A}.ipynb")!r}, d)
    open(d + '/timestamp.txt', 'w').write({stamp!r})
if {not single!r}:
    shutil.copytree({str(outbound)!r}, {A!r})
""",
    )
    if not single:  # and eve runs nbgrader submit under s8_ok's name, with the untouched release
        people.nbgrader(names["eve"], "submit", A, f"--student={names['s8_ok']}")
    first = collect(course, exchange)
    second = ""
    if single:
        # The instructor grades alice's first version by hand: half a point on test_div (stale).
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            gb.add_submission(A, names["alice"])
            grade = gb.find_grade("test_div", A, A, names["alice"])
            grade.manual_score = 0.5
            gb.db.commit()
        hand_in("alice", solution)  # the corrected resubmission
        # The due date is now: lily submits a few seconds late (one started day: -10%) ...
        due = datetime.now(UTC)
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            gb.update_or_create_assignment(A, duedate=due.replace(tzinfo=None))
        time.sleep(1.5)
        hand_in("lily", solution)
        hand_in("kim", solution)  # late too: graded by hand later, then given an extension
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
e, r, t = {str(entry)!r}, {str(renamed)!r}, {early.timestamp()!r}
open(e + '/timestamp.txt', 'w').write({early.strftime("%Y-%m-%d %H:%M:%S.%f UTC")!r})
for n in os.listdir(e):
    os.utime(e + '/' + n, (t, t))
os.rename(e, r)
os.utime(r, (t, t))
""",
        )
        second = collect(course, exchange)
        # Submissions copied into submitted/ by hand (the README allows it) under unsafe ids.
        for student in HAND_COPIED_UNSAFE:
            folder = course / "submitted" / student / A
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(solution, folder / f"{A}.ipynb")

    mark("submitted and collected")
    cmd = [sys.executable, "-m", "torchlight_grader.course.grade", "--course", str(course),
           "--jobs", "1", "--assignment", A, "--", *FLAGS]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    logs = "".join(p.read_text(errors="replace") for p in (course / "logs").glob("*.log"))
    graded = proc.stdout + proc.stderr + logs
    # one failure only where an unsafe id was copied in by hand: that student's, listed
    assert proc.returncode == (1 if single else 0), f"grading:\n{graded[-6000:]}"
    mark("graded")
    # A page the gradebook does not know, next to an honest student's feedback.
    (course / "feedback" / names["s8_ok"] / A / "grades.html").write_text("SECRET-GRADEBOOK")
    if OLD_WAY:
        nbgrader(course, "release_feedback", A, f"--Exchange.root={exchange}")
    else:
        _run(["make", "-s", "-C", str(ROOT), "course-feedback-release", f"COURSE={course}",
              f"EXCHANGE={exchange}", f"ASSIGNMENT={A}"], ROOT)  # fmt: skip
    for who, sid in names.items():
        if who in ("s8_ok", "mallory", "bob"):  # the pages the tests read
            people.nbgrader(sid, "fetch_feedback", A, f"--student={sid}")
    mark("feedback fetched")
    after = manual_grade_and_extension(course, exchange, people, cmd) if single else {}
    mark("kim's manual grade and extension")
    print(first, second, sep="\n")
    points = sum(max_points(source).values())
    return Term(course, exchange, {k: people.homes[v] for k, v in names.items()}, points,
                first + second, graded, deployment, after)  # fmt: skip


def make(target: str, course: Path, exchange: Path, *args: str) -> str:
    return _run(["make", "-s", "-C", str(ROOT), target, f"COURSE={course}",
                 f"EXCHANGE={exchange}", f"ASSIGNMENT={A}", *args], ROOT)  # fmt: skip


def manual_grade_and_extension(course: Path, exchange: Path, people: Students,
                               grade_cmd: list[str]) -> dict[str, str]:  # fmt: skip
    """kim (late: -10%) is graded by hand after autograde, as the Formgrader saves it (issue 40,
    items 1, 2 and 7): test_div overridden to 0.25, then ``make course-grade`` with nothing to
    regrade; then extra credit and a comment, ``make course-feedback-release`` and kim's
    ``fetch_feedback``; then a one-day extension (``make course-extensions``), collect,
    export, release and fetch again. Returns each step's page, exports and output."""
    from nbgrader.api import Gradebook

    db = f"sqlite:///{course / 'gradebook.db'}"
    page = course / "feedback" / "kim" / A / f"{A}.html"
    home = people.homes["kim"]
    out = {"page autograded": page.read_text()}
    with Gradebook(db) as gb:
        gb.find_grade("test_div", A, A, "kim").manual_score = 0.25
        gb.db.commit()
    proc = subprocess.run(grade_cmd, capture_output=True, text=True, timeout=600)
    out["grade again"] = proc.stdout + proc.stderr
    out["page after course-grade"] = page.read_text()
    out["canvas after course-grade"] = (course / "canvas.csv").read_text()
    with Gradebook(db) as gb:
        gb.find_grade("test_mul", A, A, "kim").extra_credit = 1.0
        nb = gb.find_submission_notebook(A, A, "kim")
        comment = sorted(nb.comments, key=lambda c: c.name)[0]
        comment.manual_comment = "KIM-COMMENT: see the note on the chain rule"
        out["commented cell"] = comment.name
        gb.db.commit()
    make("course-export", course, exchange)
    out["canvas after course-export"] = (course / "canvas.csv").read_text()
    out["release"] = make("course-feedback-release", course, exchange)
    people.nbgrader("kim", "fetch_feedback", A, "--student=kim")
    out["fetched"] = "".join(p.read_text() for p in (home / A / "feedback").rglob("*.html"))
    # A one-day extension for kim: on time now.
    extensions = course.parent / "extensions.csv"
    extensions.write_text("student_id,assignment,extension\nkim,a1_functions,1 day\n")
    out["bad extensions"] = _run(
        ["make", "-s", "-C", str(ROOT), "course-extensions", f"COURSE={course}",
         f"EXTENSIONS={course.parent / 'missing.csv'}"], ROOT, check=False)  # fmt: skip
    out["extensions"] = make("course-extensions", course, exchange, f"EXTENSIONS={extensions}")
    out["collect with extension"] = collect(course, exchange)
    make("course-export", course, exchange)
    out["canvas with extension"] = (course / "canvas.csv").read_text()
    out["grades with extension"] = (course / "grades.csv").read_text()
    out["release with extension"] = make("course-feedback-release", course, exchange)
    for old in (home / A / "feedback").rglob("*.html"):
        old.unlink()
    people.nbgrader("kim", "fetch_feedback", A, "--student=kim")
    out["fetched with extension"] = "".join(
        p.read_text() for p in (home / A / "feedback").rglob("*.html")
    )
    _run(["make", "-s", "-C", str(ROOT), "course-report", f"COURSE={course}"], ROOT)
    out["report"] = (course / "report.html").read_text()
    return out


def sid(term: Term, who: str) -> str:
    return PREFIX[term.deployment] + who


def grades(term: Term) -> dict[str, dict[str, str]]:
    with open(term.course / "grades.csv", newline="", encoding="utf-8") as f:
        return {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == A}


def fetched(term: Term, who: str) -> str:
    return "".join(
        p.read_text(errors="replace") for p in (term.homes[who] / A / "feedback").rglob("*.html")
    )


def report(term: Term) -> list[dict[str, str]]:
    with open(term.course / "collect" / f"{A}-report.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


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


def test_honest_students_keep_their_grades(term: Term) -> None:
    table = grades(term)
    assert float(table[sid(term, "s8_ok")]["score"]) == term.points
    nb = nbformat.read(term.course / "submitted" / sid(term, "s8_ok") / A / f"{A}.ipynb", 4)
    answers = [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert all("NotImplementedError" not in s for s in answers), "s8_ok's submission was replaced"


def test_a_folder_named_after_a_classmate_is_refused(accounts: Term) -> None:
    """eve (her own OS user) puts a folder named after s8_ok, newer than s8_ok's, into inbound:
    refused by the owner check, with a report line; s8_ok keeps the honest grade."""
    assert "one OS account per student" in accounts.collect_out
    s8 = sid(accounts, "s8_ok")
    rows = [r for r in report(accounts) if r["student"] == s8]
    # the folder eve made by hand, and the one `nbgrader submit --student=tlxs8_ok` made for her
    assert sorted(r["verdict"] for r in rows) == ["collected", "refused", "refused"], rows
    for refused in (r for r in rows if r["verdict"] == "refused"):
        assert "owned by uid" in refused["detail"] and sid(accounts, "eve") in refused["detail"]
        assert "a folder may only be submitted by the student it names" in refused["detail"]
    assert float(grades(accounts)[s8]["score"]) == accounts.points
    assert "outside the course's safe alphabet" in accounts.collect_out  # eve's formula folder


def test_backdating_does_not_cancel_the_late_penalty(single: Term) -> None:
    lily = grades(single)["lily"]
    assert float(lily["raw_score"]) == single.points
    assert float(lily["late_submission_penalty"]) == pytest.approx(0.1 * single.points)
    stamp = (single.course / "submitted" / "lily" / A / "timestamp.txt").read_text()
    assert datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f %Z").year == datetime.now().year


def test_resubmission_latest_wins_and_the_stale_manual_score_is_reported(single: Term) -> None:
    alice = grades(single)["alice"]
    assert float(alice["score"]) == single.points, alice  # the corrected version, no old 1.0
    stale = single.course / "collect" / f"{A}-stale-manual.csv"
    assert stale.exists(), "no report of the stale manual score"
    rows = list(csv.DictReader(stale.open()))
    assert [(r["student"], r["cell"], r["old_manual_score"]) for r in rows] == [
        ("alice", "test_div", "0.5")
    ]
    assert "STALE manual score 0.5 of alice" in single.collect_out


def test_huge_notebooks_are_refused_at_collect_with_a_message(single: Term) -> None:
    """A 50 MB comment cell, 10^5 cells, JSON nested 10^5 deep (each through nbgrader submit):
    each refused at collect with a report line naming the limit, and a page for bob saying why;
    nothing of bob's reaches grading."""
    assert not (single.course / "submitted" / "bob").exists()
    rows = [r for r in report(single) if r["student"] == "bob"]
    assert [r["verdict"] for r in rows] == ["refused"] * 3, rows
    why = (f"more than the limit of {LIMITS['file_bytes']} bytes per file",
           f"100000 cells, more than the limit of {LIMITS['cells']}",
           f"JSON nested deeper than {LIMITS['json_depth']} levels")  # fmt: skip
    page = fetched(single, "bob")
    for reason in why:
        assert sum(reason in r["detail"] for r in rows) == 1, (reason, rows)
        assert reason in single.collect_out
        assert reason in page, f"bob is not told: {reason}"
    assert page.count("was refused") == 3


def test_unsafe_student_ids_are_refused_at_collect_and_autograde(single: Term) -> None:
    for student in INBOUND_UNSAFE:  # in inbound folder names: refused at collect
        assert not (single.course / "submitted" / student).exists(), student
        assert f"student id {student!r} is outside the course's safe alphabet" in single.collect_out
    for student in HAND_COPIED_UNSAFE:  # copied into submitted/ by hand: refused at autograde
        assert f"student id {student!r} is outside the course's safe alphabet" in single.grade_out
        assert not (single.course / "autograded" / student).exists(), student
        assert not (single.course / "feedback" / student).exists(), student


def test_exports_carry_no_formula_cells(single: Term) -> None:
    """Roster ids a/b, +1+1, -2+3, @SUM(A1) and the hand-copied formula and -x: no cell of
    canvas.csv, grades.csv or items.csv starts with = + - @, tab or CR; honest rows intact."""
    seen = set()
    for name in ("grades.csv", "items.csv", "canvas.csv"):
        with open(single.course / name, newline="", encoding="utf-8") as f:
            cells = [c for row in csv.reader(f) for c in row]
        unsafe = [c for c in cells if c.startswith(FORMULA_START)]
        assert unsafe == [], f"{name}: cells a spreadsheet would run as formulas: {unsafe}"
        seen |= set(cells)
    assert {"'+1+1", "'-2+3", "'@SUM(A1)", "a/b"} <= seen
    assert float(grades(single)["s8_ok"]["score"]) == single.points


@pytest.mark.parametrize("text, why", [
    ('{"cells": [' + ",".join(['{"cell_type": "raw", "source": ""}'] * 3000) + "]}", "3000 cells"),
    ('{"cells": [], "metadata": ' + "[" * 5000 + "]" * 5000 + "}", "nested deeper"),
])  # fmt: skip
def test_cell_count_and_json_depth_limits(text: str, why: str) -> None:
    with pytest.raises(RefusedError, match=why):
        check_notebook("n.ipynb", text.encode(), LIMITS)


@pytest.mark.parametrize("make, why", [
    (lambda nb: nb.cells.append(nbformat.v4.new_markdown_cell("x" * (9 * 1024**2))), "bytes"),
    (lambda nb: nb.cells.extend(nbformat.v4.new_raw_cell("") for _ in range(2500)), "2501 cells"),
])  # fmt: skip
def test_a_notebook_copied_in_by_hand_meets_collects_limits_at_autograde(
    tmp_path: Path, make: object, why: str
) -> None:
    """Issue 39 item 5: a notebook put into submitted/ by hand (or from an LMS download) skipped
    collect's checks, and every later step (sanitize, send, render) read all of it. Autograde's
    first step applies the same limits, whatever way the notebook came."""
    from torchlight_grader.nbgrader.hostile import CheckSubmission

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    make(nb)  # type: ignore[operator]
    nbformat.write(nb, tmp_path / "a1_functions.ipynb")
    read = nbformat.read(tmp_path / "a1_functions.ipynb", as_version=4)
    resources = {"metadata": {"path": str(tmp_path)}, "unique_key": "a1_functions",
                 "nbgrader": {"student": "bob"}}  # fmt: skip
    out, _ = CheckSubmission().preprocess(read, resources)
    refused = out.metadata["torchlight"]["refused"]
    assert len(refused) == 1 and why in refused[0] and "not graded" in refused[0], refused
    assert [c.cell_type for c in out.cells] == ["markdown"], "the over-limit cells were kept"
    small = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nbformat.write(small, tmp_path / "a1_functions.ipynb")
    out, _ = CheckSubmission().preprocess(
        nbformat.read(tmp_path / "a1_functions.ipynb", 4), resources
    )
    assert out.metadata["torchlight"]["refused"] == [] and len(out.cells) == 1


def _page_score(page: str) -> float:
    """The score in the heading of a feedback page (``(Score: 9.9 / 11)``)."""
    found = re.search(r"<h4>[^<]*\(Score: (?:<span class=\"score\">)?([0-9.]+)", page)
    assert found, page[:2000]
    return float(found[1])


def _canvas_score(text: str, student: str) -> float:
    row = next(r for r in csv.reader(text.splitlines()) if len(r) > 2 and r[2] == student)
    return float(row[5])


def test_manual_grades_and_comments_reach_the_students_page(single: Term) -> None:
    """Issue 40, items 1 and 2: after kim (late, -10%) is graded by hand, the page course-grade
    leaves and the page kim fetches show exactly canvas.csv's score, with the TA's comment, and
    the late penalty is 10% of the current score (no full regrade ran)."""
    after = single.after
    total = single.points
    autograded = _page_score(after["page autograded"])
    assert autograded == pytest.approx(0.9 * total)
    # test_div (1 point) overridden to 0.25: raw total - 0.75, the penalty 10% of that
    raw = total - 0.75
    assert "1 submission(s) whose page no longer shows the gradebook" in after["grade again"]
    page = _page_score(after["page after course-grade"])
    canvas = _canvas_score(after["canvas after course-grade"], "kim")
    print(f"kim after the manual grade: page {page} (was {autograded}), canvas {canvas}")
    assert page == canvas == pytest.approx(0.9 * raw)
    # + 1 extra credit and a comment: make course-export, make course-feedback-release, fetch
    raw += 1.0
    canvas = _canvas_score(after["canvas after course-export"], "kim")
    fetched_page = after["fetched"]
    print(f"kim after extra credit: fetched page {_page_score(fetched_page)}, canvas {canvas}")
    assert _page_score(fetched_page) == canvas == pytest.approx(0.9 * raw)
    assert "KIM-COMMENT: see the note on the chain rule" in fetched_page
    assert "released kim" in after["release"]


def test_an_extension_applies_at_collect_in_the_penalty_and_on_the_page(single: Term) -> None:
    """Issue 40, item 7: a one-day extension for kim: collect says she was on time against her
    own due date, the exports drop her penalty, her page says so; a bad file imports nothing."""
    after = single.after
    raw = single.points - 0.75 + 1.0
    assert (
        "course-extensions" in after["bad extensions"] and "missing.csv" in after["bad extensions"]
    )
    assert "extension: kim a1_functions +1 day" in after["extensions"]
    line = next(x for x in after["collect with extension"].splitlines() if x.startswith(
        ("unchanged kim", "collected kim")))  # fmt: skip
    assert "extended by 1 day to" in line and line.endswith(": on time)"), line
    lily = next(x for x in after["collect with extension"].splitlines() if " lily " in x)
    assert lily.endswith(": 1 started day(s) late)"), lily  # no extension: late as before
    assert _canvas_score(after["canvas with extension"], "kim") == pytest.approx(raw)
    kim = next(r for r in csv.DictReader(after["grades with extension"].splitlines())
               if r["student_id"] == "kim")  # fmt: skip
    assert float(kim["late_submission_penalty"]) == 0 and float(kim["score"]) == raw
    page = after["fetched with extension"]
    assert _page_score(page) == pytest.approx(raw)
    assert "extended for you to" in page


def test_the_report_names_who_is_missing_late_refused_or_extended(single: Term) -> None:
    """Issue 40, items 5 and 7: under the assignment, the report names the students behind each
    count: lily late (kim no longer, with her extension), kim's extension, mallory and bob refused
    at collect, and the roster's students who handed nothing in."""
    page = single.after["report"]

    def named(kind: str) -> str:
        return page.split(f'data-kind="{kind}">')[1].split("</p>")[0]

    assert "lily" in named("late") and "kim" not in named("late")
    assert "kim (+1 day)" in named("extension")
    assert "mallory" in named("refused") and "bob" in named("refused")
    assert "s8_ok" not in named("missing") and "mallory" in named("missing")
