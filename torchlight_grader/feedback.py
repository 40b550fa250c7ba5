"""The feedback page a student gets: nbgrader's, made readable offline and on a narrow screen.

``assignments/nbgrader_config.py`` points ``nbgrader generate_feedback`` at the template in
``templates/torchlight_feedback/`` (it extends nbgrader's own ``feedback`` template):

- the table of contents names every graded cell by its ``grade_id`` (``test_mul``), with its
  score, instead of nbgrader's "Test cell" for each;
- outputs wrap (``white-space: pre-wrap``): a hidden check's verdict is one long line, and it
  used to run off the page, hidden unless the student scrolled the box sideways;
- the math is typeset by a local MathJax 3, *inlined* into the page, because nbgrader's
  exchange (``release_feedback`` / ``fetch_feedback``) hands the student the ``.html`` file alone:
  a script beside it would be lost, and nbconvert's default (a CDN) fails without internet.

The MathJax files come from the ``django-static-mathjax`` wheel (MathJax's own release files,
importable as ``mathjax``; it needs no Django). ``tex-svg-full`` draws with SVG paths, so it
needs no font files either. Its ``ui/safe`` extension is inlined with it: TeX written by a
student cannot make links, styles or classes (``torchlight_grader.hostile`` also removes those
commands from the student's markdown). Only the grader's template adds a script: everything a
submission produces is stripped of scripts before it gets here (``SanitizeNotebook``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import markupsafe
from nbconvert.exporters import HTMLExporter

#: ``c.FeedbackExporter.extra_template_basedirs`` holds this folder (and nbgrader's templates).
TEMPLATES = Path(__file__).resolve().parent / "templates"
#: The page's template, in ``templates/feedback/``.
TEMPLATE_FILE = "torchlight.html.j2"
#: What a script element's text must not contain: it would end or confuse the element.
_BREAKS_SCRIPT = re.compile(r"</script|<script", re.IGNORECASE)


class FeedbackExporter(HTMLExporter):
    """The feedback page's exporter (``c.GenerateFeedback.exporter_class``).

    A class of its own so that the course config sets its template on it alone: the
    Formgrader renders each submission with nbgrader's plain ``HTMLExporter`` and its
    ``formgrade`` template, and a template forced on every ``HTMLExporter`` broke manual
    grading (``TemplateNotFound: torchlight.html.j2``).
    """


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
