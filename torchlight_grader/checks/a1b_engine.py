r"""Hidden checks for assignment 1b, *The autograd engine*.

The student writes the engine that a1's Functions plug into: ``topological_sort(root)``,
``backpropagate(root, deriv)`` and ``central_difference(f, *vals, arg=0, epsilon=1e-6)`` (the
public names and signatures of the Tutorial 2 page), then trains a small classifier with it.

Every trial is a fresh random graph, described as data (:mod:`torchlight_grader.sandbox.inside.graphs`):
diamonds, fan-out and fan-in, leaves used twice (``a + a``), constants, leaves that broadcast
(shapes ``(n,)``, ``(1, n)``, ``(m, 1)``, ``()``), non-scalar roots with a random seed gradient,
deep chains. The sandbox builds it from torchlight's ops and returns what the student's code
gave: an order as node indices, the leaves' ``.grad``. Here the grader builds the same graph with
its own library: the leaves' gradients from the library's engine, each checked against central
differences of a numpy twin of the graph before it is trusted.

Each item grades one thing, so that each classic mistake costs exactly its item:

- ``test_topological_sort``: a valid order (every node after its parents, each node once, only
  tensors that require grad), on random graphs and on a 100,000-node chain (no recursion);
- ``test_backpropagate``: every leaf's gradient; the student's ``backpropagate`` is called with
  the grader's order in place of the notebook's ``topological_sort`` (a wrong sort costs only
  the sort's item); a 3,000-node chain catches a recursive walk;
- ``test_leaves_only``: after ``backpropagate``, leaves hold a gradient and no other tensor does;
- ``test_central_difference``: $(f(x + \epsilon) - f(x - \epsilon)) / 2\epsilon$ exactly (a
  one-sided difference is off by $O(\epsilon)$), for every ``arg`` and ``epsilon``;
- ``test_train``: a classifier trained with the student's own engine (the grader's library has
  no engine at all: ``Tensor.backward`` raises) reaches 90% on held-out points.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchlight_grader.checks.check import LOOSE, Case, Check, GraderError, fmt, mismatch
from torchlight_grader.checks.kinds import TrainingCheck
from torchlight_grader.sandbox.inside import graphs

SHAPES = ((3, 4), (2, 5), (4, 3))
DEEP_CHAIN = 100_000  # topological_sort: far past Python's recursion limit (1000)
BACKWARD_CHAIN = 3_000  # backpropagate: past the recursion limit, cheap to walk


# ------------------------------------------------------------------------------ graphs
@dataclass
class GraphCase(Case):
    """A trial on a graph: ``describe`` names the graph, not its (long) description."""

    def describe(self) -> str:
        return str(self.hidden.get("what", "a graph"))


class Builder:
    """A random graph description, built node by node (leaves first)."""

    def __init__(self, rng: np.random.Generator, shape: tuple[int, int]) -> None:
        self.rng, self.shape = rng, shape
        self.leaves: list[np.ndarray] = []
        self.requires_grad: list[bool] = []
        self.ops: list[list[Any]] = []

    def leaf(self, shape: tuple[int, ...] | None = None, requires_grad: bool = True) -> int:
        self.leaves.append(self.rng.uniform(-1.5, 1.5, size=self.shape if shape is None else shape))
        self.requires_grad.append(requires_grad)
        return len(self.leaves) - 1

    def op(self, name: str, *args: Any) -> int:
        assert not self.ops or len(self.leaves) > 0, "leaves come first"
        self.ops.append([name, *args])
        return len(self.leaves) + len(self.ops) - 1

    def description(self, chain: int = 0) -> dict[str, Any]:
        out: dict[str, Any] = {"leaves": self.leaves, "requires_grad": self.requires_grad,
                               "ops": self.ops}  # fmt: skip
        if chain:
            out["chain"] = chain
        return out


def broadcast_shapes(rng: np.random.Generator, shape: tuple[int, int]) -> list[tuple[int, ...]]:
    """Leaf shapes that broadcast to ``shape``: the full one, a row, a column, a scalar."""
    m, n = shape
    return [shape, (n,), (1, n), (m, 1), ()]


def diamond(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[Builder, str]:
    r"""$a \to (\tanh a,\ a b) \to$ their product, plus $a$ again: a diamond whose bottom is
    also used by the root (three paths from ``a``), ``b`` a broadcast row."""
    g = Builder(rng, shape)
    a, b = g.leaf(), g.leaf((shape[1],))
    top = g.op("mul", g.op("tanh", a), g.op("mul", a, b))
    g.op("add", g.op("sigmoid", top), a)
    return g, f"a diamond (a of shape {shape}, b of shape ({shape[1]},) broadcast)"


def fan(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[Builder, str]:
    """One leaf fanned out to four ops, their results fanned back in by additions."""
    g = Builder(rng, shape)
    x, w = g.leaf(), g.leaf((1, shape[1]))
    outs = [g.op("tanh", x), g.op("mul", x, w), g.op("sigmoid", x), g.op("scale", x, -0.75)]
    total = outs[0]
    for o in outs[1:]:
        total = g.op("add", total, o)
    g.op("sum", g.op("mul", total, total))
    return g, f"a fan-out of x (shape {shape}) to four ops and back in, to a scalar root"


def repeated(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[Builder, str]:
    """Leaves used twice by one op (``a + a``, ``b * b``), a constant, a scalar leaf."""
    g = Builder(rng, shape)
    a, b, s = g.leaf(), g.leaf((shape[0], 1)), g.leaf(())
    c = g.leaf(requires_grad=False)
    twice = g.op("add", a, a)
    square = g.op("mul", b, b)
    mixed = g.op("mul", g.op("sub", twice, c), g.op("mul", square, s))
    g.op("add", g.op("mul", mixed, a), g.op("tanh", g.op("mul", c, c)))
    return g, f"leaves used twice by one op (a + a, b * b), a constant, a scalar leaf ({shape})"


def random_dag(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[Builder, str]:
    """Random ops on random earlier nodes (recent ones likelier): shared parents at every depth;
    every node that no other uses is added into the root."""
    g = Builder(rng, shape)
    shapes = broadcast_shapes(rng, shape)
    for k in range(int(rng.integers(3, 6))):
        g.leaf(shapes[int(rng.integers(len(shapes)))] if k else shape, requires_grad=k != 2)
    used: set[int] = set()

    def pick() -> int:  # an earlier node, recent ones likelier
        count = len(g.leaves) + len(g.ops)
        weights = np.arange(1, count + 1, dtype=np.float64) ** 2
        return int(rng.choice(count, p=weights / weights.sum()))

    for _ in range(int(rng.integers(10, 16))):
        name = str(rng.choice(["add", "sub", "mul", "mul", "tanh", "sigmoid", "scale"]))
        if name in ("tanh", "sigmoid"):
            args: list[Any] = [pick()]
        elif name == "scale":
            args = [pick(), float(rng.uniform(-1.5, 1.5))]
        else:
            args = [pick(), pick()]
        used.update(a for a in args if isinstance(a, int))
        g.op(name, *args)
    count = len(g.leaves) + len(g.ops)
    sinks = [k for k in range(count) if k not in used]
    root = sinks[0]
    for k in sinks[1:]:
        root = g.op("add", root, k)
    if rng.random() < 0.5:
        g.op("sum", root)
    n = len(g.leaves) + len(g.ops)
    return g, f"a random graph of {n} nodes ({len(g.leaves)} leaves, some broadcast, a constant)"


def chain(length: int) -> Callable[[np.random.Generator, tuple[int, int]], tuple[Builder, str]]:
    def make(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[Builder, str]:
        g = Builder(rng, shape)
        g.leaf((2,))
        return g, f"a chain of {length:,} ops"

    make.length = length  # type: ignore[attr-defined]
    make.short = f"a {length:,}-op chain"  # type: ignore[attr-defined]
    return make


#: How a passed item's message names each kind of graph (a chain carries its own name).
SHORT = {diamond: "diamond", fan: "fan-out and fan-in", repeated: "leaves used twice",
         random_dag: "random"}  # fmt: skip


def parents_of(graph: dict[str, Any]) -> list[list[int]]:
    """Each node's tensor parents, by index (leaves have none)."""
    parents: list[list[int]] = [[] for _ in graph["leaves"]]
    for name, *args in graph["ops"]:
        parents.append([args[0]] if name == "scale" else list(args))
    first = len(parents)
    parents += [[first + k - 1] for k in range(int(graph.get("chain", 0)))]
    return parents


