r"""Hidden checks for assignment 1, *Autograd Functions on tensors*.

Every input is drawn away from the function's kinks and singularities (ReLU at 0, log and
division near 0), in float64, on non-square shapes that change from trial to trial.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from torchlight_grader.checks import adversarial as against
from torchlight_grader.checks.check import Case
from torchlight_grader.checks.kinds import FunctionCheck
from torchlight_grader.checks.variants import VariantCheck

SHAPES = ((3, 4), (2, 5), (4, 2, 3))


def uniform(lo: float, hi: float) -> Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]:
    return lambda rng, shape: rng.uniform(lo, hi, size=shape)


def away_from_zero(
    lo: float, hi: float
) -> Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]:
    """Magnitudes in [lo, hi] with random signs: never near the kink or pole at 0."""
    return lambda rng, shape: rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def sampler(
    *domains: Callable, names: tuple[str, ...]
) -> Callable[[np.random.Generator, int], Case]:
    """Inputs of one shape per trial, one domain per argument, all differentiable."""

    def sample(rng: np.random.Generator, trial: int) -> Case:
        shape = SHAPES[trial % len(SHAPES)]
        args = [domain(rng, shape) for domain in domains]
        return Case(args, rng.standard_normal(shape), tuple(range(len(args))), names)

    return sample


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # stable for any x


def unary(
    entry: str,
    cell: str,
    domain: Callable,
    f: Callable,
    df: Callable,
    adversarial: Callable | None = None,
) -> FunctionCheck:
    sample = sampler(domain, names=("x",))
    return FunctionCheck(
        entry,
        (cell,),
        sample,
        forward_ref=f,
        vjp_ref=lambda g, x: (g * df(x),),
        what=f"{entry} forward and backward",
        adversarial=adversarial,
    )


#: Section 5's variants: the constant $c$ of $\sigma(cxy)$, drawn per student (variants.py).
EXPRESSION_C = (2, 3, 4, 5)


def expression(c: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    r"""$f(x, y) = \log(e^x + e^y)\,\sigma(cxy)$"""
    return lambda x, y: np.logaddexp(x, y) * sigmoid(c * x * y)


def expression_vjp(c: float) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    def vjp(g: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lse, s = np.logaddexp(x, y), sigmoid(c * x * y)
        ds = s * (1 - s)
        return (
            g * (s * np.exp(x - lse) + lse * ds * c * y),
            g * (s * np.exp(y - lse) + lse * ds * c * x),
        )

    return vjp


def expression_check(c: float) -> FunctionCheck:
    """The check of one variant of section 5."""
    return FunctionCheck(
        "expression",
        ("mul", "exp", "log", "sigmoid", "expression"),
        sampler(uniform(-2, 2), uniform(-2, 2), names=("x", "y")),
        forward_ref=expression(c),
        vjp_ref=expression_vjp(c),
        call="graph",
        what=f"expression(x, y) with your c = {c:g} and its gradients through your Functions",
        adversarial=against.expression_edges(c),
        adversarial_trials=2,
    )


CHECKS = {
    "test_mul": FunctionCheck(
        "Mul",
        ("mul",),
        sampler(uniform(-2, 2), uniform(-2, 2), names=("a", "b")),
        forward_ref=lambda a, b: a * b,
        vjp_ref=lambda g, a, b: (g * b, g * a),
        what="Mul forward and backward",
    ),
    "test_div": FunctionCheck(
        "Div",
        ("div",),
        sampler(uniform(-2, 2), away_from_zero(0.5, 2), names=("a", "b")),
        forward_ref=lambda a, b: a / b,
        vjp_ref=lambda g, a, b: (g / b, -g * a / b**2),
        what="Div forward and backward",
    ),
    "test_exp": unary("Exp", "exp", uniform(-2, 2), np.exp, np.exp, against.exp_edge),
    "test_log": unary("Log", "log", uniform(0.5, 3), np.log, lambda x: 1 / x),
    "test_sigmoid": unary(
        "Sigmoid",
        "sigmoid",
        uniform(-4, 4),
        sigmoid,
        lambda x: sigmoid(x) * (1 - sigmoid(x)),
        against.saturated(33.1, 34.4, signed=False),
    ),
    "test_relu": unary(
        "ReLU", "relu", away_from_zero(0.1, 2), lambda x: np.maximum(x, 0), lambda x: 1.0 * (x > 0)
    ),
    "test_tanh": unary(
        "Tanh",
        "tanh",
        uniform(-2.5, 2.5),
        np.tanh,
        lambda x: 1 - np.tanh(x) ** 2,
        against.saturated(17.35, 17.95, signed=True),
    ),
    "test_pow": FunctionCheck(
        "Pow",
        ("pow",),
        sampler(uniform(0.5, 2.5), uniform(-2, 2), names=("a", "b")),
        forward_ref=lambda a, b: a**b,
        vjp_ref=lambda g, a, b: (g * b * a ** (b - 1), g * a**b * np.log(a)),
        what="Pow forward and backward (both the base and the exponent)",
        adversarial=against.pow_edge,
    ),
    "test_expression": VariantCheck("a1_functions", "expression", EXPRESSION_C, expression_check),
}
