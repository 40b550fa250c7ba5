"""The speed protocol (torchlight_grader/checks/timing.py): paired, alternating runs on fresh
inputs, the outputs compared after every pair, the median ratio against stated thresholds, and
"could not time" (held, never a silent zero) on a machine too loaded to time fairly.

Statuses are checked with scripted clocks (a real clock would make these timed assertions);
the tests that use real calls check only what does not depend on the machine's speed: what is
called, in which order, on which inputs, and what a kernel that cheats gets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from torchlight_grader.checks import timing
from torchlight_grader.checks.timing import Fairness, Thresholds


class Script:
    """Clocks that advance by scripted amounts: each call's (wall, cpu) duration in turn."""

    def __init__(self, durations: Iterator[tuple[float, float]]) -> None:
        self.wall = self.cpu = 0.0
        self.durations = durations
        self.pending: tuple[float, float] | None = None

    def clocks(self) -> tuple[Callable[[], float], Callable[[], float]]:
        return self.wall_clock, self.cpu_clock

    def cpu_clock(self) -> float:  # read first before a call, last after it
        if self.pending is not None:
            self.cpu += self.pending[1]
            self.pending = None
        return self.cpu

    def wall_clock(self) -> float:
        return self.wall

    def advance(self) -> None:
        wall, cpu = next(self.durations)
        self.wall += wall
        self.pending = (wall, cpu)


