"""Data sets, as ``torch.utils.data``'s (PyTorch's file, ``dataset.py``): :class:`Dataset`
(subclass it: ``__len__`` and ``__getitem__``), :class:`TensorDataset`, :class:`Subset`,
:class:`ConcatDataset`, :func:`random_split`, and :func:`default_collate`, which turns a list of
samples into a batch (:class:`~torchlight.utils.data.DataLoader` batches with it).
``torchlight.data`` (the toy, digits and text sets) re-exports these same objects.

Example:
    >>> import torchlight as tl
    >>> from torchlight.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(tl.arange(10.0).reshape(5, 2), tl.tensor([0, 1, 0, 1, 1]))
    >>> [tuple(x.shape) for x, y in DataLoader(ds, batch_size=2)]
    [(2, 2), (2, 2), (1, 2)]
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from torchlight.creation import stack, tensor
from torchlight.random import rng_of
from torchlight.tensor import Tensor

__all__ = [
    "ConcatDataset", "Dataset", "Subset", "TensorDataset", "default_collate", "random_split",
]  # fmt: skip


class Dataset:
    """Base class of map-style data sets: subclass it and write ``__len__`` and ``__getitem__``.

    ``ds[i]`` may return one tensor, a tuple of tensors (input, label), numbers or a dict of them;
    the :class:`DataLoader` batches each part (see :func:`default_collate`). ``a + b`` joins two
    data sets (:class:`ConcatDataset`).

    Example:
        >>> import torchlight as tl
        >>> from torchlight.utils.data import DataLoader, Dataset
        >>> class Squares(Dataset):
        ...     def __len__(self):
        ...         return 4
        ...     def __getitem__(self, i):
        ...         return tl.tensor([float(i), float(i * i)])
        >>> next(iter(DataLoader(Squares(), batch_size=3))).shape
        (3, 2)
    """

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__(self, index)")

    def __add__(self, other: Any) -> ConcatDataset:
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Samples ``i`` of several tensors that share their first dimension: ``ds[i] = (x[i], y[i])``.

    Args:
        *tensors: e.g. inputs of shape (N, ...) and labels of shape (N,).
    """

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0] if tensors[0].ndim else None
        for i, t in enumerate(tensors):
            if t.ndim == 0 or t.shape[0] != n:
                raise ValueError(
                    f"TensorDataset: all tensors need the same first dimension (the number of "
                    f"samples); tensor 0 has shape {tensors[0].shape}, tensor {i} has {t.shape}"
                )
        self.tensors = tensors

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __repr__(self) -> str:
        shapes = ", ".join(str(t.shape) for t in self.tensors)
        return f"{type(self).__name__}({len(self)} samples: {shapes})"


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order: ``Subset(ds, idx)[i] = ds[idx[i]]``.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.utils.data import Subset, TensorDataset
        >>> ds = TensorDataset(tl.arange(5.0))
        >>> Subset(ds, [4, 0])[0]
        (tensor(4.),)
    """

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, [int(i) for i in indices]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, (list, np.ndarray)):
            return self.dataset[[self.indices[int(i)] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several data sets one after another: indices ``0..len(a)-1`` are ``a``'s, then ``b``'s."""

    def __init__(self, datasets: Sequence[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset needs at least one data set")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is out of range for a data set of {len(self)} samples")
        part = bisect.bisect_right(self.cumulative_sizes, index)
        start = int(self.cumulative_sizes[part - 1]) if part else 0
        return self.datasets[part][index - start]


def random_split(
    dataset: Any, lengths: Sequence[int | float], generator: Any = None
) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random :class:`Subset` s of the given lengths.

    ``lengths`` are sample counts that add up to ``len(dataset)``, or fractions that add up to 1
    (then, as in PyTorch, ``floor(fraction * n)`` each, and the samples left over go one each to
    the first subsets).

    Args:
        dataset: any data set with ``len()`` and ``[i]``.
        lengths: e.g. ``[800, 200]`` or ``[0.8, 0.2]``.
        generator: a :class:`torchlight.Generator` (or a ``numpy.random.Generator``); ``None``
            draws from ``tl.manual_seed``'s.

    Example:
        >>> from torchlight.utils.data import TensorDataset, random_split
        >>> import torchlight as tl
        >>> train, val = random_split(TensorDataset(tl.arange(10.0)), [0.8, 0.2],
        ...                           generator=tl.Generator().manual_seed(0))
        >>> len(train), len(val)
        (8, 2)
    """
    n = len(dataset)
    sizes = list(lengths)
    if sizes and all(isinstance(x, float) for x in sizes) and math.isclose(sum(sizes), 1.0):
        if any(not 0.0 <= x <= 1.0 for x in sizes):
            raise ValueError(f"random_split: fractions must be in [0, 1], got {sizes}")
        counts = [math.floor(n * x) for x in sizes]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
    else:
        counts = [int(x) for x in sizes]
        if any(c < 0 or c != x for c, x in zip(counts, sizes, strict=True)) or sum(counts) != n:
            raise ValueError(
                f"random_split: lengths must be non-negative sample counts that add up to the "
                f"data set's {n} samples, or fractions that add up to 1; got {sizes}"
            )
    order = rng_of(generator).permutation(n).tolist()
    offsets = np.cumsum([0, *counts]).tolist()
    return [Subset(dataset, order[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def default_collate(batch: Sequence[Any]) -> Any:
    """Turn a list of samples into one batch, part by part, as PyTorch's ``default_collate``.

    A tensor sample gives one stacked tensor (shape ``(batch, *sample_shape)``); numbers give a
    1-d tensor (int64 for ints, float64 for floats); numpy arrays are stacked into a tensor; a
    tuple or list of parts gives a tuple of batched parts; a dict gives a dict; strings stay a list.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.utils.data import default_collate
        >>> x, y = default_collate([(tl.zeros(3), 1), (tl.ones(3), 0)])
        >>> x.shape, y
        ((2, 3), tensor([1, 0]))
    """
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(list(batch))
    if isinstance(first, np.ndarray):
        return tensor(np.stack(batch))
    if isinstance(first, (bool, int, float, np.number)):
        return tensor(list(batch))
    if isinstance(first, str):
        return list(batch)
    if isinstance(first, Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, (tuple, list)):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("default_collate: every sample in a batch must have the same parts")
        return tuple(default_collate(list(part)) for part in zip(*batch, strict=True))
    raise TypeError(
        f"default_collate: samples must be tensors, numpy arrays, numbers, strings, or "
        f"tuples/lists/dicts of them; got {type(first).__name__}. Pass collate_fn= to batch them "
        "yourself."
    )
