"""torchlight.nn.init: distributions, fans and gains, seeding through tl.manual_seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import torchlight as tl
from torchlight.nn import init


def test_seeded_through_manual_seed():
    tl.manual_seed(7)
    a = init.normal_(tl.empty(50)).numpy().copy()
    tl.manual_seed(7)
    b = init.normal_(tl.empty(50)).numpy().copy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, init.normal_(tl.empty(50)).numpy())


def test_uniform_normal_constant():
    tl.manual_seed(0)
    u = init.uniform_(tl.empty(100_000), -2.0, 3.0).numpy()
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.02
    n = init.normal_(tl.empty(100_000), 1.0, 2.0).numpy()
    assert abs(n.mean() - 1.0) < 0.03 and abs(n.std() - 2.0) < 0.03
    np.testing.assert_array_equal(init.constant_(tl.empty(3), 0.5).numpy(), [0.5] * 3)
    np.testing.assert_array_equal(init.zeros_(tl.ones(2)).numpy(), [0, 0])
    np.testing.assert_array_equal(init.ones_(tl.zeros(2)).numpy(), [1, 1])


def test_xavier_and_kaiming_scales_use_fans_of_conv_weights():
    tl.manual_seed(0)
    w = tl.empty(64, 32, 3, 3)  # fan_in = 32*9 = 288, fan_out = 64*9 = 576
    bound = math.sqrt(6 / (288 + 576))
    x = init.xavier_uniform_(w).numpy()
    assert np.abs(x).max() <= bound and np.abs(x).max() > 0.95 * bound
    assert abs(init.xavier_normal_(w).numpy().std() - math.sqrt(2 / 864)) < 0.002
    assert (
        abs(init.kaiming_normal_(w, nonlinearity="relu").numpy().std() - math.sqrt(2 / 288)) < 0.003
    )
    k = init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu").numpy()
    assert np.abs(k).max() <= math.sqrt(2) * math.sqrt(3 / 576)


def test_calculate_gain():
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("tanh") == 5 / 3
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == math.sqrt(2 / 6)
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swish")


def test_init_errors_and_dtype():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        init.xavier_uniform_(tl.empty(5))
    with pytest.raises(ValueError, match="fan_in"):
        init.kaiming_uniform_(tl.empty(2, 2), mode="fan_middle")
    w = tl.empty(3, 3, dtype=tl.float32)
    assert init.normal_(w).dtype is tl.float32


def test_init_works_on_parameters_that_require_grad():
    p = tl.nn.Parameter(tl.zeros(4, 4))
    init.xavier_uniform_(p)
    assert p.requires_grad and p.is_leaf and float(p.abs().sum()) > 0


def test_linear_and_every_convolution_share_pytorchs_default_weight_and_bias_init():
    # One set-up (nn/linear.py add_weight_and_bias + reset_weight_and_bias) serves them all:
    # weight and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the bias one value per output.
    tl.manual_seed(0)
    layers = {
        "Linear": (tl.nn.Linear(12, 5), 12, 5),
        "Conv1d": (tl.nn.Conv1d(4, 6, 3), 4 * 3, 6),
        "Conv2d": (tl.nn.Conv2d(4, 6, 3, groups=2), 2 * 9, 6),
        "ConvTranspose2d": (tl.nn.ConvTranspose2d(4, 6, 2, groups=2), 3 * 4, 6),
    }
    for name, (layer, fan_in, outputs) in layers.items():
        bound = 1 / math.sqrt(fan_in)
        assert layer.bias.shape == (outputs,), name
        for p in (layer.weight, layer.bias):
            values = p.detach().numpy()
            assert np.abs(values).max() <= bound, name
            assert np.abs(values).max() > 0.5 * bound, name  # spread over the range, not zeros
    assert tl.nn.Linear(3, 2, bias=False).bias is None
    assert tl.nn.ConvTranspose2d(4, 6, 2, bias=False).bias is None
