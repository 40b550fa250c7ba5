r"""Dropout: ``Dropout`` (each element) and ``Dropout2d`` (whole channels), as Modules and in
functional form, as in PyTorch.

In training, each element (or channel) is zeroed with probability $p$ and the rest are scaled by
$1/(1-p)$, so the expected value is unchanged; in ``eval()`` mode nothing changes. The draws come
from ``tl.manual_seed``'s generator.

Example:
    >>> import torchlight as tl
    >>> tl.nn.Dropout(0.5).eval()(tl.ones(3))
    tensor([1., 1., 1.])
"""

from __future__ import annotations

import warnings

from torchlight.creation import rand
from torchlight.nn.module import Module
from torchlight.tensor import Tensor

__all__ = ["Dropout", "Dropout2d", "dropout", "dropout2d"]


def dropout(input: Tensor, p: float = 0.5, training: bool = True) -> Tensor:  # noqa: A002
    r"""Zero each element with probability $p$ and scale the rest by $1/(1-p)$ (identity when not
    ``training``), so the expected value is unchanged. Seeded by ``tl.manual_seed``.

    Shape: any; the output has the input's shape.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = rand(*input.shape, dtype=input.dtype, backend=input.backend) >= p
    return input * (keep.to(input.dtype) * (1.0 / (1.0 - p)))


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True) -> Tensor:  # noqa: A002
    r"""Zero whole channels with probability $p$ (the rest scaled by $1/(1-p)$).

    Shape: $(N, C, H, W)$ or $(C, H, W)$; one draw per (sample, channel).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if input.ndim == 2:  # PyTorch warns and drops whole rows (it reads (N, C) as (1, N, C))
        warnings.warn(
            "dropout2d: Received a 2-D input to dropout2d, which is deprecated and will result in an "
            "error in a future release. To retain the behavior and silence this warning, please use "
            "dropout1d instead.",
            UserWarning,
            stacklevel=3,
        )
        mask_shape: tuple[int, ...] = (input.shape[0], 1)
    elif input.ndim not in (3, 4):
        raise ValueError(f"dropout2d: expected (N, C, H, W) or (C, H, W), got {input.shape}")
    else:
        mask_shape = (*input.shape[:-2], 1, 1)
    keep = rand(*mask_shape, dtype=input.dtype, backend=input.backend) >= p
    return input * (keep.to(input.dtype) * (1.0 / (1.0 - p) if p < 1.0 else 0.0))


class Dropout(Module):
    r"""In training, zero each element with probability $p$ and scale the others by $1/(1-p)$;
    in ``eval()`` mode, do nothing. Shape: any."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Dropout2d(Module):
    r"""In training, zero whole channels with probability $p$ (the rest scaled by $1/(1-p)$);
    in ``eval()`` do nothing. Shape: $(N, C, H, W)$ or $(C, H, W)$."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout2d(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
