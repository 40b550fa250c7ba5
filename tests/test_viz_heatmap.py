"""The attention heatmap of Tutorial 8: one grey square per weight, labels escaped, bad shapes
refused with a message that names both shapes."""

from __future__ import annotations

import re

import numpy as np
import pytest

from torchlight.viz.heatmap import attention_picture


def _fills(svg: str) -> list[str]:
    return re.findall(r'<rect [^>]*fill="#([0-9a-f]{6})"', svg)


def test_each_weight_is_a_square_from_white_to_black() -> None:
    weights = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    svg = attention_picture([weights, np.eye(3)], ["a", " ", "\n"], titles=["h0", "h1"]).svg
    fills = _fills(svg)
    assert len(fills) == 18
    assert fills[:3] == ["000000", "ffffff", "ffffff"]  # row 0 of a causal head: itself only
    assert fills[1] == fills[2] == fills[5] == "ffffff"  # the upper triangle: no weight
    assert fills[3] == fills[4] == "808080"  # row 1: half and half
    assert ">_<" in svg and ">\\n<" in svg and ">h1<" in svg


def test_labels_are_escaped() -> None:
    svg = attention_picture([np.zeros((1, 1))], ["<b>"]).svg
    assert "<b>" not in svg and "&lt;b&gt;" in svg


def test_a_map_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"map 0 has shape \(2, 3\), expected \(2, 2\)"):
        attention_picture([np.zeros((2, 3))], ["a", "b"])
