"""Students per minute on the local pool and on a Dask cluster, for 1, 2 and 4 workers.

The class is ``bench_course.make_class``'s (the catalog's mix, seeded hidden inputs); each
setting grades its own copy with ``course_parallel.grade``: ``jobs=N`` is the local pool of N
``course_batch`` workers, ``dask N`` a Dask ``LocalCluster`` of N worker processes (one thread
each; ``--cluster tcp://host:8786`` grades on a running cluster instead, for every N). The
exported item grades of every setting must be identical. (A section the lead can fold into
``bench_course.py``.)

Usage::

    .venv/bin/python benchmarks/bench_course_dask.py --students 4 --assignment a1_functions
    .venv/bin/python benchmarks/bench_course_dask.py --students 20 --workers 1 2 4
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tools"), str(ROOT / "benchmarks")]

import course_parallel  # noqa: E402
from bench_course import SEED, make_class  # noqa: E402
from submissions.pipeline import read_items  # noqa: E402
from submissions.simulate import CATALOGS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--assignment", action="append", choices=sorted(CATALOGS))
    parser.add_argument("--cluster", help="a running scheduler instead of LocalCluster(N)")
    args = parser.parse_args()
    assignments = args.assignment or sorted(CATALOGS)
    pattern = assignments[0] if len(assignments) == 1 else "*"
    print(f"{os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f}); {args.students} "
          f"students; assignments: {', '.join(assignments)}", flush=True)  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as where:
        base = make_class(Path(where) / "base", args.students, assignments)
        grades = {}
        for n in args.workers:
            for kind in ("pool", "dask"):
                course = shutil.copytree(base, Path(where) / f"{kind}{n}" / "course")
                cluster = (args.cluster or f"local:{n}") if kind == "dask" else None
                load = os.getloadavg()[0]
                start = time.perf_counter()
                failed, _ = course_parallel.grade(course, n, pattern, None, SEED, cluster=cluster)
                seconds = time.perf_counter() - start
                grades[kind, n] = read_items(course)
                rows.append((kind, n, seconds, load, os.getloadavg()[0], failed))
                print(f"  {kind} {n} worker(s): {seconds:.1f} s (load {load:.1f} -> "
                      f"{os.getloadavg()[0]:.1f}){' FAILED ' + str(failed) if failed else ''}",
                      flush=True)  # fmt: skip
        same = all(g == next(iter(grades.values())) for g in grades.values())
    print(f"\ngrades identical across all runs: {same}")
    print(f"{'engine':>6} {'workers':>7} {'seconds':>8} {'st/min':>7} {'load':>10}")
    for kind, n, seconds, before, after, _ in rows:
        print(f"{kind:>6} {n:>7} {seconds:>8.1f} {60 * args.students / seconds:>7.1f} "
              f"{before:>4.1f}->{after:<4.1f}")  # fmt: skip
    return 0 if same and not any(r[5] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
