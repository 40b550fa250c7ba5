"""The clickable, zoomable SVG canvas of the graph viewer.

An ipywidgets ``HTML`` widget can show an SVG but cannot tell Python which node was clicked.
So the canvas is an `anywidget <https://anywidget.dev>`_: a few lines of JavaScript, shipped
here as a string (no npm build, nothing fetched from a CDN), that

- shows the ``svg`` trait and keeps the pan/zoom position when Python redraws it;
- sets the ``selected`` trait to the ``data-node`` id of a clicked node (Python observes it);
- pans on drag, zooms on Ctrl + wheel and with its + / − / fit / 1:1 buttons;
- starts at 1:1 when the graph fits, else fitted (a tall graph's root, at the bottom, is in view).

Without anywidget, :func:`make_canvas` returns a scrollable ``HTML`` widget instead; the viewer
then selects nodes through its drop-down list only.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import traitlets

try:
    import anywidget
except ImportError:  # pragma: no cover - exercised only where anywidget is not installed
    anywidget = None  # type: ignore[assignment]

__all__ = ["HAS_ANYWIDGET", "make_canvas"]

HAS_ANYWIDGET = anywidget is not None

_ESM = r"""
function render({ model, el }) {
  el.classList.add("tl-canvas");
  const bar = document.createElement("div");
  bar.className = "tl-zoombar";
  const box = document.createElement("div");
  box.className = "tl-svgbox";
  const hint = document.createElement("div");
  hint.className = "tl-hint";
  hint.textContent = "click a node · drag to pan · Ctrl + wheel to zoom";
  el.append(box, bar, hint);

  // The view: SVG units per pixel (scale) and the top-left corner (vx, vy). Until the user
  // pans or zooms (touched), the graph stays placed as first shown, also when the canvas
  // resizes: at 1:1 when it fits, else fitted, so that a tall graph's root (at the bottom)
  // is on screen from the start.
  let scale = 1, vx = 0, vy = 0, full = null, placed = false, touched = false, fitted = false;
  const width = () => box.clientWidth || 900;
  const height = () => model.get("height");

  function apply() {
    const svg = box.querySelector("svg");
    if (!svg) return;
    svg.setAttribute("viewBox", `${vx} ${vy} ${width() / scale} ${height() / scale}`);
  }
  function fit() {
    scale = Math.min(width() / full.w, height() / full.h, 1.5);
    vx = full.x - (width() / scale - full.w) / 2;
    vy = full.y;
    apply();
  }
  function actual() {  // 1:1, the top of the graph, centred if narrower than the canvas
    scale = 1;
    vx = full.x - Math.max(0, (width() - full.w) / 2);
    vy = full.y;
    apply();
  }
  function zoom(factor, cx, cy) {
    touched = true;
    const next = Math.min(4, Math.max(0.05, scale * factor));
    vx += cx / scale - cx / next;
    vy += cy / scale - cy / next;
    scale = next;
    apply();
  }
  function draw() {
    box.style.height = height() + "px";
    box.innerHTML = model.get("svg");
    const svg = box.querySelector("svg");
    if (!svg) return;
    const vb = svg.viewBox.baseVal;
    full = { x: vb.x, y: vb.y, w: vb.width, h: vb.height };
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
    svg.style.width = "100%";
    svg.style.height = "100%";
    if (!placed) {
      fitted = full.h > height() || full.w > width();
      fitted ? fit() : actual();
      placed = true;
    } else { apply(); }
  }

  for (const [text, title, action] of [
    ["+", "zoom in", () => zoom(1.25, width() / 2, height() / 2)],
    ["−", "zoom out", () => zoom(0.8, width() / 2, height() / 2)],
    ["fit", "show the whole graph", () => { touched = false; fitted = true; fit(); }],
    ["1:1", "actual size, centred", () => { touched = false; fitted = false; actual(); }],
  ]) {
    const b = document.createElement("button");
    b.textContent = text;
    b.title = title;
    b.addEventListener("click", action);
    bar.append(b);
  }

  let drag = null;
  box.addEventListener("pointerdown", (ev) => {
    drag = { x: ev.clientX, y: ev.clientY, vx, vy, moved: false };
  });
  box.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (drag.moved) {
      touched = true;
      vx = drag.vx - dx / scale;
      vy = drag.vy - dy / scale;
      apply();
    }
  });
  box.addEventListener("pointerup", () => { setTimeout(() => { drag = null; }, 0); });
  box.addEventListener("pointerleave", () => { drag = null; });
  box.addEventListener("click", (ev) => {
    if (drag && drag.moved) return;  // the end of a pan, not a click
    const node = ev.target.closest("[data-node]");
    if (!node) return;
    model.set("selected", node.getAttribute("data-node"));
    model.save_changes();
  });
  box.addEventListener("wheel", (ev) => {
    if (!(ev.ctrlKey || ev.metaKey)) return;  // a plain wheel scrolls the notebook
    ev.preventDefault();
    const r = box.getBoundingClientRect();
    zoom(Math.exp(-ev.deltaY * 0.002), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });

  const resized = new ResizeObserver(() => {
    if (full) { touched ? apply() : (fitted ? fit() : actual()); }
  });
  resized.observe(box);
  model.on("change:svg", draw);
  model.on("change:height", draw);
  draw();
  return () => {
    resized.disconnect();
    model.off("change:svg", draw);
    model.off("change:height", draw);
  };
}
export default { render };
"""

_CSS = """
.tl-canvas { position: relative; border: 1px solid #dadce0; border-radius: 6px; background: #fff; }
.tl-canvas .tl-svgbox { overflow: hidden; cursor: grab; touch-action: none; }
.tl-canvas .tl-svgbox:active { cursor: grabbing; }
.tl-canvas .tl-node:hover > rect:first-of-type { stroke-width: 3; }
.tl-canvas .tl-zoombar { position: absolute; top: 6px; right: 6px; display: flex; gap: 4px; }
.tl-canvas .tl-zoombar button { font: 12px sans-serif; min-width: 30px; padding: 2px 6px; cursor: pointer;
  border: 1px solid #bdc1c6; border-radius: 4px; background: #f8f9fa; }
/* Below the picture, not over it: over it, it ran into the graph's legend (issue 26.9). */
.tl-canvas .tl-hint { text-align: right; padding: 2px 8px 3px; border-top: 1px solid #f1f3f4;
  font: 11px sans-serif; color: #80868b; pointer-events: none; }
"""

if anywidget is not None:

    class GraphCanvas(anywidget.AnyWidget):
        """The SVG view: Python sets ``svg``; a click in the browser sets ``selected``."""

        _esm = _ESM
        _css = _CSS
        svg = traitlets.Unicode("").tag(sync=True)
        selected = traitlets.Unicode("").tag(sync=True)
        height = traitlets.Int(460).tag(sync=True)


class HTMLCanvas(widgets.HTML):
    """The fallback without anywidget: the SVG in a scrollable box; ``selected`` is not clickable."""

    def __init__(self, height: int) -> None:
        super().__init__()
        self._height = height
        self.add_traits(selected=traitlets.Unicode(""), svg=traitlets.Unicode(""))
        self.observe(self._show, "svg")

    def _show(self, change: dict[str, Any]) -> None:
        self.value = f"<div class='tl-canvas' style='overflow:auto;max-height:{self._height}px'>{change['new']}</div>"


def make_canvas(height: int) -> Any:
    """A ``GraphCanvas`` (clickable) when anywidget is installed, else an ``HTMLCanvas``."""
    if anywidget is not None:
        return GraphCanvas(height=height)
    return HTMLCanvas(height)
