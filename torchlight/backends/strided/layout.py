r"""A strided layout: ``shape``, ``strides`` and ``offset`` over a flat buffer, and the arithmetic on it.

An n-dimensional index finds its element in the flat buffer with

$$\mathrm{position}(i_0, \dots, i_{n-1}) = \mathrm{offset} + \sum_d i_d \cdot \mathrm{strides}_d .$$

This module holds :class:`StridedLayout`, the :class:`LayoutOps` that make views of it (``view``,
``permute``, ``expand``, basic indexing), and the pure functions of ``(shape, strides, offset)``
that views and indexing are made of: whether a layout is contiguous, the strides of an
``expand`` or a ``reshape`` that needs no copy, the layout of ``a[index]`` for a basic index, and
a table of every element's position (for advanced indexing). None of them reads or writes an
element, so the strided backend (:mod:`~torchlight.backends.strided.backend`, buffer in host memory) and
the CUDA backend (:mod:`~torchlight.backends.cuda.backend`, buffer in GPU memory) share them:
a layout is the same thing wherever the buffer lives.

Example:
    >>> from torchlight.backends.strided.layout import basic_index, expand_strides
    >>> expand_strides((3, 1), (1, 1), (3, 4))  # the size-1 column is repeated: stride 0
    (1, 0)
    >>> basic_index((4, 5), (5, 1), 0, (slice(1, 3), 2))  # rows 1-2 of column 2
    ((2,), (5,), 7)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from torchlight.backends.base import Index
from torchlight.shape import permute, strides_from_shape


class StridedLayout:
    """A flat buffer plus the ``shape``, ``strides`` and ``offset`` that give it n dimensions.

    The layout is the same whatever holds the elements: the strided backend's
    :class:`~torchlight.backends.strided.storage.StridedStorage` keeps them in host memory, the
    CUDA backend's :class:`~torchlight.backends.cuda.backend.CudaStorage` in a device buffer.

    Args:
        buffer: the elements, flat (shared by every view).
        shape: the size of each dimension.
        strides: how far, in elements, one step along each dimension moves in ``buffer``.
        offset: the position of element ``(0, ..., 0)`` in ``buffer``.
        dtype: the numpy dtype of the elements (bools are stored as bytes 0/1).
    """

    __slots__ = ("buffer", "dtype", "offset", "shape", "strides")

    def __init__(
        self, buffer: Any, shape: Sequence[int], strides: Sequence[int], offset: int, dtype: Any
    ) -> None:
        self.buffer = buffer
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offset = offset
        self.dtype = np.dtype(dtype)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def restrided(self, shape: Sequence[int], strides: Sequence[int], offset: int) -> Any:
        """A view: the same buffer (and storage class) with another layout."""
        return type(self)(self.buffer, shape, strides, offset, self.dtype)


class LayoutOps:
    r"""The layout primitives of a backend whose storages are :class:`StridedLayout`\ s.

    Each returns a view, the same buffer under a new ``(shape, strides, offset)``, so no element
    moves; only ``contiguous`` copies, through the backend's own ``map("copy")``. The strided and
    CUDA backends both inherit these: a view is the same thing on the host and on the GPU.
    """

    def view(self, a: Any, shape: tuple[int, ...]) -> Any:
        """``a`` read in ``shape`` (same elements, row-major), or ``None`` if no strides can."""
        strides = view_strides(a.shape, a.strides, shape)
        return None if strides is None else a.restrided(shape, strides, a.offset)

    def permute(self, a: Any, dims: tuple[int, ...]) -> Any:
        shape, strides = permute(a.shape, a.strides, dims)
        return a.restrided(shape, strides, a.offset)

    def expand(self, a: Any, shape: tuple[int, ...]) -> Any:
        return a.restrided(shape, expand_strides(a.shape, a.strides, shape), a.offset)

    def contiguous(self, a: Any) -> Any:
        return a if is_contiguous(a.shape, a.strides) else self.map("copy", a)  # type: ignore[attr-defined]

    def basic_view(self, a: Any, index: Index) -> Any:
        """``a[index]`` for a basic index (ints, slices, ``None``, ``...``): a view."""
        return a.restrided(*basic_index(a.shape, a.strides, a.offset, index))


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether the layout is row-major without gaps (size-1 dimensions may have any stride)."""
    expected = strides_from_shape(shape)
    return all(s == e for s, e, n in zip(strides, expected, shape, strict=True) if n > 1)


