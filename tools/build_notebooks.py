"""Build the tutorial notebooks: jupytext sources -> executed ``.ipynb`` files with outputs.

The reviewable text of each tutorial is a jupytext "percent" script in ``notebooks/src/``.
This script turns each one into ``notebooks/<name>.ipynb``, runs it top to bottom on a fresh
kernel of *this* Python (so ``.venv/bin/python tools/build_notebooks.py`` runs the notebooks on
the project's environment), and stores the outputs. The stored outputs are what
``pytest --nbval`` compares against, so they must be deterministic: every tutorial seeds
``tl.manual_seed`` itself, and the kernel gets ``PYTHONHASHSEED=0``.

Usage::

    .venv/bin/python tools/build_notebooks.py            # build every tutorial
    .venv/bin/python tools/build_notebooks.py 02 03      # only those whose name starts so
    .venv/bin/python tools/build_notebooks.py --check    # exit 1 if an .ipynb is out of date

``make notebooks`` runs the first form.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from ipykernel.kernelspec import RESOURCES, get_kernel_dict
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from traitlets import default

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SOURCES = NOTEBOOKS / "src"

#: The kernel `make lab` installs into .venv; stored in the notebooks so JupyterLab picks it.
KERNELSPEC = {"name": "torchlight", "display_name": "Python (torchlight)", "language": "python"}

#: Environment of the kernel that executes the notebooks (inherited by the child process).
KERNEL_ENV = {
    "PYTHONHASHSEED": "0",  # set and dict orders that depend on str hashes stay fixed
    "TORCHLIGHT_BACKEND": "numpy",  # a developer's own default backend must not leak in
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",  # silences a debugger warning on stderr
}

CELL_TIMEOUT_S = 300


def sources(prefixes: list[str]) -> list[Path]:
    """The jupytext sources to build, in order (all of them when ``prefixes`` is empty)."""
    found = sorted(SOURCES.glob("[0-9]*.py"))
    if prefixes:
        found = [p for p in found if any(p.stem.startswith(x) for x in prefixes)]
    return found


def read_source(path: Path) -> nbformat.NotebookNode:
    """The notebook a jupytext source describes, with torchlight's kernel metadata and no outputs."""
    nb = jupytext.read(path)
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        # Stable ids (nbformat would draw random ones) keep rebuilds free of noise in git diffs.
        cell["id"] = f"{path.stem[:2]}-{i:03d}"
        cell.metadata.pop("lines_to_next_cell", None)  # jupytext's spacing hint, not content
    return nb


class ThisPythonKernels(KernelSpecManager):
    """Kernel specs that always start a kernel of the interpreter running this script.

    A ``python3`` kernel spec found elsewhere (``~/.local/share/jupyter``, another environment)
    could point at a Python without torchlight; the notebooks must run on this one.
    """

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict())


class ThisPythonKernelManager(KernelManager):
    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self) -> KernelSpecManager:
        return ThisPythonKernels(data_dir=self.data_dir)


def execute(nb: nbformat.NotebookNode) -> None:
    """Run every cell on a fresh kernel of this interpreter, in ``notebooks/`` as the cwd."""
    os.environ.update(KERNEL_ENV)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        kernel_manager_class=ThisPythonKernelManager,
        extra_arguments=["--IPKernelApp.log_level=ERROR"],  # not its TCP transport warning
        timeout=CELL_TIMEOUT_S,
        record_timing=False,  # no timestamps in cell metadata
        store_widget_state=False,  # see keep_static_views
        allow_errors=False,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)  # nbclient writes the kernel it used
    keep_static_views(nb)
    merge_streams(nb)


