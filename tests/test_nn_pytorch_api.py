"""The nn surface PyTorch users reach for, checked against PyTorch and by central differences.

Each case in ``CASES`` runs the same code on ``torchlight`` and (when recording) on ``torch``:
inputs drawn from a seeded numpy generator, an output, and the gradient of a random weighting of
the output. ``EXPECTED`` holds two checksums per case, ``sum(out * R)`` and
``sum_i sum(grad_i * R_i)`` (``R`` fixed random arrays), recorded from PyTorch 2.13.0 (CPU, float64)
with ``python tests/test_nn_pytorch_api.py --record`` (needs torch; the tests do not). Any wrong
element of the output or of a gradient changes a checksum.
"""

from __future__ import annotations

import sys
import zlib

import numpy as np
import pytest

import torchlight as tl
import torchlight.nn.functional as TF
from torchlight import nn
from torchlight.autograd import gradcheck


def f(*shape):  # a float input that needs a gradient
    return ("f", shape)


def i(high, *shape):  # integer class indices in [0, high)
    return ("i", high, shape)


def const(array):  # a fixed array, no gradient
    return ("c", np.asarray(array))


# name: (inputs, function of (F, lib, *tensors))
CASES = {
    "leaky_relu": ([f(3, 4)], lambda F, lib, x: F.leaky_relu(x, 0.2)),
    "elu": ([f(3, 4)], lambda F, lib, x: F.elu(x, 1.5)),
    "gelu": ([f(3, 4)], lambda F, lib, x: F.gelu(x)),  # needs Tensor.erf (the ops branch)
    "gelu_tanh": ([f(3, 4)], lambda F, lib, x: F.gelu(x, approximate="tanh")),
    "silu": ([f(3, 4)], lambda F, lib, x: F.silu(x)),
    "softplus": ([f(3, 4)], lambda F, lib, x: F.softplus(x * 3, beta=2, threshold=3)),
    "ce_ignore_default": (
        [f(4, 3), const([0, -100, 2, 1])],
        lambda F, lib, x, y: F.cross_entropy(x, y),
    ),
    "ce_weight": (
        [f(4, 3), i(3, 4), const([0.2, 1.0, 3.0])],
        lambda F, lib, x, y, w: F.cross_entropy(x, y, w),
    ),
    "ce_smoothing": (
        [f(4, 3), i(3, 4)],
        lambda F, lib, x, y: F.cross_entropy(x, y, label_smoothing=0.1),
    ),
    "ce_weight_smoothing_ignore": (
        [f(5, 3), const([0, 2, 1, 1, 2]), const([0.2, 1.0, 3.0])],
        lambda F, lib, x, y, w: F.cross_entropy(x, y, w, ignore_index=1, label_smoothing=0.3),
    ),
    "ce_weight_smoothing_sum": (
        [f(5, 3), i(3, 5), const([0.2, 1.0, 3.0])],
        lambda F, lib, x, y, w: F.cross_entropy(x, y, w, reduction="sum", label_smoothing=0.3),
    ),
    "ce_none_ignore": (
        [f(4, 3), const([0, 2, -100, 1])],
        lambda F, lib, x, y: F.cross_entropy(x, y, reduction="none", label_smoothing=0.2),
    ),
    "ce_probabilities": (
        [f(4, 3), f(4, 3), const([0.2, 1.0, 3.0])],
        lambda F, lib, x, p, w: F.cross_entropy(x, F.softmax(p, 1), w, label_smoothing=0.1),
    ),
    "ce_spatial": (
        [f(2, 3, 2, 2), const([[[0, 1], [-100, 2]], [[2, 2], [1, 0]]])],
        lambda F, lib, x, y: F.cross_entropy(x, y),
    ),
    "ce_spatial_none": (
        [f(2, 3, 4), i(3, 2, 4)],
        lambda F, lib, x, y: F.cross_entropy(x, y, reduction="none"),
    ),
    "ce_unbatched": ([f(5), const(3)], lambda F, lib, x, y: F.cross_entropy(x, y)),
    "nll_weight_ignore": (
        [f(5, 3), const([0, 2, 1, 1, 2]), const([0.2, 1.0, 3.0])],
        lambda F, lib, x, y, w: F.nll_loss(F.log_softmax(x, 1), y, w, ignore_index=1),
    ),
    "l1": ([f(3, 4), f(3, 4)], lambda F, lib, x, y: F.l1_loss(x, y)),
    "smooth_l1": ([f(3, 4), f(3, 4)], lambda F, lib, x, y: F.smooth_l1_loss(x, y, beta=0.5)),
    "huber": (
        [f(3, 4), f(3, 4)],
        lambda F, lib, x, y: F.huber_loss(x, y, reduction="sum", delta=0.7),
    ),
    "kl_div_batchmean": (
        [f(3, 4), f(3, 4)],
        lambda F, lib, x, y: F.kl_div(F.log_softmax(x, 1), F.softmax(y, 1), reduction="batchmean"),
    ),
    "kl_div_zero_target": (
        [f(2, 3), const([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0]])],
        lambda F, lib, x, y: F.kl_div(F.log_softmax(x, 1), y, reduction="sum"),
    ),
    "kl_div_log_target": (
        [f(3, 4), f(3, 4)],
        lambda F, lib, x, y: F.kl_div(x, F.log_softmax(y, 1), log_target=True),
    ),
    "bce_logits_pos_weight": (
        [f(3, 4), const(np.random.default_rng(9).random((3, 4))), const([1.0, 2.0, 0.5, 3.0])],
        lambda F, lib, x, y, pw: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw),
    ),
    "bce_logits_weight_pos_weight": (
        [
            f(3, 4),
            const(np.random.default_rng(9).random((3, 4))),
            const([1.0, 0.5, 2.0, 1.0]),
            const([2.0, 2.0, 0.5, 3.0]),
        ],
        lambda F, lib, x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw),
    ),
    "bce_weight": (
        [f(3, 4), const(np.random.default_rng(9).random((3, 4))), const([1.0, 2.0, 0.5, 3.0])],
        lambda F, lib, x, y, w: F.binary_cross_entropy(x.sigmoid(), y, w, reduction="sum"),
    ),
    "conv2d_same_dilation_groups": (
        [f(2, 4, 5, 6), f(6, 2, 3, 2), f(6)],
        lambda F, lib, x, w, b: F.conv2d(x, w, b, padding="same", dilation=(2, 1), groups=2),
    ),
    "conv2d_valid_stride_groups": (
        [f(1, 4, 7, 6), f(4, 1, 3, 3)],
        lambda F, lib, x, w: F.conv2d(x, w, None, stride=2, padding="valid", groups=4),
    ),
    "conv1d_same_dilation": (
        [f(2, 3, 9), f(4, 3, 3), f(4)],
        lambda F, lib, x, w, b: F.conv1d(x, w, b, padding="same", dilation=3),
    ),
    "conv_transpose2d": (
        [f(2, 4, 3, 4), f(4, 3, 3, 2), f(3)],
        lambda F, lib, x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
    ),
    "conv_transpose2d_groups_dilation": (
        [f(1, 4, 3, 3), f(4, 1, 2, 2)],
        lambda F, lib, x, w: F.conv_transpose2d(x, w, None, stride=(1, 2), groups=2, dilation=2),
    ),
    "max_pool2d_ceil": (
        [f(2, 2, 5, 7)],
        lambda F, lib, x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
    ),
    "avg_pool2d_ceil_no_pad_count": (
        [f(2, 2, 5, 7)],
        lambda F, lib, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
    ),
    "avg_pool2d_ceil": ([f(1, 2, 5, 5)], lambda F, lib, x: F.avg_pool2d(x, 2, ceil_mode=True)),
    "max_pool1d": ([f(2, 3, 9)], lambda F, lib, x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True)),
    "avg_pool1d": (
        [f(2, 3, 9)],
        lambda F, lib, x: F.avg_pool1d(x, 4, 2, 2, count_include_pad=False),
    ),
    "adaptive_avg_pool2d": ([f(2, 3, 7, 5)], lambda F, lib, x: F.adaptive_avg_pool2d(x, (3, 4))),
    "adaptive_avg_pool1d": ([f(2, 3, 7)], lambda F, lib, x: F.adaptive_avg_pool1d(x, 3)),
    "embedding_padding_idx": (
        [f(5, 3), const([[1, 2, 1], [4, 0, 2]])],
        lambda F, lib, w, idx: F.embedding(idx, w, padding_idx=2),
    ),
    "pad": ([f(2, 3, 4)], lambda F, lib, x: F.pad(x, (1, 2, 0, 3), value=0.5)),
}


