r"""Hidden checks for assignment 2b, *The strided tensor*.

The student writes the index arithmetic of :mod:`torchlight.shape` (``index_to_position``,
``to_index``, ``shape_broadcast``, ``broadcast_index``) and the strided backend's three loops
(``strided_map``, ``strided_zip``, ``strided_reduce``) over
:class:`~torchlight.backends.strided.storage.StridedStorage`, whose element at index $i$ sits at
$\mathrm{offset} + \sum_d i_d s_d$ of a flat buffer.

Index items call the student's function on a batch of fresh random arguments (shapes with
dimensions of size 1 and 0-d shapes, zero strides, offsets) and compare with numpy
(``np.unravel_index``, ``np.broadcast_shapes``) or the formula. Kernel items build storages over
one buffer with every kind of layout a view makes: contiguous, permuted, sliced (a step and an
offset), broadcast (stride 0), and mixtures, 0-d too; the result's values are read in the grader
from its buffer, shape, strides and offset and compared with numpy. While a kernel runs, the
notebook's index functions answer from tables the grader computed for that trial (see
:mod:`torchlight_grader.sandbox.inside.strided`), so a mistake in them costs only their own item.

The grader's library for this notebook has neither ``torchlight.shape``'s four functions nor
the strided backend's ``map``/``zip``/``reduce``: an answer that calls them scores nothing.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchlight_grader.checks.check import Case, Check
from torchlight_grader.sandbox.inside.strided import key

CALLS = 40  # per trial of an index item
MAP_OPS = {"exp": np.exp, "neg": np.negative, "tanh": np.tanh, "square": np.square}
ZIP_OPS = {"add": np.add, "mul": np.multiply, "sub": np.subtract, "maximum": np.maximum}
REDUCE_OPS: dict[str, tuple[Callable[..., np.ndarray], float]] = {
    "add": (np.sum, 0.0),
    "maximum": (np.max, -math.inf),
    "mul": (np.prod, 1.0),
}


# ------------------------------------------------------------------------------ layouts
def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def read(buffer: np.ndarray, shape: Any, strides: Any, offset: int) -> np.ndarray:
    """The values a layout reads from ``buffer``: element $i$ at $o + \\sum_d i_d s_d$."""
    shape = tuple(int(n) for n in shape)
    if len(strides) != len(shape):
        raise ValueError(f"{len(strides)} strides for a shape of {len(shape)} dimensions")
    index = np.indices(shape).reshape(len(shape), math.prod(shape))
    positions = int(offset) + (np.array(strides, dtype=np.int64)[:, None] * index).sum(axis=0)
    if positions.size and (positions.min() < 0 or positions.max() >= len(buffer)):
        raise IndexError(
            f"its layout (shape {shape}, strides {tuple(strides)}, offset {offset}) reads "
            f"position {int(positions.max())} of a buffer of {len(buffer)}"
        )
    return np.asarray(buffer)[positions].reshape(shape)


def layout(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> dict[str, Any]:
    """A storage whose logical shape is ``shape``, of one kind of view:

    - ``contiguous``: row-major over its own buffer;
    - ``permuted``: a contiguous buffer read with permuted strides (a transpose);
    - ``sliced``: every other element of a bigger buffer, from an offset;
    - ``broadcast``: the size-1 dimensions of a smaller buffer read with stride 0;
    - ``mixed``: sliced, then permuted."""
    ndim = len(shape)
    if kind == "broadcast" and ndim:
        small = tuple(1 if rng.random() < 0.5 else n for n in shape)
        strides = [
            0 if m == 1 else s for m, s in zip(small, contiguous_strides(small), strict=True)
        ]
        buffer = rng.uniform(-2, 2, size=max(math.prod(small), 1))
        return {"buffer": buffer, "shape": list(shape), "strides": strides, "offset": 0}
    if kind in ("permuted", "mixed") and ndim > 1:
        order = [int(d) for d in rng.permutation(ndim)]
        base_shape = [0] * ndim
        for d, o in enumerate(order):
            base_shape[o] = shape[d]
        inner = layout(rng, tuple(base_shape), "sliced" if kind == "mixed" else "contiguous")
        inner["strides"] = [inner["strides"][o] for o in order]
        inner["shape"] = list(shape)
        return inner
    if kind in ("sliced", "mixed"):
        steps = [int(rng.integers(1, 3)) for _ in shape]
        starts = [int(rng.integers(0, 2)) for _ in shape]
        big = tuple(st + n * sp for n, sp, st in zip(shape, steps, starts, strict=True))
        base = contiguous_strides(big)
        offset = sum(st * s for st, s in zip(starts, base, strict=True))
        strides = [sp * s for sp, s in zip(steps, base, strict=True)]
        buffer = rng.uniform(-2, 2, size=max(math.prod(big), 1) + 3)
        return {"buffer": buffer, "shape": list(shape), "strides": strides, "offset": offset}
    buffer = rng.uniform(-2, 2, size=max(math.prod(shape), 1))
    return {"buffer": buffer, "shape": list(shape), "strides": list(contiguous_strides(shape)),
            "offset": 0}  # fmt: skip


def values(description: dict[str, Any]) -> np.ndarray:
    return read(description["buffer"], description["shape"], description["strides"],
                description["offset"])  # fmt: skip


def describe_layout(d: dict[str, Any]) -> str:
    return f"shape {tuple(d['shape'])}, strides {tuple(d['strides'])}, offset {d['offset']}"


# ------------------------------------------------------------------------------ tables
def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(n) for n in np.broadcast_shapes(a, b))


def small_index(big_index: Any, big_shape: Any, shape: Any) -> list[int]:
    lead = len(big_shape) - len(shape)
    return [0 if n == 1 else int(big_index[lead + d]) for d, n in enumerate(shape)]


def tables(layouts: list[dict[str, Any]], out_shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    """What the stand-in index functions answer during a kernel trial: ``to_index`` for every
    shape involved, ``index_to_position`` for every index of every layout (the inputs' and
    contiguous outputs'), ``broadcast_index`` from each output shape to each input shape."""
    shapes = {tuple(d["shape"]) for d in layouts} | set(out_shapes)
    shapes |= {(n,) for s in list(shapes) for n in s}  # one dimension alone (a reduction's)
    table: dict[str, dict[str, Any]] = {name: {} for name in
                                        ("to_index", "index_to_position", "broadcast_index",
                                         "shape_broadcast")}  # fmt: skip
    for shape in shapes:
        for ordinal in range(math.prod(shape)):
            found = [int(i) for i in np.unravel_index(ordinal, shape)] if shape else []
            table["to_index"][key(ordinal, shape)] = found
    places = [(tuple(d["shape"]), tuple(d["strides"]), int(d["offset"])) for d in layouts]
    places += [(s, contiguous_strides(s), 0) for s in out_shapes]
    for place, strides, offset in places:
        for index in np.ndindex(*place):
            position = offset + sum(i * s for i, s in zip(index, strides, strict=True))
            table["index_to_position"][key(list(index), list(strides), offset)] = position
    for big in out_shapes:
        for d in layouts:
            small_shape = tuple(d["shape"])
            if len(small_shape) > len(big):
                continue
            for index in np.ndindex(*big):
                small = small_index(index, big, small_shape)
                table["broadcast_index"][key(list(index), list(big), list(small_shape))] = small
    for a in layouts:
        for b in layouts:
            try:
                out = broadcast(tuple(a["shape"]), tuple(b["shape"]))
            except ValueError:
                continue
            table["shape_broadcast"][key(list(a["shape"]), list(b["shape"]))] = list(out)
    return table


# ------------------------------------------------------------------------------ index items
def random_shape(rng: np.random.Generator, max_ndim: int = 4) -> tuple[int, ...]:
    ndim = int(rng.integers(0, max_ndim + 1))
    return tuple(int(rng.integers(1, 5)) for _ in range(ndim))


def position_calls(rng: np.random.Generator, trial: int) -> Case:
    calls = []
    for _ in range(CALLS):
        shape = random_shape(rng)
        strides = [int(rng.integers(0, 30)) for _ in shape]
        index = [int(rng.integers(0, n)) for n in shape]
        calls.append([index, strides, int(rng.integers(0, 50)) if trial else 0])
    return Case([calls], names=("calls",))


def to_index_calls(rng: np.random.Generator, trial: int) -> Case:
    calls = []
    for _ in range(CALLS):
        shape = random_shape(rng)
        calls.append([int(rng.integers(0, math.prod(shape))), list(shape)])
    return Case([calls], names=("calls",))


def broadcastable(rng: np.random.Generator, big: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``big``: some leading dimensions dropped, some set to 1."""
    drop = int(rng.integers(0, len(big) + 1))
    return tuple(1 if rng.random() < 0.4 else n for n in big[drop:])


def shape_broadcast_calls(rng: np.random.Generator, trial: int) -> Case:
    """Pairs that broadcast (dimensions dropped or 1), and one in four whose last dimensions
    differ and neither is 1."""
    calls = []
    for k in range(CALLS):
        big = tuple(int(rng.integers(2, 5)) for _ in range(int(rng.integers(0, 4))))
        a, b = broadcastable(rng, big), broadcastable(rng, big)
        if k % 4 == 3:
            n = int(rng.integers(2, 5))
            a, b = big[:-1] + (n,), (n + int(rng.integers(1, 3)),)
        calls.append([list(a), list(b)] if rng.random() < 0.5 else [list(b), list(a)])
    return Case([calls], names=("calls",))


def broadcast_index_calls(rng: np.random.Generator, trial: int) -> Case:
    calls = []
    for _ in range(CALLS):
        big = random_shape(rng)
        shape = broadcastable(rng, big)
        index = [int(rng.integers(0, n)) for n in big]
        calls.append([index, list(big), list(shape)])
    return Case([calls], names=("calls",))


def expected_index(runner: str, args: list[Any]) -> Any:
    """What one call of an index function must return (``"raised ValueError"`` for a shape
    pair that does not broadcast)."""
    if runner == "index_to_position":
        index, strides, offset = args
        return offset + sum(i * s for i, s in zip(index, strides, strict=True))
    if runner == "to_index":
        ordinal, shape = args
        return [int(i) for i in np.unravel_index(ordinal, shape)] if shape else []
    if runner == "shape_broadcast":
        try:
            return list(broadcast(tuple(args[0]), tuple(args[1])))
        except ValueError:
            return "raised ValueError"
    return small_index(*args)


@dataclass
class IndexCheck(Check):
    """A batch of calls of one index function, each compared exactly."""

    hint: str = ""

    def spec(self) -> dict[str, Any]:
        return {"runner": self.entry, "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        return {"values": [expected_index(self.entry, args) for args in case.args[0]]}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        got, want = received.get("values"), expected["values"]
        if not isinstance(got, list) or len(got) != len(want):
            return f"the grader could not read the results of {self.entry}"
        for args, g, w in zip(case.args[0], got, want, strict=True):
            call = f"{self.entry}({', '.join(_show(a) for a in args)})"
            if isinstance(w, str):
                if g != w:
                    shown = g if isinstance(g, str) else f"returned {_show(g)}"
                    return (f"{call} {shown}, but these shapes do not broadcast: raise a "
                            "ValueError that names both shapes")  # fmt: skip
                continue
            if isinstance(g, str):
                return f"{call} {g}; expected {_show(w)}"
            if np.shape(g) != np.shape(w) or not np.array_equal(np.asarray(g), np.asarray(w)):
                return f"{call} returned {_show(g)}, expected {_show(w)}{self.hint}"
        return None

    def passed(self, cases: Any) -> str:
        return f"{self.what}: {sum(len(c.args[0]) for c in cases)} random calls, all exact."


def _show(value: Any) -> str:
    return str(value.tolist() if isinstance(value, np.ndarray) else value)


# ------------------------------------------------------------------------------ kernel items
KINDS = ("contiguous", "permuted", "sliced", "broadcast", "mixed")


@dataclass
class KernelCase(Case):
    def describe(self) -> str:
        return str(self.hidden.get("what", "a storage"))


def map_case(rng: np.random.Generator, trial: int) -> Case:
    shape = [(3, 4), (2, 3, 4), (5,), (), (4, 1, 3)][trial % 5]
    kind = KINDS[trial % len(KINDS)]
    a = layout(rng, shape, kind)
    op = list(MAP_OPS)[trial % len(MAP_OPS)]
    what = f"strided_map({op}, a) with a {kind} storage a ({describe_layout(a)})"
    return KernelCase([a, op, tables([a], [tuple(shape)])], names=("a", "op"),
                      hidden={"what": what, "out": tuple(shape)})  # fmt: skip


def zip_case(rng: np.random.Generator, trial: int) -> Case:
    out = [(3, 4), (2, 3, 4), (4, 3), (2, 1, 3), (3,)][trial % 5]
    a_shape, b_shape = broadcastable(rng, out), broadcastable(rng, out)
    if trial % 2:
        a_shape = out  # one operand of the output's own shape, the other broadcast
    out = broadcast(a_shape, b_shape)
    kinds = (KINDS[trial % len(KINDS)], KINDS[(trial + 2) % len(KINDS)])
    a, b = layout(rng, a_shape, kinds[0]), layout(rng, b_shape, kinds[1])
    op = list(ZIP_OPS)[trial % len(ZIP_OPS)]
    what = (f"strided_zip({op}, a, b) with a {kinds[0]} a ({describe_layout(a)}) and a "
            f"{kinds[1]} b ({describe_layout(b)})")  # fmt: skip
    return KernelCase([a, b, op, tables([a, b], [out])], names=("a", "b", "op"),
                      hidden={"what": what, "out": out})  # fmt: skip


def reduce_case(rng: np.random.Generator, trial: int) -> Case:
    shape = [(3, 4), (2, 3, 4), (4, 2, 3), (5,), (3, 1, 2)][trial % 5]
    kind = KINDS[(trial + 1) % len(KINDS)]
    a = layout(rng, shape, kind)
    op = list(REDUCE_OPS)[trial % len(REDUCE_OPS)]
    if op == "maximum":  # all negative: a maximum that starts from 0 instead of -inf is wrong
        a["buffer"] = -1.0 - np.abs(a["buffer"])
    dim = int(rng.integers(len(shape)))
    kept = tuple(1 if d == dim else n for d, n in enumerate(shape))
    start = REDUCE_OPS[op][1]
    what = (f"strided_reduce({op}, a, dim={dim}, start={start}) with a {kind} a "
            f"({describe_layout(a)})")  # fmt: skip
    return KernelCase([a, dim, op, start, tables([a], [kept])], names=("a", "dim", "op", "start"),
                      hidden={"what": what, "out": kept})  # fmt: skip


@dataclass
class KernelCheck(Check):
    """A student's kernel on described storages: the values its result reads, against numpy."""

    hint: str = ""

    def spec(self) -> dict[str, Any]:
        return {"runner": self.entry, "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        if self.entry == "strided_map":
            a, op, _ = case.args
            return {"values": MAP_OPS[op](values(a))}
        if self.entry == "strided_zip":
            a, b, op, _ = case.args
            return {"values": ZIP_OPS[op](values(a), values(b))}
        a, dim, op, _start, _ = case.args
        return {"values": REDUCE_OPS[op][0](values(a), axis=dim, keepdims=True)}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        trial, want = f"on {case.describe()}", expected["values"]
        if "buffer" not in received:
            return (f"{self.entry} must return a StridedStorage (with buffer, shape, strides and "
                    f"offset), got {received.get('type')} {trial}")  # fmt: skip
        shape = tuple(received["shape"])
        if shape != want.shape:
            return (
                f"{self.entry} returned a storage of shape {shape}, expected {want.shape} {trial}"
            )
        try:
            got = read(received["buffer"], shape, received["strides"], received["offset"])
        except (IndexError, ValueError) as exc:
            return f"the storage {self.entry} returned cannot be read {trial}: {exc}"
        problem = self.compare(f"the result of {self.entry}", want, got, trial)
        return problem + self.hint if problem else None

    def passed(self, cases: Any) -> str:
        kinds = sorted({k for c in cases for k in KINDS if k in c.describe()})
        return f"{self.what}: passed on {len(cases)} storages ({', '.join(kinds)} layouts)."


# ------------------------------------------------------------------------------ authorship
#: The library's index arithmetic and loops, by the names a notebook could reach them.
LIBRARY = {"index_to_position", "to_index", "broadcast_index", "broadcast_shape", "position_table",
           "positions", "to_numpy", "unravel_index", "ravel_multi_index", "broadcast_shapes",
           "as_strided", "py_func"}  # fmt: skip
OWN = {"index_to_position", "to_index", "broadcast_index"}  # names the notebook defines itself


def library_strided(sources: Iterable[str]) -> list[str]:
    """One line if the student code reaches for the library's (or numpy's) index arithmetic or
    strided loops: an import of one of :data:`LIBRARY` from torchlight or numpy, an attribute
    of that name (``torchlight.shape.to_index``, ``np.unravel_index``, ``a.positions()``), a
    method ``.map``/``.zip``/``.reduce`` of a backend, or ``getattr`` with one of those names."""
    found: list[str] = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                ("torchlight", "numpy")
            ):
                found += [f"imports {a.name} from {node.module}" for a in node.names
                          if a.name in LIBRARY | {"*", "shape", "StridedBackend"}]  # fmt: skip
            elif isinstance(node, ast.Attribute) and node.attr in LIBRARY:
                found.append(f"uses .{node.attr}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in LIBRARY | {"map", "zip", "reduce"}
            ):
                found.append(f"names {node.args[1].value!r} through getattr")
    if not found:
        return []
    return [f"reaches for the library's index arithmetic or strided loops "
            f"({', '.join(dict.fromkeys(found))}): review by hand whether the student wrote "
            "them"]  # fmt: skip


FINDINGS = library_strided


def checks() -> dict[str, Check]:
    return {
        "test_index_to_position": IndexCheck(
            "index_to_position",
            ("index_to_position",),
            position_calls,
            trials=2,
            what="index_to_position",
            hint=": the position is offset + sum(index[d] * strides[d])",
        ),
        "test_to_index": IndexCheck(
            "to_index",
            ("to_index",),
            to_index_calls,
            trials=2,
            what="to_index",
            hint=" (row-major: the last dimension moves fastest, as np.unravel_index)",
        ),
        "test_shape_broadcast": IndexCheck(
            "shape_broadcast",
            ("shape_broadcast",),
            shape_broadcast_calls,
            trials=2,
            what="shape_broadcast",
            hint=" (align the shapes on the right; a missing dimension counts as 1)",
        ),
        "test_broadcast_index": IndexCheck(
            "broadcast_index",
            ("broadcast_index",),
            broadcast_index_calls,
            trials=2,
            what="broadcast_index",
            hint=(
                " (drop the big index's extra leading dimensions; a dimension of size 1 in "
                "shape reads index 0)"
            ),
        ),
        "test_map": KernelCheck(
            "strided_map",
            ("strided_map",),
            map_case,
            trials=5,
            what="strided_map",
            hint=(
                ". Read input element i at index_to_position(i, a.strides, a.offset), not at "
                "buffer position i: a view's elements are not in its buffer in order"
            ),
        ),
        "test_zip": KernelCheck(
            "strided_zip",
            ("strided_zip",),
            zip_case,
            trials=5,
            what="strided_zip",
            hint=(
                ". Each operand reads its own element: broadcast_index(index, out_shape, "
                "a.shape), then a's strides and offset"
            ),
        ),
        "test_reduce": KernelCheck(
            "strided_reduce",
            ("strided_reduce",),
            reduce_case,
            trials=5,
            what="strided_reduce",
            hint=". Start each output element from `start`, then combine along `dim` only",
        ),
    }


CHECKS = checks()
