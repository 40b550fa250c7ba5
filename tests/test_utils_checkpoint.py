"""Activation checkpointing (``torchlight.utils.checkpoint``): the same gradients as without it,
for the inputs and for the parameters the function uses; only the inputs are saved; the
function runs again in backward; and the memory it keeps for backward is smaller."""

from __future__ import annotations

import numpy as np

import torchlight as tl
from torchlight.utils.checkpoint import CheckpointFunction, checkpoint


def _stack(depth: int, width: int) -> list[tl.nn.Linear]:
    tl.manual_seed(0)
    return [tl.nn.Linear(width, width) for _ in range(depth)]


def _run(layers: list[tl.nn.Linear], x: tl.Tensor, every: bool, size: int = 1) -> tl.Tensor:
    """The stack of tanh layers, each segment of ``size`` layers checkpointed (``every``)."""

    def segment(t: tl.Tensor, part: list[tl.nn.Linear]) -> tl.Tensor:
        for layer in part:
            t = layer(t).tanh()
        return t

    for start in range(0, len(layers), size):
        part = layers[start : start + size]
        block = lambda t, part=part: segment(t, part)  # noqa: E731
        x = checkpoint(block, x) if every else block(x)
    return x


def test_same_gradients_for_inputs_and_parameters() -> None:
    layers = _stack(4, 5)
    x = tl.randn(3, 5, requires_grad=True)
    grad_output = tl.randn(3, 5)
    _run(layers, x, every=True).backward(grad_output)
    with_checkpoint = [x.grad.numpy().copy()] + [l.weight.grad.numpy().copy() for l in layers]
    x.zero_grad_()
    for layer in layers:
        layer.zero_grad()
    _run(layers, x, every=False).backward(grad_output)
    plain = [x.grad.numpy()] + [l.weight.grad.numpy() for l in layers]
    for a, b in zip(with_checkpoint, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_saves_only_its_inputs_and_recomputes_in_backward() -> None:
    calls = []

    def block(x: tl.Tensor, w: tl.Tensor) -> tl.Tensor:
        calls.append(tl.is_grad_enabled())
        return (x @ w).tanh()

    x, w = tl.randn(2, 3, requires_grad=True), tl.randn(3, 4, requires_grad=True)
    out = checkpoint(block, x, w)
    ctx = out.history.ctx
    assert out.history.last_fn is CheckpointFunction
    assert len(ctx.saved_tensors) == 2 and ctx.saved_tensors[0] is x and ctx.saved_tensors[1] is w
    assert calls == [False]  # forward: no graph recorded
    out.sum().backward()
    assert calls == [False, True]  # backward: forward again, recorded
    assert tl.autograd.gradcheck(lambda a, b: checkpoint(block, a, b), x, w)


def _saved_elements(root: tl.Tensor) -> int:
    """How many numbers the graph under ``root`` keeps for backward (its saved tensors)."""
    seen, todo, total = set(), [root], 0
    while todo:
        t = todo.pop()
        if t.history is None or id(t) in seen:
            continue
        seen.add(id(t))
        for saved in t.history.ctx._saved:
            total += int(np.prod(getattr(saved, "shape", ()) or (1,)))
        todo += [p for p in t.history.parents if hasattr(p, "history")]
    return total


def test_keeps_less_for_backward() -> None:
    layers = _stack(8, 16)
    x = tl.randn(32, 16, requires_grad=True)
    plain = _saved_elements(_run(layers, x, every=False))
    kept = _saved_elements(_run(layers, x, every=True, size=4))  # two segments: two inputs
    assert kept == 2 * 32 * 16 and plain > 4 * kept, (kept, plain)
