r"""Activations, as Modules (``nn.ReLU`` ...) and in functional form (``F.relu`` ...): ReLU,
Sigmoid, Tanh, Softmax, LogSoftmax, LeakyReLU, ELU, GELU, SiLU and Softplus.

Each is a Tensor method (``x.relu()``, ``x.softmax(dim)``), a composition of differentiable
tensor ops (autograd derives the backward), or a Function of :mod:`torchlight.ops`: softmax and
log-softmax (:mod:`~torchlight.ops.losses`), GELU's tanh form and Softplus
(:mod:`~torchlight.ops.activations`).

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn
    >>> nn.LeakyReLU(0.1)(tl.tensor([-2.0, 3.0]))
    tensor([-0.2000,  3.0000])
"""

from __future__ import annotations

import math

from torchlight.creation import where
from torchlight.nn.module import Module
from torchlight.ops.activations import GELUFunction, SoftplusFunction
from torchlight.ops.losses import log_softmax, softmax
from torchlight.tensor import Tensor

__all__ = [
    "ELU", "GELU", "Hardtanh", "LeakyReLU", "LogSigmoid", "LogSoftmax", "ReLU", "ReLU6", "SiLU",
    "Sigmoid", "Softmax", "Softplus", "Tanh", "elu", "gelu", "hardtanh", "leaky_relu", "logsigmoid",
    "relu", "relu6", "sigmoid", "silu", "softplus", "tanh",
]  # fmt: skip


# --------------------------------------------------------------------------- functional forms
def relu(input: Tensor) -> Tensor:  # noqa: A002 - PyTorch's argument name
    r"""$\max(x, 0)$ elementwise."""
    return input.relu()


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    r"""$1 / (1 + e^{-x})$ elementwise."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:  # noqa: A002
    r"""$\tanh x$ elementwise."""
    return input.tanh()


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:  # noqa: A002
    r"""$x$ for $x > 0$, else $a x$ (slope $a$ = ``negative_slope``); the gradient at 0 is $a$,
    as in PyTorch.

    Shape: any; the output has the input's shape.
    """
    return where(input > 0, input, input * negative_slope)


def elu(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    r"""$x$ for $x > 0$, else $\alpha (e^x - 1)$.

    ``exp`` sees $\min(x, 0)$ only: $e^x$ of a large positive $x$ would overflow to ``inf``, and
    the unpicked branch's zero gradient times ``inf`` would be ``nan``.

    Shape: any; the output has the input's shape.
    """
    return where(input > 0, input, (input.clamp(max=0.0).exp() - 1) * alpha)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    r"""$x\,\Phi(x) = \tfrac{x}{2}\,(1 + \mathrm{erf}(x / \sqrt 2))$, the Gaussian error linear unit;
    with ``approximate="tanh"``: $\tfrac{x}{2}\,(1 + \tanh(\sqrt{2/\pi}\,(x + 0.044715 x^3)))$.

    Shape: any; the output has the input's shape.
    """
    if approximate == "tanh":
        return GELUFunction.apply(input)
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return input * 0.5 * ((input * (1.0 / math.sqrt(2.0))).erf() + 1)


def silu(input: Tensor) -> Tensor:  # noqa: A002
    r"""$x\,\sigma(x)$ (also called swish).

    Shape: any; the output has the input's shape.
    """
    return input * input.sigmoid()


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    r"""$\frac{1}{\beta} \log(1 + e^{\beta x})$, a smooth ReLU; as in PyTorch, it is $x$ itself
    where $\beta x >$ ``threshold`` (there the two agree to double precision).

    Shape: any; the output has the input's shape.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.nn.activation import softplus
        >>> softplus(tl.tensor([0.0, 100.0]))
        tensor([  0.6931, 100.0000])
    """
    scaled = input * beta
    smooth = SoftplusFunction.apply(scaled) * (1.0 / beta)
    return where(scaled > threshold, input, smooth)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    r"""$\min(\max(x, a), b)$; its gradient is 1 strictly inside $(a, b)$ and 0 at and beyond the
    edges, as PyTorch's (``clamp``'s keeps the edges)."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must not be above max_val ({max_val})")
    inside = (input > min_val) & (input < max_val)
    return where(inside, input, input.detach().clamp(min_val, max_val))


def relu6(input: Tensor) -> Tensor:  # noqa: A002
    r"""$\min(\max(x, 0), 6)$: :func:`~torchlight.nn.activation.hardtanh` between 0 and 6."""
    return hardtanh(input, 0.0, 6.0)


def logsigmoid(input: Tensor) -> Tensor:  # noqa: A002
    r"""$\log \sigma(x) = \min(x, 0) - \log(1 + e^{-|x|})$, written so that no exponential
    overflows; its gradient is $\sigma(-x)$."""
    return input.minimum(input._lift(0.0)) - (-input.abs()).exp().log1p()


# --------------------------------------------------------------------------- modules
class ReLU(Module):
    r"""$\max(x, 0)$ elementwise. Shape: any. ``inplace=True`` overwrites the input (recorded
    in the graph, as PyTorch's ``relu_``)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return x.clamp_(min=0.0) if self.inplace else x.relu()

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    r"""$1 / (1 + e^{-x})$ elementwise. Shape: any."""

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class Tanh(Module):
    r"""$\tanh x$ elementwise. Shape: any."""

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Softmax(Module):
    r"""$e^{x_i} / \sum_j e^{x_j}$ along ``dim``. Shape: any."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    r"""$x_i - \log\sum_j e^{x_j}$ along ``dim``. Shape: any."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return log_softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LeakyReLU(Module):
    r"""$x$ for $x > 0$, else ``negative_slope`` $\cdot x$. Shape: any."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x: Tensor) -> Tensor:
        out = leaky_relu(x, self.negative_slope)
        return x.copy_(out) if self.inplace else out  # inplace: the input is overwritten

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    r"""$x$ for $x > 0$, else $\alpha (e^x - 1)$. Shape: any."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: Tensor) -> Tensor:
        return elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class GELU(Module):
    r"""$x\,\Phi(x)$ ($\Phi$ the standard normal CDF), or its tanh approximation. Shape: any."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    r"""$x\,\sigma(x)$. Shape: any."""

    def forward(self, x: Tensor) -> Tensor:
        return silu(x)


class Softplus(Module):
    r"""$\frac{1}{\beta}\log(1 + e^{\beta x})$ ($x$ where $\beta x >$ ``threshold``). Shape: any."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    r"""$\min(\max(x, a), b)$ (see :func:`~torchlight.nn.activation.hardtanh`)."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0) -> None:
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x: Tensor) -> Tensor:
        return hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class ReLU6(Hardtanh):
    r"""$\min(\max(x, 0), 6)$."""

    def __init__(self) -> None:
        super().__init__(0.0, 6.0)

    def extra_repr(self) -> str:
        return ""


class LogSigmoid(Module):
    r"""$\log \sigma(x)$ (see :func:`~torchlight.nn.activation.logsigmoid`)."""

    def forward(self, x: Tensor) -> Tensor:
        return logsigmoid(x)
