r"""The strided reference backend: what numpy does underneath, written out in plain Python.

A tensor's elements live in one flat buffer (an :class:`array.array`). Three small tuples say
how an n-dimensional index finds its element: ``shape``, ``strides`` and ``offset``, with

$$\mathrm{position}(i_0, \dots, i_{n-1}) = \mathrm{offset} + \sum_d i_d \cdot \mathrm{strides}_d .$$

Everything else follows from that formula (see :mod:`torchlight.shape`):

- **views** (reshape, permute, expand, slicing) build a new ``(shape, strides, offset)`` over the
  *same* buffer, so they cost nothing and writes through a view show up in the original;
- **broadcasting** maps an index of the result back into each operand
  (:func:`~torchlight.shape.broadcast_index`), which is the same as giving the broadcast
  dimensions a stride of 0;
- **map / zip / reduce / matmul** are plain loops over output indices
  (:func:`~torchlight.shape.to_index` then :func:`~torchlight.shape.index_to_position`),
  calling the scalar functions of :mod:`torchlight.backends.scalar_ops`.

It is correct, not fast: about a microsecond per element. The Numba backends compile these
same loops. Advanced (array) indexing asks numpy on the host for a table of *positions*; the
elements themselves are still moved by the Python loops here.

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], backend="strided")
    >>> x.data
    StridedStorage(shape=(2, 3), strides=(3, 1), offset=0, dtype=float64, buffer of 6)
    >>> x.T.data  # the same buffer, read with swapped strides
    StridedStorage(shape=(3, 2), strides=(1, 3), offset=0, dtype=float64, buffer of 6)
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from torchlight.backends import scalar_ops
from torchlight.backends.base import Index
from torchlight.backends.scalar_ops import map_dtype, reduce_dtype, zip_dtype
from torchlight.shape import (
    broadcast_index,
    broadcast_shape,
    index_to_position,
    permute,
    strides_from_shape,
    to_index,
)

#: numpy dtype name -> ``array.array`` type code holding such elements.
TYPECODES = {"float64": "d", "float32": "f", "int64": "q", "int32": "i", "bool": "B"}


class StridedLayout:
    """A flat buffer plus the ``shape``, ``strides`` and ``offset`` that give it n dimensions.

    The layout is the same whatever holds the elements: the strided backend's storage below
    keeps them in host memory, the CUDA backend's in a device buffer.

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


class StridedStorage(StridedLayout):
    """A :class:`StridedLayout` whose buffer is a host ``array.array``."""

    __slots__ = ()

    def positions(self) -> Iterator[int]:
        """Buffer positions of the elements, in row-major order of their indices."""
        for ordinal in range(self.size):
            yield index_to_position(to_index(ordinal, self.shape), self.strides, self.offset)

    def __repr__(self) -> str:
        return (
            f"StridedStorage(shape={self.shape}, strides={self.strides}, offset={self.offset}, "
            f"dtype={self.dtype.name}, buffer of {len(self.buffer)})"
        )


def empty(shape: Sequence[int], dtype: Any) -> StridedStorage:
    """Fresh contiguous storage of ``shape``, filled with zeros."""
    dtype = np.dtype(dtype)
    if dtype.name not in TYPECODES:
        raise TypeError(
            f"the strided backend stores {', '.join(TYPECODES)}; got elements of type {dtype}"
        )
    buffer = array(TYPECODES[dtype.name], bytes(dtype.itemsize * math.prod(shape)))
    return StridedStorage(buffer, shape, strides_from_shape(shape), 0, dtype)


def converter(dtype: np.dtype) -> Callable[[Any], Any]:
    """The Python function that turns a computed number into an element of ``dtype``."""
    if dtype.kind == "f":
        return float
    if dtype.kind == "b":
        return bool
    return int


