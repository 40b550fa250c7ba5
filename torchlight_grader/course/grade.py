"""Grade a course's submissions with several nbgrader processes at once (``make course-grade``).

nbgrader grades one notebook after another in one process. This tool starts ``--jobs`` worker
processes (``torchlight_grader/course/batch.py``: nbgrader commands run in-process, so each worker pays
nbgrader's start-up once), hands each free worker the next student (``nbgrader autograde A
--student=ID`` then ``nbgrader generate_feedback A --student=ID`` for each of the student's
assignments to grade), and runs the exports once, after every student is done::

    .venv/bin/python torchlight_grader/course/grade.py --jobs 4                    # every assignment
    .venv/bin/python torchlight_grader/course/grade.py --jobs 4 --assignment a1_functions
    .venv/bin/python torchlight_grader/course/grade.py --db-url postgresql+psycopg2://...  --jobs 8
    .venv/bin/python torchlight_grader/course/grade.py --full                      # regrade everything

**Incremental.** Only what is new or changed is graded: each submission
(``submitted/<student>/<assignment>/``) is keyed by a SHA-256 of its files, the release (the
assignment's ``source/`` files, its source cells, points and due date in the gradebook) and the
grader of that assignment (the sources of torchlight, torchlight_grader and nbgrader without the
other assignments' own checks modules, so a fix to one assignment's hidden checks regrades that
assignment only; ``nbgrader_config.py``, the extra autograde options and the gradebook URL).
``graded.json`` in the course holds the key of every submission graded with success. A run first
removes from it every submission it is about to grade (written atomically, before any worker
starts) and adds each back only when its autograde and generate_feedback both succeeded, so a
crash, a kill or a power cut mid-run never leaves a submission marked graded that was not: the
next run grades it. A submission is also graded again when the gradebook has no submission row
for it (a new or reset gradebook) or its ``autograded/`` or ``feedback/`` folder is gone.
``--full`` (``make course-grade FULL=1``) ignores the keys and regrades everything. The run says
what it skips, e.g. ``35 submissions: 34 unchanged (skipped), 1 changed: s7/a2_broadcasting``;
the exports always cover everyone.

**Progress.** One line per student done: ``[12/35] s7: ok (a2_broadcasting) 43 s, ETA 1 min``;
each failure the moment it happens, one line naming the student, the notebook and the cause
(``FAILED s7 a2_broadcasting/a2_broadcasting.ipynb: NotJSONError: ...``; the full output is in
``logs/<student>.log``); a summary at the end. The student gets a feedback page for a notebook
that could not be graded, saying what went wrong (``feedback/<s>/<a>/<nb>.html``, released by
``make course-feedback-release`` like any other page).

**Faults.** Ctrl-C (SIGINT) or SIGTERM: the workers and their sandboxes are killed at once
(each worker leads its own process group), the summary says what was graded and kept and what
was not, no traceback; exit status 130 / 143. The gradebook database stopping mid-run (or not
answering at the start): one message naming the database and the cause, the rest of the class
is not attempted, exit status 1. In both cases a rerun grades only what is left (incremental).

Why the grades are exactly a serial run's: a student's grades depend only on their own
submission and on the instructor's rows of the gradebook (source cells, points), which grading
only reads. Each worker writes only its own students' rows (student, submission, grades,
comments) and their ``autograded/<student>`` and ``feedback/<student>`` folders, so no two
workers touch the same row or file. The exports (one worker, after the pool) read the finished
gradebook, as they do after a serial run.

What is serialized, and how:

- **sqlite** allows one writer at a time. Every gradebook write of nbgrader is a short
  transaction (create the submission, save a notebook's grades); the long part, running the
  notebook and the hidden checks, holds no lock. The course's ``nbgrader_config.py`` opens the
  sqlite file with ``?timeout=600``, so a writer that finds the file locked waits for sqlite's own
  lock instead of failing with "database is locked": the writes are serialized by sqlite, the
  grading runs concurrently. A student whose run still failed with a lock error is graded again,
  alone, after the pool (reported as a retry).
- **PostgreSQL** (``--db-url`` / ``COURSE_DB_URL``) takes concurrent writers natively: nothing is
  serialized except row locks on different rows, which never wait on each other.
- The gradebook's schema and the assignments exist before the pool starts (``nbgrader
  generate_assignment`` made them); the tool checks that once, before the pool, and stops with a
  message when they are missing.

As in ``torchlight_grader/course/manage.py grade``, the gradebook is snapshotted before grading and compared after
every worker is done: a change to source cells, checksums, points or manual scores that the
grader did not make fails loudly; ``integrity.csv`` lists per student what the grader found.

One student's failure costs that student only: the pool goes on, the exports run for everyone,
and the tool lists the failed students and exits 1 at the end.

``--jobs 1`` when every submission is to be graded runs nbgrader's own serial pipeline in one
worker (``autograde "*"`` over all students at once, ``generate_feedback "*"``, the exports; no
per-student progress), the reference the parallel run is compared against in
``tests/test_course_scale.py``; an incremental ``--jobs 1`` run is the pool with one worker.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import queue
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from fnmatch import fnmatch
from pathlib import Path
from types import FrameType

from torchlight_grader.course.batch import Run, Worker
from torchlight_grader.course.dask import Workers
from torchlight_grader.course.manage import gradebook_changes, gradebook_snapshot, integrity_report
from torchlight_grader.course.pages import environment
from torchlight_grader.course.pages import refresh as refresh_pages
from torchlight_grader.nbgrader.courselock import CourseBusyError, course_lock
from torchlight_grader.nbgrader.releases import record as record_release

ROOT = Path(__file__).resolve().parents[2]

EXPORTER = (
    "torchlight_grader.nbgrader.exports.CourseExportPlugin"  # grades.csv, items.csv, canvas.csv
)
EXPORT = ("export", f"--exporter={EXPORTER}", "--to=.")
LOCKED = "database is locked"
STATE = "graded.json"  # in the course directory: the key of every submission graded with success
NBGRADER_FAILED = re.compile(
    r"There was an error processing assignment '([^']*)' for student '([^']*)'"
)
#: The last line of a Python exception in nbgrader's output: ``NotJSONError: Notebook does not...``.
EXCEPTION_LINE = re.compile(r"^\s*(?:[\w.]+\.)?([A-Z]\w*(?:Error|Exception|Exit)): ?(.*)$", re.M)
#: The notebook nbgrader was working on (its log lines name ``.../<assignment>/<nb>.ipynb``).
NOTEBOOK_LINE = re.compile(r"([^/\s\"']+/[^/\s\"']+\.ipynb)")
#: The gradebook database is gone (stopped, unreachable), as opposed to a student's failure.
DB_DOWN = re.compile(
    r"could not connect to server|connection to server .{0,200}? failed|server closed the "
    r"connection unexpectedly|terminating connection due to administrator command|"
    r"Connection refused|the database system is (?:shutting down|starting up)|"
    r"SSL connection has been closed unexpectedly|no connection to the server"
)

Unit = tuple[str, str]  # (student, assignment): one submitted/<student>/<assignment>/ folder


class StoppedError(Exception):
    """The run stopped early; ``counts``: students done, students to grade, skipped."""

    counts = (0, 0, 0)


class SignalledError(StoppedError):
    """SIGINT or SIGTERM arrived; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class DatabaseDownError(StoppedError):
    """The gradebook database stopped answering; the message says which and why."""


