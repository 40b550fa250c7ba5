"""Generate the API reference from the packages' ``__all__`` (a Sphinx extension).

Every public module listed in :data:`PUBLIC_MODULES` gets a page ``api/<module>.rst``: its
docstring, a summary table of every name in its ``__all__``, and the full documentation of each
object whose *home* is this page. An object's home is the first module in ``PUBLIC_MODULES``
that exports it (the same function exported by ``torchlight`` and ``torchlight.autograd`` is
documented once; the other page links to it). So a new name only needs to be added to its
module's ``__all__`` (and a docstring) to appear here; ``tests/test_docs.py`` checks that every
name is documented.

It also copies the stored tutorial notebooks into ``tutorials/`` (they are rendered with their
stored outputs, never executed) and writes the README sections that the docs include.
"""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
import types
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent

#: Modules without ``__all__`` whose classes and functions are public all the same.
WITHOUT_ALL = ["torchlight.ops.arithmetic", "torchlight.shape"]
#: Not part of torchlight's API: the grader leaves the package (see the course guide).
EXCLUDED = ("torchlight.grading",)


def discover_public_modules() -> list[str]:
    """Every importable, non-private ``torchlight`` module (but the grader's).

    The Autograd API comes first, then by depth: an object is documented on the first page
    that exports it, so ``torchlight.nn.Linear`` is documented there and
    ``torchlight.nn.linear`` links to it. A new module gets a page by itself.
    """
    import pkgutil

    import torchlight

    found = {"torchlight", *WITHOUT_ALL}
    for info in pkgutil.walk_packages(torchlight.__path__, "torchlight."):
        name = info.name
        if name.startswith(EXCLUDED) or any(part.startswith("_") for part in name.split(".")):
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional dependency is missing: no page for it here
            continue
        parent, _, last = name.rpartition(".")
        if getattr(importlib.import_module(parent), last, module) is not module:
            continue  # shadowed (torchlight.data.digits is the function): exported by its parent
        found.add(name)  # a page even without public names: its docstring explains the module
    ordered = sorted(found - {"torchlight.autograd"}, key=lambda m: (m.count("."), m))
    return ["torchlight.autograd", *ordered]


#: Modules whose members are shown on a hand-written page (which includes the generated part).
HAND_WRITTEN = {"torchlight.autograd": "autograd"}


