r"""Hidden checks for assignment 2, *Broadcasting and reductions*.

Functions are called directly (``forward``, then ``backward``), so a gradient returned with the
output's broadcast shape is seen as it is, before the engine could sum it back for the student.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from torchlight_grader.checks.check import Case
from torchlight_grader.checks.kinds import FunctionCheck, ValueCheck

Shape = tuple[int, ...]


def unbroadcast(grad: np.ndarray, shape: Shape) -> np.ndarray:
    r"""Sum ``grad`` over the dimensions broadcasting added or stretched, back to ``shape``."""
    extra = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(extra))) if extra else grad
    stretched = tuple(d for d, n in enumerate(shape) if n == 1 and grad.shape[d] != 1)
    return grad.sum(axis=stretched, keepdims=True) if stretched else grad


def pairs(shapes: Sequence[tuple[Shape, Shape]], names: tuple[str, str] = ("a", "b")) -> Callable:
    """Two differentiable inputs of the given (broadcast-compatible) shapes, one pair per trial."""

    def sample(rng: np.random.Generator, trial: int) -> Case:
        sa, sb = shapes[trial % len(shapes)]
        a, b = rng.uniform(-2, 2, size=sa), rng.uniform(-2, 2, size=sb)
        return Case([a, b], rng.standard_normal(np.broadcast_shapes(sa, sb)), (0, 1), names)

    return sample


def with_arg(shapes_and_args: Sequence[tuple[Shape, object]], out: Callable, name: str) -> Callable:
    """One differentiable input plus one plain argument (a dim, a permutation, a shape)."""

    def sample(rng: np.random.Generator, trial: int) -> Case:
        shape, arg = shapes_and_args[trial % len(shapes_and_args)]
        x = rng.uniform(-2, 2, size=shape)
        return Case([x, arg], rng.standard_normal(out(x, arg).shape), (0,), ("x", name))

    return sample


def unbroadcast_case(rng: np.random.Generator, trial: int) -> Case:
    out, shape = [((2, 3, 4), (3, 1)), ((4, 5), (5,)), ((2, 1, 3, 4), (1, 3, 1))][trial % 3]
    return Case([rng.standard_normal(out), shape], names=("grad", "shape"))


def matmul_case(rng: np.random.Generator, trial: int) -> Case:
    sa, sb = [((2, 3, 4), (4, 5)), ((3, 2, 4), (3, 4, 6)), ((5, 3), (2, 3, 2))][trial % 3]
    a, b = rng.uniform(-2, 2, size=sa), rng.uniform(-2, 2, size=sb)
    return Case([a, b], rng.standard_normal((a @ b).shape), (0, 1), ("a", "b"))


def matmul_vjp(g: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return unbroadcast(g @ np.swapaxes(b, -1, -2), a.shape), unbroadcast(
        np.swapaxes(a, -1, -2) @ g, b.shape
    )


def inverse(dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(dims))


BROADCAST_SHAPES = [((3, 4), (4,)), ((2, 1, 5), (3, 1)), ((4, 1), (1, 6))]
SUM_CASES = [((3, 4, 5), 1), ((2, 6), 0), ((4, 3, 2), 2)]
PERMUTE_CASES = [((2, 3, 4), (2, 0, 1)), ((3, 5), (1, 0)), ((2, 3, 4, 5), (1, 3, 0, 2))]
VIEW_CASES = [((3, 4), (2, 6)), ((2, 3, 4), (4, 6)), ((6,), (2, 3))]

CHECKS = {
    "test_unbroadcast": ValueCheck(
        "unbroadcast",
        ("unbroadcast",),
        unbroadcast_case,
        reference=unbroadcast,
        what="unbroadcast(grad, shape)",
    ),
    "test_add": FunctionCheck(
        "Add",
        ("unbroadcast", "add"),
        pairs(BROADCAST_SHAPES),
        forward_ref=lambda a, b: a + b,
        vjp_ref=lambda g, a, b: (unbroadcast(g, a.shape), unbroadcast(g, b.shape)),
        what="Add with broadcasting, forward and backward",
    ),
    "test_mul": FunctionCheck(
        "Mul",
        ("unbroadcast", "mul"),
        pairs(BROADCAST_SHAPES),
        forward_ref=lambda a, b: a * b,
        vjp_ref=lambda g, a, b: (unbroadcast(g * b, a.shape), unbroadcast(g * a, b.shape)),
        what="Mul with broadcasting, forward and backward",
    ),
    "test_sum": FunctionCheck(
        "Sum",
        ("sum",),
        with_arg(SUM_CASES, lambda x, d: x.sum(axis=d), "dim"),
        forward_ref=lambda x, d: x.sum(axis=d),
        vjp_ref=lambda g, x, d: (np.broadcast_to(np.expand_dims(g, d), x.shape),),
        what="Sum over a dim, forward and backward",
    ),
    "test_mean": FunctionCheck(
        "Mean",
        ("mean",),
        with_arg(SUM_CASES, lambda x, d: x.mean(axis=d), "dim"),
        forward_ref=lambda x, d: x.mean(axis=d),
        vjp_ref=lambda g, x, d: (np.broadcast_to(np.expand_dims(g, d), x.shape) / x.shape[d],),
        what="Mean over a dim, forward and backward",
    ),
    "test_matmul": FunctionCheck(
        "MatMul",
        ("unbroadcast", "matmul"),
        matmul_case,
        forward_ref=lambda a, b: a @ b,
        vjp_ref=matmul_vjp,
        what="batched MatMul, forward and backward",
    ),
    "test_permute": FunctionCheck(
        "Permute",
        ("permute",),
        with_arg(PERMUTE_CASES, lambda x, d: np.transpose(x, d), "dims"),
        forward_ref=lambda x, d: np.transpose(x, d),
        vjp_ref=lambda g, x, d: (np.transpose(g, inverse(d)),),
        what="Permute, forward and backward",
    ),
    "test_view": FunctionCheck(
        "View",
        ("view",),
        with_arg(VIEW_CASES, lambda x, s: x.reshape(s), "shape"),
        forward_ref=lambda x, s: x.reshape(s),
        vjp_ref=lambda g, x, s: (g.reshape(x.shape),),
        what="View, forward and backward",
    ),
}
