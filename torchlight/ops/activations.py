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

import math
from typing import TYPE_CHECKING

from torchlight.autograd import Context, Function

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

__all__ = ["GELUFunction", "SoftplusFunction"]


_GELU_C = math.sqrt(2.0 / math.pi)


class GELUFunction(Function):
    r"""$\mathrm{GELU}(x) = \frac{x}{2}(1 + t)$, $t = \tanh(c\,(x + 0.044715 x^3))$, $c = \sqrt{2/\pi}$
    (the tanh form, as GPT-2 uses it).

    Backward: $\frac{d}{dx} = \frac{1 + t}{2} + \frac{x}{2}(1 - t^2)\,c\,(1 + 3 \cdot 0.044715
    x^2)$. One node instead of eight (it runs on the largest activations of a transformer);
    $x^3$ is written $x \cdot x \cdot x$, as ``pow`` with a float exponent is slow.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return 0.5 * x * (1.0 + _gelu_tanh(x))

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        t = _gelu_tanh(x)  # (again, from x: so a create_graph backward is differentiable in x)
        slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _GELU_C * (1.0 + 0.134145 * x * x)
        return grad_output * slope


def _gelu_tanh(x: Tensor) -> Tensor:
    return (_GELU_C * (x + 0.044715 * x * x * x)).tanh()


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
