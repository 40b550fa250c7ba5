r"""Convolution and pooling as autograd Functions, built on *im2col*.

A 2-D convolution slides a $k_h \times k_w$ window over the (zero-padded) input. *Unfolding*
copies every window into a column, so the whole convolution becomes one matrix product:

$$\mathrm{out}[n, o, p] = \sum_{c, i, j} W[o, c, i, j]\, x_{\text{pad}}[n, c, s_h p_h + i, s_w p_w + j]$$

``_unfold`` gathers, for each kernel offset $(i, j)$, the strided view
``x_pad[:, :, i::s_h, j::s_w]`` (a slice, no copy) and stacks the $k_h k_w$ views: one copy of
the data, on any backend. Its transpose ``_fold`` adds each column back where it was read;
the backward of a convolution is a matrix product followed by a fold, and pooling's backward
is a fold too. Only layout ops, ``stack``, ``matmul`` and reductions are used, so these
Functions run unchanged on every backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlight.autograd import Context, Function
from torchlight.creation import arange, full, stack, zeros

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

__all__ = ["AvgPool2dFunction", "Conv2dFunction", "MaxPool2dFunction", "output_size"]

Pair = tuple[int, int]


def output_size(size: int, kernel: int, stride: int, padding: int) -> int:
    r"""$\lfloor (\mathrm{size} + 2\,\mathrm{padding} - \mathrm{kernel}) / \mathrm{stride} \rfloor + 1$."""
    return (size + 2 * padding - kernel) // stride + 1


def _pad(x: Tensor, padding: Pair, value: float = 0.0) -> Tensor:
    """``x`` of shape (N, C, H, W) surrounded by ``padding`` rows/columns of ``value``."""
    ph, pw = padding
    if ph == 0 and pw == 0:
        return x
    n, c, h, w = x.shape
    out = full((n, c, h + 2 * ph, w + 2 * pw), value, dtype=x.dtype, backend=x.backend)
    out[:, :, ph : ph + h, pw : pw + w] = x
    return out


def _window_slices(offset: Pair, stride: Pair, out_hw: Pair) -> tuple[slice, ...]:
    """The index of every window's element at kernel ``offset``: one strided slice per axis."""
    (i, j), (sh, sw), (ho, wo) = offset, stride, out_hw
    return (slice(None), slice(None), slice(i, i + sh * (ho - 1) + 1, sh), slice(j, j + sw * (wo - 1) + 1, sw))


