r"""The activation Functions of their own: GELU's tanh form and Softplus.

The other activations (``relu``, ``sigmoid``, ``tanh`` in :mod:`~torchlight.ops.arithmetic`;
LeakyReLU, ELU, SiLU in :mod:`torchlight.nn.activation`) are compositions of tensor ops, whose
backward autograd derives. These two are Functions: GELU runs on a transformer's largest
activations (one node instead of eight), and Softplus's stable form
$\max(x, 0) + \log(1 + e^{-|x|})$ has kinks whose gradients would cancel wrongly at 0, while
the true derivative is simply $\sigma(x)$.

Example:
    >>> import torchlight as tl
    >>> from torchlight.ops.activations import SoftplusFunction
    >>> SoftplusFunction.apply(tl.tensor([0.0]))
    tensor([0.6931])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlight.autograd import Context, Function
from torchlight.backends.fused import GELU_A, GELU_C

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

__all__ = ["GELUBackward", "GELUFunction", "SoftplusFunction"]


class GELUFunction(Function):
    r"""$\mathrm{GELU}(x) = \frac{x}{2}(1 + t)$, $t = \tanh(u)$, $u = c\,(x + a x^3)$,
    $c = \sqrt{2/\pi}$, $a = 0.044715$ (the tanh form, as GPT-2 uses it).

    Backward: $\partial L/\partial x = G\,\mathrm{GELU}'(x)$ with
    $\mathrm{GELU}'(x) = \frac{1 + t}{2} + \frac{x}{2}(1 - t^2)\,u'$, $u' = c\,(1 + 3a x^2)$:
    tensor math, so a ``create_graph`` backward differentiates it again. One node instead of
    eight (it runs on the largest activations of a transformer); forward is one backend
    kernel, ``gelu`` (:mod:`torchlight.backends.fused` has it as a composition of primitives).
    Where the backend overrides the gradient with a fused kernel (``gelu_backward``: numpy and
    Numba), backward runs :class:`GELUBackward` instead, the same math (checked equal).
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        (out,) = x._fused("gelu")
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        if hasattr(x.backend, "gelu_backward"):  # the backend's fused kernel (for speed only)
            return GELUBackward.apply(x, grad_output)
        t, du = _gelu_t_and_du(x)
        return grad_output * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)


def _gelu_t_and_du(x: Tensor) -> tuple[Tensor, Tensor]:
    r"""GELU's $t = \tanh(c\,(x + a x^3))$ and $u' = c\,(1 + 3a x^2)$, in tensor math."""
    t = (GELU_C * (x + GELU_A * x * x * x)).tanh()  # x^3 as x*x*x: pow with a float is slow
    return t, GELU_C * (1.0 + 3 * GELU_A * x * x)


class GELUBackward(Function):
    r"""The backend override of GELU's gradient: $G\,\mathrm{GELU}'(x)$ as a Function of $x$
    and $G$ (PyTorch's ``GeluBackward``), whose forward is one fused backend kernel,
    ``gelu_backward`` (numpy's in ``backends/numpy/kernels.py``), computing what
    :class:`GELUFunction`'s ``backward`` computes in tensor math.

    Backward, the second derivative, so that a ``create_graph`` backward through it is
    differentiable: $\partial/\partial x = \bar G\,G\,\mathrm{GELU}''(x)$ with
    $\mathrm{GELU}''(x) = (1 - t^2)(u' - x t u'^2 + 3acx^2)$, and
    $\partial/\partial G = \bar G\,\mathrm{GELU}'(x)$ ($\bar G$ the incoming gradient), in
    tensor math: differentiable again.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, grad_output: Tensor) -> Tensor:
        ctx.save_for_backward(x, grad_output)
        (grad_x,) = x._fused("gelu_backward", grad_output.to(x.dtype))  # (the kernel's rule)
        return grad_x

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, Tensor]:
        x, grad_output = ctx.saved_tensors
        t, du = _gelu_t_and_du(x)
        slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
        curvature = (1.0 - t * t) * (du - x * t * du * du + 3 * GELU_A * GELU_C * x * x)
        return grad * grad_output * curvature, grad * slope


class SoftplusFunction(Function):
    r"""$\mathrm{softplus}(x) = \log(1 + e^x) = \max(x, 0) + \log(1 + e^{-|x|})$ (never overflows).

    Backward: $\partial L/\partial x = G\,\sigma(x)$.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.relu() + ((-x.abs()).exp() + 1).log()

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad_output * x.sigmoid()
