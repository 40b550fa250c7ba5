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

The backend is three modules, read in this order:

- :mod:`~torchlight.backends.strided.layout`: :class:`StridedLayout` and the arithmetic on
  ``(shape, strides, offset)`` that views and indexing are made of (shared with the CUDA
  backend);
- :mod:`~torchlight.backends.strided.storage`: :class:`StridedStorage`, the layout over a host
  ``array.array``, and :func:`empty` to allocate one;
- this module: :class:`StridedBackend`, the loops themselves.

Their public names can all be imported from here too.

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], backend="strided")
    >>> x.storage
    StridedStorage(shape=(2, 3), strides=(3, 1), offset=0, dtype=float64, buffer of 6)
    >>> x.T.storage  # the same buffer, read with swapped strides
    StridedStorage(shape=(3, 2), strides=(1, 3), offset=0, dtype=float64, buffer of 6)
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from torchlight.backends import scalar_ops
from torchlight.backends.base import Index
from torchlight.backends.fused import FusedKernels
from torchlight.backends.scalar_ops import map_dtype, reduce_dtype, zip_dtype
from torchlight.backends.strided.layout import (
    LayoutOps,
    StridedLayout,
    basic_index,
    expand_strides,
    is_basic_index,
    is_contiguous,
    position_table,
    view_strides,
)
from torchlight.backends.strided.storage import TYPECODES, StridedStorage, converter, empty
from torchlight.shape import (
    broadcast_index,
    broadcast_shape,
    index_to_position,
    reduced_shape,
    strides_from_shape,
    to_index,
)

# The building blocks live in their own modules; they stay importable from here.
__all__ = [
    "TYPECODES",
    "StridedBackend",
    "StridedLayout",
    "StridedStorage",
    "basic_index",
    "converter",
    "empty",
    "expand_strides",
    "is_basic_index",
    "is_contiguous",
    "position_table",
    "view_strides",
]


class StridedBackend(LayoutOps, FusedKernels):
    """Pure-Python strided storage and loops; the reference the fast backends are checked against.

    The layout primitives (``view``, ``permute``, ``expand``, ``contiguous``) come from
    :class:`~torchlight.backends.strided.layout.LayoutOps`: they only compute new strides.
    """

    name = "strided"

    # ------------------------------------------------------------------ conversions
    def from_numpy(self, array_: np.ndarray) -> StridedStorage:
        array_ = np.asarray(array_, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
        out = empty(array_.shape, array_.dtype)
        out.buffer = array(TYPECODES[out.dtype.name], array_.tobytes())
        return out

    def scalar(self, value: int | float | bool, dtype: np.dtype | None) -> StridedStorage:
        return self.from_numpy(np.asarray(value, dtype))

    def to_numpy(self, a: StridedStorage) -> np.ndarray:
        if a.size == 0:
            return np.zeros(a.shape, a.dtype)
        flat = np.frombuffer(a.buffer, dtype=a.dtype)
        return flat[position_table(a.shape, a.strides, a.offset)]  # fancy indexing copies

    def strides(self, a: StridedStorage) -> tuple[int, ...]:
        return a.strides

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

    def zip(
        self, op: str, a: StridedStorage, b: StridedStorage, out: StridedStorage | None = None
    ) -> StridedStorage:
        r"""$\mathrm{out}_i = f(a_{i'}, b_{i''})$ where $i', i''$ are $i$ broadcast back.

        With ``out``, the result is computed in full, then copied into ``out`` (which may be
        ``a`` or ``b``: reading everything before writing keeps that safe).
        """
        if out is not None:
            self.setitem(out, (...,), self.zip(op, a, b))
            return out
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
        kept = reduced_shape(a.shape, dims, keepdim=True)
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
            dropped = reduced_shape(a.shape, dims, keepdim=False)
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
            return self.basic_view(a, index)
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
            return self.view(out, (1,) * len(a.shape)) if keepdim else out
        better = scalar_ops.gt if op == "max" else scalar_ops.lt
        kept = reduced_shape(a.shape, (dim,), keepdim=True)
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
            dropped = reduced_shape(a.shape, (dim,), keepdim=False)
            out = StridedStorage(out.buffer, dropped, strides_from_shape(dropped), 0, out.dtype)
        return out


def _at(a: StridedStorage, index: list[int], shape: tuple[int, ...]) -> int:
    """Buffer position in ``a`` of the result element at ``index`` (``a`` broadcast to ``shape``)."""
    return index_to_position(broadcast_index(index, shape, a.shape), a.strides, a.offset)
