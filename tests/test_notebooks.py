"""The tutorials: built from their sources, runnable top to bottom, with outputs that reproduce.

- Each ``notebooks/src/NN_*.py`` (jupytext) has a built ``notebooks/NN_*.ipynb`` with the same
  cells, every code cell executed (``make notebooks`` rebuilds them).
- ``pytest --nbval`` re-runs every notebook on a fresh kernel and compares each output with the
  stored one (text, HTML and SVG; widget views are skipped by nbval), after the substitutions in
  ``tests/nbval_sanitize.cfg``. So every printed example in the tutorials is also a regression
  test of the library.
- Tutorial 2 mirrors the published docs page: same headings, in order, same examples.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
SOURCES = sorted((NOTEBOOKS / "src").glob("[0-9]*.py"))

TUTORIALS = [
    "01_tensors",
    "02_autograd",
    "03_neural_networks",
    "04_backends_and_gpu",
    "05_convolutions",
    "06_attention_and_transformers",
    "07_recurrent_networks",
    "08_language_models",
    "09_inference_and_efficiency",
]

#: The headings of the published docs page "Tutorial 2: Autograd", in order
#: (spec/tutorial-2-autograd.txt); the notebook must use the same ones.
DOCS_HEADINGS = [
    "Tutorial 2: Autograd",
    "How gradients work",
    "The computation graph",
    "`backward()`",
    "Leaf vs. intermediate tensors",
    "Detach, zero_grad, cloning",
    "Checking gradients manually",
    "Autograd internals (under the hood)",
    "Next",
]

#: Code lines of the page's examples; each must appear verbatim in a code cell of the notebook.
DOCS_CODE = [
    "x = tl.tensor([2.0, 3.0], requires_grad=True)",
    "y = (x ** 2).sum()   # y = x1^2 + x2^2",
    "y.backward()          # seed gradient = 1.0",
    "b = a + a          # History: Add, parents=(a, a)",
    "c = b * a          # History: Mul, parents=(b, a)",
    "loss = model(x).mse_loss(target)",
    "loss.backward()          # populates .grad on every leaf with requires_grad=True",
    "a = tl.tensor([1.0, 2.0], requires_grad=True)  # leaf",
    "b = a * 2                                       # intermediate",
    "c = a.detach()    # shares storage, no grad",
    "x.zero_grad_()                          # in-place: sets grad to zeros",
    "detached = x.detach()                   # new tensor, same data, no graph",
    "cloned = x.clone()                      # fresh copy in the graph",
    "from torchlight.autograd import central_difference",
    "def f(x): return (x ** 2).sum()",
    "x_val = [3.0, 4.0]",
    "print(central_difference(lambda *xs: f(tl.tensor(xs)), *x_val, arg=i))",
]


def _load_builder():
    spec = importlib.util.spec_from_file_location(
        "build_notebooks", ROOT / "tools" / "build_notebooks.py"
    )
    assert spec is not None and spec.loader is not None, "tools/build_notebooks.py is missing"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cells(name: str) -> list[dict]:
    return json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]


def _joined(text: str | list[str]) -> str:
    """nbformat stores multi-line strings either whole or as a list of lines."""
    return "".join(text) if isinstance(text, list) else text


def _text(cell: dict) -> str:
    return _joined(cell["source"])


def test_every_tutorial_has_a_source():
    assert [p.stem for p in SOURCES] == TUTORIALS


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_built_notebook_is_current(source):
    why = _load_builder().stale(source)
    assert not why, f"{why}; run `make notebooks`"


def test_build_merges_stream_chunks_so_outputs_do_not_depend_on_flush_timing():
    nbformat = pytest.importorskip("nbformat")
    out = nbformat.v4.new_output
    cell = nbformat.v4.new_code_cell("for i in range(3): print(i)")
    cell.outputs = [
        out("stream", name="stdout", text="0\n"),
        out("stream", name="stdout", text=["1\n", "2"]),
        out("stream", name="stdout", text="\n"),
        out("stream", name="stderr", text="warned\n"),
        out("execute_result", data={"text/plain": "3"}, execution_count=1),
        out("stream", name="stdout", text="after\n"),
    ]
    nb = nbformat.v4.new_notebook(cells=[cell])
    _load_builder().merge_streams(nb)
    got = [(o.output_type, o.get("name"), o.get("text")) for o in nb.cells[0].outputs]
    assert got == [
        ("stream", "stdout", ["0\n", "1\n", "2\n"]),
        ("stream", "stderr", ["warned\n"]),
        ("execute_result", None, None),
        ("stream", "stdout", ["after\n"]),
    ]


@pytest.mark.parametrize("name", TUTORIALS)
def test_tutorial_ends_with_summary_and_exercises(name):
    headings = [
        line.lstrip("#").strip()
        for cell in _cells(name)
        if cell["cell_type"] == "markdown"
        for line in _text(cell).splitlines()
        if line.startswith("#")
    ]
    assert "Summary" in headings and "Exercises" in headings, headings
    assert headings.index("Summary") < headings.index("Exercises")


def test_autograd_tutorial_mirrors_the_docs_page():
    cells = _cells("02_autograd")
    headings = [
        re.sub(r"^#+\s*", "", line).strip()
        for cell in cells
        if cell["cell_type"] == "markdown"
        for line in _text(cell).splitlines()
        if line.startswith("#")
    ]
    positions = [headings.index(h) if h in headings else -1 for h in DOCS_HEADINGS]
    missing = [h for h, p in zip(DOCS_HEADINGS, positions, strict=True) if p < 0]
    assert not missing, f"headings of the docs page missing from the notebook: {missing}"
    assert positions == sorted(positions), "the docs page's headings are out of order"
    code = "\n".join(_text(c) for c in cells if c["cell_type"] == "code")
    absent = [line for line in DOCS_CODE if line not in code]
    assert not absent, f"examples of the docs page missing from the notebook: {absent}"


def test_autograd_tutorial_shows_the_true_values_of_the_errata():
    """The page prints a.grad == [2.0, 4.0] for b = a * 2; the notebook must show [2., 2.]."""
    cells = _cells("02_autograd")
    leaf_cell = next(c for c in cells if c["cell_type"] == "code" and "b = a * 2  " in _text(c))
    shown = "".join(_joined(o.get("data", {}).get("text/plain", "")) for o in leaf_cell["outputs"])
    assert "tensor([2., 2.])" in shown, shown
    erratum_text = "\n".join(_text(c) for c in cells if c["cell_type"] == "markdown")
    assert erratum_text.count("Erratum") >= 3


def test_autograd_tutorial_small_things_of_issue_26():
    """The comment beside ``b = a * 2`` gives the true gradient, "Going further" is no H1 (a
    sidebar entry of its own on the docs site), and the notebook, itself the Tutorial 2 page of
    the docs site, refers to no other page it copies or corrects ("the published page", "the
    original page", "the page's example": issue 38)."""
    cells = _cells("02_autograd")
    leaf = next(_text(c) for c in cells if c["cell_type"] == "code" and "b = a * 2  " in _text(c))
    comment = next(line for line in leaf.splitlines() if line.startswith("a.grad"))
    assert comment.split("#", 1)[1].strip().startswith("[2., 2.]"), comment
    markdown = [_text(c) for c in cells if c["cell_type"] == "markdown"]
    h1 = [line for text in markdown for line in text.splitlines() if re.match(r"# \S", line)]
    assert h1 == ["# Tutorial 2: Autograd"], h1
    assert not any("published" in text for text in markdown)
    found = [
        m for text in markdown for m in re.findall(r".{0,30}\b(?:original|the page)\b.{0,20}", text)
    ]
    assert not found, found


def test_tutorials_use_no_glyph_the_bundled_fonts_lack():
    """U+23F8 (the pause sign) is in none of the fonts Debian's chromium has (it drew a box);
    the browser tests check what is drawn, this checks every source."""
    lacking = {"\u23f8": "pause sign", "\u23f5": "play sign"}
    found = [
        f"{p.name}: {name}" for p in SOURCES for ch, name in lacking.items() if ch in p.read_text()
    ]
    assert not found, found


@pytest.mark.notebooks
@pytest.mark.parametrize("name", TUTORIALS)
def test_notebook_outputs_reproduce(name):
    """Run one tutorial under nbval on a fresh kernel of this interpreter and compare outputs."""
    notebook = NOTEBOOKS / f"{name}.ipynb"
    assert notebook.exists(), f"{notebook} is missing; run `make notebooks`"
    env = {**os.environ, "PYTHONHASHSEED": "0", "TORCHLIGHT_BACKEND": "numpy"}
    command = [
        sys.executable, "-m", "pytest", str(notebook),
        "--nbval", "--nbval-current-env",
        f"--nbval-sanitize-with={SANITIZE}",
        "--nbval-cell-timeout=120",
        "-p", "no:cacheprovider", "-q", "--no-header",
    ]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (
        f"nbval found differences in {notebook.name} (rebuild with `make notebooks` if the "
        f"change is intended):\n{result.stdout[-8000:]}\n{result.stderr[-2000:]}"
    )
