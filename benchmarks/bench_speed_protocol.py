"""The speed protocol's repeatability: the same submission graded again and again gets the same
points, on an idle machine and beside busy processes.

Grades three kernels of assignment a2c_kernels' ``tiled_matmul`` (from the planted-mistake
catalog, ``tests/submissions/a2c_kernels.py``) with the real grader (``grader.grade``: the
bubblewrap sandbox, the paired protocol of ``torchlight_grader/checks/timing.py``):

- ``solution``: correct and fast (expected 2 of 2 speed points);
- ``naive-matmul``: correct and slow, a serial triple loop (expected 0 of 2);
- ``skips-work-when-large``: fast because it computes half of the product when the matrix is
  big (the timed size), right on the small correctness trials (expected 0 of 2).

Each is graded ``--runs`` times (default 5) on the machine as it is, then as many times beside
``--busy`` (default 2) processes spinning on the CPU (``python -c 'while True: pass'``). Prints
the points of every run (``test_matmul_speed`` + ``test_matmul_fast``), each run's median
ratio, and whether any run was held ("could not time fairly").

Usage::

    .venv/bin/python benchmarks/bench_speed_protocol.py [--runs 5] [--busy 2]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from submissions import a2c_kernels  # noqa: E402

from torchlight_grader.checks.grader import Cell, grade  # noqa: E402

A = "a2c_kernels"
ITEMS = ("test_matmul_speed", "test_matmul_fast")
KERNELS = ("solution", "naive-matmul", "skips-work-when-large")
MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")
HIDDEN = re.compile(r"^### BEGIN HIDDEN TESTS.*?^### END HIDDEN TESTS\n?", re.M | re.S)
RATIO = re.compile(r"took (\d+\.\d+)x")


def cells_of(name: str) -> list[Cell]:
    """The cells of catalog submission ``name`` (built on the solution), as the grader sees
    them: the answers with the catalog's edits, the locked cells, no test cells."""
    catalog = [s for entry in a2c_kernels.CATALOG for s in (entry, *entry.members)]
    (submission,) = [s for s in catalog if s.name == name]  # (a mistake graded with others too)
    nb = jupytext.read(ROOT / "assignments" / "source" / A / f"{A}.py")
    for cell in nb.cells:
        cell.source = HIDDEN.sub("", "\n".join(
            line for line in cell.source.split("\n") if not MARKER.match(line)))  # fmt: skip
    for edit in submission.edits:
        edit(nb)
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        cells.append(Cell("answer" if meta.get("solution") else "locked", meta.get("grade_id"),
                          cell.source))  # fmt: skip
    return cells


def grade_once(name: str, seed: int) -> tuple[int, str]:
    """Points of the speed items, and the ratios (or why not) the feedback shows."""
    verdicts = grade(A, cells_of(name), list(ITEMS), seed=seed)
    points = sum(v.passed for v in verdicts.values())
    notes = []
    for item in ITEMS:
        message = verdicts[item].message
        found = RATIO.search(message)
        if "could not time fairly" in message:
            notes.append("held")
        elif found:
            notes.append(found.group(1))
        else:
            notes.append(
                "wrong" if "no speed credit" in message else message[:60].replace("\n", " ")
            )
    return points, "/".join(notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--busy", type=int, default=2)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f}")
    table: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for condition in ("idle", f"beside {args.busy} busy"):
        burners = []
        if condition != "idle":
            burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                       for _ in range(args.busy)]  # fmt: skip
        try:
            for name in KERNELS:
                for run in range(args.runs):
                    start = time.perf_counter()
                    result = grade_once(name, seed=1000 + run)
                    table.setdefault((name, condition), []).append(result)
                    print(f"  {condition:14} {name:22} run {run + 1}: {result[0]} points "
                          f"(ratios {result[1]}) in {time.perf_counter() - start:.0f} s, "
                          f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
    print("\npoints of test_matmul_speed + test_matmul_fast (of 2), every run:")
    print(f"{'kernel':24}{'condition':16}points per run        ratios (speed/fast items)")
    for (name, condition), results in table.items():
        points = " ".join(str(p) for p, _ in results)
        ratios = "  ".join(r for _, r in results)
        same = "same every run" if len({p for p, _ in results}) == 1 else "DIFFER"
        print(f"{name:24}{condition:16}{points:22}{ratios}  ({same})")


if __name__ == "__main__":
    main()
