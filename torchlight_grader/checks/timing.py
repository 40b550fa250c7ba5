r"""Grading a kernel's speed fairly: paired, alternating timings against a reference kernel.

A speed item asks "is the student's kernel at most $X$ times slower than a reference kernel on
this machine, now?". Timing one run of each is unfair on a shared machine (a neighbour's burst
lands on one of them) and gameable (a kernel that remembers its last answer is fast the second
time). The protocol below answers both, and it is the same for every speed item of the course.

**Measuring** (:func:`time_pairs`, :func:`time_fairly`; standard library only, so it runs in
whatever process holds the kernels: the grading sandbox, next to the student's code):

1. a warm-up call of each kernel, untimed, so that JIT compilation (numba) is not timed;
2. ``pairs`` pairs of timed calls, alternating the order (student then reference, then
   reference then student: a slow drift of the machine's speed cancels out), each pair on
   **fresh inputs** drawn for that pair (``fresh(k)``), so that a kernel that caches a result,
   skips work, or answers from its inputs' identity (``id``, a hash of the buffer) cannot
   reuse anything;
3. after every pair, the student's output is compared with the reference's (``agree``); a pair
   that disagrees is recorded, and a single one costs the speed credit;
4. every timed call records wall time and the process's CPU time (all its threads).

The clocks are bound when this module is imported (default arguments): a student's cell that
later rebinds ``time.perf_counter`` does not reach them. Where the timed calls run in the
student's process, whatever reads the clocks there can be replaced too: the speed items that
use this protocol check what comes back against what the grader can count from outside that
process (a2c's and a6's ``tampered``) and grade the larger of the wall-time and CPU-time ratios.

**Fairness** (:func:`unfair`): a measurement is not used when the reference's own wall times
spread too widely (median absolute deviation over the median above ``max_spread``), or when the
process was starved (the reference's CPU time over wall time, per thread it may use, below
``min_share``): the machine was too loaded to time fairly. :func:`time_fairly` then measures
again, at most ``attempts`` times in all.

**Judging** (:func:`judge`, in the grader): the score is the **median of the per-pair ratios**
student/reference (robust to a burst that hits one pair), compared with thresholds the notebook
states (:class:`Thresholds`: full credit at or below ``full``, partial at or below
``partial``). The outcome is one of

- ``"fast"`` / ``"partial"`` / ``"slow"``: the ratio against the thresholds;
- ``"wrong"``: an output disagreed with the reference in some pair (or the kernel raised): no
  speed credit, whatever the time;
- ``"untimed"``: still unfair after every attempt. This is **never a silent zero**: the item
  scores nothing *for now*, and the message says the item could not be timed, why, and that it
  is held for a re-run (the course's integrity report lists it, :data:`HELD`). It never earns
  points either, since a notebook could load the machine on purpose.

The learner's message always shows the measured ratio and the thresholds.

Example (in one process; the grader runs the measuring half in the sandbox)::

    >>> import numpy as np
    >>> def fresh(k):
    ...     x = np.random.default_rng(k + 10).random(10_000)
    ...     return (lambda: np.sort(x)), (lambda: np.sort(x, kind="stable"))
    >>> m = time_pairs(fresh, lambda s, r: bool(np.array_equal(s, r)), pairs=5)
    >>> judge(m, Thresholds(full=50.0, partial=100.0), threads=1).status
    'fast'
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The words every held (untimed) speed verdict starts with: the integrity report looks for them.
HELD = "could not time fairly:"

Thunk = Callable[[], Any]


@dataclass(frozen=True)
class Fairness:
    """When a measurement is too noisy to grade from.

    Attributes:
        max_spread: the largest median absolute deviation of the reference's wall times, as a
            share of their median.
        min_share: the smallest CPU time / (wall time x threads) of the reference's runs
            (median): below it, the process waited for a CPU most of the time.
    """

    max_spread: float = 0.35
    min_share: float = 0.2


@dataclass(frozen=True)
class Thresholds:
    """Full credit at ``ratio <= full``, partial credit at ``ratio <= partial``."""

    full: float
    partial: float

    def __post_init__(self) -> None:
        if not 0 < self.full <= self.partial:
            raise ValueError(
                f"thresholds must satisfy 0 < full <= partial, got full={self.full}, "
                f"partial={self.partial}"
            )


@dataclass(frozen=True)
class SpeedVerdict:
    """What :func:`judge` decided: ``status`` (fast, partial, slow, wrong, untimed), the median
    ratio (None when there is none), and the message the learner reads."""

    status: str
    ratio: float | None
    message: str


# ------------------------------------------------------------------------------ measuring
def time_pairs(
    fresh: Callable[[int], tuple[Thunk, Thunk]],
    agree: Callable[[Any, Any], bool],
    *,
    pairs: int = 9,
    warmup: int = 1,
    clocks: tuple[Callable[[], float], Callable[[], float]] = (
        time.perf_counter,
        time.process_time,
    ),
) -> dict[str, Any]:
    """Time ``pairs`` alternating pairs of (student, reference) calls on fresh inputs.

    Args:
        fresh: ``fresh(k)`` draws pair ``k``'s inputs and returns two thunks, the student's
            call and the reference's, each with its own output buffer; each returns its output.
            Warm-up calls use ``k < 0``.
        agree: ``agree(student_output, reference_output)``: whether the student's is right.
        pairs: how many timed pairs.
        warmup: how many untimed pairs first (JIT compilation, caches).
        clocks: the wall clock and the process CPU clock (bound at import).

    Returns:
        Plain data (it crosses the sandbox's pipe): ``{"pairs": [{"student", "reference",
        "student_cpu", "reference_cpu", "agree", "order"}, ...], "failed": None}``, times in
        seconds; ``failed`` names the first disagreement of a warm-up call, which stops the
        measurement (nothing is timed).
    """
    if pairs < 1:
        raise ValueError(f"pairs must be at least 1, got {pairs}")
    wall, cpu = clocks
    for k in range(warmup):
        student, reference = fresh(-1 - k)
        if not agree(student(), reference()):
            return {"pairs": [], "failed": "the kernel's output disagrees with the reference's"}
    record = []
    for k in range(pairs):
        student, reference = fresh(k)
        order = "SR" if k % 2 == 0 else "RS"
        times: dict[str, float] = {}
        outputs: dict[str, Any] = {}
        for who in order:
            call = student if who == "S" else reference
            c0, w0 = cpu(), wall()
            outputs[who] = call()
            w1, c1 = wall(), cpu()
            name = "student" if who == "S" else "reference"
            times[name], times[f"{name}_cpu"] = w1 - w0, c1 - c0
        ok = bool(agree(outputs["S"], outputs["R"]))
        record.append({**times, "agree": ok, "order": order})
    return {"pairs": record, "failed": None}


def unfair(
    measurement: dict[str, Any], threads: int = 1, fairness: Fairness | None = None
) -> str | None:
    """Why ``measurement`` cannot be graded from (the machine was too loaded), or None."""
    fairness = fairness or Fairness()
    pairs = measurement.get("pairs") or []
    if measurement.get("failed") or not pairs:
        return None  # nothing was timed: a wrong kernel, not a loaded machine
    walls = [float(p["reference"]) for p in pairs]
    median = statistics.median(walls)
    if median <= 0:
        return "the reference's runs were too short for the clock"
    spread = statistics.median(abs(w - median) for w in walls) / median
    if spread > fairness.max_spread:
        return (
            f"the reference kernel's own times varied by {spread:.0%} (at most "
            f"{fairness.max_spread:.0%} is fair)"
        )
    shares = [float(p["reference_cpu"]) / (float(p["reference"]) * threads) for p in pairs]
    share = statistics.median(shares)
    if share < fairness.min_share:
        return (
            f"the grading process ran on a CPU only {share:.0%} of the time it was timed (at "
            f"least {fairness.min_share:.0%} is fair): the machine was busy"
        )
    return None


def time_fairly(
    measure: Callable[[], dict[str, Any]],
    *,
    threads: int = 1,
    attempts: int = 3,
    fairness: Fairness | None = None,
) -> dict[str, Any]:
    """``measure()`` (a :func:`time_pairs`) again while :func:`unfair` says the machine was too
    loaded, at most ``attempts`` times; the last measurement, with ``"attempts"`` (how many
    were made) and ``"unfair"`` (each rejected attempt's reason) added."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    reasons: list[str] = []
    measurement: dict[str, Any] = {}
    made = 0
    while made < attempts:
        measurement, made = measure(), made + 1
        why = unfair(measurement, threads, fairness)
        if why is None:
            break
        reasons.append(why)
    return {**measurement, "attempts": made, "unfair": reasons}


# ------------------------------------------------------------------------------ judging
def held(why: str, where: str = "") -> SpeedVerdict:
    """The verdict on a measurement that cannot be graded from (``why``): the item scores
    nothing for now and is held for a re-run (``where``: on what, and the thresholds)."""
    return SpeedVerdict("untimed", None, (
        f"{HELD} {why}. This item scores nothing for now and is held for a re-run{where}"))  # fmt: skip


def ratios(measurement: dict[str, Any]) -> list[float]:
    """Student time over reference time, per pair (wall clock)."""
    return [float(p["student"]) / max(float(p["reference"]), 1e-9) for p in measurement["pairs"]]


def judge(
    measurement: dict[str, Any],
    thresholds: Thresholds,
    *,
    threads: int = 1,
    fairness: Fairness | None = None,
    what: str = "your kernel",
) -> SpeedVerdict:
    """The verdict on one measurement (from :func:`time_fairly`; re-checked here, never
    trusted): see the module's docstring for the statuses."""
    stated = (
        f"full credit at <= {thresholds.full:g}x the reference's time, partial at <= "
        f"{thresholds.partial:g}x"
    )
    pairs = measurement.get("pairs") or []
    if measurement.get("failed") or not pairs:
        why = measurement.get("failed") or "nothing was timed"
        return SpeedVerdict("wrong", None, f"{what} earns no speed credit: {why}")
    bad = [k for k, p in enumerate(pairs) if not p.get("agree")]
    if bad:
        return SpeedVerdict(
            "wrong",
            None,
            f"{what} earns no speed credit: its output disagreed with the reference's on the "
            f"fresh inputs of timed pair {bad[0] + 1} of {len(pairs)} ({len(bad)} pair(s) in "
            "all); every pair gets new inputs, so a kernel must do the whole work every call",
        )
    why = unfair(measurement, threads, fairness)
    if why is not None:
        tries = measurement.get("attempts", 1)
        return held(f"{why}, in all {tries} attempt(s)",
                    f" on a quieter machine ({stated}); your kernel's results were right")  # fmt: skip
    ratio = statistics.median(ratios(measurement))
    shown = (
        f"{what} took {ratio:.2f}x the reference kernel's time (median of {len(pairs)} "
        f"alternating pairs on fresh inputs; {stated})"
    )
    if ratio <= thresholds.full:
        return SpeedVerdict("fast", ratio, shown)
    if ratio <= thresholds.partial:
        return SpeedVerdict("partial", ratio, shown)
    return SpeedVerdict("slow", ratio, shown)


def judge_wall_and_cpu(
    measurement: dict[str, Any],
    thresholds: Thresholds,
    *,
    threads: int = 1,
    fairness: Fairness | None = None,
    what: str = "your kernel",
) -> SpeedVerdict:
    """:func:`judge` on the pairs' wall times and on their CPU times (``student_cpu``,
    ``reference_cpu``), the larger ratio graded: a clock the student's code replaced in the
    process where it is timed moves one of the two, not both (a6's and a2c's speed items, after
    their checks of the report against the CPU time counted outside that process)."""
    wall = judge(measurement, thresholds, threads=threads, fairness=fairness, what=what)
    if wall.ratio is None:
        return wall
    on_cpu = {**measurement, "pairs": [{**p, "student": p["student_cpu"],
                                        "reference": p["reference_cpu"]}
                                       for p in measurement["pairs"]]}  # fmt: skip
    cpu = judge(on_cpu, thresholds, threads=threads, fairness=fairness, what=what)
    if cpu.ratio is None:
        return cpu
    worse = max(wall, cpu, key=lambda v: v.ratio or 0.0)
    return SpeedVerdict(worse.status, worse.ratio, (
        f"{wall.message}; in CPU time {cpu.ratio:.2f}x (the larger of the two is graded)"))  # fmt: skip


def miscounted(
    received: dict[str, Any], *, slack: float, share: float, what: str = "your kernel",
    least: float = 0.0,
) -> SpeedVerdict | None:  # fmt: skip
    """The sandbox's report against the CPU time its broker counted from outside the student's
    process (``counted_cpu``): none counted holds the item; a runner's CPU clock
    (``reported_cpu``) more than ``slack`` seconds or ``share`` of it away, or below ``least``
    (what the kernel's timer counted before it stopped a call), was changed while the student's
    code ran (no speed credit). None when they agree."""
    counted, reported = received.get("counted_cpu"), received.get("reported_cpu")
    if not isinstance(counted, int | float):
        return held("the sandbox could not count your process's CPU time from outside it")
    if (isinstance(reported, int | float) and reported >= least
            and abs(counted - reported) <= max(slack, share * counted)):  # fmt: skip
        return None
    shown = f"{reported:.2f} s" if isinstance(reported, int | float) else "nothing"
    return SpeedVerdict("wrong", None, (
        f"{what} earns no speed credit: the grader's CPU clock in your sandbox saw {shown}, but "
        f"the sandbox counted {counted:.2f} s from outside your process: the grader's clocks "
        "were changed while your code ran"))  # fmt: skip


def drifted(pairs: list[dict[str, Any]], mine: Any, drift: float, reference: str
            ) -> SpeedVerdict | None:  # fmt: skip
    """The reference's CPU time in the sandbox (median over ``pairs``) against the grader's own
    run of it on the same inputs (``mine``): more than ``drift`` times apart, the item is held."""
    theirs = sorted(float(p["reference_cpu"]) for p in pairs)[len(pairs) // 2]
    if not isinstance(mine, int | float) or mine <= 0 or 1 / drift <= theirs / mine <= drift:
        return None
    return held(f"{reference} took {theirs:.3g} s of CPU time in your sandbox and {mine:.3g} s "
                f"in the grader (at most {drift:g}x apart is fair)")  # fmt: skip


def points(verdict: SpeedVerdict, level: str) -> bool:
    """Whether a speed cell of ``level`` ("full" or "partial") passes: a "partial" cell passes
    on fast or partial, a "full" cell on fast only."""
    if level not in ("full", "partial"):
        raise ValueError(f"level must be 'full' or 'partial', got {level!r}")
    return verdict.status == "fast" or (level == "partial" and verdict.status == "partial")