def make_inputs(lib, specs, seed):
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        if spec[0] == "f":
            out.append(lib.tensor(rng.standard_normal(spec[1]), requires_grad=True))
        elif spec[0] == "i":
            out.append(lib.tensor(rng.integers(0, spec[1], spec[2])))
        else:
            out.append(lib.tensor(spec[1]))
    return out


def checksums(F, lib, name):
    """``sum(out * R)`` and the gradient checksum of ``CASES[name]`` on library ``lib``."""
    specs, fn = CASES[name]
    seed = zlib.crc32(name.encode())  # each case's own inputs, whatever the other cases
    inputs = make_inputs(lib, specs, seed)
    out = fn(F, lib, *inputs)
    rng = np.random.default_rng(1000 + seed)
    weighting = lib.tensor(rng.standard_normal(tuple(out.shape)))
    total = (out * weighting).sum()
    total.backward()
    grads = 0.0
    for x in inputs:
        if x.requires_grad:
            grads += float((x.grad.numpy() * rng.standard_normal(tuple(x.shape))).sum())
    return [float(total.item()), grads, list(out.shape)]


# Recorded from PyTorch 2.13.0 with `python tests/test_nn_pytorch_api.py --record`.
EXPECTED = {
    "adaptive_avg_pool1d": [-1.2062981965524695, -2.8520412389137357, [2, 3, 3]],
    "adaptive_avg_pool2d": [-3.3833654676497615, 0.6199863323516777, [2, 3, 3, 4]],
    "avg_pool1d": [0.19952411916619184, -2.105889196117407, [2, 3, 5]],
    "avg_pool2d_ceil": [3.17045222358221, -1.4019932516279408, [1, 2, 3, 3]],
    "avg_pool2d_ceil_no_pad_count": [-2.069738602326441, 4.5489381047975055, [2, 2, 3, 4]],
    "bce_logits_pos_weight": [0.2450017777291909, 0.0015050448141988339, []],
    "bce_logits_weight_pos_weight": [-1.1587128941209575, -0.336274752365347, []],
    "bce_weight": [50.46035628197301, -10.139525712224179, []],
    "ce_ignore_default": [-1.8820830549128025, 1.4242339830574438, []],
    "ce_none_ignore": [2.5933637336096234, 0.10365441414026208, [4]],
    "ce_probabilities": [0.7621789771547476, -0.40575406925559915, []],
    "ce_smoothing": [1.478468820697396, -0.9272675043000088, []],
    "ce_spatial": [1.9399433459056568, -0.07027752374816731, []],
    "ce_spatial_none": [-9.705897294587277, 0.1971882660995523, [2, 4]],
    "ce_unbatched": [2.069214468709683, 0.5313875344426655, []],
    "ce_weight": [-1.3841209500410554, 0.4145491452663875, []],
    "ce_weight_smoothing_ignore": [-2.417668030246041, -0.5867347000755119, []],
    "ce_weight_smoothing_sum": [4.947124468582542, -1.6014426510958537, []],
    "conv1d_same_dilation": [-4.398597065211442, -4.5496441260955915, [2, 4, 9]],
    "conv2d_same_dilation_groups": [-87.78855996220916, 38.87937487553017, [2, 6, 5, 6]],
    "conv2d_valid_stride_groups": [-12.766444363532228, -30.699541115931822, [1, 4, 3, 2]],
    "conv_transpose2d": [25.006400665168094, 100.65323007230943, [2, 3, 6, 7]],
    "conv_transpose2d_groups_dilation": [-0.06491813986635453, -22.25114039945114, [1, 2, 5, 7]],
    "elu": [-2.8168515707793893, 3.180251382277891, [3, 4]],
    "embedding_padding_idx": [-0.22130733541540826, -1.4508532002570949, [2, 3, 3]],
    "gelu": [0.7288391970301992, -1.981331666829007, [3, 4]],
    "gelu_tanh": [4.4889436490134935, 1.5372109955374478, [3, 4]],
    "huber": [4.180008427394623, 2.710482571652462, []],
    "kl_div_batchmean": [-1.5422467683934513, -0.7496087149779933, []],
    "kl_div_log_target": [-0.58224339470266, 0.25389716730387873, []],
    "kl_div_zero_target": [-3.9687201508085086, -0.9318943682541306, []],
    "l1": [-1.324641297592825, 0.12896782287536074, []],
    "leaky_relu": [-0.5697362216023827, 0.6950843400404904, [3, 4]],
    "max_pool1d": [-10.254857065127148, -4.4519099926881625, [2, 3, 5]],
    "max_pool2d_ceil": [-0.11784546358660553, -3.99220191164184, [2, 2, 3, 4]],
    "nll_weight_ignore": [-0.9087420126536262, -0.3407592703846462, []],
    "pad": [-2.162559334985034, -11.065609086105123, [2, 6, 7]],
    "silu": [2.6085507676150668, 1.9058821685091127, [3, 4]],
    "smooth_l1": [0.5311731534593519, 0.500104067489432, []],
    "softplus": [4.976905436724798, 7.0938178812058466, [3, 4]],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name):
    value, grads, shape = checksums(TF, tl, name)
    expected_value, expected_grads, expected_shape = EXPECTED[name]
    assert shape == expected_shape
    np.testing.assert_allclose(
        [value, grads], [expected_value, expected_grads], rtol=1e-10, atol=1e-12
    )


