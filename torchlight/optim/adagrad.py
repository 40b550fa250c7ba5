r"""Adagrad (Duchi et al.), as PyTorch computes it.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn, optim
    >>> w = nn.Parameter(tl.tensor([1.0, -2.0]))
    >>> opt = optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w  # the first step moves each weight by lr
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torchlight.creation import full_like
from torchlight.optim.optimizer import Optimizer, _check
from torchlight.tensor import Tensor

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    r"""Scale each weight's step by the root of the sum of all its squared gradients so far.

    $$g \leftarrow \nabla_p L + \lambda p,\quad s \leftarrow s + g^2,\quad
      p \leftarrow p - \frac{\eta}{1 + (t - 1)\,\delta} \cdot \frac{g}{\sqrt{s} + \epsilon}$$

    at step $t$, with learning-rate decay $\delta$ (``lr_decay``) and $s$ starting at
    ``initial_accumulator_value``.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
    ) -> None:
        _check("learning rate", lr)
        _check("lr_decay value", lr_decay)
        _check("weight_decay value", weight_decay)
        _check("initial_accumulator_value", initial_accumulator_value)
        _check("epsilon value", eps)
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "eps": eps,
        }
        super().__init__(params, defaults)

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        if not state:
            state["step"] = 0
            state["sum"] = full_like(p, group["initial_accumulator_value"])
        state["step"] += 1
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        lr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        total = state["sum"] = state["sum"] + grad * grad
        p.sub_(grad / (total.sqrt() + group["eps"]), alpha=lr)
