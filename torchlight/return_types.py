"""The named tuples ops return where PyTorch returns ``torch.return_types.*``.

``values, indices = x.topk(2)`` unpacks like a tuple; ``x.sort().indices`` reads a field.

Example:
    >>> import torchlight as tl
    >>> tl.tensor([3.0, 1.0, 2.0]).sort()
    Sort(values=tensor([1., 2., 3.]), indices=tensor([1, 2, 0]))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

__all__ = ["Median", "Sort", "TopK"]


class Sort(NamedTuple):
    """What ``sort`` returns: the sorted ``values`` and where each came from (``indices``)."""

    values: Tensor
    indices: Tensor


class TopK(NamedTuple):
    """What ``topk`` returns: the ``k`` largest (or smallest) ``values`` and their ``indices``."""

    values: Tensor
    indices: Tensor


class Median(NamedTuple):
    """What ``median(dim)`` returns: the median ``values`` and their ``indices``."""

    values: Tensor
    indices: Tensor
