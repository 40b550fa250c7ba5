"""The training viewer and the module viewer, headless: controls in, pictures and numbers out."""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pytest

import torchlight as tl
from torchlight import nn
from torchlight.data import TOY_DATASETS
from torchlight.viz.modules import ModuleViewer, count_parameters, module_tree_html
from torchlight.viz.plots import boundary_svg, line_chart_svg, png_bytes, probability_colors
from torchlight.viz.training import ToyTrainer, TrainingViewer


def test_png_encoder_writes_a_valid_png():
    image = np.zeros((3, 4, 3), dtype=np.uint8)
    image[1, 2] = (255, 0, 10)
    data = png_bytes(image)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # Decode it again: IHDR says 4x3, and the pixel data comes back.
    assert int.from_bytes(data[16:20], "big") == 4 and int.from_bytes(data[20:24], "big") == 3
    start = data.index(b"IDAT") + 4
    length = int.from_bytes(data[start - 8 : start - 4], "big")
    raw = zlib.decompress(data[start : start + length])
    rows = [raw[i * 13 + 1 : (i + 1) * 13] for i in range(3)]
    assert np.array_equal(np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(3, 4, 3), image)


def test_probability_colors_are_white_at_one_half():
    colors = probability_colors(np.array([0.0, 0.5, 1.0]))
    assert colors[1].tolist() == [255, 255, 255]
    assert colors[0][2] > colors[0][0] and colors[2][0] > colors[2][2]  # blue, then orange


def test_pictures_are_well_formed_svg():
    points, labels = np.array([[0.1, 0.2], [0.8, 0.9]]), np.array([0, 1])
    ET.fromstring(
        boundary_svg(np.full((5, 5), 0.3), points, labels, (0.0, 1.0), predicted=np.array([0, 0]))
    )
    ET.fromstring(
        line_chart_svg(
            [("loss", [1.0, 0.5, float("nan")], "#c00"), ("empty", [], "#0c0")], title="a < b"
        )
    )


def test_training_chart_shows_accuracy_as_the_status_line_does():
    """The chart's legend said "accuracy 1" where the status line said "100.0%" (issue 26.9)."""
    trainer = ToyTrainer("xor", hidden=8, lr=0.5, seed=0)
    trainer.step(30)
    shown = f"accuracy {trainer.accuracy_history[-1]:.1%}"
    assert shown in trainer.summary()
    legend = [t.text for t in ET.fromstring(trainer.curves_svg()).iterfind(".//{*}text")]
    assert shown in legend, legend
    assert f"loss {trainer.loss_history[-1]:.4g}" in legend, legend


@pytest.mark.parametrize("dataset", sorted(TOY_DATASETS))
def test_trainer_learns_every_toy_set(dataset):
    trainer = ToyTrainer(dataset, hidden=16, lr=0.5, seed=0)
    trainer.step(200)
    assert trainer.loss_history[-1] < 0.5 * trainer.loss_history[0]
    assert trainer.accuracy_history[-1] >= 0.9, trainer.summary()


def test_trainer_is_deterministic_and_checks_its_arguments():
    a, b = ToyTrainer("xor", seed=3), ToyTrainer("xor", seed=3)
    assert a.step(20) == b.step(20)
    with pytest.raises(ValueError, match="unknown data set"):
        ToyTrainer("moons")
    with pytest.raises(ValueError, match="activation"):
        ToyTrainer(activation="gelu")
    with pytest.raises(ValueError, match="hidden"):
        ToyTrainer(hidden=0)


def test_probabilities_agree_with_the_model():
    trainer = ToyTrainer("simple", seed=0)
    trainer.step(100)
    p = trainer.probabilities()
    low, high = trainer.extent
    # Top-left corner of the map is the point (low, high).
    corner = (np.array([[low, high]]) - trainer.mean) / trainer.std
    with tl.no_grad():
        logits = trainer.model(tl.tensor(corner)).numpy()[0]
    assert p[0, 0] == pytest.approx(1 / (1 + np.exp(logits[0] - logits[1])))