if __name__ == "__main__" and "--record" in sys.argv:
    import torch
    import torch.nn.functional as torch_F

    torch.set_default_dtype(torch.float64)
    for case in sorted(CASES):
        print(f"    {case!r}: {checksums(torch_F, torch, case)!r},")


# --------------------------------------------------------------------------- central differences
GRADCHECKED = [
    "ce_weight_smoothing_ignore", "ce_probabilities", "ce_spatial", "conv2d_same_dilation_groups",
    "conv_transpose2d_groups_dilation", "avg_pool2d_ceil_no_pad_count", "adaptive_avg_pool2d",
    "softplus", "elu", "bce_logits_weight_pos_weight", "kl_div_zero_target",
]  # fmt: skip


@pytest.mark.parametrize("name", GRADCHECKED)
def test_gradients_match_central_differences(name):
    specs, fn = CASES[name]
    inputs = make_inputs(tl, specs, zlib.crc32(name.encode()))
    grad_inputs = [x for x in inputs if x.requires_grad]

    def only(*xs):
        it = iter(xs)
        return fn(TF, tl, *[next(it) if x.requires_grad else x for x in inputs])

    assert gradcheck(only, *grad_inputs)


# --------------------------------------------------------------------------- losses: behaviour
def test_cross_entropy_ignores_minus_100_by_default_instead_of_raising():
    # before: IndexError "target -100 ... is out of bounds"; PyTorch skips it
    x = tl.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]], requires_grad=True)
    loss = TF.cross_entropy(x, tl.tensor([0, -100]))
    np.testing.assert_allclose(loss.item(), np.log(1 + np.exp(-2) + np.exp(-3)))  # by hand
    loss.backward()
    np.testing.assert_array_equal(x.grad.detach().numpy()[1], [0.0, 0.0, 0.0])
    assert np.isnan(TF.cross_entropy(x, tl.tensor([-100, -100])).item())  # 0/0, as PyTorch
    with pytest.raises(IndexError, match=r"target 7 \(at position 1\)"):
        TF.cross_entropy(x, tl.tensor([0, 7]))
    with pytest.raises(IndexError, match=r"target -1 \(at position 2\).*ignore_index=-100"):
        TF.cross_entropy(x.sum(0).expand(3, 3), tl.tensor([0, -100, -1]))
    with pytest.raises(TypeError, match="reduction='sum'"):
        TF.cross_entropy(x, tl.tensor([0, 1]), "sum")  # PyTorch's third argument is weight


