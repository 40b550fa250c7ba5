"""The backend protocol: the few primitives every backend implements.

A backend owns tensor *storage* (for numpy, an ``ndarray``; for the strided reference, flat
storage + shape + strides) and knows how to run a handful of higher-order primitives on it:

- ``map(op, a)``: apply a one-argument scalar op to every element;
- ``zip(op, a, b, out=None)``: apply a two-argument scalar op elementwise, broadcasting ``a``
  and ``b`` (into ``out`` when given: how in-place ops such as ``p.sub_(g)`` avoid a temporary);
- ``reduce(op, a, dims, keepdim)``: fold the elements along ``dims`` with ``sum``/``max``/``min``;
- ``matmul(a, b)``: batched matrix product (the one op too important to leave to ``zip`` and ``reduce``);

plus *layout* operations that only rewrite shape, strides and offset (reshape, permute, expand,
indexing), conversions to and from numpy, and ``scalar`` (a Python number as 0-d storage, for
``x * 0.5``). Every :class:`~torchlight.autograd.Function` is written against these names only,
so a model runs unchanged on any backend.

That is the whole protocol. Fused kernels, for speed only, are a separate, optional
extension (:mod:`torchlight.backends.fused`) whose default is the composition of these
primitives; a backend's own speed tricks live in its own kernels file.

Ops are named by strings (``"exp"``, ``"add"``...) rather than passed as Python functions, so a
compiled backend can look up a kernel compiled ahead of time for each name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: One-argument elementwise ops, ``map(op, a)``.
MAP_OPS = (
    "neg",  # -x
    "abs",  # |x|
    "exp",  # e^x
    "log",  # ln x
    "sqrt",  # sqrt(x)
    "sigmoid",  # 1 / (1 + e^-x), computed stably
    "relu",  # max(x, 0)
    "tanh",  # tanh x
    "sign",  # -1, 0 or 1
    "reciprocal",  # 1 / x
    "square",  # x * x
    "copy",  # x (a contiguous copy)
    "sin",  # sin x
    "cos",  # cos x
    "log1p",  # ln(1 + x), accurate for small x
    "expm1",  # e^x - 1, accurate for small x
    "erf",  # the error function 2/sqrt(pi) * integral of e^(-t^2) from 0 to x
    "floor",  # the largest integer <= x
    "round",  # the nearest integer, halves to even
)

#: Two-argument elementwise ops, ``zip(op, a, b)``; comparisons return bool storage.
ZIP_OPS = (
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
)

COMPARISON_OPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})

#: Reductions, ``reduce(op, a, dims, keepdim)``.
REDUCE_OPS = ("sum", "max", "min")

Index = tuple[Any, ...]
"""A normalized index: ints, slices, ``None``, ``Ellipsis`` and numpy int/bool arrays."""


@runtime_checkable
class Backend(Protocol):
    """What torchlight's tensors and Functions need from a backend.

    A *storage* is whatever object the backend keeps a tensor's elements in; every storage
    has a ``shape`` (a tuple of ints) and a ``dtype`` (a numpy dtype) of its own, as an
    ``ndarray`` does, so a tensor reads them without a call into the backend.
    """

    name: str

    # conversions ---------------------------------------------------------------
    def from_numpy(self, array: np.ndarray) -> Any:
        """Storage holding a copy (or a view, if the backend can share) of ``array``."""
        ...

    def scalar(self, value: int | float | bool, dtype: np.dtype | None) -> Any:
        """0-d storage holding the Python number ``value`` in ``dtype`` (``None``: numpy's for
        the number, int64 or bool): how ``x * 0.5`` lifts its ``0.5``. Only read, never written
        into, so a backend may hand out the same read-only storage for the same number."""
        ...

    def to_numpy(self, a: Any) -> np.ndarray:
        """The elements of ``a`` as a numpy array (on the host)."""
        ...

    def strides(self, a: Any) -> tuple[int, ...]:
        """Strides in elements (not bytes), as PyTorch reports them."""
        ...

    # the higher-order primitives --------------------------------------------------
    def map(self, op: str, a: Any) -> Any: ...

    def zip(self, op: str, a: Any, b: Any, out: Any = None) -> Any:
        """The broadcast result in new storage, or written into ``out`` (which has the broadcast
        shape and the result's dtype, and may be ``a`` itself) and returned."""
        ...

    def reduce(self, op: str, a: Any, dims: tuple[int, ...], keepdim: bool) -> Any: ...

    def matmul(self, a: Any, b: Any) -> Any: ...

    # layout -------------------------------------------------------------------------
    def view(self, a: Any, shape: tuple[int, ...]) -> Any:
        """A view with a new shape, or ``None`` if the strides do not allow one."""
        ...

    def permute(self, a: Any, dims: tuple[int, ...]) -> Any: ...

    def expand(self, a: Any, shape: tuple[int, ...]) -> Any: ...

    def contiguous(self, a: Any) -> Any: ...

    def astype(self, a: Any, dtype: np.dtype) -> Any: ...

    # indexing and assembly ---------------------------------------------------
    def getitem(self, a: Any, index: Index) -> Any: ...

    def index_add(self, shape: tuple[int, ...], index: Index, values: Any) -> Any:
        """Zeros of ``shape`` with ``values`` added at ``index`` (repeated indices add up)."""
        ...

    def setitem(self, a: Any, index: Index, values: Any) -> None:
        """Write ``values`` into ``a[index]`` in place."""
        ...

    def cat(self, parts: Sequence[Any], dim: int) -> Any: ...

    def where(self, condition: Any, a: Any, b: Any) -> Any: ...

    def argreduce(self, op: str, a: Any, dim: int | None, keepdim: bool) -> Any:
        """Index of the ``"max"`` or ``"min"`` along ``dim`` (over all elements if None)."""
        ...
