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

__all__ = ["backpropagate", "backward_steps", "grad", "seed", "topological_sort"]


def topological_sort(root: Variable, *more_roots: Variable) -> list[Variable]:
    """The tensors that lead to the roots and require grad, from the leaves to the roots: depth
    first, a node after its parents, with a stack of ``(node, iterator over its parents)`` (not
    recursion: a deep graph must not hit Python's recursion limit)."""
    order: list[Variable] = []
    seen: set[int] = set()
    stack: list[tuple[Any, Iterator[Variable]]] = [(None, iter((root, *more_roots)))]
    while stack:
        node, parents = stack[-1]
        for parent in parents:
            if parent.requires_grad and id(parent) not in seen:
                seen.add(id(parent))
                h = parent.history
                stack.append((parent, iter(h.recorded_parents() if h else ())))
                break  # visit parent's parents first; node's iterator resumes afterwards
        else:  # all of node's parents are in the order
            stack.pop()
            if node is not None:  # (the roots' placeholder)
                order.append(node)
    return order


def backward_steps(
    root: Variable, deriv: Any, more: Sequence[tuple[Variable, Any]] = ()
) -> Iterator[tuple[Any, Any, list[tuple[Any, Any]]]]:
    """The walk from the root (and ``more`` roots) to the leaves: ``(node, deriv, sends)``, its
    complete gradient and its chain rule's ``(parent, share)`` pairs. Every user of a node comes
    first in reverse topological order, so one pass suffices (backpropagate, grad, the viewer)."""
    derivs: dict[int, Any] = {}  # summed so far, by node
    for node, share in ((root, deriv), *more):
        derivs[id(node)] = derivs[id(node)] + share if id(node) in derivs else share
    for node in reversed(topological_sort(root, *[other for other, _ in more])):
        if (deriv := derivs.pop(id(node), None)) is None:  # (a backward returned None for it)
            continue  # no gradient reaches it
        for hook in node.hooks:  # Tensor.register_hook: its result (not None) replaces deriv
            deriv = deriv if (new := hook(deriv)) is None else seed(node, new, "a hook's result")
        sends = node.history.chain_rule(deriv) if node.history else []
        yield node, deriv, sends
        for parent, share in sends:
            derivs[id(parent)] = derivs[id(parent)] + share if id(parent) in derivs else share


def backpropagate(
    root: Variable, deriv: Any = None, retain_graph: bool = False, create_graph: bool = False
) -> None:
    """Send ``deriv`` (ones if omitted) from ``root`` to the leaves' ``.grad``; free the saved
    tensors unless ``retain_graph``; ``create_graph`` records the math (to differentiate again)."""
    with enable_grad() if create_graph else no_grad():
        for node, d, _ in backward_steps(root, seed(root, deriv)):
            if node.history is None or node.retains_grad:
                node.accumulate_grad(d)
            if node.history is not None and not retain_graph:
                node.history.ctx.release()


def seed(root: Variable, deriv: Any = None, what: str = "the gradient") -> Any:
    """The gradient a backward starts from: ``deriv`` as a tensor of ``root``'s shape, or ones."""
    deriv = root.new_ones(root.shape) if deriv is None else deriv
    deriv = deriv if hasattr(deriv, "requires_grad") else root.new_tensor(deriv)
    if deriv.shape != root.shape:
        raise ValueError(
            f"{what} has shape {tuple(deriv.shape)} but the tensor has shape {tuple(root.shape)}"
        )
    return deriv


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
        givens: tuple[Any, ...] = (None,) * len(outs)
    else:
        givens = tuple(grad_outputs) if isinstance(grad_outputs, (list, tuple)) else (grad_outputs,)
    if len(givens) != len(outs):
        raise ValueError(
            f"autograd.grad: got {len(givens)} grad_outputs for {len(outs)} outputs; "
            "give one per output (None for ones)"
        )
    for i, t in enumerate(ins):
        if t is None or not t.requires_grad:
            raise RuntimeError(
                f"autograd.grad: input {i} does not require grad, so no gradient is computed "
                "for it; create it with requires_grad=True"
            )
    roots = []
    for k, (out, given) in enumerate(zip(outs, givens, strict=True)):
        if out is None or not out.requires_grad:
            raise RuntimeError(
                f"autograd.grad: output {k} does not require grad and has no history: it does "
                "not depend on any tensor with requires_grad=True"
            )
        roots.append((out, seed(out, given, f"autograd.grad: grad_outputs[{k}]")))
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
