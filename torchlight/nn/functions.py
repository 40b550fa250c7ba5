r"""The autograd Functions behind ``torchlight.nn``: linear layers, softmax and the losses.

Each could be written as a composition of tensor ops (and autograd would differentiate it), but
as one Function each is one node in the graph instead of five, and the backward formulas are
the ones you derive on paper: $\partial L / \partial x = \mathrm{softmax}(x) - y$ and friends.
The convolution and pooling Functions live in ``conv_functions.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from torchlight.autograd import Context, Function
from torchlight.creation import zeros

if TYPE_CHECKING:
    from torchlight.backends import Backend
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

    # Written as a fused kernel: the backend's primitives on the tensors' storage, with no Tensor
    # in between. ``x._data`` is what the ``x.data`` property returns, read without the property
    # call (a training step reads storage dozens of times). The callers, ``nn.Linear`` and
    # ``F.linear``, check shapes.
    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.needs = (x.requires_grad, weight.requires_grad, bias is not None and bias.requires_grad)
        ctx.has_bias = bias is not None
        be = x.backend
        if weight.backend is not be:
            x._check_backend(weight, "linear")  # raises, naming both backends
        out = be.matmul(x._data, be.permute(weight._data, (1, 0)))  # x @ W.T
        if bias is not None:
            if bias.backend is not be:
                x._check_backend(bias, "linear")
            out = be.zip("add", out, bias._data)
        return x._new(out)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        needs_x, needs_w, needs_b = ctx.needs
        be = grad_output.backend
        # G @ W; the first layer skips it (its input needs no gradient)
        grad_x = grad_output._new(be.matmul(grad_output._data, weight._data)) if needs_x else None
        g = grad_output
        if len(g.shape) != 2:  # (batch..., features) -> (rows, features)
            out_features, in_features = weight.shape
            rows = g.numel() // out_features
            g, x = g._view((rows, out_features), True), x._view((rows, in_features), True)
        # G^T x
        grad_w = g._new(be.matmul(be.permute(g._data, (1, 0)), x._data)) if needs_w else None
        if not ctx.has_bias:
            return grad_x, grad_w
        return grad_x, grad_w, g._new(be.reduce("sum", g._data, (0,), False)) if needs_b else None


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
        be = logp.backend
        return logp._new(_reduce_picked(be, be.getitem(logp._data, ctx.picks), reduction))

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
        be, data = x.backend, x._data  # a fused kernel, as in LinearFunction
        shifted = be.zip("sub", data, be.reduce("max", data, (1,), True))  # no overflow in exp
        exps = be.map("exp", shifted)
        total = be.reduce("sum", exps, (1,), True)
        logp = be.zip("sub", shifted, be.map("log", total))
        ctx.save_for_backward(x._new(be.zip("div", exps, total)))  # softmax(x), for backward
        ctx.picks = (np.arange(len(labels)), labels)  # row n, column y_n
        ctx.reduction = reduction
        return x._new(_reduce_picked(be, be.getitem(logp, ctx.picks), reduction))

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, None]:
        (softmax,) = ctx.saved_tensors
        be, dtype = softmax.backend, softmax.backend.dtype(softmax._data)
        n = softmax.shape[0]
        scale = grad_output._data
        if ctx.reduction == "none":
            scale = be.view(scale, (n, 1))  # one G per row
        elif ctx.reduction == "mean":
            scale = be.zip("div", scale, be.from_numpy(np.asarray(n, dtype)))
        # The one-hot rows of y, built on the host (a small copy to a GPU backend).
        one_hot = np.zeros(softmax.shape, dtype)
        one_hot[ctx.picks] = 1
        grad = be.zip("sub", softmax._data, be.from_numpy(one_hot))  # prediction minus truth
        return softmax._new(be.zip("mul", grad, scale)), None  # class indices get no gradient


def _reduce_picked(be: Backend, picked: Any, reduction: str) -> Any:
    r"""The loss from the picked log-probabilities $\mathrm{logp}_{n, y_n}$ (storage of shape
    (N,) on backend ``be``), as storage."""
    if reduction == "none":
        return be.map("neg", picked)
    total = be.reduce("sum", picked, (0,), False)
    if reduction == "sum":
        return be.map("neg", total)
    n = be.from_numpy(np.asarray(-be.shape(picked)[0], be.dtype(total)))
    return be.zip("div", total, n)  # -sum / N, the mean


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
