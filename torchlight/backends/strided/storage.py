r"""The strided backend's storage: a :class:`~torchlight.backends.strided.layout.StridedLayout`
over an :class:`array.array` in host memory.

This module holds what the strided loops (:mod:`~torchlight.backends.strided.backend`) need to keep
elements: :class:`StridedStorage`, :func:`empty` to allocate a fresh contiguous one, the
``array.array`` type code of each dtype (:data:`TYPECODES`), and :func:`converter`, the Python
function that turns a computed number into an element of the output's dtype.

Example:
    >>> from torchlight.backends.strided.storage import StridedStorage, empty
    >>> a = empty((2, 3), "float32")
    >>> a
    StridedStorage(shape=(2, 3), strides=(3, 1), offset=0, dtype=float32, buffer of 6)
    >>> list(a.positions())
    [0, 1, 2, 3, 4, 5]
    >>> list(StridedStorage(a.buffer, (3, 2), (1, 3), 0, a.dtype).positions())  # its transpose
    [0, 3, 1, 4, 2, 5]
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from torchlight.backends.strided.layout import StridedLayout
from torchlight.shape import index_to_position, strides_from_shape, to_index

#: numpy dtype name -> ``array.array`` type code holding such elements.
TYPECODES = {"float64": "d", "float32": "f", "int64": "q", "int32": "i", "bool": "B"}


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
