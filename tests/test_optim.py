"""Optimizers against the published update rules, computed by hand in numpy, over several steps."""

from __future__ import annotations

import numpy as np
import pytest

import torchlight as tl
from torchlight import nn, optim

STEPS = 6
RNG = np.random.default_rng(0)
P0 = [RNG.standard_normal((3, 4)), RNG.standard_normal(4)]
GRADS = [[RNG.standard_normal(p.shape) for p in P0] for _ in range(STEPS)]


def run_torchlight(make_opt) -> list[np.ndarray]:
    params = [nn.Parameter(tl.tensor(p)) for p in P0]
    opt = make_opt(params)
    storages = [p.storage for p in params]
    for grads in GRADS:
        opt.zero_grad()
        for p, g in zip(params, grads, strict=True):
            p.grad = tl.tensor(g)
        opt.step()
    # updated in place: same Parameter objects, same storage
    assert all(p.storage is s for p, s in zip(params, storages, strict=True))
    return [p.detach().numpy() for p in params]


def sgd_reference(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    p, buf = p.copy(), None
    for g in grads:
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def adam_reference(
    p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False
):
    (b1, b2), p = betas, p.copy()
    m = v = v_max = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        v_max = np.maximum(v_max, v)
        denom = np.sqrt(v_max if amsgrad else v) / np.sqrt(1 - b2**t) + eps
        p = p - lr / (1 - b1**t) * m / denom
    return p


def check(results, reference):
    for i, got in enumerate(results):
        expected = reference(P0[i], [g[i] for g in GRADS])
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        assert not np.allclose(got, P0[i])  # the parameters did move


SGD_SETTINGS = [
    {"lr": 0.1},
    {"lr": 0.05, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.9, "dampening": 0.5},
    {"lr": 0.05, "momentum": 0.9, "nesterov": True},
    {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.01},
    {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
]


@pytest.mark.parametrize("settings", SGD_SETTINGS)
def test_sgd_matches_the_update_rule(settings):
    results = run_torchlight(lambda params: optim.SGD(params, **settings))
    check(results, lambda p, g: sgd_reference(p, g, **settings))


ADAM_SETTINGS = [
    {"lr": 0.01},
    {"lr": 0.1, "betas": (0.8, 0.99), "eps": 1e-6},
    {"lr": 0.01, "weight_decay": 0.1},
    {"lr": 0.01, "amsgrad": True},
    {"lr": 0.05, "amsgrad": True, "weight_decay": 0.05},
]


@pytest.mark.parametrize("settings", ADAM_SETTINGS)
def test_adam_matches_the_update_rule(settings):
    results = run_torchlight(lambda params: optim.Adam(params, **settings))
    check(results, lambda p, g: adam_reference(p, g, **settings))


def test_adamw_decouples_weight_decay():
    results = run_torchlight(lambda params: optim.AdamW(params, lr=0.01, weight_decay=0.1))
    check(results, lambda p, g: adam_reference(p, g, lr=0.01, weight_decay=0.1, decoupled=True))


def test_param_groups_have_their_own_settings():
    a, b = nn.Parameter(tl.ones(2)), nn.Parameter(tl.ones(2))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    a.grad, b.grad = tl.ones(2), tl.ones(2)
    opt.step()
    np.testing.assert_allclose(a.detach().numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.detach().numpy(), [0.5, 0.5])
    assert "Parameter Group 1" in repr(opt) and "lr: 0.5" in repr(opt)


def test_sgd_sees_a_changed_learning_rate_and_updates_in_place_per_dtype():
    a = nn.Parameter(tl.ones(2))  # float64
    b = nn.Parameter(tl.ones(2, dtype=tl.float32))
    storage_a, storage_b = a.storage, b.storage
    opt = optim.SGD([a, b], lr=0.25)
    a.grad, b.grad = tl.ones(2), tl.ones(2, dtype=tl.float32)
    opt.step()
    opt.param_groups[0]["lr"] = 0.5  # as a learning-rate schedule does
    opt.step()
    np.testing.assert_array_equal(a.detach().numpy(), [0.25, 0.25])
    np.testing.assert_array_equal(b.detach().numpy(), [0.25, 0.25])
    assert a.storage is storage_a and b.storage is storage_b  # the model's own storage, updated
    assert b.dtype is tl.float32


def test_step_skips_parameters_without_gradient_and_zero_grad_sets_none():
    a, b = nn.Parameter(tl.ones(2)), nn.Parameter(tl.ones(2))
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = tl.ones(2)
    opt.step()
    np.testing.assert_array_equal(b.detach().numpy(), [1.0, 1.0])
    assert b not in opt.state
    opt.zero_grad()
    assert a.grad is None
    a.grad = tl.ones(2)
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0])


