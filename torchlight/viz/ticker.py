"""A play / pause button whose timer runs once per widget, however often it is displayed.

ipywidgets' ``Play`` keeps its timer in the model but lets every *view* start and stop it: a
widget displayed twice (a cell ending in ``viewer``, and later ``viewer.train(500); viewer``)
has two views, and the second one pauses what the first one started, so training stopped after
one tick. ``Ticker`` is an `anywidget <https://anywidget.dev>`_ whose timer lives in the
model's ``initialize`` (called once per widget), while each view only draws a button that sets
``playing``. Every tick adds 1 to ``value``; Python observes ``value``.

Without anywidget, :func:`make_ticker` returns an ipywidgets ``Play`` (the same traits).
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import traitlets

try:
    import anywidget
except ImportError:  # pragma: no cover - exercised only where anywidget is not installed
    anywidget = None  # type: ignore[assignment]

__all__ = ["make_ticker"]

_ESM = r"""
function initialize({ model }) {
  // One timer per widget (not per view): see the module docstring.
  let timer = null;
  function tick() {
    const next = model.get("value") + 1;
    if (model.get("max") > 0 && next > model.get("max")) {
      model.set("playing", false);
    } else {
      model.set("value", next);
    }
    model.save_changes();
  }
  function sync() {
    if (model.get("playing") && timer === null) {
      if (model.get("max") > 0 && model.get("value") >= model.get("max")) {
        model.set("value", 0);  // at the end: play again from the start
        model.save_changes();
      }
      timer = setInterval(tick, model.get("interval"));
    } else if (!model.get("playing") && timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  }
  model.on("change:playing", sync);
  sync();
  return () => { if (timer !== null) clearInterval(timer); };
}

function render({ model, el }) {
  el.classList.add("tl-ticker");
  const button = document.createElement("button");
  button.className = "jupyter-button tl-ticker-button";
  const show = () => {
    const playing = model.get("playing");
    button.textContent = playing ? "‖ " + model.get("pause_label") : "▶ " + model.get("play_label");
    button.title = playing ? "pause" : "start";
    button.disabled = model.get("disabled");
  };
  button.addEventListener("click", () => {
    model.set("playing", !model.get("playing"));
    model.save_changes();
  });
  model.on("change:playing", show);
  model.on("change:disabled", show);
  show();
  el.append(button);
  return () => { model.off("change:playing", show); model.off("change:disabled", show); };
}
export default { initialize, render };
"""

_CSS = """
.tl-ticker-button { min-width: 96px; }
"""

if anywidget is not None:

    class Ticker(anywidget.AnyWidget):
        """▶ / ‖ in the browser; ``value`` goes up by one every ``interval`` ms while playing."""

        _esm = _ESM
        _css = _CSS
        value = traitlets.Int(0).tag(sync=True)
        max = traitlets.Int(0).tag(sync=True)  # 0: no end; else playing stops at max
        interval = traitlets.Int(150).tag(sync=True)
        playing = traitlets.Bool(False).tag(sync=True)
        disabled = traitlets.Bool(False).tag(sync=True)
        play_label = traitlets.Unicode("play").tag(sync=True)
        pause_label = traitlets.Unicode("pause").tag(sync=True)


def make_ticker(interval: int, label: str = "play", max: int = 0) -> Any:  # noqa: A002
    """A ``Ticker`` when anywidget is installed, else an ipywidgets ``Play``."""
    if anywidget is not None:
        return Ticker(interval=interval, max=max, play_label=label)
    return widgets.Play(
        value=0, min=0, max=max or 10**9, step=1, interval=interval, show_repeat=False
    )
