"""The engine a student reads (issue 23): the lines of one backward pass, counted on the real
source with their docstrings, and the shape of the chain rule.

One backward pass of ``(a * b).sum().backward()`` runs ``Tensor.backward`` -> ``backpropagate``
(``seed``, ``backward_steps``, ``topological_sort``) -> ``History.chain_rule`` (its helpers
``_one_per_parent`` and ``_fitted``) -> one Function (``Mul``), whose node ``Function.apply``
built with a ``Context``; the leaves' ``accumulate_grad``. Counted: every definition that runs,
whole (classes with all their methods and docstrings). Not counted: the ``Variable`` protocol
(typing only, never runs) and the module docstrings. Before issue 23: 416 and 153 lines.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import sys
import textwrap
from typing import Any

import torchlight
from torchlight.autograd import Function
from torchlight.autograd.function import History

SRC = pathlib.Path(torchlight.__file__).resolve().parent

ONE_BACKWARD_PASS = {
    "tensor.py": ["Tensor.backward", "Tensor.accumulate_grad"],
    "autograd/engine.py": ["backpropagate", "seed", "backward_steps", "topological_sort"],
    "autograd/function.py": [
        "Context",
        "History",
        "_one_per_parent",
        "_fitted",
        "Function",
        "_marked",
    ],
    "ops/arithmetic.py": ["Mul"],
}
APPLY_WALK_CHAIN_RULE = {
    "autograd/function.py": ["Function.apply", "History.chain_rule"],
    "autograd/engine.py": ["topological_sort", "backward_steps", "backpropagate"],
}


def definition_lines(path: pathlib.Path, qualname: str) -> int:
    """Lines of the class or function ``qualname`` in ``path``, decorators and docstring in."""
    body: list[ast.stmt] = ast.parse(path.read_text()).body
    node: ast.stmt | None = None
    for part in qualname.split("."):
        node = next(
            (n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part),
            None,
        )
        assert node is not None, f"{qualname} is not defined in {path}: update the list above"
        body = node.body  # type: ignore[attr-defined]
    assert node is not None and node.end_lineno is not None
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return node.end_lineno - first + 1


def counted(spec: dict[str, list[str]]) -> dict[str, int]:
    return {f"{f}:{q}": definition_lines(SRC / f, q) for f, qs in spec.items() for q in qs}


def test_one_backward_pass_reads_at_most_250_lines() -> None:
    lines = counted(ONE_BACKWARD_PASS)
    assert sum(lines.values()) <= 250, lines


def test_apply_walk_and_chain_rule_read_at_most_90_lines() -> None:
    lines = counted(APPLY_WALK_CHAIN_RULE)
    assert sum(lines.values()) <= 90, lines


def test_the_counter_counts_docstrings_and_decorators(tmp_path: pathlib.Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        'class A:\n    @staticmethod\n    def f():\n        """Doc."""\n        return 1\n'
    )
    assert definition_lines(source, "A.f") == 4 and definition_lines(source, "A") == 5


def test_one_way_to_seed_the_root() -> None:
    """Tensor.backward hands its gradient (or None) to backpropagate, which seeds the root with
    ``seed``, as autograd.grad and the viewer's replay do."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(torchlight.Tensor.backward)))
    calls = [ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert "backpropagate" in calls, calls
    assert not any("ones" in c or "numpy" in c or "Tensor" in c for c in calls), calls
    for module in ("autograd/engine.py", "viz/replay.py"):
        assert "seed(" in (SRC / module).read_text(), module


def test_chain_rule_neither_swaps_the_context_nor_reenters_itself() -> None:
    tree = ast.parse(textwrap.dedent(inspect.getsource(History.chain_rule)))
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    stores = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    stores = [s for s in stores if s.startswith("ctx.") or s.startswith("self.ctx.")]
    assert not any("chain_rule" in c or "no_grad" in c for c in calls), calls
    assert all(s in ("self.ctx",) for s in stores), stores
    assert "_GradMode" not in ast.unparse(tree) and "grad_enabled" not in ast.unparse(tree)


def all_functions() -> list[type]:
    """Every Function subclass the library defines (imported through its public modules): each
    found in its module by its name. A Function that a doctest defined is not one: ``Cube`` of
    ``autograd/function.py``'s docstring is named after that module and stays a subclass until
    the garbage collector frees it (these tests failed when no collection came between)."""
    import torchlight.nn  # noqa: F401  (the nn modules import their ops)

    found, todo = [], list(Function.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("torchlight.") and _in_its_module(cls):
            found.append(cls)
    return found


def _in_its_module(cls: type) -> bool:
    found: Any = sys.modules.get(cls.__module__)
    for name in cls.__qualname__.split("."):
        found = getattr(found, name, None)
    return found is cls


def test_no_function_body_tests_grad_mode() -> None:
    """Item 6: a backward written in tensor math is differentiable as it stands; one that is
    not is marked @once_differentiable. No forward/backward branches on grad mode."""
    functions = all_functions()
    assert len(functions) > 50  # (the search finds the library's Functions)
    # activation checkpointing's backward is its forward run again with recording on: that is
    # the op (PyTorch's torch.utils.checkpoint), not a branch on grad mode
    recomputes = {"torchlight.utils.checkpoint.CheckpointFunction.backward"}
    branching = []
    for cls in functions:
        for name in ("forward", "backward"):
            method = cls.__dict__.get(name)
            if method is None:
                continue
            code = inspect.getsource(
                inspect.unwrap(method.__func__ if hasattr(method, "__func__") else method)
            )
            where = f"{cls.__module__}.{cls.__name__}.{name}"
            if where in recomputes:
                continue
            if "is_grad_enabled" in code or "_GradMode" in code or "enable_grad" in code:
                branching.append(where)
    assert branching == [], branching
