r"""Convolution layers: Conv1d, Conv2d, ConvTranspose2d, and their functional forms
``conv1d``, ``conv2d``, ``conv_transpose2d``, as in PyTorch.

The plain convolution (symmetric zero padding, stride) is one Function,
:class:`~torchlight.ops.convolution.Conv2dFunction` (im2col: unfold the windows, one matrix
product). The general cases are composed from it and differentiable layout ops, so autograd
derives every backward:

- ``dilation`` $d$: the kernel with $d - 1$ zeros inserted between its taps;
- ``groups`` $g$: channels split into $g$ groups, one plain convolution each, joined;
- ``padding="same"`` / ``"valid"`` and uneven padding: :func:`~torchlight.nn.padding.pad` first;
- the transposed convolution: the input with ``stride - 1`` zeros inserted between pixels,
  padded by $d(k - 1) - p$, convolved with the flipped kernel (in and out channels swapped).

The Modules hold the weights and settings, and check the input shape.

Example:
    >>> import torchlight as tl
    >>> from torchlight.nn.conv import conv2d, conv_transpose2d
    >>> x = tl.ones(1, 4, 5, 5)
    >>> conv2d(x, tl.ones(6, 2, 3, 3), padding="same", dilation=2, groups=2).shape
    (1, 6, 5, 5)
    >>> conv_transpose2d(tl.ones(1, 3, 4, 4), tl.ones(3, 2, 3, 3), stride=2).shape
    (1, 2, 9, 9)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torchlight.creation import arange, cat
from torchlight.dtypes import check_same_dtype
from torchlight.nn.linear import add_weight_and_bias, reset_weight_and_bias
from torchlight.nn.module import Module, shape_error
from torchlight.nn.padding import dilate, pad
from torchlight.ops.convolution import Conv2dFunction, IntOrPair, as_pair, output_size
from torchlight.tensor import Tensor

__all__ = ["Conv1d", "Conv2d", "ConvTranspose2d", "conv1d", "conv2d", "conv_transpose2d"]


# --------------------------------------------------------------------------- functional forms
Pair = tuple[int, int]


def padding_amounts(
    padding: str | int | Sequence[int], kernel: Pair, stride: Pair, dilation: Pair
) -> tuple[Pair, Pair]:
    """``(before, after)`` zero padding for each spatial axis, from an int, a pair, or PyTorch's
    ``"valid"`` (none) and ``"same"`` (output as large as the input; stride 1; an odd total
    puts the extra row at the end, as PyTorch does)."""
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        if stride != (1, 1):
            raise ValueError(f"padding='same' needs stride 1, got stride={stride}")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        return (totals[0] // 2, totals[0] - totals[0] // 2), (
            totals[1] // 2,
            totals[1] - totals[1] // 2,
        )
    if isinstance(padding, str):
        raise ValueError(f"padding must be 'same', 'valid', an int or a pair, got {padding!r}")
    ph, pw = as_pair(padding, "padding")
    if min(ph, pw) < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    return (ph, ph), (pw, pw)


def conv2d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair | str = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
) -> Tensor:
    r"""$\mathrm{out}[n, o] = b_o + \sum_c W[o, c] \star x[n, c]$ (cross-correlation, as in PyTorch).

    ``padding`` may also be ``"same"`` or ``"valid"``; ``dilation`` and ``groups`` as in PyTorch
    (those cases are composed in ``_general_conv2d``).

    Shape: input $(N, C, H, W)$, weight $(O, C, k_h, k_w)$, bias $(O)$, output $(N, O, H_o, W_o)$
    with $H_o = \lfloor (H + 2p_h - k_h) / s_h \rfloor + 1$ (likewise $W_o$).

    Example:
        >>> import torchlight as tl
        >>> x = tl.ones(1, 1, 3, 3)
        >>> tl.nn.functional.conv2d(x, tl.ones(1, 1, 2, 2)).shape
        (1, 1, 2, 2)
    """
    check_same_dtype("conv2d", input, weight, bias)
    if isinstance(padding, str) or dilation != 1 or groups != 1:
        return _general_conv2d(input, weight, bias, stride, padding, dilation, groups)
    stride_, padding_ = as_pair(stride, "stride"), as_pair(padding, "padding")
    if input.ndim != 4 or weight.ndim != 4 or input.shape[1] != weight.shape[1]:
        raise ValueError(
            f"conv2d: expected an input of shape (N, {weight.shape[1] if weight.ndim == 4 else 'C'}, H, W) "
            f"for a weight of shape {weight.shape} (out_channels, in_channels, kH, kW); got an input "
            f"of shape {input.shape}"
        )
    if min(stride_) < 1 or min(padding_) < 0:
        raise ValueError(
            f"conv2d: stride must be >= 1 and padding >= 0, got stride={stride} padding={padding}"
        )
    for axis, name in ((0, "height"), (1, "width")):
        size, k = input.shape[2 + axis], weight.shape[2 + axis]
        if output_size(size, k, stride_[axis], padding_[axis]) < 1:
            raise ValueError(
                f"conv2d: the input {name} {size} (+ 2 * padding {padding_[axis]}) is smaller than "
                f"the kernel {name} {k}; pad the input or use a smaller kernel"
            )
    return Conv2dFunction.apply(input, weight, bias, stride_, padding_)


def _general_conv2d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    r"""$\mathrm{out}[n, o] = b_o + \sum_{c \in \text{group}(o)} W[o, c] \star_d x[n, c]$.

    Shape: input $(N, C, H, W)$, weight $(O, C / g, k_h, k_w)$, output $(N, O, H_o, W_o)$ with
    $H_o = \lfloor (H + p_{\text{top}} + p_{\text{bottom}} - d (k_h - 1) - 1) / s \rfloor + 1$.
    """
    check_same_dtype("conv2d", input, weight, bias)
    stride_, dilation_ = as_pair(stride, "stride"), as_pair(dilation, "dilation")
    if input.ndim != 4 or weight.ndim != 4:
        raise ValueError(
            f"conv2d: expected a 4-d input (N, C, H, W) and weight (O, C/groups, kH, kW), got "
            f"input {input.shape} and weight {weight.shape}"
        )
    channels, out_channels = input.shape[1], weight.shape[0]
    if (
        groups < 1
        or channels % groups
        or out_channels % groups
        or weight.shape[1] * groups != channels
    ):
        raise ValueError(
            f"conv2d: with groups={groups}, the input's {channels} channels and the weight's "
            f"{out_channels} output channels must both divide by {groups}, and the weight must "
            f"have in_channels/groups = {channels // max(groups, 1)} input channels; got weight "
            f"{weight.shape}"
        )
    if min(stride_) < 1 or min(dilation_) < 1:
        raise ValueError(f"conv2d: stride and dilation must be >= 1, got {stride} and {dilation}")
    kernel = (weight.shape[2], weight.shape[3])
    (top, bottom), (left, right) = padding_amounts(padding, kernel, stride_, dilation_)
    if dilation_ != (1, 1):
        weight = dilate(dilate(weight, 2, dilation_[0]), 3, dilation_[1])
    for axis, (before, after) in enumerate(((top, bottom), (left, right))):
        size, k = input.shape[2 + axis], weight.shape[2 + axis]
        if output_size(size + before + after, k, stride_[axis], 0) < 1:
            raise ValueError(
                f"conv2d: the padded input size {size + before + after} is smaller than the "
                f"(dilated) kernel size {k}; pad the input or use a smaller kernel"
            )
    if top == bottom and left == right:
        padding_ = (top, left)
    else:
        input, padding_ = pad(input, (left, right, top, bottom)), (0, 0)
    if groups == 1:
        return Conv2dFunction.apply(input, weight, bias, stride_, padding_)
    c, o = channels // groups, out_channels // groups
    outs = [
        Conv2dFunction.apply(
            input[:, g * c : (g + 1) * c],
            weight[g * o : (g + 1) * o],
            None if bias is None else bias[g * o : (g + 1) * o],
            stride_,
            padding_,
        )
        for g in range(groups)
    ]
    return cat(outs, 1)


def conv1d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int = 1,
    padding: int | str = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Tensor:
    r"""$\mathrm{out}[n, o, t] = b_o + \sum_{c, k} W[o, c, k]\, x_{\text{pad}}[n, c, s t + k]$.

    A 1-D convolution is a 2-D one on an image of height 1. ``padding="same"``/``"valid"``,
    ``dilation`` and ``groups`` as in PyTorch.

    Shape: input $(N, C, L)$, weight $(O, C, k)$, output $(N, O, \lfloor (L + 2p - k)/s \rfloor + 1)$.
    """
    check_same_dtype("conv1d", input, weight, bias)
    if input.ndim != 3 or weight.ndim != 3 or input.shape[1] != weight.shape[1] * groups:
        raise ValueError(
            f"conv1d: expected an input of shape (N, C, L) with C = weight.shape[1] * groups for a "
            f"weight of shape {weight.shape} (out_channels, in_channels / groups, kernel); got "
            f"{input.shape}"
        )
    padding_: IntOrPair | str = padding if isinstance(padding, str) else (0, int(padding))
    out = conv2d(
        input.unsqueeze(2),
        weight.unsqueeze(2),
        bias,
        (1, int(stride)),
        padding_,
        (1, int(dilation)),
        groups,
    )
    return out.squeeze(2)


def conv_transpose2d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    output_padding: int | Sequence[int] = 0,
    groups: int = 1,
    dilation: int | Sequence[int] = 1,
) -> Tensor:
    r"""The transpose (and the gradient) of ``conv2d``: every input pixel adds a copy of the
    kernel, scaled by its value, to the output at stride $s$.

    Shape: input $(N, C, H, W)$, weight $(C, O / g, k_h, k_w)$, output $(N, O, H_o, W_o)$ with
    $H_o = (H - 1) s - 2 p + d (k_h - 1) + \text{output\_padding} + 1$.
    """
    check_same_dtype("conv_transpose2d", input, weight, bias)
    stride_, padding_ = as_pair(stride, "stride"), as_pair(padding, "padding")
    extra, dilation_ = as_pair(output_padding, "output_padding"), as_pair(dilation, "dilation")
    if input.ndim != 4 or weight.ndim != 4 or input.shape[1] != weight.shape[0]:
        raise ValueError(
            f"conv_transpose2d: expected an input (N, C, H, W) and a weight (C, O/groups, kH, kW) "
            f"with the same C; got input {input.shape} and weight {weight.shape}"
        )
    if groups < 1 or input.shape[1] % groups:
        raise ValueError(
            f"conv_transpose2d: {input.shape[1]} channels do not divide by groups={groups}"
        )
    if any(e >= max(s, d) for e, s, d in zip(extra, stride_, dilation_, strict=True)):
        raise ValueError(
            f"conv_transpose2d: output_padding {extra} must be smaller than the stride {stride_} "
            f"or the dilation {dilation_}"
        )
    x = dilate(dilate(input, 2, stride_[0]), 3, stride_[1])
    # flip the kernel (reversed index arrays: differentiable), swap in/out channels per group
    kh, kw = weight.shape[2], weight.shape[3]
    flipped = weight[:, :, arange(kh - 1, -1, -1)][:, :, :, arange(kw - 1, -1, -1)]
    c = input.shape[1] // groups
    swapped = [flipped[g * c : (g + 1) * c].transpose(0, 1) for g in range(groups)]
    w = cat(swapped, 0) if groups > 1 else swapped[0]  # (O, C / g, kh, kw)
    k_eff = [d * (k - 1) for d, k in zip(dilation_, (kh, kw), strict=True)]
    top, left = k_eff[0] - padding_[0], k_eff[1] - padding_[1]
    x = pad(x, (left, left + extra[1], top, top + extra[0]))
    return _general_conv2d(x, w, bias, 1, 0, dilation_, groups)


# --------------------------------------------------------------------------- modules
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
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        self.kernel_size = as_pair(kernel_size, "kernel_size")
        self.stride, self.dilation = as_pair(stride, "stride"), as_pair(dilation, "dilation")
        self.padding = padding if isinstance(padding, str) else as_pair(padding, "padding")
        padding_amounts(self.padding, self.kernel_size, self.stride, self.dilation)  # checks it
        super().__init__(in_channels, out_channels, self.kernel_size, bias, dtype, groups)
        self._place(device)  # PyTorch's device= keyword

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
        return conv2d(
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
        device: Any = None,
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
        self._place(device)  # PyTorch's device= keyword

    def _convolve(self, x: Tensor) -> Tensor:
        k, s, d = self.kernel_size[0], self.stride[0], self.dilation[0]
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        _, (before, after) = padding_amounts(padding, (1, k), (1, s), (1, d))
        span = d * (k - 1) + 1
        if x.shape[2] + before + after < span:
            raise shape_error(
                self, f"(N, {self.in_channels}, L) with L >= {span - before - after}", x
            )
        return conv1d(x, self.weight, self.bias, s, padding, d, self.groups)


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
        device: Any = None,
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
        self._place(device)  # PyTorch's device= keyword

    def _convolve(self, x: Tensor) -> Tensor:
        return conv_transpose2d(
            x, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups,
            self.dilation,
        )  # fmt: skip
