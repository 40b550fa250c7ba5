"""Spare sandboxes: the next notebook's sandbox started while the current one runs, so that
Python's start-up is off the critical path. A spare has seen no student code when it is handed
out, and is handed out only for exactly the arguments it was built from."""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Sequence
from typing import Any

from torchlight_grader.sandbox.bwrap import ensure_available
from torchlight_grader.sandbox.inside import wire
from torchlight_grader.sandbox.limits import Limits
from torchlight_grader.sandbox.process import STARTUP_S, Sandbox

_SPARES: dict[str, tuple[tuple[Any, ...], Sandbox]] = {}  # script -> (key, started sandbox)
_PLAN: dict[str, Any] = {"notebooks": None, "opened": {}}


def plan(notebooks: int | None) -> None:
    """How many notebooks this process will still grade (``None``: not known).

    :func:`open_sandbox` then starts no spare that no notebook would use (after the last one);
    without a plan it always starts one, and the last is ended unused when the process ends.
    """
    _PLAN["notebooks"], _PLAN["opened"] = notebooks, {}


def open_sandbox(
    script: str,
    limits: Limits,
    forbidden: Sequence[str] = (),
    as_pid_1: bool = False,
    settings: dict[str, Any] | None = None,
    ahead: bool = False,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
) -> Sandbox:
    """A fresh sandbox running ``script``, used by nobody before, with ``settings`` (if any)
    already sent as its first line.

    With ``ahead``, another one like it is started now, for the next call: it imports while
    this one works, and waits (without any student code) until it is handed out. A spare
    whose arguments differ, or that has ended, is closed instead of used. Only the main thread
    keeps spares (``--die-with-parent`` ends a sandbox when the thread that started it ends).
    """
    key = _key(script, limits, forbidden, as_pid_1, settings, overlays, masks)
    opened = _PLAN["opened"][script] = _PLAN["opened"].get(script, 0) + 1
    more = _PLAN["notebooks"] is None or opened < _PLAN["notebooks"]
    box = None
    if script in _SPARES:
        spare_key, spare = _SPARES.pop(script)
        if spare_key == key and spare.proc.poll() is None:
            box = spare
        else:
            spare.close()
    if box is None:
        box = _started(script, limits, forbidden, as_pid_1, settings, overlays, masks)
    if ahead and more and threading.current_thread() is threading.main_thread():
        spare = _started(script, limits, forbidden, as_pid_1, settings, overlays, masks)
        _SPARES[script] = (key, spare)
    return box


def prepare(
    script: str,
    limits: Limits,
    forbidden: Sequence[str] = (),
    as_pid_1: bool = False,
    settings: dict[str, Any] | None = None,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
) -> None:
    """Start now the sandbox that the next :func:`open_sandbox` with these arguments gets (a
    spare, as ``ahead`` starts one), unless one like it is waiting already.

    For a sandbox whose arguments depend on the notebook (the hidden checks' grader-built
    library), which a spare started while the previous notebook ran cannot know: the grader
    calls this as soon as it knows which notebook comes (while nbgrader sanitizes it), so the
    sandbox imports meanwhile; it sees no student code until :func:`open_sandbox` hands it
    out. A waiting spare of ``script`` with other arguments is
    closed (only one spare per script waits). Main thread only, as for ``ahead``.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    key = _key(script, limits, forbidden, as_pid_1, settings, overlays, masks)
    if script in _SPARES:
        spare_key, spare = _SPARES[script]
        if spare_key == key and spare.proc.poll() is None:
            return
        del _SPARES[script]
        spare.close()
    box = _started(script, limits, forbidden, as_pid_1, settings, overlays, masks)
    _SPARES[script] = (key, box)


def _key(
    script: str,
    limits: Limits,
    forbidden: Sequence[str],
    as_pid_1: bool,
    settings: dict[str, Any] | None,
    overlays: Sequence[tuple[str, str]],
    masks: Sequence[str],
) -> tuple[Any, ...]:
    """Everything a started sandbox was built from: a spare is handed out only for the same."""
    return (script, limits, tuple(forbidden), as_pid_1, wire.dumps(settings), ensure_available(),
            tuple(overlays), tuple(masks))  # fmt: skip


def _started(
    script: str,
    limits: Limits,
    forbidden: Sequence[str],
    as_pid_1: bool,
    settings: dict[str, Any] | None,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
) -> Sandbox:
    box = Sandbox(script, limits, forbidden, as_pid_1, overlays, masks)
    if settings is not None:
        box.send(settings, time.monotonic() + STARTUP_S)
    return box


@atexit.register
def close_spares() -> None:
    """End every spare sandbox (they would also die with this process)."""
    while _SPARES:
        _, (_, box) = _SPARES.popitem()
        box.close()