def merge_streams(nb: nbformat.NotebookNode) -> None:
    """Join neighbouring outputs of the same stream into one, as JupyterLab shows them.

    The kernel flushes ``print`` output in chunks whose boundaries depend on timing, so the
    same cell can come back as one stdout output or three; merged, the stored file is the same
    on every build. Each merged output's text is kept as one line per list item.
    """
    for cell in nb.cells:
        merged: list[nbformat.NotebookNode] = []
        for output in cell.get("outputs", []):
            previous = merged[-1] if merged else None
            if (
                previous is not None
                and output.get("output_type") == "stream"
                and previous.get("output_type") == "stream"
                and previous.get("name") == output.get("name")
            ):
                previous["text"] = _text(previous["text"]) + _text(output["text"])
            else:
                merged.append(output)
        for output in merged:
            if output.get("output_type") == "stream":
                output["text"] = _text(output["text"]).splitlines(keepends=True)
        if "outputs" in cell:
            cell["outputs"] = merged


def _text(text: str | list[str]) -> str:
    return text if isinstance(text, str) else "".join(text)


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def keep_static_views(nb: nbformat.NotebookNode) -> None:
    """Store a widget's static picture, not a reference to a widget that no longer exists.

    A widget output holds a model id that only the kernel that made it knows. Saved without
    the widget state, JupyterLab would show "model not found" until the cell runs again; saved
    with it, nbconvert and other kernel-less viewers would need the widget JavaScript from a
    CDN. torchlight's viewers also send a static ``text/html`` picture, so the stored notebook
    keeps that (and ``text/plain``) and drops the model reference: every viewer shows the same
    picture before the cell runs, and the live widget once it does. (nbval never compares
    widget views, so the fresh run's extra mimetype is not a difference.)
    """
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data and len(data) > 1:
                del data[WIDGET_VIEW]


def source_cells(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """What a notebook says, without its outputs: (cell type, source) per cell."""
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def target_for(path: Path) -> Path:
    return NOTEBOOKS / f"{path.stem}.ipynb"


def build(path: Path) -> float:
    """Build one tutorial; returns the seconds it took to execute."""
    nb = read_source(path)
    start = time.perf_counter()
    execute(nb)
    seconds = time.perf_counter() - start
    _check_no_stderr(nb, path)
    nbformat.write(nb, target_for(path))
    return seconds


def _check_no_stderr(nb: nbformat.NotebookNode, path: Path) -> None:
    """Warnings in stored outputs would make nbval depend on library versions: refuse them."""
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                raise SystemExit(
                    f"{path.name}, cell {i}: the cell wrote to stderr:\n{out.get('text', '')}\n"
                    "fix the warning (or catch it in the cell) so stored outputs stay stable"
                )


def stale(path: Path) -> str:
    """Why the built notebook of ``path`` is out of date ('' when it is current)."""
    target = target_for(path)
    if not target.exists():
        return f"{target.relative_to(ROOT)} is missing"
    built = nbformat.read(target, as_version=4)
    if source_cells(built) != source_cells(read_source(path)):
        return f"{target.relative_to(ROOT)} does not match {path.relative_to(ROOT)}"
    unexecuted = [
        i
        for i, c in enumerate(built.cells)
        if c.cell_type == "code" and c.source.strip() and c.execution_count is None
    ]
    if unexecuted:
        return f"{target.relative_to(ROOT)} has cells that were never executed: {unexecuted}"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", help="build only tutorials whose name starts with these")
    parser.add_argument(
        "--check", action="store_true", help="only check that the .ipynb are current"
    )
    args = parser.parse_args(argv)
    paths = sources(args.only)
    if not paths:
        print(f"no tutorial sources matching {args.only} in {SOURCES}", file=sys.stderr)
        return 2
    if args.check:
        problems = [why for why in map(stale, paths) if why]
        for why in problems:
            print(why, file=sys.stderr)
        if problems:
            print("run `make notebooks` to rebuild", file=sys.stderr)
        return 1 if problems else 0
    total = 0.0
    for path in paths:
        print(f"building {target_for(path).relative_to(ROOT)} ...", end=" ", flush=True)
        seconds = build(path)
        total += seconds
        print(f"{seconds:.1f} s")
    print(f"{len(paths)} notebook(s) built in {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
