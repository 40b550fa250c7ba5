r"""``nn.PixelShuffle`` / ``nn.PixelUnshuffle`` and their ``F.pixel_shuffle`` forms: move
$r \times r$ channel blocks into space, $(*, C r^2, H, W) \to (*, C, H r, W r)$, and back.

A reshape, a permute and a reshape, so the gradient is the inverse rearrangement.

Example:
    >>> import torchlight as tl
    >>> from torchlight.nn.functional import pixel_shuffle
    >>> pixel_shuffle(tl.arange(4.0).reshape(1, 4, 1, 1), 2).reshape(-1).tolist()
    [0.0, 1.0, 2.0, 3.0]
"""

from __future__ import annotations

from torchlight.nn.module import Module
from torchlight.tensor import Tensor

__all__ = ["PixelShuffle", "PixelUnshuffle", "pixel_shuffle", "pixel_unshuffle"]


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:  # noqa: A002
    """$(*, C r^2, H, W) \\to (*, C, H r, W r)$, as ``torch.nn.functional.pixel_shuffle``."""
    r = int(upscale_factor)
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise RuntimeError(
            f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
            f"upscale_factor, but input.size(-3)={input.shape[-3] if input.ndim >= 3 else None} is not "
            f"divisible by {r * r} (input shape {tuple(input.shape)})"
        )
    *batch, c, h, w = input.shape
    out = input.reshape(-1, c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3)
    return out.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:  # noqa: A002
    """$(*, C, H r, W r) \\to (*, C r^2, H, W)$, the inverse of ``pixel_shuffle``."""
    r = int(downscale_factor)
    if input.ndim < 3 or input.shape[-1] % r or input.shape[-2] % r:
        raise RuntimeError(
            f"pixel_unshuffle expects height and width divisible by downscale_factor={r}, got input "
            f"shape {tuple(input.shape)}"
        )
    *batch, c, h, w = input.shape
    out = input.reshape(-1, c, h // r, r, w // r, r).permute(0, 1, 3, 5, 2, 4)
    return out.reshape(*batch, c * r * r, h // r, w // r)


class PixelShuffle(Module):
    """See ``pixel_shuffle``."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """See ``pixel_unshuffle``."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
