"""Layers: values against direct numpy loops, gradients against central differences (gradcheck),
and errors that name the layer and both shapes."""

from __future__ import annotations

import numpy as np
import pytest

import torchlight as tl
from torchlight import nn
from torchlight.autograd import gradcheck


@pytest.fixture(autouse=True)
def _seed():
    tl.manual_seed(0)


def _np(t: tl.Tensor) -> np.ndarray:
    return t.detach().numpy()


def conv2d_loops(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride, padding) -> np.ndarray:
    """The definition of a 2-D convolution (cross-correlation), one output element at a time."""
    (sh, sw), (ph, pw) = stride, padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    n, _, hp, wp = xp.shape
    o, _, kh, kw = w.shape
    ho, wo = (hp - kh) // sh + 1, (wp - kw) // sw + 1
    out = np.zeros((n, o, ho, wo))
    for i in range(ho):
        for j in range(wo):
            window = xp[:, :, i * sh : i * sh + kh, j * sw : j * sw + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", window, w)
    return out + (0 if b is None else b[None, :, None, None])


def pool_loops(x: np.ndarray, k, s, p, reduce) -> np.ndarray:
    fill = -np.inf if reduce is np.max else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=fill)
    ho, wo = (xp.shape[2] - k[0]) // s[0] + 1, (xp.shape[3] - k[1]) // s[1] + 1
    out = np.zeros(x.shape[:2] + (ho, wo))
    for i in range(ho):
        for j in range(wo):
            window = xp[:, :, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1]]
            out[:, :, i, j] = reduce(window, axis=(2, 3))
    return out


# ------------------------------------------------------------------ Linear
def test_linear_matches_x_wt_plus_b_and_pytorch_init_bounds():
    layer = nn.Linear(5, 3)
    bound = 1 / np.sqrt(5)
    assert np.abs(_np(layer.weight)).max() <= bound and np.abs(_np(layer.bias)).max() <= bound
    x = tl.randn(4, 5)
    np.testing.assert_allclose(_np(layer(x)), _np(x) @ _np(layer.weight).T + _np(layer.bias))
    assert layer(tl.randn(2, 7, 5)).shape == (2, 7, 3)  # any leading dimensions


@pytest.mark.parametrize("shape", [(4, 5), (5,), (2, 3, 5)])
def test_linear_gradcheck(shape):
    layer = nn.Linear(5, 3)
    x = tl.randn(*shape, requires_grad=True)
    assert gradcheck(lambda x, w, b: tl.nn.functional.linear(x, w, b), x, layer.weight, layer.bias)


def test_linear_without_bias():
    layer = nn.Linear(4, 2, bias=False)
    assert layer.bias is None and [n for n, _ in layer.named_parameters()] == ["weight"]
    assert "bias=False" in repr(layer)
    x = tl.randn(3, 4, requires_grad=True)
    assert gradcheck(lambda x, w: tl.nn.functional.linear(x, w), x, layer.weight)


def test_linear_wrong_input_names_layer_and_shapes():
    with pytest.raises(ValueError) as info:
        nn.Linear(64, 10)(tl.randn(32, 63))
    message = str(info.value)
    assert "Linear(in_features=64, out_features=10, bias=True)" in message
    assert "(*, 64)" in message and "(32, 63)" in message


def test_sequential_adds_which_layer_raised():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(7, 2))
    with pytest.raises(ValueError) as info:
        model(tl.randn(3, 4))
    assert "(*, 7)" in str(info.value) and "(3, 8)" in str(info.value)
    assert any("layer (2) of Sequential" in note for note in info.value.__notes__)


# ------------------------------------------------------------------ activations, Flatten, Dropout
@pytest.mark.parametrize(
    "layer", [nn.ReLU(), nn.Sigmoid(), nn.Tanh(), nn.Softmax(1), nn.LogSoftmax(1), nn.Identity()]
)
def test_activation_gradcheck(layer):
    x = tl.randn(3, 4, requires_grad=True)
    assert gradcheck(layer, x)


def test_activation_values():
    x = tl.tensor([-2.0, 0.0, 3.0])
    np.testing.assert_allclose(_np(nn.ReLU()(x)), [0, 0, 3])
    np.testing.assert_allclose(_np(nn.Sigmoid()(x)), 1 / (1 + np.exp([2.0, 0.0, -3.0])))
    np.testing.assert_allclose(_np(nn.Tanh()(x)), np.tanh([-2.0, 0.0, 3.0]))


