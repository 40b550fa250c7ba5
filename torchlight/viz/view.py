"""What the graph viewer shows, without any widget: the picture and the text at each step.

:class:`GraphView` traces a tensor's graph once, lays it out once, replays backward once, and
then answers "what does step ``k`` look like" and "what do we say about node ``n``". Every
redraw goes through one place, :meth:`GraphView.frame`: the picture, the step's sentence and
the info panel for one (step, selected node), which the widget (:mod:`torchlight.viz.widgets`),
its static copy and the static picture (:func:`to_svg`, :func:`draw`) all show.

Example:
    >>> import torchlight as tl
    >>> a = tl.tensor([1.0, 2.0], requires_grad=True)
    >>> view = GraphView((a + a) * a, names={"a": a})
    >>> view.n_steps, view.grad_of("t0", view.n_steps)
    (3, tensor([4., 8.]))
"""

from __future__ import annotations

import html
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from torchlight.viz.graph import CONSTANT, FUNCTION, INTERMEDIATE, LEAF, ROOT, trace
from torchlight.viz.replay import replay_backward
from torchlight.viz.svg import COLORS, render_svg, svg_img_html
from torchlight.viz.svg import layout_graph as _layout_graph

__all__ = ["Frame", "GraphPicture", "GraphView", "draw", "to_svg"]

_SECTIONS = ("Args:", "Returns:", "Raises:", "Shape:", "Example:", "Examples:", "Attributes:")


def local_rule(fn: type) -> str:
    """What a Function's own docstring says it computes and how its gradient flows (the text
    before its first ``Args:``/``Example:``... section; formula first, by the house style).
    ``""`` for a Function without a docstring of its own."""
    doc = inspect.cleandoc(fn.__dict__.get("__doc__") or "")
    lines = []
    for line in doc.splitlines():
        if line.strip() in _SECTIONS:
            break
        lines.append(line)
    return " ".join(" ".join(lines).split())


KIND_WORDS = {
    LEAF: "a leaf tensor (made by you, requires_grad=True): backward stores its gradient in .grad",
    CONSTANT: "a constant (requires_grad=False): no gradient flows into it",
    INTERMEDIATE: "an intermediate tensor, made by a Function",
    ROOT: "the root: backward starts here with dL/droot = ones",
}


def _pre(value: Any) -> str:
    return f"<pre style='margin:0;white-space:pre-wrap'>{html.escape(repr(value))}</pre>"


def _box(color: str, head: str, lines: list[str], rows: list[tuple[str, str]]) -> str:
    """The info panel's card: a heading, a few sentences, then a two-column table."""
    text = "".join(f"<div style='color:#3c4043'>{line}</div>" for line in lines)
    cells = "".join(
        f"<tr><td style='vertical-align:top;padding:2px 10px 2px 0;white-space:nowrap'>{k}</td>"
        f"<td style='padding:2px 0'>{v}</td></tr>"
        for k, v in rows
    )
    return (
        f"<div class='tl-info-box' style='border-left:4px solid {color};padding:4px 10px;line-height:1.45'>"
        f"<div>{head}</div>{text}<table style='border-collapse:collapse;margin-top:4px'>{cells}</table></div>"
    )


class Frame(NamedTuple):
    """What the viewer shows for one (step, selected node): see :meth:`GraphView.frame`."""

    svg: str  # the picture
    status: str  # one sentence on what backward does at this step (plain text)
    info: str  # the info panel of the selected node (HTML)


