"""Outside the sandbox, from a submission's structure (its AST), not its spelling: answers whose
derivative reaches for the library's own autograd are flagged for review (issue 24 item 4).

An item that asks for a ``backward`` must be scored on a derivative the student wrote. A
``backward`` (or any function it calls by name, defined anywhere in the notebook's student
code) that drives autograd itself -- calls ``.backward(...)``, ``.requires_grad_()``,
``enable_grad``/``set_grad_enabled``, uses a ``.grad``, passes ``requires_grad=``, or names any
of these through ``getattr`` with a constant -- is flagged; so is a ``backward`` that evaluates
the op again (calls ``forward``, ``apply`` or its own class: a difference quotient), and one that
calls ``eval``/``exec``/``compile``/``__import__``. What no static check can see (a name
built at run time, ``eval`` of a string) is not covered: see assignments/README.md.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

AUTOGRAD_CALLS = {"backward", "requires_grad_", "enable_grad", "set_grad_enabled"}
DYNAMIC = {"eval", "exec", "compile", "__import__"}


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


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
    return found, called


#: What a backward calls when it evaluates the op again (a difference quotient, issue 24 item 5).
REEVALUATES = {"forward", "apply"}


def library_autograd(sources: Iterable[str]) -> list[str]:
    """One line per ``backward`` in ``sources`` that drives autograd itself (directly or through
    functions of the same code that it calls by name)."""
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
                for item in node.body:
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
                found.append(f"evaluates the op again ({name}(), as a numerical gradient does)")
            for name in called:
                todo += defs.get(name, [])
        if found:
            what = ", ".join(sorted(set(found)))
            lines.append(
                f"{owner}.backward drives torchlight's own autograd ({what}): review by hand "
                "whether the student wrote the derivative"
            )
    return lines
