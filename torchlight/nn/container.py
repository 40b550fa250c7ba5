"""Containers that register what they hold: Sequential, ModuleList, ModuleDict, ParameterList,
ParameterDict (and the shape layers Flatten and Unflatten).

A plain Python list of layers assigned to a Module attribute is invisible to ``parameters()``,
``state_dict()``, ``train()`` and ``to()``; these containers register every item under its
position (``"0"``, ``"1"`` ...) or key, so the names in ``state_dict`` are ``"layers.0.weight"``.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn
    >>> class Deep(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
    ...     def forward(self, x):
    ...         for layer in self.layers:
    ...             x = layer(x).relu()
    ...         return x
    >>> list(Deep().state_dict())[:3]
    ['layers.0.weight', 'layers.0.bias', 'layers.1.weight']
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from torchlight.nn.module import Module, Parameter
from torchlight.tensor import Tensor

__all__ = [
    "Flatten", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential",
    "Unflatten",
]  # fmt: skip


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


def _position(index: int, length: int, what: str) -> int:
    if not -length <= index < length:
        raise IndexError(f"index {index} is out of range for a {what} of length {length}")
    return index % length


class ModuleList(Module):
    """A list of Modules, each registered as a submodule (indexable, iterable, appendable)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: int | slice) -> Any:
        items = list(self._modules.values())
        if isinstance(index, slice):
            return ModuleList(items[index])
        return items[_position(index, len(items), "ModuleList")]

    def __setitem__(self, index: int, module: Module) -> None:
        self.add_module(str(_position(index, len(self), "ModuleList")), module)

    def __delitem__(self, index: int) -> None:
        items = list(self._modules.values())
        del items[_position(index, len(items), "ModuleList")]
        self._modules.clear()
        self.extend(items)  # renumber, as PyTorch does

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        self.extend(items)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "ModuleList has no forward(): iterate over it in your Module's forward, or use "
            "nn.Sequential to apply the layers one after another"
        )


class ModuleDict(Module):
    """A dict of Modules by name, each registered as a submodule (keys keep insertion order)."""

    def __init__(
        self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None
    ) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self.add_module(key, module)

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward(): call its modules by key")


class ParameterList(Module):
    """A list of Parameters, each registered (so ``parameters()`` and optimizers see them)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        if values is not None:
            self.extend(values)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())

    def __getitem__(self, index: int) -> Parameter:
        items = list(self._parameters.values())
        return items[_position(index, len(items), "ParameterList")]

    def __setitem__(self, index: int, param: Any) -> None:
        self.register_parameter(
            str(_position(index, len(self), "ParameterList")), _as_parameter(param)
        )

    def append(self, value: Any) -> ParameterList:
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return ", ".join(f"({i}): Parameter of shape {p.shape}" for i, p in enumerate(self))


class ParameterDict(Module):
    """A dict of Parameters by name, each registered."""

    def __init__(self, parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        for key, value in (parameters or {}).items():
            self[key] = value

    def __getitem__(self, key: str) -> Parameter:
        return self._parameters[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.register_parameter(key, _as_parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __contains__(self, key: object) -> bool:
        return key in self._parameters

    def keys(self) -> Iterable[str]:
        return self._parameters.keys()

    def values(self) -> Iterable[Parameter]:
        return self._parameters.values()

    def items(self) -> Iterable[tuple[str, Parameter]]:
        return self._parameters.items()


def _as_parameter(value: Any) -> Parameter:
    """A Parameter as is; a plain tensor wrapped into one (as PyTorch's ParameterList does)."""
    return value if isinstance(value, Parameter) else Parameter(value)


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


class Unflatten(Module):
    """Split dimension ``dim`` into ``unflattened_size`` (the inverse of ``Flatten``).

    Shape: $(N, C \\cdot H \\cdot W) \\to (N, C, H, W)$ for ``Unflatten(1, (C, H, W))``.

    Example:
        >>> import torchlight as tl
        >>> Unflatten(1, (2, 3))(tl.zeros(4, 6)).shape
        (4, 2, 3)
    """

    def __init__(self, dim: int, unflattened_size: tuple[int, ...] | list[int]) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(int(s) for s in unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 0:
            raise ValueError(f"{self!r}: expected at least a 1-d input, got a 0-d tensor")
        dim = self.dim % x.ndim
        sizes = self.unflattened_size
        known = math.prod(s for s in sizes if s != -1)
        if (-1 not in sizes and known != x.shape[dim]) or (known and x.shape[dim] % known):
            raise ValueError(
                f"{self!r}: dimension {self.dim} of the input has size {x.shape[dim]}, which "
                f"cannot be split into {sizes} (input shape {x.shape})"
            )
        return x.reshape(*x.shape[:dim], *sizes, *x.shape[dim + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
