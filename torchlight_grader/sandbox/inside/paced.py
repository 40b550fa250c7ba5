"""A paced speed item: the sandbox's broker times the student's kernel from outside its process.

This file runs *inside* the sandbox, like :mod:`kernels`. Its two halves run in two processes:

- the **student side** (:func:`serve`), in the item's own process, next to the student's code:
  it compiles the student's kernel, says it is ready, then runs the kernel once each time the
  broker says go, on the inputs the broker has just written, into the output the broker reads;
- the **broker** (:func:`measure`), the sandbox's first process, where no student code ever
  runs (:mod:`child`): it draws every pair's inputs from a seed of its own, the moment the pair
  starts, times the student's call on its own wall clock from "go" to "done", counts the CPU
  time the student side used meanwhile from outside that process (``/proc``), copies the output
  out at "done", and runs the reference kernel itself, between the student's calls, in its own
  process. It runs the grader's paired protocol (:mod:`torchlight_grader.checks.timing`, whose
  source the grader sends) with these two calls as its thunks.

So nothing the student's process computes or reports is trusted for a speed item: no clock
there is read, the inputs do not exist before the pair's timed call starts (no result can be
computed ahead), an answer completed after "done" is not seen, and the reference kernel runs
where no student code can reach it. What the student side could still do is slow the reference
down, by running something of its own while the reference is timed: the broker counts the CPU
time the student side uses during each reference call (``disturbance``), and the grader judges
it (:mod:`torchlight_grader.checks.a2c_kernels`).

The two sides share one memory region (``MAP_SHARED``, mapped before the student side was
forked) holding three ``n x n`` float64 matrices (the inputs, then the output), and two pipes:
``go`` (broker to student side: ``g`` per call, ``e`` at the end) and ``back`` (student side to
broker: ``r`` when ready, ``d`` per call done). Every process of the student side holds these
ends; one that writes or reads out of turn harms only its own item (an early ``d`` shows an
unfinished output, which disagrees with the reference).
"""

from __future__ import annotations

import mmap
import os
import secrets
import select
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def region_bytes(n: int) -> int:
    """The shared region an ``n x n`` speed item needs: three float64 matrices."""
    return 3 * int(n) * int(n) * 8


