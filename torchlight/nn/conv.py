r"""Convolution and pooling layers: Conv1d, Conv2d, MaxPool2d, AvgPool2d.

The math lives in ``conv_functions.py`` (im2col: unfold the windows, one matrix product);
these Modules hold the weights and settings, and check the input shape.
"""

from __future__ import annotations

from typing import Any

from torchlight.nn import functional as F
from torchlight.nn.functional import IntOrPair, _pair
from torchlight.nn.layers import add_weight_and_bias, reset_weight_and_bias, shape_error
from torchlight.nn.module import Module
from torchlight.tensor import Tensor

__all__ = ["AvgPool2d", "Conv1d", "Conv2d", "MaxPool2d"]


class _ConvNd(Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel: tuple[int, ...], bias: bool, dtype: Any
    ) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        add_weight_and_bias(self, (out_channels, in_channels, *kernel), bias, dtype)

    def reset_parameters(self) -> None:
        """PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels * kernel area."""
        reset_weight_and_bias(self.weight, self.bias)


class Conv2d(_ConvNd):
    r"""$\mathrm{out}[n, o] = b_o + \sum_c W[o, c] \star x[n, c]$ over $k_h \times k_w$ windows.

    Shape: input $(N, C_{in}, H, W)$ (or unbatched $(C_{in}, H, W)$), output
    $(N, C_{out}, H_o, W_o)$, $H_o = \lfloor (H + 2 p_h - k_h) / s_h \rfloor + 1$.

    Example:
        >>> import torchlight as tl
        >>> conv = tl.nn.Conv2d(1, 16, kernel_size=3, padding=1)
        >>> conv(tl.randn(64, 1, 8, 8)).shape
        (64, 16, 8, 8)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: IntOrPair = 0,
        bias: bool = True,
        dtype: Any = None,
    ) -> None:
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride, self.padding = _pair(stride, "stride"), _pair(padding, "padding")
        super().__init__(in_channels, out_channels, self.kernel_size, bias, dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 3 and x.shape[0] == self.in_channels:
            return self.forward(x.unsqueeze(0)).squeeze(0)
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise shape_error(self, f"(N, {self.in_channels}, H, W)", x)
        kh, kw = self.kernel_size
        ph, pw = self.padding
        if x.shape[2] + 2 * ph < kh or x.shape[3] + 2 * pw < kw:
            raise shape_error(
                self,
                f"(N, {self.in_channels}, H, W) with H >= {kh - 2 * ph}, W >= {kw - 2 * pw}",
                x,
            )
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding)

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        return text if self.bias is not None else text + ", bias=False"


class Conv1d(_ConvNd):
    r"""$\mathrm{out}[n, o, t] = b_o + \sum_{c, k} W[o, c, k]\, x_{\text{pad}}[n, c, s t + k]$.

    Shape: input $(N, C_{in}, L)$ (or unbatched $(C_{in}, L)$), output $(N, C_{out}, L_o)$,
    $L_o = \lfloor (L + 2p - k)/s \rfloor + 1$.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        bias: bool = True,
        dtype: Any = None,
    ) -> None:
        self.kernel_size, self.stride, self.padding = (
            (int(kernel_size),),
            (int(stride),),
            (int(padding),),
        )
        super().__init__(in_channels, out_channels, self.kernel_size, bias, dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 2 and x.shape[0] == self.in_channels:
            return self.forward(x.unsqueeze(0)).squeeze(0)
        if x.ndim != 3 or x.shape[1] != self.in_channels:
            raise shape_error(self, f"(N, {self.in_channels}, L)", x)
        if x.shape[2] + 2 * self.padding[0] < self.kernel_size[0]:
            raise shape_error(
                self,
                f"(N, {self.in_channels}, L) with L >= {self.kernel_size[0] - 2 * self.padding[0]}",
                x,
            )
        return F.conv1d(x, self.weight, self.bias, self.stride[0], self.padding[0])

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,):
            text += f", padding={self.padding}"
        return text if self.bias is not None else text + ", bias=False"


class _Pool2d(Module):
    def __init__(
        self, kernel_size: IntOrPair, stride: IntOrPair | None = None, padding: IntOrPair = 0
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding

    def _check(self, x: Tensor) -> None:
        kh, kw = _pair(self.kernel_size, "kernel_size")
        if x.ndim != 4 or x.shape[2] < kh or x.shape[3] < kw:
            raise shape_error(self, f"(N, C, H, W) with H >= {kh}, W >= {kw}", x)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_Pool2d):
    r"""$\mathrm{out}[n, c, p, q] = \max_{i, j} x[n, c, s_h p + i, s_w q + j]$.

    Shape: input $(N, C, H, W)$, output $(N, C, H_o, W_o)$; ``stride`` defaults to ``kernel_size``.

    Example:
        >>> import torchlight as tl
        >>> tl.nn.MaxPool2d(2)(tl.arange(16.0).reshape(1, 1, 4, 4))
        tensor([[[[ 5.,  7.],
                  [13., 15.]]]])
    """

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(_Pool2d):
    r"""$\mathrm{out}[n, c, p, q] = \frac{1}{k_h k_w}\sum_{i, j} x[n, c, s_h p + i, s_w q + j]$.

    Shape: input $(N, C, H, W)$, output $(N, C, H_o, W_o)$; ``stride`` defaults to ``kernel_size``.
    """

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)
