r"""Layer normalization as one Function: $y = \hat x \gamma + \beta$, $\hat x = (x - \mu) / \sqrt{\sigma^2 + \epsilon}$.

It runs twice per transformer block, so one graph node instead of ten pays off, and its
backward is the formula derived on paper. ``nn.LayerNorm``, ``F.layer_norm`` and
``F.group_norm`` (a layer norm of each group) call it; BatchNorm is a composition of tensor
ops (:mod:`torchlight.nn.normalization`).

Example:
    >>> import torchlight as tl
    >>> from torchlight.ops.normalization import LayerNormFunction
    >>> LayerNormFunction.apply(tl.tensor([[0.0, 2.0]]), 1, 1e-5)
    tensor([[-1.0000,  1.0000]])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlight.autograd import Context, Function

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

__all__ = ["LayerNormFunction"]


def _normalized(x: Tensor, dims: tuple[int, ...], eps: float) -> tuple[Tensor, Tensor]:
    r"""$\hat x = (x - \mu)\, r$ and $r = 1/\sqrt{\sigma^2 + \epsilon}$ over ``dims``."""
    centred = x - x.mean(dims, keepdim=True)
    rstd = 1.0 / ((centred * centred).mean(dims, keepdim=True) + eps).sqrt()
    return centred * rstd, rstd


class LayerNormFunction(Function):
    r"""$y = \hat x \gamma + \beta$ with $\hat x = (x - \mu)\, r$, $r = 1/\sqrt{\sigma^2 + \epsilon}$,
    $\mu$ and $\sigma^2$ (biased) over the last ``ndim`` dimensions.

    Backward, with $g = G\gamma$ and means $\langle\cdot\rangle$ over the normalized dimensions:
    $\partial L/\partial x = r\,(g - \langle g\rangle - \hat x \langle g \hat x\rangle)$,
    $\partial L/\partial\gamma = \sum G\hat x$, $\partial L/\partial\beta = \sum G$ (the engine sums
    over the leading dimensions). Called as ``LayerNormFunction.apply(x, ndim, eps[, weight,
    bias])``.
    """

    @staticmethod
    def forward(
        ctx: Context,
        x: Tensor,
        ndim: int,
        eps: float,
        weight: Tensor | None = None,
        bias: Tensor | None = None,
    ) -> Tensor:
        dims = tuple(range(x.ndim - ndim, x.ndim))
        x_hat, rstd = _normalized(x, dims, eps)
        ctx.save_for_backward(x, weight)
        ctx.dims, ctx.eps, ctx.has = dims, eps, (weight is not None, bias is not None)
        out = x_hat if weight is None else x_hat * weight
        return out if bias is None else out + bias

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        # The statistics again, from x (cheap next to saving them, and a create_graph backward
        # is then differentiable in x as it stands).
        x_hat, rstd = _normalized(x, ctx.dims, ctx.eps)
        g = grad_output if weight is None else grad_output * weight
        mean_g, mean_gx = g.mean(ctx.dims, keepdim=True), (g * x_hat).mean(ctx.dims, keepdim=True)
        grads = [rstd * (g - mean_g - x_hat * mean_gx)]
        if ctx.has[0]:
            grads.append(grad_output * x_hat)  # the engine sums it to the weight's shape
        if ctx.has[1]:
            grads.append(grad_output)
        return tuple(grads)