def public_names(module_name: str) -> list[str]:
    """The module's ``__all__``; without one, the classes and functions it defines itself
    whose names do not start with ``_`` (what ``from module import *`` would give of them)."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or _kind(obj) == "function")
        and getattr(obj, "__module__", None) == module_name
    ]


#: Public modules, in the order that decides where an object is documented.
PUBLIC_MODULES = discover_public_modules()


def _kind(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    wrapped = getattr(obj, "py_func", getattr(obj, "__wrapped__", obj))  # numba, lru_cache
    if inspect.isfunction(wrapped) or inspect.isbuiltin(obj):
        return "function"
    return "data"  # a value (a dtype, a dict of settings), shown with its repr


def homes() -> dict[int, str]:
    """id(object) -> the module whose page documents it fully (data objects are never shared)."""
    found: dict[int, str] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in public_names(module_name):
            obj = getattr(module, name)
            if _kind(obj) in ("class", "exception", "function"):
                found.setdefault(id(obj), f"{module_name}.{name}")
    return found


def _title(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def module_members_rst(module_name: str, home: dict[int, str]) -> str:
    """The summary table and the documented objects of one module (no title, no docstring)."""
    module = importlib.import_module(module_name)
    summary, bodies = [], []
    for name in public_names(module_name):
        obj = getattr(module, name)
        kind = _kind(obj)
        full = f"{module_name}.{name}"
        if kind == "module":
            target = obj.__name__
            if target in PUBLIC_MODULES:
                summary.append(
                    f"   * - :mod:`{name} <{target}>`\n     - the :mod:`{target}` module"
                )
            else:
                summary.append(f"   * - ``{name}``\n     - the ``{target}`` module")
            continue
        canonical = home.get(id(obj), full) if kind != "data" else full
        role = {"class": "class", "exception": "exc", "function": "func", "data": "data"}[kind]
        paragraph = (inspect.getdoc(obj) or "").strip().split("\n\n")[0].replace("\n", " ")
        # The first sentence, whole (cutting it could cut a ``literal`` in two).
        first_line = "" if kind == "data" or "$$" in paragraph else paragraph.split(". ")[0]
        where = "" if canonical == full else f" (documented as :{role}:`{canonical}`)"
        summary.append(f"   * - :{role}:`~{canonical}`\n     - {_inline(first_line)}{where}")
        if canonical != full:  # a re-export: a short entry, so that `module.name` resolves too
            directive = {"class": "class", "exception": "exception", "function": "function"}[kind]
            bodies.append(
                f".. py:{directive}:: {name}\n   :module: {module_name}\n   :no-index-entry:\n\n"
                f"   Alias of :{role}:`{canonical}`.\n"
            )
            continue
        if kind == "class" and obj is importlib.import_module("torchlight").Tensor:
            # Tensor's methods live in its mixin (tensor_methods.py): show them all here.
            bodies.append(
                f".. autoclass:: {full}\n   :members:\n   :inherited-members: object\n"
                "   :show-inheritance:\n"
            )
        elif kind == "class":
            bodies.append(f".. autoclass:: {full}\n   :members:\n   :show-inheritance:\n")
        elif kind == "exception":
            bodies.append(f".. autoexception:: {full}\n   :show-inheritance:\n")
        elif kind == "function":
            bodies.append(f".. autofunction:: {full}\n")
        elif _is_type_alias(obj):  # ``State = tuple[Tensor, ...]``: its type is no class of ours
            bodies.append(
                f".. py:data:: {name}\n   :module: {module_name}\n\n"
                f"   A type alias: ``{_short_repr(obj)}``\n"
            )
        else:  # a value: its type and repr (autodata would show the docstring of its type)
            bodies.append(
                f".. py:data:: {name}\n   :module: {module_name}\n   :type: {type(obj).__name__}\n\n"
                f"   ``{_short_repr(obj)}``\n"
            )
    table = ".. list-table::\n   :widths: 30 70\n\n" + "\n".join(summary) + "\n" if summary else ""
    return table + "\n" + "\n".join(bodies)


def _is_type_alias(obj: Any) -> bool:
    return isinstance(obj, (types.GenericAlias, types.UnionType)) or (
        type(obj).__module__ == "typing" and not inspect.isclass(obj)
    )


def _short_repr(obj: Any) -> str:
    """The repr of a value, the same on every build (unchanged pages keep the build incremental):
    sets in sorted order (their order depends on str hashes), no memory addresses."""
    if isinstance(obj, (set, frozenset)):
        inner = ", ".join(sorted(map(repr, obj)))
        text = f"{type(obj).__name__}({{{inner}}})" if obj else repr(obj)
    else:
        text = repr(obj)
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", " ".join(text.split()))
    text = text if len(text) <= 70 else text[:67] + "..."
    return text.replace("`", "'")


def _inline(text: str) -> str:
    """A first docstring line as a table cell: math marked up, nothing that needs a reference."""
    text = dollars_to_math(text)
    return re.sub(r":(?:class|func|meth|mod|attr|exc|data):`~?([^`]+)`", r"``\1``", text)


_INLINE_MATH = re.compile(r"(?<![\\$`])\$([^$\n`]+?)\$(?!\$)")
_DISPLAY_MATH = re.compile(r"^([ \t]*)\$\$(.+?)\$\$[ \t]*$", re.S | re.M)
_TRAILING_UNDERSCORE = re.compile(r"(?<![\w`*\\])([A-Za-z][\w.]*_)(?![\w`])")
#: What reST already quotes: a ``literal``, a :role:`text` (math too) or `interpreted text`_.
_QUOTED = re.compile(r"(``.+?``|:[\w:.-]+:`[^`]*`|`[^`]*`_{0,2})")


def _join_wrapped_math(text: str) -> str:
    """Join a line that opens a ``$`` formula without closing it with the lines that close it."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        while line.count("$") % 2 == 1 and i + 1 < len(lines) and lines[i + 1].strip():
            i += 1
            line = line + " " + lines[i].strip()
        out.append(line)
        i += 1
    return "\n".join(out)


