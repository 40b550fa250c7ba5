"""Hooks on Modules: functions called before or after every ``forward``, as in PyTorch.

``module.register_forward_pre_hook(hook)`` calls ``hook(module, args)`` before ``forward``; a
return value other than ``None`` replaces the positional arguments. ``register_forward_hook(hook)``
calls ``hook(module, args, output)`` after it; a return value other than ``None`` replaces the
output. Both return a :class:`RemovableHandle`: ``handle.remove()`` unregisters the hook.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn
    >>> shapes = []
    >>> model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    >>> handle = model[0].register_forward_hook(lambda m, args, out: shapes.append(out.shape))
    >>> _ = model(tl.zeros(2, 4)); handle.remove(); _ = model(tl.zeros(5, 4))
    >>> shapes
    [(2, 3)]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RemovableHandle", "call_with_hooks"]


class RemovableHandle:
    """What registering a hook returns: ``remove()`` unregisters it (also as a context manager).

    The module keeps its hooks in a dict keyed by their handles, in the order registered.
    """

    def __init__(
        self, hooks: dict[RemovableHandle, Callable[..., Any]], hook: Callable[..., Any]
    ) -> None:
        self.hooks = hooks
        hooks[self] = hook

    def remove(self) -> None:
        self.hooks.pop(self, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


def call_with_hooks(
    module: Any, forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``forward(*args, **kwargs)`` with the module's forward pre-hooks before and hooks after."""
    for hook in list(module._forward_pre_hooks.values()):
        changed = hook(module, args)
        if changed is not None:
            args = changed if isinstance(changed, tuple) else (changed,)
    output = forward(*args, **kwargs)
    for hook in list(module._forward_hooks.values()):
        changed = hook(module, args, output)
        if changed is not None:
            output = changed
    return output
