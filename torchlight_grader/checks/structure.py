"""Outside the sandbox, from a submission's structure (its AST), not its spelling: answers whose
derivative reaches for the library's own autograd are flagged for review (issue 24 item 4).

An item that asks for a ``backward`` must be scored on a derivative the student wrote. A
``backward`` (or any function it calls by name, defined anywhere in the notebook's student
code) that drives autograd itself -- calls ``.backward(...)``, ``.requires_grad_()``,
``enable_grad``/``set_grad_enabled``, uses a ``.grad``, passes ``requires_grad=``, or names any
of these through ``getattr`` with a constant -- is flagged; so is a ``backward`` that evaluates
the op again (calls ``forward``, ``apply`` or its own class: a difference quotient), and one that
calls ``eval``/``exec``/``compile``/``__import__``; so is one that computes a difference
quotient (the same function or operator subtracted at two arguments, ``f(x + h) - f(x - h)``,
Richardson's combinations of them, or a numerical-derivative helper such as ``np.gradient``),
whatever its step (issue 24 item 5). What no static check can see (a name
built at run time, ``eval`` of a string) is not covered: see assignments/README.md.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable

AUTOGRAD_CALLS = {"backward", "requires_grad_", "enable_grad", "set_grad_enabled"}
DYNAMIC = {"eval", "exec", "compile", "__import__"}


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def references(
    sources: Iterable[str],
    names: set[str],
    modules: tuple[str, ...] = ("torchlight",),
    extra: Callable[[ast.AST], str | None] | None = None,
) -> list[str]:
    """How the code in ``sources`` reaches for ``names``, each way once and in order: an import of
    one of them (or ``*``) from a module under ``modules``, an attribute of that name, ``getattr``
    with it as a constant; ``extra(node)`` names what else a notebook looks for (the ``@``
    operator, say). The notebooks that ask students to write what the library has flag these
    (a2c's kernels, a6's tokenizer, a7's attention and optimizers)."""
    found: list[str] = []
    for source in sources:
        tree = _parse(source)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(modules):
                found += [f"imports {a.name} from {node.module}" for a in node.names
                          if a.name in names or a.name == "*"]  # fmt: skip
            elif isinstance(node, ast.Attribute) and node.attr in names:
                found.append(f"uses .{node.attr}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in names
            ):
                found.append(f"names {node.args[1].value!r} through getattr")
            elif extra is not None and (more := extra(node)):
                found.append(more)
    return list(dict.fromkeys(found))


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _uses(fn: ast.AST) -> tuple[list[str], set[str]]:
    """What in ``fn`` drives autograd, and the names it calls."""
    found: list[str] = []
    called: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            name = _name(node.func)
            if name:
                called.add(name)
            if name in AUTOGRAD_CALLS:
                found.append(f"calls {name}()")
            if name in DYNAMIC:
                found.append(f"calls {name}()")
            if name == "getattr" and len(node.args) >= 2:
                arg = node.args[1]
                if isinstance(arg, ast.Constant) and str(arg.value) in AUTOGRAD_CALLS:
                    found.append(f"getattr(..., {arg.value!r})")
            for kw in node.keywords:
                if kw.arg == "requires_grad":
                    found.append("passes requires_grad=")
        elif isinstance(node, ast.Attribute) and node.attr in ("grad", "grad_fn"):
            found.append(f"uses .{node.attr}")
        if isinstance(node, ast.Call) and _name(node.func) in NUMERIC:
            found.append(f"calls {_name(node.func)}() (a numerical derivative)")
        elif _difference(node):
            found.append("subtracts the same expression at two points (a difference quotient)")
    return found, called


#: Library calls that compute a numerical derivative (numpy, scipy, mpmath, torchlight.testing).
NUMERIC = {"gradient", "diff", "derivative", "approx_fprime", "central_difference", "diffs",
           "numerical_gradient", "approx_derivative"}  # fmt: skip


def _difference(node: ast.AST) -> bool:
    """``f(u) - f(v)`` or ``(u op w) - (v op w)``: one function or operator on both sides of a
    subtraction at arguments that differ (what every difference quotient, Richardson's too,
    computes). ``1 - s``, ``g - g.mean()``, ``x - m`` are not of this shape."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
        return False
    left, right = node.left, node.right
    if isinstance(left, ast.UnaryOp) and isinstance(right, ast.UnaryOp):
        left, right = left.operand, right.operand
    if isinstance(left, ast.Call) and isinstance(right, ast.Call):
        same = ast.dump(left.func) == ast.dump(right.func)
        return same and bool(left.args) and _dump(left.args) != _dump(right.args)
    if isinstance(left, ast.BinOp) and isinstance(right, ast.BinOp):
        if type(left.op) is not type(right.op) or isinstance(left.op, ast.Add | ast.Sub):
            return False
        pairs = ((left.left, right.left), (left.right, right.right))
        differ = [ast.dump(u) != ast.dump(v) for u, v in pairs]
        # one operand shared, the other shifted: (a + h) * b - (a - h) * b
        shifted = [
            isinstance(u, ast.BinOp) and isinstance(u.op, ast.Add | ast.Sub)
            for (u, v), d in zip(pairs, differ, strict=True)
            if d
        ]
        return sum(differ) == 1 and all(shifted)
    return False


def _dump(nodes: list[ast.expr]) -> list[str]:
    return [ast.dump(n) for n in nodes]


#: What a backward calls when it evaluates the op again (a difference quotient, issue 24 item 5).
REEVALUATES = {"forward", "apply"}


def library_autograd(sources: Iterable[str], allowed: Iterable[str] = ()) -> list[str]:
    """One line per ``backward`` in ``sources`` that drives autograd itself (directly or through
    functions of the same code that it calls by name), except the backward of the classes in
    ``allowed``: those a notebook asks to drive autograd (a8's ``Checkpoint`` recomputes its
    forward with a graph, by design)."""
    allowed = set(allowed)
    defs: dict[str, list[ast.AST]] = {}
    backwards: list[tuple[str, ast.AST]] = []
    for source in sources:
        tree = _parse(source)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                name = getattr(node, "name", "<lambda>")
                defs.setdefault(name, []).append(node)
            if isinstance(node, ast.ClassDef):
                for item in node.body if node.name not in allowed else ():
                    if isinstance(item, ast.FunctionDef) and item.name == "backward":
                        backwards.append((node.name, item))
    lines = []
    for owner, fn in backwards:
        seen: set[int] = set()
        todo, found = [fn], []
        while todo:
            here = todo.pop()
            if id(here) in seen:
                continue
            seen.add(id(here))
            uses, called = _uses(here)
            found += uses
            for name in sorted(called & (REEVALUATES | {owner})):
                found.append(f"evaluates the op again ({name}(), as a numerical derivative does)")
            for name in called:
                todo += defs.get(name, [])
        numeric = sorted({f for f in found if "numerical" in f or "difference quotient" in f})
        autograd = sorted(set(found) - set(numeric))
        if autograd:
            lines.append(
                f"{owner}.backward drives torchlight's own autograd ({', '.join(autograd)}): "
                "review by hand whether the student wrote the derivative"
            )
        if numeric:
            lines.append(
                f"{owner}.backward computes a numerical derivative ({', '.join(numeric)}): "
                "review by hand whether the student wrote the derivative"
            )
    return lines
