"""Issue 25: the PyTorch APIs real programs use, each checked against PyTorch itself (CPU, the
dev extra) and against values worked out by hand."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torchlight as tl  # noqa: E402
from torchlight.utils import data as tdata  # noqa: E402


@pytest.fixture
def float64_torch():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def port(t_module, l_module):
    l_module.load_state_dict(
        {k: tl.tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()}
    )


# ---------------------------------------------------------------- random


def test_randint_both_forms_and_randperm_and_generator():
    assert tl.randint(10, (2, 3)).shape == (2, 3) and tl.randint(10, (2, 3)).dtype is tl.int64
    values = tl.randint(3, 5, size=(1000,)).numpy()
    assert set(values.tolist()) == {3, 4}  # [low, high)
    with pytest.raises(RuntimeError, match="low < high"):
        tl.randint(5, 5, (2,))
    with pytest.raises(TypeError, match="size tuple"):
        tl.randint(5)
    assert sorted(tl.randperm(6).tolist()) == list(range(6))
    g1, g2 = tl.Generator().manual_seed(3), tl.Generator().manual_seed(3)
    assert tl.randperm(8, generator=g1).tolist() == tl.randperm(8, generator=g2).tolist()
    assert g1.initial_seed() == 3
    state = g1.get_state()
    a = tl.randint(100, (5,), generator=g1).tolist()
    g1.set_state(state)
    assert tl.randint(100, (5,), generator=g1).tolist() == a
    with pytest.raises(TypeError, match="pin_memory"):
        tl.randperm(3, pin_memory=True)


def test_multinomial_frequencies_and_rules_as_pytorch():
    probs = tl.tensor([[0.1, 0.0, 0.9], [1.0, 1.0, 2.0]])  # weights need not sum to 1
    draws = tl.multinomial(probs, 4000, replacement=True, generator=tl.Generator().manual_seed(0))
    assert draws.shape == (2, 4000) and draws.dtype is tl.int64
    freq0 = np.bincount(draws[0].numpy(), minlength=3) / 4000
    freq1 = np.bincount(draws[1].numpy(), minlength=3) / 4000
    assert freq0[1] == 0 and abs(freq0[2] - 0.9) < 0.03 and abs(freq1[2] - 0.5) < 0.03
    no_repeat = tl.multinomial(tl.tensor([1.0, 1.0, 1.0, 1.0]), 4)
    assert sorted(no_repeat.tolist()) == [0, 1, 2, 3]
    for bad, match in [
        (tl.tensor([1.0, -1.0]), "element < 0"),
        (tl.zeros(3), "sum of probabilities"),
    ]:
        with pytest.raises(RuntimeError, match=match):
            tl.multinomial(bad, 1)
        with pytest.raises(RuntimeError):
            torch.multinomial(torch.tensor(bad.numpy()), 1)
    # without replacement, zero weights come last (PyTorch's rule); more than n categories raise
    assert tl.multinomial(tl.tensor([0.0, 1.0, 0.0]), 3).tolist()[0] == 1
    assert torch.multinomial(torch.tensor([0.0, 1.0, 0.0]), 3).tolist()[0] == 1
    with pytest.raises(RuntimeError, match="without replacement"):
        tl.multinomial(tl.tensor([1.0, 0.0]), 3)
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.tensor([1.0, 0.0]), 3)


# ---------------------------------------------------------------- tensor methods


def test_tensor_methods_as_pytorch():
    x = np.arange(6.0).reshape(2, 3)
    t, l = torch.tensor(x), tl.tensor(x)
    assert f"{l.sum():.3f}" == f"{t.sum():.3f}" == "15.000"
    assert f"{l[0, 1]:+.2f}" == f"{t[0, 1]:+.2f}" == "+1.00"
    assert f"{l}" == str(l)
    with pytest.raises(TypeError, match="only a 0-d tensor"):
        f"{l:.2f}"
    with pytest.raises(TypeError):
        f"{t:.2f}"
    np.testing.assert_array_equal(l.mm(l.T).numpy(), t.mm(t.T).numpy())
    with pytest.raises(RuntimeError, match="2-d"):
        l.mm(l[0])
    assert l.nelement() == t.nelement() == 6
    assert l.is_cuda is t.is_cuda is False
    assert l.type() == t.type() == "torch.DoubleTensor"
    assert l.type(tl.float32).dtype is tl.float32 and l.type("torch.LongTensor").dtype is tl.int64
    assert l.type_as(tl.zeros(1, dtype=tl.int64)).dtype is tl.int64
    np.testing.assert_array_equal(tl.pow(l, 2).numpy(), torch.pow(t, 2).numpy())
    np.testing.assert_array_equal(tl.pow(2, l).numpy(), torch.pow(2, t).numpy())
    assert tl.LongTensor([1, 2]).dtype is tl.int64 and tl.LongTensor(2, 3).shape == (2, 3)
    assert tl.FloatTensor([1.5]).dtype is tl.float32


def test_tensors_pickle_and_deepcopy_onto_the_same_backend():
    import copy

    p = tl.nn.Parameter(tl.tensor([1.0, 2.0]))
    for clone in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(clone) is tl.nn.Parameter and clone.requires_grad
        assert clone.backend is p.backend  # a second backend instance made every op refuse
        assert (clone + p).tolist() == [2.0, 4.0]
    layer = copy.deepcopy(tl.nn.Linear(2, 1))
    assert layer(tl.ones(2)).shape == (1,)


# ---------------------------------------------------------------- dtypes


@pytest.mark.parametrize(
    "build, shape",
    [
        (lambda fw: fw.nn.Linear(4, 2), (3, 4)),
        (lambda fw: fw.nn.Conv2d(3, 2, 3), (1, 3, 5, 5)),
        (lambda fw: fw.nn.ConvTranspose2d(3, 2, 3), (1, 3, 5, 5)),
        (lambda fw: fw.nn.LSTM(4, 2), (3, 1, 4)),
        (lambda fw: fw.nn.GRU(4, 2), (3, 1, 4)),
        (lambda fw: fw.nn.LSTMCell(4, 2), (3, 4)),
        (lambda fw: fw.nn.LayerNorm(4), (3, 4)),
        (lambda fw: fw.nn.BatchNorm1d(4), (3, 4)),
        (lambda fw: fw.nn.GroupNorm(1, 3), (2, 3, 4)),
    ],
)
def test_float32_data_into_a_float64_model_raises_in_every_layer_as_pytorch(
    float64_torch, build, shape
):
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    with pytest.raises((RuntimeError, ValueError)):
        build(torch)(torch.tensor(x))
    with pytest.raises(
        RuntimeError, match="float32 and torchlight.float64|float64 and torchlight.float32"
    ):
        build(tl)(tl.tensor(x))
    # the same layer on the right dtype works, and elementwise ops still promote, as PyTorch's
    assert build(tl)(tl.tensor(x.astype(np.float64))) is not None
    assert (tl.ones(2) + tl.ones(2, dtype=tl.float32)).dtype is tl.float64


def test_set_default_dtype_float32_makes_the_whole_library_float32():
    tl.set_default_dtype(tl.float32)
    try:
        model = tl.nn.Sequential(tl.nn.Linear(3, 4), tl.nn.LayerNorm(4))
        lstm = tl.nn.LSTM(4, 2)
        assert all(p.dtype is tl.float32 for p in [*model.parameters(), *lstm.parameters()])
        x = tl.tensor(np.ones((2, 3), dtype=np.float32))
        out, _ = lstm(model(x).unsqueeze(1))
        assert (
            out.dtype is tl.float32
            and tl.tensor([1.0]).dtype is tl.float32
            and tl.randn(2).dtype is tl.float32
        )
    finally:
        tl.set_default_dtype(tl.float64)


def test_half_dtypes_and_autocast_name_what_is_missing():
    with pytest.raises(TypeError, match="float16"):
        tl.zeros(2, dtype=tl.float16)
    with pytest.raises(NotImplementedError, match="float16/bfloat16"):
        tl.autocast(device_type="cpu", dtype=tl.bfloat16)
    with tl.autocast(device_type="cpu", enabled=False):  # what scripts pass on the CPU
        assert (tl.ones(2) * 2).dtype is tl.float64
    with pytest.warns(UserWarning, match="Disabling autocast"):
        tl.amp.autocast("cpu", dtype=tl.float32)


def test_grad_scaler_scales_skips_and_backs_off_as_pytorch():
    runs = []
    for fw in (torch, tl):
        w = fw.nn.Parameter(fw.tensor([1.0, 2.0], dtype=fw.float64))
        opt = fw.optim.SGD([w], lr=0.1)
        scaler = fw.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
        trace = []
        for i in range(5):
            opt.zero_grad()
            loss = (w * w).sum() * (float("inf") if i == 1 else 1.0)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            trace.append((scaler.get_scale(), *w.detach().numpy().tolist()))
        runs.append(trace)
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-12)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert not tl.amp.GradScaler().is_enabled()  # as torch.cuda.amp.GradScaler() on a CPU


# ---------------------------------------------------------------- nn


def test_batchnorm_state_dict_from_pytorch_loads_with_num_batches_tracked(float64_torch):
    t_bn, l_bn = torch.nn.BatchNorm1d(3), tl.nn.BatchNorm1d(3)
    x = np.random.default_rng(0).normal(size=(4, 3))
    for _ in range(3):
        t_bn(torch.tensor(x))
        l_bn(tl.tensor(x))
    assert list(l_bn.state_dict()) == list(t_bn.state_dict())
    assert l_bn.num_batches_tracked.item() == t_bn.num_batches_tracked.item() == 3
    fresh = tl.nn.BatchNorm1d(3)
    port(t_bn, fresh)
    np.testing.assert_allclose(fresh.running_var.numpy(), t_bn.running_var.numpy())
    t_cum, l_cum = torch.nn.BatchNorm1d(3, momentum=None), tl.nn.BatchNorm1d(3, momentum=None)
    for k in range(3):  # momentum=None: the cumulative average of the batches' statistics
        t_cum(torch.tensor(x + k))
        l_cum(tl.tensor(x + k))
    np.testing.assert_allclose(l_cum.running_mean.numpy(), t_cum.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(l_cum.running_mean.numpy(), x.mean(0) + 1.0, rtol=1e-12)


def test_non_persistent_buffers_and_inplace_activations(float64_torch):
    class M(tl.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mask", tl.ones(2), persistent=False)
            self.register_buffer("kept", tl.ones(2))

    assert list(M().state_dict()) == ["kept"] and hasattr(M(), "mask")
    x = np.array([-1.0, 2.0, -3.0])
    for name, kw in [("ReLU", {}), ("LeakyReLU", {"negative_slope": 0.1})]:
        t_in = torch.tensor(x, requires_grad=True) * 1.0
        l_in = tl.tensor(x, requires_grad=True) * 1.0
        t_out = getattr(torch.nn, name)(inplace=True, **kw)(t_in)
        l_out = getattr(tl.nn, name)(inplace=True, **kw)(l_in)
        np.testing.assert_allclose(
            l_in.detach().numpy(), t_in.detach().numpy()
        )  # input overwritten
        np.testing.assert_allclose(l_out.detach().numpy(), t_out.detach().numpy())
    assert repr(tl.nn.ReLU(inplace=True)) == repr(torch.nn.ReLU(inplace=True))


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_match_pytorch(float64_torch, name):
    t_cell, l_cell = getattr(torch.nn, name)(3, 4), getattr(tl.nn, name)(3, 4)
    assert sorted(t_cell.state_dict()) == sorted(l_cell.state_dict())
    port(t_cell, l_cell)
    x = np.random.default_rng(0).normal(size=(2, 3))
    tx, lx = torch.tensor(x, requires_grad=True), tl.tensor(x, requires_grad=True)
    t_out, l_out = t_cell(tx), l_cell(lx)
    if name == "LSTMCell":
        t_out, l_out = t_out[0] * t_out[1], l_out[0] * l_out[1]
        t2 = t_cell(tx, [t_out, t_out])[0]  # hx as a list
        l2 = l_cell(lx, [l_out, l_out])[0]
        np.testing.assert_allclose(l2.detach().numpy(), t2.detach().numpy(), atol=1e-14)
    (t_out**2).sum().backward()
    (l_out**2).sum().backward()
    np.testing.assert_allclose(l_out.detach().numpy(), t_out.detach().numpy(), atol=1e-14)
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), atol=1e-14)
    for k, p in t_cell.named_parameters():
        np.testing.assert_allclose(
            dict(l_cell.named_parameters())[k].grad.numpy(), p.grad.numpy(), atol=1e-14
        )


def test_lstm_hx_as_list_and_flatten_parameters(float64_torch):
    t_lstm, l_lstm = torch.nn.LSTM(3, 2), tl.nn.LSTM(3, 2)
    port(t_lstm, l_lstm)
    t_lstm.flatten_parameters()
    l_lstm.flatten_parameters()
    x, h = np.ones((4, 1, 3)), np.full((1, 1, 2), 0.5)
    t_out, _ = t_lstm(torch.tensor(x), [torch.tensor(h), torch.tensor(h)])
    l_out, _ = l_lstm(tl.tensor(x), [tl.tensor(h), tl.tensor(h)])
    np.testing.assert_allclose(l_out.detach().numpy(), t_out.detach().numpy(), atol=1e-14)


def test_pixel_shuffle_transformer_and_orthogonal_match_pytorch(float64_torch):
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float64).reshape(2, 8, 2, 3)
    np.testing.assert_array_equal(
        tl.nn.PixelShuffle(2)(tl.tensor(x)).numpy(),
        torch.nn.PixelShuffle(2)(torch.tensor(x)).numpy(),
    )
    # by hand: channel block (c*4 + i*2 + j) lands at pixel (h*2 + i, w*2 + j)
    assert tl.nn.functional.pixel_shuffle(tl.tensor(x), 2)[0, 0, 1, 0].item() == x[0, 2, 0, 0]
    np.testing.assert_array_equal(
        tl.nn.functional.pixel_unshuffle(
            tl.nn.functional.pixel_shuffle(tl.tensor(x), 2), 2
        ).numpy(),
        x,
    )
    t_tr = torch.nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)
    l_tr = tl.nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)
    assert sorted(t_tr.state_dict()) == sorted(l_tr.state_dict())
    port(t_tr, l_tr)
    rng = np.random.default_rng(0)
    src, tgt = rng.normal(size=(5, 2, 8)), rng.normal(size=(4, 2, 8))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(
        tl.nn.Transformer.generate_square_subsequent_mask(4).numpy(), mask.numpy()
    )
    t_out = t_tr(torch.tensor(src), torch.tensor(tgt), tgt_mask=mask)
    l_out = l_tr(tl.tensor(src), tl.tensor(tgt), tgt_mask=tl.tensor(mask.numpy()))
    np.testing.assert_allclose(l_out.detach().numpy(), t_out.detach().numpy(), atol=1e-12)
    w = tl.nn.init.orthogonal_(tl.empty(3, 5), gain=2.0)
    np.testing.assert_allclose(w.numpy() @ w.numpy().T, 4 * np.eye(3), atol=1e-12)


def test_legacy_loss_keywords_and_dropout2d_on_2d_input():
    for kw, reduction in [
        ({"size_average": False}, "sum"),
        ({"reduce": False}, "none"),
        ({"size_average": True}, "mean"),
    ]:
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            loss = tl.nn.MSELoss(**kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert loss.reduction == torch.nn.MSELoss(**kw).reduction == reduction
    with pytest.warns(UserWarning):
        assert tl.nn.CrossEntropyLoss(size_average=False).reduction == "sum"
    x = tl.ones(6, 5)
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        out = tl.nn.Dropout2d(0.5)(x).numpy()
    assert all(
        set(row.tolist()) <= {0.0} or set(row.tolist()) == {2.0} for row in out
    )  # whole rows


def test_optimizers_adadelta_and_lbfgs_match_pytorch(float64_torch):
    rng = np.random.default_rng(0)
    X, Y, W0 = rng.normal(size=(20, 3)), rng.normal(size=(20, 2)), rng.normal(size=(2, 3))
    for name, kw in [
        ("Adadelta", {"lr": 0.5, "weight_decay": 0.1}),
        ("LBFGS", {"lr": 0.8, "history_size": 3, "max_iter": 6}),
    ]:
        finals = []
        for fw in (torch, tl):
            w = fw.tensor(W0.copy(), requires_grad=True)
            opt = getattr(fw.optim, name)([w], **kw)

            def closure(fw=fw, w=w, opt=opt):
                opt.zero_grad()
                loss = ((fw.tensor(X) @ w.T - fw.tensor(Y)) ** 2).mean() + 0.01 * (w**4).sum()
                loss.backward()
                return loss

            for _ in range(3):
                opt.step(closure)
            finals.append(w.detach().numpy())
        np.testing.assert_allclose(finals[1], finals[0], rtol=1e-10, atol=1e-12, err_msg=name)
    # by hand: Adadelta's first step is lr * sqrt(eps) / sqrt((1 - rho) g^2 + eps) * g
    w = tl.nn.Parameter(tl.tensor([1.0]))
    opt = tl.optim.Adadelta([w])
    (w * w).sum().backward()
    opt.step()
    assert abs(w.item() - (1 - np.sqrt(1e-6) / np.sqrt(0.1 * 4 + 1e-6) * 2)) < 1e-15
    with pytest.raises(NotImplementedError, match="strong_wolfe"):
        tl.optim.LBFGS([w], line_search_fn="strong_wolfe")


# ---------------------------------------------------------------- save / load


def test_save_load_file_objects_numpy_and_whole_modules(tmp_path):
    buffer = io.BytesIO()
    tl.save({"w": tl.ones(2), "a": np.arange(3)}, buffer)
    buffer.seek(0)
    back = tl.load(buffer)
    assert back["w"].tolist() == [1.0, 1.0] and isinstance(back["a"], np.ndarray)
    with open(tmp_path / "data.pt", "wb") as f:  # time_sequence_prediction's way
        tl.save(np.linspace(0, 1, 4), f)
    np.testing.assert_array_equal(tl.load(tmp_path / "data.pt"), np.linspace(0, 1, 4))
    model = tl.nn.Linear(2, 1)
    tl.save(model, tmp_path / "model.pt")
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        tl.load(tmp_path / "model.pt")
    again = tl.load(tmp_path / "model.pt", weights_only=False)
    assert again(tl.ones(2)).item() == model(tl.ones(2)).item()
    with pytest.raises(TypeError, match="mmap"):
        tl.load(tmp_path / "data.pt", mmap=True)


# ---------------------------------------------------------------- utils.data


class Squares(tdata.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        info = tdata.get_worker_info()
        return tl.tensor([float(i * i)]), i, os.getpid(), -1 if info is None else info.id


def test_dataloader_worker_processes_give_the_batches_of_one_process():
    plain = [(x.tolist(), y.tolist()) for x, y, _, _ in tdata.DataLoader(Squares(), batch_size=3)]
    loader = tdata.DataLoader(Squares(), batch_size=3, num_workers=2)
    batches = list(loader)
    assert [(x.tolist(), y.tolist()) for x, y, _, _ in batches] == plain
    pids = {pid for _, _, p, _ in batches for pid in p.tolist()}
    assert len(pids) == 2 and os.getpid() not in pids  # two real worker processes
    assert {w for _, _, _, ids in batches for w in ids.tolist()} == {0, 1}
    assert len(loader) == 4 and len(tdata.DataLoader(Squares(), batch_size=3, drop_last=True)) == 3


def test_dataloader_shuffle_generator_samplers_and_errors():
    def order(**kw):
        return [y.tolist() for _, y, _, _ in tdata.DataLoader(Squares(), batch_size=4, **kw)]

    a = order(shuffle=True, generator=tl.Generator().manual_seed(1))
    assert a == order(shuffle=True, generator=tl.Generator().manual_seed(1), num_workers=2)
    assert sorted(sum(a, [])) == list(range(10)) and a != order()
    sampler = tdata.RandomSampler(range(10), replacement=True, num_samples=10**10)
    assert len(sampler) == 10**10 and all(
        0 <= i < 10 for _, i in zip(range(50), sampler, strict=False)
    )  # lazy
    assert list(tdata.BatchSampler(tdata.SequentialSampler(range(5)), 2, drop_last=True)) == [
        [0, 1],
        [2, 3],
    ]
    weighted = list(tdata.WeightedRandomSampler([0.0, 1.0, 0.0], 5))
    assert weighted == [1] * 5
    batches = list(tdata.DataLoader(Squares(), batch_sampler=[[0, 9], [3]]))
    assert [y.tolist() for _, y, _, _ in batches] == [[0, 9], [3]]
    assert [
        len(s) for s in tdata.random_split(range(10), [0.7, 0.3], generator=tl.Generator())
    ] == [7, 3]
    with pytest.warns(UserWarning, match="pin_memory"):
        tdata.DataLoader(Squares(), pin_memory=True)
    with pytest.raises(ValueError, match="mutually exclusive"):
        tdata.DataLoader(Squares(), sampler=sampler, shuffle=True)
    with pytest.raises(TypeError, match="unexpected keyword"):
        tdata.DataLoader(Squares(), num_worker=2)


class Broken(Squares):
    def __getitem__(self, i):
        if i == 5:
            raise KeyError("sample 5 is missing")
        return super().__getitem__(i)


def test_an_error_in_a_worker_is_raised_with_its_traceback():
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process"):
        list(tdata.DataLoader(Broken(), batch_size=2, num_workers=2))


class Stream(tdata.IterableDataset):
    def __iter__(self):
        info = tdata.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(tl.tensor([float(i)]) for i in range(start, 8, step))


def test_iterable_dataset_split_between_workers():
    one = sorted(sum((b.flatten().tolist() for b in tdata.DataLoader(Stream(), batch_size=2)), []))
    two = sorted(
        sum(
            (b.flatten().tolist() for b in tdata.DataLoader(Stream(), batch_size=2, num_workers=2)),
            [],
        )
    )
    assert one == two == [float(i) for i in range(8)]


# ---------------------------------------------------------------- the shim and the stubs


def test_compat_shim_runs_a_script_that_imports_torch(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import torch, torch.nn as nn, torch.nn.functional as F, torch.optim as optim\n"
        "import torch.utils.data, torch.nn.parallel, torch.distributed as dist\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "import torch.backends.cudnn as cudnn\n"
        "cudnn.benchmark = True\n"
        "torch.cuda.manual_seed_all(0)\n"
        "assert not torch.accelerator.is_available() and not dist.is_available()\n"
        "assert not torch.backends.mps.is_available()\n"
        "print(torch.__name__, nn.Linear.__module__, DataLoader.__module__, torch.cuda.amp.GradScaler.__module__)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    done = subprocess.run(
        [sys.executable, "-m", "torchlight.compat", str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "torchlight", "torchlight.nn.linear", "torchlight.utils.data.dataloader", "torchlight.amp",
    ]  # fmt: skip
    missing = subprocess.run(
        [sys.executable, "-c", "import torchlight.compat; import torch.nosuchmodule"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert (
        "No module named 'torch.nosuchmodule'" in missing.stderr
        and "torchlight.nosuchmodule" in missing.stderr
    )


def test_the_shim_refuses_to_mix_with_a_real_pytorch():
    import torchlight.compat as compat

    with pytest.raises(RuntimeError, match="real PyTorch is already imported"):
        compat.install()


def test_distributed_and_data_parallel_behave_as_pytorch_cpu():
    model = tl.nn.Linear(2, 1)
    wrapped = tl.nn.DataParallel(model)
    assert wrapped(tl.ones(2)).item() == model(tl.ones(2)).item()
    assert list(wrapped.state_dict()) == list(
        torch.nn.DataParallel(torch.nn.Linear(2, 1)).state_dict()
    )
    with pytest.raises(ValueError, match="process group"):
        tl.nn.parallel.DistributedDataParallel(model)
    with pytest.raises(RuntimeError, match="no distributed training"):
        tl.distributed.init_process_group("gloo")
