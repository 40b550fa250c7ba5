"""The library's import graph, measured: which imports run upward, which modules form circles.

Each folder of ``torchlight/`` is a layer (the design notes, section 3) and may import only the layers
below it. This script reads every module's imports (top-level and the late ones inside
functions; ``if TYPE_CHECKING:`` imports are for the type checker only and are left out), ranks
each module by its layer, and prints:

- every import that runs upward (from a lower layer to a higher one);
- every circle (a strongly connected group of modules), and whether it is the allowed one:
  the Tensor and its ops, which call each other by nature (MiniTorch has the same loop);
- every ``noqa: E402`` (an import placed late to dodge a circle);
- every import of a torchlight module inside a function (a late import: it hides an edge of
  the graph from the reader until the function runs). ``torchlight/nn/`` and
  ``torchlight/train/`` have none; the rest are listed.

Run: ``python tools/import_graph.py`` (exit status 1 when a rule of issue 23 is broken).
``tests/test_layout.py`` checks the same numbers.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "torchlight"

#: Layers from the bottom up; a module's layer is the longest prefix listed here.
LAYERS: list[tuple[str, ...]] = [
    (
        "torchlight.shape",
        "torchlight.dtypes",
        "torchlight.threads",
        "torchlight.distributed",
        "torchlight.onnx",
    ),
    ("torchlight.backends", "torchlight.cuda", "torchlight.device", "torchlight.accelerator"),
    ("torchlight.autograd",),
    (  # the Tensor and its ops: one layer (the inherent loop)
        "torchlight.tensor",
        "torchlight.tensor_methods",
        "torchlight.creation",
        "torchlight.random",  # creation's random half: Generator, randint, randperm, multinomial
        "torchlight.printing",
        "torchlight.return_types",
        "torchlight.ops",
        "torchlight.functional_forms",
        "torchlight.pytorch_names",
        "torchlight.serialization",
        "torchlight.testing",
    ),
    ("torchlight.nn",),
    ("torchlight.optim", "torchlight.data", "torchlight.utils", "torchlight.amp"),
    ("torchlight.train", "torchlight.viz"),
    ("torchlight", "torchlight.compat"),  # the package face, and the `import torch` shim on it
]
ALLOWED_CIRCLE_LAYER = 3
MAX_UPWARD = 10
#: Folders with no import inside a function.
INNER_FREE = ("torchlight/nn/", "torchlight/train/")


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    if module == "torchlight":  # the public face: what the apps (top layer) import as `tl`
        return len(LAYERS) - 2
    best, rank = -1, len(LAYERS) - 1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best and p != "torchlight":
                best, rank = len(p), i
    return rank


def listed(module: str) -> bool:
    """Whether ``module`` is named in :data:`LAYERS` (a module that is not sits at the top)."""
    return module == "torchlight" or any(
        module == p or module.startswith(p + ".") for ps in LAYERS for p in ps if p != "torchlight"
    )


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return True
    return False


@functools.cache
def _parsed(path: pathlib.Path) -> tuple[ast.Module, dict[ast.AST, ast.AST]]:
    """The file's syntax tree and each node's parent (parsed once per run)."""
    tree = ast.parse(path.read_text())
    return tree, {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def imports(path: pathlib.Path, known: set[str], inner_only: bool = False) -> list[tuple[str, int]]:
    """(imported torchlight module, line) for each import in ``path`` (``inner_only``: only
    those inside a function)."""
    tree, parents = _parsed(path)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if _type_checking_only(node, parents) or (inner_only and not _in_function(node, parents)):
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from torchlight.nn import init` imports the module torchlight.nn.init
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                for a in node.names
            ]
        else:
            continue
        found += [(n, node.lineno) for n in names if n in known]
    return found


def graph() -> tuple[dict[str, list[tuple[str, int]]], dict[str, pathlib.Path]]:
    files = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
    known = set(files)
    return {m: imports(p, known) for m, p in files.items()}, files


def circles(edges: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w, _ in edges[v]:
            if w == v or w.startswith(v + "."):  # a package importing its own parts
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def report() -> dict[str, list[str]]:
    edges, files = graph()
    upward = [
        f"{m} (line {line}) imports {target}"
        for m, targets in edges.items()
        for target, line in targets
        if m != "torchlight" and layer(target) > layer(m)
    ]
    groups = circles(edges)
    bad_circles = [
        " <-> ".join(g) for g in groups if any(layer(m) != ALLOWED_CIRCLE_LAYER for m in g)
    ]
    late = [
        f"{files[m].relative_to(ROOT.parent)}:{i}"
        for m in files
        for i, text in enumerate(files[m].read_text().splitlines(), 1)
        if "noqa: E402" in text
    ]
    known = set(files)
    inner = [
        f"{files[m].relative_to(ROOT.parent)}:{line} imports {target}"
        for m in sorted(files)
        for target, line in imports(files[m], known, inner_only=True)
    ]
    return {
        "upward": sorted(upward),
        "circles": [" <-> ".join(g) for g in groups],
        "bad_circles": bad_circles,
        "late": late,
        "inner": inner,
    }


# ------------------------------------------------------------------- the grading side (issue 39)
GRADER_ROOT = ROOT.parent / "torchlight_grader"
#: The grading side's floors from the bottom up: where student code runs (the trust boundary),
#: what is graded, what nbgrader loads, grading a whole class; the package face on top.
GRADER_LAYERS = ["sandbox", "checks", "nbgrader", "course"]
#: The one place a sys.path edit is allowed: the sandbox's own program, run by its path inside
#: the sandbox (``python -I``), where the grader's package is not installed.
GRADER_SYS_PATH_OK = ("torchlight_grader/sandbox/inside/",)


def grader_layer(module: str) -> int:
    """0 (sandbox) to 3 (course); the package face ``torchlight_grader`` is 4; -1: unlisted."""
    if module == "torchlight_grader":
        return len(GRADER_LAYERS)
    parts = module.split(".")
    return GRADER_LAYERS.index(parts[1]) if parts[1:2] and parts[1] in GRADER_LAYERS else -1


def grader_report() -> dict[str, list[str]]:
    """The grading side's layering: unlisted modules, upward imports (late ones included: they
    are edges too when the function runs), circles, ``sys.path`` edits and ``noqa: E402``."""
    files = {module_name(p): p for p in sorted(GRADER_ROOT.rglob("*.py"))}
    known = set(files)
    edges = {m: imports(p, known) for m, p in files.items()}
    where = {m: str(p.relative_to(ROOT.parent)) for m, p in files.items()}
    sys_path = [
        f"{where[m]}:{i}"
        for m in files
        if not where[m].startswith(GRADER_SYS_PATH_OK)
        for i, text in enumerate(files[m].read_text().splitlines(), 1)
        if "sys.path.insert" in text or "sys.path[" in text or "sys.path.append" in text
    ]
    return {
        "unlisted": [m for m in files if grader_layer(m) < 0],
        "upward": sorted(
            f"{where[m]}:{line} imports {target}"
            for m, targets in edges.items()
            for target, line in targets
            if grader_layer(target) > grader_layer(m)
        ),
        "circles": [" <-> ".join(g) for g in circles(edges)],
        "sys_path": sys_path,
        "late": [
            f"{where[m]}:{i}"
            for m in files
            for i, text in enumerate(files[m].read_text().splitlines(), 1)
            if "noqa: E402" in text
        ],
    }


def main() -> int:
    g = grader_report()
    print("the grading side (torchlight_grader/: sandbox < checks < nbgrader < course):")
    for key, lines in g.items():
        print(f"  {key}: {len(lines)}")
        for line in lines:
            print("     ", line)
    grader_ok = not any(g.values())
    r = report()
    for key, title in [
        ("upward", f"imports that run upward (at most {MAX_UPWARD})"),
        ("circles", "circles (only the Tensor <-> ops one is allowed)"),
        ("late", "noqa: E402 (none allowed)"),
        ("inner", "imports inside a function (none in nn/ and train/)"),
    ]:
        print(f"{title}: {len(r[key])}")
        for line in r[key]:
            print("   ", line)
    in_apps = [i for i in r["inner"] if i.startswith(INNER_FREE)]
    ok = len(r["upward"]) <= MAX_UPWARD and not r["bad_circles"] and not r["late"] and not in_apps
    print("OK" if ok else "the layering rules of issue 23 are broken")
    print("grading side OK" if grader_ok else "the grading side's layering rules are broken")
    return 0 if ok and grader_ok else 1


if __name__ == "__main__":
    sys.exit(main())
