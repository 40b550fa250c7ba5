"""Everything a submission produces is hostile: files, notebook structure, outputs, markdown.

- :func:`install_file_guard` makes nbgrader copy only regular files out of a submission (never
  a symlink, a device, a FIFO or anything inside a symlinked folder), and remembers what it
  refused;
- :class:`CheckSubmission` (first sanitize step) refuses a notebook handed in as a symlink, and
  drops malformed metadata so that one broken notebook cannot stop nbgrader's own steps;
- :class:`SanitizeNotebook` (before ``SaveAutoGrades``) makes what the feedback page and the
  formgrader render inert: outputs keep only plain text, checked images and cleaned HTML
  (no scripts, event handlers, JavaScript or widget outputs, no MathJax command that makes a
  link, a style or a class); raw HTML in markdown is escaped;
  raw cells lose their format; notebook and cell metadata keep only what nbgrader needs.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import bleach
from nbformat.v4 import new_markdown_cell, new_output
from nbgrader.preprocessors import NbGraderPreprocessor

#: Files refused per submission folder (filled by the file guard, read by CheckSubmission).
REFUSED: dict[str, list[str]] = {}

SAFE_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del",
    "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "li", "ol", "p",
    "pre", "s", "small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th",
    "thead", "tr", "u", "ul",
}  # fmt: skip
SAFE_ATTRIBUTES = {
    "a": ["href", "title"],
    "td": ["colspan", "rowspan"],
    "th": ["colspan", "rowspan"],
}
SAFE_PROTOCOLS = {"http", "https", "mailto"}
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
IMAGES = ("image/png", "image/jpeg", "image/gif")
MATHJAX_ACTIVE = re.compile(r"\\(href|url|class|style|cssId|require|unicode)\b")
CELL_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")


# ------------------------------------------------------------------------------ files
def regular_files_only(find_all_files: Any) -> Any:
    """Wrap nbgrader's ``find_all_files`` so that it yields regular files only."""

    def find(path: str, exclude: list[str] | None = None) -> list[str]:
        kept = []
        for filename in find_all_files(path, exclude):
            if _is_plain(path, filename):
                kept.append(filename)
            else:
                REFUSED.setdefault(os.path.abspath(path), []).append(
                    os.path.relpath(filename, path)
                )
        return kept

    find.__wrapped__ = find_all_files  # type: ignore[attr-defined]
    return find


def _is_plain(root: str, filename: str) -> bool:
    """A regular file, not a symlink, with no symlink between ``root`` and it."""
    here = os.path.abspath(filename)
    top = os.path.abspath(root)
    while True:
        try:
            mode = os.lstat(here).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode) or (here == os.path.abspath(filename) and not stat.S_ISREG(mode)):
            return False
        if here == top or os.path.dirname(here) == here:
            return True
        here = os.path.dirname(here)


def install_file_guard() -> None:
    """Patch nbgrader's converters to copy regular files only (idempotent)."""
    from nbgrader.converters import base

    if not hasattr(base.find_all_files, "__wrapped__"):
        base.find_all_files = regular_files_only(base.find_all_files)


# ------------------------------------------------------------------------------ notebooks
class CheckSubmission(NbGraderPreprocessor):
    """Refuse a notebook that is not a regular file; drop metadata nbgrader would crash on."""

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        folder = resources.get("metadata", {}).get("path", "")
        name = f"{resources.get('unique_key', '')}.ipynb"
        problems = []
        path = os.path.join(folder, name)
        if not _is_plain(folder, path):
            problems.append(f"{name} is not a regular file (a symbolic link?)")
            nb.cells = []
        for refused in REFUSED.get(os.path.abspath(folder), []):
            problems.append(f"{refused} is not a regular file (a symbolic link?)")
        if not isinstance(nb.get("metadata"), dict):
            nb.metadata = {}
        # what the grader finds travels in the notebook from the sanitize to the autograde
        # step (nbgrader gives each its own resources); whatever the student put there goes
        nb.metadata["torchlight"] = {"findings": [], "refused": []}
        for cell in nb.cells:
            meta = cell.get("metadata")
            if not isinstance(meta, dict):
                cell.metadata = meta = {}
            if "nbgrader" in meta and not _valid_nbgrader(meta["nbgrader"]):
                self.log.warning("dropping malformed nbgrader metadata %r", meta["nbgrader"])
                del meta["nbgrader"]
        if problems:
            text = "**Refused files.** " + "; ".join(problems) + ". Hand in regular files only."
            self.log.warning("refused in %s: %s", folder, "; ".join(problems))
            nb.cells.insert(0, new_markdown_cell(inert_markdown(text)))
            nb.metadata["torchlight"]["refused"] = problems
        return nb, resources


