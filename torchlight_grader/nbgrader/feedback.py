"""The feedback page a student gets: nbgrader's, made readable offline and on a narrow screen.

``assignments/nbgrader_config.py`` points ``nbgrader generate_feedback`` at the template in
``templates/torchlight_feedback/`` (it extends nbgrader's own ``feedback`` template):

- the table of contents names every graded cell by its ``grade_id`` (``test_mul``), with its
  score, instead of nbgrader's "Test cell" for each;
- a written answer no one has graded yet (``CurrentGrades`` marks it ``awaiting``) says "not
  graded yet", in the table of contents, on the cell and under the score, where nbgrader's page
  said "Score: 0.0 / 1.0", a fail;
- outputs wrap (``white-space: pre-wrap``): a hidden check's verdict is one long line, and it
  used to run off the page, hidden unless the student scrolled the box sideways;
- the math is typeset here, at feedback time, into SVG (:func:`prerender_math`: MathJax 3
  under Node.js, ``tex_svg.js``), so the page has no script and is ~0.35 MB instead of 2.5 MB;
  without Node.js a local MathJax 3 is *inlined* into the page instead. Either way the page is
  one file, because nbgrader's exchange (``release_feedback`` / ``fetch_feedback``) hands the
  student the ``.html`` file alone: a script beside it would be lost, and nbconvert's default
  (a CDN) fails without internet.

The MathJax files come from the ``django-static-mathjax`` wheel (MathJax's own release files,
importable as ``mathjax``; it needs no Django). ``tex-svg-full`` draws with SVG paths, so it
needs no font files either. Its ``ui/safe`` extension is inlined with it: TeX written by a
student cannot make links, styles or classes (``torchlight_grader.nbgrader.hostile`` also removes those
commands from the student's markdown). Only the grader's template adds a script: everything a
submission produces is stripped of scripts before it gets here (``SanitizeNotebook``).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
from nbconvert.exporters import HTMLExporter
from traitlets import Unicode

#: ``c.FeedbackExporter.extra_template_basedirs`` holds this folder (and nbgrader's templates).
TEMPLATES = Path(__file__).resolve().parent / "templates"
#: The page's template, in ``templates/feedback/``.
TEMPLATE_FILE = "torchlight.html.j2"
#: What a script element's text must not contain: it would end or confuse the element.
_BREAKS_SCRIPT = re.compile(r"</script|<script", re.IGNORECASE)


class CompiledTemplates(jinja2.BytecodeCache):
    """The page's templates, compiled once per process (Jinja's bytecode cache, in memory).

    nbgrader makes a new exporter, so a new Jinja environment, for every ``generate_feedback``,
    and compiling the page's ten templates again took about 0.2 s of each page's 0.75-0.9 s (an
    assignment 1 page, median of 24, on the 2-core development machine). A grading worker
    (``torchlight_grader/course/batch.py``) runs one command per student in one process: from the
    second student on, each template is loaded from here. Jinja keys an entry by the template's
    name and file and checks the source's checksum, so an edited template is compiled again.
    """

    def __init__(self) -> None:
        self.code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.code:
            bucket.bytecode_from_string(self.code[bucket.key])

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.code[bucket.key] = bucket.bytecode_to_string()


COMPILED = CompiledTemplates()


class FeedbackExporter(HTMLExporter):
    """The feedback page's exporter (``c.GenerateFeedback.exporter_class``).

    A class of its own so that the course config sets its template on it alone: the
    Formgrader renders each submission with nbgrader's plain ``HTMLExporter`` and its
    ``formgrade`` template, and a template forced on every ``HTMLExporter`` broke manual
    grading (``TemplateNotFound: torchlight.html.j2``).

    With Node.js (``node``) the page's math is typeset here, into SVG, and the page carries no
    MathJax (:func:`prerender_math`); without it, MathJax is inlined (about 2.3 MB a page).
    """

    node = Unicode(
        "node",
        help="Node.js, which typesets the page's math at feedback time with the installed "
        "MathJax 3; '' (or a node that does not run) inlines MathJax into every page instead.",
    ).tag(config=True)

    def from_notebook_node(
        self, nb: Any, resources: dict[str, Any] | None = None, **kw: Any
    ) -> Any:
        self.environment.bytecode_cache = COMPILED  # (before the page's templates load)
        output, resources = super().from_notebook_node(nb, resources, **kw)
        node = shutil.which(self.node) if self.node else None
        if node:
            try:
                info = (resources or {}).get("nbgrader", {})
                known = {}
                if info.get("assignment") and info.get("notebook"):
                    root = self.config.CourseDirectory.get("root") or os.getcwd()
                    known = instructor_formulas(
                        str(root), info["assignment"], info["notebook"], node, 60.0
                    )
                output = prerender_math(output, node, known=known)
            except RuntimeError as exc:  # the page keeps its inlined MathJax
                self.log.warning("math not typeset at feedback time (MathJax inlined): %s", exc)
        return output, resources


def nbgrader_templates() -> Path:
    """nbgrader's own template folder (its ``feedback`` template, which ours extends)."""
    import nbgrader

    return (
        Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"
    )