def test_loss_modules_take_pytorchs_arguments():
    x, y = tl.randn(4, 3), tl.tensor([0, 2, 1, 1])
    w = tl.tensor([1.0, 2.0, 3.0])
    module = nn.CrossEntropyLoss(weight=w, ignore_index=1, label_smoothing=0.1)
    same = TF.cross_entropy(x, y, w, ignore_index=1, label_smoothing=0.1)
    assert module(x, y).item() == same.item() and "weight" in dict(module.named_buffers())
    assert nn.NLLLoss(reduction="sum")(x, y).item() == TF.nll_loss(x, y, reduction="sum").item()
    pw = tl.tensor([3.0, 1.0, 1.0])
    logits, target = tl.randn(2, 3), tl.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    assert (
        nn.BCEWithLogitsLoss(pos_weight=pw)(logits, target).item()
        == TF.binary_cross_entropy_with_logits(logits, target, pos_weight=pw).item()
    )
    with_ones = TF.binary_cross_entropy_with_logits(logits, target, pos_weight=tl.ones(3))
    np.testing.assert_allclose(
        with_ones.item(), TF.binary_cross_entropy_with_logits(logits, target).item(), rtol=1e-14
    )
    for cls in (nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss):
        assert cls()(x, x).item() == 0.0
    kl = nn.KLDivLoss(reduction="batchmean")(tl.zeros(2, 2), tl.ones(2, 2) * 0.5)
    np.testing.assert_allclose(kl.item(), np.log(0.5))  # by hand: 2 rows of 2 * 0.5 log 0.5, / 2


