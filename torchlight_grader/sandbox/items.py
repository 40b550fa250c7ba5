"""Running one notebook's cells and hidden checks in a sandbox (:func:`run_items`), and what
became of each cell and item (:class:`Run`, :class:`CellRecord`, :class:`Outcome`)."""

from __future__ import annotations

import secrets
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torchlight_grader.sandbox.limits import Limits
from torchlight_grader.sandbox.process import Sandbox
from torchlight_grader.sandbox.spares import open_sandbox


@dataclass
class Outcome:
    """What became of one item: its decoded result, or why there is none."""

    result: dict[str, Any] | None = None
    problem: str | None = None
    output_bytes: int = 0
    output_tail: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class CellRecord:
    """What became of one cell in the sandbox: ``ok``, ``error``, ``timeout`` (killed and
    skipped), ``ended`` (the process exited; skipped) or ``not run``."""

    name: str
    status: str
    error: str = ""
    exhausted: bool = False  # ran out of memory or printed past the output limit
    output_bytes: int = 0


@dataclass
class Run:
    """One notebook's sandbox run: the cells' records and each item's outcome."""

    cells: list[CellRecord] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)


def run_items(
    notebook: str,
    cells: Sequence[dict[str, str]],
    items: Sequence[dict[str, Any]],
    limits: Limits,
    forbidden: Sequence[str] = (),
    ahead: bool = False,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
    environ: Sequence[tuple[str, str]] = (),
    deadline: float | None = None,
) -> Run:
    """Run the cells once and then each item, in one sandbox, within ``limits.budget`` seconds.

    ``cells`` are ``{"name", "source"}`` in notebook order; ``items`` are
    ``{"id", "spec", "cases", "timeout"}`` (a spec's ``paced_bytes``: the memory the broker
    shares with the student side to pace a speed item, :mod:`~torchlight_grader.sandbox.inside.
    paced`). Items the sandbox never reached because it died get
    one more try in a fresh sandbox, within the same budget. ``ahead``: start the next
    notebook's sandbox now (:func:`open_sandbox`). ``overlays``, ``masks``: see :func:`command`
    (the grader-built library the checks run against). ``environ``: environment variables the
    sandbox sets before the first cell (``NUMBA_ENABLE_CUDASIM`` for a2c's CUDA items).
    ``deadline``: a ``time.monotonic()`` instant shared by all of one notebook's sandboxes (its
    one budget); by default ``limits.budget`` seconds from now.
    """
    run = Run()
    if deadline is None:
        deadline = time.monotonic() + limits.budget
    remaining = list(items)
    for _attempt in range(2):
        if not remaining or time.monotonic() >= deadline:
            break
        remaining = _one_sandbox(
            notebook,
            cells,
            remaining,
            limits,
            forbidden,
            deadline,
            run,
            ahead,
            overlays,
            masks,
            environ,
        )
    for item in remaining:
        if item["id"] not in run.outcomes:
            run.outcomes[item["id"]] = Outcome(
                problem=(
                    f"the notebook's time budget of {limits.budget:g} s ran out before this "
                    "check ran"
                    if time.monotonic() >= deadline
                    else "the grading sandbox stopped before this check ran"
                )
            )
    return run


