r"""Gradient clipping: call between ``loss.backward()`` and ``optimizer.step()``.

Example:
    >>> import torchlight as tl
    >>> from torchlight.nn.utils import clip_grad_norm_
    >>> from torchlight import nn
    >>> w = nn.Parameter(tl.zeros(2))
    >>> w.grad = tl.tensor([3.0, 4.0])
    >>> clip_grad_norm_([w], max_norm=1.0)  # returns the norm before clipping
    tensor(5.)
    >>> w.grad
    tensor([0.6000, 0.8000])
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from torchlight.autograd import no_grad
from torchlight.creation import stack, tensor
from torchlight.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _with_grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p for p in params if p.grad is not None]


@no_grad()
def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
) -> Tensor:
    r"""Scale all gradients together by $\min(1, \frac{\text{max\_norm}}{\lVert g \rVert + 10^{-6}})$,
    where $\lVert g \rVert$ is the ``norm_type``-norm of all gradients joined into one vector
    (``inf``: the largest $|g_i|$). Changes ``p.grad`` in place.

    Returns:
        The total norm before clipping, a 0-d tensor.
    """
    grads = [p.grad for p in _with_grads(parameters) if p.grad is not None]
    if not grads:
        return tensor(0.0)
    if norm_type == math.inf:
        norms = [g.abs().max() for g in grads]
        total = stack(norms).max()
    else:
        norms = [(g.abs() ** norm_type).sum() for g in grads]
        total = stack(norms).sum() ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(
            f"clip_grad_norm_: the total {norm_type}-norm of the gradients is {total.item()}, so "
            "they cannot be clipped; pass error_if_nonfinite=False to clip anyway"
        )
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale.to(g.dtype))
    return total


@no_grad()
def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    r"""Clamp every gradient element to $[-c, c]$ (``clip_value`` $c$), in place."""
    if clip_value < 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    for p in _with_grads(parameters):
        grad = p.grad
        if grad is not None:
            grad.copy_(grad.clamp(-clip_value, clip_value))
