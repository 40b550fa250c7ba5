"""The strided reference backend's building blocks, checked against what numpy does with the same layouts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import torchlight as tl
from torchlight.backends import get_backend, scalar_ops
from torchlight.backends.strided.backend import (
    StridedBackend,
    StridedStorage,
    basic_index,
    expand_strides,
    is_contiguous,
    position_table,
    view_strides,
)
from torchlight.shape import strides_from_shape


def _layout(a: np.ndarray) -> tuple[tuple[int, ...], int]:
    """numpy's strides (in elements) and offset of a view ``a`` of a base array."""
    base = a.base if a.base is not None else a
    offset = (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // a.itemsize
    return tuple(s // a.itemsize for s in a.strides), offset


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


@given(shape=shapes, data=st.data())
def test_view_strides_allows_exactly_the_views_numpy_allows(shape, data) -> None:
    order = data.draw(st.permutations(range(len(shape))))
    base = np.zeros(shape).transpose(order)
    sizes = [n for n in base.shape]
    new_shape = tuple(data.draw(st.permutations(sizes)))
    if data.draw(st.booleans()):
        new_shape = (math.prod(sizes),)
    view = base.view()
    try:
        view.shape = new_shape
        expected = _layout(view)[0]
    except AttributeError:
        expected = None
    got = view_strides(base.shape, _layout(base)[0], new_shape)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert all(g == e for g, e, n in zip(got, expected, new_shape, strict=True) if n > 1)


INDICES = [
    (1,),
    (slice(1, None),),
    (slice(None, None, 2), 1),
    (Ellipsis, slice(None, None, -1)),
    (None, 0, slice(1, 3), None),
    (-1, Ellipsis),
    (slice(3, 1, -1), slice(None), 2),
]


@pytest.mark.parametrize("index", INDICES, ids=str)
def test_basic_index_moves_offset_and_strides_like_numpy(index) -> None:
    base = np.arange(60.0).reshape(3, 4, 5)[:, 1:]  # already an offset view
    shape, strides, offset = basic_index(base.shape, *_layout(base), index)
    view = base[index]
    assert shape == view.shape
    assert (strides, offset) == _layout(view) or view.size <= 1
    flat = np.arange(60.0)
    np.testing.assert_array_equal(flat[position_table(shape, strides, offset)], view)


def test_basic_index_errors_name_the_problem() -> None:
    with pytest.raises(IndexError, match="out of bounds for dimension 1 with size 4"):
        basic_index((3, 4), (4, 1), 0, (0, 4))
    with pytest.raises(IndexError, match="too many indices"):
        basic_index((3,), (1,), 0, (0, 0))


def test_expand_strides_and_contiguity() -> None:
    assert expand_strides((3, 1), (1, 1), (2, 3, 4)) == (0, 1, 0)
    with pytest.raises(ValueError, match="cannot be expanded"):
        expand_strides((3,), (1,), (4,))
    assert is_contiguous((2, 1, 3), (3, 99, 1)) and not is_contiguous((2, 3), (1, 2))


def test_storage_round_trips_through_numpy_for_every_dtype() -> None:
    b = StridedBackend()
    for value in (
        np.arange(6.0).reshape(2, 3),
        np.arange(6, dtype=np.float32),
        np.arange(4),
        np.array([True, False]),
        np.array(2.5),
    ):
        s = b.from_numpy(value)
        assert (
            isinstance(s, StridedStorage)
            and s.dtype == value.dtype
            and s.strides == strides_from_shape(value.shape)
        )
        np.testing.assert_array_equal(b.to_numpy(s), value)
    with pytest.raises(TypeError, match="the strided backend stores"):
        b.from_numpy(np.zeros(2, np.complex128))


def test_map_zip_reduce_are_the_loops_the_docs_describe() -> None:
    """A permuted, offset, broadcast example worked by hand."""
    b = StridedBackend()
    base = b.from_numpy(np.arange(12.0))
    a = StridedStorage(base.buffer, (3, 2), (1, 4), 1, np.float64)  # [[1, 5], [2, 6], [3, 7]]
    np.testing.assert_array_equal(b.to_numpy(a), [[1, 5], [2, 6], [3, 7]])
    row = StridedStorage(base.buffer, (2,), (1,), 10, np.float64)  # [10, 11]
    np.testing.assert_array_equal(b.to_numpy(b.zip("add", a, row)), [[11, 16], [12, 17], [13, 18]])
    np.testing.assert_array_equal(b.to_numpy(b.reduce("sum", a, (0,), True)), [[6, 18]])
    np.testing.assert_array_equal(
        b.to_numpy(b.map("square", a)), np.square([[1, 5], [2, 6], [3, 7]])
    )
    np.testing.assert_array_equal(
        b.to_numpy(b.matmul(a, b.permute(a, (1, 0)))), [[26, 32, 38], [32, 40, 48], [38, 48, 58]]
    )


@pytest.mark.parametrize("op", sorted(scalar_ops.MAP))
def test_scalar_map_ops_agree_with_the_numpy_backend(op) -> None:
    x = np.array([-3.5, -1.0, -0.25, 0.0, 0.5, 2.0, 30.0])
    if op in ("log", "sqrt"):
        x = np.abs(x) + 0.1
    expected = get_backend("numpy").map(op, x)
    got = np.array([scalar_ops.MAP[op](float(v)) for v in x])
    np.testing.assert_allclose(got, expected, rtol=1e-15)


@pytest.mark.parametrize("op", sorted(scalar_ops.ZIP))
def test_scalar_zip_ops_agree_with_the_numpy_backend(op) -> None:
    values = [-2.0, -0.5, 0.0, 1.0, 3.0]
    pairs = np.array(list(itertools.product(values, values)))
    with np.errstate(all="ignore"):
        expected = get_backend("numpy").zip(op, pairs[:, 0], pairs[:, 1])
    got = np.array([scalar_ops.ZIP[op](float(x), float(y)) for x, y in pairs])
    np.testing.assert_allclose(got, expected.astype(float), rtol=1e-15, equal_nan=True)


def test_tensors_on_the_strided_backend_print_their_layout() -> None:
    x = tl.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], backend="strided")
    assert (
        repr(x.T.storage)
        == "StridedStorage(shape=(3, 2), strides=(1, 3), offset=0, dtype=float64, buffer of 6)"
    )
    assert x[1, ::2].storage.offset == 3 and x[1, ::2].storage.strides == (2,)
    assert x.device == "strided" and "device='strided'" in repr(x)
