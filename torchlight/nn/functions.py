r"""The autograd Functions behind ``torchlight.nn``: linear layers, softmax and the losses.

Each could be written as a composition of tensor ops (and autograd would differentiate it), but
as one Function each is one node in the graph instead of five, and the backward formulas are
the ones you derive on paper: $\partial L / \partial x = \mathrm{softmax}(x) - y$ and friends.
The convolution and pooling Functions live in ``conv_functions.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from torchlight.autograd import Context, Function
from torchlight.creation import zeros

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

__all__ = [
    "BinaryCrossEntropy",
    "BinaryCrossEntropyWithLogits",
    "CrossEntropy",
    "LinearFunction",
    "LogSoftmax",
    "NLLLoss",
    "Softmax",
]


class LinearFunction(Function):
    r"""$y = x W^T + b$.

    Backward: $\partial L/\partial x = G W$, $\partial L/\partial W = G^T x$,
    $\partial L/\partial b = \sum_{\text{rows}} G$ (rows: every dimension but the last).
    Called as ``LinearFunction.apply(x, weight)`` or ``LinearFunction.apply(x, weight, bias)``.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.needs = (x.requires_grad, weight.requires_grad, bias is not None and bias.requires_grad)
        ctx.has_bias = bias is not None
        out = x._matmul(weight._permute((1, 0)))  # backend primitives: x @ W.T
        return out if bias is None else out.zip("add", bias)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        needs_x, needs_w, needs_b = ctx.needs
        # Backward is not recorded either: the primitives compute G @ W, G^T @ x, sum of G.
        grad_x = grad_output._matmul(weight) if needs_x else None  # the first layer skips it
        out_features, in_features = weight.shape
        rows = grad_output.numel() // out_features  # (batch..., features) -> (rows, features)
        g = grad_output._view((rows, out_features), True)
        grad_w = g._permute((1, 0))._matmul(x._view((rows, in_features), True)) if needs_w else None
        if not ctx.has_bias:
            return grad_x, grad_w
        return grad_x, grad_w, g.reduce("sum", (0,)) if needs_b else None


class LogSoftmax(Function):
    r"""$\log \mathrm{softmax}(x)_i = x_i - m - \log \sum_j e^{x_j - m}$ with $m = \max_j x_j$.

    Subtracting the max first keeps $e^{x}$ from overflowing (it changes nothing in exact math).
    Backward: $\partial L/\partial x = G - \mathrm{softmax}(x) \sum_j G_j$.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, dim: int) -> Tensor:
        shifted = x.zip("sub", x.reduce("max", (dim,), keepdim=True))
        log_sum = shifted.map("exp").reduce("sum", (dim,), keepdim=True).map("log")
        out = shifted.zip("sub", log_sum)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad_output - out.exp() * grad_output.sum(ctx.dim, keepdim=True)


class Softmax(Function):
    r"""$\mathrm{softmax}(x)_i = e^{x_i - m} / \sum_j e^{x_j - m}$ with $m = \max_j x_j$.

    Backward: $\partial L/\partial x = s \odot (G - \sum_j G_j s_j)$ where $s$ is the output.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, dim: int) -> Tensor:
        exps = x.zip("sub", x.reduce("max", (dim,), keepdim=True)).map("exp")
        out = exps.zip("div", exps.reduce("sum", (dim,), keepdim=True))
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return out * (grad_output - (grad_output * out).sum(ctx.dim, keepdim=True))


class NLLLoss(Function):
    r"""$\ell_n = -\mathrm{logp}_{n, y_n}$ for log-probabilities of shape $(N, C)$, class indices $y$.

    Reduced by ``"mean"`` (over $N$), ``"sum"`` or ``"none"``. Backward puts
    $-G$ (divided by $N$ for the mean) at each picked entry and 0 elsewhere.
    Called as ``NLLLoss.apply(logp, target, reduction, labels)``, where ``labels`` are the
    target's class indices as a host numpy array (``F.nll_loss`` checks and passes them).
    """

    @staticmethod
    def forward(
        ctx: Context, logp: Tensor, target: Tensor, reduction: str, labels: np.ndarray
    ) -> Tensor:
        n = logp.shape[0]
        ctx.picks = (np.arange(n), labels)  # row n, column y_n
        ctx.shape, ctx.reduction = logp.shape, reduction
        return _reduce_picked(logp._getitem(ctx.picks), reduction)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, None]:
        grad = zeros(ctx.shape, dtype=grad_output.dtype, backend=grad_output.backend)
        scale = -1.0 / ctx.shape[0] if ctx.reduction == "mean" else -1.0
        grad[ctx.picks] = grad_output * scale  # a scalar, or one value per row for "none"
        return grad, None  # class indices get no gradient


class CrossEntropy(Function):
    r"""$\ell_n = \log \sum_j e^{x_{n,j}} - x_{n, y_n}$ from logits $x$ of shape $(N, C)$:
    ``log_softmax`` and ``nll_loss`` in one node, reduced by ``"mean"``, ``"sum"`` or ``"none"``.

    Backward: $\partial \ell_n / \partial x_n = \mathrm{softmax}(x_n) - \mathrm{onehot}(y_n)$,
    "prediction minus truth", times $G$ (and $1/N$ for the mean).
    Called as ``CrossEntropy.apply(x, target, reduction, labels)``, where ``labels`` are the
    target's class indices as a host numpy array (``F.cross_entropy`` checks and passes them).
    """

    @staticmethod
    def forward(
        ctx: Context, x: Tensor, target: Tensor, reduction: str, labels: np.ndarray
    ) -> Tensor:
        shifted = x.zip("sub", x.reduce("max", (1,), keepdim=True))  # no overflow in exp
        logp = shifted.zip("sub", shifted.map("exp").reduce("sum", (1,), keepdim=True).map("log"))
        ctx.save_for_backward(logp)
        ctx.picks = (np.arange(x.shape[0]), labels)  # row n, column y_n
        ctx.reduction = reduction
        return _reduce_picked(logp._getitem(ctx.picks), reduction)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, None]:
        (logp,) = ctx.saved_tensors
        n = logp.shape[0]
        if ctx.reduction == "none":
            scale = grad_output._view((n, 1), True)  # one G per row
        elif ctx.reduction == "mean":
            scale = grad_output.zip("div", grad_output._lift(float(n)))
        else:
            scale = grad_output
        # The one-hot rows of y, built on the host (a small copy to a GPU backend).
        one_hot = np.zeros(logp.shape, dtype=logp.backend.dtype(logp.data))
        one_hot[ctx.picks] = 1
        grad = logp.map("exp").zip("sub", logp._lift(one_hot))  # softmax(x) - onehot(y)
        return grad.zip("mul", scale), None  # class indices get no gradient


def _reduce_picked(picked: Tensor, reduction: str) -> Tensor:
    r"""The loss from the picked log-probabilities $\mathrm{logp}_{n, y_n}$, shape (N,)."""
    if reduction == "none":
        return picked.map("neg")
    total = picked.reduce("sum", (0,))
    if reduction == "sum":
        return total.map("neg")
    return total.zip("div", total._lift(-float(picked.shape[0])))  # -sum / N, the mean


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