def test_training_viewer_play_ticks_train_and_redraw():
    viewer = TrainingViewer("xor", hidden=8, steps_per_tick=10)
    before = viewer.boundary.value
    for tick in range(1, 31):
        viewer.play.value = tick  # what the Play widget does while it runs
    assert viewer.trainer.steps == 300
    assert viewer.boundary.value != before
    assert "step 300" in viewer.status.value
    assert viewer.trainer.accuracy_history[-1] > 0.9
    viewer.play.value = 0  # the stop button: a pause, not a step or a reset
    assert viewer.trainer.steps == 300
    ET.fromstring(viewer.boundary.value)
    ET.fromstring(viewer.curves.value)


def test_training_viewer_controls():
    viewer = TrainingViewer("xor", hidden=4)
    viewer.train(5)
    viewer.lr_slider.value = 0.01  # takes effect without a reset
    assert viewer.trainer.steps == 5
    assert all(g["lr"] == pytest.approx(0.01) for g in viewer.trainer.optimizer.param_groups)
    viewer.hidden_slider.value = 12  # a new network: reset
    assert viewer.trainer.steps == 0 and viewer.trainer.model[0].out_features == 12
    viewer.train(3)
    viewer.dataset_picker.value = "circle"
    assert viewer.trainer.steps == 0 and "circle" in viewer.status.value
    viewer.activation_picker.value = "relu"
    assert isinstance(viewer.trainer.model[1], nn.ReLU)
    viewer.train(2)
    viewer.reset_button.click()
    assert viewer.trainer.steps == 0


def test_training_viewer_static_fallback():
    bundle = TrainingViewer("simple")._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "static picture" in bundle["text/html"] and "<svg" not in bundle["text/html"]
    assert bundle["text/html"].count('src="data:image/svg+xml;base64,') == 2  # boundary, curves


def test_learning_rate_slider_keeps_the_given_value():
    viewer = TrainingViewer("xor", lr=0.5)
    # The browser may only send back one of the options: 0.5 must be one, exactly.
    assert 0.5 in [value for _, value in viewer.lr_slider.options]
    assert viewer.lr_slider.value == 0.5 and viewer.trainer.lr == 0.5
    assert "lr 0.5 " in viewer.status.value
    odd = TrainingViewer("xor", lr=0.3)  # a value between the choices is added to them
    assert odd.lr_slider.value == 0.3 and "lr 0.3 " in odd.status.value


def test_play_button_is_one_timer_per_widget():
    # Each view of ipywidgets' Play can stop the timer another view started; the ticker keeps
    # its timer in the widget's initialize (once per model). The browser test shows it works.
    from torchlight.viz.ticker import Ticker

    viewer = TrainingViewer("xor")
    assert isinstance(viewer.play, Ticker)
    assert "function initialize" in Ticker._esm and "setInterval" in Ticker._esm
    assert "setInterval" not in Ticker._esm.split("function render")[1]  # views draw, never tick


def test_module_tree_counts_and_shapes():
    model = nn.Sequential(
        nn.Linear(2, 8), nn.Tanh(), nn.Sequential(nn.Linear(8, 4), nn.ReLU()), nn.Linear(4, 2)
    )
    model[3].bias.requires_grad_(False)
    assert count_parameters(model) == 2 * 8 + 8 + 8 * 4 + 4 + 4 * 2 + 2
    assert count_parameters(model, trainable_only=True) == count_parameters(model) - 2
    text = module_tree_html(model)
    assert "70 parameters, 2 frozen" in text
    assert "shape <code>(4, 8)</code>" in text and "Tanh()" in text and "(frozen)" in text


def test_module_viewer_picker_shows_value_and_grad():
    model = nn.Sequential(nn.Linear(2, 3))
    viewer = ModuleViewer(model)
    viewer.picker.value = "0.bias"
    assert "None: no backward has reached it yet" in viewer.info.value
    model(tl.ones(1, 2)).sum().backward()
    viewer.picker.value = "0.weight"
    viewer.picker.value = "0.bias"
    assert "tensor([1., 1., 1.])" in viewer.info.value
    assert repr(viewer) == "ModuleViewer(Sequential: 9 parameters)"
