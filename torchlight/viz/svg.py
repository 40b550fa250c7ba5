"""Draw a traced graph as a self-contained SVG picture (no graphviz, no JavaScript).

The picture needs nothing but a browser or an image viewer: it shows in JupyterLab, in an
exported HTML page and on GitHub. Colours say what a node is; the gradient row of a tensor says
whether backward has reached it yet:

- a *solid* red band ``grad [4., 8.]``: the gradient is computed (it may well be ``0.``);
- a *dashed, empty* band ``grad ?  not computed yet``: backward has not got there.

Example:
    >>> import torchlight as tl
    >>> from torchlight.viz import to_svg
    >>> a = tl.tensor([1.0, 2.0], requires_grad=True)
    >>> to_svg((a + a) * a).startswith("<svg")
    True
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from typing import Any

import numpy as np

from torchlight.viz.graph import (
    CONSTANT,
    FUNCTION,
    INTERMEDIATE,
    LEAF,
    ROOT,
    Graph,
    Node,
    summarize,
)
from torchlight.viz.layout import LayoutResult, layered_layout

__all__ = ["COLORS", "Picture", "layout_graph", "node_size", "render_svg", "svg_img_html"]

# (fill, stroke, legend text) per kind of node: colour-blind-friendly hues, dark text on light fill.
COLORS = {
    LEAF: ("#e6f4ea", "#2e7d32", "leaf (needs grad)"),
    CONSTANT: ("#f1f3f4", "#9aa0a6", "constant (no grad)"),
    INTERMEDIATE: ("#e8f0fe", "#1a73e8", "intermediate"),
    ROOT: ("#fef3e0", "#e37400", "root"),
    FUNCTION: ("#f3e8fd", "#8430ce", "Function"),
}
GRAD_FILL, GRAD_STROKE, GRAD_TEXT = "#fce8e6", "#c5221f", "#a50e0e"
PENDING = "#9aa0a6"  # a gradient not computed yet, edges nothing has flowed through
HIGHLIGHT = "#d01884"  # the selected node and its path to the root
CURRENT = "#f9ab00"  # the node backward is at
FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace"
CHAR_W = 6.7  # width of one character of the 11px monospace font
LINE_H = 15
MAX_CHARS = 44  # longer text is cut with an ellipsis (the info panel shows it all)
TENSOR_H = 4 * LINE_H + 24
FUNCTION_H = 26
LEGEND_W = 620  # the legend's rows wrap to fit: a picture fits a docs page's column (~740 px)


def _cut(text: str, limit: int = MAX_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shape_line(node: Node) -> str:
    return f"shape {node.shape}  {node.dtype}"


def node_size(node: Node, grad_text: str = "") -> tuple[float, float]:
    """``(width, height)`` of a node's box, from the length of its text (and of its gradient)."""
    if node.kind == FUNCTION:
        return (max(len(node.label) * (CHAR_W + 0.6) + 28, 56), FUNCTION_H)
    lines = [node.label + " " * 8, _shape_line(node), "value " + node.value, "grad " + grad_text]
    longest = max(max(len(_cut(line)) for line in lines), 24)
    return (longest * CHAR_W + 20, TENSOR_H)


def layout_graph(graph: Graph, grads: Mapping[str, Any] | None = None) -> LayoutResult:
    """Lay ``graph`` out with each box sized to its text (see :mod:`torchlight.viz.layout`).

    ``grads`` (node id -> gradient) makes room for the gradients that will be shown.
    """
    grads = grads or {}
    sizes = {}
    for n in graph.nodes:
        grad = grads.get(n.id)
        sizes[n.id] = node_size(n, summarize(np.asarray(grad)) if grad is not None else "")
    return layered_layout([n.id for n in graph.nodes], [(e.src, e.dst) for e in graph.edges], sizes)


def _text(x: float, y: float, text: str, **attrs: Any) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{html.escape(text)}</text>'