class StridedBackend:
    """Pure-Python strided storage and loops; the reference the fast backends are checked against."""

    name = "strided"

    # ------------------------------------------------------------------ conversions
    def from_numpy(self, array_: np.ndarray) -> StridedStorage:
        array_ = np.asarray(array_, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
        out = empty(array_.shape, array_.dtype)
        out.buffer = array(TYPECODES[out.dtype.name], array_.tobytes())
        return out

    def to_numpy(self, a: StridedStorage) -> np.ndarray:
        if a.size == 0:
            return np.zeros(a.shape, a.dtype)
        flat = np.frombuffer(a.buffer, dtype=a.dtype)
        return flat[position_table(a.shape, a.strides, a.offset)]  # fancy indexing copies

    def shape(self, a: StridedStorage) -> tuple[int, ...]:
        return a.shape

    def strides(self, a: StridedStorage) -> tuple[int, ...]:
        return a.strides

    def dtype(self, a: StridedStorage) -> np.dtype:
        return a.dtype

    # ------------------------------------------------------------------ the primitives
    def map(self, op: str, a: StridedStorage) -> StridedStorage:
        r"""$\mathrm{out}_i = f(a_i)$ for every index $i$ of ``a``; ``out`` is contiguous."""
        fn = scalar_ops.MAP[op]
        out = empty(a.shape, map_dtype(op, a.dtype))
        store = converter(out.dtype)
        for ordinal in range(out.size):
            index = to_index(ordinal, a.shape)
            value = a.buffer[index_to_position(index, a.strides, a.offset)]
            out.buffer[ordinal] = store(fn(value))
        return out

    def zip(self, op: str, a: StridedStorage, b: StridedStorage) -> StridedStorage:
        r"""$\mathrm{out}_i = f(a_{i'}, b_{i''})$ where $i', i''$ are $i$ broadcast back."""
        fn = scalar_ops.ZIP[op]
        shape = broadcast_shape(a.shape, b.shape)
        out = empty(shape, zip_dtype(op, a.dtype, b.dtype))
        store = converter(out.dtype)
        for ordinal in range(out.size):
            index = to_index(ordinal, shape)
            a_index = broadcast_index(index, shape, a.shape)
            b_index = broadcast_index(index, shape, b.shape)
            x = a.buffer[index_to_position(a_index, a.strides, a.offset)]
            y = b.buffer[index_to_position(b_index, b.strides, b.offset)]
            out.buffer[ordinal] = store(fn(x, y))
        return out

    def reduce(
        self, op: str, a: StridedStorage, dims: tuple[int, ...], keepdim: bool
    ) -> StridedStorage:
        r"""$\mathrm{out}_j = a_{j, r_0} \oplus a_{j, r_1} \oplus \cdots$ over the indices $r$ of ``dims``."""
        combine = scalar_ops.REDUCE[op]
        kept = tuple(1 if d in dims else n for d, n in enumerate(a.shape))
        reduced = tuple(a.shape[d] for d in dims)
        count = math.prod(reduced)
        if count == 0 and op != "sum":
            raise ValueError(f"{op}() of an empty dimension has no value (shape {a.shape})")
        out = empty(kept, reduce_dtype(op, a.dtype))
        store = converter(out.dtype)
        for ordinal in range(out.size):
            index = to_index(ordinal, kept)
            acc: Any = 0
            for r in range(count):
                for d, i in zip(dims, to_index(r, reduced), strict=True):
                    index[d] = i
                value = a.buffer[index_to_position(index, a.strides, a.offset)]
                acc = value if (r == 0 and op != "sum") else combine(acc, value)
            out.buffer[ordinal] = store(acc)
        if not keepdim:
            dropped = tuple(n for d, n in enumerate(a.shape) if d not in dims)
            out = StridedStorage(out.buffer, dropped, strides_from_shape(dropped), 0, out.dtype)
        return out

    def matmul(self, a: StridedStorage, b: StridedStorage) -> StridedStorage:
        r"""$C_{ij} = \sum_k A_{ik} B_{kj}$ for every (broadcast) batch index; 1-D operands
        count as a row (left) or a column (right), whose dimension is dropped again."""
        a2 = a if len(a.shape) > 1 else self.view(a, (1, *a.shape))
        b2 = b if len(b.shape) > 1 else self.view(b, (*b.shape, 1))
        assert a2 is not None and b2 is not None, "a 1-D view always exists"
        batch = broadcast_shape(a2.shape[:-2], b2.shape[:-2])
        (M, K), N = a2.shape[-2:], b2.shape[-1]
        out = empty((*batch, M, N), np.result_type(a.dtype, b.dtype))
        store = converter(out.dtype)
        sa_i, sa_k = a2.strides[-2:]
        sb_k, sb_j = b2.strides[-2:]
        position = 0
        for ordinal in range(math.prod(batch)):
            index = to_index(ordinal, batch)
            a_index = broadcast_index(index, batch, a2.shape[:-2])
            b_index = broadcast_index(index, batch, b2.shape[:-2])
            a_base = index_to_position(a_index, a2.strides[:-2], a2.offset)
            b_base = index_to_position(b_index, b2.strides[:-2], b2.offset)
            for i in range(M):
                for j in range(N):
                    acc: Any = 0
                    for k in range(K):
                        x = a2.buffer[a_base + i * sa_i + k * sa_k]
                        y = b2.buffer[b_base + k * sb_k + j * sb_j]
                        acc += x * y
                    out.buffer[position] = store(acc)
                    position += 1
        shape = out.shape
        if len(a.shape) == 1:
            shape = shape[:-2] + shape[-1:]
        if len(b.shape) == 1:
            shape = shape[:-1]
        return StridedStorage(out.buffer, shape, strides_from_shape(shape), 0, out.dtype)

    # ------------------------------------------------------------------ layout: no copies
    def view(self, a: StridedStorage, shape: tuple[int, ...]) -> StridedStorage | None:
        strides = view_strides(a.shape, a.strides, shape)
        if strides is None:
            return None
        return StridedStorage(a.buffer, shape, strides, a.offset, a.dtype)

    def permute(self, a: StridedStorage, dims: tuple[int, ...]) -> StridedStorage:
        shape, strides = permute(a.shape, a.strides, dims)
        return StridedStorage(a.buffer, shape, strides, a.offset, a.dtype)

    def expand(self, a: StridedStorage, shape: tuple[int, ...]) -> StridedStorage:
        return StridedStorage(
            a.buffer, shape, expand_strides(a.shape, a.strides, shape), a.offset, a.dtype
        )

    def contiguous(self, a: StridedStorage) -> StridedStorage:
        return a if is_contiguous(a.shape, a.strides) else self.map("copy", a)

    def astype(self, a: StridedStorage, dtype: np.dtype) -> StridedStorage:
        out = empty(a.shape, dtype)
        store = converter(out.dtype)
        for ordinal, position in enumerate(a.positions()):
            out.buffer[ordinal] = store(a.buffer[position])
        return out

    # ------------------------------------------------------------------ indexing and assembly
    def getitem(self, a: StridedStorage, index: Index) -> StridedStorage:
        """``a[index]``: ints, slices, ``None`` and ``...`` give a view (only shape, strides and
        offset change). Integer or boolean arrays gather a copy: numpy computes *which*
        positions (indexing a table of positions), the loop here moves the elements."""
        if is_basic_index(index):
            shape, strides, offset = basic_index(a.shape, a.strides, a.offset, index)
            return StridedStorage(a.buffer, shape, strides, offset, a.dtype)
        table = position_table(a.shape, a.strides, a.offset)[index]
        out = empty(table.shape, a.dtype)
        for ordinal, position in enumerate(table.ravel().tolist()):
            out.buffer[ordinal] = a.buffer[position]
        return out

    def index_add(
        self, shape: tuple[int, ...], index: Index, values: StridedStorage
    ) -> StridedStorage:
        """Zeros of ``shape`` with ``values`` added at ``index``; repeated positions add up.

        numpy computes the target positions (a table of positions indexed by ``index``); the
        additions are the loop here."""
        out = empty(shape, values.dtype)
        table = position_table(out.shape, out.strides, 0)[index]
        source = self.expand(values, table.shape)
        store = converter(out.dtype)
        for target, position in zip(table.ravel().tolist(), source.positions(), strict=True):
            out.buffer[target] = store(out.buffer[target] + source.buffer[position])
        return out

    def setitem(self, a: StridedStorage, index: Index, values: Any) -> None:
        """Write ``values`` (storage or a number, broadcast) into ``a[index]``, in place.

        Raises:
            ValueError: when ``a`` is an expanded view, whose elements share memory.
        """
        if any(s == 0 and n > 1 for n, s in zip(a.shape, a.strides, strict=True)):
            raise ValueError("assignment destination is read-only (an expanded view)")
        if is_basic_index(index):
            targets = list(self.getitem(a, index).positions())
            target_shape = basic_index(a.shape, a.strides, a.offset, index)[0]
        else:
            table = position_table(a.shape, a.strides, a.offset)[index]
            targets, target_shape = table.ravel().tolist(), table.shape
        store = converter(a.dtype)
        if not isinstance(values, StridedStorage):
            for target in targets:
                a.buffer[target] = store(values)
            return
        while len(values.shape) > len(target_shape) and values.shape[0] == 1:
            values = self.view(values, values.shape[1:])  # numpy drops leading 1s here too
        source = self.expand(values, target_shape)
        # read every value before writing, in case ``values`` is a view of ``a``
        new = [source.buffer[position] for position in source.positions()]
        for target, value in zip(targets, new, strict=True):
            a.buffer[target] = store(value)

    def cat(self, parts: Sequence[StridedStorage], dim: int) -> StridedStorage:
        """Join ``parts`` along ``dim``: each part is copied into its slice of the output."""
        shape = list(parts[0].shape)
        shape[dim] = sum(p.shape[dim] for p in parts)
        out = empty(shape, np.result_type(*[p.dtype for p in parts]))
        start = 0
        for part in parts:
            index = (slice(None),) * dim + (slice(start, start + part.shape[dim]),)
            self.setitem(out, index, part)
            start += part.shape[dim]
        return out

    def where(
        self, condition: StridedStorage, a: StridedStorage, b: StridedStorage
    ) -> StridedStorage:
        r"""$\mathrm{out}_i = a_i$ if $\mathrm{condition}_i$ else $b_i$, all three broadcast."""
        shape = broadcast_shape(broadcast_shape(condition.shape, a.shape), b.shape)
        out = empty(shape, np.result_type(a.dtype, b.dtype))
        store = converter(out.dtype)
        for ordinal in range(out.size):
            index = to_index(ordinal, shape)
            chosen = a if condition.buffer[_at(condition, index, shape)] else b
            out.buffer[ordinal] = store(chosen.buffer[_at(chosen, index, shape)])
        return out

    def argreduce(
        self, op: str, a: StridedStorage, dim: int | None, keepdim: bool
    ) -> StridedStorage:
        """Index of the first largest (``"max"``) or smallest (``"min"``) element along ``dim``;
        a ``nan`` counts as the extreme, as in numpy."""
        if a.size == 0:
            raise ValueError(f"arg{op}() of an empty tensor (shape {a.shape})")
        if dim is None:
            flat = self.view(self.contiguous(a), (a.size,))
            assert flat is not None, "a contiguous tensor can always be flattened"
            out = self.argreduce(op, flat, 0, False)
            return self.view(out, (1,) * len(a.shape)) if keepdim else out  # type: ignore[return-value]
        better = scalar_ops.gt if op == "max" else scalar_ops.lt
        kept = tuple(1 if d == dim else n for d, n in enumerate(a.shape))
        out = empty(kept, np.int64)
        for ordinal in range(out.size):
            index = to_index(ordinal, kept)
            best, best_value = 0, a.buffer[index_to_position(index, a.strides, a.offset)]
            for i in range(1, a.shape[dim]):
                index[dim] = i
                value = a.buffer[index_to_position(index, a.strides, a.offset)]
                if best_value == best_value and (value != value or better(value, best_value)):
                    best, best_value = i, value
            out.buffer[ordinal] = best
        if not keepdim:
            dropped = tuple(n for d, n in enumerate(a.shape) if d != dim)
            out = StridedStorage(out.buffer, dropped, strides_from_shape(dropped), 0, out.dtype)
        return out


def _at(a: StridedStorage, index: list[int], shape: tuple[int, ...]) -> int:
    """Buffer position in ``a`` of the result element at ``index`` (``a`` broadcast to ``shape``)."""
    return index_to_position(broadcast_index(index, shape, a.shape), a.strides, a.offset)


# --------------------------------------------------------------------------- layout arithmetic
# Pure functions of (shape, strides, offset); the CUDA backend reuses them for its device
# buffers, since a layout is the same thing wherever the buffer lives.


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether the layout is row-major without gaps (size-1 dimensions may have any stride)."""
    expected = strides_from_shape(shape)
    return all(s == e for s, e, n in zip(strides, expected, shape, strict=True) if n > 1)


def expand_strides(
    shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]
) -> tuple[int, ...]:
    """Strides that repeat size-1 (and new leading) dimensions to ``new_shape``: stride 0.

    Example:
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
