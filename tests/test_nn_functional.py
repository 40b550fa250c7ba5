"""torchlight.nn.functional: softmax, losses, dropout, one_hot — values, stability, gradients,
and the errors for bad targets."""

from __future__ import annotations

import numpy as np
import pytest

import torchlight as tl
import torchlight.nn.functional as F
from torchlight import nn
from torchlight.autograd import gradcheck


@pytest.fixture(autouse=True)
def _seed():
    tl.manual_seed(0)


def _np(t: tl.Tensor) -> np.ndarray:
    return t.detach().numpy()


def log_softmax_np(x: np.ndarray, axis: int) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# ------------------------------------------------------------------ softmax family
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax_values_and_gradcheck(dim):
    x = tl.randn(3, 4, requires_grad=True)
    np.testing.assert_allclose(_np(F.log_softmax(x, dim)), log_softmax_np(_np(x), dim), atol=1e-14)
    np.testing.assert_allclose(
        _np(F.softmax(x, dim)), np.exp(log_softmax_np(_np(x), dim)), atol=1e-14
    )
    assert gradcheck(lambda x: F.log_softmax(x, dim), x)
    assert gradcheck(lambda x: F.softmax(x, dim), x)


def test_log_softmax_is_stable_for_huge_scores():
    x = tl.tensor([[1000.0, 0.0, -1000.0], [-1e300, 0.0, 1e300]], requires_grad=True)
    out = F.log_softmax(x, 1)
    assert np.all(np.isfinite(_np(out)[0]))
    np.testing.assert_allclose(_np(out)[0], [0.0, -1000.0, -2000.0])
    out[0].sum().backward()
    assert np.all(np.isfinite(_np(x.grad)))
    np.testing.assert_allclose(_np(F.softmax(tl.tensor([1000.0, 1000.0]), 0)), [0.5, 0.5])


# ------------------------------------------------------------------ cross entropy and nll
def test_cross_entropy_matches_numpy_for_each_reduction():
    x = tl.randn(5, 4, requires_grad=True)
    y = tl.tensor([0, 3, 1, 1, 2])
    per_sample = -log_softmax_np(_np(x), 1)[np.arange(5), _np(y)]
    np.testing.assert_allclose(_np(F.cross_entropy(x, y, reduction="none")), per_sample, atol=1e-14)
    np.testing.assert_allclose(F.cross_entropy(x, y).item(), per_sample.mean(), atol=1e-14)
    np.testing.assert_allclose(
        F.cross_entropy(x, y, reduction="sum").item(), per_sample.sum(), atol=1e-13
    )
    np.testing.assert_allclose(nn.CrossEntropyLoss()(x, y).item(), per_sample.mean(), atol=1e-14)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_nll_gradcheck(reduction):
    x = tl.randn(4, 5, requires_grad=True)
    y = tl.tensor([4, 0, 2, 2])
    assert gradcheck(lambda x: F.cross_entropy(x, y, reduction=reduction), x)
    assert gradcheck(lambda x: F.nll_loss(x, y, reduction=reduction), x)


def test_cross_entropy_gradient_is_softmax_minus_one_hot():
    x = tl.randn(3, 4, requires_grad=True)
    y = tl.tensor([1, 0, 3])
    F.cross_entropy(x, y).backward()
    expected = (np.exp(log_softmax_np(_np(x), 1)) - np.eye(4)[_np(y)]) / 3
    np.testing.assert_allclose(_np(x.grad), expected, atol=1e-15)


def test_cross_entropy_with_minus_infinity_for_another_class_is_finite():
    x = tl.tensor([[0.0, float("-inf"), 1.0]], requires_grad=True)
    loss = F.cross_entropy(x, tl.tensor([2]))
    np.testing.assert_allclose(loss.item(), np.log1p(np.exp(-1.0)))
    loss.backward()
    np.testing.assert_allclose(_np(x.grad), [[1 / (1 + np.e), 0.0, -1 / (1 + np.e)]])


def test_cross_entropy_labels_out_of_range_are_a_clear_error():
    x = tl.randn(4, 10)
    with pytest.raises(IndexError) as info:
        F.cross_entropy(x, tl.tensor([1, 2, 12, 3]))
    message = str(info.value)
    assert "target 12" in message and "position 2" in message and "0..9" in message
    with pytest.raises(IndexError, match="target -1"):
        F.cross_entropy(x, tl.tensor([1, -1, 2, 3]))
    with pytest.raises(IndexError, match="target 10"):
        nn.NLLLoss()(x, tl.tensor([10, 0, 0, 0]))