# --------------------------------------------------------------------------- layers
def test_conv_layers_with_new_options_have_pytorchs_shapes():
    x = tl.randn(2, 4, 6, 6)
    conv = nn.Conv2d(4, 8, 3, padding="same", dilation=2, groups=4)
    assert conv.weight.shape == (8, 1, 3, 3) and conv(x).shape == (2, 8, 6, 6)
    assert "dilation=(2, 2), groups=4" in repr(conv)
    assert nn.Conv2d(4, 2, 3, padding="valid")(x).shape == (2, 2, 4, 4)
    assert nn.Conv1d(4, 2, 3, padding="same", dilation=2)(tl.randn(4, 7)).shape == (2, 7)
    up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    assert up.weight.shape == (4, 3, 3, 3) and up(x).shape == (2, 6, 12, 12)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(4, 6, 3, groups=4)
    with pytest.raises(ValueError, match="stride 1"):
        nn.Conv2d(4, 6, 3, stride=2, padding="same")
    assert nn.MaxPool2d(2, ceil_mode=True)(tl.randn(1, 1, 5, 5)).shape == (1, 1, 3, 3)
    assert nn.AvgPool2d(3, 2, 1, count_include_pad=False)(tl.ones(1, 1, 4, 4)).tolist() == [
        [[[1.0, 1.0], [1.0, 1.0]]]
    ]  # every window averages only the ones inside the input
    assert nn.MaxPool1d(2)(tl.randn(3, 2, 8)).shape == (3, 2, 4)
    assert nn.AvgPool1d(3, 1, 1)(tl.randn(2, 8)).shape == (2, 8)
    assert nn.AdaptiveAvgPool2d(1)(x).shape == (2, 4, 1, 1)
    np.testing.assert_allclose(
        nn.AdaptiveAvgPool2d((1, 1))(x).detach().numpy()[..., 0, 0],
        x.detach().numpy().mean(axis=(2, 3)),
    )
    assert nn.AdaptiveAvgPool1d(2)(tl.randn(2, 3, 5)).shape == (2, 3, 2)


