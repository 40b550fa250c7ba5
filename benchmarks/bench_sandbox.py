"""What the bubblewrap sandbox costs per notebook: the same work with and without it.

For each assignment's solution, times (1) the hidden checks (``grader.grade``: one sandbox that
runs the cells once and every item in its own fork; the speed items left out, since only the
sandbox can time them) and (2) the feedback kernel run
(``run_notebook.py``: a kernel executing the notebook), once in bubblewrap and once as plain
processes (``TORCHLIGHT_GRADER_UNSAFE_NO_SANDBOX``, close to how the grader ran before it had a
sandbox). Prints seconds side by side and the ratio.

Usage::

    .venv/bin/python benchmarks/bench_sandbox.py [REPEATS]
    .venv/bin/python benchmarks/bench_sandbox.py --margins [--busy N]

``--margins``: which timeout binds first. Grades every solution once in bubblewrap and prints,
slowest first, how long each hidden check took against its own timeout, and how long the
notebook's cells took against the cell timeout and the notebook budget (the cells run one
after another, so their total bounds the slowest one). ``--busy N`` keeps N extra processes
spinning on the CPU meanwhile (a loaded grading machine); the load average is printed.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import jupytext
import nbformat

from torchlight_grader import sandbox
from torchlight_grader.checks.grader import Cell, grade
from torchlight_grader.checks.registry import checks_for
from torchlight_grader.sandbox import items

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = (
    "a1_functions",
    "a1b_engine",
    "a2_broadcasting",
    "a2b_strided",
    "a2c_kernels",
    "a3_networks",
    "a4_convolutions",
    "a5_attention",
    "a6_tokens",
    "a7_gpt",
    "a8_inference",
)
#: The speed items' runners (a2c's kernels, a6's training): only a sandbox counts the CPU time of
#: all a notebook's processes, so plain processes earn them nothing at once. Left out in both
#: modes, so that both do the same work.
TIMED_IN_THE_SANDBOX = {"speed", "bpe_speed"}
MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")
HIDDEN = re.compile(r"^### BEGIN HIDDEN TESTS.*?^### END HIDDEN TESTS\n?", re.M | re.S)


def solution(assignment: str) -> tuple[list[Cell], list[str], object]:
    nb = jupytext.read(ROOT / "assignments" / "source" / assignment / f"{assignment}.py")
    cells, tests = [], []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        source = "\n".join(line for line in cell.source.split("\n") if not MARKER.match(line))
        cell.source = HIDDEN.sub("", source)
        if cell.cell_type != "code":
            continue
        role = "answer" if meta.get("solution") else "test" if meta.get("grade") else "locked"
        if role == "test":
            tests.append(meta["grade_id"])
        cells.append(Cell(role, meta.get("grade_id"), cell.source))
    nb.metadata.pop("jupytext", None)
    return cells, tests, nb


def time_checks(assignment: str) -> float:
    cells, tests, _ = solution(assignment)
    checks = checks_for(assignment)
    tests = [t for t in tests if checks[t].spec().get("runner") not in TIMED_IN_THE_SANDBOX]
    start = time.perf_counter()
    verdicts = grade(assignment, cells, tests, seed=0)
    assert all(v.passed for v in verdicts.values()), {k: v.message for k, v in verdicts.items()}
    return time.perf_counter() - start


def time_kernel(assignment: str) -> float:
    _, _, nb = solution(assignment)
    settings = {
        "memory": 4 * 1024**3,
        "cpu_seconds": 300,
        "processes": 256,
        "timeout": 120,
        "extra_arguments": [],
    }
    start = time.perf_counter()
    # a cold sandbox (no spare started ahead): its Python and kernel start-up are counted
    box = sandbox.open_sandbox("run_notebook.py", sandbox.Limits(), settings=settings, ahead=False)
    box.loads = __import__("json").loads
    deadline = time.monotonic() + 300
    box.send({"notebook": nbformat.writes(nbformat.from_dict(nb))}, deadline)
    done = False
    while not done and (entry := box.receive(deadline)) is not None:
        done = bool(entry.get("done"))
    box.close()
    assert done, box.broken or "the kernel run did not finish"
    return time.perf_counter() - start


def use(unsafe: bool) -> None:
    if unsafe:
        os.environ[sandbox.OPT_OUT] = sandbox.OPT_OUT_VALUE
    else:
        os.environ.pop(sandbox.OPT_OUT, None)
    sandbox.ensure_available.cache_clear()
    sandbox.ensure_available()


def margins(busy: int) -> None:
    """Each item's and each notebook's cells' time against the timeout that would stop it."""
    import multiprocessing

    use(False)
    rows: list[tuple[float, str, float, float]] = []  # (fraction, what, seconds, limit)
    collect = items._collect  # (an item's frames, read by the grader's items layer)
    receive = sandbox.Sandbox.receive

    def timed_collect(box, item, nonce, timeout, limits, deadline):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        outcome = collect(box, item, nonce, timeout, limits, deadline)
        took = time.perf_counter() - start
        rows.append((took / float(item["timeout"]), f"item {item['id']}", took, item["timeout"]))
        return outcome

    items._collect = timed_collect  # (measuring only: the grader itself is unchanged)
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(busy)]
    for b in burners:
        b.start()
    limits = sandbox.Limits()
    try:
        for assignment in ASSIGNMENTS:
            cells, tests, _ = solution(assignment)
            start = time.perf_counter()
            state = {"first": None}

            def first_receive(self, deadline, _state=state, _start=start):  # type: ignore[no-untyped-def]
                message = receive(self, deadline)
                if _state["first"] is None and isinstance(message, dict) and "cells" in message:
                    _state["first"] = time.perf_counter() - _start
                return message

            sandbox.Sandbox.receive = first_receive  # type: ignore[method-assign]
            verdicts = grade(assignment, cells, tests, seed=0)
            sandbox.Sandbox.receive = receive  # type: ignore[method-assign]
            total = time.perf_counter() - start
            failed = [k for k, v in verdicts.items() if not v.passed]
            cells_s = state["first"] or 0.0
            rows.append((cells_s / limits.cell_timeout, f"{assignment} cells (all)", cells_s,
                         limits.cell_timeout))  # fmt: skip
            rows.append((total / limits.budget, f"{assignment} notebook", total, limits.budget))
            print(
                f"{assignment}: {total:.2f} s, {len(verdicts)} checks, failed: {failed or 'none'}"
            )
    finally:
        for b in burners:
            b.terminate()
        items._collect = collect
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} ({os.cpu_count()} CPUs, "
          f"{busy} extra spinning processes); slowest against its timeout first:")  # fmt: skip
    print(f"{'what':>40} {'seconds':>8} {'timeout':>8} {'used':>6}")
    for fraction, what, took, limit in sorted(rows, reverse=True)[:15]:
        print(f"{what:>40} {took:8.2f} {limit:8.1f} {fraction:6.0%}")


