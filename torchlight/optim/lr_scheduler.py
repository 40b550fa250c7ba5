r"""Learning-rate schedules, as ``torch.optim.lr_scheduler``: call ``scheduler.step()`` once per
epoch (or per batch for OneCycleLR), after ``optimizer.step()``.

A scheduler writes each parameter group's ``"lr"``; it reads the learning rate each group was
created with from ``group["initial_lr"]`` (its ``base_lrs``). As in PyTorch, most schedules are
written *chainably*: the new rate is computed from the current ``group["lr"]``, so two schedulers
on one optimizer multiply their effects, and :class:`SequentialLR` can hand over from one to the
next.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn, optim
    >>> opt = optim.SGD([nn.Parameter(tl.zeros(1))], lr=0.1)
    >>> sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> lrs = []
    >>> for epoch in range(5):
    ...     opt.step()  # (train one epoch here)
    ...     sched.step()
    ...     lrs.append(sched.get_last_lr()[0])
    >>> lrs
    [0.1, 0.05, 0.05, 0.025, 0.025]
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from torchlight.optim.optimizer import Optimizer

__all__ = [
    "ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
    "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR", "OneCycleLR",
    "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR",
]  # fmt: skip


def _check_optimizer(scheduler: object, optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"{type(scheduler).__name__}: expected an optimizer (e.g. optim.SGD(...)), got "
            f"{type(optimizer).__name__}"
        )


class LRScheduler:
    """Base class: keeps ``last_epoch`` (steps taken) and ``base_lrs``; subclasses write ``get_lr``.

    Args:
        optimizer: the optimizer whose groups' ``"lr"`` this scheduler sets.
        last_epoch: ``-1`` for a new run; a resumed run passes the last epoch done (the groups
            must then hold ``"initial_lr"``, as saved in the optimizer's state dict).
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(self, optimizer)
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(
                    f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an "
                    "optimizer (last_epoch != -1): load the optimizer's state dict first"
                )
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """Set the rates for epoch 0 (``last_epoch`` becomes 0 on a new run)."""
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:
        """The new rate of each group at ``self.last_epoch``."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The rates the last ``step()`` set, one per parameter group."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or, deprecated in PyTorch, jump to ``epoch``) and set the rates."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _groups_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (save that with ``optimizer.state_dict()``)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.__dict__.update(state_dict)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self._last_lr})"


class LambdaLR(LRScheduler):
    r"""$\eta_t = \eta_0 \cdot \lambda(t)$: any schedule as a function of the epoch, e.g. a warm-up.

    Args:
        lr_lambda: a function of the epoch, or one per parameter group.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.optim.lr_scheduler import LambdaLR
        >>> from torchlight import nn, optim
        >>> opt = optim.SGD([nn.Parameter(tl.zeros(1))], lr=1.0)
        >>> warmup = LambdaLR(opt, lambda epoch: min(1.0, (epoch + 1) / 4))
        >>> [opt.param_groups[0]["lr"]] + [warmup.step() or warmup.get_last_lr()[0] for _ in range(4)]
        [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(self, optimizer)
        n = len(optimizer.param_groups)
        if callable(lr_lambda):
            self.lr_lambdas = [lr_lambda] * n
        else:
            self.lr_lambdas = list(lr_lambda)
            if len(self.lr_lambdas) != n:
                raise ValueError(f"expected {n} lr_lambdas (one per group), got {len(lr_lambda)}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [
            base * f(self.last_epoch)
            for base, f in zip(self.base_lrs, self.lr_lambdas, strict=True)
        ]

    def state_dict(self) -> dict[str, Any]:
        """As PyTorch: the lambdas are not saved (a function cannot be); re-create them."""
        return {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}


class StepLR(LRScheduler):
    r"""$\eta_t = \eta_0 \cdot \gamma^{\lfloor t / \text{step\_size} \rfloor}$: decay every ``step_size`` epochs."""

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        if not isinstance(step_size, int) or step_size < 1:
            raise ValueError(f"StepLR: step_size must be a positive integer, got {step_size!r}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._groups_lr()
        return [lr * self.gamma for lr in self._groups_lr()]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    r"""$\eta_t = \eta_0 \cdot \gamma^{\#\{m \in \text{milestones} : m \le t\}}$: decay at each milestone."""

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Sequence[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        self.milestones = Counter(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._groups_lr()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._groups_lr()]

    def _get_closed_form_lr(self) -> list[float]:
        passed = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma**passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    r"""$\eta_t = \eta_0 \cdot \gamma^t$."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return self._groups_lr()
        return [lr * self.gamma for lr in self._groups_lr()]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    r"""$\eta_t = \eta_{\min} + \tfrac12 (\eta_0 - \eta_{\min})(1 + \cos(\pi t / T_{\max}))$: half a
    cosine from $\eta_0$ down to ``eta_min`` in ``T_max`` epochs (then back up, as in PyTorch).

    Computed chainably from the current rate, as PyTorch does (equal to the formula when this is
    the only scheduler).
    """

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:  # noqa: N803 - PyTorch's argument name
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, T, low = self.last_epoch, self.T_max, self.eta_min  # noqa: N806
        if t == 0:
            return self._groups_lr()
        if self._step_count == 1 and t > 0:  # resumed: the closed form
            return self._get_closed_form_lr()
        if (t - 1 - T) % (2 * T) == 0:  # the bottom of the cosine: start going back up
            return [
                lr + (base - low) * (1 - math.cos(math.pi / T)) / 2
                for lr, base in zip(self._groups_lr(), self.base_lrs, strict=True)
            ]
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return [ratio * (lr - low) + low for lr in self._groups_lr()]

    def _get_closed_form_lr(self) -> list[float]:
        t, T, low = self.last_epoch, self.T_max, self.eta_min  # noqa: N806
        return [low + (base - low) * (1 + math.cos(math.pi * t / T)) / 2 for base in self.base_lrs]


class LinearLR(LRScheduler):
    r"""$\eta_t = \eta_0 \cdot \big(s + (e - s) \min(t, T) / T\big)$: a linear ramp of the factor
    from ``start_factor`` $s$ to ``end_factor`` $e$ over ``total_iters`` $T$ epochs (a warm-up)."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError(
                f"LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got "
                f"{start_factor} and {end_factor}"
            )
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, s, e = self.last_epoch, self.start_factor, self.end_factor
        if t == 0:
            return [lr * s for lr in self._groups_lr()]
        if t > self.total_iters:
            return self._groups_lr()
        factor = 1.0 + (e - s) / (self.total_iters * s + (t - 1) * (e - s))
        return [lr * factor for lr in self._groups_lr()]

    def _get_closed_form_lr(self) -> list[float]:
        t, s, e = self.last_epoch, self.start_factor, self.end_factor
        return [
            base * (s + (e - s) * min(self.total_iters, t) / self.total_iters)
            for base in self.base_lrs
        ]


class ConstantLR(LRScheduler):
    r"""$\eta_t = \eta_0 \cdot$ ``factor`` for $t <$ ``total_iters``, then $\eta_0$: a constant warm-up."""

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._groups_lr()]
        if self.last_epoch != self.total_iters:
            return self._groups_lr()
        return [lr * (1.0 / self.factor) for lr in self._groups_lr()]

    def _get_closed_form_lr(self) -> list[float]:
        done = self.last_epoch >= self.total_iters
        return [base * (self.factor + done * (1 - self.factor)) for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    r"""$\eta_t = \eta_0 \cdot (1 - \min(t, T) / T)^{p}$: a polynomial decay to 0 in ``total_iters``
    $T$ epochs (``power`` $p$)."""

    def __init__(
        self,
        optimizer: Optimizer,
        total_iters: int = 5,
        power: float = 1.0,
        last_epoch: int = -1,
    ) -> None:
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, total = self.last_epoch, self.total_iters
        if t == 0 or t > total:
            return self._groups_lr()
        factor = ((1.0 - t / total) / (1.0 - (t - 1) / total)) ** self.power
        return [lr * factor for lr in self._groups_lr()]

    def _get_closed_form_lr(self) -> list[float]:
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * left**self.power for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    r"""SGDR (Loshchilov & Hutter): $\eta_t = \eta_{\min} + \tfrac12 (\eta_0 - \eta_{\min})
    (1 + \cos(\pi T_{cur} / T_i))$, restarting at $\eta_0$ every $T_i$ epochs, with
    $T_0$ = ``T_0`` and $T_{i+1} = T_i \cdot$ ``T_mult``."""

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,  # noqa: N803 - PyTorch's argument names
        T_mult: int = 1,  # noqa: N803
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if T_0 < 1 or T_mult < 1:
            raise ValueError(
                f"CosineAnnealingWarmRestarts: T_0 and T_mult must be >= 1, got {T_0}, {T_mult}"
            )
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        cos = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base - self.eta_min) * cos for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """One step (call it per epoch, or per batch with a fractional ``epoch``)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:  # a restart
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult**n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        self._step_count += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self._last_lr = self._groups_lr()


class _SchedulerOfSchedulers(LRScheduler):
    """What ChainedScheduler and SequentialLR share: their state holds each inner scheduler's."""

    _schedulers: list[LRScheduler]

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for scheduler, s in zip(self._schedulers, saved, strict=True):
            scheduler.load_state_dict(s)


class ChainedScheduler(_SchedulerOfSchedulers):
    """Step several schedulers together at every ``step()``: their (chainable) effects multiply,
    e.g. a ConstantLR warm-up and an ExponentialLR decay from the start."""

    def __init__(
        self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None
    ) -> None:
        if not schedulers:
            raise ValueError("ChainedScheduler: expected at least one scheduler")
        self.optimizer = optimizer if optimizer is not None else schedulers[0].optimizer
        for i, scheduler in enumerate(schedulers):
            if scheduler.optimizer is not self.optimizer:
                raise ValueError(
                    f"ChainedScheduler: scheduler {i} belongs to another optimizer than the others"
                )
        self._schedulers = list(schedulers)
        self._last_lr = self._groups_lr()

    def step(self, epoch: int | None = None) -> None:
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = self._groups_lr()


class SequentialLR(_SchedulerOfSchedulers):
    """Run ``schedulers[0]`` until ``milestones[0]``, then ``schedulers[1]`` (restarted at its
    epoch 0), and so on: e.g. a LinearLR warm-up followed by a cosine decay.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.optim.lr_scheduler import ExponentialLR, LinearLR, SequentialLR
        >>> from torchlight import nn, optim
        >>> opt = optim.SGD([nn.Parameter(tl.zeros(1))], lr=1.0)
        >>> warmup = LinearLR(opt, start_factor=0.5, total_iters=2)
        >>> decay = ExponentialLR(opt, gamma=0.5)
        >>> sched = SequentialLR(opt, [warmup, decay], milestones=[2])
        >>> [opt.param_groups[0]["lr"]] + [sched.step() or sched.get_last_lr()[0] for _ in range(4)]
        [0.5, 0.75, 1.0, 0.5, 0.25]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: Sequence[LRScheduler],
        milestones: Sequence[int],
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(self, optimizer)
        if len(schedulers) < 1 or len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR: expected one milestone fewer than schedulers, got "
                f"{len(schedulers)} scheduler(s) and {len(milestones)} milestone(s)"
            )
        for i, scheduler in enumerate(schedulers):
            if getattr(scheduler, "optimizer", None) is not optimizer:
                raise ValueError(
                    f"SequentialLR: scheduler {i} belongs to another optimizer than the one given"
                )
        self.optimizer = optimizer
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        # undo what the schedulers' constructors did, then start the first one again
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for scheduler in self._schedulers:
            scheduler.last_epoch -= 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self, epoch: int | None = None) -> None:
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler.step(0)  # the next scheduler starts at its own epoch 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class OneCycleLR(LRScheduler):
    r"""The 1cycle policy (Smith & Topin): the rate rises from ``max_lr / div_factor`` to ``max_lr``
    over the first ``pct_start`` of ``total_steps``, then anneals to
    ``max_lr / (div_factor * final_div_factor)``; momentum (or Adam's $\beta_1$) moves the
    opposite way between ``max_momentum`` and ``base_momentum``. Step it after every batch.

    Annealing from $a$ to $b$ at fraction $f$ of a phase: cosine $b + \tfrac12 (a - b)(1 + \cos \pi f)$,
    or linear $a + (b - a) f$.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(self, optimizer)
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if total_steps < 1:
            raise ValueError(f"OneCycleLR: total_steps must be positive, got {total_steps}")
        if not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}"
            )
        self.total_steps, self.anneal_strategy = total_steps, anneal_strategy
        up = float(pct_start * total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (2 * up, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        groups = optimizer.param_groups
        max_lrs = [max_lr] * len(groups) if isinstance(max_lr, (int, float)) else list(max_lr)
        if last_epoch == -1:
            for group, top in zip(groups, max_lrs, strict=True):
                group["initial_lr"] = group["lr"] = top / div_factor
                group["max_lr"], group["min_lr"] = top, group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "OneCycleLR: optimizer has neither 'momentum' nor 'betas' to cycle; pass "
                    "cycle_momentum=False"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for group in groups:
                    self._set_momentum(group, max_momentum)
                    group["max_momentum"], group["base_momentum"] = max_momentum, base_momentum
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"OneCycleLR: tried to step {step} times, but total_steps is {self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, (end_step, lr_a, lr_b, m_a, m_b) in enumerate(self._schedule_phases):
                if step <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[lr_a], group[lr_b], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m_a], group[m_b], pct))
                    break
                start_step = end_step
        return lrs