def test_cross_entropy_bad_target_type_and_shape():
    x = tl.randn(4, 3)
    with pytest.raises(TypeError, match=r"class indices.*\.long\(\)"):
        F.cross_entropy(x, tl.tensor([0.0, 1.0, 2.0, 0.0]))
    with pytest.raises(ValueError, match=r"\(N, C\).*\(N,\)"):
        F.cross_entropy(x, tl.tensor([0, 1]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, tl.tensor([0, 1, 2, 0]), reduction="average")


# ------------------------------------------------------------------ regression and binary losses
def test_mse_loss():
    x, t = tl.randn(3, 4, requires_grad=True), tl.randn(3, 4)
    np.testing.assert_allclose(F.mse_loss(x, t).item(), ((_np(x) - _np(t)) ** 2).mean())
    assert F.mse_loss(x, t, reduction="none").shape == (3, 4)
    assert gradcheck(lambda x: F.mse_loss(x, t), x)
    assert gradcheck(lambda x: nn.MSELoss(reduction="sum")(x, t), x)
    with pytest.raises(ValueError, match="same shape"):
        F.mse_loss(x, tl.randn(4, 3))


def test_binary_cross_entropy_values_gradcheck_and_clamping():
    p = (tl.rand(3, 4) * 0.8 + 0.1).requires_grad_()
    t = tl.rand(3, 4)
    expected = -(_np(t) * np.log(_np(p)) + (1 - _np(t)) * np.log(1 - _np(p)))
    np.testing.assert_allclose(
        _np(F.binary_cross_entropy(p, t, reduction="none")), expected, atol=1e-14
    )
    assert gradcheck(lambda p, t: F.binary_cross_entropy(p, t), p, t.requires_grad_())
    # p exactly 0 or 1: PyTorch clamps each log at -100, and the gradient stays finite
    edge = tl.tensor([0.0, 1.0], requires_grad=True)
    loss = nn.BCELoss(reduction="sum")(edge, tl.tensor([1.0, 0.0]))
    assert loss.item() == 200.0
    loss.backward()
    assert np.all(np.isfinite(_np(edge.grad)))


def test_binary_cross_entropy_with_logits_is_stable_and_exact_at_zero():
    x = tl.tensor([-800.0, -3.0, 0.0, 2.0, 800.0], requires_grad=True)
    t = tl.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    xs, ts = _np(x), _np(t)
    expected = np.maximum(xs, 0) - xs * ts + np.log1p(np.exp(-np.abs(xs)))
    np.testing.assert_allclose(_np(loss), expected, rtol=1e-14)
    assert _np(loss)[0] == 800.0 and np.isfinite(_np(loss)).all()
    loss.sum().backward()
    sigmoid = np.exp(-np.logaddexp(0, -xs))
    np.testing.assert_allclose(_np(x.grad), sigmoid - ts, atol=1e-15)  # 0.5 - 1 at x = 0
    xs = tl.randn(3, 2, requires_grad=True)
    assert gradcheck(
        lambda x, t: nn.BCEWithLogitsLoss()(x, t), xs, tl.rand(3, 2, requires_grad=True)
    )


# ------------------------------------------------------------------ dropout and one_hot
def test_dropout_is_seeded_and_keeps_the_mean():
    x = tl.ones(100_000)
    tl.manual_seed(5)
    a = _np(F.dropout(x, 0.3))
    tl.manual_seed(5)
    b = _np(F.dropout(x, 0.3))
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean() - 1.0) < 0.01
    assert F.dropout(x, 0.3, training=False) is x
    assert float(F.dropout(x, 1.0).sum()) == 0.0
    with pytest.raises(ValueError):
        F.dropout(x, -0.1)


def test_one_hot():
    out = F.one_hot(tl.tensor([0, 2, 1]), 4)
    assert out.dtype is tl.int64
    np.testing.assert_array_equal(_np(out), np.eye(4, dtype=np.int64)[[0, 2, 1]])
    assert F.one_hot(tl.tensor([[1], [3]])).shape == (2, 1, 4)
    with pytest.raises(IndexError, match="target 5"):
        F.one_hot(tl.tensor([5]), 3)
    with pytest.raises(TypeError, match="integer"):
        F.one_hot(tl.tensor([1.0]), 3)


# ------------------------------------------------------------------ functional conv / pool argument checks
def test_functional_conv_and_pool_argument_errors():
    x = tl.randn(1, 2, 5, 5)
    with pytest.raises(ValueError, match=r"\(N, 2, H, W\)"):
        F.conv2d(tl.randn(1, 3, 5, 5), tl.randn(4, 2, 3, 3))
    with pytest.raises(ValueError, match="smaller than the kernel"):
        F.conv2d(x, tl.randn(4, 2, 7, 3))
    with pytest.raises(ValueError, match="stride must be >= 1"):
        F.conv2d(x, tl.randn(4, 2, 3, 3), stride=0)
    with pytest.raises(ValueError, match="at most half the kernel"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="last dimension must be 3"):
        F.linear(tl.randn(2, 4), tl.randn(5, 3))
