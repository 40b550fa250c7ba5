r"""Linear layers: ``Linear`` ($y = x W^T + b$) and ``Identity``, as in PyTorch.

``Linear`` holds the weight and bias (PyTorch's shapes and initialization, which the
convolutions share through :func:`add_weight_and_bias`); its Function, with the backward derived
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
from torchlight.ops.linear import LinearFunction
from torchlight.tensor import Tensor

__all__ = ["Identity", "Linear"]


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
        self, in_features: int, out_features: int, bias: bool = True, dtype: Any = None
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        add_weight_and_bias(
            self, (out_features, in_features), out_features if bias else None, dtype
        )

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
