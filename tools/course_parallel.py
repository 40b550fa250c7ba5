"""Grade a course's submissions with several nbgrader processes at once (``make course-grade``).

nbgrader grades one notebook after another in one process. This tool starts ``--jobs`` worker
processes (``tools/course_batch.py``: nbgrader commands run in-process, so each worker pays
nbgrader's start-up once), hands each free worker the next student (``nbgrader autograde
--student=ID`` then ``nbgrader generate_feedback --student=ID``), and runs the exports once,
after every student is done::

    .venv/bin/python tools/course_parallel.py --jobs 4                    # every assignment
    .venv/bin/python tools/course_parallel.py --jobs 4 --assignment a1_functions
    .venv/bin/python tools/course_parallel.py --db-url postgresql+psycopg2://...  --jobs 8

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

As in ``tools/course.py grade``, the gradebook is snapshotted before grading and compared after
every worker is done: a change to source cells, checksums, points or manual scores that the
grader did not make fails loudly; ``integrity.csv`` lists per student what the grader found.

One student's failure costs that student only: the pool goes on, the exports run for everyone,
and the tool lists the failed students (with the tail of their nbgrader output and the path of
the full log, ``logs/<student>.log``) and exits 1 at the end.

``--jobs 1`` (or a single student) runs nbgrader's own serial pipeline in one worker
(``autograde "*"`` over all students at once, ``generate_feedback "*"``, the exports), the
reference the parallel run is compared against in ``tests/test_course_scale.py``.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from course_batch import Run, Worker, skip_slow_imports  # noqa: E402

skip_slow_imports()  # before nbformat and nbgrader are imported (by ``course``)
from course import gradebook_changes, gradebook_snapshot, integrity_report  # noqa: E402

BIN = Path(sys.executable).parent
EXPORTER = "torchlight_grader.exports.CourseExportPlugin"  # grades.csv, items.csv, canvas.csv
EXPORT = ("export", f"--exporter={EXPORTER}", "--to=.")
LOCKED = "database is locked"
NBGRADER_FAILED = re.compile(
    r"There was an error processing assignment '([^']*)' for student '([^']*)'"
)


def students_of(course: Path, assignment: str) -> list[str]:
    """Students with a submitted folder for an assignment matching the pattern ``assignment``."""
    submitted = course / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(
        s.name
        for s in submitted.iterdir()
        if s.is_dir() and any(a.is_dir() and fnmatch(a.name, assignment) for a in s.iterdir())
    )


def environment(db_url: str | None) -> dict[str, str]:
    """The children's environment: the venv first on PATH (nbgrader runs ``alembic`` from it)."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    if db_url:
        env["COURSE_DB_URL"] = db_url
    return env


def student_job(student: str, assignment: str, extra: Sequence[str]) -> list[list[str]]:
    """autograde, then generate_feedback, for one student."""
    who = f"--student={student}"
    return [
        ["autograde", assignment, who, "--force", *extra],
        ["generate_feedback", assignment, who, "--force"],
    ]


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


