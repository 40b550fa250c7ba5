r"""Convolution and pooling as autograd Functions, built on *im2col*.

A 2-D convolution slides a $k_h \times k_w$ window over the (zero-padded) input. *Unfolding*
copies every window into a column, so the whole convolution becomes one matrix product:

$$\mathrm{out}[o, (p, q, n)] = \sum_{(c, i, j)} W[o, (c, i, j)]\;
  x_{\text{pad}}[c, s_h p + i, s_w q + j, n]$$

``_unfold`` takes, for each kernel offset $(i, j)$, the strided view
``x_pad[:, i::s_h, j::s_w, :]`` (a slice, no copy) and stacks the $k_h k_w$ views: one copy of
the data. Its transpose ``_fold`` adds each column back where it was read; the backward of a
convolution is two matrix products and a fold, and pooling's backward is a fold too.

Layout: inside these Functions a batch is seen as (C, H, W, N) (a permuted view of the usual
(N, C, H, W), no copy). A window slice then reads runs of W*N neighbouring numbers instead of
runs of W (8 for the digits), which makes unfold and fold 3-10x faster on numpy, and the whole
batch is one matrix product. Results are handed back as (N, C, H, W) views.

Only layout ops, ``cat``, ``matmul`` and reductions are used, so these Functions run unchanged on
every backend. Gradients are not recorded inside ``forward`` and ``backward``, so they call the
Tensor primitives (``_getitem``, ``_view``, ``_permute``, ``_matmul``, ``_zip``, ``_reduce``)
directly; each line carries the tensor formula it computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchlight.autograd import Context, Function, once_differentiable
from torchlight.creation import arange, full, zeros

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

__all__ = ["AvgPool2dFunction", "Conv2dFunction", "MaxPool2dFunction", "as_pair", "output_size"]

Pair = tuple[int, int]
IntOrPair = int | Sequence[int]  # a size given once for both axes, or as (height, width)
TO_CHWN, TO_NCHW = (1, 2, 3, 0), (3, 0, 1, 2)


def as_pair(value: IntOrPair, name: str) -> Pair:
    """``value`` as ``(height, width)``: an int is used for both axes (PyTorch's rule for
    ``kernel_size``, ``stride``, ``padding`` and ``dilation``)."""
    pair = (int(value), int(value)) if isinstance(value, int) else tuple(int(v) for v in value)
    if len(pair) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    return pair[0], pair[1]


def output_size(size: int, kernel: int, stride: int, padding: int) -> int:
    r"""$\lfloor (\mathrm{size} + 2\,\mathrm{padding} - \mathrm{kernel}) / \mathrm{stride} \rfloor + 1$."""
    return (size + 2 * padding - kernel) // stride + 1


def _pad(x: Tensor, padding: Pair, value: float = 0.0) -> Tensor:
    """(N, C, H, W) -> (C, H + 2 ph, W + 2 pw, N): the CHWN view, surrounded by ``value``."""
    ph, pw = padding
    xt = x._permute(TO_CHWN)
    if ph == 0 and pw == 0:
        return xt
    c, h, w, n = xt.shape
    out = full((c, h + 2 * ph, w + 2 * pw, n), value, dtype=x.dtype, backend=x.backend)
    out[:, ph : ph + h, pw : pw + w, :] = xt
    return out


def _window_slices(offset: Pair, stride: Pair, out_hw: Pair) -> tuple[slice, ...]:
    """The index of every window's element at kernel ``offset``: one strided slice per axis."""
    (i, j), (sh, sw), (ho, wo) = offset, stride, out_hw
    rows, cols = slice(i, i + sh * (ho - 1) + 1, sh), slice(j, j + sw * (wo - 1) + 1, sw)
    return (slice(None), rows, cols, slice(None))


