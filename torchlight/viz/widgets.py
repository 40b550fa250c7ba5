"""The interactive graph viewer: ``tl.viz.show(loss)`` in a notebook.

::

    ┌ graph (click a node; drag to pan; Ctrl + wheel to zoom) ────────────┐
    │  a ─┬─> Add ──> b ──> Mul ──> c                                     │
    └─────┴───────────────────────────────────────────────────────────────┘
    [▶] backward step ──●───────  node: [a (leaf) ▾]
    Step 1 of 3: the gradient of c is complete; Mul.backward passes it on to b, a.
    ┌ info: value, grad, the Function and its chain-rule step ───────────┐

Everything the viewer shows comes from :class:`~torchlight.viz.view.GraphView`; this file only
wires widgets to it. Two traits hold the state: ``step`` (how far backward has got) and
``selected`` (the node id in the info panel). The slider, the play button, the drop-down and a
click on the canvas all just set one of them.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets
import traitlets

from torchlight.viz.canvas import HAS_ANYWIDGET, make_canvas
from torchlight.viz.graph import FUNCTION
from torchlight.viz.svg import LEGEND_H, svg_img_html
from torchlight.viz.ticker import make_ticker
from torchlight.viz.view import GraphView

__all__ = ["GraphViewer"]

STATIC_NOTE = (
    "A static picture: the interactive graph viewer needs a running Jupyter kernel "
    "(this output was saved or exported). Run the cell to click and step through backward."
)


class GraphViewer(widgets.VBox):
    """An interactive picture of ``tensor``'s computation graph.

    Click a node (or choose it in the list) to see its value, its gradient and, for a Function,
    its chain-rule step; its path to the root lights up. Move the slider or press play to run
    backward one node at a time: gradients fill in, in reverse topological order. The gradients
    are computed on the side: the tensors' own ``.grad`` are never changed.

    Args:
        tensor: the root of the graph (usually the loss).
        names: labels for tensors, e.g. ``{"w": w}`` or ``locals()``; ``tensor.name`` wins.
        step: how many backward steps to show at first (``None``: all of them).
        gradient: $\\partial L / \\partial\\,\\mathrm{tensor}$ to start backward with (ones by default).
        height: the canvas height in pixels (default: the graph's height, at most 560).

    Example:
        >>> import torchlight as tl
        >>> a = tl.tensor([1.0, 2.0], requires_grad=True)
        >>> viewer = GraphViewer((a + a) * a, names={"a": a})
        >>> viewer.step = 3; viewer.selected = "t0"   # what the slider and a click do
        >>> "tensor([4., 8.])" in viewer.info.value
        True
    """

    step = traitlets.Int(0)
    selected = traitlets.Unicode("")

    def __init__(
        self,
        tensor: Any,
        names: Mapping[str, Any] | None = None,
        step: int | None = 0,
        gradient: Any = None,
        height: int | None = None,
    ) -> None:
        self.view = GraphView(tensor, names=names, gradient=gradient)
        n = self.view.n_steps
        # Tall enough for the whole graph and its colour key, up to 560 px (then pan or zoom).
        canvas_height = height or int(min(self.view.layout.height + LEGEND_H + 6, 560))
        self.canvas = make_canvas(canvas_height)
        self.canvas.add_class("tl-graph-canvas")
        # One timer however often the viewer is displayed (see torchlight.viz.ticker).
        self.play = make_ticker(interval=900, label="backward", max=n)
        self.slider = widgets.IntSlider(
            value=0, min=0, max=n, description="backward step", continuous_update=True,
            style={"description_width": "initial"}, layout=widgets.Layout(width="340px"),
        )  # fmt: skip
        options = [("(none)", "")] + [
            (f"{node.label} ({'Function' if node.kind == FUNCTION else node.kind})", node.id)
            for node in self.view.graph.nodes
        ]
        self.picker = widgets.Dropdown(
            options=options, value="", description="node", layout=widgets.Layout(width="260px")
        )
        self.status = widgets.HTML()
        self.status.add_class("tl-step-text")
        self.info = widgets.HTML()
        self.info.add_class("tl-info")
        hint = (
            "Click a node to inspect it"
            if HAS_ANYWIDGET
            else "Pick a node in the list to inspect it"
        )
        title = widgets.HTML(
            f"<b>Computation graph of {html.escape(self.view.labels[self.view.graph.root])}</b> "
            f"<span style='color:#5f6368'>· {hint}; press ▶ to step through backward.</span>"
        )
        controls = widgets.HBox([self.play, self.slider, self.picker])
        if self.view.replay.error and not self.view.replay.steps:
            self.play.disabled = self.slider.disabled = True
        super().__init__([title, self.canvas, controls, self.status, self.info])
        self.add_class("tl-graph-viewer")

        # One source of truth: every control is linked to the `step` or `selected` trait.
        widgets.link((self.play, "value"), (self.slider, "value"))
        widgets.link((self.slider, "value"), (self, "step"))
        widgets.link((self.picker, "value"), (self, "selected"))
        widgets.link((self.canvas, "selected"), (self, "selected"))
        self.observe(self._redraw, names=["step", "selected"])
        self.step = n if step is None else max(0, min(step, n))
        self._redraw()

    @traitlets.validate("selected")
    def _check_selected(self, proposal: dict[str, Any]) -> str:
        value = proposal["value"]
        if value and value not in self.view.labels:
            raise traitlets.TraitError(
                f"no node {value!r} in this graph; ids are {list(self.view.labels)}"
            )
        return value

    def _redraw(self, change: dict[str, Any] | None = None) -> None:
        frame = self.view.frame(self.step, self.selected or None)  # the one place a redraw goes
        self.canvas.svg = frame.svg
        self.status.value = html.escape(frame.status)
        self.info.value = frame.info

    def select(self, tensor_or_id: Any) -> None:
        """Select a node by id (``"t0"``) or by the tensor it draws."""
        self.selected = (
            tensor_or_id if isinstance(tensor_or_id, str) else self.view.graph.id_of(tensor_or_id)
        )

    def grad_shown(self, tensor_or_id: Any) -> Any:
        """The gradient the viewer shows for a node at the current step (None: not computed yet)."""
        node_id = (
            tensor_or_id if isinstance(tensor_or_id, str) else self.view.graph.id_of(tensor_or_id)
        )
        return self.view.grad_of(node_id, self.step)

    def __repr__(self) -> str:
        graph = self.view.graph
        n_functions = sum(1 for n in graph.nodes if n.kind == FUNCTION)
        return (
            f"GraphViewer of {self.view.labels[graph.root]}: {len(graph.nodes) - n_functions} tensors, "
            f"{n_functions} Functions, backward in {self.view.n_steps} steps "
            "(interactive in JupyterLab; in a plain console use tl.viz.draw(...).save('graph.svg'))"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # The widget for JupyterLab, plus a static picture for viewers without a kernel (an
        # exported page, GitHub) and a plain-text line that stays the same run after run.
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        note = f"<p style='color:#b06000;margin:0 0 4px 0'>{html.escape(STATIC_NOTE)}</p>"
        svg = self.view.frame(self.step, self.selected or None).svg
        picture = svg_img_html(svg, "computation graph")  # shown also where JupyterLab distrusts
        bundle["text/html"] = (
            f"<div class='tl-graph-picture' style='overflow:auto'>{note}{picture}</div>"
        )
        bundle["text/plain"] = repr(self)
        return bundle
