"""No numerically estimated gradient scores on any Function item (issue 11, item 5).

Every ``FunctionCheck`` in the course gets the instructor's solution with each of its Functions'
``backward`` replaced by a finite-difference estimate that calls the solution's own ``forward``:
central differences of order 2 and 4 and Richardson extrapolation (1 to 3 levels), with steps
from 1e-2 down to 1e-5 (and the power of two 2**-7, for which ``x + h`` is often exact). Each must
fail the item's trials against finite differences, while the unmodified solution passes every
trial of every item on several seeds. The checks run in this process (as ``self_check`` does):
what is tested here is the choice of inputs and tolerances, the sandbox is tested elsewhere.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import torchlight as tl
from torchlight.autograd import Context, Function
from torchlight_grader.checks import registry
from torchlight_grader.checks.grader import rng_for
from torchlight_grader.checks.kinds import FunctionCheck
from torchlight_grader.checks.variants import VariantCheck, student_from_env

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("a1_functions", "a2_broadcasting", "a3_networks", "a4_convolutions", "a5_attention")

# (name, stencil offsets and weights of one central difference, Richardson levels)
SCHEMES = {
    "central2": (((1, 0.5), (-1, -0.5)), 0),
    "central4": (((2, -1 / 12), (1, 8 / 12), (-1, -8 / 12), (-2, 1 / 12)), 0),
    "richardson1": (((1, 0.5), (-1, -0.5)), 1),  # the catalog's attack: 4th order
    "richardson3": (((1, 0.5), (-1, -0.5)), 3),  # 8th order
}
STEPS = (1e-2, 2.0**-7, 1e-3, 1e-4, 1e-5)


@functools.cache
def cells(notebook: str) -> tuple[tuple[str, str], ...]:
    """``(header, body)`` of every cell of the source notebook (its jupytext script)."""
    text = (ROOT / "assignments" / "source" / notebook / f"{notebook}.py").read_text()
    return tuple(c.partition("\n")[::2] for c in re.split(r"^# %%", text, flags=re.M)[1:])


@functools.cache
def solution_code(notebook: str) -> tuple[Any, ...]:
    """The source notebook's code cells, compiled, test cells left out."""
    return tuple(
        compile(body, f"{notebook}:{header.strip()}", "exec")
        for header, body in cells(notebook)
        if "[markdown]" not in header and '"grade": true' not in header
    )


@functools.cache
def solution(notebook: str) -> dict[str, Any]:
    return fresh(notebook)


def fresh(notebook: str) -> dict[str, Any]:
    """A new namespace with the solution's code cells run in it."""
    namespace: dict[str, Any] = {"__name__": f"solution_{notebook}"}
    for code in solution_code(notebook):
        exec(code, namespace)  # noqa: S102
    return namespace


def estimate(f: Callable[[np.ndarray], float], x: np.ndarray, scheme: str, h: float) -> np.ndarray:
    """The gradient of scalar ``f`` at ``x`` by ``scheme`` with base step ``h``, element by element."""
    stencil, levels = SCHEMES[scheme]
    grad = np.zeros(x.shape)
    for j in range(x.size):

        def d(step: float, j: int = j) -> float:
            total = 0.0
            for k, w in stencil:
                moved = x.copy()
                moved.reshape(-1)[j] += k * step
                total += w * f(moved)
            return total / step

        table = [d(h / 2**i) for i in range(levels + 1)]
        for level in range(1, levels + 1):  # Richardson: cancel h^2, h^4, ... in turn
            factor = 4.0**level
            table = [
                (factor * table[i + 1] - table[i]) / (factor - 1) for i in range(len(table) - 1)
            ]
        with np.errstate(all="ignore"):
            grad.reshape(-1)[j] = table[0]
    return grad


def numeric(cls: type[Function], scheme: str, h: float) -> type[Function]:
    """``cls`` with ``backward`` estimated from its own ``forward``."""

    def forward(ctx: Context, *args: Any) -> Any:
        ctx.numeric_args = args
        return cls.forward(ctx, *args)

    def backward(ctx: Context, grad_output: tl.Tensor) -> tuple[Any, ...]:
        args, g = ctx.numeric_args, grad_output.detach().numpy().astype(np.float64)
        grads: list[Any] = []
        for i, a in enumerate(args):
            if not isinstance(a, tl.Tensor):
                continue
            if not np.issubdtype(a.detach().numpy().dtype, np.floating):
                grads.append(None)  # class labels
                continue

            def f(value: np.ndarray, i: int = i) -> float:
                moved = [tl.tensor(value) if k == i else arg for k, arg in enumerate(args)]
                with tl.no_grad(), np.errstate(all="ignore"):
                    out = (
                        cls.forward(Context("numeric"), *moved).detach().numpy().astype(np.float64)
                    )
                    return float(np.sum(g * out))

            x = a.detach().numpy().astype(np.float64)
            grads.append(tl.tensor(estimate(f, x, scheme, h)))
        return tuple(grads) if len(grads) != 1 else grads[0]

    body = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    return type(cls.__name__, (Function,), body)


