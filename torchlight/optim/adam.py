r"""Adam and AdamW, as PyTorch computes them.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn, optim
    >>> w = nn.Parameter(tl.tensor([1.0, -2.0]))
    >>> opt = optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w  # the first step moves each weight by lr
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from torchlight.creation import zeros_like
from torchlight.optim.optimizer import Optimizer, _check
from torchlight.tensor import Tensor

__all__ = ["Adam", "AdamW"]


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
