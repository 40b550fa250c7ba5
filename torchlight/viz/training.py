r"""Watch a small network learn a 2-D toy data set: decision boundary, loss and accuracy.

:class:`ToyTrainer` is the training (no widgets): a one-hidden-layer network
$\mathrm{Linear}(2, h) \to \mathrm{act} \to \mathrm{Linear}(h, 2)$, trained full batch with
SGD + momentum on the cross-entropy loss. :class:`TrainingViewer` puts controls around it.
Training advances in small chunks, one per tick of a play button (start / pause), so
everything runs in the kernel's own thread: no background threads, nothing to clean up.

Example:
    >>> from torchlight.viz.training import ToyTrainer
    >>> trainer = ToyTrainer("xor", hidden=8, lr=0.5, seed=0)
    >>> trainer.step(300) < trainer.loss_history[0]
    True
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
import numpy as np

import torchlight as tl
from torchlight import nn
from torchlight.data import TOY_DATASETS
from torchlight.nn import functional as F
from torchlight.optim import SGD
from torchlight.viz.plots import boundary_svg, line_chart_svg
from torchlight.viz.svg import svg_img_html
from torchlight.viz.ticker import make_ticker

__all__ = ["ToyTrainer", "TrainingViewer"]

LR_CHOICES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "sigmoid": nn.Sigmoid}
STATIC_NOTE = "A static picture: run the cell in JupyterLab to train interactively."


class ToyTrainer:
    """Full-batch training of a one-hidden-layer network on a toy set from :mod:`torchlight.data`.

    Args:
        dataset: ``"simple"``, ``"diag"``, ``"split"``, ``"xor"``, ``"circle"`` or ``"spiral"``.
        hidden: the number of hidden units $h$.
        lr: the learning rate $\\eta$.
        activation: ``"tanh"``, ``"relu"`` or ``"sigmoid"``.
        n: the number of points; noise: their jitter; seed: the data's and the weights' seed.
        momentum: SGD momentum $\\mu$.

    The inputs are standardized (zero mean, unit variance per feature) before the network sees
    them, so one learning rate suits every data set.
    """

    grid = 60  # the decision-boundary map evaluates the network on grid × grid points

    def __init__(
        self,
        dataset: str = "xor",
        hidden: int = 8,
        lr: float = 0.5,
        activation: str = "tanh",
        n: int = 200,
        noise: float = 0.0,
        seed: int = 0,
        momentum: float = 0.9,
    ) -> None:
        if dataset not in TOY_DATASETS:
            raise ValueError(f"unknown data set {dataset!r}; choose one of {sorted(TOY_DATASETS)}")
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {activation!r}; choose one of {sorted(ACTIVATIONS)}"
            )
        if hidden < 1:
            raise ValueError(
                f"hidden (the number of hidden units) must be at least 1, got {hidden}"
            )
        self.dataset, self.hidden, self.lr, self.activation = dataset, hidden, lr, activation
        self.n, self.noise, self.seed, self.momentum = n, noise, seed, momentum
        self.reset()

    def reset(self) -> None:
        """New data (same seed: same points), fresh weights, empty history."""
        x, y = TOY_DATASETS[self.dataset](n=self.n, noise=self.noise, seed=self.seed).tensors
        self.points, self.labels = x.numpy(), y.numpy()
        self.mean, self.std = self.points.mean(axis=0), self.points.std(axis=0) + 1e-12
        self.x = tl.tensor((self.points - self.mean) / self.std)
        self.y = y
        tl.manual_seed(self.seed)
        self.model = nn.Sequential(
            nn.Linear(2, self.hidden), ACTIVATIONS[self.activation](), nn.Linear(self.hidden, 2)
        )
        self.optimizer = SGD(self.model.parameters(), lr=self.lr, momentum=self.momentum)
        self.loss_history: list[float] = []
        self.accuracy_history: list[float] = []
        self._record()

    def set_lr(self, lr: float) -> None:
        """Change the learning rate without restarting (the next step uses it)."""
        self.lr = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    @property
    def steps(self) -> int:
        """How many optimizer steps have been taken since the last reset."""
        return len(self.loss_history) - 1

    def _record(self) -> None:
        with tl.no_grad():
            logits = self.model(self.x)
            loss = F.cross_entropy(logits, self.y)
        self.loss_history.append(float(loss.item()))
        self.accuracy_history.append(float((logits.numpy().argmax(axis=1) == self.labels).mean()))

    def step(self, n: int = 1) -> float:
        """Take ``n`` gradient steps on the whole data set; returns the loss after them."""
        for _ in range(n):
            loss = F.cross_entropy(self.model(self.x), self.y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self._record()
        return self.loss_history[-1]

    @property
    def extent(self) -> tuple[float, float]:
        """The square the map covers, (low, high), is the data's range plus a margin."""
        low, high = float(self.points.min()), float(self.points.max())
        margin = 0.08 * (high - low)
        return low - margin, high + margin

    def probabilities(self) -> np.ndarray:
        """P(class 1) on a grid × grid map; row 0 is the top of the picture."""
        low, high = self.extent
        ticks = np.linspace(low, high, self.grid)
        x1, x2 = np.meshgrid(ticks, ticks[::-1])
        grid = np.stack([x1.ravel(), x2.ravel()], axis=1)
        with tl.no_grad():
            logits = self.model(tl.tensor((grid - self.mean) / self.std)).numpy()
        shifted = logits - logits.max(axis=1, keepdims=True)  # a stable softmax
        p = np.exp(shifted)
        return (p[:, 1] / p.sum(axis=1)).reshape(self.grid, self.grid)

    def boundary_svg(self, size: int = 300) -> str:
        """The decision boundary with the data; misclassified points have a black ring."""
        with tl.no_grad():
            predicted = self.model(self.x).numpy().argmax(axis=1)
        return boundary_svg(
            self.probabilities(), self.points, self.labels, self.extent, size, predicted
        )

    def curves_svg(self) -> str:
        """Loss and accuracy over the steps."""
        top = max(max(self.loss_history), 1.0)
        return line_chart_svg(
            [("loss", self.loss_history, "#c5221f"), ("accuracy", self.accuracy_history, "#188038")],
            y_max=top, title="training", formats={"accuracy": ".1%"},
        )  # fmt: skip

    def summary(self) -> str:
        """One line: data set, network, step, loss, accuracy."""
        return (
            f"{self.dataset}: {self.n} points · Linear(2, {self.hidden}) → {self.activation} → Linear({self.hidden}, 2)"
            f" · lr {self.lr:.3g} · step {self.steps} · loss {self.loss_history[-1]:.4f}"
            f" · accuracy {self.accuracy_history[-1]:.1%}"
        )