def dollars_to_math(text: str) -> str:
    """``$x$`` and ``$$x$$`` (the house style for formulas in docstrings) -> reST math.

    Also quotes bare names ending in ``_`` (``kaiming_uniform_``, ``add_``), which reST would
    otherwise read as links.
    """

    def display(match: re.Match[str]) -> str:
        indent, body = match.group(1), " ".join(match.group(2).split())
        return f"\n{indent}.. math:: {body}\n"

    text = _DISPLAY_MATH.sub(display, text)
    # Inline math that a docstring wraps over two lines of one paragraph: join it first.
    text = _join_wrapped_math(text)
    out = []
    code_indent: int | None = None  # inside a literal block ("::") at more than this indent
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip())
        if code_indent is not None and line.strip() and indent <= code_indent:
            code_indent = None
        if line.rstrip().endswith("::") and not line.lstrip().startswith(".. math::"):
            out.append(line)
            code_indent = indent
            continue
        # Code is left as written: a reader pastes it (``>>>`` lines, literal blocks).
        if code_indent is not None or line.lstrip().startswith((">>>", "... ")):
            out.append(line)
            continue
        if line.lstrip().startswith(".. math::"):
            out.append(line)
            continue
        # (a formula's own spaces at its ends would end the role early: "$x > $" is "x >")
        line = _INLINE_MATH.sub(lambda m: f":math:`{m.group(1).strip()}`", line)
        parts = _QUOTED.split(line)  # even parts are outside ``literals``, roles and `links`_
        for i in range(0, len(parts), 2):
            parts[i] = _TRAILING_UNDERSCORE.sub(r"``\1``", parts[i])
            if i and parts[i - 1].startswith("``") and parts[i][:1].isalnum():
                parts[i] = "\\ " + parts[i]  # ``fork``ed: reST ends a literal only before a space
        out.append("".join(parts))
    return "\n".join(out)


#: The modules a user imports, PyTorch's faces (``import torchlight.nn.functional as F``): the
#: API index (and so the site's sidebar) lists these; every other module, the library's
#: internals by file, is one level down, under :data:`INTERNALS_PAGE`.
FACES = [
    "torchlight.autograd",
    "torchlight",
    "torchlight.nn",
    "torchlight.nn.functional",
    "torchlight.nn.init",
    "torchlight.nn.utils",
    "torchlight.optim",
    "torchlight.optim.lr_scheduler",
    "torchlight.data",
    "torchlight.utils.data",
    "torchlight.amp",
    "torchlight.cuda",
    "torchlight.backends",
    "torchlight.ops",
    "torchlight.testing",
    "torchlight.train",
    "torchlight.viz",
]
INTERNALS_PAGE = "internals"


