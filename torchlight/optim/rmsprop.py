r"""RMSprop (Hinton's lecture 6e), as PyTorch computes it.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn, optim
    >>> w = nn.Parameter(tl.tensor([1.0, -2.0]))
    >>> opt = optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward(); opt.step(); w  # the first step is lr / sqrt(1 - alpha)
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torchlight.creation import zeros_like
from torchlight.optim.optimizer import Optimizer, _check
from torchlight.tensor import Tensor

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""Divide the gradient by a running root mean square of recent gradients.

    $$g \leftarrow \nabla_p L + \lambda p,\quad v \leftarrow \alpha v + (1 - \alpha) g^2,\quad
      d = \sqrt{v} + \epsilon \ \ (\text{centered: } \sqrt{v - \bar g^2} + \epsilon,\
      \bar g \leftarrow \alpha \bar g + (1 - \alpha) g)$$
    $$p \leftarrow p - \eta\, g / d \quad\text{or, with momentum } \mu:\quad
      b \leftarrow \mu b + g / d,\ p \leftarrow p - \eta b$$

    ($v$, $\bar g$ and $b$ start at 0).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
    ) -> None:
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("alpha value", alpha)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "alpha": alpha,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "centered": centered,
        }
        super().__init__(params, defaults)

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        alpha = group["alpha"]
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        state["step"] += 1
        v = state["square_avg"] = state["square_avg"] * alpha + grad * grad * (1 - alpha)
        if group["centered"]:
            mean = state["grad_avg"] = state["grad_avg"] * alpha + grad * (1 - alpha)
            denom = (v - mean * mean).sqrt() + group["eps"]
        else:
            denom = v.sqrt() + group["eps"]
        if group["momentum"] > 0:
            buf = state["momentum_buffer"] = (
                state["momentum_buffer"] * group["momentum"] + grad / denom
            )
            p.sub_(buf, alpha=group["lr"])
        else:
            p.sub_(grad / denom, alpha=group["lr"])
