"""Recurrent layers beyond the PyTorch-recorded values (tests/test_nn_seq.py): the Recurrence
Function and each step's backward against central differences, and bidirectional layers'
names, shapes and meaning. Tiny sizes, float64."""

from __future__ import annotations

import numpy as np
import pytest

import torchlight as tl
from torchlight import nn
from torchlight.autograd import gradcheck
from torchlight.ops.recurrent import GRUStep, LSTMStep, Recurrence, RNNStep


def _randn(*shape: int) -> tl.Tensor:
    return tl.randn(*shape, dtype=tl.float64, requires_grad=True)


@pytest.mark.parametrize(
    ("step", "states"),
    [(RNNStep(), 1), (RNNStep(relu=True), 1), (LSTMStep(), 2), (GRUStep(), 1)],
    ids=["rnn_tanh", "rnn_relu", "lstm", "gru"],
)
def test_recurrence_backward_matches_central_differences(step: object, states: int) -> None:
    tl.manual_seed(0)
    steps, batch, size, gates = 3, 2, 2, step.gates  # type: ignore[attr-defined]
    xp, w_hh, b_hh = (
        _randn(steps, batch, gates * size),
        _randn(gates * size, size),
        _randn(gates * size),
    )
    initial = [_randn(batch, size) for _ in range(states)]

    def run(xp: tl.Tensor, w_hh: tl.Tensor, b_hh: tl.Tensor, *state: tl.Tensor) -> tl.Tensor:
        return Recurrence.apply(step, xp, w_hh, b_hh, *state)

    assert gradcheck(run, xp, w_hh, b_hh, *initial)
    assert gradcheck(lambda xp, w: Recurrence.apply(step, xp, w, None, *initial), xp, w_hh)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_bidirectional_two_layers_backward_matches_central_differences(kind: str) -> None:
    tl.manual_seed(1)
    layer = getattr(nn, kind)(2, 2, num_layers=2, bidirectional=True).double()
    x, h0 = _randn(3, 1, 2), _randn(4, 1, 2)
    if kind == "LSTM":
        c0 = _randn(4, 1, 2)
        assert gradcheck(lambda x, h, c: layer(x, (h, c))[0], x, h0, c0)
        assert gradcheck(lambda x, h, c: layer(x, (h, c))[1][1], x, h0, c0)  # c_n
    else:
        assert gradcheck(lambda x, h: layer(x, h)[0], x, h0)
        assert gradcheck(lambda x, h: layer(x, h)[1], x, h0)


def test_bidirectional_names_and_shapes_are_pytorchs() -> None:
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    shapes = {name: p.shape for name, p in lstm.named_parameters()}
    assert list(shapes)[:8] == [
        "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
        "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
    ]  # fmt: skip
    assert len(shapes) == 16
    assert shapes["weight_ih_l1"] == (16, 8), "layer 1 reads both directions: 2 * hidden_size"
    assert shapes["weight_ih_l1_reverse"] == (16, 8) and shapes["weight_hh_l1_reverse"] == (16, 4)
    out, (h_n, c_n) = lstm(tl.randn(5, 2, 3))
    assert out.shape == (5, 2, 8) and h_n.shape == c_n.shape == (4, 2, 4)
    out, h_n = nn.GRU(3, 4, batch_first=True, bidirectional=True)(tl.randn(2, 5, 3))
    assert out.shape == (2, 5, 8) and h_n.shape == (2, 2, 4)
    out, h_n = nn.RNN(3, 4, bidirectional=True)(tl.randn(5, 3))  # unbatched
    assert out.shape == (5, 8) and h_n.shape == (2, 4)
    assert "bidirectional=True" in repr(lstm)


