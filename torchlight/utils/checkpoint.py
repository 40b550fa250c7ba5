r"""Activation checkpointing, PyTorch's ``torch.utils.checkpoint.checkpoint``: trade compute for
memory.

Backward needs what forward computed: every op saves its inputs (or outputs) for its gradient,
so a network's training memory grows with its depth. ``checkpoint(fn, *inputs)`` runs ``fn``
*without* recording a graph and saves only ``inputs``; its backward runs ``fn`` again, this
time recording, and backpropagates through that fresh graph. The activations inside ``fn``
live only while its own backward runs: the memory of a stack of $n$ checkpointed blocks is
that of their $n$ inputs plus one block's activations, at the price of one more forward pass.

Parameters that ``fn`` uses without receiving them (a Module's weights) get their gradients
too: the recomputed graph reaches them, as in PyTorch's (reentrant) checkpoint. As there, at
least one input must require grad, or the result has no history to backpropagate through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torchlight.autograd import Function, enable_grad

__all__ = ["CheckpointFunction", "checkpoint"]


class CheckpointFunction(Function):
    """``forward(ctx, fn, *inputs)`` keeps only ``inputs``; ``backward`` recomputes ``fn``."""

    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Any], *inputs: Any) -> Any:
        ctx.fn = fn  # a plain attribute: the function, not any tensor it computes
        ctx.save_for_backward(*inputs)
        return fn(*inputs)  # (apply runs forward under no_grad: no graph is kept)

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> tuple[Any, ...]:
        inputs = tuple(x.detach().requires_grad_(x.requires_grad) for x in ctx.saved_tensors)
        with enable_grad():
            out = ctx.fn(*inputs)  # forward again, recorded this time
            out.backward(grad_output)  # (reaches fn's own parameters as well)
        return (None, *(x.grad for x in inputs))


def checkpoint(function: Callable[..., Any], *args: Any, use_reentrant: bool | None = None) -> Any:
    r"""``function(*args)``, computed without keeping its activations for backward, which
    recomputes them (PyTorch's ``torch.utils.checkpoint.checkpoint``; ``use_reentrant`` is
    accepted for PyTorch's scripts and ignored). ``args`` are tensors; bind anything else into
    ``function`` (a closure or ``functools.partial``).

    Shape: whatever ``function`` returns (one Tensor).

    Example:
        >>> import torchlight as tl
        >>> from torchlight.utils.checkpoint import checkpoint
        >>> layer = tl.nn.Linear(3, 3)
        >>> x = tl.randn(2, 3, requires_grad=True)
        >>> checkpoint(lambda t: layer(t).tanh(), x).sum().backward()
        >>> x.grad.shape, layer.weight.grad.shape
        ((2, 3), (3, 3))
    """
    return CheckpointFunction.apply(function, *args)