def _unfold(xp: Tensor, kernel: Pair, stride: Pair) -> Tensor:
    """(N, C, Hp, Wp) -> (N, C, kh*kw, Ho, Wo): entry [n, c, i*kw + j, p, q] is
    ``xp[n, c, p*sh + i, q*sw + j]``."""
    kh, kw = kernel
    out_hw = ((xp.shape[2] - kh) // stride[0] + 1, (xp.shape[3] - kw) // stride[1] + 1)
    views = [xp[_window_slices((i, j), stride, out_hw)] for i in range(kh) for j in range(kw)]
    return stack(views, dim=2)


def _fold(cols: Tensor, padded_shape: tuple[int, ...], kernel: Pair, stride: Pair) -> Tensor:
    """The transpose of :func:`_unfold`: (N, C, kh*kw, Ho, Wo) -> (N, C, Hp, Wp), where every
    input position receives the sum of the entries that were copied from it."""
    kh, kw = kernel
    out_hw = (cols.shape[3], cols.shape[4])
    out = zeros(padded_shape, dtype=cols.dtype, backend=cols.backend)
    overlapping = stride[0] < kh or stride[1] < kw
    for i in range(kh):
        for j in range(kw):
            index = _window_slices((i, j), stride, out_hw)
            part = cols[:, :, i * kw + j]
            out[index] = out[index] + part if overlapping else part
    return out


def _crop(xp: Tensor, padding: Pair, shape: tuple[int, ...]) -> Tensor:
    ph, pw = padding
    return xp[:, :, ph : ph + shape[2], pw : pw + shape[3]]


class Conv2dFunction(Function):
    r"""$\mathrm{out} = W_{(O, CK)} \cdot \mathrm{unfold}(x_{\text{pad}}) + b$, for
    $x$ of shape $(N, C, H, W)$ and $W$ of shape $(O, C, k_h, k_w)$.

    Backward, with $G$ the output gradient as $(N, O, L)$ and $X$ the unfolded input $(N, CK, L)$:
    $\partial L/\partial W = \sum_n G_n X_n^T$, $\partial L/\partial b = \sum_{n, p} G$,
    $\partial L/\partial x = \mathrm{fold}(W^T G)$ with the padding cropped off.
    Called as ``Conv2dFunction.apply(x, weight, bias_or_None, stride, padding)``.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor, bias: Tensor | None, stride: Pair, padding: Pair) -> Tensor:
        n, c, h, w = x.shape
        o, _, kh, kw = weight.shape
        xp = _pad(x, padding)
        cols = _unfold(xp, (kh, kw), stride)  # (N, C, kh*kw, Ho, Wo)
        ho, wo = cols.shape[3], cols.shape[4]
        cols = cols.reshape(n, c * kh * kw, ho * wo)
        out = weight.reshape(o, c * kh * kw) @ cols  # (O, CK) @ (N, CK, L) -> (N, O, L)
        if bias is not None:
            out = out + bias.reshape(1, o, 1)
        ctx.save_for_backward(cols, weight)
        ctx.needs = (x.requires_grad, weight.requires_grad, bias is not None and bias.requires_grad)
        ctx.has_bias, ctx.stride, ctx.padding = bias is not None, stride, padding
        ctx.x_shape, ctx.xp_shape = x.shape, xp.shape
        return out.reshape(n, o, ho, wo)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        cols, weight = ctx.saved_tensors
        needs_x, needs_w, needs_b = ctx.needs
        n, o, ho, wo = grad_output.shape
        c, kh, kw = weight.shape[1:]
        g = grad_output.reshape(n, o, ho * wo)
        grad_w = (g @ cols.transpose(1, 2)).sum(0).reshape(weight.shape) if needs_w else None
        grad_x = None
        if needs_x:
            grad_cols = weight.reshape(o, c * kh * kw).T @ g  # (N, CK, L)
            grad_cols = grad_cols.reshape(n, c, kh * kw, ho, wo)
            grad_xp = _fold(grad_cols, ctx.xp_shape, (kh, kw), ctx.stride)
            grad_x = _crop(grad_xp, ctx.padding, ctx.x_shape)
        if not ctx.has_bias:
            return grad_x, grad_w
        return grad_x, grad_w, g.sum((0, 2)) if needs_b else None


class MaxPool2dFunction(Function):
    r"""$\mathrm{out}[n, c, p, q] = \max_{i, j} x_{\text{pad}}[n, c, s_h p + i, s_w q + j]$
    (padding with $-\infty$).

    Backward: each window's gradient goes to its maximum (the first one on ties, as in
    PyTorch), then is folded back to the input.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, kernel: Pair, stride: Pair, padding: Pair) -> Tensor:
        xp = _pad(x, padding, value=float("-inf"))
        windows = _unfold(xp, kernel, stride)  # (N, C, kh*kw, Ho, Wo)
        ctx.winner = windows.argmax(dim=2, keepdim=True)
        ctx.kernel, ctx.stride, ctx.padding = kernel, stride, padding
        ctx.x_shape, ctx.xp_shape = x.shape, xp.shape
        return windows.reduce("max", (2,))

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        size = ctx.kernel[0] * ctx.kernel[1]
        offsets = arange(size, backend=grad_output.backend).reshape(1, 1, size, 1, 1)
        grad_windows = (offsets == ctx.winner) * grad_output.unsqueeze(2)
        grad_xp = _fold(grad_windows, ctx.xp_shape, ctx.kernel, ctx.stride)
        return _crop(grad_xp, ctx.padding, ctx.x_shape)


class AvgPool2dFunction(Function):
    r"""$\mathrm{out}[n, c, p, q] = \frac{1}{k_h k_w} \sum_{i, j} x_{\text{pad}}[n, c, s_h p + i, s_w q + j]$
    (zero padding counts in the average, as PyTorch's default ``count_include_pad=True``).

    Backward: every element of a window receives $G / (k_h k_w)$, folded back to the input.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, kernel: Pair, stride: Pair, padding: Pair) -> Tensor:
        xp = _pad(x, padding)
        windows = _unfold(xp, kernel, stride)
        ctx.kernel, ctx.stride, ctx.padding = kernel, stride, padding
        ctx.x_shape, ctx.xp_shape = x.shape, xp.shape
        return windows.reduce("sum", (2,)) / (kernel[0] * kernel[1])

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        size = ctx.kernel[0] * ctx.kernel[1]
        n, c, ho, wo = grad_output.shape
        grad_windows = (grad_output / size).unsqueeze(2).expand(n, c, size, ho, wo)
        grad_xp = _fold(grad_windows, ctx.xp_shape, ctx.kernel, ctx.stride)
        return _crop(grad_xp, ctx.padding, ctx.x_shape)