def requiring_grad(graph: dict[str, Any], parents: list[list[int]]) -> list[bool]:
    """Whether each node requires grad: a leaf as made, an op when any parent does."""
    flags = [bool(f) for f in graph["requires_grad"]]
    for k in range(len(flags), len(parents)):
        flags.append(any(flags[p] for p in parents[k]))
    return flags


def label(graph: dict[str, Any], k: int) -> str:
    """How a message names node ``k``: ``leaf 2 (shape (4,))`` or ``node 7 (mul of 3, 5)``."""
    leaves = len(graph["leaves"])
    if k < leaves:
        return f"leaf {k} (shape {tuple(np.shape(graph['leaves'][k]))})"
    if k - leaves < len(graph["ops"]):
        name, *args = graph["ops"][k - leaves]
        of = args[:1] if name == "scale" else args
        return f"node {k} ({name} of {', '.join(map(str, of))})"
    return f"node {k} of the chain"


def evaluate(graph: dict[str, Any], leaves: list[np.ndarray]) -> np.ndarray:
    """The graph's root computed in numpy (the twin that central differences run on)."""
    values: list[np.ndarray] = list(leaves)
    numpy_ops: dict[str, Callable[..., np.ndarray]] = {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "tanh": np.tanh,
        "sigmoid": lambda a: 0.5 * (1.0 + np.tanh(0.5 * a)),
        "sum": np.sum,
    }
    for name, *args in graph["ops"]:
        if name == "scale":
            values.append(values[args[0]] * float(args[1]))
        else:
            values.append(numpy_ops[name](*(values[i] for i in args)))
    root = values[-1]
    for k in range(int(graph.get("chain", 0))):
        name, constant = graphs.CHAIN[k % len(graphs.CHAIN)]
        root = root * constant if name == "scale" else root + constant
    return np.asarray(root, dtype=np.float64)