def test_flatten():
    x = tl.randn(2, 3, 4, 5, requires_grad=True)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
    assert gradcheck(nn.Flatten(), tl.randn(2, 2, 3, requires_grad=True))


def test_dropout_zeroes_and_rescales_in_training_and_is_identity_in_eval():
    drop = nn.Dropout(0.25)
    x = tl.ones(200, 50)
    y = _np(drop(x))
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75)
    drop.eval()
    assert drop(x) is x


def test_dropout_gradcheck_with_a_fixed_mask():
    drop = nn.Dropout(0.5)

    def fn(x):
        tl.manual_seed(3)  # the same mask on every call
        return drop(x)

    assert gradcheck(fn, tl.randn(4, 5, requires_grad=True))


def test_dropout_rejects_bad_probability():
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


# ------------------------------------------------------------------ Embedding
def test_embedding_looks_up_rows_and_accumulates_repeated_gradients():
    emb = nn.Embedding(5, 3)
    idx = tl.tensor([[0, 2], [2, 4]])
    out = emb(idx)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(_np(out), _np(emb.weight)[[[0, 2], [2, 4]]])
    out.sum().backward()
    np.testing.assert_array_equal(_np(emb.weight.grad)[:, 0], [1, 0, 2, 0, 1])
    assert gradcheck(lambda w: w[idx], emb.weight)


def test_embedding_bad_indices():
    emb = nn.Embedding(5, 3)
    with pytest.raises(IndexError, match="index 5 is out of range"):
        emb(tl.tensor([1, 5]))
    with pytest.raises(TypeError, match="integers"):
        emb(tl.tensor([1.0]))


# ------------------------------------------------------------------ convolutions
@pytest.mark.parametrize(
    ("stride", "padding"), [((1, 1), (0, 0)), ((2, 2), (1, 1)), ((2, 1), (0, 2)), ((3, 3), (1, 0))]
)
def test_conv2d_matches_the_definition(stride, padding):
    conv = nn.Conv2d(3, 4, kernel_size=(3, 2), stride=stride, padding=padding)
    x = tl.randn(2, 3, 7, 6)
    expected = conv2d_loops(_np(x), _np(conv.weight), _np(conv.bias), stride, padding)
    np.testing.assert_allclose(_np(conv(x)), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("stride", "padding"), [(1, 0), (1, 1), (2, 1), ((2, 1), (1, 0))])
def test_conv2d_gradcheck(stride, padding):
    conv = nn.Conv2d(2, 3, kernel_size=3, stride=stride, padding=padding)
    x = tl.randn(2, 2, 5, 4, requires_grad=True)
    f = tl.nn.functional.conv2d
    assert gradcheck(lambda x, w, b: f(x, w, b, stride, padding), x, conv.weight, conv.bias)


def test_conv2d_without_bias_and_unbatched_input():
    conv = nn.Conv2d(1, 2, 3, padding=1, bias=False)
    assert (
        repr(conv) == "Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)"
    )
    assert conv(tl.randn(1, 5, 5)).shape == (2, 5, 5)
    x = tl.randn(1, 1, 4, 4, requires_grad=True)
    assert gradcheck(lambda x, w: tl.nn.functional.conv2d(x, w, None, 1, 1), x, conv.weight)


def test_conv2d_wrong_input_names_layer_and_shapes():
    conv = nn.Conv2d(1, 16, kernel_size=3, padding=1)
    with pytest.raises(ValueError) as info:
        conv(tl.randn(64, 3, 8, 8))
    message = str(info.value)
    assert (
        "Conv2d(1, 16, kernel_size=(3, 3)" in message
        and "(N, 1, H, W)" in message
        and "(64, 3, 8, 8)" in message
    )
    with pytest.raises(ValueError, match=r"got input of shape \(64, 64\)"):
        conv(tl.randn(64, 64))
    with pytest.raises(ValueError, match="H >= 5"):
        nn.Conv2d(1, 1, kernel_size=5)(tl.randn(1, 1, 4, 8))


def test_conv1d_matches_the_definition_and_gradcheck():
    conv = nn.Conv1d(3, 2, kernel_size=3, stride=2, padding=1)
    x = tl.randn(2, 3, 9)
    xp = np.pad(_np(x), ((0, 0), (0, 0), (1, 1)))
    w, b = _np(conv.weight), _np(conv.bias)
    expected = np.stack(
        [np.einsum("nck,ock->no", xp[:, :, t * 2 : t * 2 + 3], w) for t in range(5)], axis=2
    )
    np.testing.assert_allclose(_np(conv(x)), expected + b[None, :, None], atol=1e-12)
    xs = tl.randn(2, 3, 6, requires_grad=True)
    f = tl.nn.functional.conv1d
    assert gradcheck(lambda x, w, b: f(x, w, b, 2, 1), xs, conv.weight, conv.bias)
    with pytest.raises(ValueError, match=r"Conv1d\(3, 2.*\(N, 3, L\).*\(2, 4, 9\)"):
        conv(tl.randn(2, 4, 9))