def test_activation_modules():
    x = tl.tensor([-2.0, 0.0, 3.0])
    assert nn.LeakyReLU(0.1)(x).tolist() == [-0.2, 0.0, 3.0]
    np.testing.assert_allclose(nn.ELU()(x).detach().numpy(), [np.exp(-2) - 1, 0.0, 3.0])
    np.testing.assert_allclose(
        nn.SiLU()(x).detach().numpy(), x.detach().numpy() / (1 + np.exp(-x.detach().numpy()))
    )
    np.testing.assert_allclose(
        nn.Softplus()(x).detach().numpy(), np.log1p(np.exp(x.detach().numpy()))
    )
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")
    big = tl.tensor([800.0, -800.0], requires_grad=True)  # no overflow, no nan gradient
    nn.ELU()(big).sum().backward()
    assert np.isfinite(big.grad.detach().numpy()).all()


def test_embedding_padding_idx_and_from_pretrained():
    emb = nn.Embedding(5, 3, padding_idx=-1)
    assert emb.padding_idx == 4 and emb.weight.detach().numpy()[4].tolist() == [0.0, 0.0, 0.0]
    emb(tl.tensor([4, 1, 4])).sum().backward()
    assert emb.weight.grad.detach().numpy()[4].tolist() == [0.0] * 3
    assert emb.weight.grad.detach().numpy()[1].tolist() == [1.0] * 3
    table = tl.tensor([[1.0, 2.0], [3.0, 4.0]])
    frozen = nn.Embedding.from_pretrained(table)
    assert not frozen.weight.requires_grad and frozen(tl.tensor([1])).tolist() == [[3.0, 4.0]]
    trainable = nn.Embedding.from_pretrained(table, freeze=False, padding_idx=0)
    assert trainable.weight.requires_grad and trainable(tl.tensor([0])).tolist() == [[1.0, 2.0]]
    table[0, 0] = 9.0  # from_pretrained copies the table
    assert trainable.weight.detach().numpy()[0, 0] == 1.0
    assert TF.embedding(tl.tensor([1, 0]), table).tolist() == [[3.0, 4.0], [9.0, 2.0]]


# --------------------------------------------------------------------------- containers and hooks
def test_module_list_dict_and_parameter_list_register_their_items():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 1)})
            self.extra = nn.ParameterList([tl.zeros(3), nn.Parameter(tl.ones(1))])
            self.named = nn.ParameterDict({"scale": tl.ones(1)})

    net = Net()
    assert list(net.state_dict()) == [
        "blocks.0.weight", "blocks.0.bias", "heads.a.weight", "heads.a.bias", "extra.0",
        "extra.1", "named.scale",
    ]  # fmt: skip
    assert len(list(net.parameters())) == 7 and all(p.requires_grad for p in net.parameters())
    net.blocks.append(nn.Linear(2, 3))
    net.blocks.insert(0, nn.Tanh())
    assert [type(m).__name__ for m in net.blocks] == ["Tanh", "Linear", "ReLU", "Linear"]
    del net.blocks[0]
    assert isinstance(net.blocks[-1], nn.Linear) and len(net.blocks[1:]) == 2
    assert "a" in net.heads and list(net.heads.keys()) == ["a"] and len(net.extra) == 2
    net.eval()
    assert not net.blocks[0].training
    with pytest.raises(IndexError, match="out of range"):
        net.blocks[7]
    with pytest.raises(NotImplementedError, match="iterate"):
        net.blocks(tl.zeros(2))


