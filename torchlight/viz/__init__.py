"""See what autograd does: computation graphs, backward step by step, training, modules.

The pipeline, one file per step:

- :mod:`~torchlight.viz.graph`: walk a tensor's graph into plain nodes and edges;
- :mod:`~torchlight.viz.replay`: replay backward node by node, without touching ``.grad``;
- :mod:`~torchlight.viz.layout`: a layered layout in pure Python (no graphviz);
- :mod:`~torchlight.viz.svg`: draw it as a self-contained SVG;
- :mod:`~torchlight.viz.widgets`, :mod:`~torchlight.viz.training`, :mod:`~torchlight.viz.modules`:
  the ipywidgets viewers for JupyterLab.
- :mod:`~torchlight.viz.heatmap`: attention weights as grey squares, head by head (Tutorial 8).
- :mod:`~torchlight.viz.frames`: pictures to choose from or step through, in plain HTML that
  works without a kernel, on the docs site too (Tutorials 8 and 9).

Example:
    >>> import torchlight as tl
    >>> a = tl.tensor([1.0, 2.0], requires_grad=True)
    >>> c = (a + a) * a
    >>> from torchlight import viz
    >>> picture = viz.draw(c, names={"a": a, "c": c})  # a static SVG, shows in any notebook
    >>> viewer = viz.show(c, names=locals())  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchlight.viz.frames import Frames
from torchlight.viz.graph import Edge, Graph, Node, trace
from torchlight.viz.layout import LayoutResult, count_crossings, layered_layout
from torchlight.viz.replay import BackwardReplay, BackwardStep, replay_backward
from torchlight.viz.svg import Picture, layout_graph, render_svg, svg_img_html
from torchlight.viz.view import GraphPicture, GraphView, draw, to_svg

__all__ = [
    "BackwardReplay", "BackwardStep", "Edge", "Frames", "Graph", "GraphPicture", "GraphView", "GraphViewer",
    "LayoutResult", "ModuleViewer", "Node", "Picture", "TrainingViewer", "count_crossings", "draw",
    "in_jupyter_kernel", "layered_layout", "layout_graph", "render_svg", "replay_backward", "show",
    "svg_img_html", "to_svg", "trace",
]  # fmt: skip

_WIDGETS = {
    "GraphViewer": "torchlight.viz.widgets",
    "TrainingViewer": "torchlight.viz.training",
    "ModuleViewer": "torchlight.viz.modules",
}
_NO_WIDGETS = (
    "{name} needs ipywidgets, which is not installed: pip install 'torchlight-edu[notebooks]' "
    "(or run `make lab`, which installs everything). Meanwhile tl.viz.draw(tensor) draws a static picture."
)


def __getattr__(name: str) -> Any:
    # The widget classes are imported on first use, so that `import torchlight` stays fast and
    # works where ipywidgets is not installed.
    if name in _WIDGETS:
        import importlib

        try:
            module = importlib.import_module(_WIDGETS[name])
        except ImportError as error:
            if error.name in ("ipywidgets", "traitlets"):
                raise ImportError(_NO_WIDGETS.format(name=name)) from error
            raise
        return getattr(module, name)
    raise AttributeError(f"module 'torchlight.viz' has no attribute {name!r}")


def in_jupyter_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (where widgets can be displayed)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show(
    tensor: Any, names: Mapping[str, Any] | None = None, step: int | None = 0, gradient: Any = None
) -> Any:
    """Draw ``tensor``'s computation graph; in JupyterLab, click it and step through backward.

    Args:
        tensor: the root of the graph (usually the loss).
        names: labels for tensors, e.g. ``{"w": w}``, or ``locals()`` to use your variable names.
        step: how many backward steps to show at first: ``0`` none, ``None`` all.
        gradient: $\\partial L / \\partial\\,\\mathrm{tensor}$ to start backward with (ones by default).

    Returns:
        A :class:`~torchlight.viz.widgets.GraphViewer` in a Jupyter kernel with ipywidgets;
        elsewhere (a plain Python console, no ipywidgets) a :class:`GraphPicture`, whose
        message says why it is static. Either way the tensors' ``.grad`` are left untouched.
    """
    if not in_jupyter_kernel():
        return draw(
            tensor, names=names, step=step,
            message="Not in a Jupyter kernel, so this is a static picture (the interactive viewer "
            "needs JupyterLab). Save it with .save('graph.svg') and open it in a browser.",
        )  # fmt: skip
    try:
        from torchlight.viz.widgets import GraphViewer
    except ImportError as error:
        if error.name not in ("ipywidgets", "traitlets"):
            raise
        return draw(
            tensor,
            names=names,
            step=step,
            message=_NO_WIDGETS.format(name="The interactive viewer"),
        )
    return GraphViewer(tensor, names=names, step=step, gradient=gradient)