def _unfold(xp: Tensor, kernel: Pair, stride: Pair) -> Tensor:
    """(C, Hp, Wp, N) -> (C, kh*kw, Ho, Wo, N) where entry [c, i*kw + j, p, q, n] is
    ``xp[c, p*sh + i, q*sw + j, n]``: ``stack([xp[window_slices(i, j)] ...], dim=1)``."""
    kh, kw = kernel
    c, hp, wp, n = xp.shape
    out_hw = ((hp - kh) // stride[0] + 1, (wp - kw) // stride[1] + 1)
    shape = (c, 1, *out_hw, n)
    views = [
        xp._getitem(_window_slices((i, j), stride, out_hw))._view(shape, copy_ok=True)
        for i in range(kh)
        for j in range(kw)
    ]
    return views[0]._cat(views, 1)


def _fold(cols: Tensor, padded_shape: tuple[int, ...], kernel: Pair, stride: Pair) -> Tensor:
    """The transpose of :func:`_unfold`: (C, kh*kw, Ho, Wo, N) -> (C, Hp, Wp, N), where every
    input position receives the sum of the entries that were copied from it."""
    kh, kw = kernel
    out_hw = (cols.shape[2], cols.shape[3])
    out = zeros(padded_shape, dtype=cols.dtype, backend=cols.backend)
    for i in range(kh):
        for j in range(kw):
            index = _window_slices((i, j), stride, out_hw)
            # out[index] += cols[:, i*kw + j], in place: windows that overlap add up
            out._getitem(index).add_(cols._getitem((slice(None), i * kw + j)))
    return out


def _crop(xp: Tensor, padding: Pair, shape: tuple[int, ...]) -> Tensor:
    """(C, Hp, Wp, N) -> the (N, C, H, W) view of ``xp`` without its padding."""
    (ph, pw), (h, w) = padding, shape[2:]
    inside = xp._getitem((slice(None), slice(ph, ph + h), slice(pw, pw + w), slice(None)))
    return inside._permute(TO_NCHW)


class Conv2dFunction(Function):
    r"""$\mathrm{out} = W_{(O, CK)} \cdot \mathrm{unfold}(x_{\text{pad}})_{(CK, L N)} + b$ for $x$ of
    shape $(N, C, H, W)$ and $W$ of shape $(O, C, k_h, k_w)$ ($K = k_h k_w$, $L = H_o W_o$).

    Backward, with $G$ the output gradient as $(O, L N)$ and $X$ the unfolded input:
    $\partial L/\partial W = G X^T$, $\partial L/\partial b = \sum_{\text{columns}} G$,
    $\partial L/\partial x = \mathrm{fold}(W^T G)$ with the padding cropped off.
    Called as ``Conv2dFunction.apply(x, weight, bias_or_None, stride, padding)``.
    """

    @staticmethod
    def forward(
        ctx: Context, x: Tensor, weight: Tensor, bias: Tensor | None, stride: Pair, padding: Pair
    ) -> Tensor:
        n, c = x.shape[:2]
        o, _, kh, kw = weight.shape
        xp = _pad(x, padding)  # (C, Hp, Wp, N)
        cols = _unfold(xp, (kh, kw), stride)  # (C, K, Ho, Wo, N)
        ho, wo = cols.shape[2], cols.shape[3]
        cols = cols._view((c * kh * kw, ho * wo * n), copy_ok=True)
        out = weight._view((o, c * kh * kw), copy_ok=True)._matmul(cols)  # (O, CK) @ (CK, LN)
        if bias is not None:
            out = out._zip("add", bias._view((o, 1), copy_ok=True))  # + b[:, None]
        ctx.save_for_backward(cols, weight)
        ctx.has_bias, ctx.stride, ctx.padding = bias is not None, stride, padding
        ctx.x_shape, ctx.xp_shape = x.shape, xp.shape
        return out._view((o, ho, wo, n), copy_ok=True)._permute(TO_NCHW)

    @staticmethod
    @once_differentiable  # backward is unrecorded backend kernels: no double backward
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        cols, weight = ctx.saved_tensors
        needs_x, needs_w, needs_b = ctx.needs_input_grad[:3]  # (stride, padding: not tensors)
        n, o, ho, wo = grad_output.shape
        c, kh, kw = weight.shape[1:]
        g = grad_output._permute(TO_CHWN)._view((o, ho * wo * n), copy_ok=True)  # G as (O, LN)
        grad_w = grad_x = None
        if needs_w:  # G @ X^T
            grad_w = g._matmul(cols._permute((1, 0)))._view(weight.shape, copy_ok=True)
        if needs_x:  # fold(W^T @ G), then drop the padding
            w_t = weight._view((o, c * kh * kw), copy_ok=True)._permute((1, 0))
            grad_cols = w_t._matmul(g)._view((c, kh * kw, ho, wo, n), copy_ok=True)
            grad_xp = _fold(grad_cols, ctx.xp_shape, (kh, kw), ctx.stride)
            grad_x = _crop(grad_xp, ctx.padding, ctx.x_shape)
        if not ctx.has_bias:
            return grad_x, grad_w
        return grad_x, grad_w, g._reduce("sum", (1,)) if needs_b else None


class MaxPool2dFunction(Function):
    r"""$\mathrm{out}[n, c, p, q] = \max_{i, j} x_{\text{pad}}[n, c, s_h p + i, s_w q + j]$
    (padding with $-\infty$).

    Backward: each window's gradient goes to its maximum (the first one on ties, as in
    PyTorch), then is folded back to the input.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, kernel: Pair, stride: Pair, padding: Pair) -> Tensor:
        xp = _pad(x, padding, value=float("-inf"))
        windows = _unfold(xp, kernel, stride)  # (C, K, Ho, Wo, N)
        ctx.winner = windows.argmax(dim=1, keepdim=True)
        ctx.kernel, ctx.stride, ctx.padding = kernel, stride, padding
        ctx.x_shape, ctx.xp_shape = x.shape, xp.shape
        return windows._reduce("max", (1,))._permute(TO_NCHW)

    @staticmethod
    @once_differentiable  # backward is unrecorded backend kernels: no double backward
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        size = ctx.kernel[0] * ctx.kernel[1]
        n, c, ho, wo = grad_output.shape
        offsets = arange(size, backend=grad_output.backend)._view((1, size, 1, 1, 1), copy_ok=True)
        g = grad_output._permute(TO_CHWN)._view((c, 1, ho, wo, n), copy_ok=True)
        # (offset == winner) * G[:, None]: G goes to the maximum of each window
        grad_windows = offsets._zip("eq", ctx.winner)._zip("mul", g)
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
        size = windows._lift(float(kernel[0] * kernel[1]))
        return windows._reduce("sum", (1,))._zip("div", size)._permute(TO_NCHW)  # window means

    @staticmethod
    @once_differentiable  # backward is unrecorded backend kernels: no double backward
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        size = ctx.kernel[0] * ctx.kernel[1]
        n, c, ho, wo = grad_output.shape
        share = grad_output._zip("div", grad_output._lift(float(size)))  # G / (kh kw) to each
        share = share._permute(TO_CHWN)._view((c, 1, ho, wo, n), copy_ok=True)
        grad_windows = share._expand((c, size, ho, wo, n))
        grad_xp = _fold(grad_windows, ctx.xp_shape, ctx.kernel, ctx.stride)
        return _crop(grad_xp, ctx.padding, ctx.x_shape)