def test_forward_hooks_and_pre_hooks_follow_pytorch():
    layer = nn.Linear(3, 2)
    seen = []
    pre = layer.register_forward_pre_hook(lambda m, args: (args[0] * 0,))  # replaces the input
    post = layer.register_forward_hook(
        lambda m, args, out: seen.append((args[0].sum().item(), out.shape))
    )
    out = layer(tl.ones(4, 3))
    np.testing.assert_allclose(
        out.detach().numpy(), np.broadcast_to(layer.bias.detach().numpy(), (4, 2))
    )
    assert seen == [(0.0, (4, 2))]
    pre.remove()
    post.remove()
    layer(tl.ones(1, 3))
    assert len(seen) == 1
    with layer.register_forward_hook(lambda m, args, out: out + 1) as handle:
        assert handle is not None
        np.testing.assert_allclose(
            layer(tl.zeros(1, 3)).detach().numpy(), layer.bias.detach().numpy()[None] + 1
        )
    np.testing.assert_allclose(
        layer(tl.zeros(1, 3)).detach().numpy(), layer.bias.detach().numpy()[None]
    )


def test_unflatten_undoes_flatten():
    x = tl.randn(2, 3, 4)
    assert nn.Unflatten(1, (3, 4))(nn.Flatten()(x)).tolist() == x.tolist()
    assert nn.Unflatten(-1, (2, -1))(tl.zeros(3, 6)).shape == (3, 2, 3)
    with pytest.raises(ValueError, match="cannot be split"):
        nn.Unflatten(1, (4, 2))(tl.zeros(3, 6))


# --------------------------------------------------------------------------- nn.utils
def test_clip_grad_norm_and_value():
    a, b = nn.Parameter(tl.zeros(2)), nn.Parameter(tl.zeros(1))
    a.grad, b.grad = tl.tensor([3.0, 0.0]), tl.tensor([4.0])
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert total.item() == 5.0
    np.testing.assert_allclose(
        a.grad.detach().numpy(), [3 / (5 + 1e-6), 0.0]
    )  # max_norm / (norm + 1e-6)
    np.testing.assert_allclose(b.grad.detach().numpy(), [4 / (5 + 1e-6)])
    assert nn.utils.clip_grad_norm_([a, b], max_norm=10.0).item() < 1.0 + 1e-9  # no change
    np.testing.assert_allclose(b.grad.detach().numpy(), [4 / (5 + 1e-6)])
    a.grad = tl.tensor([-3.0, 0.5])
    assert nn.utils.clip_grad_norm_(a, 1.0, norm_type=float("inf")).item() == 3.0
    a.grad = tl.tensor([-3.0, 0.5])
    nn.utils.clip_grad_value_([a, b], 0.6)
    assert a.grad.tolist() == [-0.6, 0.5]
    a.grad = tl.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="error_if_nonfinite"):
        nn.utils.clip_grad_norm_(a, 1.0, error_if_nonfinite=True)


def test_parameters_to_vector_and_back():
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    vec = nn.utils.parameters_to_vector(model.parameters())
    assert vec.shape == (13,) and vec.requires_grad
    nn.utils.vector_to_parameters(tl.arange(13.0), model.parameters())
    assert model[0].weight.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert model[1].bias.tolist() == [12.0] and model[1].bias.requires_grad
    with pytest.raises(ValueError, match="12 elements, the parameters 13"):
        nn.utils.vector_to_parameters(tl.zeros(12), model.parameters())
