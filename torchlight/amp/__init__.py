"""``torch.amp`` (and ``torch.cuda.amp``): ``autocast`` and ``GradScaler``.

``GradScaler`` really scales: ``scale(loss)`` multiplies the loss by the scale, ``step``
unscales the gradients, skips the update when one of them is inf/nan and ``update`` then
halves the scale (and doubles it after ``growth_interval`` clean steps), as PyTorch's. With a
float16 model that keeps small gradients from underflowing; in float32/float64 it changes
nothing but the skipped steps. As PyTorch's, ``torch.cuda.amp.GradScaler()`` without a GPU
warns and disables itself (then every method passes through).

``autocast`` needs half-precision storage (float16/bfloat16), which torchlight does not have
yet: ``autocast(enabled=False)`` is a no-op (what scripts pass on the CPU), ``autocast(...)``
enabled raises ``NotImplementedError`` naming the missing piece, and a float32/float64 target
dtype warns and disables itself, as PyTorch CPU does for dtypes autocast does not support.

Example:
    >>> import torchlight as tl
    >>> from torchlight.amp import GradScaler
    >>> scaler = GradScaler("cpu", init_scale=8.0)
    >>> w = tl.nn.Parameter(tl.tensor([1.0]))
    >>> opt = tl.optim.SGD([w], lr=0.5)
    >>> scaler.scale((w * w).sum()).backward(); w.grad  # the gradient of 8 * w^2
    tensor([16.])
    >>> scaler.step(opt); scaler.update(); w  # unscaled to 2 before the step
    Parameter containing:
    tensor([0.], requires_grad=True)
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["GradScaler", "autocast"]


class autocast:  # noqa: N801 - PyTorch's name
    """``with autocast(device_type, dtype=None, enabled=True):``; see the module's docstring."""

    def __init__(
        self,
        device_type: str = "cuda",
        dtype: Any = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        self.device_type, self.enabled = device_type, enabled
        self.fast_dtype = dtype
        if not enabled:
            return
        name = getattr(dtype, "name", None if dtype is None else str(dtype))
        if name in ("float32", "float64"):
            warnings.warn(
                f"In {device_type} autocast, but the target dtype is not supported ({name}). Disabling autocast.",
                UserWarning,
                stacklevel=2,
            )
            self.enabled = False
            return
        raise NotImplementedError(
            f"autocast(device_type={device_type!r}, dtype={name or 'the default half dtype'}): torchlight "
            "has no float16/bfloat16 storage yet, so it cannot run ops in half precision. Pass "
            "enabled=False (or leave autocast out) to run in float32/float64."
        )

    def __enter__(self) -> autocast:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapped


class GradScaler:
    """Loss scaling with PyTorch's rules (``scale``, ``unscale_``, ``step``, ``update``...)."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        from torchlight import cuda

        if enabled and str(device).startswith("cuda") and not cuda.is_available():
            warnings.warn(
                "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                UserWarning,
                stacklevel=2,
            )
            enabled = False
        if growth_factor <= 1.0 or not 0.0 < backoff_factor < 1.0:
            raise ValueError("GradScaler: growth_factor must be > 1 and backoff_factor in (0, 1)")
        self._enabled, self._scale, self._growth_tracker = enabled, float(init_scale), 0
        self._growth_factor, self._backoff_factor = growth_factor, backoff_factor
        self._growth_interval = growth_interval
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def scale(self, outputs: Any) -> Any:
        """``outputs * scale`` (a tensor, or a list/tuple of them)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def _state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer.setdefault(
            id(optimizer), {"unscaled": False, "found_inf": False}
        )

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place (once per step)."""
        if not self._enabled:
            return
        from torchlight.autograd import no_grad

        state = self._state(optimizer)
        if state["unscaled"]:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        inverse = 1.0 / self._scale
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.mul_(inverse)
                        if not np.isfinite(p.grad.numpy()).all():
                            state["found_inf"] = True
        state["unscaled"] = True

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscale (if not yet), then ``optimizer.step()`` unless a gradient is inf/nan."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        state = self._state(optimizer)
        if not state["unscaled"]:
            self.unscale_(optimizer)
        if state["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | None = None) -> None:
        """Back off after an inf/nan step, grow after ``growth_interval`` clean ones."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif any(s["found_inf"] for s in self._per_optimizer.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {
            "scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker,
        }  # fmt: skip

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        self._scale = float(state_dict["scale"])
        self._growth_factor, self._backoff_factor = (
            state_dict["growth_factor"],
            state_dict["backoff_factor"],
        )
        self._growth_interval, self._growth_tracker = (
            state_dict["growth_interval"],
            state_dict["_growth_tracker"],
        )
