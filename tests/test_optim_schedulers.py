"""RMSprop, Adagrad, SGD(maximize) and torchlight.optim.lr_scheduler, checked against PyTorch.

The expected numbers were recorded from PyTorch 2.13.0 (CPU, float64) by running the same code with
``torch`` in place of ``tl`` (``torch.optim``, ``torch.optim.lr_scheduler``); they are constants
here, so the tests need no PyTorch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import torchlight as tl
from torchlight import nn, optim
from torchlight.optim import lr_scheduler as L

# w = [1, -2, 0.5]; three steps on loss = sum(w**4) + w[0] * w[1]; w after, from PyTorch 2.13.0
OPTIMIZER_RESULTS = {
    "rmsprop": [0.8260208923381104, -1.7840208395166046, 0.32381758900290025],
    "rmsprop_all": [0.889531619386118, -1.8831451449018475, 0.38964558691233936],
    "adagrad": [0.8263822725940689, -1.7844957182776928, 0.32420473339988215],
    "adagrad_all": [0.854221042532109, -1.830716942986413, 0.3764357582707423],
    "sgd_nesterov_max": [1.138633760495362, -10.279087077868619, 0.5420096051800453],
}
OPTIMIZERS = {
    "rmsprop": (optim.RMSprop, {"lr": 0.01}),
    "rmsprop_all": (
        optim.RMSprop,
        {
            "lr": 0.01,
            "alpha": 0.9,
            "eps": 1e-6,
            "weight_decay": 0.1,
            "momentum": 0.5,
            "centered": True,
        },
    ),
    "adagrad": (optim.Adagrad, {"lr": 0.1}),
    "adagrad_all": (
        optim.Adagrad,
        {
            "lr": 0.1,
            "lr_decay": 0.5,
            "weight_decay": 0.1,
            "initial_accumulator_value": 0.2,
            "eps": 1e-6,
        },
    ),
    "sgd_nesterov_max": (
        optim.SGD,
        {"lr": 0.01, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01, "maximize": True},
    ),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_matches_pytorch(name):
    cls, settings = OPTIMIZERS[name]
    w = nn.Parameter(tl.tensor([1.0, -2.0, 0.5]))
    opt = cls([w], **settings)
    for _ in range(3):
        opt.zero_grad()
        loss = (w**4).sum() + w[0] * w[1]
        loss.backward()
        opt.step()
    np.testing.assert_allclose(w.detach().numpy(), OPTIMIZER_RESULTS[name], rtol=1e-12)


def test_rmsprop_first_step_by_hand():
    # v = (1 - alpha) g^2, so the step is lr * g / (sqrt(1 - alpha) |g|) = lr / sqrt(0.01) = 10 lr
    w = nn.Parameter(tl.tensor([3.0, -1.0]))
    opt = optim.RMSprop([w], lr=0.01, eps=0.0)
    (w * w).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [2.9, -0.9], rtol=1e-12)
    assert set(opt.state[w]) == {"step", "square_avg"} and opt.state[w]["step"] == 1


def test_step_with_closure_returns_the_loss():
    w = nn.Parameter(tl.tensor([1.0]))
    opt = optim.SGD([w], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 1.0 and w.item() == 0.0


def test_state_of_a_parameter_without_steps_is_empty_as_in_pytorch():
    w = nn.Parameter(tl.zeros(2))
    opt = optim.Adagrad([w])
    assert opt.state[w] == {} and opt.state_dict()["state"] == {}


# Two groups (lr 0.1 and 0.5) of an SGD(momentum=0.9); [group lrs] at construction and after each
# scheduler.step(), recorded from PyTorch 2.13.0.
SCHEDULES = {
    "ConstantLR": [
        [0.025, 0.125],
        [0.025, 0.125],
        [0.025, 0.125],
        [0.1, 0.5],
        [0.1, 0.5],
        [0.1, 0.5],
    ],
    "PolynomialLR": [
        [0.1, 0.5],
        [0.05625, 0.28125],
        [0.024999999999999998, 0.125],
        [0.0062499999999999995, 0.03125],
        [0.0, 0.0],
        [0.0, 0.0],
        [0.0, 0.0],
    ],
    "CosineAnnealingWarmRestarts": [
        [0.1, 0.5],
        [0.0775, 0.3775],
        [0.032500000000000015, 0.13250000000000006],
        [0.1, 0.5],
        [0.09397114317029975, 0.4671762239271875],
        [0.0775, 0.3775],
        [0.05500000000000001, 0.255],
        [0.032500000000000015, 0.13250000000000006],
        [0.01602885682970026, 0.04282377607281252],
        [0.1, 0.5],
        [0.09846666218300808, 0.4916518274408217],
        [0.09397114317029975, 0.4671762239271875],
    ],
    "ChainedScheduler": [
        [0.05, 0.25],
        [0.045000000000000005, 0.225],
        [0.08100000000000002, 0.405],
        [0.07290000000000002, 0.36450000000000005],
        [0.06561000000000002, 0.32805000000000006],
        [0.05904900000000002, 0.2952450000000001],
    ],
    "StepLR": [
        [0.1, 0.5],
        [0.1, 0.5],
        [0.1, 0.5],
        [0.05, 0.25],
        [0.05, 0.25],
        [0.05, 0.25],
        [0.025, 0.125],
        [0.025, 0.125],
        [0.025, 0.125],
    ],
    "MultiStepLR": [
        [0.1, 0.5],
        [0.1, 0.5],
        [0.010000000000000002, 0.05],
        [0.010000000000000002, 0.05],
        [0.010000000000000002, 0.05],
        [0.00010000000000000005, 0.0005000000000000001],
        [0.00010000000000000005, 0.0005000000000000001],
        [0.00010000000000000005, 0.0005000000000000001],
    ],
    "ExponentialLR": [
        [0.1, 0.5],
        [0.09000000000000001, 0.45],
        [0.08100000000000002, 0.405],
        [0.07290000000000002, 0.36450000000000005],
        [0.06561000000000002, 0.32805000000000006],
        [0.05904900000000002, 0.2952450000000001],
    ],
    "CosineAnnealingLR": [
        [0.1, 0.5],
        [0.08681980515339464, 0.4282411613907041],
        [0.05500000000000001, 0.255],
        [0.023180194846605363, 0.08175883860929586],
        [0.01, 0.01],
        [0.023180194846605363, 0.08175883860929584],
        [0.05500000000000002, 0.255],
        [0.08681980515339469, 0.42824116139070423],
        [0.10000000000000006, 0.5000000000000001],
        [0.0868198051533947, 0.4282411613907043],
        [0.05500000000000005, 0.2550000000000001],
    ],
    "LinearLR": [
        [0.025, 0.125],
        [0.043750000000000004, 0.21875],
        [0.06250000000000001, 0.3125],
        [0.08125000000000002, 0.40625],
        [0.10000000000000002, 0.5],
        [0.10000000000000002, 0.5],
        [0.10000000000000002, 0.5],
    ],
    "LambdaLR": [[0.1, 0.5], [0.05, 0.25], [0.025, 0.125], [0.0125, 0.0625], [0.00625, 0.03125]],
    "SequentialLR": [
        [0.05, 0.25],
        [0.07500000000000001, 0.375],
        [0.1, 0.5],
        [0.07500000000000001, 0.375],
        [0.025000000000000015, 0.12500000000000006],
        [0.0, 0.0],
        [0.024999999999999994, 0.12499999999999997],
    ],
    "OneCycleLR": [
        [0.040000000000000036, 0.08000000000000007],
        [0.52, 1.04],
        [1.0, 2.0],
        [0.9504846320134737, 1.9009692640269473],
        [0.8117456539497631, 1.6234913078995261],
        [0.6112620219362893, 1.2225240438725786],
        [0.38874197806371075, 0.7774839561274215],
        [0.18825834605023697, 0.37651669210047395],
        [0.049519367986526286, 0.09903873597305257],
        [4e-06, 8e-06],
        [0.04951936798652623, 0.09903873597305246],
    ],
    "OneCycleLR3": [
        [0.04, 0.04],
        [0.52, 0.52],
        [1.0, 1.0],
        [0.52, 0.52],
        [0.040000000000000036, 0.040000000000000036],
        [0.032000799999999996, 0.032000799999999996],
        [0.024001599999999998, 0.024001599999999998],
        [0.0160024, 0.0160024],
        [0.008003199999999995, 0.008003199999999995],
        [3.9999999999970615e-06, 3.9999999999970615e-06],
        [-0.007995200000000001, -0.007995200000000001],
    ],
}
MOMENTUM = {  # param_groups[0]["momentum"] after each step, from PyTorch 2.13.0
    "OneCycleLR_momentum": [
        0.8999999999999999,
        0.85,
        0.854951556604879,
        0.8688255099070633,
        0.8888739533021842,
        0.9111260466978157,
        0.9311744900929366,
        0.945048443395121,
        0.95,
        0.945048443395121,
    ],
    "OneCycleLR3_momentum": [
        0.8999999999999999,
        0.85,
        0.8999999999999999,
        0.95,
        0.95,
        0.95,
        0.95,
        0.95,
        0.95,
        0.95,
    ],
}
MAKE = {
    "ConstantLR": (lambda o: L.ConstantLR(o, factor=0.25, total_iters=3), 5),
    "PolynomialLR": (lambda o: L.PolynomialLR(o, total_iters=4, power=2.0), 6),
    "CosineAnnealingWarmRestarts": (
        lambda o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
        11,
    ),
    "ChainedScheduler": (
        lambda o: L.ChainedScheduler(
            [L.ConstantLR(o, factor=0.5, total_iters=2), L.ExponentialLR(o, gamma=0.9)]
        ),
        5,
    ),
    "StepLR": (lambda o: L.StepLR(o, 3, 0.5), 8),
    "MultiStepLR": (lambda o: L.MultiStepLR(o, [2, 5, 5], 0.1), 7),
    "ExponentialLR": (lambda o: L.ExponentialLR(o, 0.9), 5),
    "CosineAnnealingLR": (lambda o: L.CosineAnnealingLR(o, T_max=4, eta_min=0.01), 10),
    "LinearLR": (lambda o: L.LinearLR(o, start_factor=0.25, total_iters=4), 6),
    "LambdaLR": (lambda o: L.LambdaLR(o, lambda e: 0.5**e), 4),
    "SequentialLR": (
        lambda o: L.SequentialLR(
            o,
            [L.LinearLR(o, 0.5, total_iters=2), L.CosineAnnealingLR(o, T_max=3)],
            milestones=[2],
        ),
        6,
    ),
    "OneCycleLR": (lambda o: L.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=10), 10),
    "OneCycleLR3": (
        lambda o: L.OneCycleLR(
            o, max_lr=1.0, total_steps=10, three_phase=True, anneal_strategy="linear"
        ),
        10,
    ),
}


def two_groups(kind="sgd"):
    p, q = nn.Parameter(tl.zeros(1)), nn.Parameter(tl.zeros(1))
    groups = [{"params": [p]}, {"params": [q], "lr": 0.5}]
    return optim.SGD(groups, lr=0.1, momentum=0.9) if kind == "sgd" else optim.Adam(groups, lr=0.1)


def run(opt, scheduler, steps, metrics=None):
    lrs, momentum = [[g["lr"] for g in opt.param_groups]], []
    for i in range(steps):
        opt.step()
        scheduler.step(metrics[i]) if metrics else scheduler.step()
        lrs.append([g["lr"] for g in opt.param_groups])
        first = opt.param_groups[0]
        momentum.append(first["momentum"] if "momentum" in first else first["betas"][0])
    return lrs, momentum


@pytest.mark.parametrize("name", sorted(MAKE))
def test_schedule_matches_pytorch(name):
    make, steps = MAKE[name]
    opt = two_groups()
    scheduler = make(opt)
    lrs, momentum = run(opt, scheduler, steps)
    np.testing.assert_allclose(lrs, SCHEDULES[name], rtol=1e-12, atol=1e-15)
    assert scheduler.get_last_lr() == lrs[-1]
    if name in MOMENTUM:
        np.testing.assert_allclose(momentum, MOMENTUM[name], rtol=1e-12)


def test_closed_forms_agree_with_the_chained_steps():
    closed_forms = ("StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR")
    for name in (*closed_forms, "ConstantLR", "PolynomialLR"):
        make, steps = MAKE[name]
        opt = two_groups()
        scheduler = make(opt)
        chained, _ = run(opt, scheduler, steps)
        for epoch in range(min(steps, 4) + 1):  # cosine: the closed form holds up to T_max
            scheduler.last_epoch = epoch
            closed = scheduler._get_closed_form_lr()
            np.testing.assert_allclose(closed, chained[epoch], rtol=1e-12, err_msg=name)


def test_onecycle_cycles_adams_beta1():
    opt = two_groups("adam")
    scheduler = L.OneCycleLR(opt, max_lr=1.0, total_steps=6)
    _, betas = run(opt, scheduler, 6)
    expected = [  # PyTorch 2.13.0
        0.8505584586887436, 0.8688255099070633, 0.9037365046793212, 0.9366525935914912, 0.95,
        0.9366525935914912,
    ]  # fmt: skip
    np.testing.assert_allclose(betas, expected, rtol=1e-12)
    assert opt.param_groups[0]["betas"][1] == 0.999
    with pytest.raises(ValueError, match="total_steps is 6"):
        scheduler.step()


def test_reduce_lr_on_plateau_matches_pytorch():
    metrics = [3, 2, 2, 2, 2, 1, 1.00001, 1, 1, 1, 1, 1]
    opt = two_groups()
    scheduler = L.ReduceLROnPlateau(opt, patience=1, factor=0.5, cooldown=1, min_lr=[0.0, 0.2])
    lrs, _ = run(opt, scheduler, len(metrics), metrics)
    expected = [  # PyTorch 2.13.0
        [0.1, 0.5], [0.1, 0.5], [0.1, 0.5], [0.1, 0.5], [0.05, 0.25], [0.05, 0.25], [0.05, 0.25],
        [0.05, 0.25], [0.025, 0.2], [0.025, 0.2], [0.025, 0.2], [0.0125, 0.2], [0.0125, 0.2],
    ]  # fmt: skip
    assert lrs == expected
    opt = two_groups()
    scheduler = L.ReduceLROnPlateau(
        opt, mode="max", patience=0, threshold=0.5, threshold_mode="abs"
    )
    lrs, _ = run(opt, scheduler, 5, [1, 1.4, 1.6, 2.2, 2.3])
    assert lrs[-1] == [0.0010000000000000002, 0.005000000000000001]  # PyTorch 2.13.0


def test_scheduler_state_dict_resumes_identically():
    def fresh():
        opt = two_groups()
        warm = L.LinearLR(opt, 0.5, total_iters=2)
        return opt, L.SequentialLR(opt, [warm, L.CosineAnnealingLR(opt, T_max=3)], [2])

    opt, scheduler = fresh()
    run(opt, scheduler, 3)
    saved_opt, saved = opt.state_dict(), scheduler.state_dict()
    rest, _ = run(opt, scheduler, 3)

    opt2, scheduler2 = fresh()
    opt2.load_state_dict(saved_opt)  # includes the groups' "initial_lr"
    scheduler2.load_state_dict(saved)
    again, _ = run(opt2, scheduler2, 3)
    assert again == rest
    assert "optimizer" not in saved and len(saved["_schedulers"]) == 2


def test_lambda_lr_state_dict_leaves_out_the_function_and_resuming_needs_initial_lr():
    opt = two_groups()
    assert "lr_lambdas" not in L.LambdaLR(opt, lambda e: 1.0).state_dict()
    fresh = two_groups()
    with pytest.raises(KeyError, match="initial_lr"):
        L.StepLR(fresh, 2, last_epoch=4)
    resumed = L.StepLR(opt, 2, 0.5, last_epoch=4)  # opt's groups have initial_lr now
    assert resumed.last_epoch == 5


def test_scheduler_errors_say_what_was_expected():
    with pytest.raises(TypeError, match="expected an optimizer"):
        L.StepLR([nn.Parameter(tl.zeros(1))], 2)
    with pytest.raises(ValueError, match="step_size"):
        L.StepLR(two_groups(), 0)
    with pytest.raises(ValueError, match="cycle_momentum=False"):
        L.OneCycleLR(optim.Adagrad([nn.Parameter(tl.zeros(1))]), 1.0, total_steps=5)
    with pytest.raises(ValueError, match="milestone"):
        opt = two_groups()
        L.SequentialLR(opt, [L.StepLR(opt, 2)], milestones=[3])
    assert math.isclose(L.CosineAnnealingLR(two_groups(), 5).get_last_lr()[0], 0.1)


def test_warm_restarts_stepped_per_batch_with_fractional_epochs():
    opt = optim.SGD([nn.Parameter(tl.zeros(1))], lr=1.0)
    scheduler = L.CosineAnnealingWarmRestarts(opt, T_0=1, T_mult=2, eta_min=0.1)
    lrs = []
    for epoch in range(4):
        for i in range(4):
            opt.step()
            scheduler.step(epoch + i / 4)
            lrs.append(opt.param_groups[0]["lr"])
    expected = [  # PyTorch 2.13.0, the same loop
        1.0, 0.8681980515339464, 0.55, 0.23180194846605365, 1.0, 0.9657457896300791,
        0.8681980515339464, 0.7222075445642904, 0.55, 0.3777924554357096, 0.23180194846605365,
        0.13425421036992097, 1.0, 0.9913533761814537, 0.9657457896300791, 0.9241613255361454,
    ]  # fmt: skip
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
