r"""Pooling layers and their functional forms: MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d.

The plain 2-d pools are Functions (:mod:`torchlight.ops.convolution`); the rest (``ceil_mode``,
``count_include_pad=False``, 1-d pools, adaptive average pooling) is composed from them and
differentiable layout ops.

``ceil_mode`` rounds the output size up, $H_o = \lceil (H + 2p - k)/s \rceil + 1$ (minus one if
the last window would start in the right padding): the input is padded at the end so that the
last, partial window exists (with $-\infty$ for max pooling). An average divides each window's sum
by the number of positions it covers (inside the padded input with ``count_include_pad``, else
inside the input), counted by pooling a mask of ones the same way.

Example:
    >>> import torchlight as tl
    >>> from torchlight.nn.functional import adaptive_avg_pool2d, max_pool2d
    >>> x = tl.arange(25.0).reshape(1, 1, 5, 5)
    >>> max_pool2d(x, 2, ceil_mode=True).shape
    (1, 1, 3, 3)
    >>> adaptive_avg_pool2d(x, 1)
    tensor([[[[12.]]]])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from torchlight.creation import cat, ones, stack
from torchlight.nn.module import Module, shape_error
from torchlight.nn.padding import pad
from torchlight.ops.convolution import AvgPool2dFunction, IntOrPair, MaxPool2dFunction, as_pair
from torchlight.tensor import Tensor

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool2d", "MaxPool1d",
    "MaxPool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool1d",
    "avg_pool2d", "max_pool1d", "max_pool2d",
]  # fmt: skip

Pair = tuple[int, int]


def pooled_size(size: int, kernel: int, stride: int, padding: int, ceil_mode: bool) -> int:
    r"""$\lfloor$ or $\lceil (\text{size} + 2p - k) / s \rceil + 1$, PyTorch's rule for pooling."""
    span = size + 2 * padding - kernel
    out = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1  # the last window would start inside the right padding
    return out


def _args(
    name: str,
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None,
    padding: IntOrPair,
    ceil_mode: bool,
) -> tuple[Pair, Pair, Pair, Pair]:
    """kernel, stride, padding and, per axis, how much extra padding the end needs."""
    kernel = as_pair(kernel_size, "kernel_size")
    stride_ = kernel if stride is None or stride == [] else as_pair(stride, "stride")
    padding_ = as_pair(padding, "padding")
    if x.ndim != 4:
        raise ValueError(f"{name}: expected an input of shape (N, C, H, W), got {x.shape}")
    if any(2 * p > k for p, k in zip(padding_, kernel, strict=True)):
        raise ValueError(
            f"{name}: padding {padding_} must be at most half the kernel size {kernel}"
        )
    extra = []
    for axis in (0, 1):
        size, k, s, p = x.shape[2 + axis], kernel[axis], stride_[axis], padding_[axis]
        out = pooled_size(size, k, s, p, ceil_mode)
        if out < 1:
            raise ValueError(
                f"{name}: the kernel {kernel} is larger than the padded input {x.shape[2:]}"
            )
        extra.append(max((out - 1) * s + k - (size + 2 * p), 0))
    return kernel, stride_, padding_, (extra[0], extra[1])


