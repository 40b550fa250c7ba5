"""Sphinx configuration of the torchlight site (``make docs`` builds it into docs/_build/html).

Nothing here reaches the network: the notebooks are rendered with their stored outputs (never
executed), and MathJax is served from the site itself (copied from the ``jupyter-server-mathjax``
wheel into ``_static/mathjax``).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import torchlight  # noqa: E402

project = "torchlight"
author = "torchlight contributors"
copyright = "torchlight contributors, MIT license"  # noqa: A001 - Sphinx's name
release = version = torchlight.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_nb",
    "torchlight_api",  # docs/_ext: the API pages from each module's __all__ (autosummary's job)
]

exclude_patterns = ["_build", "api/_*.rst", "_generated/*", "**/.ipynb_checkpoints"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# ---------------------------------------------------------------- checked like code
nitpicky = True  # every cross-reference must resolve (make docs and the test use -W)
nitpick_ignore_regex = [
    # Types from other libraries: no intersphinx (no network), so these are plain text.
    ("py:class", r"(numpy|np|ipywidgets|widgets|traitlets|anywidget|argparse)(\..*)?"),
    ("py:class", r"(collections\.abc|typing|types|os|pathlib|tqdm|array)(\..*)?"),
    ("py:class", r"Dims?"),  # the modules' alias for int | Sequence[int] | None
    ("py:class", r"(optional|callable|Path|PathLike|IO|Any|ndarray|ArrayLike|DTypeLike)"),
    ("py:class", r"(TextIO|BinaryIO|Callable|Iterable|Iterator|Sequence|Mapping|Generator)(\[.*)?"),
    ("py:class", r"(Hashable|Protocol|NamedTuple|TypeVar|Literal)(\[.*)?"),
    ("py:class", r"[A-Z]"),  # type variables
    (
        "py:.*",
        r"(float|int|str|bool|bytes|tuple|list|dict|set|frozenset|object|type|None|slice|Ellipsis|complex)",
    ),
    ("py:.*", r".*\._.*"),  # private names that appear in signatures (e.g. a base class)
    ("py:class", r"(collections|t|np|npt)\..*"),  # collections.OrderedDict, `import typing as t`
    ("py:class", r".*\[.*"),  # a generic alias the signature parser split (list[tuple[str, ...)
    # Internal classes that appear as base classes or return types of public API.
    ("py:class", r"torchlight\.(tensor_methods\.TensorOps|nn\.module\.IncompatibleKeys)"),
]

# ---------------------------------------------------------------- autodoc + napoleon
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_default_options = {"exclude-members": "__init__, __weakref__, __dict__, __module__"}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_custom_sections = [("Shape", "notes_style")]  # house style: a `Shape:` section
napoleon_use_rtype = False

# ---------------------------------------------------------------- notebooks and markdown
nb_execution_mode = "off"  # the stored outputs are the tutorial; nbval checks they are current
nb_output_stderr = "remove"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# ---------------------------------------------------------------- HTML
html_theme = "furo"
html_title = f"torchlight {release}"
html_static_path = ["_static"]
html_css_files = ["torchlight.css"]
html_show_sourcelink = False
# MathJax from the site itself: _static/mathjax is copied in when the build finishes.
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
# That copy ships only the STIX-Web fonts (as the Jupyter notebook configures it).
mathjax2_config = {
    "showMathMenu": False,
    "messageStyle": "none",
    "HTML-CSS": {
        # MathJax's font-loading probe, "MathJax_Blank", is a font at url('about:blank'), which
        # Chromium refuses (a console error on every page); a local() name asks no one.
        "styles": {"@font-face": {"font-family": "MathJax_Blank", "src": "local('MathJax_Blank')"}},
        "availableFonts": [],
        "preferredFont": None,
        "webFont": "STIX-Web",
        "imageFont": None,
    },
    "SVG": {"font": "STIX-Web"},
    # MyST-NB marks notebook pages tex2jax_ignore (a $ in an output is not math); the formulas
    # themselves are in class="math" (MathJax 3's processHtmlClass, as tex2jax's processClass).
    "tex2jax": {"processClass": "math|tex2jax_process|mathjax_process|output_area"},
}


def setup(app):  # type: ignore[no-untyped-def]
    from torchlight_api import _copy_mathjax

    app.connect("build-finished", _copy_mathjax)
