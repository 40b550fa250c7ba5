r"""Softmax, log-softmax and the losses: the autograd Functions behind ``F.softmax``, ``F.cross_entropy``...

Each could be written as a composition of tensor ops (and autograd would differentiate it), but
as one Function each is one node in the graph instead of five, and the backward formulas are
the ones you derive on paper: $\partial L / \partial x = \mathrm{softmax}(x) - y$ and friends.
Each is plain tensor math, the shape the homework asks for (``forward`` runs with recording
off, so its tensor ops build no graph). ``softmax`` and ``log_softmax`` here are the functional
forms that ``Tensor.softmax`` and ``F.softmax`` both call; the losses' argument checks are in
:mod:`torchlight.nn.loss`, the linear layer's Function in :mod:`~torchlight.ops.linear`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from torchlight.autograd import Context, Function
from torchlight.shape import normalize_dim

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

__all__ = [
    "BinaryCrossEntropy",
    "BinaryCrossEntropyWithLogits",
    "CrossEntropy",
    "CrossEntropyBackward",
    "LogSoftmaxFunction",
    "NLLLossFunction",
    "SoftmaxFunction",
    "log_softmax",
    "softmax",
]


def softmax(input: Tensor, dim: int = -1) -> Tensor:  # noqa: A002
    r"""$e^{x_i} / \sum_j e^{x_j}$ along ``dim``, computed without overflow.

    Shape: any; the output has the input's shape and sums to 1 along ``dim``.
    """
    return SoftmaxFunction.apply(input, normalize_dim(dim, input.ndim))


def log_softmax(input: Tensor, dim: int = -1) -> Tensor:  # noqa: A002
    r"""$x_i - \log \sum_j e^{x_j}$ along ``dim``, stable for large $|x|$ (no $\log 0$, no overflow).

    Shape: any; the output has the input's shape.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.nn.functional import log_softmax
        >>> log_softmax(tl.tensor([1000.0, 0.0]), dim=0)
        tensor([    0., -1000.])
    """
    return LogSoftmaxFunction.apply(input, normalize_dim(dim, input.ndim))


class LogSoftmaxFunction(Function):
    r"""$\log \mathrm{softmax}(x)_i = x_i - m - \log \sum_j e^{x_j - m}$ with $m = \max_j x_j$.

    Subtracting the max first keeps $e^{x}$ from overflowing (it changes nothing in exact math).
    Backward: $\partial L/\partial x = G - \mathrm{softmax}(x) \sum_j G_j$.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, dim: int) -> Tensor:
        out = _log_softmax(x, dim)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, None]:
        (out,) = ctx.saved_tensors
        return grad_output - out.exp() * grad_output.sum(ctx.dim, keepdim=True), None