def mathjax_folder() -> Path:
    """The ``es5`` folder of the installed MathJax 3 (the ``django-static-mathjax`` wheel)."""
    try:
        import mathjax
    except ImportError as exc:
        raise RuntimeError(
            "the feedback page inlines a local MathJax, but the `mathjax` package is missing: "
            "`pip install django-static-mathjax` (it is in torchlight-edu's `course` extra)"
        ) from exc
    return Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"


def mathjax_script(components: Sequence[str]) -> markupsafe.Markup:
    """One inline ``<script>`` with the named MathJax components, in order (a Jinja filter).

    Args:
        components: names inside MathJax's ``es5`` folder, without ``.js``
            (``["tex-svg-full", "ui/safe"]``).

    Example (in a template)::

        {{ ["tex-svg-full", "ui/safe"] | mathjax_script }}
    """
    folder = mathjax_folder()
    parts = []
    for name in components:
        path = folder / f"{name}.js"
        if not path.is_file():
            raise RuntimeError(f"MathJax component {name!r} not found: expected {path}")
        text = path.read_text(encoding="utf-8")
        if _BREAKS_SCRIPT.search(text):
            raise RuntimeError(f"{path} contains a <script> tag: it cannot be inlined as it is")
        parts.append(f"/* MathJax {name} (Apache-2.0, https://www.mathjax.org) */\n{text}")
    # One element: the extensions register before MathJax starts (it starts once this script
    # has run), and nothing is fetched.
    return markupsafe.Markup("<script>\n" + "\n".join(parts) + "\n</script>")  # noqa: S704


# ------------------------------------------------------------------ math rendered at feedback time
#: The Node.js program that typesets TeX with the installed MathJax 3, in the sandbox's own
#: program folder (``torchlight_grader/sandbox/inside/tex_svg.js``, read-only in every sandbox).
TEX_SVG = "INSIDE/tex_svg.js"
#: Between these markers the template inlines MathJax; cut when the math is already typeset.
MATHJAX_BEGIN, MATHJAX_END = "<!-- torchlight:mathjax -->", "<!-- /torchlight:mathjax -->"
#: Where MathJax does not look for math (it skips these elements too).
_SKIP = {"script", "style", "textarea", "pre", "code", "noscript", "svg", "math"}
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)[^>]*>|<!--.*?-->", re.DOTALL)
#: The delimiters the page's MathJax would typeset (its tex config in templates/feedback/),
#: displayed ones first; ``\$`` is a dollar sign, not a delimiter (processEscapes).
_MATH = re.compile(
    r"(?<!\\)\$\$(?P<dd>.+?)(?<!\\)\$\$"
    r"|\\\[(?P<db>.+?)\\\]"
    r"|(?P<env>\\begin\{(?P<name>[a-zA-Z*]+)\}.+?\\end\{(?P=name)\})"
    r"|\\\((?P<ip>.+?)\\\)"
    r"|(?<![\\$])\$(?P<id>[^$]+?)(?<!\\)\$",
    re.DOTALL,
)
#: One page's typesetting budgets (a page is one student's notebook): characters of TeX sent to
#: MathJax, CPU seconds, bytes of SVG back. What is past them is shown as TeX in code.
TEX_BUDGET = 32 * 1024
CPU_BUDGET = 10
SVG_BUDGET = 8 * 1024**2
#: Formulas sent to MathJax a line at a time: what a budget cut keeps is typeset.
BATCH = 64


def find_math(html_text: str) -> list[tuple[int, int, str, bool]]:
    """``(start, end, tex, display)`` of each formula in the text of an HTML page, outside
    the elements MathJax skips. A formula that spans a tag is not found (left as it is)."""
    found = []
    skipping: list[str] = []
    pos = 0
    for tag in [*_TAG.finditer(html_text), None]:
        end = tag.start() if tag else len(html_text)
        if not skipping:
            for m in _MATH.finditer(html_text, pos, end):
                display = m.group("ip") is None and m.group("id") is None
                tex = (
                    m.group("dd")
                    or m.group("db")
                    or m.group("env")
                    or m.group("ip")
                    or m.group("id")
                )
                found.append((m.start(), m.end(), html.unescape(tex), display))
        if tag is None:
            break
        pos = tag.end()
        name = (tag.group(2) or "").lower()
        if name in _SKIP and not tag.group(0).endswith("/>"):
            if tag.group(1):  # a closing tag
                if skipping and skipping[-1] == name:
                    skipping.pop()
            else:
                skipping.append(name)
    return found


