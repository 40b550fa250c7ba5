"""Walk a tensor's computation graph into plain nodes and edges that can be drawn.

A graph has two kinds of nodes, as in the engine itself:

- **tensor nodes**: leaves (made by the user), constants (leaves that need no gradient, such
  as the ``2`` in ``x ** 2``), intermediates (made by a Function) and the root;
- **Function nodes**: one per ``History``, labelled with ``history.last_fn``'s name.

Edges follow the forward data flow: ``input tensor -> Function -> output tensor``. Gradients
flow the other way during ``backward()``.

Example:
    >>> import torchlight as tl
    >>> from torchlight.viz.graph import trace
    >>> a = tl.tensor([1.0, 2.0], requires_grad=True)
    >>> g = trace((a + a) * a, names={"a": a})
    >>> [n.label for n in g.nodes]
    ['a', 'Add', 't2', 'Mul', 'root']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Edge", "Graph", "Node", "format_number", "summarize", "trace"]

# The kinds of node, each drawn in its own colour (see svg.py).
LEAF = "leaf"  # a tensor the user made with requires_grad=True: gets a .grad
CONSTANT = "constant"  # a leaf that needs no gradient (data, the 2 in x ** 2)
INTERMEDIATE = "intermediate"  # a tensor made by a Function
ROOT = "root"  # the tensor whose graph is drawn (where backward starts)
FUNCTION = "function"  # one History: the Function applied, with its ctx and inputs
TENSOR_KINDS = (LEAF, CONSTANT, INTERMEDIATE, ROOT)


@dataclass
class Node:
    """One box in the drawing.

    Attributes:
        id: a short stable identifier (``"t0"`` for tensors, ``"f0"`` for Functions).
        kind: one of ``leaf``, ``constant``, ``intermediate``, ``root``, ``function``.
        label: what the box is called: ``tensor.name``, a name from ``names=``, or ``t<k>``.
        shape: the tensor's shape (``()`` for a Function node).
        dtype: the dtype's name (``""`` for a Function node).
        value: a one-line summary of the values (empty for a Function node).
        fn_name: the Function's name (for a Function node, or the Function that made a tensor).
        tensor: the traced tensor itself (``None`` for a Function node).
    """

    id: str
    kind: str
    label: str
    shape: tuple[int, ...] = ()
    dtype: str = ""
    value: str = ""
    fn_name: str = ""
    tensor: Any = field(default=None, repr=False, compare=False)

    @property
    def is_tensor(self) -> bool:
        return self.kind != FUNCTION


@dataclass(frozen=True)
class Edge:
    """``src -> dst`` in the direction of the forward pass.

    ``slot`` is the position of the input among the Function's inputs (``Mul(b, a)``: ``b`` is
    slot 0, ``a`` slot 1); it is ``-1`` on the edge from a Function to the tensor it made.
    """

    src: str
    dst: str
    slot: int = -1


@dataclass
class Graph:
    """The nodes (inputs first, root last: a topological order) and edges of one graph."""

    nodes: list[Node]
    edges: list[Edge]
    root: str

    def node(self, node_id: str) -> Node:
        """The node called ``node_id``."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node {node_id!r} in this graph; ids are {[n.id for n in self.nodes]}")

    def id_of(self, tensor: Any) -> str:
        """The id of the node that draws ``tensor`` (compared by identity)."""
        for n in self.nodes:
            if n.tensor is tensor:
                return n.id
        raise KeyError("that tensor is not part of this graph")

    def inputs_of(self, node_id: str) -> list[Edge]:
        """Edges into ``node_id``, in slot order."""
        return sorted((e for e in self.edges if e.dst == node_id), key=lambda e: e.slot)

    def outputs_of(self, node_id: str) -> list[Edge]:
        """Edges out of ``node_id``."""
        return [e for e in self.edges if e.src == node_id]

    def path_to_root(self, node_id: str) -> tuple[set[str], set[tuple[str, str]]]:
        """Nodes and edges on every path from ``node_id`` to the root (what its gradient crosses)."""
        successors: dict[str, list[str]] = {}
        for e in self.edges:
            successors.setdefault(e.src, []).append(e.dst)
        # Nodes that reach the root: walk the reversed edges from the root.
        predecessors: dict[str, list[str]] = {}
        for e in self.edges:
            predecessors.setdefault(e.dst, []).append(e.src)
        reaches_root = {self.root}
        stack = [self.root]
        while stack:
            for p in predecessors.get(stack.pop(), []):
                if p not in reaches_root:
                    reaches_root.add(p)
                    stack.append(p)
        if node_id not in reaches_root:
            return set(), set()
        nodes, edges, stack = {node_id}, set(), [node_id]
        while stack:
            current = stack.pop()
            for s in successors.get(current, []):
                if s in reaches_root:
                    edges.add((current, s))
                    if s not in nodes:
                        nodes.add(s)
                        stack.append(s)
        return nodes, edges


