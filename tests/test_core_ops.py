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
