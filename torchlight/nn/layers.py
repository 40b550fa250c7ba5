"""Layers: Modules that hold parameters (Linear, Embedding) or settings (Dropout, Flatten), the
activations, Sequential, and the loss modules.

Every layer checks the shape of its input and, when it is wrong, says which layer it is, what
shape it expected and what it got (a Sequential adds which of its layers raised).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, overload

from torchlight.creation import empty
from torchlight.nn import functional as F
from torchlight.nn import init
from torchlight.nn.module import Module, Parameter
from torchlight.ops.linear import LinearFunction
from torchlight.tensor import Tensor

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "Dropout", "Embedding", "Flatten",
    "Identity", "Linear", "LogSoftmax", "MSELoss", "NLLLoss", "ReLU", "Sequential", "Sigmoid",
    "Softmax", "Tanh",
]  # fmt: skip


def shape_error(layer: Module, expected: str, x: Tensor) -> ValueError:
    """The error a layer raises for a wrong input: names the layer, the expected and received shape."""
    return ValueError(
        f"{layer!r}: expected input of shape {expected}, got input of shape {tuple(x.shape)}"
    )


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
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    r"""$x_i - \log\sum_j e^{x_j}$ along ``dim``. Shape: any."""

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)


class Dropout(Module):
    r"""In training, zero each element with probability $p$ and scale the others by $1/(1-p)$;
    in ``eval()`` mode, do nothing. Shape: any."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Flatten(Module):
    """Merge dimensions ``start_dim..end_dim`` into one.

    Shape: $(N, C, H, W) \\to (N, C H W)$ with the defaults.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Sequential(Module):
    """Modules applied one after another; each output is the next one's input.

    Example:
        >>> from torchlight import nn
        >>> nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        Sequential(
          (0): Linear(in_features=64, out_features=128, bias=True)
          (1): ReLU()
          (2): Linear(in_features=128, out_features=10, bias=True)
        )
    """

    def __init__(self, *modules: Module | OrderedDict[str, Module]) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                self.add_module(name, module)
        else:
            for index, layer in enumerate(modules):
                if not isinstance(layer, Module):
                    raise TypeError(
                        f"Sequential: argument {index} is a {type(layer).__name__}, not a Module"
                    )
                self.add_module(str(index), layer)

    def forward(self, x: Any) -> Any:
        for name, module in self._modules.items():
            try:
                x = module(x)
            except (ValueError, TypeError, IndexError) as error:
                error.add_note(f"raised by layer ({name}) of {type(self).__name__}: {module!r}")
                raise
        return x

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    @overload
    def __getitem__(self, index: int) -> Module: ...

    @overload
    def __getitem__(self, index: slice) -> Sequential: ...

    def __getitem__(self, index: int | slice) -> Module | Sequential:
        items = list(self._modules.items())
        if isinstance(index, slice):
            return Sequential(OrderedDict(items[index]))
        if not -len(items) <= index < len(items):
            raise IndexError(
                f"index {index} is out of range for a Sequential of {len(items)} modules"
            )
        return items[index][1]

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self


# The loss Modules live in nn/loss.py and Embedding in nn/sparse.py (imported here so old imports
# keep working).
from torchlight.nn.loss import (  # noqa: E402
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    MSELoss,
    NLLLoss,
)
from torchlight.nn.sparse import Embedding  # noqa: E402