def write_api_pages(_app: Any = None) -> None:
    api = DOCS / "api"
    api.mkdir(exist_ok=True)
    home = homes()
    index = [_title("API reference"), API_INTRO, ".. toctree::\n   :maxdepth: 1\n"]
    internals = [
        _title("Internals: every module"),
        INTERNALS_INTRO,
        ".. toctree::\n   :maxdepth: 1\n",
    ]
    for module_name in PUBLIC_MODULES:
        members = module_members_rst(module_name, home)
        listed = index if module_name in FACES else internals
        if module_name in HAND_WRITTEN:
            _write_if_changed(api / f"_{module_name}.members.rst", members)
            listed.append(f"   {module_name} (Autograd API) <../{HAND_WRITTEN[module_name]}>")
            continue
        page = [
            _title(f"``{module_name}``"),
            f".. automodule:: {module_name}\n   :no-members:\n",
            members,
        ]
        _write_if_changed(api / f"{module_name}.rst", "\n".join(page))
        listed.append(f"   {module_name}")
    index.append(f"   {INTERNALS_PAGE}")
    _write_if_changed(api / "index.rst", "\n".join(index) + "\n")
    _write_if_changed(api / f"{INTERNALS_PAGE}.rst", "\n".join(internals) + "\n")
    written = {f"{m}.rst" for m in PUBLIC_MODULES} | {f"_{m}.members.rst" for m in HAND_WRITTEN}
    written |= {"index.rst", f"{INTERNALS_PAGE}.rst"}
    for stale in api.glob("*.rst"):  # a module that was renamed or removed since the last build
        if stale.name not in written:
            stale.unlink()


API_INTRO = """Every name in each public module's ``__all__``, generated from the docstrings (Google style:
the formula first, ``Shape:`` for tensor ops, a runnable example). The modules you import are
listed here; the autograd engine has its own page, :doc:`../autograd`, and every other module
(the library's files, one concept each) is under :doc:`internals`.

"""

INTERNALS_INTRO = """Every other module of the library, by file: where each public name is
defined (its full entry is on the first page that exports it; the modules you import are on
:doc:`index`). Read these to see how torchlight is built.

"""


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:  # unchanged files keep Sphinx incremental
        path.write_text(text)


def copy_notebooks(_app: Any = None) -> None:
    """The stored notebooks, as they are (outputs included), with links fixed for the site."""
    target = DOCS / "tutorials"
    for notebook in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        text = notebook.read_text()
        # A notebook links to a docs page as ../docs/page.md (right in the repository); on the
        # site the tutorials live in docs/tutorials/, one level below the pages.
        text = text.replace("](../docs/", "](../")
        for note, on_the_site in _notes_for_the_site().items():  # a page has no cell to run
            text = text.replace(note, on_the_site)
        _write_if_changed(target / notebook.name, text)


def _notes_for_the_site() -> dict[str, str]:
    """The note above each stored viewer picture, as a notebook shows it ("run the cell") ->
    as the site shows it (where to get the interactive viewer)."""
    from torchlight.viz import modules, training, widgets

    there = "open this tutorial in JupyterLab (make lab) to"
    return {
        widgets.STATIC_NOTE: f"A static picture of the graph viewer: {there} click its nodes "
        "and step through backward.",
        training.STATIC_NOTE: f"A static picture of the training viewer: {there} train.",
        modules.STATIC_NOTE: f"A static picture of the module viewer: {there} pick parameters "
        "and see their values.",
    }