def _valid_nbgrader(meta: Any) -> bool:
    if not isinstance(meta, dict):
        return False
    if not isinstance(meta.get("grade_id", ""), str):
        return False
    points = meta.get("points", 0)
    return isinstance(points, int | float) and not isinstance(points, bool)


class SanitizeNotebook(NbGraderPreprocessor):
    """Make everything the feedback page and the formgrader render from a submission inert."""

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        trusted = _instructor_sources(resources)
        meta = nb.get("metadata", {})
        kernelspec = meta.get("kernelspec") if isinstance(meta, dict) else None
        nb.metadata = {"language_info": {"name": "python"}}
        report = resources.get("torchlight", {})
        nb.metadata["torchlight"] = {
            "findings": list(report.get("findings", [])),
            "refused": list(report.get("refused", [])),
        }
        if isinstance(kernelspec, dict):
            nb.metadata["kernelspec"] = {
                k: str(kernelspec[k])[:100] for k in ("name", "display_name", "language")
                if isinstance(kernelspec.get(k), str)
            }  # fmt: skip
        for cell in nb.cells:
            self._cell(cell, trusted)
        return nb, resources

    def _cell(self, cell: Any, trusted: set[str]) -> None:
        keep = {k: cell.metadata[k] for k in ("nbgrader", "torchlight") if k in cell.metadata}
        cell.metadata = keep
        cell.pop("attachments", None)
        if "id" in cell and not (isinstance(cell["id"], str) and CELL_ID.match(cell["id"])):
            del cell["id"]
        if cell.cell_type == "markdown" and cell.source not in trusted:
            cell.source = inert_markdown(cell.source)
        elif cell.cell_type == "code":
            cell.outputs = [safe_output(o) for o in cell.get("outputs", [])]
            if not isinstance(cell.get("execution_count"), int | None):
                cell.execution_count = None


def _instructor_sources(resources: dict[str, Any]) -> set[str]:
    """Markdown the instructor wrote (as recorded in the gradebook): left as it is."""
    from nbgrader.api import Gradebook, MissingEntry

    info = resources.get("nbgrader", {})
    try:
        with Gradebook(info["db_url"]) as gb:
            nb = gb.find_notebook(info["notebook"], info["assignment"])
            return {c.source for c in nb.source_cells if c.cell_type == "markdown"}
    except (KeyError, MissingEntry):
        return set()


def inert_markdown(source: str) -> str:
    """Markdown rendered here, cleaned, and put back as one HTML block that nothing renders
    further: raw HTML is stripped to safe tags, link schemes are checked after entities are
    decoded (``jav&#97;script:`` too), and MathJax commands that make links or styles lose
    their backslash."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    cleaned = clean_html(markdown2html_mistune(str(source)))
    cleaned = MATHJAX_ACTIVE.sub(r"\1", cleaned)
    # one line, so the markdown renderer passes the block through as it is
    return "<div>" + cleaned.replace("\n", "&#10;") + "</div>"


def clean_html(html: str) -> str:
    return bleach.clean(
        str(html), tags=SAFE_TAGS, attributes=SAFE_ATTRIBUTES, protocols=SAFE_PROTOCOLS, strip=True
    )


def safe_output(output: Any) -> Any:
    """An output rebuilt from checked fields only."""
    try:
        kind = output.get("output_type")
        if kind == "stream":
            name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
            return new_output("stream", name=name, text=_text(output.get("text", "")))
        if kind == "error":
            return new_output(
                "error",
                ename=_text(output.get("ename", ""))[:200],
                evalue=_text(output.get("evalue", "")),
                traceback=[_text(line) for line in output.get("traceback", [])],
            )
        if kind not in ("display_data", "execute_result"):
            return new_output("stream", name="stdout", text="[an output was removed]\n")
        data, dropped = {}, []
        for mime, value in dict(output.get("data", {})).items():
            text = _text(value)
            if mime == "text/plain" or mime in IMAGES and BASE64.fullmatch(text):
                data[mime] = text
            elif mime == "text/html":
                # the page's MathJax typesets TeX in HTML too: no links, styles or classes
                data[mime] = MATHJAX_ACTIVE.sub(r"\1", clean_html(text))
            elif mime == "text/markdown":
                data[mime] = inert_markdown(text)
            else:
                dropped.append(str(mime)[:60])
        if not data:
            data = {"text/plain": f"[output of type {', '.join(dropped)} removed]"}
        fields: dict[str, Any] = {"data": data, "metadata": {}}
        if kind == "execute_result":
            count = output.get("execution_count")
            fields["execution_count"] = count if isinstance(count, int) else None
        return new_output(kind, **fields)
    except Exception:  # noqa: BLE001 - anything malformed becomes a note
        return new_output("stream", name="stdout", text="[an output could not be kept]\n")


def _text(value: Any) -> str:
    return "".join(str(v) for v in value) if isinstance(value, list) else str(value)
