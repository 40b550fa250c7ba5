r"""Embedding: a learnable lookup table, ``weight[indices]``, with PyTorch's ``padding_idx`` and
``from_pretrained``; ``F.embedding`` is the same lookup with a given table, and ``F.one_hot``
the lookup in an identity matrix (PyTorch's "sparse functions").

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn
    >>> table = nn.Embedding.from_pretrained(tl.tensor([[0.0, 0.0], [1.0, 2.0]]))
    >>> table(tl.tensor([[1, 0, 1]])).shape
    (1, 3, 2)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from torchlight import dtypes
from torchlight.autograd import no_grad
from torchlight.creation import empty, eye, tensor, where
from torchlight.nn import init
from torchlight.nn.module import Module, Parameter
from torchlight.tensor import Tensor

__all__ = ["Embedding", "embedding", "one_hot"]


def _check_indices(who: str, indices: Tensor, num_embeddings: int) -> None:
    if not isinstance(indices, Tensor) or indices.dtype.is_floating_point:
        got = indices.dtype if isinstance(indices, Tensor) else type(indices).__name__
        raise TypeError(
            f"{who}: indices must be integers (an int64 tensor), got {got}; use .long()"
        )
    if indices.numel():
        low, high = int(indices.min().item()), int(indices.max().item())
        if low < 0 or high >= num_embeddings:
            raise IndexError(
                f"{who}: index {low if low < 0 else high} is out of range; indices must "
                f"be in 0..{num_embeddings - 1}"
            )


def _padding_index(padding_idx: int | None, num_embeddings: int) -> int | None:
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(
            f"padding_idx must be within the {num_embeddings} embeddings, got {padding_idx}"
        )
    return padding_idx % num_embeddings


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:  # noqa: A002
    r"""$\mathrm{out}[\ldots] = W[\mathrm{input}[\ldots]]$: rows of ``weight`` picked by index.

    Rows read at ``padding_idx`` pass their value but get no gradient (as in PyTorch): the
    output there comes from ``weight.detach()``.

    Shape: integer indices $(*)$, weight $(V, D)$, output $(*, D)$.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.nn.functional import embedding
        >>> embedding(tl.tensor([2, 0]), tl.arange(6.0).reshape(3, 2))
        tensor([[4., 5.],
                [0., 1.]])
    """
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be (num_embeddings, dim), got {weight.shape}")
    _check_indices("embedding", input, weight.shape[0])
    rows = weight[input]
    pad = _padding_index(padding_idx, weight.shape[0])
    if pad is None:
        return rows
    # the same values either way; only the rows not at padding_idx lead back to weight (the
    # mask is built from the indices on the host, as the lookup itself reads them there)
    keep = tensor((input.numpy() != pad)[..., None], backend=weight.backend)
    return where(keep, rows, weight.detach()[input])


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    r"""$\mathrm{out}[\ldots, k] = [\mathrm{tensor}[\ldots] = k]$, as int64.

    Shape: $(*)$ of class indices -> $(*, \text{num\_classes})$.

    Example:
        >>> import torchlight as tl
        >>> tl.nn.functional.one_hot(tl.tensor([0, 2]), 3)
        tensor([[1, 0, 0],
                [0, 0, 1]])
    """
    if tensor.dtype.is_floating_point:
        raise TypeError(f"one_hot needs integer class indices, got {tensor.dtype}; use .long()")
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    check_labels("one_hot", tensor, num_classes)
    return eye(num_classes, dtype=dtypes.int64, backend=tensor.backend)[tensor]


def host_labels(target: Tensor) -> np.ndarray:
    """The target's class indices as a host numpy array (a view on numpy, a copy from a GPU)."""
    return np.asarray(target.backend.to_numpy(target.storage))


def check_labels(
    fn_name: str, target: Tensor, num_classes: int, labels: np.ndarray | None = None
) -> np.ndarray:
    """The labels as a host numpy array (``labels``, if the caller has them already), after
    checking each is a class index in [0, C)."""
    # The labels are few: check them on the host (a view on numpy, a small copy from a GPU).
    # Out-of-range labels must not reach the indexing, where -1 would silently mean the last class.
    labels = host_labels(target) if labels is None else labels
    if labels.size == 0:
        return labels
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= num_classes:
        bad = low if low < 0 else high
        where = tuple(int(i) for i in np.argwhere(labels == bad)[0])
        position = where[0] if len(where) == 1 else where
        raise IndexError(
            f"{fn_name}: target {bad} (at position {position}) is out of bounds: with "
            f"{num_classes} classes, class indices must be in 0..{num_classes - 1}"
        )
    return labels


class Embedding(Module):
    r"""A lookup table: $\mathrm{out}[\ldots] = W[\mathrm{index}[\ldots]]$, $W \sim \mathcal{N}(0, 1)$.

    Args:
        num_embeddings: the table's size $V$ (indices are in $[0, V)$).
        embedding_dim: the length $D$ of each row.
        padding_idx: a row that starts at zero and is never trained (its gradient is 0),
            e.g. for the padding token of a batch of sentences.

    Shape: integer indices $(*)$ in $[0, \text{num\_embeddings})$, output $(*, \text{embedding\_dim})$.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        device: Any = None,
        dtype: Any = None,
        *,
        _weight: Tensor | None = None,
        _freeze: bool = False,
    ) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = _padding_index(padding_idx, num_embeddings)
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype))
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight.detach().clone(), requires_grad=not _freeze)
        self._place(device)  # PyTorch's device= keyword

    def reset_parameters(self) -> None:
        """$\\mathcal{N}(0, 1)$, with the ``padding_idx`` row zeroed, as in PyTorch."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    @classmethod
    def from_pretrained(
        cls, embeddings: Tensor, freeze: bool = True, padding_idx: int | None = None
    ) -> Embedding:
        """An Embedding holding a copy of ``embeddings`` (V, D); ``freeze`` (the default) makes it
        not learnable (``requires_grad=False``)."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            got = embeddings.shape if isinstance(embeddings, Tensor) else type(embeddings).__name__
            raise ValueError(f"Embedding.from_pretrained: expected a 2-D tensor (V, D), got {got}")
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx, _weight=embeddings, _freeze=freeze)

    def forward(self, indices: Tensor) -> Tensor:
        _check_indices(repr(self), indices, self.num_embeddings)
        return embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        return text if self.padding_idx is None else text + f", padding_idx={self.padding_idx}"