def numeric_namespace(notebook: str, scheme: str, h: float) -> dict[str, Any]:
    """The solution with every Function it defines made numerical (its functions and layers
    look the classes up in this namespace, so they use the numerical ones)."""
    namespace = fresh(notebook)
    for name, value in list(namespace.items()):
        ours = isinstance(value, type) and value.__module__ == namespace["__name__"]
        if ours and issubclass(value, Function):
            namespace[name] = numeric(value, scheme, h)
    return namespace


def find(notebook: str, grade_id: str) -> Any:
    """The item's check; for an item with variants (a1's expression), the variant of the id the
    notebook's setup cell draws from here (``learner``), as :func:`solution` runs it."""
    check = registry.find(notebook, grade_id)
    return check.for_student(student_from_env()) if isinstance(check, VariantCheck) else check


def function_items() -> list[tuple[str, str]]:
    return [
        (notebook, grade_id)
        for notebook in NOTEBOOKS
        for grade_id in registry.checks_for(notebook)
        if isinstance(find(notebook, grade_id), FunctionCheck)
    ]


def visible_tests(notebook: str, grade_id: str) -> str:
    """The visible part of test cell ``grade_id`` (what the student sees and runs)."""
    for header, body in cells(notebook):
        if f'"grade_id": "{grade_id}"' in header:
            return body.split("### BEGIN HIDDEN TESTS")[0]
    raise LookupError(grade_id)


def verdict(check: FunctionCheck, namespace: dict[str, Any], cases: list) -> str | None:
    for case in cases:
        message = check.judge(case, check.run(namespace, case), check.expected(case))
        if message:
            return message
    return None


@pytest.mark.parametrize(("notebook", "grade_id"), function_items())
def test_the_solution_passes_every_trial(notebook: str, grade_id: str) -> None:
    check = find(notebook, grade_id)
    assert isinstance(check, FunctionCheck) and check.adversarial is not None, (
        f"{notebook}/{grade_id} has no trial against finite differences"
    )
    for seed in range(3):
        cases = check.cases(rng_for(seed, notebook, grade_id))
        assert sum("adversarial" in c.hidden for c in cases) == check.adversarial_trials
        assert verdict(check, solution(notebook), cases) is None


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize(("notebook", "grade_id"), function_items())
def test_numerical_gradients_score_zero(notebook: str, grade_id: str, scheme: str) -> None:
    """At every step, the item's trials against finite differences fail (so the item scores 0);
    the message says why."""
    check = find(notebook, grade_id)
    assert isinstance(check, FunctionCheck)
    cases = [c for c in check.cases(rng_for(7, notebook, grade_id)) if "adversarial" in c.hidden]
    for h in STEPS:
        message = verdict(check, numeric_namespace(notebook, scheme, h), cases)
        assert message is not None, f"{scheme} with h={h:g} passed {notebook}/{grade_id}"
        assert "chosen against finite differences" in message, message


@pytest.mark.parametrize(("notebook", "grade_id"), function_items())
def test_visible_tests_pass_the_solution_and_fail_numerical_gradients(
    notebook: str, grade_id: str
) -> None:
    """Issue 15: what the student runs is strict enough that a finite-difference backward fails
    it, with a message that says why; the solution passes it."""
    code = compile(visible_tests(notebook, grade_id), f"{notebook}:{grade_id}", "exec")
    exec(code, fresh(notebook))  # noqa: S102
    for scheme, h in (("richardson1", 1e-3), ("central2", 1e-5), ("richardson3", 1e-2)):
        with pytest.raises(AssertionError, match="chosen against finite differences"):
            exec(code, numeric_namespace(notebook, scheme, h))  # noqa: S102


def test_the_numeric_attack_is_accurate_at_ordinary_inputs() -> None:
    """The attack is real: at the ordinary trials, Richardson with h=1e-3 gets within 1e-10 of
    the reference on a1's smooth items (so only the trials against it make it fail)."""
    for grade_id in ("test_exp", "test_sigmoid", "test_tanh"):
        check = registry.find("a1_functions", grade_id)
        assert isinstance(check, FunctionCheck)
        namespace = numeric_namespace("a1_functions", "richardson1", 1e-3)
        case = check.cases(rng_for(0, "a1_functions", grade_id))[0]
        got = check.run(namespace, case)["grads"][0]
        np.testing.assert_allclose(got, check.expected(case)["grads"][0], rtol=0, atol=1e-10)
