r"""Adadelta (Zeiler, 2012), as PyTorch computes it.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn, optim
    >>> w = nn.Parameter(tl.tensor([1.0]))
    >>> opt = optim.Adadelta([w])
    >>> (w * w).sum().backward(); opt.step(); round(w.item(), 6)  # 1 - sqrt(1e-6 / (0.1 * 4 + 1e-6)) * 2
    0.996838
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torchlight.creation import zeros_like
from torchlight.optim.optimizer import Optimizer, _check
from torchlight.tensor import Tensor

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    r"""Steps scaled by the ratio of running RMS of past steps to running RMS of gradients.

    $$g \leftarrow \pm\nabla_p L + \lambda p,\quad v \leftarrow \rho v + (1-\rho) g^2,\quad
      \Delta = \frac{\sqrt{u + \epsilon}}{\sqrt{v + \epsilon}}\, g,\quad
      u \leftarrow \rho u + (1-\rho)\Delta^2,\quad p \leftarrow p - \eta \Delta$$

    (``maximize`` flips the gradient's sign).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        *,
        maximize: bool = False,
    ) -> None:
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("weight_decay value", weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        state["step"] += 1
        rho, eps = group["rho"], group["eps"]
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        square_avg = state["square_avg"] = state["square_avg"] * rho + (1 - rho) * grad * grad
        delta = (state["acc_delta"] + eps).sqrt() / (square_avg + eps).sqrt() * grad
        state["acc_delta"] = state["acc_delta"] * rho + (1 - rho) * delta * delta
        p.sub_(delta, alpha=group["lr"])