def scripted(student: list[float], reference: list[float], cpu_share: float = 1.0,
             agree: bool = True) -> dict[str, Any]:  # fmt: skip
    """A measurement whose k-th student and reference calls take the given wall seconds."""
    calls: list[str] = []

    def fresh(k: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
        def s() -> str:
            calls.append("S")
            return "s"

        def r() -> str:
            calls.append("R")
            return "r"

        return s, r

    durations = []
    for k, (s, r) in enumerate(zip(student, reference, strict=True)):
        pair = [(s, s * cpu_share), (r, r * cpu_share)]
        durations += pair if k % 2 == 0 else pair[::-1]
    script = Script(iter(durations))

    # the clocks move when a timed call runs (warm-up calls, k < 0, take no time)
    def fresh_timed(k: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
        s, r = fresh(k)

        def st() -> Any:
            script.advance()
            return s()

        def rt() -> Any:
            script.advance()
            return r()

        return (st, rt) if k >= 0 else ((lambda: "warm-up"), (lambda: "warm-up"))

    def agrees(s: str, r: str) -> bool:  # the warm-up agrees; the timed pairs as told
        return agree or s == "warm-up"

    return timing.time_pairs(fresh_timed, agrees, pairs=len(student), warmup=1,
                             clocks=script.clocks())  # fmt: skip


THRESHOLDS = Thresholds(full=1.3, partial=4.0)


def test_median_ratio_against_the_thresholds() -> None:
    even = scripted([1.0] * 7, [1.0] * 7)
    assert even["pairs"][0]["order"] == "SR" and even["pairs"][1]["order"] == "RS"
    assert [p["student"] for p in even["pairs"]] == [1.0] * 7
    verdict = timing.judge(even, THRESHOLDS)
    assert verdict.status == "fast" and verdict.ratio == pytest.approx(1.0)
    assert (
        "1.00x" in verdict.message and "<= 1.3x" in verdict.message and "<= 4x" in verdict.message
    )
    # a burst that hits two pairs of seven moves the median by nothing
    burst = scripted([1.0, 9.0, 1.0, 1.0, 9.0, 1.0, 1.0], [1.0] * 7)
    assert timing.judge(burst, THRESHOLDS).ratio == pytest.approx(1.0)
    assert timing.judge(scripted([2.0] * 7, [1.0] * 7), THRESHOLDS).status == "partial"
    assert timing.judge(scripted([5.0] * 7, [1.0] * 7), THRESHOLDS).status == "slow"
    assert timing.points(timing.judge(scripted([2.0] * 7, [1.0] * 7), THRESHOLDS), "partial")
    assert not timing.points(timing.judge(scripted([2.0] * 7, [1.0] * 7), THRESHOLDS), "full")


def test_a_disagreeing_pair_earns_no_speed_credit() -> None:
    verdict = timing.judge(scripted([0.1] * 5, [1.0] * 5, agree=False), THRESHOLDS)
    assert verdict.status == "wrong" and "pair 1 of 5" in verdict.message
    assert not timing.points(verdict, "partial")


def test_a_loaded_machine_is_held_not_zeroed_silently() -> None:
    spread = scripted([1.0] * 7, [1.0, 3.0, 0.4, 2.5, 1.0, 0.3, 2.2])
    why = timing.unfair(spread)
    assert why is not None and "varied" in why
    verdict = timing.judge(spread, THRESHOLDS)
    assert verdict.status == "untimed" and verdict.message.startswith(timing.HELD)
    assert "held for a re-run" in verdict.message and "<= 1.3x" in verdict.message
    assert not timing.points(verdict, "partial")  # loading the machine on purpose earns nothing
    starved = scripted([1.0] * 5, [1.0] * 5, cpu_share=0.1)
    assert "busy" in (timing.unfair(starved) or "")
    # two threads may use two CPUs: half a share each is starved only against 0.6
    half = scripted([1.0] * 5, [1.0] * 5, cpu_share=1.0)
    assert timing.unfair(half, threads=2) is None
    assert timing.unfair(half, threads=2, fairness=Fairness(min_share=0.6)) is not None


def test_time_fairly_retries_a_bounded_number_of_times() -> None:
    noisy = scripted([1.0] * 5, [1.0, 4.0, 0.2, 3.0, 1.0])
    quiet = scripted([1.0] * 5, [1.0] * 5)
    answers = iter([noisy, noisy, quiet])
    m = timing.time_fairly(lambda: next(answers), attempts=3)
    assert m["attempts"] == 3 and len(m["unfair"]) == 2 and timing.judge(m, THRESHOLDS).ratio
    always = timing.time_fairly(lambda: noisy, attempts=2)
    assert always["attempts"] == 2 and timing.judge(always, THRESHOLDS).status == "untimed"
    assert "2 attempt(s)" in timing.judge(always, THRESHOLDS).message
    with pytest.raises(ValueError, match="attempts must be at least 1, got 0"):
        timing.time_fairly(lambda: quiet, attempts=0)


def test_bad_thresholds_and_levels_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match="0 < full <= partial, got full=3, partial=2"):
        Thresholds(full=3, partial=2)
    with pytest.raises(ValueError, match="'full' or 'partial', got 'half'"):
        timing.points(timing.judge(scripted([1.0], [1.0]), THRESHOLDS), "half")


# ------------------------------------------------------------------------------ real calls
def real(student: Callable[[np.ndarray], np.ndarray], pairs: int = 6) -> dict[str, Any]:
    """``student`` timed against ``np.sort`` on fresh arrays, with real clocks."""
    seen: list[int] = []

    def fresh(k: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
        x = np.random.default_rng(1000 + k).random(2000)
        seen.append(k)
        return (lambda: student(x.copy())), (lambda: np.sort(x))

    m = timing.time_pairs(fresh, lambda s, r: bool(np.array_equal(s, r)), pairs=pairs)
    if m["failed"] is None:
        assert seen == [-1, *range(pairs)], "one warm-up draw, then fresh inputs for every pair"
    return m


def test_real_calls_fresh_inputs_defeat_cached_and_partial_answers() -> None:
    assert all(p["agree"] for p in real(np.sort)["pairs"])
    remembered: dict[str, np.ndarray] = {}

    def caches(x: np.ndarray) -> np.ndarray:  # the answer of its first call, every call
        remembered.setdefault("answer", np.sort(x))
        return remembered["answer"]

    def skips(x: np.ndarray) -> np.ndarray:  # sorts the first half only
        x[: x.size // 2] = np.sort(x[: x.size // 2])
        return x

    cached = timing.judge(real(caches), THRESHOLDS, what="the kernel")  # right on the warm-up
    assert cached.status == "wrong" and "pair 1 of 6 (6 pair(s) in all)" in cached.message
    skipped = timing.judge(real(skips), THRESHOLDS)  # wrong from the warm-up on: nothing timed
    assert skipped.status == "wrong" and "disagrees with the reference" in skipped.message
    assert real(np.sort)["failed"] is None


def test_the_clocks_are_bound_at_import() -> None:
    import time

    saved = time.perf_counter
    try:
        time.perf_counter = lambda: 0.0  # what a student's cell could do
        m = real(np.sort, pairs=2)
    finally:
        time.perf_counter = saved
    assert all(p["reference"] > 0 for p in m["pairs"])
