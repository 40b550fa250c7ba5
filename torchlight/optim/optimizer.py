r"""The base class of every optimizer: parameter groups, per-parameter state, saving and loading.

An optimizer holds the parameters it updates, in *param groups* (each with its own settings),
and per-parameter *state* (momentum buffers, moment estimates). ``step()`` changes every
parameter in place, under ``no_grad``, so the Parameter objects the model holds stay the same.
A subclass writes one method, ``_update(p, grad, state, group)``: plain tensor math ending in an
in-place update such as ``p.sub_(step, alpha=lr)``.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn, optim
    >>> w = nn.Parameter(tl.tensor([1.0, -2.0]))
    >>> opt = optim.SGD([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w
    Parameter containing:
    tensor([ 0.8000, -1.6000], requires_grad=True)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from torchlight.autograd import enable_grad, no_grad
from torchlight.creation import tensor
from torchlight.tensor import Tensor

__all__ = ["Optimizer"]


class Optimizer:
    """Base class: keeps ``param_groups`` and ``state``; subclasses write ``_update``.

    Args:
        params: an iterable of tensors, or of dicts ``{"params": [...], "lr": ...}`` (groups).
        defaults: every setting's default value, copied into each group that does not set it.
    """

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        # as in PyTorch, opt.state[p] is {} for a parameter that has no state yet
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list: pass model.parameters()")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add parameters with their own settings (e.g. a smaller ``lr`` for a pretrained part)."""
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for i, p in enumerate(params):
            if not isinstance(p, Tensor) or not p.is_leaf:
                raise TypeError(
                    f"optimizer can only optimize leaf Tensors; parameter {i} is {type(p).__name__}"
                )
            if id(p) in seen:
                raise ValueError("some parameters appear in more than one parameter group")
            seen.add(id(p))
        unknown = set(group) - set(self.defaults) - {"params"}
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unknown setting(s) {sorted(unknown)}; known: {sorted(self.defaults)}"
            )
        self.param_groups.append({**self.defaults, **group, "params": params})

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient before the next backward (``None`` by default)."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                else:
                    p.zero_grad_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient, in place (the settings are read from
        ``param_groups`` at every step, so a changed ``group["lr"]`` takes effect at once).

        Args:
            closure: optional, as in PyTorch: a function that recomputes the loss (forward and
                backward); it is called first, with gradients on, and its result returned.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, p.grad, self.state[p], group)
        return loss

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ saving and loading
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}`` as in PyTorch:
        parameters are named by their position across the groups."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            groups.append({**group, "params": [index[id(p)] for p in group["params"]]})
        state = {
            index[id(p)]: {k: v.detach() if isinstance(v, Tensor) else v for k, v in s.items()}
            for p, s in self.state.items()
            if s  # opt.state[p] looked up before a first step leaves an empty entry
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore settings and state saved by :meth:`state_dict`; checks everything first, so on
        an error the optimizer is unchanged.

        Raises:
            ValueError: when the groups, the number of parameters or a state tensor's shape
                do not match this optimizer's parameters.
        """
        params = self._check_state_dict(state_dict)
        new_state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for i, saved in state_dict["state"].items():
            p = params[int(i)]
            new_state[p] = {
                k: _like(v, p) if isinstance(v, Tensor) or hasattr(v, "shape") else v
                for k, v in saved.items()
            }
        for group, saved_group in zip(self.param_groups, state_dict["param_groups"], strict=True):
            group.update({k: v for k, v in saved_group.items() if k != "params"})
        self.state = new_state

    def _check_state_dict(self, state_dict: dict[str, Any]) -> list[Tensor]:
        name = type(self).__name__
        if set(state_dict) != {"state", "param_groups"}:
            raise ValueError(
                f"{name}.load_state_dict: expected keys 'state' and 'param_groups', got {sorted(state_dict)}"
            )
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{name}.load_state_dict: the saved state has {len(saved_groups)} parameter group(s), "
                f"this optimizer has {len(self.param_groups)}"
            )
        params: list[Tensor] = []
        for g, (group, saved) in enumerate(zip(self.param_groups, saved_groups, strict=True)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(
                    f"{name}.load_state_dict: parameter group {g} has {len(group['params'])} parameters, "
                    f"but the saved group has {len(saved['params'])}"
                )
            # (settings this optimizer does not have, such as the "initial_lr" a learning-rate
            # scheduler adds, are loaded as they are, as PyTorch loads them)
            params.extend(group["params"])
        for i, saved in state_dict["state"].items():
            if not 0 <= int(i) < len(params):
                raise ValueError(
                    f"{name}.load_state_dict: state for parameter {i}, but there are only {len(params)}"
                )
            for key, value in saved.items():
                if hasattr(value, "shape") and tuple(value.shape) != params[int(i)].shape:
                    raise ValueError(
                        f"{name}.load_state_dict: state {key!r} of parameter {i} has shape "
                        f"{tuple(value.shape)}, but the parameter has shape {params[int(i)].shape}"
                    )
        return params

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {key}: {group[key]}" for key in sorted(group) if key != "params")
        return "\n".join(lines) + "\n)"


def _like(value: Any, p: Tensor) -> Tensor:
    """A copy of ``value`` (tensor or array) with the parameter's dtype and backend."""
    if isinstance(value, Tensor):
        value = value.detach().numpy()
    return tensor(value, dtype=p.dtype, backend=p.backend)


def _check(name: str, value: float, low: float = 0.0) -> None:
    if not value >= low:  # also rejects nan
        raise ValueError(f"Invalid {name}: {value} (must be >= {low})")
