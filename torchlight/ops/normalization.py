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

__all__ = ["LayerNormBackward", "LayerNormFunction", "Normalized"]


def _statistics(x: Tensor, dims: tuple[int, ...], eps: float) -> tuple[Tensor, Tensor]:
    r"""$\mu$ and $r = 1/\sqrt{\sigma^2 + \epsilon}$ over ``dims`` (kept, to broadcast)."""
    mean = x.mean(dims, keepdim=True)
    centred = x - mean
    return mean, 1.0 / ((centred * centred).mean(dims, keepdim=True) + eps).sqrt()


class LayerNormFunction(Function):
    r"""$y = \hat x \gamma + \beta$ with $\hat x = (x - \mu)\, r$, $r = 1/\sqrt{\sigma^2 + \epsilon}$,
    $\mu$ and $\sigma^2$ (biased) over the last ``ndim`` dimensions.

    Backward, with $g = G\gamma$ and means $\langle\cdot\rangle$ over the normalized dimensions:
    $\partial L/\partial x = r\,(g - \langle g\rangle - \hat x \langle g \hat x\rangle)$,
    $\partial L/\partial\gamma = \sum G\hat x$, $\partial L/\partial\beta = \sum G$ (the
    engine sums over the leading dimensions). It computes $\mu$ and $r$ again from $x$, in
    tensor math, so that a ``create_graph`` backward differentiates through them too. Where
    the backend overrides the input gradient with a fused kernel (``layer_norm_backward``:
    numpy and Numba), backward runs :class:`LayerNormBackward` and :class:`Normalized`
    instead, from forward's saved $\mu$ and $r$: the same math (checked equal). Called as
    ``LayerNormFunction.apply(x, ndim, eps[, weight, bias])``.
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
        ctx.dims = tuple(range(x.ndim - ndim, x.ndim))
        mean, rstd = _statistics(x, ctx.dims, eps)
        ctx.save_for_backward(x, mean, rstd, weight)
        ctx.eps, ctx.has = eps, (weight is not None, bias is not None)
        x_hat = (x - mean) * rstd
        out = x_hat if weight is None else x_hat * weight
        return out if bias is None else out + bias

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        x, _, _, weight = ctx.saved_tensors  # (forward's mean and r: for the fused kernel)
        if hasattr(x.backend, "layer_norm_backward"):  # the backend's fused kernel (for speed)
            return _fused_layer_norm_backward(ctx, grad_output)
        mean, rstd = _statistics(x, ctx.dims, ctx.eps)  # from x again: see the docstring
        x_hat = (x - mean) * rstd
        g = grad_output if weight is None else grad_output * weight

        def avg(v: Tensor) -> Tensor:  # the mean over the normalized dimensions
            return v.mean(ctx.dims, keepdim=True)

        grads = [rstd * (g - avg(g) - x_hat * avg(g * x_hat))]
        if ctx.has[0]:  # G x_hat, which the engine sums to the weight's shape
            grads.append(grad_output * x_hat)
        if ctx.has[1]:
            grads.append(grad_output)
        return tuple(grads)


def _fused_layer_norm_backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
    r"""``LayerNormFunction.backward`` where the backend has the ``layer_norm_backward`` kernel:
    the input gradient by :class:`LayerNormBackward`, $\hat x$ by :class:`Normalized`, both
    from forward's saved $\mu$ and $r$ (each differentiable again through its own backward)."""
    x, mean, rstd, weight = ctx.saved_tensors
    grads = [LayerNormBackward.apply(x, mean, rstd, ctx.eps, weight, grad_output)]
    if ctx.has[0]:
        grads.append(grad_output * Normalized.apply(x, mean, rstd, ctx.eps))
    if ctx.has[1]:
        grads.append(grad_output)
    return tuple(grads)


class Normalized(Function):
    r"""$\hat x = (x - \mu)\, r$ from forward's saved $\mu$ and $r$, as a Function of $x$ alone:
    its backward is the whole derivative, through $\mu$ and $r$ too (:class:`LayerNormBackward`
    without a weight). LayerNorm's backward uses it for the weight's gradient $G \hat x$.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, mean: Tensor, rstd: Tensor, eps: float) -> Tensor:
        ctx.save_for_backward(x, mean, rstd)
        ctx.eps = eps
        return (x - mean) * rstd

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, None, None, None]:
        x, mean, rstd = ctx.saved_tensors
        return LayerNormBackward.apply(x, mean, rstd, ctx.eps, None, grad_output), None, None, None


class LayerNormBackward(Function):
    r"""The backend override of layer norm's input gradient: $r\,P(g)$ as a Function of $x$,
    $\gamma$ and $G$ (PyTorch's ``NativeLayerNormBackward``), where $g = G\gamma$ and
    $P(v) = v - \langle v\rangle - \hat x \langle v \hat x\rangle$, what
    :class:`LayerNormFunction`'s ``backward`` computes in tensor math. Forward is one fused backend
    kernel, ``layer_norm_backward`` (numpy's in ``backends/numpy/kernels.py``); ``mean`` and
    ``rstd`` are forward's statistics of $x$, passed so it need not compute them.

    Backward, for an incoming gradient $A$ (tensor math, so differentiable again):
    $\partial/\partial G = \gamma\, r P(A)$, $\partial/\partial\gamma = G\, r P(A)$ ($P$ is
    symmetric), and $\partial/\partial x = r P(u) - r \langle A\, r P(g)\rangle \hat x$ with
    $u = -r\,(A \langle g \hat x\rangle + \langle A \hat x\rangle g)$, from $\hat x$'s and $r$'s
    own dependence on $x$.
    """

    @staticmethod
    def forward(
        ctx: Context,
        x: Tensor,
        mean: Tensor,
        rstd: Tensor,
        eps: float,
        weight: Tensor | None,
        grad_output: Tensor,
    ) -> Tensor:
        ctx.save_for_backward(x, weight, grad_output)
        ctx.dims, ctx.eps = tuple(d for d, n in enumerate(mean.shape) if n == 1), eps
        (grad_x,) = x._fused("layer_norm_backward", mean, rstd, weight, grad_output.to(x.dtype))
        return grad_x

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight, grad_output = ctx.saved_tensors
        dims = ctx.dims
        mean, rstd = _statistics(x, dims, ctx.eps)  # again, as tensor math in x: differentiable
        x_hat = (x - mean) * rstd
        g = grad_output if weight is None else grad_output * weight

        def avg(v: Tensor) -> Tensor:
            return v.mean(dims, keepdim=True)

        def p(v: Tensor) -> Tensor:  # r P(v) is layer norm's input gradient for g = v
            return v - avg(v) - x_hat * avg(v * x_hat)

        r_p_grad = rstd * p(grad)
        u = -rstd * (grad * avg(g * x_hat) + avg(grad * x_hat) * g)
        grad_x = rstd * p(u) - rstd * avg(grad * rstd * p(g)) * x_hat
        grad_g = r_p_grad if weight is None else weight * r_p_grad
        grad_weight = None if weight is None else grad_output * r_p_grad
        return grad_x, None, None, None, grad_weight, grad_g
