r"""Linear layers: ``Linear`` ($y = x W^T + b$) and ``Identity``, as in PyTorch.

``Linear`` holds the weight and bias (PyTorch's shapes and initialization, which the
convolutions share through ``add_weight_and_bias``); its Function, with the backward derived
on paper, is :class:`~torchlight.ops.linear.LinearFunction`. Every layer checks the shape of its
input and, when it is wrong, says which layer it is, what shape it expected and what it got.

Example:
    >>> import torchlight as tl
    >>> tl.nn.Linear(3, 2)(tl.ones(4, 3)).shape
    (4, 2)
"""

from __future__ import annotations

import math
from typing import Any

from torchlight.creation import empty
from torchlight.nn import init
from torchlight.nn.module import Module, Parameter, shape_error
from torchlight.ops.einsum import einsum
from torchlight.ops.linear import LinearFunction
from torchlight.tensor import Tensor

__all__ = ["Bilinear", "Identity", "Linear", "bilinear"]


def add_weight_and_bias(
    layer: Module, weight_shape: tuple[int, ...], bias_size: int | None, dtype: Any
) -> None:
    """Give ``layer`` a ``weight`` of ``weight_shape`` and a ``bias`` of ``bias_size`` values (or
    ``bias = None`` when ``bias_size`` is None), then initialize them with
    ``layer.reset_parameters()``. ``Linear`` and the convolutions share this set-up."""
    layer.weight = Parameter(empty(*weight_shape, dtype=dtype))
    if bias_size is None:
        layer.register_parameter("bias", None)
    else:
        layer.bias = Parameter(empty(bias_size, dtype=dtype))
    layer.reset_parameters()


def reset_weight_and_bias(weight: Tensor, bias: Tensor | None) -> None:
    r"""PyTorch's default initialization of a layer: ``kaiming_uniform_(weight, a=sqrt(5))``, and
    the bias from $\mathcal{U}(-1/\sqrt{\text{fan\_in}}, 1/\sqrt{\text{fan\_in}})$, where fan_in is
    what one output sees (in_features, or in_channels times the kernel area)."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in = weight.numel() // weight.shape[0]  # weight[0] holds what one output sees
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        init.uniform_(bias, -bound, bound)


class Linear(Module):
    r"""$y = x W^T + b$ with $W$ of shape (out_features, in_features).

    Both are initialized from $\mathcal{U}(-1/\sqrt{\text{in}}, 1/\sqrt{\text{in}})$, as in PyTorch.

    Shape: input $(*, \text{in\_features})$, output $(*, \text{out\_features})$.

    Example:
        >>> import torchlight as tl
        >>> layer = tl.nn.Linear(64, 10)
        >>> layer(tl.randn(32, 64)).shape
        (32, 10)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        add_weight_and_bias(
            self, (out_features, in_features), out_features if bias else None, dtype
        )
        self._place(device)  # PyTorch's device= keyword

    def reset_parameters(self) -> None:
        """PyTorch's default: kaiming_uniform_ with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in))."""
        reset_weight_and_bias(self.weight, self.bias)

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        if not shape or shape[-1] != self.in_features:
            raise shape_error(self, f"(*, {self.in_features})", x)
        return LinearFunction.apply(x, self.weight, self.bias)  # F.linear without its re-check

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input unchanged (a placeholder layer)."""

    def forward(self, x: Tensor) -> Tensor:
        return x


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    r"""$y_k = x_1^T A_k x_2 + b_k$, as ``F.bilinear``.

    Shape: input1 $(*, \text{in1})$, input2 $(*, \text{in2})$, weight
    $(\text{out}, \text{in1}, \text{in2})$, bias $(\text{out})$, output $(*, \text{out})$.
    """
    if (
        weight.ndim != 3
        or input1.shape[-1:] != weight.shape[1:2]
        or input2.shape[-1:] != weight.shape[2:]
    ):
        raise ValueError(
            f"bilinear: weight {weight.shape} is (out, in1, in2), so the inputs' last dimensions must "
            f"be {weight.shape[1:]}; got inputs of shapes {input1.shape} and {input2.shape}"
        )
    rows = input1.shape[:-1]
    flat1, flat2 = input1.reshape(-1, weight.shape[1]), input2.reshape(-1, weight.shape[2])
    out = einsum("bi,kij,bj->bk", flat1, weight, flat2).reshape(*rows, weight.shape[0])
    return out if bias is None else out + bias


class Bilinear(Module):
    r"""$y = x_1^T A x_2 + b$ with $A$ of shape (out_features, in1_features, in2_features), both
    initialized from $\mathcal{U}(-1/\sqrt{\text{in1}}, 1/\sqrt{\text{in1}})$, as in PyTorch.

    Example:
        >>> import torchlight as tl
        >>> tl.nn.Bilinear(3, 4, 2)(tl.ones(5, 3), tl.ones(5, 4)).shape
        (5, 2)
    """

    def __init__(
        self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
        device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        add_weight_and_bias(
            self, (out_features, in1_features, in2_features), out_features if bias else None, dtype
        )
        self._place(device)  # PyTorch's device= keyword

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in1_features)
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
