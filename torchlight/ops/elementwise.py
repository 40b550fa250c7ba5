r"""More elementwise Functions: trigonometry, ``log1p``/``expm1``, ``erf``, rounding.

Each is the usual shape: ``forward`` runs one backend ``map`` op and saves what ``backward``
needs; ``backward`` is one line of tensor math. ``rsqrt``, ``reciprocal`` and ``square`` need no
Function of their own: they are compositions (see :mod:`torchlight.tensor_methods`).

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([0.0, 1.0], requires_grad=True)
    >>> x.sin().sum().backward(); x.grad   # cos 0, cos 1
    tensor([1.0000, 0.5403])
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from torchlight.autograd import Context, Function

if TYPE_CHECKING:
    from torchlight.tensor import Tensor


class Sin(Function):
    r"""$f(x) = \sin x$, $f'(x) = \cos x$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        ctx.save_for_backward(a)
        return a._map("sin")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (a,) = ctx.saved_tensors
        return grad_output * a.cos()


class Cos(Function):
    r"""$f(x) = \cos x$, $f'(x) = -\sin x$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        ctx.save_for_backward(a)
        return a._map("cos")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (a,) = ctx.saved_tensors
        return -grad_output * a.sin()


class Log1p(Function):
    r"""$f(x) = \ln(1 + x)$, $f'(x) = 1 / (1 + x)$; accurate where $x$ is tiny."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        ctx.save_for_backward(a)
        return a._map("log1p")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (a,) = ctx.saved_tensors
        return grad_output / (1 + a)


class Expm1(Function):
    r"""$f(x) = e^x - 1$, $f'(x) = e^x = f(x) + 1$: save the output."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        out = a._map("expm1")
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad_output * (out + 1)


class Erf(Function):
    r"""$f(x) = \mathrm{erf}(x)$, $f'(x) = \frac{2}{\sqrt\pi} e^{-x^2}$ (used by exact GELU)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        ctx.save_for_backward(a)
        return a._map("erf")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (a,) = ctx.saved_tensors
        return grad_output * (2 / math.sqrt(math.pi)) * (-(a * a)).exp()


class Floor(Function):
    r"""$f(x) = \lfloor x \rfloor$: a step function, so $f'(x) = 0$ (as PyTorch says too)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        return a._map("floor")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output * 0


class Round(Function):
    r"""$f(x)$ = the nearest integer (halves to even): a step function, $f'(x) = 0$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        return a._map("round")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output * 0
