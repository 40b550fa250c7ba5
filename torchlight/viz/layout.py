"""Lay out a directed acyclic graph in layers, top to bottom, in pure Python.

The classic recipe (Sugiyama et al., 1981), in four steps, the same ones graphviz ``dot`` uses:

1. **Layers.** Each node goes one layer below its lowest input (longest path from the inputs);
   then each node moves down as far as it can, to just above its first consumer, so that an
   input used late (a target, a bias) sits next to where it is used.
2. **Dummy nodes.** An edge that spans several layers is cut into one-layer pieces through
   invisible dummy nodes, so that the later steps see only short edges and can route it.
3. **Crossing reduction.** Sweep down and up the layers, sorting each layer by the barycenter
   (mean position) of each node's neighbours in the layer before; keep the best order seen.
4. **Coordinates.** Each node wants to sit under the median x of its inputs (a leaf: above
   its users); nodes in a layer must keep their order and not overlap. The least-squares
   placement under those constraints is an isotonic regression, solved exactly by the
   pool-adjacent-violators algorithm. A last pass tucks side inputs in next to the main chain.

Every edge points downward: ``layer[src] < layer[dst]``.

Example:
    >>> from torchlight.viz.layout import layered_layout
    >>> result = layered_layout(["a", "f", "b"], [("a", "f"), ("f", "b")], {})
    >>> [result.layers[n] for n in "afb"]
    [0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LayoutResult", "count_crossings", "layered_layout"]

Point = tuple[float, float]
DEFAULT_SIZE = (60.0, 30.0)


@dataclass
class LayoutResult:
    """Where everything goes.

    Attributes:
        positions: the centre ``(x, y)`` of each node.
        sizes: each node's ``(width, height)``.
        layers: each node's layer (0 at the top).
        routes: for each edge ``(src, dst)``, the points a line from ``src``'s bottom to
            ``dst``'s top passes through (including the dummy nodes of a long edge).
        width, height: the size of the whole drawing, margins included.
    """

    positions: dict[str, Point]
    sizes: dict[str, tuple[float, float]]
    layers: dict[str, int]
    routes: dict[tuple[str, str], list[Point]]
    width: float
    height: float


def _topological_order(nodes: Sequence[str], successors: Mapping[str, list[str]]) -> list[str]:
    """Kahn's algorithm; raises on a cycle (a computation graph never has one)."""
    indegree = dict.fromkeys(nodes, 0)
    for n in nodes:
        for s in successors[n]:
            indegree[s] += 1
    ready = [n for n in reversed(nodes) if indegree[n] == 0]
    order = []
    while ready:
        n = ready.pop()
        order.append(n)
        for s in reversed(successors[n]):
            indegree[s] -= 1
            if indegree[s] == 0:
                ready.append(s)
    if len(order) != len(nodes):
        stuck = [n for n in nodes if indegree[n] > 0][:5]
        raise ValueError(f"the graph has a cycle (through {stuck}); a layered layout needs a DAG")
    return order


def _assign_layers(
    order: list[str], successors: Mapping[str, list[str]], predecessors: Mapping[str, list[str]]
) -> dict[str, int]:
    layer: dict[str, int] = {}
    for n in order:  # longest path from the inputs
        layer[n] = max((layer[p] + 1 for p in predecessors[n]), default=0)
    for n in reversed(order):  # then as low as possible: just above the first consumer
        if successors[n]:
            layer[n] = min(layer[s] for s in successors[n]) - 1
    return layer


def count_crossings(
    upper: Sequence[str], lower: Sequence[str], edges: Sequence[tuple[str, str]]
) -> int:
    """How many pairs of edges between two neighbouring layers cross (an inversion count)."""
    top = {n: i for i, n in enumerate(upper)}
    bottom = {n: i for i, n in enumerate(lower)}
    pairs = sorted((top[u], bottom[v]) for u, v in edges if u in top and v in bottom)
    # Count pairs (i < j) with lower[i] > lower[j] with a Fenwick tree over lower positions.
    tree = [0] * (len(lower) + 1)
    crossings = 0
    for seen, (_, b) in enumerate(pairs):
        i, not_greater = b + 1, 0
        while i > 0:
            not_greater += tree[i]
            i -= i & -i
        crossings += seen - not_greater
        i = b + 1
        while i <= len(lower):
            tree[i] += 1
            i += i & -i
    return crossings