def expand_strides(
    shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]
) -> tuple[int, ...]:
    """Strides that repeat size-1 (and new leading) dimensions to ``new_shape``: stride 0.

    Example:
        >>> from torchlight.backends.strided.layout import expand_strides
        >>> expand_strides((3, 1), (1, 1), (2, 3, 4))
        (0, 1, 0)
    """
    lead = len(new_shape) - len(shape)
    if lead < 0:
        raise ValueError(
            f"cannot expand shape {tuple(shape)} to fewer dimensions {tuple(new_shape)}"
        )
    out = [0] * lead
    for n, s, target in zip(shape, strides, new_shape[lead:], strict=True):
        if n == target:
            out.append(s)
        elif n == 1:
            out.append(0)
        else:
            raise ValueError(f"shape {tuple(shape)} cannot be expanded to {tuple(new_shape)}")
    return tuple(out)


def view_strides(
    shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]
) -> tuple[int, ...] | None:
    """Strides that show the same elements in ``new_shape`` without copying, or ``None``.

    Split the old and the new shape into groups with equal products (size-1 dimensions aside);
    a group can be re-shaped in place when its old dimensions are contiguous among themselves
    (each stride equals the next stride times the next size). This is numpy's rule.

    Example:
        >>> from torchlight.backends.strided.layout import view_strides
        >>> view_strides((2, 3), (3, 1), (3, 2))
        (2, 1)
        >>> view_strides((3, 2), (1, 3), (6,)) is None  # a transpose cannot be flattened
        True
    """
    if math.prod(shape) == 0:
        return strides_from_shape(new_shape)
    old = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1]
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    while oi < len(old) and ni < len(new_shape):
        oj, nj = oi + 1, ni + 1
        old_size, new_size = old[oi][0], new_shape[ni]
        while old_size != new_size:  # grow whichever group is smaller
            if new_size < old_size:
                new_size *= new_shape[nj]
                nj += 1
            else:
                old_size *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None  # a gap inside the group: its elements are not one run
        new_strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        oi, ni = oj, nj
    for k in range(ni, len(new_shape)):  # trailing size-1 dimensions
        new_strides[k] = 1
    return tuple(new_strides)


def is_basic_index(index: Index) -> bool:
    """Whether ``index`` holds only ints, slices, ``None`` and ``...`` (so it selects a view)."""
    return all(
        isinstance(i, (int, np.integer, slice, type(None), type(Ellipsis)))
        and not isinstance(i, (bool, np.bool_))
        for i in index
    )


def basic_index(
    shape: Sequence[int], strides: Sequence[int], offset: int, index: Index
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The layout of ``a[index]`` for a basic index: an int moves the offset and drops the
    dimension, a slice ``start:stop:step`` moves the offset by ``start`` and multiplies the
    stride by ``step``, ``None`` adds a dimension of size 1.

    Example:
        >>> from torchlight.backends.strided.layout import basic_index
        >>> basic_index((4, 5), (5, 1), 0, (1, slice(None, None, 2)))
        ((3,), (2,), 5)
    """
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if used > len(shape):
        raise IndexError(f"too many indices for a tensor of shape {tuple(shape)}: {used} given")
    fill = len(shape) - used  # dimensions not named by the index: take them whole
    items: list[Any] = []
    for i in index:
        if i is Ellipsis:
            items.extend([slice(None)] * fill)
            fill = 0
        else:
            items.append(i)
    items.extend([slice(None)] * fill)
    new_shape: list[int] = []
    new_strides: list[int] = []
    d = 0
    for item in items:
        if item is None:
            new_shape.append(1)
            new_strides.append(0)
            continue
        n, s = shape[d], strides[d]
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            new_shape.append(len(range(start, stop, step)))
            new_strides.append(s * step)
            offset += start * s if new_shape[-1] else 0
        else:
            i = int(item)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
            offset += (i % n) * s
        d += 1
    return tuple(new_shape), tuple(new_strides), offset


def position_table(shape: Sequence[int], strides: Sequence[int], offset: int) -> np.ndarray:
    """An int64 array of ``shape`` holding each element's buffer position.

    Indexing this table with any numpy index says which buffer positions ``a[index]`` reads;
    advanced indexing then becomes a gather (read those positions) or a scatter (write them).
    """
    table = np.full(tuple(shape), offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides, strict=True)):
        table += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(shape) - d - 1))
    return table