class SoftmaxFunction(Function):
    r"""$\mathrm{softmax}(x)_i = e^{x_i - m} / \sum_j e^{x_j - m}$ with $m = \max_j x_j$.

    Backward: $\partial L/\partial x = s \odot (G - \sum_j G_j s_j)$ where $s$ is the output.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, dim: int) -> Tensor:
        exps = (x - x.max((dim,), keepdim=True)).exp()  # shifted: e^x cannot overflow
        out = exps / exps.sum(dim, keepdim=True)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, None]:
        (out,) = ctx.saved_tensors
        return out * (grad_output - (grad_output * out).sum(ctx.dim, keepdim=True)), None


class NLLLossFunction(Function):
    r"""$\ell_n = -\mathrm{logp}_{n, y_n}$ for log-probabilities of shape $(N, C)$, class indices $y$.

    Reduced by ``"mean"`` (over $N$), ``"sum"`` or ``"none"``. Backward puts $-G$ (divided by
    $N$ for the mean) at each picked entry and 0 elsewhere: $-G \cdot \mathrm{onehot}(y)$.
    Called as ``NLLLossFunction.apply(logp, target, reduction, labels)``, where ``labels`` are
    the target's class indices as a host numpy array (``F.nll_loss`` checks and passes them).
    """

    @staticmethod
    def forward(
        ctx: Context, logp: Tensor, target: Tensor, reduction: str, labels: np.ndarray
    ) -> Tensor:
        ctx.picks = (np.arange(len(labels)), labels)  # row n, column y_n
        ctx.shape, ctx.reduction = logp.shape, reduction
        return _reduce_rows(-logp[ctx.picks], reduction)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, None, None, None]:
        one_hot = _one_hot(grad_output, ctx.shape, ctx.picks)
        return -one_hot * _per_row(grad_output, ctx.reduction, ctx.shape[0]), None, None, None


class CrossEntropy(Function):
    r"""$\ell_n = \log \sum_j e^{x_{n,j}} - x_{n, y_n}$ from logits $x$ of shape $(N, C)$:
    ``log_softmax`` and ``nll_loss`` in one node, reduced by ``"mean"``, ``"sum"`` or ``"none"``.

    Backward: $\partial \ell_n / \partial x_n = \mathrm{softmax}(x_n) - \mathrm{onehot}(y_n)$,
    "prediction minus truth", times $G$ (and $1/N$ for the mean). The softmax is computed again
    from $x$ (not from forward's log-probabilities, which are not in the graph), so that a
    ``create_graph`` backward differentiates it. Where the backend overrides the gradient with
    a fused kernel (``cross_entropy_backward``: numpy and Numba), backward runs
    :class:`CrossEntropyBackward` instead, the same math (checked equal).
    Called as ``CrossEntropy.apply(x, target, reduction, labels)``, where ``labels`` are the
    target's class indices as a host numpy array (``F.cross_entropy`` checks and passes them).
    """

    @staticmethod
    def forward(
        ctx: Context, x: Tensor, target: Tensor, reduction: str, labels: np.ndarray
    ) -> Tensor:
        logp = _log_softmax(x, 1)
        ctx.save_for_backward(x, logp)
        ctx.picks = (np.arange(len(labels)), labels)  # row n, column y_n
        ctx.reduction = reduction
        return _reduce_rows(-logp[ctx.picks], reduction)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, None, None, None]:
        x, logp = ctx.saved_tensors
        if hasattr(x.backend, "cross_entropy_backward"):  # the backend's fused kernel (for speed)
            grad_x = CrossEntropyBackward.apply(x, logp, grad_output, ctx.reduction, ctx.picks[1])
            return grad_x, None, None, None
        softmax = LogSoftmaxFunction.apply(x, 1).exp()  # from x again: see the docstring
        truth = _one_hot(softmax, softmax.shape, ctx.picks)
        scale = _per_row(grad_output, ctx.reduction, softmax.shape[0])
        return (softmax - truth) * scale, None, None, None


class CrossEntropyBackward(Function):
    r"""The backend override of cross-entropy's gradient: $c \odot (\mathrm{softmax}(x) -
    \mathrm{onehot}(y))$ as a Function of the logits $x$ and the loss's gradient $G$, what
    :class:`CrossEntropy`'s ``backward`` computes in tensor math; $c$ is $G$ per row: $G/N$ for
    ``"mean"``, $G$ for ``"sum"``, $G_n$ for ``"none"``. Forward is one fused backend kernel,
    ``cross_entropy_backward`` (numpy's in ``backends/numpy/kernels.py``); ``logp`` is
    forward's $\log \mathrm{softmax}(x)$, passed so it need not be computed again.

    Backward, the second derivative, with $s = \mathrm{softmax}(x)$ and $\bar G$ the incoming
    gradient: $\partial/\partial x = c \odot s \odot (\bar G - \sum_j \bar G_j s_j)$ (the
    softmax's Jacobian) and $\partial/\partial G = \sum_j \bar G_j (s_j - y_j)$ per row,
    reduced as the loss was; in tensor math, so differentiable again.
    """

    @staticmethod
    def forward(
        ctx: Context,
        x: Tensor,
        logp: Tensor,
        grad_output: Tensor,
        reduction: str,
        labels: np.ndarray,
    ) -> Tensor:
        ctx.save_for_backward(x, grad_output)
        ctx.labels, ctx.reduction = labels, reduction
        kernel = "cross_entropy_backward"  # the kernel's rule
        (grad_x,) = logp._fused(kernel, grad_output.to(logp.dtype), labels, reduction)
        return grad_x

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None, Tensor, None, None]:
        x, grad_output = ctx.saved_tensors
        softmax = LogSoftmaxFunction.apply(x, 1).exp()  # again, as tensor math in x
        picks = (np.arange(len(ctx.labels)), ctx.labels)  # row n, column y_n
        one_hot = _one_hot(softmax, softmax.shape, picks)  # the truth
        scale = _per_row(grad_output, ctx.reduction, softmax.shape[0])
        grad_x = scale * softmax * (grad - (grad * softmax).sum(1, keepdim=True))
        grad_g = _reduce_rows((grad * (softmax - one_hot)).sum(1), ctx.reduction)
        return grad_x, None, grad_g, None, None


def _log_softmax(x: Tensor, dim: int) -> Tensor:
    # shifted = x - x.max((dim,), keepdim=True)  (e^shifted <= 1 cannot overflow), then
    # shifted - shifted.exp().sum(dim, keepdim=True).log(): one fused backend kernel
    # (backend.log_softmax, written as exactly this composition in backends/fused.py)
    return x._log_softmax(dim)


def _one_hot(like: Tensor, shape: tuple[int, ...], picks: tuple[np.ndarray, ...]) -> Tensor:
    """Zeros of ``shape`` with a 1 at each picked (row, class), with ``like``'s dtype and backend.

    A constant (no gradient flows into it): built by the backend's ``index_add``, which adds a 1
    at each pick into zeros, in one call.
    """
    ones = like._lift(np.ones(len(picks[0]), dtype=like.dtype.numpy))
    return ones._index_add(shape, picks)


def _reduce_rows(losses: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.mean()


def _per_row(grad_output: Tensor, reduction: str, n: int) -> Tensor:
    """The loss's gradient as a column: one value per row ("none"), or the same for all."""
    if reduction == "none":
        return grad_output.reshape(n, 1)
    return grad_output / n if reduction == "mean" else grad_output


class BinaryCrossEntropy(Function):
    r"""$\ell = -[y \log p + (1 - y) \log(1 - p)]$, elementwise, for probabilities $p$.

    As in PyTorch, each log is clamped at $-100$ so $p = 0$ or $1$ gives a finite loss, and the
    backward $\partial \ell/\partial p = (p - y) / \max(p(1 - p), 10^{-12})$ stays finite.
    """

    @staticmethod
    def forward(ctx: Context, p: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(p, y)
        log_p = p.log().clamp(min=-100.0)
        log_q = (1 - p).log().clamp(min=-100.0)
        return -(y * log_p + (1 - y) * log_q)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor]:
        p, y = ctx.saved_tensors
        grad_p = grad_output * (p - y) / (p * (1 - p)).clamp(min=1e-12)
        grad_y = grad_output * ((1 - p).log().clamp(min=-100.0) - p.log().clamp(min=-100.0))
        return grad_p, grad_y


class BinaryCrossEntropyWithLogits(Function):
    r"""$\ell = -[y \log\sigma(x) + (1-y)\log(1-\sigma(x))] = \max(x, 0) - x y + \log(1 + e^{-|x|})$.

    The right-hand form never overflows (the exponent is $\le 0$). Backward:
    $\partial \ell/\partial x = \sigma(x) - y$ (exact at $x = 0$ too, unlike a composition of
    ``relu`` and ``abs``, whose kinks would give 0 there), $\partial \ell/\partial y = -x$.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(x, y)
        return x.relu() - x * y + (1 + (-x.abs()).exp()).log()

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor]:
        x, y = ctx.saved_tensors
        return grad_output * (x.sigmoid() - y), grad_output * -x