def _sweep(rows: list[list[str]], neighbours: Mapping[str, list[str]], downward: bool) -> None:
    """Sort each layer by the barycenter of its neighbours in the previous layer (in place)."""
    indices = range(1, len(rows)) if downward else range(len(rows) - 2, -1, -1)
    for r in indices:
        previous = rows[r - 1] if downward else rows[r + 1]
        where = {n: i for i, n in enumerate(previous)}
        keys = {}
        for i, n in enumerate(rows[r]):
            near = [where[m] for m in neighbours[n] if m in where]
            keys[n] = sum(near) / len(near) if near else float(i)  # no neighbours: stay put
        rows[r].sort(key=lambda n: keys[n])


def _total_crossings(rows: list[list[str]], successors: Mapping[str, list[str]]) -> int:
    total = 0
    for upper, lower in zip(rows, rows[1:], strict=False):
        total += count_crossings(upper, lower, [(u, v) for u in upper for v in successors[u]])
    return total


def _isotonic(
    targets: list[float], gaps: list[float], weights: list[float] | None = None
) -> list[float]:
    """Positions closest (weighted least squares) to ``targets`` with ``x[i+1] - x[i] >= gaps[i]``.

    Substituting ``z[i] = x[i] - offset[i]`` turns the gaps into ``z`` non-decreasing, which
    the pool-adjacent-violators algorithm solves exactly in linear time: whenever a block of
    nodes would overlap the block on its left, the two merge and move to their weighted mean.
    """
    weights = weights or [1.0] * len(targets)
    offsets = [0.0]
    for g in gaps:
        offsets.append(offsets[-1] + g)
    blocks: list[list[float]] = []  # [weighted mean of z, total weight, number of nodes]
    for t, o, w in zip(targets, offsets, weights, strict=True):
        blocks.append([t - o, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean, weight, count = blocks.pop()
            total = blocks[-1][1] + weight
            blocks[-1][0] = (blocks[-1][0] * blocks[-1][1] + mean * weight) / total
            blocks[-1][1] = total
            blocks[-1][2] += count
    z: list[float] = []
    for mean, _, count in blocks:
        z.extend([mean] * int(count))
    return [zi + o for zi, o in zip(z, offsets, strict=True)]


def _median(values: list[float]) -> float:
    """The lower median (for two values: the left one, so a chain of nodes stays straight)."""
    values = sorted(values)
    return values[(len(values) - 1) // 2]


def _align_to_inputs(
    rows: list[list[str]],
    x: dict[str, float],
    predecessors: Mapping[str, list[str]],
    successors: Mapping[str, list[str]],
    place: Any,
) -> None:
    """Down passes: every node under the median of its inputs. Up passes: only the graph's
    inputs (leaves, constants) move, above the median of their users."""
    for iteration in range(5):
        downward = iteration % 2 == 0
        for row in rows if downward else reversed(rows):
            targets = []
            for n in row:
                if downward and predecessors[n]:
                    targets.append(_median([x[m] for m in predecessors[n]]))
                elif not downward and not predecessors[n] and successors[n]:
                    targets.append(_median([x[m] for m in successors[n]]))
                else:
                    targets.append(x[n])
            place(row, targets, None)


def _pull_side_branches(
    rows: list[list[str]],
    x: dict[str, float],
    predecessors: Mapping[str, list[str]],
    successors: Mapping[str, list[str]],
    place: Any,
) -> None:
    """One last pass from the bottom up: every node moves toward the median of its users.

    A node that its user is aligned with (the user's median input) pulls hard, so the main
    chain stays straight; a side input pulls softly, so it tucks in right next to the chain
    instead of hanging wherever the down passes left it.
    """
    for row in reversed(rows):
        targets, weights = [], []
        for n in row:
            users = successors[n]
            if not users:
                targets.append(x[n])
                weights.append(1000.0)
                continue
            targets.append(_median([x[u] for u in users]))
            aligned = any(_median([x[p] for p in predecessors[u]]) == x[n] for u in users)
            weights.append(1000.0 if aligned and predecessors[n] else 1.0)
        place(row, targets, weights)


def layered_layout(
    nodes: Sequence[str],
    edges: Sequence[tuple[str, str]],
    sizes: Mapping[str, tuple[float, float]],
    node_gap: float = 28.0,
    layer_gap: float = 46.0,
    margin: float = 16.0,
    sweeps: int = 4,
) -> LayoutResult:
    """Place ``nodes`` in layers so that every edge points down, with few crossings.

    Args:
        nodes: node ids; their order is the starting order inside each layer.
        edges: ``(src, dst)`` pairs; duplicates and self loops are ignored.
        sizes: ``(width, height)`` per node (a missing node gets 60×30).
        node_gap: horizontal space between neighbouring boxes.
        layer_gap: vertical space between layers.
        margin: space around the drawing.
        sweeps: down-and-up barycenter sweeps in the crossing reduction.
    """
    nodes = list(dict.fromkeys(nodes))
    known = set(nodes)
    unique = [(u, v) for u, v in dict.fromkeys(edges) if u != v]
    for u, v in unique:
        if u not in known or v not in known:
            raise ValueError(f"edge ({u!r}, {v!r}) names a node that is not in `nodes`")
    successors: dict[str, list[str]] = {n: [] for n in nodes}
    predecessors: dict[str, list[str]] = {n: [] for n in nodes}
    for u, v in unique:
        successors[u].append(v)
        predecessors[v].append(u)
    order = _topological_order(nodes, successors)
    layer = _assign_layers(order, successors, predecessors)
    size: dict[str, tuple[float, float]] = {}
    for n in nodes:
        w, h = sizes.get(n, DEFAULT_SIZE)
        size[n] = (float(w), float(h))

    # Dummy nodes: cut every long edge into one-layer pieces.
    chains: dict[tuple[str, str], list[str]] = {}
    for u, v in unique:
        if layer[v] - layer[u] > 1:
            chain = []
            for k in range(layer[u] + 1, layer[v]):
                dummy = f"\0{u}\0{v}\0{k}"
                layer[dummy] = k
                size[dummy] = (4.0, 0.0)
                successors[dummy], predecessors[dummy] = [], []
                chain.append(dummy)
            path = [u, *chain, v]
            successors[u].remove(v)
            predecessors[v].remove(u)
            for a, b in zip(path, path[1:], strict=False):
                successors[a].append(b)
                predecessors[b].append(a)
            chains[(u, v)] = chain

    rows: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for n in order:
        rows[layer[n]].append(n)
    for chain in chains.values():  # dummies start next to their source's column
        for d in chain:
            rows[layer[d]].append(d)
    best, best_crossings = [list(r) for r in rows], _total_crossings(rows, successors)
    for _ in range(sweeps):
        if best_crossings == 0:
            break
        _sweep(rows, predecessors, downward=True)
        _sweep(rows, successors, downward=False)
        crossings = _total_crossings(rows, successors)
        if crossings < best_crossings:
            best, best_crossings = [list(r) for r in rows], crossings
    rows = best

    # Coordinates: y by layer, x by least-squares alignment with the neighbours.
    x: dict[str, float] = {}
    for row in rows:
        left = 0.0
        for n in row:
            x[n] = left + size[n][0] / 2
            left += size[n][0] + node_gap

    def place(row: list[str], targets: list[float], weights: list[float] | None) -> None:
        gaps = [
            (size[a][0] + size[b][0]) / 2 + node_gap for a, b in zip(row, row[1:], strict=False)
        ]
        for n, xn in zip(row, _isotonic(targets, gaps, weights), strict=True):
            x[n] = xn

    _align_to_inputs(rows, x, predecessors, successors, place)
    _pull_side_branches(rows, x, predecessors, successors, place)
    shift = margin - min((x[n] - size[n][0] / 2 for n in x), default=0.0)
    y: dict[str, float] = {}
    half: dict[str, float] = {}  # half the height of each node's layer
    top = margin
    for row in rows:
        height = max((size[n][1] for n in row), default=0.0)
        for n in row:
            y[n], half[n] = top + height / 2, height / 2
        top += height + layer_gap
    positions = {n: (x[n] + shift, y[n]) for n in nodes}
    routes: dict[tuple[str, str], list[Point]] = {}
    for u, v in unique:
        points = []
        for d in chains.get((u, v), []):  # straight down through the layers it crosses
            points += [(x[d] + shift, y[d] - half[d]), (x[d] + shift, y[d] + half[d])]
        start = (positions[u][0], positions[u][1] + size[u][1] / 2)
        end = (positions[v][0], positions[v][1] - size[v][1] / 2)
        routes[(u, v)] = [start, *points, end]
    width = max((x[n] + shift + size[n][0] / 2 for n in x), default=0.0) + margin
    height = top - layer_gap + margin if rows else 2 * margin
    return LayoutResult(
        positions, {n: size[n] for n in nodes}, {n: layer[n] for n in nodes}, routes, width, height
    )
