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

Budget (issue 24 item 2): cleaning uses nh3 (the Rust ammonia sanitizer: linear in its input,
no backtracking), and at most :data:`MARKDOWN_CELL_BYTES` of one cell and
:data:`MARKDOWN_NOTEBOOK_BYTES` of one notebook are rendered as markdown or cleaned as HTML, in
autograde and again in generate_feedback. What is over the budget, and any cell the renderer
cannot render (a pasted image's ``attachment:`` reference, say), is shown as escaped text
(the first :data:`SHOWN_BYTES` of it), never fails the notebook and never costs points.
"""

from __future__ import annotations

import html
import os
import re
import stat
import time
from typing import Any

import nh3
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
    "a": {"href", "title"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan"},
}
SAFE_PROTOCOLS = {"http", "https", "mailto"}
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
IMAGES = ("image/png", "image/jpeg", "image/gif")
MATHJAX_ACTIVE = re.compile(r"\\(href|url|class|style|cssId|require|unicode)\b")
CELL_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")
#: Markdown (or HTML output) of one cell that is rendered and cleaned; beyond it, escaped text.
MARKDOWN_CELL_BYTES = 64 * 1024
#: Markdown and HTML rendered and cleaned per notebook; once spent, every further cell is
#: shown as escaped text.
MARKDOWN_NOTEBOOK_BYTES = 1024**2
#: Seconds of rendering and cleaning per notebook; once spent, every further cell is shown as
#: escaped text (so a notebook costs at most this plus one cell's worst case, ~1 s measured).
MARKDOWN_NOTEBOOK_SECONDS = 4.0
#: Tags one rendered cell may hold: html5ever (inside nh3) is quadratic in nesting depth
#: (20000 nested ``<div>``: 2.5 s; 4000: under 0.1 s).
MARKDOWN_CELL_TAGS = 4000
#: How much of a cell shown as escaped text is shown at all.
SHOWN_BYTES = 16 * 1024


class Budget:
    """What is left to render of one notebook (bytes of markdown and HTML)."""

    def __init__(
        self, total: int = MARKDOWN_NOTEBOOK_BYTES, seconds: float = MARKDOWN_NOTEBOOK_SECONDS
    ) -> None:
        self.left = total
        self.until = time.monotonic() + seconds

    def take(self, text: str) -> bool:
        """True if ``text`` may be rendered (and charges it), False if it is shown escaped."""
        size = len(text)  # characters: at least a quarter of the UTF-8 bytes
        if size > MARKDOWN_CELL_BYTES or size > self.left or time.monotonic() > self.until:
            return False
        self.left -= size
        return True


def escaped_text(text: str, why: str) -> str:
    """``text`` as inert, escaped text (its first :data:`SHOWN_BYTES`), with why it is not
    rendered: one HTML block that no later markdown renderer changes."""
    shown = text[:SHOWN_BYTES]
    more = len(text) - len(shown)
    note = f"[{why}; shown as text" + (f", {more} more characters not shown]" if more else "]")
    body = html.escape(shown).replace("\n", "&#10;")
    return f"<div><p><em>{html.escape(note)}</em></p><pre>{body}</pre></div>"


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
        from torchlight_grader.nbgrader.ids import is_safe_student_id, unsafe_student_id_message

        student = resources.get("nbgrader", {}).get("student")
        if student is not None and not is_safe_student_id(student):
            # its id would land in folders, the gradebook and the exports: refused, not graded
            raise ValueError(unsafe_student_id_message(student))
        folder = resources.get("metadata", {}).get("path", "")
        name = f"{resources.get('unique_key', '')}.ipynb"
        problems = []
        path = os.path.join(folder, name)
        if not _is_plain(folder, path):
            problems.append(f"{name} is not a regular file (a symbolic link?)")
            nb.cells = []
        else:
            # collect's limits, whatever way the notebook came (copied into submitted/ by hand,
            # an LMS download): nothing past them is sanitized, sent, rendered or typeset
            over = _over_limits(name, path, nb)
            if over:
                problems.append(over)
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


def _over_limits(name: str, path: str, nb: Any) -> str:
    """Why the notebook at ``path`` (parsed: ``nb``) is past collect's limits (bytes, cells,
    JSON depth), or "". nbgrader has parsed it already: it is measured, not read again."""
    from torchlight_grader.nbgrader.collect import LIMITS, json_depth

    size = os.stat(path).st_size
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if size > LIMITS["file_bytes"]:
        why = f"{size} bytes, more than the limit of {LIMITS['file_bytes']}"
    elif isinstance(cells, list) and len(cells) > LIMITS["cells"]:
        why = f"{len(cells)} cells, more than the limit of {LIMITS['cells']}"
    elif json_depth(nb) > LIMITS["json_depth"]:
        why = f"JSON nested deeper than {LIMITS['json_depth']} levels"
    else:
        return ""
    return f"{name}: {why} (it was not graded)"


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
        if report.get("release"):  # the instructor's changes since the student's release
            nb.metadata["torchlight"]["release"] = list(report["release"])
        if isinstance(kernelspec, dict):
            nb.metadata["kernelspec"] = {
                k: str(kernelspec[k])[:100] for k in ("name", "display_name", "language")
                if isinstance(kernelspec.get(k), str)
            }  # fmt: skip
        budget = Budget()
        for cell in nb.cells:
            self._cell(cell, trusted, budget)
        return nb, resources

    def _cell(self, cell: Any, trusted: set[str], budget: Budget) -> None:
        keep = {k: cell.metadata[k] for k in ("nbgrader", "torchlight") if k in cell.metadata}
        cell.metadata = keep
        cell.pop("attachments", None)
        if "id" in cell and not (isinstance(cell["id"], str) and CELL_ID.match(cell["id"])):
            del cell["id"]
        if cell.cell_type == "markdown" and cell.source not in trusted:
            cell.source = inert_markdown(cell.source, budget)
        elif cell.cell_type == "code":
            cell.outputs = [safe_output(o, budget) for o in cell.get("outputs", [])]
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


def inert_markdown(source: str, budget: Budget | None = None) -> str:
    """Markdown rendered here, cleaned, and put back as one HTML block that nothing renders
    further: raw HTML is stripped to safe tags, link schemes are checked after entities are
    decoded (``jav&#97;script:`` too), and MathJax commands that make links or styles lose
    their backslash. Over ``budget``, or when the renderer fails (an ``attachment:`` image whose
    attachment is gone, say), the cell is shown as escaped text instead."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    source = _text(source)
    if not (budget or Budget()).take(source):
        return escaped_text(source, "too large to render")
    try:
        rendered = markdown2html_mistune(source)
    except Exception:  # noqa: BLE001 - whatever the renderer cannot render is shown as text
        return escaped_text(source, "this cell could not be rendered (a pasted image?)")
    if rendered.count("<") > MARKDOWN_CELL_TAGS:
        return escaped_text(source, "too deeply structured to render")
    cleaned = MATHJAX_ACTIVE.sub(r"\1", clean_html(rendered))
    # one line, so the markdown renderer passes the block through as it is
    return "<div>" + cleaned.replace("\n", "&#10;") + "</div>"


def clean_html(text: str) -> str:
    """Safe tags and attributes only, ``http``/``https``/``mailto`` links only (nh3: linear
    time); comments and the content of ``<script>``/``<style>`` go."""
    return nh3.clean(
        str(text),
        tags=SAFE_TAGS,
        attributes=SAFE_ATTRIBUTES,
        url_schemes=SAFE_PROTOCOLS,
        strip_comments=True,
        link_rel="noopener noreferrer nofollow",
    )


def safe_output(output: Any, budget: Budget | None = None) -> Any:
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
                if (budget or Budget()).take(text) and text.count("<") <= MARKDOWN_CELL_TAGS:
                    # the page's MathJax typesets TeX in HTML too: no links, styles or classes
                    data[mime] = MATHJAX_ACTIVE.sub(r"\1", clean_html(text))
                else:
                    data[mime] = escaped_text(text, "HTML output too large to render")
            elif mime == "text/markdown":
                data[mime] = inert_markdown(text, budget)
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
