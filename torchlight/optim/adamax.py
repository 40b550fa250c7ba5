r"""Adamax, NAdam and RAdam: Adam's variants, as PyTorch computes them (its default settings).

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn, optim
    >>> w = nn.Parameter(tl.tensor([1.0, -2.0]))
    >>> opt = optim.Adamax([w], lr=0.1)
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

__all__ = ["NAdam", "RAdam", "Adamax"]


class _AdamFamily(Optimizer):
    r"""The settings and the first steps the three share: $g \leftarrow \nabla_p L + \lambda p$,
    $m \leftarrow \beta_1 m + (1 - \beta_1) g$; each subclass writes the rest of its ``_update``."""

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        _check("learning rate", defaults["lr"])
        _check("epsilon value", defaults["eps"])
        _check("weight_decay value", defaults["weight_decay"])
        betas = defaults["betas"]
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Invalid betas {betas}: each must be in [0, 1)")
        super().__init__(params, {**defaults, "betas": tuple(betas)})

    def _first_moment(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> tuple[Tensor, Tensor, int]:
        """The decayed gradient, the new $m$ and the step number $t$ (state set up on step 1)."""
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        if not state:
            state["step"] = 0
            state["exp_avg"] = zeros_like(p)
        state["step"] += 1
        beta1 = group["betas"][0]
        state["exp_avg"] = state["exp_avg"] * beta1 + grad * (1 - beta1)
        return grad, state["exp_avg"], state["step"]


class Adamax(_AdamFamily):
    r"""Adam with the infinity norm (Kingma & Ba, section 7.1):
    $u \leftarrow \max(\beta_2 u, |g| + \epsilon)$,
    $p \leftarrow p - \frac{\eta}{1 - \beta_1^t} \cdot \frac{m}{u}$ ($m$, $u$ start at 0)."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(
            params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        )

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        grad, m, t = self._first_moment(p, grad, state, group)
        beta1, beta2 = group["betas"]
        u = state.get("exp_inf", zeros_like(p))
        u = state["exp_inf"] = (u * beta2).maximum(grad.abs() + group["eps"])
        p.sub_(m / u, alpha=group["lr"] / (1 - beta1**t))


class NAdam(_AdamFamily):
    r"""Adam with Nesterov momentum (Dozat), as PyTorch: with
    $\mu_t = \beta_1 (1 - \tfrac12 \cdot 0.96^{t \psi})$ ($\psi$ = ``momentum_decay``) and
    $\Pi_t = \prod_{k \le t} \mu_k$, $d = \sqrt{v / (1 - \beta_2^t)} + \epsilon$,
    $$p \leftarrow p - \eta \frac{1 - \mu_t}{1 - \Pi_t} \frac{g}{d}
      - \eta \frac{\mu_{t+1}}{1 - \Pi_t \mu_{t+1}} \frac{m}{d}.$$"""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
    ) -> None:
        _check("momentum_decay value", momentum_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, {**defaults, "momentum_decay": momentum_decay})

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        grad, m, t = self._first_moment(p, grad, state, group)
        beta1, beta2 = group["betas"]
        psi = group["momentum_decay"]
        v = state.get("exp_avg_sq", zeros_like(p))
        v = state["exp_avg_sq"] = v * beta2 + grad * grad * (1 - beta2)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        product = state["mu_product"] = state.get("mu_product", 1.0) * mu
        denom = (v / (1 - beta2**t)).sqrt() + group["eps"]
        p.sub_(grad / denom, alpha=group["lr"] * (1.0 - mu) / (1.0 - product))
        p.sub_(m / denom, alpha=group["lr"] * mu_next / (1.0 - product * mu_next))


class RAdam(_AdamFamily):
    r"""Rectified Adam (Liu et al.), as PyTorch: with $\rho_\infty = 2/(1 - \beta_2) - 1$ and
    $\rho_t = \rho_\infty - 2 t \beta_2^t / (1 - \beta_2^t)$, while $\rho_t \le 5$ the step is
    plain momentum $p \leftarrow p - \eta\, m / (1 - \beta_1^t)$; after, it is Adam's step times
    $r_t = \sqrt{\frac{(\rho_t - 4)(\rho_t - 2)\rho_\infty}{(\rho_\infty - 4)(\rho_\infty - 2)\rho_t}}$."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(
            params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        )

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        grad, m, t = self._first_moment(p, grad, state, group)
        beta1, beta2 = group["betas"]
        v = state.get("exp_avg_sq", zeros_like(p))
        v = state["exp_avg_sq"] = v * beta2 + grad * grad * (1 - beta2)
        corrected_m = m / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
        if rho_t <= 5.0:  # the variance estimate is not yet trustworthy: momentum only
            p.sub_(corrected_m, alpha=group["lr"])
            return
        rect = math.sqrt(
            (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
        )
        adaptive = math.sqrt(1 - beta2**t) / (v.sqrt() + group["eps"])
        p.sub_(corrected_m * adaptive, alpha=group["lr"] * rect)