def _one_sandbox(
    notebook: str,
    cells: Sequence[dict[str, str]],
    items: Sequence[dict[str, Any]],
    limits: Limits,
    forbidden: Sequence[str],
    deadline: float,
    run: Run,
    ahead: bool,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
    environ: Sequence[tuple[str, str]] = (),
) -> list[dict[str, Any]]:
    """One sandbox over ``items``; returns the items it never reached."""
    box = open_sandbox(
        "child.py", limits, forbidden, as_pid_1=True, ahead=ahead, overlays=overlays, masks=masks
    )
    try:
        request = {
            "notebook": notebook,
            "cells": list(cells),
            "budget": max(0.0, deadline - time.monotonic()),
            "environ": dict(environ),
            # a region the broker shares with the student side, for items it paces itself
            "paced_bytes": max(
                (int(item["spec"].get("paced_bytes") or 0) for item in items), default=0
            ),
            "limits": {
                "memory": limits.memory,
                "output": limits.output,
                "cell_timeout": limits.cell_timeout,
                "processes": limits.processes,
            },
        }
        if not box.send(request, deadline):
            return list(items)
        message = box.receive(deadline)
        while message is not None and "cells" not in message:
            message = box.receive(deadline)  # frames a cell wrote itself: ignored
        if message is None:
            return list(items)
        if not run.cells:
            run.cells = _cells(cells, message.get("cells"), limits)
        for n, item in enumerate(items):
            nonce = secrets.token_hex(16)
            timeout = min(float(item["timeout"]), max(0.0, deadline - time.monotonic()))
            if timeout <= 0:
                return list(items[n:])
            ask = {**item, "nonce": nonce, "timeout": timeout}
            if not box.send(ask, deadline):
                return list(items[n:])
            outcome = _collect(box, item, nonce, timeout, limits, deadline)
            if outcome is None:
                return list(items[n:])
            run.outcomes[item["id"]] = outcome
        box.send({"end": True}, min(deadline, time.monotonic() + 2))
        return []
    finally:
        box.close()  # what it had to say is read: end it now, without waiting for its exit


def _cells(cells: Sequence[dict[str, str]], reported: Any, limits: Limits) -> list[CellRecord]:
    by_index = {}
    if isinstance(reported, list):
        by_index = {r.get("index"): r for r in reported if isinstance(r, dict)}
    records = []
    for index, cell in enumerate(cells):
        r = by_index.get(index, {})
        size = r.get("output_bytes", 0)
        size = size if isinstance(size, int) else 0
        records.append(
            CellRecord(
                name=cell["name"],
                status=str(r.get("status", "not run")),
                error=str(r.get("error", "")),
                exhausted=bool(r.get("exhausted")) or size >= limits.output,
                output_bytes=size,
            )
        )
    return records


def _collect(
    box: Sandbox,
    item: dict[str, Any],
    nonce: str,
    timeout: float,
    limits: Limits,
    deadline: float,
) -> Outcome | None:
    """The item's result frame (its own process, right nonce) and the main line's status."""
    ident, result = item["id"], None
    item_deadline = min(deadline, time.monotonic() + timeout + 5.0)
    while True:
        message = box.receive(item_deadline)
        if message is None:
            return None  # the sandbox died, broke the protocol, or ran out of time
        if message.get("nonce") != nonce:
            continue  # a frame student code wrote: it cannot know this item's nonce
        if message.get("result") == ident and result is None:
            result = message
        elif message.get("status") == ident:
            status = message
            break
    tail = status.get("output_tail")
    size = status.get("output_bytes")
    outcome = Outcome(
        output_bytes=size if isinstance(size, int) else 0,
        output_tail=tail if isinstance(tail, str) else "",
        details={k: status.get(k) for k in ("timed_out", "signal", "exit_code", "cpu_seconds")},
    )
    if status.get("timed_out"):
        outcome.problem = (
            f"your code was stopped after {timeout:g} s (an infinite loop, or far too slow)"
        )
    elif outcome.output_bytes >= limits.output:
        outcome.problem = (
            f"your code printed or wrote more than {limits.output // 1024} KiB; remove the "
            "large prints"
        )
    elif result is None or status.get("exit_code") != 0:
        sig = status.get("signal")
        if sig == signal.SIGXCPU:
            outcome.problem = "your code used too much CPU time (an infinite loop?)"
        elif isinstance(sig, int):
            outcome.problem = f"your code was killed by signal {_signal_name(sig)}"
        else:
            outcome.problem = (
                f"your code ended the Python process (exit code {status.get('exit_code')}) "
                "before the check finished: do not call os._exit, sys.exit or kill processes "
                "in an answer"
            )
    elif not isinstance(result.get("cases"), list):
        outcome.problem = "the grader could not read the results of your code"
    else:
        outcome.result = {"cases": result["cases"]}
    return outcome


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)