def pool(
    workers: Sequence[Worker], students: Sequence[str], assignment: str, extra: Sequence[str]
) -> dict[str, list[Run]]:
    """Every student graded by the first free worker, one student at a time (so a slow,
    hostile notebook holds up only its own worker); the runs of each student."""
    todo: queue.Queue[str] = queue.Queue()
    for student in students:
        todo.put(student)
    done: dict[str, list[Run]] = {}

    def work(worker: Worker) -> None:
        while True:
            try:
                student = todo.get_nowait()
            except queue.Empty:
                return
            # Will this worker get another student? Surely when each other worker can take one
            # and one is still left: then a sandbox started ahead after the last notebook is used.
            more = todo.qsize() >= len(workers)
            notebooks = notebooks_of(worker.course, [student], assignment) + more
            done[student] = worker.do(student_job(student, assignment, extra), notebooks)

    threads = [threading.Thread(target=work, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done


def cluster_pool(
    cluster: str,
    course: Path,
    students: Sequence[str],
    assignment: str,
    extra: Sequence[str],
    db_url: str | None,
    jobs: int,
) -> dict[str, list[Run]]:
    """``pool`` on a Dask cluster (``torchlight_grader.cluster``): the same job per student."""
    from torchlight_grader.cluster import pool as dask_pool

    todo = {s: (student_job(s, assignment, extra), notebooks_of(course, [s], assignment))
            for s in students}  # fmt: skip
    graded = dask_pool(cluster, course, todo, db_url, Path(__file__).resolve().parent, jobs)
    return {s: [Run(*r) for r in runs] for s, runs in graded.items()}


def grade(
    course: Path,
    jobs: int,
    assignment: str = "*",
    db_url: str | None = None,
    extra: Sequence[str] = (),
    log_dir: Path | None = None,
    cluster: str | None = None,
) -> tuple[list[str], dict[str, float]]:
    """Grade every student of ``course``; returns (failed students, seconds per phase).

    Raises:
        CourseConfigError: the course's nbgrader_config.py does not load or would not sandbox.
    """
    from torchlight_grader.preflight import check_config

    env = environment(db_url)
    seconds: dict[str, float] = {}
    failed: dict[str, list[Run]] = {}
    log_dir = log_dir or course / "logs"
    log_dir.mkdir(exist_ok=True)
    students = students_of(course, assignment)
    if not students:
        print(f"no submissions in {course / 'submitted'} for {assignment!r}", file=sys.stderr)
        return [], seconds

    start = time.perf_counter()
    # The workers import nbgrader and the grader while this process reads the gradebook.
    n_workers = 1 if cluster else max(1, min(jobs, len(students)))  # cluster: one for exports
    workers = [Worker(course, env).start() for _ in range(n_workers)]
    try:
        # Before any worker is given a job (they only import until then).
        check_config(course)  # nbgrader itself would go on with its unsandboxed defaults
        before = gradebook_snapshot(course, db_url)
        if not any(key[0] == "points" for key in before):
            raise SystemExit(
                f"expected a gradebook with the released assignments in {db_url or course}, found "
                "none: run `make course-release` (with the same DB_URL) first"
            )
        if len(workers) == 1 and not cluster:  # nbgrader's own serial pipeline, exports included
            runs = workers[0].do(
                serial_job(assignment, extra), notebooks_of(course, students, assignment)
            )
            _write_log(log_dir / "serial.log", runs)
            if any(r.returncode != 0 for r in runs[:2]):
                failed["(serial run)"] = runs[:2]
            export_runs = runs[2:]
        else:
            graded = (
                cluster_pool(cluster, course, students, assignment, extra, db_url, jobs)
                if cluster
                else pool(workers, students, assignment, extra)
            )
            for student in students:
                runs = graded[student]
                if any(LOCKED in r.output for r in runs if r.returncode != 0):
                    print(f"retrying {student} alone (sqlite stayed locked)", file=sys.stderr)
                    runs = workers[0].do(
                        student_job(student, assignment, extra),
                        notebooks_of(course, [student], assignment),
                    )
                _write_log(log_dir / f"{student}.log", runs)
                if any(r.returncode != 0 for r in runs):
                    failed[student] = runs
            export_runs = workers[0].do([list(EXPORT)], 0)
    finally:
        for worker in workers:
            worker.close()
    seconds["exports"] = sum(r.seconds for r in export_runs)
    seconds["grading"] = time.perf_counter() - start - seconds["exports"]
    # The gradebook checks itself: what autograde never changes must not have changed.
    changes = gradebook_changes(before, gradebook_snapshot(course, db_url))
    if changes:
        text = "\n".join(f"gradebook changed outside the grader: {c}" for c in changes)
        failed["(gradebook integrity)"] = [Run(("integrity check",), 1, text, 0.0)]
    print(f"integrity report: {integrity_report(course)}")

    _write_log(log_dir / "export.log", export_runs)
    if any(r.returncode != 0 for r in export_runs):
        failed["(exports)"] = export_runs
    for who, runs in failed.items():
        if not runs:
            continue
        bad = next(r for r in runs if r.returncode != 0)
        named = sorted({f"{s} ({a})" for r in runs for a, s in NBGRADER_FAILED.findall(r.output)})
        if named:
            who = f"{who}: {', '.join(named)}"
        print(f"FAILED {who}: nbgrader {' '.join(bad.args)} (exit {bad.returncode}), log in "
              f"{log_dir}\n{bad.output[-1500:]}", file=sys.stderr)  # fmt: skip
    return list(failed), seconds


def _write_log(path: Path, runs: Sequence[Run]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in runs:
            f.write(f"$ nbgrader {' '.join(r.args)}  # exit {r.returncode}, {r.seconds:.1f} s\n")
            f.write(r.output + "\n")


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
                             "or local:N (torchlight_grader/cluster.py)")  # fmt: skip
    parser.add_argument("extra", nargs="*", help="more options for nbgrader autograde (after --)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    course = args.course.resolve()
    from torchlight_grader.preflight import CourseConfigError

    try:
        failed, seconds = grade(course, args.jobs, args.assignment, args.db_url, args.extra,
                                cluster=args.cluster)  # fmt: skip
    except CourseConfigError as exc:
        print(f"refusing to grade: {exc}", file=sys.stderr)
        return 1
    n = len(students_of(course, args.assignment))
    print(f"graded {n} students with {args.jobs} job(s) in {seconds.get('grading', 0):.1f} s "
          f"(+{seconds.get('exports', 0):.1f} s exports): {course}/grades.csv, items.csv, "
          f"canvas.csv; feedback in {course}/feedback/")  # fmt: skip
    if failed:
        print(f"{len(failed)} failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