def test_float32_parameters_stay_float32():
    p = nn.Parameter(tl.ones(3, dtype=tl.float32))
    opt = optim.Adam([p], lr=0.1)
    p.grad = tl.ones(3, dtype=tl.float32)
    opt.step()
    assert p.dtype is tl.float32 and opt.state[p]["exp_avg"].dtype is tl.float32


def test_a_model_trains_with_each_optimizer():
    for make in (
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: optim.Adam(ps, lr=0.05),
    ):
        tl.manual_seed(0)
        model = nn.Linear(3, 1)
        opt = make(model.parameters())
        x = tl.randn(32, 3)
        y = x @ tl.tensor([[1.0], [-2.0], [0.5]]) + 0.3
        for _ in range(200):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert loss.item() < 1e-4


def test_state_dict_round_trip_continues_identically():
    def make(values):
        params = [nn.Parameter(tl.tensor(v)) for v in values]
        return params, optim.Adam(params, lr=0.05, amsgrad=True)

    pa, a = make(P0)
    for grads in GRADS[:3]:
        for p, g in zip(pa, grads, strict=True):
            p.grad = tl.tensor(g)
        a.step()
    pb, b = make([p.detach().numpy().copy() for p in pa])
    b.load_state_dict(a.state_dict())
    assert b.state[pb[0]]["step"] == 3
    for grads in GRADS[3:]:
        for params, opt in ((pa, a), (pb, b)):
            for p, g in zip(params, grads, strict=True):
                p.grad = tl.tensor(g)
            opt.step()
    for x, y in zip(pa, pb, strict=True):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())


def test_state_dict_names_parameters_by_index():
    params = [nn.Parameter(tl.ones(2)), nn.Parameter(tl.ones(3))]
    opt = optim.SGD(params, lr=0.1, momentum=0.9)
    for p in params:
        p.grad = tl.ones(p.shape)
    opt.step()
    state = opt.state_dict()
    assert state["param_groups"][0]["params"] == [0, 1]
    assert state["param_groups"][0]["momentum"] == 0.9
    assert set(state["state"]) == {0, 1} and state["state"][1]["momentum_buffer"].shape == (3,)


def test_load_state_dict_errors_change_nothing():
    params = [nn.Parameter(tl.ones(2)), nn.Parameter(tl.ones(3))]
    opt = optim.SGD(params, lr=0.1, momentum=0.9)
    for p in params:
        p.grad = tl.ones(p.shape)
    opt.step()
    good = opt.state_dict()
    before = {k: v["momentum_buffer"].numpy().copy() for k, v in good["state"].items()}
    wrong_shape = {
        "state": {0: {"momentum_buffer": np.zeros(5)}},
        "param_groups": good["param_groups"],
    }
    with pytest.raises(ValueError, match=r"shape \(5,\).*shape \(2,\)"):
        opt.load_state_dict(wrong_shape)
    too_few = {"state": {}, "param_groups": [{**good["param_groups"][0], "params": [0]}]}
    with pytest.raises(ValueError, match="has 2 parameters, but the saved group has 1"):
        opt.load_state_dict(too_few)
    with pytest.raises(ValueError, match="parameter group"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    assert opt.param_groups[0]["lr"] == 0.1
    after = opt.state_dict()["state"]
    assert all(np.array_equal(before[k], after[k]["momentum_buffer"].numpy()) for k in before)


def test_bad_settings_are_rejected():
    p = [nn.Parameter(tl.ones(1))]
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD(p, lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        optim.Adam(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="unknown setting"):
        optim.SGD([{"params": p, "momentun": 0.9}], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": p}, {"params": p}], lr=0.1)
    with pytest.raises(TypeError, match="leaf Tensors"):
        optim.SGD([p[0] * 2], lr=0.1)


def test_a_step_between_forward_and_backward_is_caught():
    # The update writes into the parameter's storage; a graph that saved the old values must
    # refuse to backpropagate with the new ones (PyTorch raises the same error).
    w = nn.Parameter(tl.tensor([1.0, 2.0]))
    opt = optim.SGD([w], lr=0.1)
    loss = (w * w).sum()  # Mul saves w for backward
    w.grad = tl.ones(2)
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        loss.backward()
