r"""The backward walk: order the graph (:func:`topological_sort`), then apply the chain rule
from the root to the leaves (:func:`backpropagate`, :func:`grad`).

:func:`grad` returns gradients instead of accumulating them into ``.grad``. The backward
formulas are tensor math, so with ``create_graph=True`` the engine records them like any other
ops, and the gradients can be differentiated again (higher-order gradients, checked by
:func:`~torchlight.autograd.gradcheck.gradgradcheck`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from torchlight.autograd.function import Variable
from torchlight.autograd.grad_mode import enable_grad, no_grad

__all__ = ["backpropagate", "backward_steps", "grad", "topological_sort"]


def topological_sort(root: Variable, *more_roots: Variable) -> list[Variable]:
    """All tensors that lead to ``root`` (and ``more_roots``) and require grad, ordered from the
    leaves to the roots.

    Depth-first search, iterative (a deep graph must not hit Python's recursion limit): the
    stack holds each node being visited with an iterator over its inputs, and a node joins the
    order once every input that requires grad already has. A leaf joins as soon as it is met.
    """
    order: list[Variable] = []
    seen: set[int] = set()
    for start in (root, *more_roots):
        if not start.requires_grad or id(start) in seen:
            continue
        seen.add(id(start))
        if start.history is None:
            order.append(start)
            continue
        stack: list[tuple[Variable, Iterator[Variable]]] = [
            (start, iter(start.history.recorded_inputs()))
        ]
        while stack:
            node, inputs = stack[-1]
            for parent in inputs:
                if parent.requires_grad and id(parent) not in seen:
                    seen.add(id(parent))
                    if parent.history is None:
                        order.append(parent)  # a leaf: nothing comes before it
                    else:
                        stack.append((parent, iter(parent.history.recorded_inputs())))
                        break  # visit parent's inputs first; node's iterator resumes afterwards
            else:  # all of node's inputs are in the order
                stack.pop()
                order.append(node)
    return order


def backward_steps(
    root: Variable, grad: Any, more: Sequence[tuple[Variable, Any]] = ()
) -> Iterator[tuple[Any, Any, list[tuple[Any, Any]]]]:
    """Walk the graph from ``root`` (whose gradient is ``grad``) back to the leaves, yielding
    ``(node, grad, sends)`` for each node: its complete gradient, and the ``(input, share)``
    pairs its chain rule passes on (none for a leaf, where the gradient stops). ``more`` adds
    further ``(root, grad)`` pairs (``autograd.grad`` of several outputs).

    In reverse topological order a node's gradient is complete when its turn comes: every node
    that uses it came earlier and has already sent its share. So one pass suffices: take the
    node's summed gradient, apply its chain rule, and add each share to its input's gradient.
    This is the one backward loop: ``backpropagate`` and the graph viewer's replay consume it.
    With recording on (``create_graph``) its sums and chain rules are recorded too.
    """
    grads: dict[int, Any] = {id(root): grad}  # summed so far, by node
    for other, other_grad in more:
        key = id(other)
        grads[key] = grads[key] + other_grad if key in grads else other_grad
    for node in reversed(topological_sort(root, *[other for other, _ in more])):
        grad = grads.pop(id(node), None)
        if grad is None:  # no gradient reaches it (a backward returned None for it)
            continue
        for hook in node._hooks:  # Tensor.register_hook: may replace the gradient
            changed = hook(grad)
            grad = grad if changed is None else node._lift(changed)
        sends = [] if node.history is None else node.history.chain_rule(grad, node)
        yield node, grad, sends
        for parent, share in sends:
            key = id(parent)
            grads[key] = grads[key] + share if key in grads else share


def backpropagate(
    root: Variable, deriv: Any, retain_graph: bool = False, create_graph: bool = False
) -> None:
    """Compute the gradients from ``root`` back: leaves accumulate them into ``.grad``.

    Saved values are released as each node is done, unless ``retain_graph``. With
    ``create_graph`` the backward formulas are recorded (they are tensor math), so the
    gradients have a history of their own and can be differentiated again.
    """
    with enable_grad() if create_graph else no_grad():  # backward's ops recorded or not
        for node, grad, _ in backward_steps(root, deriv):
            if node.history is None or node._retains_grad:
                node._accumulate_grad(grad)
            if node.history is not None and not retain_graph:
                node.history.ctx.release()


def _as_tuple(value: Any, what: str) -> tuple[Any, ...]:
    items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    for i, t in enumerate(items):
        if t is not None and not hasattr(t, "requires_grad"):
            raise TypeError(
                f"autograd.grad: {what} must be tensors (or a list/tuple of them), "
                f"got a {type(t).__name__} at position {i}"
            )
    return items


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple[Any, ...]:
    r"""The gradients $\sum_k v_k \cdot \partial\,\mathrm{outputs}_k / \partial\,\mathrm{inputs}_i$,
    returned as a tuple (one per input) instead of accumulated into ``.grad`` (PyTorch's
    ``torch.autograd.grad``).

    Args:
        outputs: a tensor, or a list/tuple of tensors, to differentiate.
        inputs: a tensor, or a list/tuple of tensors (leaves or not), to differentiate by.
        grad_outputs: $v_k$, one per output (``None`` entries, or ``None`` for all: ones of
            the output's shape, as ``backward()`` seeds them).
        retain_graph: keep the saved values for another backward; defaults to ``create_graph``.
        create_graph: record the backward formulas, so the returned gradients can be
            differentiated again (second derivatives, Hessian-vector products).
        allow_unused: return ``None`` for an input the outputs do not depend on, instead of
            raising.

    Returns:
        One gradient per input, of the input's shape (``None`` for an unused input).

    Example:
        >>> import torchlight as tl
        >>> x = tl.tensor([1.0, 2.0], requires_grad=True)
        >>> (g,) = tl.autograd.grad((x**3).sum(), x, create_graph=True); g
        tensor([ 3., 12.], grad_fn=<Mul>)
        >>> tl.autograd.grad(g.sum(), x)  # d2/dx2 x**3 = 6x
        (tensor([ 6., 12.]),)
    """
    outs = _as_tuple(outputs, "outputs")
    ins = _as_tuple(inputs, "inputs")
    if not outs or not ins:
        raise ValueError("autograd.grad: outputs and inputs must each hold at least one tensor")
    if grad_outputs is None:
        seeds: tuple[Any, ...] = (None,) * len(outs)
    else:
        seeds = tuple(grad_outputs) if isinstance(grad_outputs, (list, tuple)) else (grad_outputs,)
    if len(seeds) != len(outs):
        raise ValueError(
            f"autograd.grad: got {len(seeds)} grad_outputs for {len(outs)} outputs; "
            "give one per output (None for ones)"
        )
    for i, t in enumerate(ins):
        if t is None or not t.requires_grad:
            raise RuntimeError(
                f"autograd.grad: input {i} does not require grad, so no gradient is computed "
                "for it; create it with requires_grad=True"
            )
    roots = []
    for k, (out, seed) in enumerate(zip(outs, seeds, strict=True)):
        if out is None or not out.requires_grad:
            raise RuntimeError(
                f"autograd.grad: output {k} does not require grad and has no history: it does "
                "not depend on any tensor with requires_grad=True"
            )
        roots.append((out, _seed(out, seed, f"grad_outputs[{k}]")))
    keep = create_graph if retain_graph is None else retain_graph
    wanted: dict[int, list[int]] = {}  # input positions by tensor (one may be asked twice)
    for i, t in enumerate(ins):
        wanted.setdefault(id(t), []).append(i)
    found: list[Any] = [None] * len(ins)
    with enable_grad() if create_graph else no_grad():
        (root, first), *more = roots
        for node, g, _ in backward_steps(root, first, more):
            for i in wanted.get(id(node), ()):
                found[i] = g
            if node.history is not None and not keep:
                node.history.ctx.release()
    for i, g in enumerate(found):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"autograd.grad: input {i} (shape {tuple(ins[i].shape)}) was not used to compute "
                "the outputs, so it has no gradient; pass allow_unused=True to get None for it"
            )
    return tuple(found)


def _seed(out: Any, seed: Any, what: str) -> Any:
    """The gradient a backward starts from: ``seed`` as a tensor of ``out``'s shape, or ones."""
    if seed is None:
        return out._lift(1.0).expand(out.shape).detach().contiguous()
    seed = out._lift(seed)
    if seed.shape != out.shape:
        raise ValueError(
            f"{what} has shape {tuple(seed.shape)} but the output has shape {tuple(out.shape)}; "
            "they must match"
        )
    return seed
