"""The sequence-layer cases compared with PyTorch (tests/test_nn_seq.py).

torchlight's layers have PyTorch's names and signatures, so each case is written once and run
on either ``torch.nn`` or ``torchlight.nn``: ``module(nn)`` builds the layer, ``call`` runs it
and returns its output tensors. ``tools/record_seq_reference.py`` ran them in PyTorch 2.13
and stored the results in ``tests/seq_reference.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Weights, inputs and probes: U(-1, 1) in float64."""
    return rng.uniform(-1.0, 1.0, shape)


@dataclass(frozen=True)
class Case:
    name: str
    torch_module: Callable[[Any], Any]  # nn -> the layer
    inputs: dict[str, tuple[int, ...]]  # name -> shape, drawn in this order after the weights
    call: Callable[[Any, dict[str, Any], dict[str, Any]], list[Any]]
    masks: dict[str, np.ndarray] = field(default_factory=dict)
    seed: int = 0


def _causal(n: int) -> np.ndarray:
    return np.triu(np.full((n, n), -np.inf), 1)


def _padding() -> np.ndarray:
    return np.array([[False, False, False, False, True, True], [False] * 6])


def _bn(m: Any, x: dict[str, Any], _: dict[str, Any]) -> list[Any]:
    first = m(x["x"])
    second = m(x["x"] * 2.0 + 1.0)
    m.eval()
    return [first, second, m(x["x"]), m.running_mean * 1.0, m.running_var * 1.0]


CASES = [
    Case(
        "rnn_2layer_batch_first_h0",
        lambda nn: nn.RNN(3, 4, num_layers=2, batch_first=True),
        {"x": (2, 5, 3), "h0": (2, 2, 4)},
        lambda m, x, _: list(m(x["x"], x["h0"])),
    ),
    Case(
        "rnn_relu_unbatched",
        lambda nn: nn.RNN(3, 4, nonlinearity="relu"),
        {"x": (5, 3)},
        lambda m, x, _: list(m(x["x"])),
        seed=1,
    ),
    Case(
        "lstm_2layer_h0_c0",
        lambda nn: nn.LSTM(3, 4, num_layers=2),
        {"x": (5, 2, 3), "h0": (2, 2, 4), "c0": (2, 2, 4)},
        lambda m, x, _: (lambda out, hc: [out, *hc])(*m(x["x"], (x["h0"], x["c0"]))),
        seed=2,
    ),
    Case(
        "gru_batch_first",
        lambda nn: nn.GRU(3, 4, batch_first=True),
        {"x": (2, 5, 3)},
        lambda m, x, _: list(m(x["x"])),
        seed=3,
    ),
    Case(
        "gru_2layer_h0",
        lambda nn: nn.GRU(3, 4, num_layers=2),
        {"x": (4, 2, 3), "h0": (2, 2, 4)},
        lambda m, x, _: list(m(x["x"], x["h0"])),
        seed=4,
    ),
    Case(
        "rnn_bidirectional_2layer_batch_first_h0",
        lambda nn: nn.RNN(3, 4, num_layers=2, batch_first=True, bidirectional=True),
        {"x": (2, 5, 3), "h0": (4, 2, 4)},
        lambda m, x, _: list(m(x["x"], x["h0"])),
        seed=13,
    ),
    Case(
        "lstm_bidirectional_2layer_h0_c0",
        lambda nn: nn.LSTM(3, 4, num_layers=2, bidirectional=True),
        {"x": (5, 2, 3), "h0": (4, 2, 4), "c0": (4, 2, 4)},
        lambda m, x, _: (lambda out, hc: [out, *hc])(*m(x["x"], (x["h0"], x["c0"]))),
        seed=14,
    ),
    Case(
        "lstm_bidirectional_unbatched_no_bias",
        lambda nn: nn.LSTM(3, 4, bias=False, bidirectional=True),
        {"x": (4, 3)},
        lambda m, x, _: (lambda out, hc: [out, *hc])(*m(x["x"])),
        seed=15,
    ),
    Case(
        "gru_bidirectional_2layer_batch_first",
        lambda nn: nn.GRU(3, 4, num_layers=2, batch_first=True, bidirectional=True),
        {"x": (2, 5, 3)},
        lambda m, x, _: list(m(x["x"])),
        seed=16,
    ),
    Case(
        "mha_cross_key_padding",
        lambda nn: nn.MultiheadAttention(8, 2),
        {"q": (4, 2, 8), "k": (6, 2, 8), "v": (6, 2, 8)},
        lambda m, x, masks: list(m(x["q"], x["k"], x["v"], key_padding_mask=masks["padding"])),
        masks={"padding": _padding()},
        seed=5,
    ),
    Case(
        "mha_self_causal_batch_first_per_head",
        lambda nn: nn.MultiheadAttention(8, 4, batch_first=True),
        {"x": (2, 5, 8)},
        lambda m, x, masks: list(
            m(x["x"], x["x"], x["x"], attn_mask=masks["causal"], average_attn_weights=False)
        ),
        masks={"causal": _causal(5)},
        seed=6,
    ),
    Case(
        "encoder_layer_post_norm",
        lambda nn: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
        {"x": (5, 2, 8)},
        lambda m, x, _: [m(x["x"])],
        seed=7,
    ),
    Case(
        "encoder_layer_norm_first_causal",
        lambda nn: nn.TransformerEncoderLayer(
            8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True
        ),
        {"x": (2, 5, 8)},
        lambda m, x, masks: [m(x["x"], src_mask=masks["causal"], is_causal=True)],
        masks={"causal": _causal(5)},
        seed=8,
    ),
    Case(
        "layer_norm_2d_shape",
        lambda nn: nn.LayerNorm((3, 4)),
        {"x": (2, 3, 4)},
        lambda m, x, _: [m(x["x"])],
        seed=9,
    ),
    Case(
        "group_norm",
        lambda nn: nn.GroupNorm(2, 4),
        {"x": (2, 4, 3)},
        lambda m, x, _: [m(x["x"])],
        seed=10,
    ),
    Case("batch_norm_1d", lambda nn: nn.BatchNorm1d(3), {"x": (4, 3)}, _bn, seed=11),
    Case("batch_norm_2d", lambda nn: nn.BatchNorm2d(2), {"x": (3, 2, 2, 3)}, _bn, seed=12),
]
