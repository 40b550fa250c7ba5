r"""Hidden checks: what the grader asks of a student's answer and how it judges the reply.

A check has two halves that run in different processes:

- :meth:`Check.spec` says what the sandbox calls: a generic runner of
  :mod:`torchlight_grader.sandbox.inside.runners` (the only grading code the sandbox has) calls the
  student's Function (or function) on the trial inputs and returns the raw outputs, nothing else;
- :meth:`Check.cases`, :meth:`Check.expected` and :meth:`Check.judge` run *in the grader*: they
  draw the inputs, compute the reference values (only after the sandbox has exited), and compare.

The comparison is tight, $|r - e| \le 10^{-12}(1 + |e|)$ by default, because a correct analytic
gradient in float64 agrees with the reference to a few ulp, while a gradient estimated by finite
differences is off by $\sim 10^{-10}$ (rounding error $\epsilon_{mach}/h$ plus truncation $h^2$).
Every reference gradient is itself checked against the library's
:func:`~torchlight.autograd.central_difference` before it is trusted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from torchlight_grader.sandbox.inside import runners
from torchlight_grader.sandbox.inside.runners import (
    describe_exception,
    lookup,
    raw,
    to_tensors,
    type_name,
)

__all__ = ["describe_exception", "lookup", "raw", "to_tensors", "type_name"]

TIGHT = 1e-12
"""Default absolute and relative tolerance against the reference values."""

LOOSE = 1e-6
"""Tolerance for agreeing with central differences (which are only accurate to ~1e-10)."""


class GraderError(RuntimeError):
    """The grader's own reference disagrees with central differences: a bug in the grader."""


@dataclass
class Case:
    """One trial: the arguments in call order and the gradient flowing into the output.

    Arrays in ``args`` become tensors (those listed in ``differentiable`` with
    ``requires_grad=True``); other values are passed as they are.
    """

    args: list[Any]
    grad_output: np.ndarray | None = None
    differentiable: tuple[int, ...] = ()
    names: tuple[str, ...] = ()
    hidden: dict[str, Any] = field(default_factory=dict)  # stays in the grader, never sent

    def describe(self) -> str:
        parts = []
        for i, a in enumerate(self.args):
            name = self.names[i] if i < len(self.names) else f"arg{i}"
            parts.append(
                f"{name}: shape {tuple(a.shape)}" if isinstance(a, np.ndarray) else f"{name}={a!r}"
            )
        return ", ".join(parts)

    @property
    def tensor_args(self) -> list[int]:
        return [i for i, a in enumerate(self.args) if isinstance(a, np.ndarray)]