def test_the_reverse_direction_reads_the_sequence_backwards() -> None:
    """Output step t = [forward layer at t, the reverse weights run on the flipped input, at t];
    h_n = [forward's last step, reverse's last step (which is output step 0)]."""
    tl.manual_seed(2)
    both = nn.GRU(3, 4, bidirectional=True).double()
    forward_only, backward_only = nn.GRU(3, 4).double(), nn.GRU(3, 4).double()
    with tl.no_grad():
        for name, p in forward_only.named_parameters():
            p.copy_(getattr(both, name))
            getattr(backward_only, name).copy_(getattr(both, f"{name}_reverse"))
    x = tl.randn(5, 2, 3, dtype=tl.float64)
    with tl.no_grad():
        out, h_n = both(x)
        fwd, fwd_h = forward_only(x)
        bwd, bwd_h = backward_only(x.flip(0))
    np.testing.assert_allclose(out[..., :4].numpy(), fwd.numpy(), atol=1e-14)
    np.testing.assert_allclose(out[..., 4:].numpy(), bwd.flip(0).numpy(), atol=1e-14)
    np.testing.assert_allclose(h_n.numpy(), tl.cat([fwd_h, bwd_h]).numpy(), atol=1e-14)
    np.testing.assert_allclose(h_n[1].numpy(), out[0, :, 4:].numpy(), atol=1e-14)


def test_wrong_state_shape_names_the_bidirectional_layout() -> None:
    lstm = nn.LSTM(3, 4, bidirectional=True)
    with pytest.raises(ValueError, match=r"num_layers \* 2, N, hidden_size\) = \(2, 5, 4\)"):
        lstm(tl.randn(2, 5, 3), (tl.zeros(1, 5, 4), tl.zeros(1, 5, 4)))


def test_double_backward_through_a_layer_is_a_clear_error() -> None:
    rnn = nn.RNN(2, 2).double()
    x = _randn(3, 1, 2)
    (grad,) = tl.autograd.grad(rnn(x)[0].sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward through Recurrence"):
        grad.sum().backward()


def test_empty_sequences_and_mixed_dtypes_are_clear_errors() -> None:
    """PyTorch refuses both; a zero-step sequence used to fail deep inside the loop, and a
    float64 state would have promoted a float32 layer's gates."""
    for layer, x in (
        (nn.LSTM(3, 4), tl.randn(0, 2, 3)),
        (nn.GRU(3, 4, batch_first=True), tl.randn(2, 0, 3)),
    ):
        with pytest.raises(ValueError, match=r"at least one step, got \("):
            layer(x)
    lstm, x = nn.LSTM(3, 4).to(tl.float32), tl.randn(5, 2, 3).to(tl.float32)
    with pytest.raises(
        TypeError, match=r"h_0 of the input's dtype torchlight.float32, got .*float64"
    ):
        lstm(x, (tl.zeros(1, 2, 4), tl.zeros(1, 2, 4).to(tl.float32)))
    with pytest.raises(TypeError, match=r"hx of the input's dtype"):
        nn.RNN(3, 4).to(tl.float32)(x, tl.zeros(1, 2, 4))


def test_lstm_layer_equals_recurrence_and_trains_like_it() -> None:
    """On numpy nn.LSTM runs the backend's override FusedLSTM of the readable recurrence
    (Recurrence with an LSTMStep): the same outputs and gradients, in float64 and float32."""
    from torchlight.ops.recurrent import FusedLSTM

    tl.manual_seed(3)
    for dtype, tol in ((tl.float64, 1e-13), (tl.float32, 2e-6)):
        xp, w, b, h, c = (
            tl.randn(*s).to(dtype).requires_grad_()
            for s in ((6, 3, 16), (16, 4), (16,), (3, 4), (3, 4))
        )
        grads = []
        for run in (FusedLSTM.apply, lambda *a: Recurrence.apply(LSTMStep(), *a)):
            out = run(xp, w, b, h, c)
            (out * out).sum().backward()
            grads.append([out.detach().numpy()] + [t.grad.numpy() for t in (xp, w, b, h, c)])
            for t in (xp, w, b, h, c):
                t.grad = None
        for fused, plain in zip(*grads, strict=True):
            np.testing.assert_allclose(fused, plain, rtol=tol, atol=tol)


def test_lstm_layer_names_a_dtype_or_backend_mismatch() -> None:
    from torchlight.ops.recurrent import FusedLSTM

    xp, w, h = tl.randn(2, 1, 8), tl.randn(8, 2), tl.zeros(1, 2)
    with pytest.raises(
        TypeError, match=r"lstm_forward: expected every tensor with dtype .*float64"
    ):
        FusedLSTM.apply(xp, w, None, h, h.to(tl.float32))
    with pytest.raises(RuntimeError, match=r"same backend, got 'numpy' and 'strided'"):
        FusedLSTM.apply(xp, w.to("strided"), None, h, h)
