r"""Resizing images and sequences: ``F.interpolate`` and ``nn.Upsample`` (PyTorch's file name).

Each spatial axis is resized on its own, as a composition of differentiable ops:

- ``"nearest"``: output position $i$ reads input position $\lfloor i \cdot s \rfloor$, with
  $s = n_{\text{in}} / n_{\text{out}}$ (or $1 / \text{scale\_factor}$ when one is given);
- ``"linear"`` / ``"bilinear"``: output position $i$ reads the source point
  $c = (i + \tfrac12) s - \tfrac12$ (clamped at 0), or $c = i (n_{\text{in}} - 1)/(n_{\text{out}} - 1)$
  with ``align_corners=True``, and mixes its two neighbours
  $(1 - \lambda)\, x_{\lfloor c \rfloor} + \lambda\, x_{\lfloor c \rfloor + 1}$, $\lambda = c - \lfloor c \rfloor$.

Bilinear is linear along the rows, then along the columns.

Example:
    >>> import torchlight as tl
    >>> from torchlight.nn.functional import interpolate
    >>> interpolate(tl.tensor([[[1.0, 2.0]]]), scale_factor=2)
    tensor([[[1., 1., 2., 2.]]])
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from torchlight.nn.module import Module
from torchlight.tensor import Tensor

__all__ = ["Upsample", "interpolate"]

_MODES = {"nearest": None, "linear": 3, "bilinear": 4}  # mode -> the input's ndim it needs


def interpolate(
    input: Tensor,  # noqa: A002
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
) -> Tensor:
    """Resize the spatial axes of an $(N, C, L)$ or $(N, C, H, W)$ tensor to ``size`` or by
    ``scale_factor`` (see the module docstring for the rule of each ``mode``)."""
    if mode not in _MODES:
        raise NotImplementedError(
            f"interpolate(mode={mode!r}): torchlight has 'nearest', 'linear' (3-d input) and "
            "'bilinear' (4-d input)"
        )
    if _MODES[mode] is not None and input.ndim != _MODES[mode]:
        raise ValueError(
            f"interpolate(mode={mode!r}) expects a {_MODES[mode]}-d input, got {input.shape}"
        )
    if input.ndim < 3:
        raise ValueError(f"interpolate expects (N, C, L) or (N, C, H, W), got shape {input.shape}")
    if mode == "nearest" and align_corners is not None:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: linear | bilinear"
        )
    axes = input.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size= and scale_factor=")
    if size is not None:
        sizes = [int(size)] * axes if isinstance(size, int) else [int(s) for s in size]
        scales: list[float | None] = [None] * axes
    else:
        if isinstance(scale_factor, (int, float)):
            factors = [float(scale_factor)] * axes
        else:
            factors = [float(f) for f in scale_factor]  # type: ignore[union-attr]
        sizes = [math.floor(n * f) for n, f in zip(input.shape[2:], factors, strict=True)]
        scales = [None if recompute_scale_factor else 1.0 / f for f in factors]
    out = input
    for k in range(axes):
        axis, n, m = 2 + k, input.shape[2 + k], sizes[k]
        given = scales[k]
        scale = given if given is not None else n / m
        if mode == "nearest":
            source = np.minimum(np.floor(np.arange(m) * scale).astype(np.int64), n - 1)
            out = out.index_select(axis, out._lift(source))
        else:
            out = _linear_along(out, axis, n, m, scale, bool(align_corners))
    return out


def _linear_along(
    x: Tensor, axis: int, n: int, m: int, scale: float, align_corners: bool
) -> Tensor:
    """Linear interpolation along one axis: each output mixes its source point's two neighbours."""
    i = np.arange(m, dtype=np.float64)
    if align_corners:
        points = i * ((n - 1) / (m - 1)) if m > 1 else np.zeros(m)
    else:
        points = np.maximum((i + 0.5) * scale - 0.5, 0.0)
    low = np.minimum(np.floor(points).astype(np.int64), n - 1)
    high = np.minimum(low + 1, n - 1)
    shape = [1] * x.ndim
    shape[axis] = m
    weight = x._lift((points - low).reshape(shape).astype(x.dtype.numpy))
    return (
        x.index_select(axis, x._lift(low)) * (1 - weight)
        + x.index_select(axis, x._lift(high)) * weight
    )


class Upsample(Module):
    """:func:`interpolate` as a layer: ``nn.Upsample(scale_factor=2, mode="nearest")``."""

    def __init__(
        self,
        size: int | Sequence[int] | None = None,
        scale_factor: float | Sequence[float] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return interpolate(
            x, self.size, self.scale_factor, self.mode, self.align_corners,
            self.recompute_scale_factor,
        )  # fmt: skip

    def extra_repr(self) -> str:
        if self.size is not None:
            return f"size={self.size}, mode={self.mode!r}"
        factor = self.scale_factor
        shown = float(factor) if isinstance(factor, (int, float)) else tuple(factor or ())
        return f"scale_factor={shown}, mode={self.mode!r}"
