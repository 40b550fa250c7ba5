r"""Graphs and scalar functions built from a description, for the engine assignment's checks.

This file runs *inside* the sandbox, next to student code, like :mod:`runners`: it holds no
reference engine and no expected value. The grader describes a computation graph as data
(leaves and ops, by index), this builds it from torchlight's ops, hands it to the student's
``topological_sort`` or ``backpropagate`` and returns what came back as indices and arrays. The
grader builds the same graph with its own library to know the answer.

A graph description: ``{"leaves": [array, ...], "requires_grad": [bool, ...], "ops": [[name,
i, j], ...]}`` where node ``k`` is leaf ``k`` for ``k < len(leaves)`` and op ``k - len(leaves)``
otherwise, ``i``/``j`` are earlier nodes (``["scale", i, c]``: a float constant ``c``), and the
last node is the root. ``{"chain": n, ...}`` adds ``n`` ops after the ops, each applied to the
node before it (a deep chain, sent without listing it).

A scalar function description (for ``central_difference``): ``{"terms": [[kind, coef, i, j],
...]}``, $f(x) = \sum \mathrm{coef} \cdot g(x_i, x_j)$ with ``kind`` one of :data:`TERMS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

#: Binary and unary ops a description may use: the names the grader's numpy twin uses too.
OPS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "tanh": lambda a: a.tanh(),
    "sigmoid": lambda a: a.sigmoid(),
    "sum": lambda a: a.sum(),
    "scale": lambda a, c: a * c,
}

#: The chain's ops, alternately (cheap, and far from overflow for any length).
CHAIN = (("scale", 0.999), ("add", 1.0))

#: Terms of a scalar test function, in plain floats.
TERMS: dict[str, Callable[[float, float], float]] = {
    "cube": lambda x, y: x * x * x * y,
    "sin": lambda x, y: math.sin(x * y),
    "exp": lambda x, y: math.exp(0.5 * x),
    "square": lambda x, y: x * x,
}


def build_graph(graph: dict[str, Any]) -> list[Any]:
    """The graph's nodes as tensors, leaves first, root last."""
    import torchlight as tl

    nodes: list[Any] = [
        tl.tensor(np.array(value, dtype=np.float64), requires_grad=bool(grad))
        for value, grad in zip(graph["leaves"], graph["requires_grad"], strict=True)
    ]
    for name, *args in graph.get("ops", []):
        if name == "scale":
            nodes.append(OPS[name](nodes[args[0]], float(args[1])))
        else:
            nodes.append(OPS[name](*(nodes[i] for i in args)))
    for k in range(int(graph.get("chain", 0))):
        name, constant = CHAIN[k % len(CHAIN)]
        last = nodes[-1]
        nodes.append(last * constant if name == "scale" else last + 1.0)
    return nodes


def scalar_function(description: dict[str, Any]) -> Callable[..., float]:
    r"""$f(x_0, \ldots) = \sum \mathrm{coef} \cdot g(x_i, x_j)$ in plain floats."""
    terms = [
        (TERMS[kind], float(coef), int(i), int(j)) for kind, coef, i, j in description["terms"]
    ]

    def f(*xs: float) -> float:
        total = 0.0
        for g, coef, i, j in terms:
            total += coef * g(float(xs[i]), float(xs[j]))
        return total

    return f


def _indices(nodes: list[Any], order: Any) -> np.ndarray:
    """Each returned object's node index (-1 for an object that is not a node of the graph)."""
    where = {id(t): k for k, t in enumerate(nodes)}
    return np.array([where.get(id(t), -1) for t in order], dtype=np.int64)


def run(runner: str, obj: Any, namespace: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """One trial of an engine item: call the student's ``obj`` and return raw data."""
    import torchlight as tl

    if runner == "topological_sort":
        nodes = build_graph(case["args"][0])
        order = obj(nodes[-1])
        kind = type(order).__name__
        return {"order": _indices(nodes, list(order)), "type": kind}
    if runner == "backpropagate":
        graph, deriv, order = case["args"]
        nodes = build_graph(graph)
        root = nodes[-1]

        def topological_sort(node: Any, *more: Any) -> list[Any]:
            # This graph's order, computed by the grader: so that backpropagate is graded on
            # its own, whatever the notebook's topological_sort does.
            if node is not root or more:
                raise ValueError("the grader's topological_sort sorts only from the root")
            return [nodes[int(k)] for k in order]

        saved = namespace.get("topological_sort")
        namespace["topological_sort"] = topological_sort
        try:
            obj(root, tl.tensor(np.array(deriv, dtype=np.float64)))
        finally:
            namespace["topological_sort"] = saved
        leaves = len(graph["leaves"])
        grads = [nodes[k]._grad for k in range(leaves)]
        stored = [k for k in range(leaves, len(nodes)) if nodes[k]._grad is not None]
        return {
            "grads": [None if g is None else np.array(g.detach().numpy()) for g in grads],
            "stored": np.array(stored, dtype=np.int64),
        }
    if runner == "central_difference":
        description, vals, arg, epsilon = case["args"]
        f = scalar_function(description)
        floats = [float(v) for v in vals]
        if epsilon is None:
            value = obj(f, *floats, arg=int(arg))
        else:
            value = obj(f, *floats, arg=int(arg), epsilon=float(epsilon))
        kind = type(value).__name__
        if hasattr(value, "item") and getattr(value, "size", 1) == 1:
            value = value.item()
        return {"value": value if isinstance(value, int | float) else None, "type": kind}
    raise ValueError(f"unknown engine runner {runner!r}")
