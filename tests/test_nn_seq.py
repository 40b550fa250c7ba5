"""RNN, LSTM, GRU, MultiheadAttention, TransformerEncoderLayer and the norms against PyTorch.

The expected values in ``seq_reference.json`` were recorded from PyTorch 2.13 (CPU, float64)
by ``tools/record_seq_reference.py``, with the weights and inputs of ``tests/seq_cases.py``;
here the same cases run in torchlight, and outputs and gradients must agree to 1e-10.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import torchlight as tl
from tests.seq_cases import CASES, Case, draw
from torchlight import nn

REFERENCE = json.loads((pathlib.Path(__file__).parent / "seq_reference.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_pytorch(case: Case) -> None:
    expected = REFERENCE[case.name]
    tl.manual_seed(0)
    module = case.torch_module(nn)
    params = dict(module.named_parameters())
    rng = np.random.default_rng(case.seed)
    names = [k for k in expected["grads"] if k not in case.inputs]
    assert sorted(names) == sorted(params), "torchlight and PyTorch name the parameters alike"
    with tl.no_grad():
        for name in names:
            params[name].copy_(tl.tensor(draw(rng, params[name].shape)))
    inputs = {
        k: tl.tensor(draw(rng, shape), requires_grad=True) for k, shape in case.inputs.items()
    }
    masks = {k: tl.tensor(v) for k, v in case.masks.items()}
    outputs = case.call(module, inputs, masks)
    assert len(outputs) == len(expected["outputs"])
    loss = tl.tensor(0.0)
    for i, (out, want) in enumerate(zip(outputs, expected["outputs"], strict=True)):
        np.testing.assert_allclose(out.detach().numpy(), want, atol=1e-10, err_msg=f"output {i}")
        loss = loss + (out * tl.tensor(draw(rng, out.shape))).sum()
    loss.backward()
    for name, want in expected["grads"].items():
        t = inputs[name] if name in inputs else params[name]
        if want is None:
            assert t.grad is None or not np.any(t.grad.numpy()), name
        else:
            assert t.grad is not None, f"{name} got no gradient"
            np.testing.assert_allclose(t.grad.numpy(), want, atol=1e-10, err_msg=f"grad {name}")


def test_batch_norm_eval_ignores_the_batch() -> None:
    bn = nn.BatchNorm1d(2).eval()
    one = bn(tl.tensor([[1.0, 2.0]]))
    both = bn(tl.tensor([[1.0, 2.0], [100.0, -50.0]]))
    np.testing.assert_allclose(both[0].detach().numpy(), one[0].detach().numpy())
    assert bn.running_mean.tolist() == [0.0, 0.0], "eval must not update the running statistics"


def test_batch_norm_needs_two_values_per_channel_in_training() -> None:
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(tl.ones(1, 3))


def test_gpt_weight_tying_and_causality() -> None:
    tl.manual_seed(0)
    gpt = nn.GPT(vocab_size=11, block_size=6, d_model=16, nhead=2, num_layers=2)
    assert gpt.head.weight is gpt.token_embedding.weight
    names = [n for n, _ in gpt.named_parameters()]
    assert "head.weight" not in names, "a tied weight is one parameter"
    a = gpt(tl.tensor([[1, 2, 3, 4]])).detach().numpy()
    b = gpt(tl.tensor([[1, 2, 3, 9]])).detach().numpy()
    np.testing.assert_allclose(a[0, :3], b[0, :3], atol=1e-12)  # the future does not leak back
    assert not np.allclose(a[0, 3], b[0, 3])
    gpt(tl.tensor([[1, 2, 3]])).sum().backward()
    assert gpt.token_embedding.weight.grad is not None


def test_gpt_with_sinusoidal_positions_learns_no_position_table() -> None:
    tl.manual_seed(0)
    gpt = nn.GPT(
        vocab_size=7, block_size=5, d_model=8, nhead=2, num_layers=1, positional="sinusoidal"
    )
    assert not any(name.startswith("position") for name, _ in gpt.named_parameters())
    untied = nn.GPT(7, 5, 8, 2, 1, tie_weights=False)
    assert untied.head.weight is not untied.token_embedding.weight
    assert gpt(tl.tensor([[1, 2, 3]])).shape == (1, 3, 7)


def test_sinusoidal_positions() -> None:
    pe = nn.SinusoidalPositionalEncoding(10, 4)
    table = pe(tl.zeros(1, 3, 4)).numpy()
    np.testing.assert_allclose(table[:, 0], np.sin(np.arange(3)))
    np.testing.assert_allclose(table[:, 3], np.cos(np.arange(3) / 100.0))


def test_wrong_shapes_are_named() -> None:
    with pytest.raises(ValueError, match=r"H_in = 3"):
        nn.LSTM(3, 4)(tl.ones(5, 2, 7))
    with pytest.raises(ValueError, match="must end in those dimensions"):
        nn.LayerNorm(4)(tl.ones(2, 3))
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="block_size"):
        nn.GPT(5, block_size=2, d_model=8, nhead=2, num_layers=1)(tl.tensor([[1, 2, 3]]))
