"""How long a class takes to grade: ``make course-grade`` at JOBS=1 and JOBS=cores, side by side;
a full vs an incremental regrade after one resubmission; the local pool vs a Dask cluster.

A simulated class hands in every assignment; each notebook is drawn from the catalog of
``tests/submissions`` (mostly correct solutions, planted mistakes, untouched releases, a few
cheats and hostile hazards: the weights of ``tests/submissions/simulate.py``). The course is
released once into a temporary copy; each JOBS setting then grades its own copy of it with
``torchlight_grader/course/grade.py`` (the real nbgrader CLI, the real sandbox), and the exported
grades of every setting must be identical (the hidden inputs are seeded for that).

Usage::

    .venv/bin/python benchmarks/bench_course.py --students 10
    .venv/bin/python benchmarks/bench_course.py --students 10 100 --jobs 1 2
    .venv/bin/python benchmarks/bench_course.py --students 20 --assignment a1_functions --postgres
    .venv/bin/python benchmarks/bench_course.py --students 8 --jobs 2 --incremental
    .venv/bin/python benchmarks/bench_course.py --students 6 --jobs 1 2 --dask 1 2

``--incremental``: after the first grading of the largest class at the largest JOBS, one
student resubmits (another catalog entry for the first assignment); the course is copied, and
the copy is regraded in full (``--full``) while the original is regraded incrementally (only
that student); both must export the same grades. Prints both times and the ratio.

``--dask N ...``: each N also graded on a Dask ``LocalCluster`` of N worker processes (one
thread each; ``--cluster tcp://host:8786`` grades on a running cluster instead), a column
``dask N`` beside the local pool's ``jobs=N`` (formerly ``bench_course_dask.py``).

Prints, per class size, for each JOBS side by side: wall seconds, seconds per student, students
per minute, and the speed-up of the fastest over JOBS=1; then how the time grows with the class
size (and the seconds per student with it). ``--postgres`` adds a
column graded at the largest JOBS into a PostgreSQL gradebook (``tests/pg_server.py``).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from pg_server import PostgresServer  # noqa: E402
from submissions.catalog import build  # noqa: E402
from submissions.pipeline import make_course, nbgrader, notebooks, read_items, submit  # noqa: E402
from submissions.simulate import CATALOGS, WEIGHTS  # noqa: E402

from torchlight_grader.course import grade as course_parallel  # noqa: E402

SEED = ("--IsolatedGrader.seed=20260115",)


def make_class(where: Path, students: int, assignments: list[str], seed: int = 0) -> Path:
    """A released course with ``students`` simulated submissions of each assignment."""
    rng = random.Random(seed)
    course = make_course(where)
    for assignment in assignments:
        nbgrader(course, "generate_assignment", assignment, "--force")
        source, release = notebooks(course, assignment)
        catalog = CATALOGS[assignment]
        for n in range(students):
            sub = rng.choices(catalog, weights=[WEIGHTS[s.kind] for s in catalog])[0]
            submit(course, f"student{n:03d}", assignment, build(sub, source, release))
    return course


def run(
    course: Path, jobs: int, pattern: str, db_url: str | None = None, cluster: str | None = None,
    full: bool = False,
) -> float:  # fmt: skip
    start = time.perf_counter()
    failed, _ = course_parallel.grade(course, jobs, pattern, db_url, SEED, cluster=cluster,
                                      full=full)  # fmt: skip
    seconds = time.perf_counter() - start
    if failed:
        print(f"  (jobs={jobs}: failures reported for {failed}; see {course}/logs)", flush=True)
    return seconds


def regrade_one(
    where: Path, graded: str, jobs: int, pattern: str, assignment: str
) -> tuple[float, float, bool]:
    """One student of the graded course ``where/graded`` resubmits; (full regrade seconds,
    incremental seconds, same grades)."""
    course = where / graded / "course"
    student = sorted(p.name for p in (course / "submitted").iterdir())[0]
    source, release = notebooks(course, assignment)
    old = (course / "submitted" / student / assignment / f"{assignment}.ipynb").read_text()
    for sub in CATALOGS[assignment]:  # the first catalog entry that changes the notebook
        nb = build(sub, source, release)
        submit(course, student, assignment, nb)
        if (course / "submitted" / student / assignment / f"{assignment}.ipynb").read_text() != old:
            break
    copy = shutil.copytree(course, where / "full" / "course")
    inc = run(course, jobs, pattern)
    full = run(copy, jobs, pattern, full=True)
    return full, inc, read_items(course) == read_items(copy)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, nargs="+", default=[4])
    parser.add_argument("--jobs", type=int, nargs="+", default=sorted({1, os.cpu_count() or 1}))
    parser.add_argument("--assignment", action="append", choices=sorted(CATALOGS),
                        help="grade only these assignments (default: all five)")  # fmt: skip
    parser.add_argument("--postgres", action="store_true", help="also grade into PostgreSQL")
    parser.add_argument("--incremental", action="store_true",
                        help="full vs incremental regrade after one resubmission")  # fmt: skip
    parser.add_argument("--dask", type=int, nargs="*", default=[],
                        help="also grade on a Dask LocalCluster of each of these sizes")  # fmt: skip
    parser.add_argument("--cluster", help="a running Dask scheduler instead of LocalCluster(N)")
    args = parser.parse_args()
    assignments = args.assignment or sorted(CATALOGS)
    pattern = assignments[0] if len(assignments) == 1 else "*"
    print(f"{os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f}); assignments: "
          f"{', '.join(assignments)}", flush=True)  # fmt: skip
    table: dict[tuple[int, str], float] = {}
    columns = (
        [f"jobs={j}" for j in args.jobs]
        + [f"dask {n}" for n in args.dask]
        + ([f"pg jobs={max(args.jobs)}"] if args.postgres else [])
    )
    incremental: tuple[float, float, bool] | None = None
    for students in args.students:
        with tempfile.TemporaryDirectory(prefix="bench-course-") as where:
            base = make_class(Path(where) / "base", students, assignments)
            exports = {}
            for jobs in args.jobs:
                course = shutil.copytree(base, Path(where) / f"jobs{jobs}" / "course")
                table[students, f"jobs={jobs}"] = run(course, jobs, pattern)
                exports[f"jobs={jobs}"] = read_items(course)
                print(
                    f"  {students} students, jobs={jobs}: {table[students, f'jobs={jobs}']:.1f} s"
                    f" (load average {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
            for n in args.dask:
                key = f"dask {n}"
                course = shutil.copytree(base, Path(where) / f"dask{n}" / "course")
                table[students, key] = run(course, n, pattern, cluster=args.cluster or f"local:{n}")
                exports[key] = read_items(course)
                print(f"  {students} students, {key}: {table[students, key]:.1f} s (load "
                      f"average {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
            if args.incremental and students == max(args.students):
                incremental = regrade_one(Path(where), f"jobs{max(args.jobs)}", max(args.jobs),
                                          pattern, assignments[0])  # fmt: skip
            if args.postgres:
                course = shutil.copytree(base, Path(where) / "pg" / "course",
                                         ignore=shutil.ignore_patterns("gradebook.db"))  # fmt: skip
                with PostgresServer() as pg:
                    url = pg.create_database("gradebook")
                    for assignment in assignments:
                        nbgrader(course, "generate_assignment", assignment, "--force",
                                 f"--CourseDirectory.db_url={url}")  # fmt: skip
                    key = f"pg jobs={max(args.jobs)}"
                    table[students, key] = run(course, max(args.jobs), pattern, url)
                exports[key] = read_items(course)
                print(f"  {students} students, {key}: {table[students, key]:.1f} s", flush=True)
            first = next(iter(exports.values()))
            same = all(e == first for e in exports.values())
            graded = len(first)
            print(f"  {graded} notebooks graded; grades identical across runs: {same}", flush=True)
            if not same or graded != students * len(assignments):
                print("  MISMATCH: the runs disagree or notebooks are missing", file=sys.stderr)
                return 1

    print("\nseconds per student (s/st) and students per minute (st/min), side by side:")
    head = f"{'students':>8} {'notebooks':>9}"
    for col in columns:
        head += f" | {col:>12} {'s/st':>6} {'st/min':>6}"
    print(head + (" | speed-up" if len(columns) > 1 else ""))
    for students in args.students:
        row = f"{students:>8} {students * len(assignments):>9}"
        for col in columns:
            s = table[students, col]
            row += f" | {s:>10.1f} s {s / students:>6.2f} {60 * students / s:>6.1f}"
        if len(columns) > 1:
            serial, best = table[students, columns[0]], min(table[students, c] for c in columns)
            row += f" | {serial / best:.2f}x"
        print(row)
    if incremental is not None:
        full, inc, same = incremental
        print(f"\none resubmission in a class of {max(args.students)} (jobs={max(args.jobs)}): "
              f"full regrade {full:.1f} s, incremental {inc:.1f} s ({full / inc:.1f}x faster); "
              f"grades identical: {same}")  # fmt: skip
        if not same:
            return 1
    if len(args.students) > 1:
        small, large = min(args.students), max(args.students)
        print(f"\ngrowth from {small} to {large} students ({large / small:.0f}x the class):")
        for col in columns:
            ratio = table[large, col] / table[small, col]
            per = table[large, col] / large / (table[small, col] / small)
            print(f"  {col:>12}: {ratio:.2f}x the time ({table[small, col]:.0f} s -> "
                  f"{table[large, col]:.0f} s), {per:.2f}x the seconds per student")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