def readme_section(path: Path, heading: str) -> str:
    """One ``## heading`` section of a markdown file (up to the next ``## ``), links made plain."""
    text = path.read_text()
    match = re.search(rf"^## {re.escape(heading)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not match:
        return ""
    # Relative links point into the repository, not into the site: keep their text and path.
    return _plain_links(match.group(1))


def _plain_links(markdown: str) -> str:
    """``[text](path)`` -> ``text (`path`)`` for a relative link, outside `code` spans (where
    ``[a](`` is text, not a link)."""
    parts = re.split(r"(`[^`\n]*`)", markdown)  # odd parts are code
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\[([^\]]+)\]\((?!https?:|#)([^)]+)\)", r"\1 (`\2`)", parts[i])
    return "".join(parts)


def write_included_sections(_app: Any = None) -> None:
    generated = DOCS / "_generated"
    generated.mkdir(exist_ok=True)
    pytorch = readme_section(ROOT / "README.md", "Coming from PyTorch")
    if not pytorch:
        pytorch = (
            "The README has no *Coming from PyTorch* section yet. In short: torchlight spells "
            "things PyTorch's way (`tl.tensor`, `requires_grad=`, `.backward()`, `.grad`, "
            "`nn.Module`, `optim.SGD`); {doc}`api/index` lists every name.\n"
        )
    # The README's ### subsections become ## under this page's own # title.
    pytorch = re.sub(r"^###", "##", pytorch, flags=re.M)
    _write_if_changed(generated / "pytorch.md", pytorch)
    course = ROOT / "assignments" / "README.md"
    text = course.read_text()
    body = text.split("\n", 1)[1] if text.startswith("# ") else text  # the page has its own title
    _write_if_changed(generated / "course.md", _plain_links(body))


def function_form_doc(obj: Any) -> str:
    """The documentation of an undocumented function form (``tl.exp`` is ``x.exp()``): a
    pointer to the Tensor method it calls ('' when ``obj`` is not one)."""
    import torchlight

    name = getattr(obj, "__name__", "")
    module = getattr(obj, "__module__", "") or ""
    if inspect.getdoc(obj) or not module.endswith("functional_forms"):
        return ""
    if not hasattr(torchlight.Tensor, name):
        return ""
    return (
        f"The function form of :meth:`torchlight.Tensor.{name}`: ``tl.{name}(x, ...)`` is "
        f"``x.{name}(...)``, with the same graph and the same gradient."
    )


def process_docstring(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    if not any(line.strip() for line in lines) and what == "function":
        lines[:] = [function_form_doc(obj)] if function_form_doc(obj) else lines
    text = dollars_to_math("\n".join(lines))
    lines[:] = text.split("\n")


def resolve_short_names(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Resolve ``:class:`ToyTrainer``` written in a module whose objects are documented on
    another page (the context is then the page's module): the one object of that name.
    An ambiguous or unknown name stays unresolved, and nitpicky mode reports it."""
    if node.get("refdomain") != "py" or node.get("reftype") not in (
        "class",
        "func",
        "meth",
        "exc",
        "obj",
        "data",
        "attr",
    ):
        return None
    target = node["reftarget"].lstrip("~.")
    domain = env.get_domain("py")
    matches = [name for name in domain.objects if name == target or name.endswith("." + target)]
    homes_only = [m for m in matches if not domain.objects[m].aliased] or matches
    if len(homes_only) == 1:
        return domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], homes_only[0], node, contnode
        )
    # A name the code has but the API does not list (a helper of the module, a method of the
    # class the docstring is in): shown as code, without a link. Unknown names still warn.
    owner: Any = None
    try:
        owner = importlib.import_module(node.get("py:module") or "")
        for part in (node.get("py:class") or "").split("."):
            owner = getattr(owner, part) if part else owner
    except (ImportError, ValueError, AttributeError):
        return None
    import torchlight

    if inspect.isclass(owner) and owner in torchlight.Tensor.__mro__:
        owner = torchlight.Tensor  # a Tensor mixin's docstring names a method of Tensor
    for part in target.split("."):
        owner = getattr(owner, part, None)
    return contnode if owner is not None or _exists(target) else None


def _exists(dotted: str) -> bool:
    """Whether ``package.module.attr.attr`` names something that exists."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def setup(app: Any) -> dict[str, Any]:
    app.connect("missing-reference", resolve_short_names)
    app.connect("builder-inited", write_api_pages)
    app.connect("builder-inited", copy_notebooks)
    app.connect("builder-inited", write_included_sections)
    app.connect("autodoc-process-docstring", process_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def _copy_mathjax(app: Any, exception: Exception | None) -> None:  # used by conf.py
    if exception is not None or app.builder.format != "html":
        return
    import jupyter_server_mathjax

    source = Path(jupyter_server_mathjax.__file__).parent / "static"
    target = Path(app.outdir) / "_static" / "mathjax"
    # Only what is missing or differs (596 files, 12 MB): a rebuild copies nothing.
    for path in source.rglob("*"):
        if path.is_file():
            copy = target / path.relative_to(source)
            stat = path.stat()
            if copy.exists() and (copy.stat().st_size, copy.stat().st_mtime_ns) == (
                stat.st_size,
                stat.st_mtime_ns,
            ):
                continue
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