def _spin() -> None:
    while True:
        pass


def main() -> None:
    if "--margins" in sys.argv:
        busy = int(sys.argv[sys.argv.index("--busy") + 1]) if "--busy" in sys.argv else 0
        margins(busy)
        return
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    # alternate the two modes, so that a change in the machine's load hits both alike
    times: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for _ in range(repeats):
        for assignment in ASSIGNMENTS:
            for unsafe in (True, False):
                use(unsafe)
                result = (time_checks(assignment), time_kernel(assignment))
                times.setdefault((assignment, unsafe), []).append(result)
    plain = {a: tuple(map(min, zip(*times[(a, True)], strict=True))) for a in ASSIGNMENTS}
    boxed = {a: tuple(map(min, zip(*times[(a, False)], strict=True))) for a in ASSIGNMENTS}
    print(f"\nseconds per notebook (best of {repeats}); plain processes vs bubblewrap")
    print(f"{'notebook':>16} | {'checks plain':>12} {'bwrap':>7} {'ratio':>6} | "
          f"{'kernel plain':>12} {'bwrap':>7} {'ratio':>6}")  # fmt: skip
    for assignment in ASSIGNMENTS:
        (cp, kp), (cb, kb) = plain[assignment], boxed[assignment]
        print(f"{assignment:>16} | {cp:12.2f} {cb:7.2f} {cb / cp:6.2f} | "
              f"{kp:12.2f} {kb:7.2f} {kb / kp:6.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
