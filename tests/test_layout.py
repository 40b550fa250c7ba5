"""The library's layering (issue 23), measured by tools/import_graph.py on the real source.

The issue's "Show": no circle except the Tensor <-> ops one, at most 10 imports that run
upward, no ``noqa: E402`` in ``torchlight/``. Beyond the issue: no module below ``nn/``
imports ``nn``, ``nn/functional.py`` only re-exports and no topic file imports it, ``nn/`` and
``train/`` have no import inside a function, and no Function in ``ops/`` inherits another one
to reuse its code (composition: ``Min`` hands its steps to ``Max``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools" / "import_graph.py")
assert spec is not None and spec.loader is not None
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)

REPORT = import_graph.report()
EDGES, FILES = import_graph.graph()


def test_every_module_has_a_layer() -> None:
    unlisted = [module for module in FILES if not import_graph.listed(module)]
    assert unlisted == [], f"add these to LAYERS in tools/import_graph.py: {unlisted}"


def test_at_most_ten_imports_run_upward() -> None:
    assert len(REPORT["upward"]) <= import_graph.MAX_UPWARD, "\n".join(REPORT["upward"])


def test_no_circle_but_the_tensor_and_its_ops() -> None:
    assert REPORT["bad_circles"] == [], "\n".join(REPORT["bad_circles"])


def test_no_late_import_noqa() -> None:
    assert REPORT["late"] == [], "\n".join(REPORT["late"])


def test_no_function_inherits_another_to_reuse_it() -> None:
    import inspect
    import pkgutil

    import torchlight.ops
    from torchlight.autograd import Function

    reused = []
    for info in pkgutil.iter_modules(torchlight.ops.__path__):
        module = importlib.import_module(f"torchlight.ops.{info.name}")
        for name, cls in vars(module).items():
            ours = inspect.isclass(cls) and cls.__module__ == module.__name__
            if ours and issubclass(cls, Function) and cls.__bases__ != (Function,):
                reused.append(f"{module.__name__}.{name}{cls.__bases__}")
    assert reused == [], "\n".join(reused)


def test_nn_and_train_import_nothing_inside_a_function() -> None:
    inner = [i for i in REPORT["inner"] if i.startswith(import_graph.INNER_FREE)]
    assert inner == [], "\n".join(inner)


def test_nothing_below_nn_imports_nn() -> None:
    nn_layer = import_graph.layer("torchlight.nn")
    below = [
        f"{module} imports {target}"
        for module, targets in EDGES.items()
        if import_graph.layer(module) < nn_layer
        for target, _ in targets
        if target == "torchlight.nn" or target.startswith("torchlight.nn.")
    ]
    assert below == [], "\n".join(below)


def test_functional_is_a_face_no_topic_file_imports() -> None:
    path = FILES["torchlight.nn.functional"]
    tree = ast.parse(path.read_text())
    defined = [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    ]
    assert defined == [], f"nn/functional.py defines {defined}: define them in their topic file"
    importers = [
        module
        for module, targets in EDGES.items()
        if any(target == "torchlight.nn.functional" for target, _ in targets)
        and module.startswith("torchlight.nn.")
    ]
    assert importers == [], f"topic files import nn.functional: {importers}"


def test_the_graph_sees_an_upward_import_and_a_circle(tmp_path: pathlib.Path) -> None:
    """The measuring stick itself: an ops module importing nn is upward, and two modules that
    import each other form a circle (so the counts above can fail)."""
    assert import_graph.layer("torchlight.ops.losses") < import_graph.layer("torchlight.nn.loss")
    edges = {"a": [("b", 1)], "b": [("a", 1)], "c": []}
    assert import_graph.circles(edges) == [["a", "b"]]
    late = tmp_path / "late.py"
    late.write_text("def f():\n    from torchlight import nn\n\n\nimport torchlight.ops\n")
    known = {"torchlight.nn", "torchlight.ops"}
    assert import_graph.imports(late, known, inner_only=True) == [("torchlight.nn", 2)]
    assert sorted(import_graph.imports(late, known)) == [
        ("torchlight.nn", 2),
        ("torchlight.ops", 5),
    ]


GRADER = import_graph.grader_report()


def test_the_grading_side_has_four_floors_and_no_import_runs_upward() -> None:
    """sandbox < checks < nbgrader < course (issue 39 item 8): the sandbox, the trust boundary,
    imports nothing above it; every module sits on a floor."""
    assert GRADER["unlisted"] == [], f"put these under a floor: {GRADER['unlisted']}"
    assert GRADER["upward"] == [], "\n".join(GRADER["upward"])


def test_the_grading_side_has_no_circle_and_no_sys_path_edit() -> None:
    assert GRADER["circles"] == [], "\n".join(GRADER["circles"])
    assert GRADER["sys_path"] == [], "\n".join(GRADER["sys_path"])
    assert GRADER["late"] == [], "\n".join(GRADER["late"])


def test_grading_a_class_has_no_scripts_left_in_tools() -> None:
    """Grading a class is the package ``torchlight_grader.course`` (``python -m`` entry points),
    not scripts in tools/ that import each other."""
    left = sorted(
        p.name for p in (ROOT / "tools").glob("*.py") if "course" in p.name or "homework" in p.name
    )
    assert left == [], left


def test_every_csv_the_grading_side_writes_goes_through_one_writer() -> None:
    """Issue 39 item 7: ``torchlight_grader/nbgrader/spreadsheet.py`` is the only CSV writer
    (its formula guard then covers every CSV: exports, the collect report, integrity.csv)."""
    import re

    writers = [
        f"{path.relative_to(ROOT)}:{i}"
        for path in sorted((ROOT / "torchlight_grader").rglob("*.py"))
        if path.name != "spreadsheet.py"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"csv\.(writer|DictWriter)\b|\bwriterows?\(", line)
    ]
    assert writers == [], "write CSV files with spreadsheet.write_rows:\n" + "\n".join(writers)


def test_the_tensor_is_written_in_its_class_bodies_one_section_per_family() -> None:
    """Issue 38: the Tensor is read in two class bodies, ``Tensor`` (tensor.py) and the
    ``TensorOps`` it inherits (tensor_methods.py); nothing assigns a member at import (each
    function's qualified name is its class's), each family of ops has one section, and the old
    module aliases are gone."""
    import re

    import torchlight
    from torchlight.tensor import Tensor
    from torchlight.tensor_methods import TensorOps

    outside = []
    for klass in (Tensor, TensorOps):
        for name, value in vars(klass).items():
            function = getattr(value, "fget", value)
            code = getattr(function, "__code__", None)
            if code is not None and not code.co_qualname.startswith(
                (f"{klass.__name__}.", "TensorOps.", "Tensor.")
            ):
                outside.append(f"{klass.__name__}.{name} is {code.co_qualname}")
    assert outside == [], outside
    methods = (ROOT / "torchlight" / "tensor_methods.py").read_text()
    sections = re.findall(r"^    # -{10,} (.+)$", methods, flags=re.M)
    assert len(sections) == len(set(sections)) >= 6, sections
    assert not re.search(r"\bops_(math|reduce|shape|index|losses)\b", methods)
    assert not hasattr(torchlight, "functions") and "functions" not in torchlight.__all__
    assert not (ROOT / "torchlight" / "tensor_compat.py").exists()
