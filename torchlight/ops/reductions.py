r"""More reductions: ``cumsum``, ``prod``, ``logsumexp``, ``norm``, ``amax``/``amin``.

``cumsum`` and the 2-norm are Functions of the usual shape (their backward is one line);
``prod``, ``logsumexp`` and the other norms are compositions of differentiable ops, so their
gradients come from those. The Tensor methods live in :mod:`torchlight.tensor_methods`.

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> x.cumsum(0)
    tensor([1., 3., 6.], grad_fn=<Cumsum>)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchlight.autograd import Context, Function
from torchlight.ops import arithmetic as fn
from torchlight.ops.layout import narrow
from torchlight.shape import normalize_dim

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

Dims = int | Sequence[int] | None


def _dim_tuple(x: Tensor, dim: Dims) -> tuple[int, ...]:
    """``dim`` as a sorted tuple of non-negative dims; ``None`` or ``()`` means all of them."""
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return tuple(range(x.ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return tuple(sorted({normalize_dim(d, x.ndim) for d in dims}))


def _dropped(shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for d, n in enumerate(shape) if d not in dims)


def running_sum(x: Tensor, dim: int) -> Tensor:
    r"""The inclusive prefix sum along ``dim`` in $\lceil\log_2 n\rceil$ whole-tensor additions.

    Step $k$ adds the tensor shifted by $2^k$ (zeros shifted in): after it, each element holds
    the sum of the $2^{k+1}$ elements ending at it (Hillis and Steele's scan).
    """
    n, out, shift = x.shape[dim], x, 1
    while shift < n:
        zeros = x.new_zeros(x.shape[:dim] + (shift,) + x.shape[dim + 1 :])
        out = out + fn.Cat.apply(zeros, out[(slice(None),) * dim + (slice(0, n - shift),)], dim)
        shift *= 2
    return out


class Cumsum(Function):
    r"""$y_i = \sum_{j \le i} x_j$ along ``dim``; $\partial L / \partial x_j = \sum_{i \ge j} G_i$,
    the running sum of the gradient taken from the other end."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, dim: int) -> Tensor:
        ctx.dim = dim
        return running_sum(a, dim)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output.flip(ctx.dim).cumsum(ctx.dim).flip(ctx.dim)


class Norm2(Function):
    r"""$\|x\|_2 = \sqrt{\sum_i x_i^2}$ over ``dims``; $\partial\|x\|/\partial x_i = x_i / \|x\|$,
    and 0 at $x = 0$ (a subgradient, as in PyTorch, where the formula would give 0/0)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, dims: tuple[int, ...], keepdim: bool) -> Tensor:
        out = (a * a).sum(dims, keepdim=True).sqrt()
        ctx.save_for_backward(a)
        ctx.dims = dims
        return out if keepdim else out.reshape(_dropped(a.shape, dims))

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (a,) = ctx.saved_tensors
        out = (a * a).sum(ctx.dims, keepdim=True).sqrt()  # (recomputed: differentiable in a)
        return grad_output.reshape(out.shape) * a / out.masked_fill(out == 0, 1.0)


def cumsum(x: Tensor, dim: int) -> Tensor:
    """Running sums along ``dim`` (bools and ints give int64, as in PyTorch)."""
    if not x.dtype.is_floating_point:
        x = x.long()
    return Cumsum.apply(x, normalize_dim(dim, x.ndim)) if x.ndim else x.clone()


def prod(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    r"""$\prod_i x_i$ along ``dim`` (of all elements when None).

    Multiplied pairwise (halves times halves, $\log_2 n$ steps), so the gradient is exact even
    where an element is 0 (the textbook $\prod / x_i$ would divide by zero).
    """
    if dim is None:
        whole = prod(x.reshape(-1), 0)
        return whole.reshape((1,) * x.ndim) if keepdim else whole
    d = normalize_dim(dim, x.ndim)
    if x.ndim == 0:
        return x.clone()
    out = x
    while out.shape[d] > 1:
        n = out.shape[d]
        half = n // 2
        paired = narrow(out, d, 0, half) * narrow(out, d, half, half)
        out = fn.Cat.apply(paired, narrow(out, d, 2 * half, 1), d) if n % 2 else paired
    if out.shape[d] == 0:
        out = out.sum(d, keepdim=True) + 1  # the empty product is 1
    return out if keepdim else out.squeeze(d)


def logsumexp(x: Tensor, dim: Dims, keepdim: bool = False) -> Tensor:
    r"""$\log \sum_i e^{x_i}$ along ``dim``, as $m + \log \sum_i e^{x_i - m}$ with $m = \max x$.

    Subtracting the (constant) max keeps $e^x$ from overflowing; the gradient is the softmax.
    Where the max is $\pm\infty$ it is replaced by 0, so a row of $-\infty$ gives $-\infty$
    (not ``nan``, from $-\infty - (-\infty)$).
    """
    dims = _dim_tuple(x, dim)
    peak = fn.Max.apply(x.detach(), dims, True)
    peak = peak.masked_fill(peak.abs() == math.inf, 0.0)
    out = (x - peak).exp().sum(dims, keepdim=True).log() + peak
    return out if keepdim else out.reshape(_dropped(x.shape, dims))


def norm(x: Tensor, p: float | str = "fro", dim: Dims = None, keepdim: bool = False) -> Tensor:
    r"""The vector $p$-norm $(\sum_i |x_i|^p)^{1/p}$ over ``dim`` (all elements when None).

    ``p`` may be ``"fro"`` or 2 (the default), 1, ``inf`` ($\max |x_i|$), ``-inf``, 0 (the
    count of non-zeros) or any other number.
    """
    dims = _dim_tuple(x, dim)
    if p in ("fro", 2):
        return Norm2.apply(x, dims, keepdim)
    if not isinstance(p, (int, float)):
        raise ValueError(f"norm: p must be a number, 'fro' or inf, got {p!r}")
    if p == math.inf:
        return fn.Max.apply(x.abs(), dims, keepdim)
    if p == -math.inf:
        return fn.Min.apply(x.abs(), dims, keepdim)
    if p == 0:
        return (x != 0).to(x.dtype).sum(dims, keepdim)
    if p == 1:
        return x.abs().sum(dims, keepdim)
    return (x.abs() ** p).sum(dims, keepdim) ** (1.0 / p)


def amax(x: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    """The largest value along ``dim`` (all when ``()``), always one Tensor (never
    ``(values, indices)``); the gradient is split evenly at ties.

    Raises:
        IndexError: for a dimension of size 0 (no largest value there), as PyTorch.
    """
    return fn.Max.apply(x, _nonempty_dims(x, dim, "amax"), keepdim)


def amin(x: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    """The smallest value along ``dim`` (all when ``()``), always one Tensor; the gradient is
    split evenly at ties."""
    return fn.Min.apply(x, _nonempty_dims(x, dim, "amin"), keepdim)


def _nonempty_dims(x: Tensor, dim: Dims, name: str) -> tuple[int, ...]:
    dims = _dim_tuple(x, dim)
    for d in dims:
        if x.shape[d] == 0:  # max of nothing has no value (a sum of nothing is 0)
            raise IndexError(
                f"{name}(): expected reduction dim {d} to have non-zero size, but the input has "
                f"shape {x.shape}; reduce over another dimension, or check for empty input first"
            )
    return dims