def test_conv_float32_stays_float32():
    conv = nn.Conv2d(1, 2, 3, dtype=tl.float32)
    out = conv(tl.randn(2, 1, 5, 5, dtype=tl.float32))
    assert out.dtype is tl.float32
    out.sum().backward()
    assert conv.weight.grad.dtype is tl.float32


# ------------------------------------------------------------------ pooling
@pytest.mark.parametrize(
    ("k", "s", "p"), [(2, None, 0), (3, 1, 1), (2, 1, 0), (3, 2, 1), ((2, 3), (1, 2), (1, 0))]
)
def test_pooling_matches_the_definition(k, s, p):
    x = tl.randn(2, 3, 6, 7)
    kk = (k, k) if isinstance(k, int) else k
    ss = kk if s is None else ((s, s) if isinstance(s, int) else s)
    pp = (p, p) if isinstance(p, int) else p
    np.testing.assert_allclose(
        _np(nn.MaxPool2d(k, s, p)(x)), pool_loops(_np(x), kk, ss, pp, np.max)
    )
    np.testing.assert_allclose(
        _np(nn.AvgPool2d(k, s, p)(x)), pool_loops(_np(x), kk, ss, pp, np.mean), atol=1e-12
    )


@pytest.mark.parametrize(("k", "s", "p"), [(2, None, 0), (3, 1, 1), (3, 2, 1)])
def test_pooling_gradcheck(k, s, p):
    x = tl.randn(2, 2, 5, 6, requires_grad=True)
    assert gradcheck(nn.MaxPool2d(k, s, p), x)
    assert gradcheck(nn.AvgPool2d(k, s, p), x)


def test_max_pool_gradient_goes_to_the_first_maximum_on_ties():
    x = tl.ones(1, 1, 2, 2, requires_grad=True)
    nn.MaxPool2d(2)(x).sum().backward()
    np.testing.assert_array_equal(_np(x.grad)[0, 0], [[1, 0], [0, 0]])


def test_pooling_wrong_input():
    with pytest.raises(ValueError, match=r"MaxPool2d\(kernel_size=2.*\(N, C, H, W\).*\(4, 4\)"):
        nn.MaxPool2d(2)(tl.randn(4, 4))
    with pytest.raises(ValueError, match="AvgPool2d"):
        nn.AvgPool2d(3)(tl.randn(1, 1, 2, 2))


# ------------------------------------------------------------------ Sequential
def test_sequential_indexing_len_and_gradcheck():
    model = nn.Sequential(
        nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3)
    )
    assert len(model) == 5 and isinstance(model[0], nn.Conv2d) and isinstance(model[-1], nn.Linear)
    assert isinstance(model[1:3], nn.Sequential) and len(model[1:3]) == 2
    x = tl.randn(2, 1, 4, 4, requires_grad=True)
    assert gradcheck(model, x)
    with pytest.raises(IndexError):
        model[5]
    with pytest.raises(TypeError, match="not a Module"):
        nn.Sequential(nn.ReLU(), lambda x: x)  # type: ignore[arg-type]


# ------------------------------------------------------------------ other backends
def test_layers_run_unchanged_on_the_strided_reference_backend():
    """Every Function above uses backend primitives only: the pure-Python backend agrees."""

    def grads(backend: str) -> list[np.ndarray]:
        tl.manual_seed(0)
        model = nn.Sequential(
            nn.Conv2d(1, 2, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.AvgPool2d(2, 1),
            nn.Flatten(),
            nn.Linear(2, 3),
        ).to(backend)
        x = tl.tensor(np.random.default_rng(0).standard_normal((2, 1, 4, 4)), backend=backend)
        loss = tl.nn.functional.cross_entropy(model(x), tl.tensor([0, 2], backend=backend))
        loss.backward()
        return [loss.detach().numpy()] + [np.asarray(p.grad.numpy()) for p in model.parameters()]

    for ours, reference in zip(grads("strided"), grads("numpy"), strict=True):
        np.testing.assert_allclose(ours, reference, rtol=1e-12, atol=1e-14)