def _edge_path(points: list[tuple[float, float]]) -> str:
    """A smooth vertical curve through ``points`` (one cubic Bézier piece per layer)."""
    (x0, y0), parts = points[0], [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for x1, y1 in points[1:]:
        mid = (y0 + y1) / 2
        parts.append(f"C{x0:.1f},{mid:.1f} {x1:.1f},{mid:.1f} {x1:.1f},{y1:.1f}")
        x0, y0 = x1, y1
    return " ".join(parts)


def _tooltip(node: Node, grad: Any) -> str:
    if node.kind == FUNCTION:
        return f"{node.label}: a Function node (click for its chain-rule step)"
    lines = [f"{node.label} ({node.kind})", _shape_line(node), f"value {node.value}"]
    if grad is not None:
        lines.append(f"grad {summarize(np.asarray(grad))}")
    return "\n".join(lines)


def _tensor_box(
    node: Node, x: float, y: float, w: float, h: float, grad: Any, needs_grad: bool
) -> list[str]:
    fill, stroke, _ = COLORS[node.kind]
    left, top = x - w / 2, y - h / 2
    dash = ' stroke-dasharray="4 3"' if node.kind == CONSTANT else ""
    out = [
        f'<rect x="{left:.1f}" y="{top:.1f}" width="{w:.1f}" height="{h:.1f}" rx="7" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"{dash}/>',
        _text(
            left + 8, top + 16, _cut(node.label, MAX_CHARS - 8), font_weight="bold", font_size="12"
        ),
        _text(left + w - 8, top + 16, node.kind, text_anchor="end", font_size="10", fill=stroke),
        _text(left + 8, top + 16 + LINE_H, _cut(_shape_line(node)), fill="#5f6368"),
        _text(left + 8, top + 16 + 2 * LINE_H, _cut("value " + node.value)),
    ]
    band_top, band_h = top + 3 * LINE_H + 9, LINE_H + 5
    band = f'x="{left + 4:.1f}" y="{band_top:.1f}" width="{w - 8:.1f}" height="{band_h}" rx="4"'
    baseline = band_top + band_h - 6
    if not needs_grad:
        out.append(_text(left + 8, baseline, "no grad needed", fill=PENDING, font_size="10"))
    elif grad is None:
        out.append(f'<rect {band} fill="none" stroke="{PENDING}" stroke-dasharray="3 3"/>')
        out.append(
            _text(left + 8, baseline, "grad ?  not computed yet", fill=PENDING, font_style="italic")
        )
    else:
        out.append(f'<rect {band} fill="{GRAD_FILL}" stroke="{GRAD_STROKE}"/>')
        text = _cut("grad " + summarize(np.asarray(grad)))
        out.append(_text(left + 8, baseline, text, fill=GRAD_TEXT, font_weight="bold"))
    return out


def _legend_keys() -> list[tuple[str, str]]:
    """``(swatch attributes, text)`` of each key of the legend, in order."""
    keys = [
        (f'fill="{fill}" stroke="{stroke}"', text)
        for fill, stroke, text in (
            COLORS[k] for k in (LEAF, CONSTANT, INTERMEDIATE, ROOT, FUNCTION)
        )
    ]
    keys.append((f'fill="{GRAD_FILL}" stroke="{GRAD_STROKE}"', "grad computed"))
    keys.append((f'fill="none" stroke="{PENDING}" stroke-dasharray="3 3"', "not computed yet"))
    # the two outlines drawn around nodes (see render_svg's ring)
    for color, text in (
        (CURRENT, "amber ring: the node backward is at in this step"),
        (HIGHLIGHT, "magenta: the selected node and its path to the root"),
    ):
        keys.append((f'fill="none" stroke="{color}" stroke-width="2.5"', text))
    return keys


def _legend_places() -> list[tuple[float, int, str, str]]:
    """``(x, row, swatch, text)`` of each key: left to right, a new row where the next key
    would pass ``LEGEND_W`` (a 10px character is about 6.1 px wide)."""
    places, x, row = [], 16.0, 0
    for swatch, text in _legend_keys():
        width = 19 + len(text) * 6.1
        if x > 16.0 and x + width > LEGEND_W - 8:
            x, row = 16.0, row + 1
        places.append((x, row, swatch, text))
        x += width + 14
    return places


LEGEND_H = 18 * (_legend_places()[-1][1] + 1) + 12  # its rows, and the space above them


def _legend(y: float) -> list[str]:
    out = []
    for x, row, swatch, text in _legend_places():
        top = y + 18 * row
        out.append(f'<rect x="{x:.1f}" y="{top}" width="14" height="12" rx="3" {swatch}/>')
        out.append(_text(x + 19, top + 10, text, font_size="10", fill="#3c4043"))
    return out


def _edges(
    graph: Graph, layout: LayoutResult, ran: set[str], path_edges: set[tuple[str, str]]
) -> list[str]:
    """One curve per edge; a Function's inputs enter at ports spread left to right by slot."""
    n_inputs: dict[str, int] = {}
    for e in graph.edges:
        if e.slot >= 0:
            n_inputs[e.dst] = n_inputs.get(e.dst, 0) + 1
    out = []
    for e in graph.edges:
        points = list(layout.routes[(e.src, e.dst)])
        many = e.slot >= 0 and n_inputs[e.dst] > 1
        if many:  # input 0 enters on the left, input 1 to its right...
            spacing = min(18.0, (layout.sizes[e.dst][0] - 20) / (n_inputs[e.dst] - 1))
            x_end, y_end = points[-1]
            points[-1] = (x_end + (e.slot - (n_inputs[e.dst] - 1) / 2) * spacing, y_end)
        flowed = e.dst in ran or (e.slot == -1 and e.src in ran)
        if (e.src, e.dst) in path_edges:
            color, width, marker = HIGHLIGHT, 3.0, "path"
        elif flowed:
            color, width, marker = GRAD_STROKE, 1.8, "grad"
        else:
            color, width, marker = PENDING, 1.3, "plain"
        out.append(
            f'<path d="{_edge_path(points)}" fill="none" stroke="{color}" stroke-width="{width}" '
            f'marker-end="url(#tl-arrow-{marker})" data-edge="{e.src}-{e.dst}"/>'
        )
        if many:
            x, y = points[-1]
            left = e.slot < (n_inputs[e.dst] - 1) / 2
            out.append(
                _text(x - 9 if left else x + 4, y - 7, str(e.slot), font_size="9", fill="#5f6368")
            )
    return out


def render_svg(
    graph: Graph,
    layout: LayoutResult | None = None,
    grads: Mapping[str, Any] | None = None,
    *,
    selected: str | None = None,
    path: tuple[set[str], set[tuple[str, str]]] | None = None,
    current: tuple[str, ...] = (),
    ran: set[str] | None = None,
    legend: bool = True,
) -> str:
    """The SVG text of ``graph``.

    Args:
        graph: from :func:`~torchlight.viz.graph.trace`.
        layout: from :func:`layout_graph` (computed when omitted).
        grads: the gradients computed so far, by node id; a tensor that needs a gradient and
            is missing here is drawn as "not computed yet".
        selected: a node id to outline.
        path: ``(nodes, edges)`` to highlight, e.g. ``graph.path_to_root(selected)``.
        current: node ids backward is working on (outlined in amber).
        ran: Function node ids whose chain rule has run (their input edges turn red).
        legend: draw the colour key under the graph.
    """
    layout = layout or layout_graph(graph)
    grads = grads or {}
    ran = ran or set()
    path_nodes, path_edges = path or (set(), set())
    width = max(layout.width, LEGEND_W if legend else 0.0)
    height = layout.height + (LEGEND_H if legend else 0)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}" font-size="11" '
        f'fill="#202124" class="tl-graph">',
        "<defs>",
    ]
    for name, color in (("plain", PENDING), ("grad", GRAD_STROKE), ("path", HIGHLIGHT)):
        out.append(
            f'<marker id="tl-arrow-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
            'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{color}"/></marker>'
        )
    out.append("</defs>")
    out.append(f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>')

    out.extend(_edges(graph, layout, ran, path_edges))

    for node in graph.nodes:
        x, y = layout.positions[node.id]
        w, h = layout.sizes[node.id]
        grad = grads.get(node.id)
        out.append(f'<g class="tl-node" data-node="{node.id}" style="cursor:pointer">')
        out.append(f"<title>{html.escape(_tooltip(node, grad))}</title>")
        if node.kind == FUNCTION:
            fill, stroke, _ = COLORS[FUNCTION]
            out.append(
                f'<rect x="{x - w / 2:.1f}" y="{y - h / 2:.1f}" width="{w:.1f}" height="{h:.1f}" '
                f'rx="{h / 2:.1f}" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
            )
            out.append(
                _text(
                    x, y + 4, node.label, text_anchor="middle", font_weight="bold", fill="#4a148c"
                )
            )
        else:
            needs_grad = node.kind != CONSTANT and bool(
                node.tensor is None or node.tensor.requires_grad
            )
            out.extend(_tensor_box(node, x, y, w, h, grad, needs_grad))
        ring = None
        if node.id == selected:
            ring = (HIGHLIGHT, 3.5)
        elif node.id in current:
            ring = (CURRENT, 3.5)
        elif node.id in path_nodes:
            ring = (HIGHLIGHT, 1.5)
        if ring:
            rx = h / 2 if node.kind == FUNCTION else 9
            out.append(
                f'<rect x="{x - w / 2 - 3:.1f}" y="{y - h / 2 - 3:.1f}" width="{w + 6:.1f}" '
                f'height="{h + 6:.1f}" rx="{rx:.1f}" fill="none" stroke="{ring[0]}" stroke-width="{ring[1]}"/>'
            )
        out.append("</g>")
    if legend:
        out.extend(_legend(layout.height + 6))
    out.append("</svg>")
    return "\n".join(out)


def svg_img_html(svg: str, alt: str = "picture") -> str:
    """An ``<img>`` tag that shows ``svg`` from a ``data:`` URI.

    JupyterLab does not trust a notebook it did not run: it will not render its stored
    ``image/svg+xml`` outputs and it sanitizes stored HTML, which strips inline ``<svg>``
    elements (leaving their text run together). An ``<img>`` whose source is the SVG passes the
    sanitizer and is shown, because an SVG loaded as an image cannot run scripts. So every
    picture torchlight stores in a notebook is also offered in this form.

    Example:
        >>> from torchlight.viz import svg_img_html
        >>> svg_img_html("<svg xmlns='http://www.w3.org/2000/svg'/>")[:42]
        '<img alt="picture" src="data:image/svg+xml'
    """
    encoded = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/svg+xml;base64,{encoded}"/>'


class Picture:
    """An SVG picture that shows itself in Jupyter, also in a notebook JupyterLab does not trust.

    It offers ``image/svg+xml`` (what a trusted notebook, nbconvert or GitHub show) and an
    HTML ``<img>`` of the same SVG (see :func:`svg_img_html`), so the stored notebooks show
    their pictures before any cell runs. Use it instead of ``IPython.display.SVG``.

    Args:
        svg: the SVG text.
        alt: a short description, for screen readers.

    Example:
        >>> from torchlight.viz import Picture
        >>> Picture("<svg xmlns='http://www.w3.org/2000/svg' width='4' height='4'/>").svg[:4]
        '<svg'
    """

    def __init__(self, svg: str, alt: str = "picture") -> None:
        self.svg = svg
        self.alt = alt

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        return svg_img_html(self.svg, self.alt)

    def __repr__(self) -> str:
        return f"Picture({self.alt}: an SVG of {len(self.svg)} characters)"
