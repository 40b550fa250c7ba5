r"""Padding and zero insertion as compositions of differentiable ops (``cat``, ``stack``, slicing),
the building blocks of ``padding="same"``, dilated and grouped convolutions, ``ConvTranspose2d``
and pooling with ``ceil_mode``.

Example:
    >>> import torchlight as tl
    >>> from torchlight.nn.padding import dilate
    >>> from torchlight.nn.functional import pad
    >>> pad(tl.ones(1, 2), (1, 2), value=0.0)
    tensor([[0., 1., 1., 0., 0.]])
    >>> dilate(tl.tensor([1.0, 2.0, 3.0]), dim=0, factor=2)
    tensor([1., 0., 2., 0., 3.])
"""

from __future__ import annotations

from collections.abc import Sequence

from torchlight.creation import cat, full, stack, zeros_like
from torchlight.tensor import Tensor

__all__ = ["dilate", "pad"]


def _pad_dim(x: Tensor, dim: int, before: int, after: int, value: float) -> Tensor:
    """Pad (or, for a negative amount, crop) dimension ``dim`` of ``x``."""
    if before < 0 or after < 0:  # crop first
        index = [slice(None)] * x.ndim
        index[dim] = slice(max(-before, 0), x.shape[dim] - max(-after, 0))
        x = x[tuple(index)]
        before, after = max(before, 0), max(after, 0)
    parts = []
    for amount in (before, after):
        shape = list(x.shape)
        shape[dim] = amount
        parts.append(full(tuple(shape), value, dtype=x.dtype, backend=x.backend))
    if before == 0 and after == 0:
        return x
    return cat([parts[0], x, parts[1]], dim)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:  # noqa: A002
    r"""Surround the last dimensions with ``value``, as ``torch.nn.functional.pad``: ``pad`` is
    ``(left, right)`` for the last dimension, then ``(top, bottom)`` for the one before, and so
    on. Negative amounts crop. Differentiable (the padding gets no gradient).

    Shape: $(*, H, W)$ -> $(*, H + t + b, W + l + r)$ for ``pad=(l, r, t, b)``.
    """
    if mode != "constant":
        raise NotImplementedError(f"pad: only mode='constant' is implemented, got {mode!r}")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(
            f"pad: expected pairs (before, after) for at most {input.ndim} dimensions, got {pad}"
        )
    out = input
    for i in range(len(pad) // 2):
        out = _pad_dim(out, input.ndim - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1]), value)
    return out


def dilate(x: Tensor, dim: int, factor: int) -> Tensor:
    r"""Insert ``factor - 1`` zeros between neighbours along ``dim``: length $L \to (L-1)f + 1$.

    A dilated kernel is the kernel dilated so; a transposed convolution dilates its input so.
    """
    if factor == 1 or x.shape[dim] == 0:
        return x
    dim = dim % x.ndim
    spread = stack([x] + [zeros_like(x)] * (factor - 1), dim + 1)  # (..., L, f, ...)
    shape = x.shape[:dim] + (x.shape[dim] * factor,) + x.shape[dim + 1 :]
    index = [slice(None)] * x.ndim
    index[dim] = slice(0, (x.shape[dim] - 1) * factor + 1)
    return spread.reshape(*shape)[tuple(index)]
