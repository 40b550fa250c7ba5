"""Every op of the op table: forward against numpy, gradients against central differences,
over listed shapes (broadcast, 0-d, size-0), permuted (non-contiguous) inputs, and
hypothesis-drawn broadcastable shapes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from tests.op_table import OPS, check_op

CASES = [(op, shapes) for op in OPS for shapes in op.shapes]


@pytest.mark.parametrize(
    ("op", "shapes"), CASES, ids=[f"{op.name}-{shapes}" for op, shapes in CASES]
)
def test_op_forward_and_gradient(op, shapes):
    check_op(op, shapes, seed=1)


PERMUTABLE = [
    (op, shapes)
    for op, shapes in CASES
    if any(len(s) >= 2 for s in shapes) and "contiguous_only" not in op.tags
]


@pytest.mark.parametrize(
    ("op", "shapes"), PERMUTABLE, ids=[f"{op.name}-{shapes}" for op, shapes in PERMUTABLE]
)
def test_op_on_permuted_inputs(op, shapes):
    check_op(op, shapes, seed=2, permuted=True)


BROADCASTING = [op for op in OPS if op.broadcast]


@pytest.mark.parametrize("op", BROADCASTING, ids=[op.name for op in BROADCASTING])
@given(
    shapes=mutually_broadcastable_shapes(
        num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3
    ),
    seed=st.integers(0, 2**16),
)
def test_op_on_drawn_broadcast_shapes(op, shapes, seed):
    check_op(op, shapes.input_shapes, seed=seed)


def test_argmax_and_argmin_along_a_short_axis_pick_the_first_extreme_as_numpy_does():
    # The numpy backend answers a short axis with many rows (max pooling's windows) by
    # whole-array passes instead of np.argmax: the same first-on-ties and NaN rules.
    import numpy as np

    import torchlight as tl

    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, size=(8, 4, 40)).astype(np.float64)  # many ties
    a[0, 2, 5] = a[1, 1, 7] = a[1, 3, 7] = np.nan
    for dim in (0, 1, 2):
        for keepdim in (False, True):
            for name, expected in (("argmax", np.argmax), ("argmin", np.argmin)):
                got = getattr(tl.tensor(a), name)(dim, keepdim=keepdim).numpy()
                want = expected(a, axis=dim, keepdims=keepdim)
                assert got.dtype == np.int64 and np.array_equal(got, want), (name, dim, keepdim)
    flags = rng.random((300, 3)) < 0.5  # booleans, and integers
    assert np.array_equal(tl.tensor(flags).argmax(1).numpy(), np.argmax(flags, axis=1))
    assert np.array_equal(tl.tensor(flags * 7).argmin(1).numpy(), np.argmin(flags * 7, axis=1))