class GraphView:
    """The graph of ``tensor`` with every step of its backward pass, ready to draw.

    Args:
        tensor: the root of the graph (usually the loss).
        names: labels for tensors, e.g. ``{"w": w}`` or ``locals()``; ``tensor.name`` wins.
        gradient: $\\partial L / \\partial\\,\\mathrm{tensor}$ to start backward with (ones by default).
    """

    def __init__(
        self, tensor: Any, names: Mapping[str, Any] | None = None, gradient: Any = None
    ) -> None:
        self.graph = trace(tensor, names=names)
        self.replay = replay_backward(self.graph, gradient)
        self.layout = _layout_graph(self.graph, self.grads_at(self.n_steps))
        self.labels = {n.id: n.label for n in self.graph.nodes}

    @property
    def n_steps(self) -> int:
        """How many steps backward takes (one per tensor that receives a gradient)."""
        return len(self.replay)

    def grads_at(self, step: int) -> dict[str, Any]:
        """Node id -> gradient, for every gradient complete after ``step`` steps."""
        if not self.replay.steps and self.replay.error and step > 0:
            # The graph was freed by an earlier backward(): only the leaves' .grad is known.
            return {
                n.id: n.tensor._grad
                for n in self.graph.nodes
                if n.kind == LEAF and n.tensor._grad is not None
            }
        return self.replay.grads_at(step)

    def grad_of(self, node_id: str, step: int) -> Any:
        """The gradient of ``node_id`` after ``step`` steps, or None if not computed yet."""
        return self.grads_at(step).get(node_id)

    def frame(self, step: int, selected: str | None = None) -> Frame:
        """Everything drawn after ``step`` steps of backward with ``selected`` outlined: the one
        place a redraw goes through (``step`` is clamped to ``0 .. n_steps``)."""
        step = max(0, min(step, self.n_steps))
        return Frame(self.svg(step, selected), self.step_text(step), self.info_html(selected, step))

    def svg(self, step: int, selected: str | None = None, legend: bool = True) -> str:
        """The picture after ``step`` steps of backward, with ``selected`` and its path to the root."""
        step = max(0, min(step, self.n_steps))
        done = self.replay.steps[:step]
        current: tuple[str, ...] = (done[-1].node, done[-1].fn) if done else ()
        path = self.graph.path_to_root(selected) if selected else None
        return render_svg(
            self.graph,
            self.layout,
            self.grads_at(step),
            selected=selected,
            path=path,
            current=current,
            ran={s.fn for s in done if s.fn},
            legend=legend,
        )

    def step_text(self, step: int) -> str:
        """One sentence on what backward does at ``step``."""
        if self.replay.error and not self.replay.steps:
            return self.replay.error
        if step <= 0:
            return (
                f"Step 0 of {self.n_steps}: no gradient computed yet. Press ▶ or move the slider."
            )
        s = self.replay.steps[min(step, self.n_steps) - 1]
        label = self.labels[s.node]
        text = f"Step {step} of {self.n_steps}: the gradient of {label} is complete"
        if s.fn:
            sends = ", ".join(self.labels[i] for i, _, _ in s.sends) or "no input that needs one"
            text += f"; {self.labels[s.fn]}.backward passes it on to {sends}."
        else:
            text += f" (a leaf: backward stores it in {label}.grad)."
        if step >= self.n_steps:
            text += " Backward is finished."
        if self.replay.error:
            text += f" ({self.replay.error})"
        return text

    def info_html(self, node_id: str | None, step: int) -> str:
        """The info panel for ``node_id`` after ``step`` steps of backward."""
        if not node_id:
            return "<i>Click a node (or pick one in the list) to see its value, gradient and chain-rule step.</i>"
        node = self.graph.node(node_id)
        if node.kind == FUNCTION:
            return self._function_info(node_id, step)
        head = f"<b>{html.escape(node.label)}</b> · shape {node.shape} · {node.dtype}"
        lines = [KIND_WORDS[node.kind] + "."]
        made_by = [e.src for e in self.graph.inputs_of(node_id)]
        if made_by:
            args = ", ".join(self.labels[e.src] for e in self.graph.inputs_of(made_by[0]))
            lines.append(f"Made by <b>{self.labels[made_by[0]]}</b>({html.escape(args)}).")
        uses = [f"{self.labels[e.dst]} (input {e.slot})" for e in self.graph.outputs_of(node_id)]
        if uses:
            lines.append("Used by " + html.escape(", ".join(uses)) + ".")
        rows = [("value", _pre(node.tensor.detach()))]
        color = COLORS[node.kind][1]
        if node.kind == CONSTANT:
            return _box(color, head, lines, rows)
        grad = self.grad_of(node_id, step)
        when = self.replay.step_of(node_id)
        name = f"<b style='color:#a50e0e'>grad</b><br><small>dL/d{html.escape(node.label)}</small>"
        if grad is not None:
            rows.append((name, _pre(grad)))
        elif when is None:
            rows.append((name, "<i>no gradient reaches this node</i>"))
        else:
            rows.append(
                (
                    name,
                    f"<i>not computed yet</i>: backward reaches it at step {when} (this is step {step})",
                )
            )
        lines.append(
            "<span style='color:#d01884'>Highlighted: the path its gradient comes back along from the root.</span>"
        )
        return _box(color, head, lines, rows)

    def _function_info(self, node_id: str, step: int) -> str:
        label = self.labels[node_id]
        out = self.labels[self.graph.outputs_of(node_id)[0].dst]
        args = ", ".join(self.labels[e.src] for e in self.graph.inputs_of(node_id))
        head = (
            f"<b>{label}</b> · a Function node: {html.escape(out)} = {label}({html.escape(args)})"
        )
        lines = []
        tensor = self.graph.node(self.graph.outputs_of(node_id)[0].dst).tensor
        rule = local_rule(tensor.history.last_fn) if tensor is not None and tensor.history else ""
        if rule:
            lines.append(f"Local rule (from its docstring): {html.escape(rule)}")
        when = self.replay.step_of(node_id)
        color = COLORS[FUNCTION][1]
        if when is None:
            return _box(color, head, [*lines, "<i>Backward does not run this Function.</i>"], [])
        if step < when:
            return _box(
                color,
                head,
                [*lines, f"<i>Its chain-rule step runs at step {when} (this is step {step}).</i>"],
                [],
            )
        s = self.replay.steps[when - 1]
        lines.append(
            f"Chain-rule step (step {when}): given grad_output, {label}.backward returns one gradient per input."
        )
        rows = [(f"grad_output<br><small>= dL/d{html.escape(out)}</small>", _pre(s.grad))]
        for input_id, slot, contribution in s.sends:
            rows.append(
                (
                    f"adds to dL/d{html.escape(self.labels[input_id])}<br><small>(input {slot})</small>",
                    _pre(contribution),
                )
            )
        return _box(color, head, lines, rows)