@dataclass
class Check:
    """One graded item: the student object it calls, how, and how it judges the result.

    Attributes:
        entry: the name the student's answer must define (``"Mul"``).
        cells: grade ids of the answer cells this item runs (besides locked and new cells).
        sample: ``sample(rng, trial) -> Case`` draws one trial's inputs.
        trials: how many trials (each with fresh random inputs, shapes vary by trial).
        timeout: seconds of wall-clock time the sandbox may spend on this item.
    """

    entry: str
    cells: tuple[str, ...]
    sample: Callable[[np.random.Generator, int], Case]
    trials: int = 3
    timeout: float = 10.0
    atol: float = TIGHT
    rtol: float = TIGHT
    what: str = field(default="", kw_only=True)
    adversarial: Callable[[np.random.Generator, int], Case] | None = field(
        default=None, kw_only=True
    )
    """Draws trials no finite-difference gradient passes (:mod:`torchlight_grader.checks.adversarial`)."""
    adversarial_trials: int = field(default=1, kw_only=True)
    cpu: float | None = field(default=None, kw_only=True)
    """CPU seconds the item may use, every process of the sandbox counted by its broker
    (:mod:`~torchlight_grader.sandbox.inside.child`); past it the item fails. None: its
    ``timeout`` bounds it, in wall-clock time."""
    processes: int | None = field(default=None, kw_only=True)
    """RLIMIT_NPROC of the item's process (1: it may start no process or thread)."""
    counted_cpu: bool = field(default=False, kw_only=True)
    """Hand :meth:`judge` the CPU time the sandbox's broker counted for the item, outside the
    student's process (``received["counted_cpu"]``): a2c's and a6's speed items check what the
    sandbox reported against it (:meth:`run` counts it in its own process)."""
    environ: tuple[tuple[str, str], ...] = field(default=(), kw_only=True)
    """Environment variables the sandbox sets before the notebook's first cell runs (a2c's CUDA
    items: ``NUMBA_ENABLE_CUDASIM``, which numba reads once, when ``numba.cuda`` is imported).
    Items of one notebook with different environments run in separate sandboxes, each running
    the cells once."""

    # -- grader side ------------------------------------------------------------------
    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = [self.sample(rng, trial) for trial in range(self.trials)]
        if self.adversarial is not None:
            cases += [self.adversarial(rng, trial) for trial in range(self.adversarial_trials)]
        return cases

    def expected(self, case: Case) -> dict[str, Any]:
        raise NotImplementedError

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def passed(self, cases: Sequence[Case]) -> str:
        ordinary = [c for c in cases if "adversarial" not in c.hidden]
        shapes = "; ".join(c.describe() for c in ordinary)
        extra = len(cases) - len(ordinary)
        more = f", and {extra} where finite differences fail" if extra else ""
        return (
            f"{self.what or self.entry}: passed on {len(ordinary)} random trials ({shapes}){more}."
        )

    def passed_on(self, cases: Sequence[Case], received: Sequence[dict[str, Any]]) -> str:
        """What a learner reads when the item passed, given what the sandbox sent (a speed
        item shows its measured ratio); :meth:`passed` by default."""
        return self.passed(cases)

    def tolerance(self, case: Case, key: int | str, exp: np.ndarray) -> float | np.ndarray:
        """The absolute tolerance for one compared array: the check's own, or on a trial against
        finite differences, the one it names (default: ``TIGHT`` times the array's largest
        magnitude, since those trials use values far from 1)."""
        if "adversarial" not in case.hidden:
            return self.atol
        atol = case.hidden.get("atol", {}).get(key)
        if atol is not None:
            return atol
        finite = np.abs(np.asarray(exp, dtype=np.float64))
        finite = finite[np.isfinite(finite)]
        return TIGHT * float(finite.max()) if finite.size else self.atol

    def compare(
        self,
        what: str,
        exp: np.ndarray,
        got: Any,
        trial: str,
        central: np.ndarray | None = None,
        atol: float | np.ndarray | None = None,
        why: str | None = None,
    ) -> str | None:
        atol = self.atol if atol is None else atol
        found = mismatch(exp, got, atol=atol, rtol=self.rtol)
        if found is None:
            return None
        kind, index, count = found
        if kind == "type":
            return f"{what} is not an array of numbers {trial}"
        if kind == "shape":
            return f"{what} has shape {got.shape}, expected shape {exp.shape} {trial}"
        bound = at(np.broadcast_to(atol, exp.shape), index) if np.ndim(atol) else float(atol)
        message = (
            f"{what} is wrong {trial}: at index {index} expected {fmt(at(exp, index))} but got "
            f"{fmt(at(got, index))} ({count} of {exp.size} entries differ; tolerance "
            f"{bound:.3g} + {self.rtol:g} * |expected|)"
        )
        if not np.isfinite(at(got, index)):
            message += " (not a finite number: an overflow, or a division by zero?)"
        if why is not None:
            message += (
                f". These inputs are chosen against finite differences ({why}): a gradient "
                "estimated numerically cannot pass them, an analytic one always does. Derive "
                "the gradient with the chain rule"
            )
        elif central is not None:
            message += f"; a central difference gives {fmt(at(central, index))}"
            if mismatch(central, got, atol=LOOSE, rtol=LOOSE) is None:
                message += (
                    ". Your gradient matches central differences only approximately: it looks "
                    "numerically estimated. Derive it with the chain rule instead."
                )
        return message

    # -- what the sandbox runs --------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        """What the sandbox calls (a runner of :mod:`torchlight_grader.sandbox.inside.runners`)."""
        raise NotImplementedError

    def run(self, namespace: dict[str, Any], case: Case) -> dict[str, Any]:
        """Call the answer in ``namespace`` on ``case`` *in this process* (``self_check`` only).
        With :attr:`counted_cpu`, the CPU time is counted here, around the whole run, as the
        sandbox's broker counts it when grading."""
        if not self.counted_cpu:
            return runners.run(self.spec(), namespace, encode_case(case))
        start = time.process_time()
        received = runners.run(self.spec(), namespace, encode_case(case))
        return {**received, "counted_cpu": time.process_time() - start}


def encode_case(case: Case) -> dict[str, Any]:
    """What the sandbox receives of a case: never ``hidden``."""
    return {
        "args": list(case.args),
        "grad_output": case.grad_output,
        "differentiable": list(case.differentiable),
        "names": list(case.names),
    }


# ------------------------------------------------------------------------------ helpers
def central_vjp(forward: Callable[..., np.ndarray], case: Case, index: int) -> np.ndarray:
    r"""$\partial \langle G, f(\ldots) \rangle / \partial \mathrm{args}_{index}$ by central differences,
    one element at a time, with the library's :func:`~torchlight.autograd.central_difference`."""
    from torchlight.autograd import central_difference

    x = case.args[index]
    estimate = np.zeros(x.shape)
    for j in range(x.size):

        def f(v: float, j: int = j) -> float:
            args = [a.copy() if isinstance(a, np.ndarray) else a for a in case.args]
            args[index].reshape(-1)[j] = v
            return float(np.sum(case.grad_output * forward(*args)))

        estimate.reshape(-1)[j] = central_difference(f, float(x.reshape(-1)[j]), epsilon=1e-6)
    return estimate


def mismatch(
    expected: np.ndarray, received: Any, *, atol: float | np.ndarray, rtol: float
) -> tuple[str, tuple[int, ...], int] | None:
    """``(kind, index, count)`` of the first disagreement, or None when all entries agree."""
    if not isinstance(received, np.ndarray):
        return ("type", (), 0)
    if received.shape != expected.shape:
        return ("shape", (), 0)
    received = received.astype(np.float64)
    bad = ~(np.abs(received - expected) <= atol + rtol * np.abs(expected))
    if not bad.any():
        return None
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    return ("value", first, int(bad.sum()))


def at(a: np.ndarray, index: tuple[int, ...]) -> float:
    return float(a[index]) if a.ndim else float(a)


def fmt(v: float) -> str:
    return f"{v:.12g}"