class TrainingViewer(widgets.VBox):
    """Train on a 2-D toy set and watch: the decision boundary, the loss and the accuracy.

    Controls: data set, hidden size, activation, learning rate; ▶ trains (press again to pause), Reset
    starts over with fresh weights. Changing the data set, hidden size or activation resets;
    the learning rate applies from the next step. ``train(n)`` trains from code.

    Args:
        dataset, hidden, lr, activation, n, noise, seed: as for :class:`ToyTrainer`.
        steps_per_tick: gradient steps per tick of the play button (one redraw per tick).
    """

    def __init__(
        self,
        dataset: str = "xor",
        hidden: int = 8,
        lr: float = 0.5,
        activation: str = "tanh",
        n: int = 200,
        noise: float = 0.0,
        seed: int = 0,
        steps_per_tick: int = 5,
    ) -> None:
        self.trainer = ToyTrainer(dataset, hidden, lr, activation, n, noise, seed)
        self.steps_per_tick = steps_per_tick
        wide = {"description_width": "initial"}
        self.dataset_picker = widgets.Dropdown(
            options=list(TOY_DATASETS), value=dataset, description="data set", style=wide
        )
        self.hidden_slider = widgets.IntSlider(
            value=hidden, min=1, max=32, description="hidden units", style=wide
        )
        self.activation_picker = widgets.Dropdown(
            options=list(ACTIVATIONS), value=activation, description="activation", style=wide
        )
        # Fixed choices, not a FloatLogSlider: that one snaps 0.5 to 10**-0.3 = 0.501 in the
        # browser (its steps are in the exponent) and then trains with the snapped value.
        choices = sorted({*LR_CHOICES, float(lr)})
        self.lr_slider = widgets.SelectionSlider(
            options=[(f"{c:g}", c) for c in choices],
            value=float(lr),
            description="learning rate",
            style=wide,
        )
        # One timer however often the viewer is displayed (see torchlight.viz.ticker).
        self.play = make_ticker(interval=150, label="train")
        self.reset_button = widgets.Button(
            description="Reset", icon="refresh", tooltip="fresh weights, empty history"
        )
        self.boundary = widgets.HTML()
        self.boundary.add_class("tl-boundary-view")
        self.curves = widgets.HTML()
        self.status = widgets.HTML()
        self.status.add_class("tl-training-status")
        controls = widgets.VBox(
            [
                widgets.HBox([self.dataset_picker, self.activation_picker]),
                widgets.HBox([self.hidden_slider, self.lr_slider]),
                widgets.HBox([self.play, self.reset_button]),
            ]
        )
        help_text = widgets.HTML(
            "<b>Training viewer</b> <span style='color:#5f6368'>· ▶ trains, press it again to pause. Background: "
            "the network's P(orange); dots: the data (a black ring: misclassified).</span>"
        )
        super().__init__(
            [
                help_text,
                widgets.HBox([self.boundary, widgets.VBox([self.curves, controls])]),
                self.status,
            ]
        )
        self.add_class("tl-training-viewer")

        self.play.observe(self._on_tick, names="value")
        self.reset_button.on_click(lambda _: self.reset())
        for control in (self.dataset_picker, self.hidden_slider, self.activation_picker):
            control.observe(self._on_model_change, names="value")
        self.lr_slider.observe(lambda change: self._set_lr(change["new"]), names="value")
        self._redraw()

    def _on_tick(self, change: dict[str, Any]) -> None:
        if change["new"] > change["old"]:  # the stop button sets the value back to 0: a pause
            self.train(self.steps_per_tick)

    def _on_model_change(self, change: dict[str, Any]) -> None:
        t = self.trainer
        t.dataset, t.hidden, t.activation = (
            self.dataset_picker.value,
            self.hidden_slider.value,
            self.activation_picker.value,
        )
        self.reset()

    def _set_lr(self, lr: float) -> None:
        self.trainer.set_lr(lr)
        self._redraw()

    def train(self, steps: int) -> float:
        """Take ``steps`` gradient steps, redraw, and return the loss."""
        loss = self.trainer.step(steps)
        self._redraw()
        return loss

    def reset(self) -> None:
        """Fresh weights and an empty history (the data set stays the same)."""
        self.trainer.reset()
        self._redraw()

    def _redraw(self) -> None:
        self.boundary.value = self.trainer.boundary_svg()
        self.curves.value = self.trainer.curves_svg()
        self.status.value = html.escape(self.trainer.summary())

    def __repr__(self) -> str:
        return f"TrainingViewer({self.trainer.summary()})"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        note = f"<p style='color:#b06000;margin:0 0 4px 0'>{html.escape(STATIC_NOTE)}</p>"
        boundary = svg_img_html(self.trainer.boundary_svg(), "decision boundary")
        curves = svg_img_html(self.trainer.curves_svg(), "loss and accuracy")
        pictures = f"<div style='display:flex;gap:12px'>{boundary}{curves}</div>"
        bundle["text/html"] = (
            f"<div class='tl-training-picture'>{note}{pictures}<p>{html.escape(self.trainer.summary())}</p></div>"
        )
        bundle["text/plain"] = repr(self)
        return bundle
