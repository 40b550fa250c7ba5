r"""Replay ``backward()`` one node at a time, without touching anybody's ``.grad``.

The viewer needs the gradient of *every* node, and the order in which they become complete.
It consumes the same walk as ``autograd.backpropagate`` (``autograd.backward_steps``), but keeps
a copy of every step's gradient instead of accumulating into the tensors, and releases nothing.
The user's tensors are left as they were.

In reverse topological order a node's gradient is complete when its turn comes, because every
node that uses it came earlier and has already sent its share:

$$\frac{\partial L}{\partial x} = \sum_{f \text{ uses } x}
  \frac{\partial L}{\partial f} \cdot \frac{\partial f}{\partial x}$$
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchlight.autograd import backward_steps, no_grad, seed, topological_sort
from torchlight.viz.graph import Graph

__all__ = ["BackwardReplay", "BackwardStep", "replay_backward"]


@dataclass
class BackwardStep:
    r"""One step of backward: ``node``'s gradient is complete and is passed to its inputs.

    Attributes:
        node: the tensor node whose gradient $\partial L / \partial\,\mathrm{node}$ is now complete.
        grad: that gradient (a Tensor).
        fn: the Function node that made ``node`` (``""`` for a leaf: the gradient stops here).
        sends: ``(input node id, slot, contribution)`` for each input of ``fn``: what
            ``fn``'s chain rule adds to that input's gradient.
    """

    node: str
    grad: Any
    fn: str = ""
    sends: list[tuple[str, int, Any]] = field(default_factory=list)


@dataclass
class BackwardReplay:
    """Every step of one backward pass over a traced graph.

    Attributes:
        steps: in the order backward visits the nodes (root first).
        error: why the replay stopped early (``""`` when it ran to the end).
    """

    steps: list[BackwardStep]
    error: str = ""

    def __len__(self) -> int:
        return len(self.steps)

    def grads_at(self, step: int) -> dict[str, Any]:
        """The complete gradients after the first ``step`` steps, by node id."""
        return {s.node: s.grad for s in self.steps[: max(step, 0)]}

    def step_of(self, node_id: str) -> int | None:
        """The step (1-based) at which ``node_id``'s gradient is complete, or None if never."""
        for i, s in enumerate(self.steps):
            if s.node == node_id or s.fn == node_id:
                return i + 1
        return None


def _freed_message(fn_name: str) -> str:
    return (
        f"The values {fn_name} saved for backward were freed by an earlier .backward() call, so "
        "the gradients of the inner nodes cannot be replayed. Draw the graph before calling "
        "backward(), or call backward(retain_graph=True), to step through backward."
    )


def replay_backward(graph: Graph, gradient: Any = None) -> BackwardReplay:
    r"""Run backward over ``graph`` step by step, collecting every node's gradient.

    Args:
        graph: made by :func:`~torchlight.viz.graph.trace`.
        gradient: $\partial L / \partial\,\mathrm{root}$; ones of the root's shape when omitted
            (what ``root.backward()`` uses).

    Returns:
        A :class:`BackwardReplay`. If a Function's saved values were already freed, or its
        backward raised, ``error`` says so and ``steps`` holds what ran before.
    """
    root = graph.node(graph.root).tensor
    ids = {id(n.tensor): n.id for n in graph.nodes if n.is_tensor}
    fn_of = {e.dst: e.src for e in graph.edges if e.slot == -1}
    if not root.requires_grad:
        return BackwardReplay([], "this tensor does not require grad: there is no backward to show")
    start = seed(root, gradient)  # as backward() seeds it
    order = topological_sort(root)
    for tensor in order:
        if tensor.history is not None and tensor.history.ctx._freed:
            return BackwardReplay([], _freed_message(tensor.history.last_fn.__name__))

    steps: list[BackwardStep] = []
    walk = backward_steps(root, start)
    with no_grad():
        while True:
            try:
                tensor, grad, sends = next(walk)
            except StopIteration:
                return BackwardReplay(steps)
            except Exception as error:  # a user's Function: report it, keep what ran so far
                name = _failing_function(steps, ids, order)
                return BackwardReplay(
                    steps, f"{name}.backward raised {type(error).__name__}: {error}"
                )
            step = BackwardStep(ids[id(tensor)], grad.clone())
            if tensor.history is not None:
                step.fn = fn_of[step.node]
                step.sends = _with_slots(tensor.history.recorded_parents(), sends, ids)
            steps.append(step)


def _failing_function(steps: list[BackwardStep], ids: dict[int, str], order: list[Any]) -> str:
    """The Function whose backward raised: the walk's next node, the first (in its order) that
    has received a gradient but was not stepped through."""
    done = {s.node for s in steps}
    received = {ids[id(order[-1])]} | {node for s in steps for node, _, _ in s.sends}
    for tensor in reversed(order):
        node = ids[id(tensor)]
        if node in received and node not in done and tensor.history is not None:
            return tensor.history.last_fn.__name__
    return "a Function"


def _with_slots(
    inputs: tuple[Any, ...], pairs: list[tuple[Any, Any]], ids: dict[int, str]
) -> list[tuple[str, int, Any]]:
    """Match chain_rule's ``(input, grad)`` pairs to input positions (``a + a`` has two)."""
    sends = []
    position = 0
    for slot, tensor in enumerate(inputs):
        if position < len(pairs) and pairs[position][0] is tensor:
            sends.append((ids[id(tensor)], slot, pairs[position][1].clone()))
            position += 1
    return sends
