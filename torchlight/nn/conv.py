r"""Convolution and pooling layers: Conv1d, Conv2d, ConvTranspose2d, MaxPool2d, AvgPool2d.

The math lives in ``conv_functions.py`` (im2col: unfold the windows, one matrix product);
these Modules hold the weights and settings, and check the input shape.
"""

from __future__ import annotations

from typing import Any

from torchlight.nn import functional as F
from torchlight.nn.conv_general import padding_amounts
from torchlight.nn.layers import add_weight_and_bias, reset_weight_and_bias, shape_error
from torchlight.nn.module import Module
from torchlight.ops.convolution import IntOrPair, as_pair
from torchlight.tensor import Tensor

__all__ = ["AvgPool2d", "Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d"]


class _ConvNd(Module):
    """What the convolutions share: the weight and bias (set up as ``Linear``'s are), the
    check of the input's shape (an unbatched input gets a batch of one), and the ``repr``.
    A subclass sets ``kernel_size``, ``stride``, ``padding`` and ``dilation`` (tuples of one
    int per spatial axis), names its axes in ``spatial`` and convolves in ``_convolve``."""

    spatial = "H, W"  # the names of the spatial axes, for shape errors

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel: tuple[int, ...],
        bias: bool,
        dtype: Any,
        groups: int = 1,
        transposed: bool = False,
    ) -> None:
        super().__init__()
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{type(self).__name__}: in_channels ({in_channels}) and out_channels "
                f"({out_channels}) must both be divisible by groups ({groups})"
            )
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        if transposed:  # PyTorch's layout for a transposed convolution: (in, out / groups, k...)
            shape = (in_channels, out_channels // groups, *kernel)
        else:
            shape = (out_channels, in_channels // groups, *kernel)
        add_weight_and_bias(self, shape, out_channels if bias else None, dtype)

    def reset_parameters(self) -> None:
        """PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels * kernel area."""
        reset_weight_and_bias(self.weight, self.bias)

    def forward(self, x: Tensor) -> Tensor:
        dims = len(self.kernel_size)
        if x.ndim == dims + 1 and x.shape[0] == self.in_channels:  # unbatched: a batch of one
            return self.forward(x.unsqueeze(0)).squeeze(0)
        if x.ndim != dims + 2 or x.shape[1] != self.in_channels:
            raise shape_error(self, f"(N, {self.in_channels}, {self.spatial})", x)
        return self._convolve(x)

    def _convolve(self, x: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define _convolve(x)")

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        zeros, ones = (0,) * len(self.kernel_size), (1,) * len(self.kernel_size)
        for name, plain in (("padding", zeros), ("output_padding", zeros), ("dilation", ones)):
            if getattr(self, name, plain) != plain:  # (Conv2d has no output_padding)
                text += f", {name}={getattr(self, name)}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        return text if self.bias is not None else text + ", bias=False"


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
        padding: IntOrPair | str = 0,
        dilation: IntOrPair = 1,
        groups: int = 1,
        bias: bool = True,
        dtype: Any = None,
    ) -> None:
        self.kernel_size = as_pair(kernel_size, "kernel_size")
        self.stride, self.dilation = as_pair(stride, "stride"), as_pair(dilation, "dilation")
        self.padding = padding if isinstance(padding, str) else as_pair(padding, "padding")
        padding_amounts(self.padding, self.kernel_size, self.stride, self.dilation)  # checks it
        super().__init__(in_channels, out_channels, self.kernel_size, bias, dtype, groups)

    def _convolve(self, x: Tensor) -> Tensor:
        (pt, pb), (pl, pr) = padding_amounts(
            self.padding, self.kernel_size, self.stride, self.dilation
        )
        kh, kw = (d * (k - 1) + 1 for d, k in zip(self.dilation, self.kernel_size, strict=True))
        if x.shape[2] + pt + pb < kh or x.shape[3] + pl + pr < kw:
            raise shape_error(
                self,
                f"(N, {self.in_channels}, H, W) with H >= {kh - pt - pb}, W >= {kw - pl - pr}",
                x,
            )
        return F.conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class Conv1d(_ConvNd):
    r"""$\mathrm{out}[n, o, t] = b_o + \sum_{c, k} W[o, c, k]\, x_{\text{pad}}[n, c, s t + k]$.

    Shape: input $(N, C_{in}, L)$ (or unbatched $(C_{in}, L)$), output $(N, C_{out}, L_o)$,
    $L_o = \lfloor (L + 2p - k)/s \rfloor + 1$.
    """

    spatial = "L"

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int | str = 0,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        dtype: Any = None,
    ) -> None:
        self.kernel_size, self.stride, self.dilation = (
            (int(kernel_size),),
            (int(stride),),
            (int(dilation),),
        )
        self.padding = padding if isinstance(padding, str) else (int(padding),)
        k, s, d = self.kernel_size[0], self.stride[0], self.dilation[0]
        padding_amounts(padding, (1, k), (1, s), (1, d))  # checks it
        super().__init__(in_channels, out_channels, self.kernel_size, bias, dtype, groups)

    def _convolve(self, x: Tensor) -> Tensor:
        k, s, d = self.kernel_size[0], self.stride[0], self.dilation[0]
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        _, (before, after) = padding_amounts(padding, (1, k), (1, s), (1, d))
        span = d * (k - 1) + 1
        if x.shape[2] + before + after < span:
            raise shape_error(
                self, f"(N, {self.in_channels}, L) with L >= {span - before - after}", x
            )
        return F.conv1d(x, self.weight, self.bias, s, padding, d, self.groups)


class ConvTranspose2d(_ConvNd):
    r"""The transpose of a Conv2d (an "up-convolution"): each input pixel adds the kernel, scaled by
    its value, into the output at stride $s$; see ``F.conv_transpose2d``.

    Shape: input $(N, C_{in}, H, W)$ (or unbatched), output $(N, C_{out}, H_o, W_o)$ with
    $H_o = (H - 1) s - 2 p + d (k - 1) + \text{output\_padding} + 1$. The weight has PyTorch's
    shape $(C_{in}, C_{out} / g, k_h, k_w)$.

    Example:
        >>> import torchlight as tl
        >>> up = tl.nn.ConvTranspose2d(16, 8, kernel_size=2, stride=2)
        >>> up(tl.randn(4, 16, 4, 4)).shape
        (4, 8, 8, 8)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: IntOrPair = 0,
        output_padding: IntOrPair = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: IntOrPair = 1,
        dtype: Any = None,
    ) -> None:
        self.kernel_size = as_pair(kernel_size, "kernel_size")
        self.stride, self.padding = as_pair(stride, "stride"), as_pair(padding, "padding")
        self.output_padding, self.dilation = (
            as_pair(output_padding, "output_padding"),
            as_pair(dilation, "dilation"),
        )
        super().__init__(
            in_channels, out_channels, self.kernel_size, bias, dtype, groups, transposed=True
        )

    def _convolve(self, x: Tensor) -> Tensor:
        return F.conv_transpose2d(
            x, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups,
            self.dilation,
        )  # fmt: skip


class _Pool2d(Module):
    def __init__(
        self,
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair = 0,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode

    def _check(self, x: Tensor) -> None:
        kh, kw = as_pair(self.kernel_size, "kernel_size")
        if x.ndim != 4 or x.shape[2] < kh or x.shape[3] < kw:
            raise shape_error(self, f"(N, C, H, W) with H >= {kh}, W >= {kw}", x)

    def extra_repr(self) -> str:
        text = f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
        return text + (", ceil_mode=True" if self.ceil_mode else "")


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
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode)


class AvgPool2d(_Pool2d):
    r"""$\mathrm{out}[n, c, p, q] = \frac{1}{k_h k_w}\sum_{i, j} x[n, c, s_h p + i, s_w q + j]$.

    Shape: input $(N, C, H, W)$, output $(N, C, H_o, W_o)$; ``stride`` defaults to ``kernel_size``.
    ``count_include_pad=False`` divides by the positions inside the input only.
    """

    def __init__(
        self,
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        return F.avg_pool2d(
            x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
            self.divisor_override,
        )  # fmt: skip
