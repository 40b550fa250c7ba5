"""Data sets as pairs of tensors, and a DataLoader that cuts them into (shuffled) mini-batches.

Example:
    >>> import torchlight as tl
    >>> from torchlight.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(tl.arange(10.0).reshape(5, 2), tl.tensor([0, 1, 0, 1, 1]))
    >>> [tuple(x.shape) for x, y in DataLoader(ds, batch_size=2)]
    [(2, 2), (2, 2), (1, 2)]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from torchlight.creation import generator as global_generator
from torchlight.creation import stack
from torchlight.tensor import Tensor

__all__ = ["DataLoader", "TensorDataset"]


class TensorDataset:
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


class DataLoader:
    """Iterate over a data set in mini-batches of ``batch_size`` samples.

    Args:
        dataset: a :class:`TensorDataset` (batched by one index per tensor, fast), or anything
            with ``len()`` and ``[i]`` returning a tuple of tensors (stacked per batch).
        batch_size: samples per batch; the last batch is smaller unless ``drop_last``.
        shuffle: a new random order every epoch (every ``iter()``).
        drop_last: skip the last batch when it is smaller than ``batch_size``.
        seed: seeds this loader's own generator, so the order is reproducible and independent
            of other random draws; ``None`` draws from the generator of ``tl.manual_seed``.
        generator: a ``numpy.random.Generator`` to draw the order from instead (its state can
            be saved and restored to resume a run exactly).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int | None = None,
        generator: np.random.Generator | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if seed is not None and generator is not None:
            raise ValueError("DataLoader: give seed= or generator=, not both")
        self.dataset, self.batch_size = dataset, batch_size
        self.shuffle, self.drop_last = shuffle, drop_last
        self.generator = np.random.default_rng(seed) if seed is not None else generator

    def __len__(self) -> int:
        """The number of batches per epoch."""
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def _order(self) -> np.ndarray:
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        rng = self.generator if self.generator is not None else global_generator()
        return rng.permutation(n)

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:
        order = self._order()
        for batch in range(len(self)):
            yield self._batch(order[batch * self.batch_size : (batch + 1) * self.batch_size])

    def _batch(self, indices: np.ndarray) -> tuple[Tensor, ...]:
        if isinstance(self.dataset, TensorDataset):
            if np.array_equal(indices, np.arange(indices[0], indices[0] + len(indices))):
                chunk = slice(int(indices[0]), int(indices[0]) + len(indices))
                return tuple(t[chunk] for t in self.dataset.tensors)  # a view, no copy
            return self.dataset[indices]
        if hasattr(self.dataset, "__getitems__"):  # a whole batch at once (PyTorch's protocol)
            return tuple(self.dataset.__getitems__(indices))
        samples: Sequence[tuple[Tensor, ...]] = [self.dataset[int(i)] for i in indices]
        return tuple(stack(list(column)) for column in zip(*samples, strict=True))

    def __repr__(self) -> str:
        return (
            f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, shuffle={self.shuffle}, "
            f"drop_last={self.drop_last})"
        )