class ReduceLROnPlateau:
    """Multiply the rate by ``factor`` when a metric (e.g. validation loss) has not improved for
    ``patience`` epochs: call ``scheduler.step(val_loss)`` once per epoch.

    Args:
        mode: ``"min"`` (a loss) or ``"max"`` (an accuracy).
        factor: the multiplier, < 1.
        patience: epochs without improvement to wait before reducing.
        threshold: how much better counts as better: relatively (``threshold_mode="rel"``,
            ``best * (1 - threshold)`` in min mode) or absolutely (``"abs"``, ``best - threshold``).
        cooldown: epochs to wait after a reduction before counting bad epochs again.
        min_lr: a floor for the rate (one per group, or one for all).
        eps: a reduction smaller than this is skipped.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.optim.lr_scheduler import ReduceLROnPlateau
        >>> from torchlight import nn, optim
        >>> opt = optim.SGD([nn.Parameter(tl.zeros(1))], lr=1.0)
        >>> sched = ReduceLROnPlateau(opt, patience=1, factor=0.5)
        >>> for loss in [3.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0]:
        ...     sched.step(loss)
        >>> sched.get_last_lr()
        [0.25]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0.0,
        eps: float = 1e-8,
    ) -> None:
        _check_optimizer(self, optimizer)
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor}")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"ReduceLROnPlateau: mode must be 'min' or 'max' and threshold_mode 'rel' or "
                f"'abs', got {mode!r} and {threshold_mode!r}"
            )
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        self.min_lrs = [float(min_lr)] * n if isinstance(min_lr, (int, float)) else list(min_lr)
        if len(self.min_lrs) != n:
            raise ValueError(
                f"ReduceLROnPlateau: expected {n} min_lr values, got {len(self.min_lrs)}"
            )
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def is_better(self, current: float, best: float) -> bool:
        if self.mode == "min":
            if self.threshold_mode == "rel":
                return current < best * (1.0 - self.threshold)
            return current < best - self.threshold
        if self.threshold_mode == "rel":
            return current > best * (self.threshold + 1.0)
        return current > best + self.threshold

    def step(self, metrics: Any) -> None:
        """One epoch done, with this value of the watched metric."""
        current = float(metrics)
        self.last_epoch += 1
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            for group, floor in zip(self.optimizer.param_groups, self.min_lrs, strict=True):
                old = float(group["lr"])
                new = max(old * self.factor, floor)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return self._last_lr

    def state_dict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