class GraphPicture:
    """A static SVG picture of a graph: shows itself in Jupyter, or ``.save("graph.svg")``.

    Args:
        svg: the SVG text.
        message: shown above the picture (e.g. why this is not the interactive viewer).
        view: the :class:`GraphView` it was drawn from, as the interactive viewer's ``.view``
            (so ``picture.view.step_text(1)`` works in a plain Python console too).
    """

    def __init__(self, svg: str, message: str = "", view: GraphView | None = None) -> None:
        self.svg = svg
        self.message = message
        self.view = view

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        note = (
            f"<p style='color:#b06000;margin:0 0 4px 0'>{html.escape(self.message)}</p>"
            if self.message
            else ""
        )
        # An <img>, not inline SVG: JupyterLab shows it also in a notebook it does not trust.
        picture = svg_img_html(self.svg, "computation graph")
        return f"<div class='tl-graph-picture' style='overflow:auto'>{note}{picture}</div>"

    def __str__(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        note = f"{self.message}\n" if self.message else ""
        return f"{note}GraphPicture: an SVG picture of a computation graph; .save('graph.svg') writes it to a file"

    def save(self, path: str | Path) -> Path:
        """Write the SVG to ``path`` (open it in any browser); returns the path."""
        path = Path(path)
        path.write_text(self.svg, encoding="utf-8")
        return path


def to_svg(
    tensor: Any,
    names: Mapping[str, Any] | None = None,
    step: int | None = None,
    selected: str | None = None,
) -> str:
    """The SVG text of ``tensor``'s computation graph.

    Args:
        tensor: the root (usually a loss).
        names: labels for tensors, e.g. ``{"a": a}`` or ``locals()``.
        step: show the gradients after this many steps of backward: ``0`` shows none, ``None``
            (the default) shows them all. The tensors' own ``.grad`` are never touched.
        selected: a node id (``"t0"``) to outline with its path to the root.
    """
    view = GraphView(tensor, names=names)
    return view.frame(view.n_steps if step is None else step, selected).svg


def draw(
    tensor: Any, names: Mapping[str, Any] | None = None, step: int | None = None, message: str = ""
) -> GraphPicture:
    """Like :func:`to_svg`, wrapped in a :class:`GraphPicture` that Jupyter displays."""
    view = GraphView(tensor, names=names)
    return GraphPicture(view.frame(view.n_steps if step is None else step).svg, message, view)
