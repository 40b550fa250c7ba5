r"""Optimizers: SGD (momentum, Nesterov, weight decay), Adam and AdamW, with PyTorch's update rules.

An optimizer holds the parameters it updates, in *param groups* (each with its own settings),
and per-parameter *state* (momentum buffers, moment estimates). ``step()`` changes every
parameter in place, under ``no_grad``, so the Parameter objects the model holds stay the same.

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

import math
from collections.abc import Iterable
from typing import Any

from torchlight.autograd import no_grad
from torchlight.creation import tensor, zeros_like
from torchlight.tensor import Tensor

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]


class Optimizer:
    """Base class: keeps ``param_groups`` and ``state``; subclasses write ``_update``.

    Args:
        params: an iterable of tensors, or of dicts ``{"params": [...], "lr": ...}`` (groups).
        defaults: every setting's default value, copied into each group that does not set it.
    """

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.state: dict[Tensor, dict[str, Any]] = {}
        self._constants: dict[tuple[Any, ...], Tensor] = {}  # see _constant
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
                    p._grad = None  # p.grad = None, minus the property call (p is a leaf)
                else:
                    p.zero_grad_()

    @no_grad()
    def step(self) -> None:
        """Update every parameter that has a gradient, in place."""
        self._constants = {}  # a changed group["lr"] is seen at the next step
        for group in self.param_groups:
            for p in group["params"]:
                grad = p._grad  # p.grad, minus the property call (every parameter is a leaf)
                if grad is not None:
                    self._update(p, grad, self.state.setdefault(p, {}), group)

    def _constant(self, value: float, like: Tensor) -> Tensor:
        """``value`` as a 0-d tensor on ``like``'s backend, in its dtype. A setting such as the
        learning rate is the same for many parameters, so each step makes it once per dtype."""
        backend = like.backend
        key = (value, backend, backend.dtype(like.storage))
        made = self._constants.get(key)
        if made is None:
            made = self._constants[key] = like._lift(value)
        return made

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
        new_state: dict[Tensor, dict[str, Any]] = {}
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
            unknown = set(saved) - set(self.defaults) - {"params"}
            if unknown:
                raise ValueError(
                    f"{name}.load_state_dict: unknown setting(s) {sorted(unknown)} in group {g}"
                )
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


class SGD(Optimizer):
    r"""Stochastic gradient descent, with PyTorch's momentum formulation.

    $$g \leftarrow \nabla_p L + \lambda p,\quad b \leftarrow \mu b + (1 - \tau) g
      \ (b = g \text{ at the first step}),\quad
      p \leftarrow p - \eta \cdot \begin{cases} g + \mu b & \text{nesterov} \\ b & \text{else}\end{cases}$$

    with learning rate $\eta$ (``lr``), momentum $\mu$, dampening $\tau$, weight decay $\lambda$.
    Without momentum: $p \leftarrow p - \eta g$.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum > 0 and zero dampening")
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
        }
        super().__init__(params, defaults)

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = grad.clone()  # a copy: p.grad itself may be zeroed in place later
            else:
                buf = buf * momentum + grad * (1 - group["dampening"])
            state["momentum_buffer"] = buf
            grad = grad + momentum * buf if group["nesterov"] else buf
        # p -= lr * grad, in place (p stays the model's Parameter): a fused kernel on the storages,
        # the backend writing into p's own (grad has p's shape, dtype and backend: the engine
        # checked). Bumping the version makes any tensor saved for backward from p stale.
        be, lr, data = p.backend, self._constant(group["lr"], grad), p.storage
        be.zip("sub", data, be.zip("mul", grad.storage, lr.storage), data)
        p._version.value += 1


class Adam(Optimizer):
    r"""Adam (Kingma & Ba), as PyTorch computes it; with ``amsgrad``, the AMSGrad variant.

    $$g \leftarrow \nabla_p L + \lambda p,\quad m \leftarrow \beta_1 m + (1-\beta_1) g,\quad
      v \leftarrow \beta_2 v + (1-\beta_2) g^2$$
    $$p \leftarrow p - \frac{\eta}{1 - \beta_1^t} \cdot \frac{m}{\sqrt{v} / \sqrt{1 - \beta_2^t} + \epsilon}$$

    (with ``amsgrad``, $\max$ of all $v$ so far replaces $v$ in the last line).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
    ) -> None:
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("weight_decay value", weight_decay)
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Invalid betas {betas}: each must be in [0, 1)")
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
        }
        super().__init__(params, defaults)

    def _decay(self, p: Tensor, grad: Tensor, group: dict[str, Any]) -> Tensor:
        """Adam's L2 penalty: added to the gradient (AdamW overrides this)."""
        return grad + group["weight_decay"] * p if group["weight_decay"] != 0 else grad

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        grad = self._decay(p, grad, group)
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = state["exp_avg_sq"] = zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = state["exp_avg"]
        state["step"] = step = state["step"] + 1
        # The moment estimates are new tensors every step; only p changes in place.
        m = state["exp_avg"] = state["exp_avg"] * beta1 + grad * (1 - beta1)
        v = state["exp_avg_sq"] = state["exp_avg_sq"] * beta2 + grad * grad * (1 - beta2)
        if group["amsgrad"]:
            v = state["max_exp_avg_sq"] = state["max_exp_avg_sq"].maximum(v)
        denom = v.sqrt() / math.sqrt(1 - beta2**step) + group["eps"]
        p.sub_(m / denom, alpha=group["lr"] / (1 - beta1**step))


class AdamW(Adam):
    r"""Adam with *decoupled* weight decay (Loshchilov & Hutter): first
    $p \leftarrow p (1 - \eta \lambda)$, then the Adam step without $\lambda$ in the gradient."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)

    def _decay(self, p: Tensor, grad: Tensor, group: dict[str, Any]) -> Tensor:
        if group["weight_decay"] != 0:
            p.mul_(1 - group["lr"] * group["weight_decay"])
        return grad
