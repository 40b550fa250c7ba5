"""Module and Parameter: how a neural network keeps track of its learnable tensors.

A :class:`Module` registers every :class:`Parameter` and every sub-Module assigned to one of its
attributes, so ``model.parameters()`` finds all weights of a nested model, ``state_dict()``
names them with dotted paths (``"0.weight"``), and ``train()`` / ``eval()`` reach every layer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from torchlight import dtypes
from torchlight.autograd import no_grad
from torchlight.creation import empty
from torchlight.nn.hooks import RemovableHandle, call_with_hooks
from torchlight.tensor import Tensor

__all__ = ["IncompatibleKeys", "Module", "Parameter", "shape_error"]


class Parameter(Tensor):
    """A leaf Tensor that a :class:`Module` registers as learnable (``requires_grad=True``).

    Assigning a Parameter to a Module attribute adds it to ``module.parameters()``; a plain
    Tensor attribute is not a parameter.

    Example:
        >>> import torchlight as tl
        >>> p = tl.nn.Parameter(tl.zeros(2))
        >>> p.requires_grad, p.is_leaf
        (True, True)
    """

    __slots__ = ()

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(
                f"Parameter(data): data must be a torchlight Tensor, got {type(data).__name__}; "
                "wrap it first, e.g. Parameter(tl.tensor(values))"
            )
        super().__init__(data.storage, data.backend)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class IncompatibleKeys(NamedTuple):
    """What :meth:`Module.load_state_dict` returns: keys it missed and keys it did not know."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of every layer and model: subclass it, assign layers in ``__init__``,
    write ``forward``.

    Example:
        >>> import torchlight as tl
        >>> from torchlight import nn
        >>> class Net(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc = nn.Linear(4, 2)
        ...     def forward(self, x):
        ...         return self.fc(x).relu()
        >>> [name for name, _ in Net().named_parameters()]
        ['fc.weight', 'fc.bias']
    """

    training: bool

    def __init__(self) -> None:
        # object.__setattr__: our own __setattr__ needs these dicts to exist already
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())  # see nn/hooks.py
        object.__setattr__(self, "_forward_hooks", OrderedDict())

    # ------------------------------------------------------------------ registration
    def _registries(self, name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        try:
            return (
                self.__dict__["_parameters"],
                self.__dict__["_buffers"],
                self.__dict__["_modules"],
            )
        except KeyError:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() is called: call "
                f"super().__init__() first in {type(self).__name__}.__init__"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, (Parameter, Module)):
            params, buffers, modules = self._registries(name)
            for registry in (params, buffers, modules):
                registry.pop(name, None)
            self.__dict__.pop(name, None)
            (params if isinstance(value, Parameter) else modules)[name] = value
            return
        params = self.__dict__.get("_parameters", {})
        if name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign a {type(value).__name__} to parameter {name!r} of "
                    f"{type(self).__name__}: use nn.Parameter(tensor) (or None)"
                )
            params[name] = None
        elif name in self.__dict__.get("_modules", {}):
            if value is not None:
                raise TypeError(
                    f"cannot assign a {type(value).__name__} to submodule {name!r} (a Module or None expected)"
                )
            self.__dict__["_modules"][name] = None
        elif name in self.__dict__.get("_buffers", {}):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign a {type(value).__name__} to buffer {name!r} (a Tensor or None expected)"
                )
            self.__dict__["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: look in the registries
        registries = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            found = registries.get(registry)
            if found is not None and name in found:
                return found[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for registry in ("_parameters", "_buffers", "_modules"):
            found = self.__dict__.get(registry, {})
            if name in found:
                del found[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add ``param`` under ``name`` (``None`` reserves the name, e.g. ``bias=False``)."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"register_parameter({name!r}): expected a Parameter or None, got {type(param).__name__}"
            )
        self._registries(name)[0][name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is saved in ``state_dict`` but not learned (running statistics...);
        ``persistent=False``: a buffer that moves with the module but is not in ``state_dict``."""
        self._registries(name)[1][name] = tensor
        non_persistent = self.__dict__.setdefault("_non_persistent_buffers_set", set())
        if persistent:
            non_persistent.discard(name)
        else:
            non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a submodule under ``name`` (what attribute assignment does)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module({name!r}): expected a Module, got {type(module).__name__}")
        self._registries(name)[2][name] = module

    register_module = add_module

    # ------------------------------------------------------------------ calling
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} is missing the required forward() method")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # (read from __dict__: a stateless Module whose __init__ skipped super().__init__() has no
        # hook registries, and keeps working as it did before hooks existed)
        if self.__dict__.get("_forward_pre_hooks") or self.__dict__.get("_forward_hooks"):
            return call_with_hooks(self, self.forward, args, kwargs)
        return self.forward(*args, **kwargs)

    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, args)`` before every ``forward``; a tuple (or one value) it returns
        replaces the positional arguments. Returns a handle whose ``remove()`` undoes this."""
        return RemovableHandle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after every ``forward``; a value it returns
        replaces the output. Returns a handle whose ``remove()`` undoes this.

        Example:
            >>> import torchlight as tl
            >>> from torchlight import nn
            >>> layer = nn.Linear(2, 2)
            >>> handle = layer.register_forward_hook(lambda module, args, out: out.relu())
            >>> bool((layer(-tl.ones(9, 2)) >= 0).all())  # every output went through relu
            True
            >>> handle.remove()
        """
        return RemovableHandle(self._forward_hooks, hook)

    # ------------------------------------------------------------------ traversal
    def named_children(self) -> Iterator[tuple[str, Module]]:
        """The direct submodules with their attribute names."""
        for name, module in self._modules.items():
            if module is not None:
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every module inside it, depth first, each once, with dotted names."""
        seen: set[int] = set()
        stack: list[tuple[str, Module]] = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [(f"{name}.{n}" if name else n, m) for n, m in module.named_children()]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def _named_members(self, registry: str, recurse: bool) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        modules = self.named_modules() if recurse else iter([("", self)])
        for prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or id(value) in seen:
                    continue  # a parameter shared by two layers is listed once
                seen.add(id(value))
                yield (f"{prefix}.{name}" if prefix else name), value

    def named_parameters(self, recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Every parameter with its dotted name (``"0.weight"``), each shared one once."""
        return self._named_members("_parameters", recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse):
            yield param

    def named_buffers(self, recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buffer in self.named_buffers(recurse):
            yield buffer

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule, then on ``self`` (e.g. custom initialization)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ modes and gradients
    def train(self, mode: bool = True) -> Module:
        """Switch every module to training mode (dropout active); returns ``self``."""
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        """Switch every module to evaluation mode (dropout does nothing); returns ``self``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Freeze (``False``) or unfreeze every parameter; returns ``self``."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients of every parameter (``None``, or zeros in place)."""
        for param in self.parameters():
            if set_to_none:
                param.grad = None
            else:
                param.zero_grad_()

    def to(self, target: Any) -> Module:
        """Move every parameter and buffer to a dtype (``tl.float32``) or a backend (``"numba"``),
        in place: the Parameter objects (and an optimizer holding them) stay the same."""
        for param in self.parameters():
            moved = param.detach().to(target)
            param.data = moved
            if param._grad is not None:
                param._grad = param._grad.to(target)
        for module in self.modules():
            for name, buffer in module._buffers.items():
                if buffer is not None and (buffer.dtype.is_floating_point or not _is_dtype(target)):
                    module._buffers[name] = buffer.to(target)
        return self

    def _place(self, device: Any) -> None:
        """PyTorch's ``device=`` keyword of a layer (``nn.Linear(2, 3, device="cpu")``): what
        ``__init__`` made moves to that backend; ``None`` keeps the default one."""
        if device is not None:
            self.to(device)

    def float(self) -> Module:
        return self.to(dtypes.float32)

    def double(self) -> Module:
        return self.to(dtypes.float64)

    # ------------------------------------------------------------------ saving and loading
    def state_dict(self, prefix: str = "") -> OrderedDict[str, Tensor]:
        """Every parameter and buffer by dotted name, detached from the graph (storage shared).

        Example:
            >>> from torchlight import nn
            >>> list(nn.Linear(3, 2).state_dict())
            ['weight', 'bias']
        """
        out: OrderedDict[str, Tensor] = OrderedDict()
        for name, module in self.named_modules(prefix=prefix.rstrip(".")):
            skip = module.__dict__.get("_non_persistent_buffers_set", ())
            for registry in (module._parameters, module._buffers):
                for key, value in registry.items():
                    if value is not None and not (registry is module._buffers and key in skip):
                        out[f"{name}.{key}" if name else key] = value.detach()
        return out

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True
    ) -> IncompatibleKeys:
        """Copy values from ``state_dict`` into this module's parameters and buffers, in place.

        Everything is checked before anything is copied: on an error the module is unchanged.

        Raises:
            RuntimeError: listing missing keys and unexpected keys (when ``strict``) and every
                shape mismatch (always), as PyTorch does.
        """
        own = self.state_dict()
        missing = [key for key in own if key not in state_dict]
        unexpected = [key for key in state_dict if key not in own]
        errors: list[str] = []
        if strict and missing:
            errors.append(
                "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + "."
            )
        if strict and unexpected:
            errors.append(
                "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + "."
            )
        values: dict[str, np.ndarray] = {}
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            array = np.asarray(value.detach().numpy() if isinstance(value, Tensor) else value)
            if tuple(array.shape) != target.shape:
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {tuple(array.shape)} from "
                    f"checkpoint, the shape in current model is {target.shape}."
                )
            elif array.dtype.kind not in "fiub":
                errors.append(
                    f"bad value for {key}: expected numbers, got an array of dtype {array.dtype}."
                )
            values[key] = array
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        with no_grad():
            for key, array in values.items():
                own[key].copy_(array)
        return IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        """The text between the parentheses of this module's repr (its settings)."""
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, module in self._modules.items():
            child = repr(module).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}({extra}" if extra else f"{type(self).__name__}("
        return head + "\n" + "\n".join(lines) + "\n)"

    def __dir__(self) -> list[str]:
        return sorted(
            set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules)
        )


def _is_dtype(target: Any) -> bool:
    try:
        dtypes.from_any(target)
    except TypeError:
        return False
    return not (isinstance(target, str) and target not in dtypes._ALL)


def shape_error(layer: Module, expected: str, x: Tensor) -> ValueError:
    """The error a layer raises for a wrong input: names the layer, the expected and received shape."""
    return ValueError(
        f"{layer!r}: expected input of shape {expected}, got input of shape {tuple(x.shape)}"
    )