def library_graph(graph: dict[str, Any]) -> list[Any]:
    """The same graph built in the grader, with the grader's own (whole) library."""
    return graphs.build_graph(graph)


def library_order(graph: dict[str, Any]) -> list[int]:
    """The library's topological order of the graph, as node indices."""
    from torchlight.autograd import topological_sort

    nodes = library_graph(graph)
    where = {id(t): k for k, t in enumerate(nodes)}
    return [where[id(t)] for t in topological_sort(nodes[-1])]


# ------------------------------------------------------------------------------ the checks
def graph_sampler(
    families: tuple[Callable[..., tuple[Builder, str]], ...], with_order: bool
) -> Callable[[np.random.Generator, int], Case]:
    """Trial ``t`` draws a graph of ``families[t]``: the description, a seed gradient of the
    root's shape, and (``with_order``) the library's order of the graph."""

    def sample(rng: np.random.Generator, trial: int) -> Case:
        family = families[trial % len(families)]
        builder, what = family(rng, SHAPES[trial % len(SHAPES)])
        graph = builder.description(getattr(family, "length", 0))
        root = evaluate(graph, builder.leaves)
        deriv = rng.standard_normal(root.shape)
        args: list[Any] = [graph]
        if with_order:
            args += [deriv, library_order(graph)]
            if root.shape:
                what += f", a root of shape {root.shape} seeded with a random gradient"
        short = getattr(family, "short", None) or SHORT.get(family, "graph")
        return GraphCase(args, deriv, names=("graph",), hidden={"what": what, "short": short})

    return sample


