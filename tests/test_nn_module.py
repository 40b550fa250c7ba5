"""nn.Module and nn.Parameter: registration, traversal, modes, state_dict, repr."""

from __future__ import annotations

import numpy as np
import pytest

import torchlight as tl
from torchlight import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.drop = nn.Dropout(0.5)
        self.scale = nn.Parameter(tl.ones(3))
        self.not_a_parameter = tl.ones(3)  # a plain tensor attribute is not registered

    def forward(self, x: tl.Tensor) -> tl.Tensor:
        return self.drop(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(3, 2))

    def forward(self, x: tl.Tensor) -> tl.Tensor:
        return self.head(self.block(x))


def test_parameter_is_a_leaf_tensor_that_requires_grad():
    p = nn.Parameter(tl.tensor([1.0, 2.0]))
    assert isinstance(p, tl.Tensor) and p.requires_grad and p.is_leaf
    assert repr(p).startswith("Parameter containing:\ntensor([1., 2.]")
    assert not nn.Parameter(tl.zeros(2), requires_grad=False).requires_grad
    with pytest.raises(TypeError, match="must be a torchlight Tensor"):
        nn.Parameter(np.zeros(2))  # type: ignore[arg-type]


def test_named_parameters_are_parameters_with_dotted_names():
    net = Net()
    assert [p for p in net.parameters()] == [p for _, p in net.named_parameters()]
    assert all(isinstance(p, nn.Parameter) for p in net.parameters())
    assert "not_a_parameter" not in dict(net.block.named_parameters())
    assert dict(net.named_parameters())["head.1.weight"] is net.head[1].weight


def test_parameters_follow_pytorch_registration_order():
    # PyTorch lists a module's own parameters before its submodules' parameters
    names = [name for name, _ in Net().named_parameters()]
    assert names == [
        "block.scale",
        "block.fc.weight",
        "block.fc.bias",
        "head.1.weight",
        "head.1.bias",
    ]


def test_modules_and_children():
    net = Net()
    assert [type(m).__name__ for m in net.children()] == ["Block", "Sequential"]
    names = [name for name, _ in net.named_modules()]
    assert names == ["", "block", "block.fc", "block.drop", "head", "head.0", "head.1"]
    assert list(net.modules())[0] is net


def test_shared_parameters_are_listed_once():
    layer = nn.Linear(3, 3)
    model = nn.Sequential(layer, nn.ReLU(), layer)
    assert len(list(model.parameters())) == 2
    assert list(model.state_dict()) == ["0.weight", "0.bias"]


def test_train_and_eval_reach_every_submodule():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_zero_grad_and_requires_grad_():
    net = Net()
    net(tl.randn(5, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0.0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_assigning_a_tensor_to_a_parameter_slot_is_an_error():
    layer = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="nn.Parameter"):
        layer.weight = tl.zeros(2, 2)
    layer.weight = nn.Parameter(tl.zeros(2, 2))  # replacing with a Parameter is fine
    assert float(layer.weight.sum()) == 0.0


def test_assignment_before_super_init_explains_the_fix():
    class Broken(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(2, 2)

    with pytest.raises(AttributeError, match=r"super\(\).__init__\(\)"):
        Broken()


def test_missing_forward_and_unknown_attribute():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(tl.ones(1))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = nn.Linear(2, 2).nope


def test_delattr_unregisters():
    block = Block()
    del block.scale
    assert "scale" not in dict(block.named_parameters())


def test_state_dict_round_trip_into_a_fresh_model():
    tl.manual_seed(0)
    a = Net()
    tl.manual_seed(1)
    b = Net()
    state = a.state_dict()
    assert list(state) == [name for name, _ in a.named_parameters()]
    assert all(not t.requires_grad for t in state.values())
    weight_before = b.block.fc.weight
    result = b.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b.block.fc.weight is weight_before  # loaded in place: identity kept
    x = tl.randn(3, 4)
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())


def test_load_state_dict_accepts_numpy_arrays_and_converts_dtype():
    layer = nn.Linear(2, 1)
    layer.load_state_dict(
        {"weight": np.array([[1.0, 2.0]], dtype=np.float32), "bias": np.array([3.0])}
    )
    assert layer.weight.dtype is tl.float64
    assert layer(tl.tensor([[1.0, 1.0]])).item() == 6.0


def _snapshot(module: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.numpy().copy() for k, v in module.state_dict().items()}


def test_load_state_dict_errors_list_every_problem_and_change_nothing():
    net = Net()
    before = _snapshot(net)
    bad = {k: v.numpy().copy() + 1 for k, v in net.state_dict().items()}
    del bad["head.1.bias"]
    bad["extra.weight"] = np.zeros(2)
    bad["block.fc.weight"] = np.zeros((4, 3))
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(bad)
    message = str(info.value)
    assert "Error(s) in loading state_dict for Net" in message
    assert 'Missing key(s) in state_dict: "head.1.bias"' in message
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in message
    assert (
        "size mismatch for block.fc.weight" in message
        and "(4, 3)" in message
        and "(3, 4)" in message
    )
    after = _snapshot(net)
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_load_state_dict_non_strict_reports_keys_but_still_checks_shapes():
    layer = nn.Linear(2, 2)
    result = layer.load_state_dict({"weight": np.eye(2), "other": np.zeros(1)}, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["other"]
    np.testing.assert_array_equal(layer.weight.detach().numpy(), np.eye(2))
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        layer.load_state_dict({"weight": np.eye(3)}, strict=False)


def test_buffers_are_saved_but_not_learned():
    class WithBuffer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("running_mean", tl.zeros(3))
            self.fc = nn.Linear(3, 3)

    m = WithBuffer()
    assert "running_mean" in m.state_dict()
    assert "running_mean" not in dict(m.named_parameters())
    assert [n for n, _ in m.named_buffers()] == ["running_mean"]


def test_to_float32_keeps_parameter_identity():
    net = Net()
    params = list(net.parameters())
    net.to(tl.float32)
    assert all(a is b for a, b in zip(params, net.parameters(), strict=True))
    assert all(p.dtype is tl.float32 for p in net.parameters())
    assert net(tl.randn(2, 4, dtype=tl.float32)).dtype is tl.float32
    net.double()
    assert all(p.dtype is tl.float64 for p in net.parameters())


def test_apply_visits_every_module():
    seen = []
    Net().apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Dropout", "Block", "ReLU", "Linear", "Sequential", "Net"]


def test_nested_repr_matches_pytorch_layout():
    text = repr(Net())
    assert text == (
        "Net(\n"
        "  (block): Block(\n"
        "    (fc): Linear(in_features=4, out_features=3, bias=True)\n"
        "    (drop): Dropout(p=0.5)\n"
        "  )\n"
        "  (head): Sequential(\n"
        "    (0): ReLU()\n"
        "    (1): Linear(in_features=3, out_features=2, bias=True)\n"
        "  )\n"
        ")"
    )
