"""See a model's structure: its modules as a tree, with every parameter's shape and count.

The tree is plain HTML with ``<details>`` elements, so it folds and unfolds in any browser
without JavaScript, and :func:`module_tree_html` works in a saved notebook too.
:class:`ModuleViewer` adds a list of parameters: pick one to see its values and gradient.

Example:
    >>> from torchlight.viz.modules import module_tree_html
    >>> from torchlight import nn
    >>> model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
    >>> "42 parameters" in module_tree_html(model) and "(8, 2)" in module_tree_html(model)
    True
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from torchlight.viz.graph import summarize

__all__ = ["ModuleViewer", "count_parameters", "module_tree_html"]

STATIC_NOTE = (
    "A static picture: run the cell in JupyterLab to pick parameters and see their values."
)


def count_parameters(module: Any, trainable_only: bool = False) -> int:
    """The number of numbers in ``module``'s parameters (those with requires_grad, if asked)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _module_line(name: str, module: Any) -> str:
    kind = type(module).__name__
    extra = module.extra_repr() if hasattr(module, "extra_repr") else ""
    title = f"<b>{html.escape(name)}</b>: " if name else ""
    count = count_parameters(module)
    badge = f" <span style='color:#5f6368'>· {_plural(count, 'parameter')}</span>" if count else ""
    return f"{title}<code>{html.escape(kind)}({html.escape(extra)})</code>{badge}"


def _parameter_rows(module: Any) -> str:
    rows = []
    for name, p in module.named_parameters(recurse=False):
        frozen = "" if p.requires_grad else " <span style='color:#b06000'>(frozen)</span>"
        rows.append(
            f"<li style='list-style:none'><span style='color:#2e7d32'>■</span> <code>{html.escape(name)}</code> "
            f"shape <code>{tuple(p.shape)}</code> · {p.dtype.name} · {_plural(p.numel(), 'number')}{frozen}</li>"
        )
    return "".join(rows)


def _tree(name: str, module: Any, depth: int) -> str:
    children = list(module.named_children())
    params = _parameter_rows(module)
    if not children and not params:
        return f"<li style='list-style:none;margin-left:1.1em'>{_module_line(name, module)}</li>"
    inner = params + "".join(_tree(child_name, child, depth + 1) for child_name, child in children)
    opened = " open" if depth < 3 else ""
    return (
        f"<li style='list-style:none'><details{opened}><summary>{_module_line(name, module)}</summary>"
        f"<ul style='margin:2px 0 2px 0.6em;padding-left:0.8em;border-left:1px solid #dadce0'>{inner}</ul>"
        "</details></li>"
    )


def module_tree_html(module: Any) -> str:
    """The tree of ``module``: each submodule with its settings, each parameter with its shape."""
    total, trainable = count_parameters(module), count_parameters(module, trainable_only=True)
    frozen = f", {total - trainable:,} frozen" if total != trainable else ""
    head = f"<div><b>{html.escape(type(module).__name__)}</b>: {_plural(total, 'parameter')}{frozen}</div>"
    tree = f"<ul style='padding-left:0;margin:4px 0'>{_tree('', module, 0)}</ul>"
    return f"<div class='tl-module-tree' style='font-size:13px'>{head}{tree}</div>"


class ModuleViewer(widgets.VBox):
    """A model's tree of modules, with a parameter picker that shows values and gradients.

    Args:
        module: any :class:`torchlight.nn.Module`.

    Example:
        >>> from torchlight.viz import ModuleViewer
        >>> from torchlight import nn
        >>> viewer = ModuleViewer(nn.Sequential(nn.Linear(2, 3)))
        >>> viewer.picker.value = "0.weight"  # what choosing in the list does
        >>> "shape (3, 2)" in viewer.info.value
        True
    """

    def __init__(self, module: Any) -> None:
        self.module = module
        self.parameters = dict(module.named_parameters())
        self.tree = widgets.HTML(module_tree_html(module))
        self.tree.add_class("tl-module-tree-view")
        self.picker = widgets.Dropdown(
            options=[("(pick a parameter)", "")] + [(n, n) for n in self.parameters],
            value="",
            description="parameter",
        )
        self.info = widgets.HTML()
        self.info.add_class("tl-info")
        refresh = widgets.Button(
            description="Refresh", icon="refresh", tooltip="read the values and gradients again"
        )
        refresh.on_click(lambda _: self._show())
        super().__init__([self.tree, widgets.HBox([self.picker, refresh]), self.info])
        self.add_class("tl-module-viewer")
        self.picker.observe(lambda _: self._show(), names="value")
        self._show()

    def _show(self) -> None:
        self.tree.value = module_tree_html(self.module)
        name = self.picker.value
        if not name:
            self.info.value = "<i>Pick a parameter to see its values and its gradient.</i>"
            return
        p = self.parameters[name]
        grad = p.grad  # a parameter is a leaf, so reading .grad is allowed
        grad_text = (
            "<i>None: no backward has reached it yet</i>"
            if grad is None
            else html.escape(repr(grad))
        )
        self.info.value = (
            f"<b>{html.escape(name)}</b>: shape {tuple(p.shape)} · {p.dtype.name} · requires_grad={p.requires_grad}"
            f"<br>value ({html.escape(summarize(p.detach().numpy()))}):<pre>{html.escape(repr(p.detach()))}</pre>"
            f"grad:<pre>{grad_text}</pre>"
        )

    def __repr__(self) -> str:
        return f"ModuleViewer({type(self.module).__name__}: {_plural(count_parameters(self.module), 'parameter')})"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        note = f"<p style='color:#b06000;margin:0 0 4px 0'>{html.escape(STATIC_NOTE)}</p>"
        bundle["text/html"] = note + module_tree_html(self.module)
        bundle["text/plain"] = repr(self)
        return bundle