@dataclass
class TopologicalSortCheck(Check):
    """The student's order: each node once, after all its parents, only what requires grad."""

    def spec(self) -> dict[str, Any]:
        return {"runner": "topological_sort", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        graph = case.args[0]
        parents = parents_of(graph)
        return {"parents": parents, "requires_grad": requiring_grad(graph, parents)}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        graph, trial = case.args[0], f"on {case.describe()}"
        order = received.get("order")
        if not isinstance(order, np.ndarray) or order.ndim != 1:
            return f"topological_sort must return a list of tensors, got {received.get('type')} {trial}"
        parents, wanted = expected["parents"], expected["requires_grad"]
        position: dict[int, int] = {}
        for p, k in enumerate(int(k) for k in order):
            if not 0 <= k < len(parents):
                return (f"item {p} of your order is not a tensor of the graph {trial}: return "
                        "the tensors themselves (the root and its ancestors)")  # fmt: skip
            if k in position:
                return (f"{label(graph, k)} appears twice in your order (at {position[k]} and {p}) "
                        f"{trial}: a tensor used by several others is visited once; keep a set "
                        "of the tensors already seen")  # fmt: skip
            if not wanted[k]:
                return (f"your order holds {label(graph, k)}, which does not require grad (a "
                        f"constant) {trial}: no gradient flows to it, leave it out")  # fmt: skip
            position[k] = p
        missing = [k for k in range(len(parents)) if wanted[k] and k not in position]
        if missing:
            return (f"your order leaves out {label(graph, missing[0])} ({len(missing)} tensors "
                    f"missing of {sum(wanted)}) {trial}: every tensor that leads to the root and "
                    "requires grad belongs in it")  # fmt: skip
        for k, p in position.items():
            early = [q for q in parents[k] if wanted[q] and position[q] > p]
            if early:
                return (f"{label(graph, k)} comes at position {p}, before its parent "
                        f"{label(graph, early[0])} at position {position[early[0]]} {trial}: "
                        "every tensor must come after all of its parents (leaves first, the root "
                        "last). A depth-first walk appends a tensor only once all its parents are "
                        "appended (post-order), not when it is first reached")  # fmt: skip
        return None

    def passed(self, cases: Any) -> str:
        return f"{self.what}: a valid order on {len(cases)} graphs ({families(cases)})."


@dataclass
class BackpropagateCheck(Check):
    """The leaves' gradients after the student's ``backpropagate(root, deriv)``, compared with
    the library's engine and with central differences (``leaves_only``: instead, that the leaves
    got a gradient and no other tensor kept one)."""

    leaves_only: bool = False

    def spec(self) -> dict[str, Any]:
        return {"runner": "backpropagate", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        import torchlight as tl

        graph, deriv, _ = case.args
        nodes = library_graph(graph)
        nodes[-1].backward(tl.tensor(deriv))
        grads = [t.grad.numpy().copy() if t.grad is not None else None
                 for t in nodes[: len(graph["leaves"])]]  # fmt: skip
        if self.leaves_only:
            return {"grads": grads}
        for k, g in enumerate(grads):
            if g is None:
                continue
            central = central_gradient(graph, deriv, k)
            if mismatch(central, g, atol=LOOSE, rtol=LOOSE) is not None:
                raise GraderError(f"the library's gradient of leaf {k} disagrees with central "
                                  f"differences on {case.describe()}")  # fmt: skip
        return {"grads": grads}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        graph, trial = case.args[0], f"on {case.describe()}"
        got, want = received.get("grads"), expected["grads"]
        if not isinstance(got, list | tuple) or len(got) != len(want):
            return f"the grader could not read the leaves' gradients {trial}"
        uses = _uses(graph)
        for k, (g, e) in enumerate(zip(got, want, strict=True)):
            name = label(graph, k)
            if e is None and g is not None:
                return (f"{name} does not require grad (a constant) but got a .grad {trial}: "
                        "only tensors that require grad receive gradients")  # fmt: skip
            if e is None:
                continue
            if g is None:
                return (f"{name} has no .grad after backpropagate {trial}: every leaf that "
                        "requires grad accumulates its gradient (node.accumulate_grad)")  # fmt: skip
            if self.leaves_only:
                continue
            problem = self.compare(f"the .grad of {name}", e, g, trial)
            if problem:
                if uses[k] > 1:
                    problem += (f". This leaf is used {uses[k]} times: its gradient is the sum of "
                                "every use's share (accumulate, never overwrite)")  # fmt: skip
                elif any(n > 1 for n in uses[len(graph["leaves"]) :]):
                    problem += (". Some tensors of this graph feed several others: a tensor's "
                                "gradient is complete only when every user has sent its share "
                                "(add them up before passing it on)")  # fmt: skip
                return problem
        stored = received.get("stored")
        if self.leaves_only and isinstance(stored, np.ndarray) and stored.size:
            k = int(stored[0])
            return (f"{label(graph, k)} (and {stored.size - 1} other non-leaf tensors) kept a "
                    f"gradient after backpropagate {trial}: only leaves accumulate .grad; a "
                    "tensor made by a Function (node.history is not None) passes its gradient "
                    "on through chain_rule and keeps none")  # fmt: skip
        return None

    def passed(self, cases: Any) -> str:
        return f"{self.what}: passed on {len(cases)} graphs ({families(cases)})."


def families(cases: Any) -> str:
    """The graphs of a passed item, shortly: ``diamond, random dag, fan``."""
    return ", ".join(str(c.hidden.get("short", "graph")) for c in cases)


def _uses(graph: dict[str, Any]) -> list[int]:
    """How many op arguments name each node (``a + a`` uses ``a`` twice)."""
    parents = parents_of(graph)
    counts = [0] * len(parents)
    for ps in parents:
        for p in ps:
            counts[p] += 1
    return counts


def central_gradient(graph: dict[str, Any], deriv: np.ndarray, k: int) -> np.ndarray:
    r"""$\partial \langle G, \mathrm{root} \rangle / \partial\,\mathrm{leaf}_k$ by the library's
    central differences on the numpy twin of the graph, one element at a time."""
    from torchlight.autograd import central_difference

    leaves = [np.array(v, dtype=np.float64) for v in graph["leaves"]]
    x = leaves[k]
    estimate = np.zeros(x.shape)
    for j in range(x.size):

        def f(v: float, j: int = j) -> float:
            values = [a.copy() for a in leaves]
            values[k].reshape(-1)[j] = v
            return float(np.sum(deriv * evaluate(graph, values)))

        estimate.reshape(-1)[j] = central_difference(f, float(x.reshape(-1)[j]), epsilon=1e-6)
    return estimate


# ------------------------------------------------------------------------------ central_difference
EPSILONS = (None, 1e-3, 0.1, 1e-4)  # None: the default, 1e-6


def difference_case(rng: np.random.Generator, trial: int) -> Case:
    """A smooth function of 1-3 floats (random terms and coefficients), a point, an ``arg``."""
    count = 1 + trial % 3
    kinds = list(graphs.TERMS)
    terms = [
        [kinds[int(rng.integers(len(kinds)))], float(rng.uniform(-2, 2)),
         int(rng.integers(count)), int(rng.integers(count))]
        for _ in range(4)
    ]  # fmt: skip
    arg = int(rng.integers(count))
    terms.append(["square", float(rng.uniform(0.5, 2)), arg, arg])  # f'' != 0 along x_arg
    vals = [float(v) for v in rng.uniform(-1.5, 1.5, size=count)]
    epsilon = EPSILONS[trial % len(EPSILONS)]
    return Case([{"terms": terms}, vals, arg, epsilon], names=("f", "vals", "arg", "epsilon"))


@dataclass
class CentralDifferenceCheck(Check):
    """The student's ``central_difference(f, *vals, arg=, epsilon=)`` against the library's."""

    def spec(self) -> dict[str, Any]:
        return {"runner": "central_difference", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        from torchlight.autograd import central_difference

        description, vals, arg, epsilon = case.args
        f = graphs.scalar_function(description)
        eps = 1e-6 if epsilon is None else epsilon
        up = [v + eps if i == arg else v for i, v in enumerate(vals)]
        return {
            "value": central_difference(f, *vals, arg=arg, epsilon=eps),
            "forward": (f(*up) - f(*vals)) / eps,
            "eps": eps,
        }

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        _, vals, arg, epsilon = case.args
        call = (f"central_difference(f, {', '.join(fmt(v) for v in vals)}, arg={arg}"
                + ("" if epsilon is None else f", epsilon={epsilon:g}") + ")")  # fmt: skip
        got, want = received.get("value"), expected["value"]
        if not isinstance(got, int | float):
            return f"{call} must return a float, got {received.get('type')}"
        if abs(got - want) <= 1e-9 * (1e-3 + abs(want)):
            return None
        message = (f"{call} returned {fmt(got)}, expected {fmt(want)} = (f(x + eps) - f(x - eps)) "
                   f"/ (2 eps) with eps = {expected['eps']:g} at x = vals[{arg}]")  # fmt: skip
        if abs(got - expected["forward"]) <= 1e-9 * (1e-3 + abs(want)):
            message += (": yours is the one-sided difference (f(x + eps) - f(x)) / eps, whose "
                        "error is O(eps); the central one's is O(eps**2)")  # fmt: skip
        elif epsilon is None:
            message += " (the default epsilon is 1e-6)"
        return message

    def passed(self, cases: Any) -> str:
        return f"{self.what}: passed on {len(cases)} functions and epsilons."


# ------------------------------------------------------------------------------ training
def four_blobs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """XOR: blobs around (+-1, +-1); the class is whether x and y have the same sign."""
    centers = rng.choice([-1.0, 1.0], size=(n, 2))
    points = centers + rng.normal(0, 0.3, size=(n, 2))
    return points, (centers[:, 0] * centers[:, 1] > 0).astype(np.int64)


def xor_case(rng: np.random.Generator, trial: int) -> Case:
    x_train, y_train = four_blobs(rng, 300)
    x_test, y_test = four_blobs(rng, 200)
    return Case(
        [x_train, y_train, x_test, 2],
        names=("X_train", "y_train", "X_test", "num_classes"),
        hidden={"y_test": y_test},
    )


# ------------------------------------------------------------------------------ authorship
#: The library's engine, by the names a notebook could call it: an answer of this notebook
#: that reaches for one is flagged (and scores nothing: the grader's library has none of them).
ENGINE = {"topological_sort", "backpropagate", "backward_steps", "central_difference",
          "gradcheck", "gradgradcheck", "jacobian_mismatch"}  # fmt: skip
ENGINE_MODULES = ("torchlight.autograd", "torchlight.viz")


def library_engine(sources: Iterable[str]) -> list[str]:
    """One line per way the student code reaches the library's own engine (from its AST):
    ``from torchlight.autograd import backpropagate`` (any alias), ``tl.autograd.X`` or
    ``engine.X`` for an engine name, ``getattr(..., "X")``, ``.backward(...)`` on a tensor,
    ``autograd.grad(...)``, importing ``torchlight.autograd.engine``/``gradcheck`` by name."""
    found: list[str] = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(ENGINE_MODULES):
                names = [a.name for a in node.names if a.name in ENGINE | {"grad", "*", "engine"}]
                found += [f"imports {n} from {node.module}" for n in dict.fromkeys(names)]
            elif isinstance(node, ast.Import):
                found += [f"imports {a.name}" for a in node.names
                          if a.name.startswith(("torchlight.autograd.engine",
                                                "torchlight.autograd.gradcheck"))]  # fmt: skip
            elif isinstance(node, ast.Attribute) and node.attr in ENGINE:
                found.append(f"uses .{node.attr}")
            elif isinstance(node, ast.Attribute) and node.attr == "grad" and _is_autograd(node):
                found.append("uses autograd.grad")
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "backward":
                    found.append("calls .backward() (the library's engine)")
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if called in ("getattr", "import_module", "__import__"):
                    for arg in node.args[1:2] if called == "getattr" else node.args[:1]:
                        text = arg.value if isinstance(arg, ast.Constant) else None
                        if isinstance(text, str) and (
                            text in ENGINE
                            or text in ("backward", "grad")
                            or text.startswith("torchlight.autograd")
                        ):
                            found.append(f"names {text!r} through {called}")
    if not found:
        return []
    return [f"reaches for torchlight's own engine ({', '.join(dict.fromkeys(found))}): review by "
            "hand whether the student wrote topological_sort, backpropagate and "
            "central_difference"]  # fmt: skip


def _is_autograd(node: ast.Attribute) -> bool:
    value = node.value
    return isinstance(value, ast.Name | ast.Attribute) and (
        getattr(value, "id", None) == "autograd" or getattr(value, "attr", None) == "autograd"
    )


FINDINGS = library_engine
"""What the grader adds to the integrity report for this notebook (see the registry)."""


CHECKS = {
    "test_topological_sort": TopologicalSortCheck(
        "topological_sort",
        ("topological_sort",),
        graph_sampler((diamond, random_dag, repeated, fan, random_dag, chain(DEEP_CHAIN)), False),
        trials=6,
        timeout=60.0,
        what="topological_sort",
    ),
    "test_backpropagate": BackpropagateCheck(
        "backpropagate",
        ("backpropagate",),
        graph_sampler(
            (diamond, fan, repeated, random_dag, random_dag, chain(BACKWARD_CHAIN)), True
        ),
        trials=6,
        timeout=30.0,
        what="backpropagate (every leaf's gradient)",
    ),
    "test_leaves_only": BackpropagateCheck(
        "backpropagate",
        ("backpropagate",),
        graph_sampler((repeated, random_dag), True),
        trials=2,
        what="backpropagate leaves .grad on leaves only",
        leaves_only=True,
    ),
    "test_central_difference": CentralDifferenceCheck(
        "central_difference",
        ("central_difference",),
        difference_case,
        trials=4,
        what="central_difference",
    ),
    "test_train": TrainingCheck(
        "train_classifier",
        ("topological_sort", "backpropagate", "classifier"),
        xor_case,
        trials=1,
        timeout=120.0,
        threshold=0.9,
        dataset="200 held-out points of the four blobs",
        what="your classifier trained with your own engine",
    ),
}
