"""How long each tutorial takes to run top to bottom, as a learner runs it (issue 26, item 7).

Each stored ``notebooks/NN_*.ipynb`` runs on a fresh kernel of this interpreter (the kernel
``make lab`` installs as "Python (torchlight)", started the way ``tools/build_notebooks.py``
starts it), every cell in order; the script prints the wall time of each notebook, its three
slowest cells, and the ratio to the promise of the README (60 s per tutorial on 2 idle cores).
The load average is printed beside each run: on a shared machine the times mean little unless
it is near 0.

Usage::

    .venv/bin/python benchmarks/bench_tutorials.py              # every tutorial, once
    .venv/bin/python benchmarks/bench_tutorials.py 04 06 -n 2   # two of them, twice each
    .venv/bin/python benchmarks/bench_tutorials.py --threads 1  # TORCHLIGHT_NUM_THREADS=1

Nothing is written: the notebooks run on copies in memory. Exit status 1 if a notebook raised.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = 60.0  # the README's promise per tutorial, on 2 idle cores


def _builder():
    """tools/build_notebooks.py: the kernel manager and environment the notebooks are built with."""
    spec = importlib.util.spec_from_file_location(
        "build_notebooks", ROOT / "tools" / "build_notebooks.py"
    )
    assert spec is not None and spec.loader is not None, "tools/build_notebooks.py is missing"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(path: Path, builder) -> tuple[float, list[tuple[float, int, str]]]:
    """Run one notebook; (seconds, [(seconds, cell index, first line)] of every code cell)."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    client = NotebookClient(
        nb,
        kernel_name="python3",
        kernel_manager_class=builder.ThisPythonKernelManager,
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        timeout=builder.CELL_TIMEOUT_S,
        record_timing=True,
        allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - started
    cells = []
    for i, cell in enumerate(nb.cells):
        timing = cell.metadata.get("execution", {})
        begin, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if cell.cell_type == "code" and begin and end:
            from datetime import datetime

            spent = (datetime.fromisoformat(end) - datetime.fromisoformat(begin)).total_seconds()
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            cells.append((spent, i, first[:60]))
    return seconds, cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", help="only tutorials whose name starts with these")
    parser.add_argument("-n", "--repeat", type=int, default=1, help="runs of each notebook")
    parser.add_argument(
        "--threads", type=int, default=None, help="TORCHLIGHT_NUM_THREADS for the kernels"
    )
    args = parser.parse_args(argv)
    builder = _builder()
    os.environ.update(builder.KERNEL_ENV)
    if args.threads is not None:
        os.environ["TORCHLIGHT_NUM_THREADS"] = str(args.threads)
    paths = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    if args.only:
        paths = [p for p in paths if any(p.stem.startswith(x) for x in args.only)]
    threads = os.environ.get("TORCHLIGHT_NUM_THREADS", "torchlight's default")
    print(
        f"tutorials on {os.cpu_count()} CPUs, TORCHLIGHT_NUM_THREADS={threads}, "
        f"budget {BUDGET_S:.0f} s each (on 2 idle cores)"
    )
    print(
        f"{'notebook':38s} {'run':>4s} {'seconds':>8s} {'x budget':>8s} {'load':>5s}  slowest cells"
    )
    failed = False
    for path in paths:
        for attempt in range(1, args.repeat + 1):
            load = os.getloadavg()[0]
            try:
                seconds, cells = run(path, builder)
            except CellExecutionError as error:
                print(f"{path.name:38s} {attempt:4d}   FAILED: {str(error).splitlines()[0]}")
                failed = True
                break
            slowest = sorted(cells, reverse=True)[:3]
            shown = "; ".join(f"cell {i} {s:.1f} s ({first})" for s, i, first in slowest)
            print(
                f"{path.name:38s} {attempt:4d} {seconds:8.1f} {seconds / BUDGET_S:8.2f} "
                f"{load:5.1f}  {shown}",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