# ------------------------------------------------------------------------------ what to grade
def units_of(course: Path, assignment: str) -> list[Unit]:
    """Every ``(student, assignment)`` with a submitted folder matching the pattern."""
    submitted = course / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(
        (s.name, a.name)
        for s in submitted.iterdir()
        if s.is_dir()
        for a in s.iterdir()
        if a.is_dir() and fnmatch(a.name, assignment)
    )


def students_of(course: Path, assignment: str) -> list[str]:
    """Students with a submitted folder for an assignment matching the pattern ``assignment``."""
    return sorted({s for s, _ in units_of(course, assignment)})


def _hash_tree(h: hashlib._Hash, folder: Path) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            h.update(str(path.relative_to(folder)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())


def grader_keys(
    course: Path, assignments: Sequence[str], extra: Sequence[str], db_url: str | None
) -> dict[str, str]:
    """The grader of each assignment: the sources that decide its grades (its own checks
    module, none of the other assignments'), the course config, the options, the DB."""
    from torchlight_grader.course.dask import grader_digests

    keys = {}
    for assignment, digest in grader_digests(assignments).items():
        h = hashlib.sha256(digest.encode())
        h.update((course / "nbgrader_config.py").read_bytes())
        h.update(json.dumps([list(extra), db_url or f"sqlite {course / 'gradebook.db'}"]).encode())
        keys[assignment] = h.hexdigest()
    return keys


def release_key(course: Path, assignment: str, snapshot: dict, duedates: dict) -> str:
    """The release: ``source/<assignment>/`` and its cells, points and due date in the gradebook."""
    h = hashlib.sha256(assignment.encode())
    if (course / "source" / assignment).is_dir():
        _hash_tree(h, course / "source" / assignment)
    mine = sorted((repr(k), repr(v)) for k, v in snapshot.items()
                  if k[0] in ("source cell", "points") and k[1] == assignment)  # fmt: skip
    h.update(json.dumps([mine, str(duedates.get(assignment))]).encode())
    return h.hexdigest()


def unit_key(course: Path, unit: Unit, releases: dict[str, str], graders: dict[str, str]) -> str:
    student, assignment = unit
    h = hashlib.sha256(
        f"{student}/{assignment}\0{releases[assignment]}\0{graders[assignment]}\0".encode()
    )
    _hash_tree(h, course / "submitted" / student / assignment)
    return h.hexdigest()


def gradebook_facts(db: str) -> tuple[dict[str, object], set[Unit]]:
    """The due date of each assignment and every ``(student, assignment)`` with a submission."""
    from nbgrader.api import Gradebook

    with Gradebook(db) as gb:
        duedates = {a.name: a.duedate for a in gb.assignments}
        rows = {(s.student.id, a.name) for a in gb.assignments for s in a.submissions}
    return duedates, rows


class State:
    """``graded.json``: unit -> key of its last successful grading, written atomically."""

    def __init__(self, course: Path) -> None:
        self.path = course / STATE
        self.lock = threading.Lock()
        try:
            data = json.loads(self.path.read_text())
            self.keys: dict[str, str] = dict(data.get("graded", {}))
        except (OSError, ValueError, AttributeError):
            self.keys = {}

    def _write(self) -> None:
        tmp = self.path.with_name(f".{STATE}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "graded": dict(sorted(self.keys.items()))}, f, indent=0)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def forget(self, units: Sequence[Unit], keep: set[str] | None = None) -> None:
        with self.lock:
            for s, a in units:
                self.keys.pop(f"{s}/{a}", None)
            if keep is not None:
                self.keys = {k: v for k, v in self.keys.items() if k in keep}
            self._write()

    def graded(self, unit: Unit, key: str) -> None:
        with self.lock:
            self.keys[f"{unit[0]}/{unit[1]}"] = key
            self._write()


def plan(
    course: Path, units: Sequence[Unit], keys: dict[Unit, str], state: State, rows: set[Unit],
    full: bool,
) -> tuple[list[Unit], str]:  # fmt: skip
    """The units to grade, and the line saying what is skipped and why the rest is graded."""
    new, changed, redo = [], [], []
    for unit in units:
        old = state.keys.get(f"{unit[0]}/{unit[1]}")
        s, a = unit
        if full:
            redo.append(unit)
        elif old is None:
            new.append(unit)
        elif old != keys[unit]:
            changed.append(unit)
        elif unit not in rows or not all(
            (course / d / s / a).is_dir() for d in ("autograded", "feedback")
        ):
            redo.append(unit)
    todo = sorted({*new, *changed, *redo})

    def names(us: list[Unit]) -> str:
        shown = ", ".join(f"{s}/{a}" for s, a in us[:10])
        return shown + (f", ... ({len(us) - 10} more)" if len(us) > 10 else "")

    parts = [f"{len(units) - len(todo)} unchanged (skipped)"]
    if full:
        parts = [f"all {len(todo)} regraded (--full)"]
    else:
        parts += [f"{len(g)} {what}: {names(g)}" for g, what in
                  ((new, "new or not graded yet"), (changed, "changed"), (redo, "not in the gradebook/outputs"))
                  if g]  # fmt: skip
    return todo, f"{len(units)} submissions: " + ", ".join(parts)


# ------------------------------------------------------------------------------ failures
def cause_of(output: str) -> str:
    """One line saying why an nbgrader run failed: its last exception (``NotJSONError: ...``),
    else its last ERROR line, else its last non-empty line."""
    found = EXCEPTION_LINE.findall(output)
    if found:
        name, message = found[-1]
        message = " ".join(message.split())
        return f"{name}: {message[:300]}" if message else name
    errors = [line for line in output.splitlines() if "ERROR" in line and line.strip()]
    lines = errors or [line for line in output.splitlines() if line.strip()]
    return " ".join(lines[-1].split())[:300] if lines else "(no output)"


def notebook_of(output: str, assignment: str) -> str:
    """The ``assignment/notebook.ipynb`` nbgrader last named in ``output``, else the assignment."""
    found = [m for m in NOTEBOOK_LINE.findall(output) if m.startswith(f"{assignment}/")]
    return found[-1] if found else assignment


def db_down(runs: Sequence[Run]) -> str | None:
    """The cause, when ``runs`` failed because the gradebook database is gone."""
    for r in runs:
        if r.returncode != 0 and DB_DOWN.search(r.output):
            return cause_of(r.output)
    return None


def failure_page(student: str, assignment: str, notebook: str, cause: str) -> str:
    """The feedback page of a notebook that could not be graded (marked so: never regenerated
    from the gradebook, ``torchlight_grader.nbgrader.standing``)."""
    from torchlight_grader.nbgrader.standing import NOT_GRADED, STATE_META

    e = html.escape
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f'<meta name="{STATE_META}" content="{NOT_GRADED}"><title>'
        f"{e(assignment)}: not graded</title></head><body>\n"
        f"<h1>{e(notebook)}: your submission could not be graded</h1>\n"
        f"<p>The grader stopped on your notebook <code>{e(notebook)}</code> of "
        f"<code>{e(assignment)}</code> with this error:</p>\n<pre>{e(cause)}</pre>\n"
        "<p>No points were given for it. The usual cause is a notebook file that is no longer "
        "a valid notebook (edited outside Jupyter, truncated, or another file renamed to "
        "<code>.ipynb</code>). Open it in Jupyter to check it, fetch the assignment again if it "
        "does not open, and submit again: the latest submission is graded.</p>\n</body></html>\n"
    )


def write_failure_pages(course: Path, unit: Unit, runs: Sequence[Run], since: float) -> None:
    """For each notebook of a failed submission without a page from this run: the failure page.
    A student id outside the safe alphabet gets none (autograde refused it: its name is the
    attack, and a folder named after it would reach the exports and the exchange)."""
    from torchlight_grader.nbgrader.ids import is_safe_student_id

    student, assignment = unit
    if not is_safe_student_id(student):
        return
    cause = cause_of(next(r.output for r in runs if r.returncode != 0))
    folder = course / "feedback" / student / assignment
    for nb in sorted((course / "submitted" / student / assignment).glob("*.ipynb")):
        page = folder / f"{nb.stem}.html"
        if page.is_file() and page.stat().st_mtime >= since:
            continue  # generate_feedback wrote it in this run
        folder.mkdir(parents=True, exist_ok=True)
        page.write_text(failure_page(student, assignment, nb.name, cause), encoding="utf-8")


# ------------------------------------------------------------------------------ running
def unit_job(unit: Unit, extra: Sequence[str]) -> list[list[str]]:
    """autograde, then generate_feedback, for one student's one assignment."""
    student, assignment = unit
    who = f"--student={student}"
    return [
        ["autograde", assignment, who, "--force", *extra],
        ["generate_feedback", assignment, who, "--force"],
    ]


def student_job(student: str, assignment: str, extra: Sequence[str]) -> list[list[str]]:
    """autograde, then generate_feedback, for one student (``assignment``: a pattern)."""
    return unit_job((student, assignment), extra)


def notebooks_of(course: Path, students: Sequence[str], assignment: str) -> int:
    """How many notebooks ``students`` handed in for assignments matching ``assignment``."""
    return sum(
        1
        for student in students
        for folder in (course / "submitted" / student).glob(assignment)
        for nb in folder.glob("*.ipynb")
        if nb.is_file()
    )


def serial_job(assignment: str, extra: Sequence[str]) -> list[list[str]]:
    """nbgrader's own pipeline: each step once, over every student, then the exports."""
    return [
        ["autograde", assignment, "--force", *extra],
        ["generate_feedback", assignment, "--force"],
        list(EXPORT),
    ]


def by_student(units: Sequence[Unit]) -> dict[str, list[Unit]]:
    out: dict[str, list[Unit]] = {}
    for unit in units:
        out.setdefault(unit[0], []).append(unit)
    return out


def split_runs(units: Sequence[Unit], runs: Sequence[Run]) -> Iterator[tuple[Unit, list[Run]]]:
    """Each unit of a student's job with its two runs."""
    for i, unit in enumerate(units):
        yield unit, list(runs[2 * i : 2 * i + 2])


class Progress:
    """Students done / total, the ETA, and each failure the moment it happens (one line each)."""

    def __init__(
        self, total: int, log_dir: Path, state: State | None = None,
        keys: dict[Unit, str] | None = None,
    ) -> None:  # fmt: skip
        self.total, self.done, self.start = total, 0, time.perf_counter()
        self.log_dir, self.state, self.keys = log_dir, state, keys or {}
        self.lock = threading.Lock()
        self.db_cause: str | None = None

    def finished(self, student: str, units: Sequence[Unit], runs: Sequence[Run]) -> None:
        with self.lock:
            self.done += 1
            elapsed = time.perf_counter() - self.start
            eta = elapsed / self.done * (self.total - self.done)
            names = ", ".join(a for _, a in units)
            bad = [(u, rs) for u, rs in split_runs(units, runs)
                   if any(r.returncode != 0 for r in rs)]  # fmt: skip
            for unit, rs in split_runs(units, runs):  # kept at once: a later crash keeps it
                if self.state is not None and rs and all(r.returncode == 0 for r in rs):
                    self.state.graded(unit, self.keys[unit])
            cause = db_down(runs)
            if cause is not None:
                self.done -= 1  # not graded
                self.db_cause = self.db_cause or cause
                return  # one message for the whole class, at the end
            locked = any(LOCKED in r.output for r in runs if r.returncode != 0)
            verdict = "ok" if not bad else f"FAILED ({len(bad)} of {len(units)})"
            if locked:
                verdict, bad = "sqlite stayed locked: graded again after the pool", []
            print(f"[{self.done}/{self.total}] {student}: {verdict} ({names}) "
                  f"{_duration(elapsed)}, ETA {_duration(eta)}", flush=True)  # fmt: skip
            for (s, a), rs in bad:
                failed = next(r for r in rs if r.returncode != 0)
                print(f"FAILED {s} {notebook_of(failed.output, a)}: {cause_of(failed.output)} "
                      f"(log: {self.log_dir / s}.log)", file=sys.stderr, flush=True)  # fmt: skip


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def pool(
    workers: Sequence[Worker],
    jobs: dict[str, list[Unit]],
    extra: Sequence[str],
    progress: Progress,
    stop: threading.Event,
) -> dict[str, list[Run]]:
    """Every student's units graded by the first free worker, one student at a time (so a slow,
    hostile notebook holds up only its own worker); the runs of each student. Stops handing
    out students when ``stop`` is set (interrupted, or the database is gone)."""
    todo: queue.Queue[str] = queue.Queue()
    for student in jobs:
        todo.put(student)
    done: dict[str, list[Run]] = {}

    def work(worker: Worker) -> None:
        while not stop.is_set():
            try:
                student = todo.get_nowait()
            except queue.Empty:
                return
            # Will this worker get another student? Surely when each other worker can take one
            # and one is still left: then a sandbox started ahead after the last notebook is used.
            more = todo.qsize() >= len(workers)
            units = jobs[student]
            commands = [c for u in units for c in unit_job(u, extra)]
            notebooks = sum(notebooks_of(worker.course, [student], a) for _, a in units) + more
            runs = worker.do(commands, notebooks)
            if stop.is_set():
                return  # killed under it: not a result
            done[student] = runs
            progress.finished(student, units, runs)
            if progress.db_cause is not None:
                stop.set()

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done


def cluster_pool(
    cluster: str,
    course: Path,
    jobs: dict[str, list[Unit]],
    extra: Sequence[str],
    db_url: str | None,
    n_local: int,
    progress: Progress,
    seen: Workers | None = None,
) -> dict[str, list[Run]]:
    """``pool`` on a Dask cluster (``torchlight_grader.course.dask``): the same job per student
    (``seen``: filled with the workers that took part and those lost)."""
    from torchlight_grader.course.dask import pool as dask_pool

    todo = {s: ([c for u in units for c in unit_job(u, extra)],
                sum(notebooks_of(course, [s], a) for _, a in units))
            for s, units in jobs.items()}  # fmt: skip

    def finished(student: str, runs: list[tuple]) -> None:
        progress.finished(student, jobs[student], [Run(*r) for r in runs])

    graded = dask_pool(cluster, course, todo, db_url, Path(__file__).resolve().parent,
                       n_local, finished, seen)  # fmt: skip
    return {s: [Run(*r) for r in runs] for s, runs in graded.items()}


def _kill(workers: Sequence[Worker]) -> None:
    """Each worker's whole process group (its nbgrader, kernels, sandboxes), at once."""
    for worker in workers:
        proc = worker.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
    for worker in workers:
        if worker.proc is not None:
            worker.proc.wait()
            worker.proc = None


def _database(db_url: str | None, course: Path) -> str:
    """The gradebook's URL without a password, for messages."""
    if not db_url:
        return f"sqlite:///{course / 'gradebook.db'}"
    return re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", db_url)


def _db_errors() -> tuple[type[BaseException], ...]:
    from sqlalchemy.exc import DBAPIError

    return (DBAPIError,)


def grade(
    course: Path,
    jobs: int,
    assignment: str = "*",
    db_url: str | None = None,
    extra: Sequence[str] = (),
    log_dir: Path | None = None,
    cluster: str | None = None,
    full: bool = False,
    seen: Workers | None = None,
) -> tuple[list[str], dict[str, float]]:
    """Grade what is new or changed in ``course`` (everything with ``full``); returns (failed
    students, seconds per phase and the counts ``"graded"`` / ``"skipped"``).

    Raises:
        CourseConfigError: the course's nbgrader_config.py does not load or would not sandbox.
        DatabaseDownError: the gradebook stopped answering (what was graded before is kept).
        SignalledError: SIGINT / SIGTERM (when handlers raising it are installed, as ``main`` does).
    """
    from torchlight_grader.nbgrader.preflight import check_config

    env = environment(db_url)
    seconds: dict[str, float] = {"graded": 0, "skipped": 0}
    failed: dict[str, list[Run]] = {}
    log_dir = log_dir or course / "logs"
    log_dir.mkdir(exist_ok=True)
    units = units_of(course, assignment)
    if not units:
        print(f"no submissions in {course / 'submitted'} for {assignment!r}", file=sys.stderr)
        return [], seconds

    start = time.perf_counter()
    db = db_url or f"sqlite:///{course / 'gradebook.db'}"
    where = _database(db_url, course)
    state = State(course)
    # The workers import nbgrader and the grader while this process reads the gradebook.
    n_workers = 1 if cluster else max(1, min(jobs, len(students_of(course, assignment))))
    workers = [Worker(course, env).start() for _ in range(n_workers)]
    stop = threading.Event()
    progress = Progress(0, log_dir)
    export_runs: list[Run] = []
    try:
        # Before any worker is given a job (they only import until then).
        check_config(course)  # nbgrader itself would go on with its unsandboxed defaults
        try:
            before = gradebook_snapshot(course, db_url)
            duedates, rows = gradebook_facts(db) if before else ({}, set())
            record_release(course, db_url)  # the gradebook's release, for the restore's history
        except _db_errors() as exc:
            raise DatabaseDownError(f"{where}: {cause_of(str(exc))}") from None
        if not any(key[0] == "points" for key in before):
            raise SystemExit(
                f"expected a gradebook with the released assignments in {db_url or course}, found "
                "none: run `make course-release` (with the same DB_URL) first"
            )
        names = sorted({a for _, a in units})
        graders = grader_keys(course, names, extra, db_url)
        releases = {a: release_key(course, a, before, duedates) for a in names}
        keys = {u: unit_key(course, u, releases, graders) for u in units}
        todo, summary = plan(course, units, keys, state, rows, full)
        print(summary, flush=True)
        seconds["graded"], seconds["skipped"] = len(todo), len(units) - len(todo)
        # Nothing about to be graded stays marked graded (a crash from here on regrades it);
        # entries of deleted submissions go too.
        # (other assignments' entries stay: ASSIGNMENT=a1 keeps a2's)
        state.forget(todo, keep={k for k in state.keys if (course / "submitted" / k).is_dir()})
        jobs_by_student = by_student(todo)
        progress = Progress(len(jobs_by_student), log_dir, state, keys)
        since = time.time() - 1
        if not todo:
            pass
        elif len(workers) == 1 and not cluster and len(todo) == len(units):
            export_runs = _grade_serial(
                course, workers[0], todo, jobs_by_student, assignment, extra, log_dir, where,
                lambda unit: state.graded(unit, keys[unit]), failed, since,
            )  # fmt: skip
        else:
            graded = (
                cluster_pool(
                    cluster, course, jobs_by_student, extra, db_url, jobs, progress, seen
                )  # fmt: skip
                if cluster
                else pool(workers, jobs_by_student, extra, progress, stop)
            )
            if progress.db_cause is not None:
                raise DatabaseDownError(f"{where}: {progress.db_cause}")
            _keep_results(course, workers[0], graded, jobs_by_student, extra, log_dir,
                          lambda unit: state.graded(unit, keys[unit]), failed, since)  # fmt: skip
        if not export_runs:
            export_runs = workers[0].do([list(EXPORT)], 0)
        # Pages behind the gradebook (a manual grade or comment since): regenerated, no regrade.
        _, page_runs = refresh_pages(course, db_url, assignment, workers[0])
        if any(r.returncode != 0 for r in page_runs):
            failed["(feedback pages)"] = page_runs
        cause = db_down(export_runs)
        if cause is not None:
            raise DatabaseDownError(f"{where}: {cause}")
        seconds["exports"] = sum(r.seconds for r in export_runs)
        seconds["grading"] = time.perf_counter() - start - seconds["exports"]
        # The gradebook checks itself: what autograde never changes must not have changed.
        try:
            changes = gradebook_changes(before, gradebook_snapshot(course, db_url))
        except _db_errors() as exc:
            raise DatabaseDownError(f"{where}: {cause_of(str(exc))}") from None
    except StoppedError as exc:
        stop.set()
        _kill(workers)  # at once: nothing half-graded is kept (graded.json has none of it)
        exc.counts = (progress.done, progress.total, int(seconds["skipped"]))
        raise
    finally:
        for worker in workers:
            worker.close()
    if changes:
        text = "\n".join(f"gradebook changed outside the grader: {c}" for c in changes)
        failed["(gradebook integrity)"] = [Run(("integrity check",), 1, text, 0.0)]
    print(f"integrity report: {integrity_report(course)}")

    _write_log(log_dir / "export.log", export_runs)
    if any(r.returncode != 0 for r in export_runs):
        failed["(exports)"] = export_runs
    _print_failures(failed, jobs_by_student, log_dir)
    return list(failed), seconds


def _grade_serial(
    course: Path,
    worker: Worker,
    todo: Sequence[Unit],
    jobs_by_student: dict[str, list[Unit]],
    assignment: str,
    extra: Sequence[str],
    log_dir: Path,
    where: str,
    done: Callable[[Unit], None],
    failed: dict[str, list[Run]],
    since: float,
) -> list[Run]:
    """nbgrader's own serial pipeline over everyone, exports included (``--jobs 1`` and a whole
    class to grade); returns the export steps' runs."""
    print(f"grading {len(jobs_by_student)} student(s) with nbgrader's own serial "
          "pipeline (--jobs 1: no per-student progress)", flush=True)  # fmt: skip
    runs = worker.do(serial_job(assignment, extra), notebooks_of(
        course, list(jobs_by_student), assignment))  # fmt: skip
    _write_log(log_dir / "serial.log", runs)
    cause = db_down(runs)
    if cause is not None:
        raise DatabaseDownError(f"{where}: {cause}")
    named = {(s, a) for r in runs[:2] for a, s in NBGRADER_FAILED.findall(r.output)}
    for unit in todo:
        if unit not in named and all(
            (course / d / unit[0] / unit[1]).is_dir() for d in ("autograded", "feedback")
        ):
            done(unit)
    if any(r.returncode != 0 for r in runs[:2]):
        failed["(serial run)"] = runs[:2]
        for unit in named:
            write_failure_pages(course, unit, runs[:2], since)
    return runs[2:]


def _keep_results(
    course: Path,
    worker: Worker,
    graded: dict[str, list[Run]],
    jobs_by_student: dict[str, list[Unit]],
    extra: Sequence[str],
    log_dir: Path,
    done: Callable[[Unit], None],
    failed: dict[str, list[Run]],
    since: float,
) -> None:
    """After the pool (local or Dask): each student's log, each unit marked graded or given a
    failure page; a student whose sqlite stayed locked is graded again, alone."""
    for student, my_units in jobs_by_student.items():
        runs = graded[student]
        if any(LOCKED in r.output for r in runs if r.returncode != 0):
            print(f"retrying {student} alone (sqlite stayed locked)", file=sys.stderr)
            runs = worker.do(
                [c for u in my_units for c in unit_job(u, extra)],
                sum(notebooks_of(course, [student], a) for _, a in my_units),
            )
        _write_log(log_dir / f"{student}.log", runs)
        for unit, rs in split_runs(my_units, runs):
            if all(r.returncode == 0 for r in rs):
                done(unit)  # (again, or after the retry)
            else:
                write_failure_pages(course, unit, rs, since)
        if any(r.returncode != 0 for r in runs):
            failed[student] = runs


def _print_failures(
    failed: dict[str, list[Run]], jobs_by_student: dict[str, list[Unit]], log_dir: Path
) -> None:
    """One line per submission that could not be graded, then the run-wide failures."""
    lines = [
        f"FAILED {s} {notebook_of(bad.output, a)}: {cause_of(bad.output)} (log: {log_dir / s}.log)"
        for student, my_units in jobs_by_student.items()
        if student in failed
        for (s, a), rs in split_runs(my_units, failed[student])
        for bad in [r for r in rs if r.returncode != 0][:1]  # the first failure: its cause
    ]
    if lines:
        print(f"{len(lines)} submission(s) could not be graded (each student has a feedback "
              "page saying why):", file=sys.stderr)  # fmt: skip
        for line in lines:
            print(f"  {line}", file=sys.stderr)
    for who, runs in failed.items():
        if not runs or who in jobs_by_student:
            continue
        bad = next(r for r in runs if r.returncode != 0)
        named_s = sorted({f"{s} ({a})" for r in runs for a, s in NBGRADER_FAILED.findall(r.output)})
        if named_s:
            who = f"{who}: {', '.join(named_s)}"
        print(f"FAILED {who}: {cause_of(bad.output)} (nbgrader {' '.join(bad.args[:1])}, exit "
              f"{bad.returncode}; log in {log_dir})", file=sys.stderr)  # fmt: skip


def _write_log(path: Path, runs: Sequence[Run]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in runs:
            f.write(f"$ nbgrader {' '.join(r.args)}  # exit {r.returncode}, {r.seconds:.1f} s\n")
            f.write(r.output + "\n")


def watch_parent() -> None:
    """SIGTERM to this process as soon as its parent is gone (``make`` killed alone, even with
    SIGKILL, which it cannot pass on): the kernel reparents us, and a grader left running would
    write the exports minutes later, for no one. The handler then stops the run as for a
    SIGTERM of its own (workers and sandboxes killed, the summary, exit status 143)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        print(f"\nthe parent process (pid {parent}, e.g. make) is gone: stopping", file=sys.stderr,
              flush=True)  # fmt: skip
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--course", type=Path, default=ROOT / "assignments")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="students graded at once (default: the number of cores)")  # fmt: skip
    parser.add_argument("--assignment", default="*", help="an assignment name or pattern")
    parser.add_argument("--db-url", default=os.environ.get("COURSE_DB_URL") or None,
                        help="the gradebook, e.g. postgresql+psycopg2://user@host/db "
                             "(default: COURSE_DB_URL, else the config's sqlite file)")  # fmt: skip
    parser.add_argument("--cluster", default=os.environ.get("COURSE_CLUSTER") or None,
                        help="grade on a Dask cluster: tcp://host:8786, a scheduler file (.json) "
                             "or local:N (torchlight_grader/course/dask.py)")  # fmt: skip
    parser.add_argument("--full", action="store_true",
                        help="regrade every submission, changed or not (make course-grade FULL=1)")  # fmt: skip
    parser.add_argument("extra", nargs="*", help="more options for nbgrader autograde (after --)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    course = args.course.resolve()
    from torchlight_grader.nbgrader.preflight import CourseConfigError

    def interrupted(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the cleanup runs once, uninterrupted
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SignalledError(signum)

    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    watch_parent()
    seen = Workers()  # (a --cluster run's Dask workers)
    try:
        with course_lock(course, "make course-grade"):
            failed, seconds = grade(course, args.jobs, args.assignment, args.db_url, args.extra,
                                    cluster=args.cluster, full=args.full, seen=seen)  # fmt: skip
    except CourseBusyError as exc:
        print(f"refusing to grade: {exc}", file=sys.stderr)
        return 1
    except CourseConfigError as exc:
        print(f"refusing to grade: {exc}", file=sys.stderr)
        return 1
    except StoppedError as exc:
        done, total, skipped = exc.counts
        kept = (f"{done} of {total} student(s) graded in this run and kept, {total - done} not "
                f"graded ({skipped} unchanged submission(s) were skipped); no exports written")  # fmt: skip
        if isinstance(exc, SignalledError):
            print(f"\ninterrupted by {exc}: the workers and their sandboxes are stopped. {kept}. "
                  "Rerun `make course-grade` to grade the rest (only what is not graded yet).",
                  file=sys.stderr)  # fmt: skip
            if exc.signum == signal.SIGINT:
                # Ctrl-C ends the process by the signal, as Python itself does, so that make (or
                # a shell) knows it was interrupted ("Interrupt"), not that the recipe failed.
                sys.stdout.flush()
                sys.stderr.flush()
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGINT)
            return 128 + exc.signum
        print(f"the gradebook database stopped answering: {exc}\n{kept}. Rerun `make "
              "course-grade` when the database is back: only what is left is graded.",
              file=sys.stderr)  # fmt: skip
        return 1
    n = len(students_of(course, args.assignment))
    where = seen.summary() if args.cluster else f"with {args.jobs} job(s)"
    print(f"graded {seconds['graded']:.0f} submission(s) of {n} student(s), skipped "
          f"{seconds['skipped']:.0f} unchanged, {where} in "
          f"{seconds.get('grading', 0):.1f} s (+{seconds.get('exports', 0):.1f} s exports): "
          f"{course}/grades.csv, items.csv, canvas.csv; feedback in {course}/feedback/")  # fmt: skip
    if failed:
        print(f"{len(failed)} failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