def typeset(
    formulas: Sequence[tuple[str, bool]],
    node: str,
    timeout: float,
    known: dict[tuple[str, bool], str | None] | None = None,
) -> list[str | None]:
    """Each ``(tex, display)`` as MathJax's SVG (``<mjx-container>``), ``None`` where the TeX has
    an error, could make a link, a style or a class
    (:data:`torchlight_grader.nbgrader.hostile.MATHJAX_ACTIVE`, which nbgrader's inputs lose
    anyway), or lies past the page's budgets (:data:`TEX_BUDGET`, :data:`CPU_BUDGET`,
    :data:`SVG_BUDGET`, ``timeout`` seconds).

    One page, one typesetter: a fresh Node.js in a sandbox of its own
    (:class:`~torchlight_grader.sandbox.program.LineProgram`) that ends with the page, and no
    cache beyond the page, so nothing one student's TeX defines (``\\def``,
    ``\\renewcommand``) reaches another student's page. ``known``: formulas typeset already
    from the instructor's own notebook (:func:`instructor_formulas`, which no student input
    reaches), used as they are; only the rest (what the student wrote) needs a typesetter.
    Raises ``RuntimeError`` when Node.js cannot run at all (the caller then inlines MathJax)."""
    from torchlight_grader.nbgrader.hostile import MATHJAX_ACTIVE
    from torchlight_grader.sandbox import Limits
    from torchlight_grader.sandbox.program import LineProgram, ProgramError

    known = known or {}
    todo, chars = [], 0
    for formula in dict.fromkeys(formulas):  # in page order, each once
        if MATHJAX_ACTIVE.search(formula[0]) or formula in known:
            continue
        chars += len(formula[0])
        if chars > TEX_BUDGET:
            break
        todo.append(formula)
    done: dict[tuple[str, bool], str | None] = {}
    if todo:
        deadline, budget = time.monotonic() + timeout, SVG_BUDGET
        limits = Limits(memory=2 * 1024**3, output=1024**2, processes=64)
        real = os.path.realpath(node)
        program = LineProgram([real, TEX_SVG, str(mathjax_folder())], limits, CPU_BUDGET)
        try:
            for start in range(0, len(todo), BATCH):
                batch = todo[start : start + BATCH]
                try:
                    answer = program.ask(json.dumps(batch).encode(), deadline, budget)
                except ProgramError as exc:
                    if not done:  # not one formula typeset: Node.js does not run here
                        raise RuntimeError(f"{real} {TEX_SVG} failed: {exc}") from exc
                    break  # past a budget: the rest stay TeX
                budget -= len(answer)
                svgs = json.loads(answer)
                if not isinstance(svgs, list) or len(svgs) != len(batch):
                    raise RuntimeError(f"{real} {TEX_SVG} answered {len(batch)} formulas wrongly")
                for formula, svg in zip(batch, svgs, strict=True):
                    # MathJax's own serialization; still, nothing that could run or link goes in
                    unsafe = not isinstance(svg, str) or re.search(
                        r"<script|\son[a-z]+\s*=|href\s*=\s*\"(?!#)", svg
                    )
                    done[formula] = None if unsafe else svg
        finally:
            program.close()
    return [known[f] if f in known else done.get(f) for f in formulas]


#: (the instructor's notebook, its digest) -> its formulas typeset: only instructor input ever
#: reaches this, so a grading process keeps it across students.
_INSTRUCTOR: dict[tuple[str, str], dict[tuple[str, bool], str | None]] = {}


def instructor_formulas(
    root: str, assignment: str, notebook: str, node: str, timeout: float
) -> dict[tuple[str, bool], str | None]:
    """The formulas of the notebook as the instructor released it (``release/``, else
    ``source/``), typeset once per grading process in a sandbox that sees nothing else: the
    part of every student's page that the student did not write costs no typesetter."""
    path = next(
        (p for p in (Path(root, d, assignment, f"{notebook}.ipynb") for d in ("release", "source"))
         if p.is_file()),
        None,
    )  # fmt: skip
    if path is None:
        return {}
    data = path.read_bytes()
    key = (str(path), hashlib.sha256(data).hexdigest())
    if key not in _INSTRUCTOR:
        cells = json.loads(data).get("cells", [])
        text = "\n\n".join(
            "".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source"))
            for c in cells
            if isinstance(c, dict) and c.get("cell_type") == "markdown"
        )
        formulas = [(tex, display) for _, _, tex, display in find_math(html.escape(text))]
        _INSTRUCTOR[key] = dict(zip(formulas, typeset(formulas, node, timeout), strict=True))
    return _INSTRUCTOR[key]


def prerender_math(
    page: str,
    node: str,
    timeout: float = 60.0,
    known: dict[tuple[str, bool], str | None] | None = None,
) -> str:
    """The page with its math typeset into SVG and the inlined MathJax cut out; TeX that does
    not typeset is shown as code. Raises ``RuntimeError`` when Node.js cannot run (the caller
    keeps the page as it was, with MathJax inlined)."""
    start, stop = page.find(MATHJAX_BEGIN), page.find(MATHJAX_END)
    if start < 0 or stop < start:
        return page
    page = page[:start] + page[stop + len(MATHJAX_END) :]
    found = find_math(page)
    svgs = typeset([(tex, display) for _, _, tex, display in found], node, timeout, known)
    parts, pos = [], 0
    for (begin, end, _, _), svg in zip(found, svgs, strict=True):
        parts += [page[pos:begin], svg or f'<code class="tex-error">{page[begin:end]}</code>']
        pos = end
    return "".join([*parts, page[pos:]])