def max_pool2d(
    input: Tensor,  # noqa: A002
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor:
    r"""$\mathrm{out}[n, c, p, q] = \max_{i < k_h, j < k_w} x[n, c, s_h p + d_h i, s_w q + d_w j]$.

    Shape: input $(N, C, H, W)$, output $(N, C, H_o, W_o)$; ``stride`` defaults to the kernel size.
    ``ceil_mode`` rounds $H_o$ up, keeping a last, partial window; ``dilation`` $d$ spaces the
    window's taps (a window spans $d (k - 1) + 1$ positions).
    """
    if return_indices:
        raise NotImplementedError(
            "max_pool2d(return_indices=True): torchlight returns the values only"
        )
    dilation_ = as_pair(dilation, "dilation")
    if dilation_ != (1, 1):
        return _dilated_max_pool2d(
            input, as_pair(kernel_size, "kernel_size"), stride, padding, dilation_, ceil_mode
        )
    kernel, stride_, padding_, extra = _args(
        "max_pool2d", input, kernel_size, stride, padding, ceil_mode
    )
    if extra == (0, 0):
        return MaxPool2dFunction.apply(input, kernel, stride_, padding_)
    (ph, pw), (eh, ew) = padding_, extra
    padded = pad(input, (pw, pw + ew, ph, ph + eh), value=float("-inf"))
    return MaxPool2dFunction.apply(padded, kernel, stride_, (0, 0))


def _dilated_max_pool2d(
    x: Tensor,
    kernel: Pair,
    stride: IntOrPair | None,
    padding: IntOrPair,
    dilation: Pair,
    ceil_mode: bool,
) -> Tensor:
    """Max pooling with spaced taps, as a composition: the window of effective size
    $d (k - 1) + 1$ gives the output size and padding; the $k_h k_w$ taps are strided slices of
    the padded input, and the maximum over them sends the gradient to the first largest tap,
    as PyTorch's kernel does."""
    (kh, kw), (dh, dw) = kernel, dilation
    span = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    _, (sh, sw), (ph, pw), (eh, ew) = _args(
        "max_pool2d", x, span, kernel if stride is None else stride, padding, ceil_mode
    )
    padded = pad(x, (pw, pw + ew, ph, ph + eh), value=float("-inf"))
    ho = (padded.shape[2] - span[0]) // sh + 1
    wo = (padded.shape[3] - span[1]) // sw + 1
    taps = [
        padded[
            :, :, dh * i : dh * i + sh * (ho - 1) + 1 : sh, dw * j : dw * j + sw * (wo - 1) + 1 : sw
        ]
        for i in range(kh)
        for j in range(kw)
    ]
    return stack(taps, -1).max(-1).values


def avg_pool2d(
    input: Tensor,  # noqa: A002
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    r"""$\mathrm{out}[n, c, p, q] = \frac{1}{k_h k_w}\sum_{i, j} x[n, c, s_h p + i, s_w q + j]$:
    each window's sum divided by the positions it covers (the kernel area in the plain case;
    inside the input only with ``count_include_pad=False``), or by ``divisor_override``.

    Shape: input $(N, C, H, W)$, output $(N, C, H_o, W_o)$; ``stride`` defaults to the kernel size.
    """
    kernel, stride_, padding_, extra = _args(
        "avg_pool2d", input, kernel_size, stride, padding, ceil_mode
    )
    plain_divisor = divisor_override is None and (count_include_pad or padding_ == (0, 0))
    if extra == (0, 0) and plain_divisor:
        return AvgPool2dFunction.apply(input, kernel, stride_, padding_)
    (ph, pw), (eh, ew), area = padding_, extra, kernel[0] * kernel[1]
    amounts = (pw, pw + ew, ph, ph + eh)
    sums = AvgPool2dFunction.apply(pad(input, amounts), kernel, stride_, (0, 0)) * area
    if divisor_override is not None:
        return sums / divisor_override
    h, w = input.shape[2:]
    if count_include_pad:  # ones over the padded input, zeros in the extra end padding
        mask = pad(
            ones(1, 1, h + 2 * ph, w + 2 * pw, dtype=input.dtype, backend=input.backend),
            (0, ew, 0, eh),
        )
    else:
        mask = pad(ones(1, 1, h, w, dtype=input.dtype, backend=input.backend), amounts)
    counts = AvgPool2dFunction.apply(mask, kernel, stride_, (0, 0)) * area
    return sums / counts


def _as_2d(name: str, x: Tensor) -> Tensor:
    if x.ndim not in (2, 3):
        raise ValueError(f"{name}: expected an input of shape (N, C, L) or (C, L), got {x.shape}")
    return (x if x.ndim == 3 else x.unsqueeze(0)).unsqueeze(2)  # (N, C, 1, L)


def _from_2d(out: Tensor, x: Tensor) -> Tensor:
    out = out.squeeze(2)
    return out if x.ndim == 3 else out.squeeze(0)


def max_pool1d(
    input: Tensor,  # noqa: A002
    kernel_size: int,
    stride: int | None = None,
    padding: int = 0,
    ceil_mode: bool = False,
) -> Tensor:
    r"""$\max$ over windows of ``kernel_size`` along the last axis. Shape: $(N, C, L) \to (N, C, L_o)$."""
    s = kernel_size if stride is None else stride
    out = max_pool2d(
        _as_2d("max_pool1d", input), (1, kernel_size), (1, s), (0, padding), ceil_mode=ceil_mode
    )
    return _from_2d(out, input)


def avg_pool1d(
    input: Tensor,  # noqa: A002
    kernel_size: int,
    stride: int | None = None,
    padding: int = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    r"""The mean over windows of ``kernel_size`` along the last axis. Shape: $(N, C, L) \to (N, C, L_o)$."""
    s = kernel_size if stride is None else stride
    x = _as_2d("avg_pool1d", input)
    out = avg_pool2d(x, (1, kernel_size), (1, s), (0, padding), ceil_mode, count_include_pad)
    return _from_2d(out, input)


def _adaptive_mean(x: Tensor, dim: int, out_size: int) -> Tensor:
    r"""Cell $i$ of ``out_size`` averages positions $\lfloor iL/n \rfloor$ to $\lceil (i+1)L/n \rceil$."""
    length = x.shape[dim]
    if out_size == length:
        return x
    cells = []
    for i in range(out_size):
        start, end = (i * length) // out_size, -((-(i + 1) * length) // out_size)
        index = [slice(None)] * x.ndim
        index[dim] = slice(start, end)
        cells.append(x[tuple(index)].mean(dim, keepdim=True))
    return cat(cells, dim)


def adaptive_avg_pool2d(input: Tensor, output_size: int | Sequence[int | None]) -> Tensor:  # noqa: A002
    r"""Average pooling to a fixed output size, whatever the input size (windows of nearly equal
    size, overlapping by at most one position): e.g. ``1`` is a global average.

    Shape: $(N, C, H, W)$ or $(C, H, W)$ -> $(\ldots, H_o, W_o)$; ``None`` keeps that size.
    """
    if input.ndim not in (3, 4):
        raise ValueError(
            f"adaptive_avg_pool2d: expected (N, C, H, W) or (C, H, W), got {input.shape}"
        )
    sizes = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != 2:
        raise ValueError(
            f"adaptive_avg_pool2d: output_size must be an int or a pair, got {output_size!r}"
        )
    h = input.shape[-2] if sizes[0] is None else int(sizes[0])
    w = input.shape[-1] if sizes[1] is None else int(sizes[1])
    if h < 1 or w < 1:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be positive, got {output_size!r}")
    # the mean over a rectangle is the mean over its rows of the means over its columns
    return _adaptive_mean(_adaptive_mean(input, input.ndim - 2, h), input.ndim - 1, w)


def adaptive_avg_pool1d(input: Tensor, output_size: int) -> Tensor:  # noqa: A002
    r"""Average pooling of the last axis to ``output_size`` cells. Shape: $(N, C, L) \to (N, C, L_o)$."""
    if input.ndim not in (2, 3):
        raise ValueError(f"adaptive_avg_pool1d: expected (N, C, L) or (C, L), got {input.shape}")
    return _adaptive_mean(input, input.ndim - 1, int(output_size))


# --------------------------------------------------------------------------- modules
class _Pool(Module):
    """The settings every pooling layer has (``stride`` defaults to ``kernel_size``) and its
    ``repr``; each layer calls its functional form with them."""

    def __init__(
        self,
        kernel_size: Any,  # an int (1-d pools), or an int or a pair (2-d)
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode

    def extra_repr(self) -> str:
        text = f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
        return text + (", ceil_mode=True" if self.ceil_mode else "")


def _check_2d(layer: Module, x: Tensor) -> None:
    kh, kw = as_pair(layer.kernel_size, "kernel_size")
    if x.ndim != 4 or x.shape[2] < kh or x.shape[3] < kw:
        raise shape_error(layer, f"(N, C, H, W) with H >= {kh}, W >= {kw}", x)


class MaxPool1d(_Pool):
    r"""$\max$ over windows along the last axis. Shape: $(N, C, L) \to (N, C, L_o)$."""

    def __init__(
        self, kernel_size: int, stride: int | None = None, padding: int = 0, ceil_mode: bool = False
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)

    def forward(self, x: Tensor) -> Tensor:
        return max_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode)


class AvgPool1d(_Pool):
    r"""The mean over windows along the last axis. Shape: $(N, C, L) \to (N, C, L_o)$."""

    def __init__(
        self,
        kernel_size: int,
        stride: int | None = None,
        padding: int = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return avg_pool1d(
            x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad
        )


class MaxPool2d(_Pool):
    r"""$\mathrm{out}[n, c, p, q] = \max_{i, j} x[n, c, s_h p + i, s_w q + j]$.

    Shape: input $(N, C, H, W)$, output $(N, C, H_o, W_o)$; ``stride`` defaults to ``kernel_size``.

    Example:
        >>> import torchlight as tl
        >>> tl.nn.MaxPool2d(2)(tl.arange(16.0).reshape(1, 1, 4, 4))
        tensor([[[[ 5.,  7.],
                  [13., 15.]]]])
    """

    def __init__(
        self,
        kernel_size: IntOrPair,
        stride: IntOrPair | None = None,
        padding: IntOrPair = 0,
        dilation: IntOrPair = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.dilation, self.return_indices = dilation, return_indices

    def forward(self, x: Tensor) -> Tensor:
        if self.dilation == 1:
            _check_2d(self, x)
        return max_pool2d(
            x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
            self.return_indices,
        )  # fmt: skip


class AvgPool2d(_Pool):
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
        _check_2d(self, x)
        return avg_pool2d(
            x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
            self.divisor_override,
        )  # fmt: skip


def adaptive_max_pool2d(
    input: Tensor,  # noqa: A002
    output_size: int | Sequence[int | None],
    return_indices: bool = False,
) -> Tensor:
    r"""Max pooling to a fixed output size: output cell $(i, j)$ is the maximum over rows
    $\lfloor i H / H_o \rfloor$ to $\lceil (i + 1) H / H_o \rceil$ (and the same for columns), as
    PyTorch's windows; the gradient goes to the first largest element of each window.

    Shape: $(N, C, H, W)$ or $(C, H, W)$ -> $(\ldots, H_o, W_o)$; ``None`` keeps that size.
    """
    if return_indices:
        raise NotImplementedError(
            "adaptive_max_pool2d(return_indices=True): torchlight returns the values only"
        )
    if input.ndim not in (3, 4):
        raise ValueError(
            f"adaptive_max_pool2d: expected (N, C, H, W) or (C, H, W), got {input.shape}"
        )
    sizes = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    h, w = input.shape[-2:]
    ho = h if sizes[0] is None else int(sizes[0])
    wo = w if sizes[1] is None else int(sizes[1])
    rows = []
    for i in range(ho):
        r0, r1 = (i * h) // ho, -((-(i + 1) * h) // ho)
        cells = []
        for j in range(wo):
            c0, c1 = (j * w) // wo, -((-(j + 1) * w) // wo)
            cells.append(input[..., r0:r1, c0:c1].flatten(-2).max(-1).values)
        rows.append(stack(cells, -1))
    return stack(rows, -2)


class AdaptiveMaxPool2d(Module):
    r"""Max pooling to ``output_size`` whatever the input size (see :func:`adaptive_max_pool2d`)."""

    def __init__(
        self, output_size: int | Sequence[int | None], return_indices: bool = False
    ) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_max_pool2d(x, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(Module):
    r"""Average pooling to ``output_size`` whatever the input size. Shape: $(N, C, H, W) \to (N, C, H_o, W_o)$.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.nn import AdaptiveAvgPool2d
        >>> AdaptiveAvgPool2d((2, 1))(tl.ones(3, 16, 5, 7)).shape
        (3, 16, 2, 1)
    """

    def __init__(self, output_size: int | Sequence[int | None]) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (3, 4):
            raise shape_error(self, "(N, C, H, W) or (C, H, W)", x)
        return adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(Module):
    r"""Average pooling of the last axis to ``output_size``. Shape: $(N, C, L) \to (N, C, L_o)$."""

    def __init__(self, output_size: int) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (2, 3):
            raise shape_error(self, "(N, C, L) or (C, L)", x)
        return adaptive_avg_pool1d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