def format_number(value: float) -> str:
    """``4.`` for whole numbers (as PyTorch prints them), else 4 significant digits."""
    if not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    if value == int(value) and abs(value) < 1e6:
        return f"{value:.0f}."
    return f"{value:.4g}"


def summarize(values: Any, max_items: int = 4) -> str:
    """A one-line summary of an array: ``[4., 8.]``, ``2.5``, or ``mean 0.1, std 1 (64×10)``."""
    arr = np.asarray(values)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if arr.size == 0:
        return "[] (empty)"
    if arr.ndim == 0:
        return format_number(float(arr))
    if arr.size <= max_items:
        nested = _nested(arr)  # the brackets show the shape; flat when that gets too long
        return nested if len(nested) <= 36 else _nested(arr.reshape(-1))
    floats = arr.astype(np.float64)
    return f"mean {format_number(float(floats.mean()))}, std {format_number(float(floats.std()))}"


def _nested(arr: np.ndarray) -> str:
    """``[[1., 2.], [3., 4.]]``: the brackets show the shape, as in a printed tensor."""
    if arr.ndim == 0:
        return format_number(float(arr))
    return "[" + ", ".join(_nested(row) for row in arr) + "]"


def _all_tensors(root: Any) -> list[Any]:
    """Every tensor that leads to ``root``, inputs first (iterative DFS, like topological_sort).

    Unlike ``autograd.topological_sort`` this keeps tensors that need no gradient, because a
    student should see the constant ``2`` in ``x ** 2`` too.
    """
    order: list[Any] = []
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        tensor, children_done = stack.pop()
        if children_done:
            order.append(tensor)
            continue
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        stack.append((tensor, True))
        if tensor.history is not None:
            for parent in reversed(tensor.history.parents):
                if id(parent) not in seen:
                    stack.append((parent, False))
    return order


def trace(
    root: Any,
    names: Mapping[str, Any] | None = None,
    show_constants: bool = True,
    max_nodes: int = 5000,
) -> Graph:
    """The computation graph of ``root`` as plain :class:`Node` and :class:`Edge` lists.

    Args:
        root: the tensor whose graph to draw (usually a loss).
        names: labels for tensors, e.g. ``{"a": a, "b": b}`` or ``locals()`` in a notebook;
            entries that are not tensors are ignored. ``tensor.name`` wins over ``names``.
        show_constants: also draw tensors that need no gradient (data, the ``2`` in ``x ** 2``).
        max_nodes: refuse larger graphs with a message (drawing 100,000 boxes helps nobody).

    Raises:
        TypeError: ``root`` is not a tensor.
        ValueError: the graph has more than ``max_nodes`` nodes.
    """
    if not hasattr(root, "history") or not hasattr(root, "requires_grad"):
        raise TypeError(
            f"trace() draws the graph of a torchlight Tensor, got {type(root).__name__}; "
            "pass the tensor at the end of the computation, e.g. the loss"
        )
    labels: dict[int, str] = {}
    for key, value in (names or {}).items():
        if hasattr(value, "history") and not key.startswith("_"):
            labels.setdefault(id(value), key)

    tensors = _all_tensors(root)
    if not show_constants:
        tensors = [t for t in tensors if t.requires_grad or t is root]
    n_functions = sum(1 for t in tensors if t.history is not None)
    if len(tensors) + n_functions > max_nodes:
        raise ValueError(
            f"this graph has {len(tensors) + n_functions} nodes, more than max_nodes={max_nodes}; "
            "draw a smaller piece of it (e.g. one layer's output) or raise max_nodes"
        )

    nodes: list[Node] = []
    edges: list[Edge] = []
    tensor_ids: dict[int, str] = {}
    for tensor in tensors:
        history = tensor.history
        fn_id = ""
        if history is not None:
            fn_id = f"f{len(nodes)}"
            fn_name = history.last_fn.__name__
            nodes.append(Node(fn_id, FUNCTION, fn_name, fn_name=fn_name))
            for slot, parent in enumerate(history.parents):
                if id(parent) in tensor_ids:  # absent only when constants are hidden
                    edges.append(Edge(tensor_ids[id(parent)], fn_id, slot))
        node_id = f"t{len(nodes)}"
        tensor_ids[id(tensor)] = node_id
        if tensor is root:
            kind = ROOT
        elif history is not None:
            kind = INTERMEDIATE
        else:
            kind = LEAF if tensor.requires_grad else CONSTANT
        values = tensor.backend.to_numpy(tensor.storage)
        label = getattr(tensor, "name", None) or labels.get(id(tensor))
        if label is None:
            if kind == ROOT:
                label = "root"
            elif kind == CONSTANT and np.size(values) == 1:
                label = "const"
            else:
                label = node_id
        nodes.append(
            Node(
                node_id,
                kind,
                str(label),
                shape=tuple(tensor.shape),
                dtype=tensor.dtype.name,
                value=summarize(values),
                fn_name=history.last_fn.__name__ if history is not None else "",
                tensor=tensor,
            )
        )
        if fn_id:
            edges.append(Edge(fn_id, node_id))
    return Graph(nodes, edges, tensor_ids[id(root)])