def _parts(buffer: Any, kind: str, n: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """``(inputs, out)`` as the kernels read and write them, on ``buffer`` (the shared region or
    the broker's own copy): for ``map`` one matrix read transposed, for ``matmul`` two."""
    flat = np.frombuffer(buffer, dtype=np.float64, count=3 * n * n)
    first, second, out = (flat[i * n * n : (i + 1) * n * n].reshape(n, n) for i in range(3))
    return ((first.T,) if kind == "map" else (first, second)), out


# ------------------------------------------------------------------------------ student side
def serve(kernel: Any, kind: str, n: int, pacing: dict[str, Any], call: Callable[..., Any]
          ) -> None:  # fmt: skip
    """Run ``kernel`` on the shared inputs each time the broker says go, until it says end.
    ``call(kernel, kind, inputs, out)`` makes the thunk (:func:`kernels.call`)."""
    inputs, out = _parts(pacing["region"], kind, n)
    thunk = call(kernel, kind, inputs, out)
    thunk()  # compiled here, untimed (the broker's first pair is an untimed warm-up too)
    go, back = pacing["go"], pacing["back"]
    os.write(back, b"r")
    while os.read(go, 1) == b"g":
        thunk()
        os.write(back, b"d")


# ------------------------------------------------------------------------------ broker
class _StudentCall:
    """The broker's thunk for the student's call on one pair's inputs (see the module)."""

    def __init__(self, pacing: dict[str, Any], kind: str, n: int, deadline: float) -> None:
        self.inputs, self.out = _parts(pacing["region"], kind, n)
        self.go, self.back, self.deadline = pacing["go"], pacing["back"], deadline

    def __call__(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        for shared, value in zip(self.inputs, inputs, strict=True):
            shared[...] = value
        self.out[...] = np.nan
        _drain(self.back)  # a "d" sent out of turn does not end this call
        os.write(self.go, b"g")
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("your kernel did not return in the item's time")
            ready, _, _ = select.select([self.back], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.back, 4096)
            if not chunk:
                raise RuntimeError("your kernel's process ended during a timed call")
            if b"d" in chunk:
                return np.array(self.out)  # copied now: what is written later is not seen


class _ReferenceCall:
    """The broker's thunk for the reference kernel on one pair's inputs, with the same copies in
    and out as the student's call."""

    def __init__(self, reference: Any, kind: str, n: int, call: Callable[..., Any]) -> None:
        self.inputs, self.out = _parts(mmap.mmap(-1, region_bytes(n)), kind, n)  # page-aligned
        self.thunk = call(reference, kind, self.inputs, self.out)

    def __call__(self, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        for own, value in zip(self.inputs, inputs, strict=True):
            own[...] = value
        self.out[...] = np.nan
        self.thunk()
        return np.array(self.out)


def _drain(fd: int) -> None:
    while select.select([fd], [], [], 0)[0]:
        if not os.read(fd, 4096):
            return


def measure(args: list[Any], pacing: dict[str, Any], deadline: float,
            student_cpu: Callable[[], float]) -> dict[str, Any]:  # fmt: skip
    """The paired protocol, paced by the broker, once the student side said it is ready.

    ``args``: the item's case as the grader sent it (``[seed, kind, size, pairs, attempts,
    threads, [max_spread, min_share], protocol source]``; the seed is not used: the inputs come
    from a seed drawn here, which no student process ever sees). ``student_cpu()``: the CPU
    seconds the student side has used so far, counted from ``/proc``. Returns the protocol's
    measurement (:func:`~torchlight_grader.checks.timing.time_fairly`) on the broker's clocks, a
    pair's CPU times being the broker's own plus the student side's, with ``paced`` and the
    last measurement's ``disturbance``, the student side's CPU seconds during each timed
    reference call."""
    import kernels
    import runners

    _, kind, n, pairs, attempts, threads, (spread, share), source = args
    kind, n = str(kind), int(n)
    timing = kernels.protocol(source)  # the grader's source
    seed = secrets.randbits(62)
    student = _StudentCall(pacing, kind, n, deadline)
    reference = _ReferenceCall(kernels.reference(kind), kind, n, kernels.call)
    readings: list[float] = []  # the student side's CPU seconds at every read of the CPU clock

    def fresh(k: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
        inputs = kernels.speed_inputs(seed, kind, n, k)
        return (lambda: student(inputs)), (lambda: reference(inputs))

    def both_clocks() -> float:  # read just outside each timed call's wall-clock span
        readings.append(student_cpu())
        return time.process_time() + readings[-1]

    def one() -> dict[str, Any]:
        readings.clear()
        measured = timing.time_pairs(fresh, runners._agree, pairs=int(pairs), warmup=1,
                                     clocks=(time.perf_counter, both_clocks))  # fmt: skip
        # two readings per timed call, four per pair, in the pair's order ("SR" or "RS")
        if len(readings) != 4 * len(measured["pairs"]):
            raise RuntimeError("the protocol read its CPU clock other than twice per timed call")
        disturbance = []
        for k, pair in enumerate(measured["pairs"]):
            at = 4 * k + (0 if pair["order"].startswith("R") else 2)
            disturbance.append(readings[at + 1] - readings[at])
        return {**measured, "disturbance": disturbance}

    fairness = timing.Fairness(max_spread=float(spread), min_share=float(share))
    try:
        measured = timing.time_fairly(one, threads=int(threads), attempts=int(attempts),
                                      fairness=fairness)  # fmt: skip
    except (OSError, RuntimeError, TimeoutError) as exc:
        # the student side hung or ended mid-call: no "e", which nobody would read now and the
        # next speed item's process would take for its own end
        return {"pairs": [], "failed": str(exc), "paced": True}
    os.write(pacing["go"], b"e")
    return {**measured, "paced": True}
