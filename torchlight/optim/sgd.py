r"""Stochastic gradient descent, with PyTorch's momentum formulation.

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

from collections.abc import Iterable
from typing import Any

from torchlight.optim.optimizer import Optimizer, _check
from torchlight.tensor import Tensor

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""Stochastic gradient descent, with PyTorch's momentum formulation.

    $$g \leftarrow \nabla_p L + \lambda p,\quad b \leftarrow \mu b + (1 - \tau) g
      \ (b = g \text{ at the first step}),\quad
      p \leftarrow p - \eta \cdot \begin{cases} g + \mu b & \text{nesterov} \\ b & \text{else}\end{cases}$$

    with learning rate $\eta$ (``lr``), momentum $\mu$, dampening $\tau$, weight decay $\lambda$.
    Without momentum: $p \leftarrow p - \eta g$. With ``maximize``, $g$ is $-\nabla_p L$.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
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
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        if group["maximize"]:
            grad = -grad
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
        p.sub_(grad, alpha=group["lr"])  # p -= lr * grad, in place: p stays the model's Parameter
