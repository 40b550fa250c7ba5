"""Checkpoints: round trip, atomic writes (a writer killed mid-write), and loading bad files
gives a clear error and changes nothing."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import torchlight as tl
from torchlight import nn, optim
from torchlight.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def make(seed: int = 0) -> tuple[nn.Module, optim.Optimizer]:
    tl.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    return model, optim.Adam(model.parameters(), lr=0.01)


def train_steps(model: nn.Module, opt: optim.Optimizer, steps: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x, y = tl.tensor(rng.standard_normal((16, 4))), tl.tensor(rng.integers(0, 3, 16))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def snapshot(model: nn.Module, opt: optim.Optimizer) -> dict[str, np.ndarray]:
    out = {f"model.{k}": v.numpy().copy() for k, v in model.state_dict().items()}
    for i, state in opt.state_dict()["state"].items():
        for name, value in state.items():
            out[f"opt.{i}.{name}"] = np.array(
                value.numpy() if isinstance(value, tl.Tensor) else value
            )
    return out


def assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_round_trip_restores_model_optimizer_and_extra(tmp_path):
    model, opt = make()
    train_steps(model, opt, 3)
    path = tmp_path / "run.ckpt"
    save_checkpoint(path, model, opt, epoch=3, note="hello", rng={"state": 2**100})
    other, other_opt = make(seed=1)
    extra = load_checkpoint(path, other, other_opt)
    assert extra == {"epoch": 3, "note": "hello", "rng": {"state": 2**100}}
    assert_same(snapshot(model, opt), snapshot(other, other_opt))
    # both continue identically
    train_steps(model, opt, 2, seed=9)
    train_steps(other, other_opt, 2, seed=9)
    assert_same(snapshot(model, opt), snapshot(other, other_opt))
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_file_is_a_plain_npz_without_pickles(tmp_path):
    model, opt = make()
    train_steps(model, opt, 1)
    path = tmp_path / "run.ckpt"
    save_checkpoint(path, model, opt)
    with np.load(path, allow_pickle=False) as npz:  # loads without pickle support
        assert "model/0.weight" in npz.files and "optimizer/0/exp_avg" in npz.files
    assert oct(path.stat().st_mode & 0o777) != oct(0o600)  # not left with mkstemp's private mode


def test_model_only_checkpoint_and_extra_must_be_json(tmp_path):
    model, _ = make()
    save_checkpoint(tmp_path / "m.ckpt", model)
    fresh, fresh_opt = make(seed=2)
    load_checkpoint(tmp_path / "m.ckpt", fresh)
    assert_same(
        {k: v.numpy() for k, v in model.state_dict().items()},
        {k: v.numpy() for k, v in fresh.state_dict().items()},
    )
    with pytest.raises(CheckpointError, match="no optimizer state"):
        load_checkpoint(tmp_path / "m.ckpt", fresh, fresh_opt)
    with pytest.raises(TypeError, match="JSON"):
        save_checkpoint(tmp_path / "x.ckpt", model, epoch=object())
    assert not (tmp_path / "x.ckpt").exists()


def corruptions(good: bytes) -> dict[str, bytes]:
    middle = len(good) // 2
    flipped = bytearray(good)
    flipped[middle] ^= 0xFF
    return {
        "truncated": good[:middle],
        "empty": b"",
        "flipped byte": bytes(flipped),
        "random bytes": np.random.default_rng(0).bytes(len(good)),
        "a pickle": pickle.dumps({"model": [1, 2, 3]}),
    }


@pytest.mark.parametrize("kind", ["truncated", "empty", "flipped byte", "random bytes", "a pickle"])
def test_corrupt_files_raise_a_clear_error_and_change_nothing(tmp_path, kind):
    model, opt = make()
    train_steps(model, opt, 2)
    good = tmp_path / "good.ckpt"
    save_checkpoint(good, model, opt)
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(corruptions(good.read_bytes())[kind])
    target, target_opt = make(seed=5)
    train_steps(target, target_opt, 1)
    before = snapshot(target, target_opt)
    with pytest.raises(CheckpointError, match="bad.ckpt"):
        load_checkpoint(bad, target, target_opt)
    assert_same(before, snapshot(target, target_opt))


def test_object_arrays_are_refused_not_unpickled(tmp_path):
    path = tmp_path / "evil.ckpt"
    np.savez(path.open("wb"), __header__=np.array([{"x": 1}], dtype=object))
    with pytest.raises(CheckpointError, match="not a valid torchlight checkpoint"):
        load_checkpoint(path, nn.Linear(2, 2))


def test_a_zip_that_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, weights=np.zeros(3))
    with pytest.raises(CheckpointError, match="not a torchlight checkpoint"):
        load_checkpoint(path, nn.Linear(2, 2))
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.ckpt", nn.Linear(2, 2))
    tampered = tmp_path / "tampered.ckpt"
    save_checkpoint(tampered, nn.Linear(2, 2))
    with zipfile.ZipFile(tampered, "a") as z:
        z.writestr("sneaky.npy", b"")
    with pytest.raises(CheckpointError):
        load_checkpoint(tampered, nn.Linear(2, 2))


def test_mismatched_model_or_optimizer_raise_and_change_nothing(tmp_path):
    model, opt = make()
    train_steps(model, opt, 1)
    path = tmp_path / "run.ckpt"
    save_checkpoint(path, model, opt)

    wider = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    wider_opt = optim.Adam(wider.parameters())
    before = snapshot(wider, wider_opt)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, wider, wider_opt)
    assert "size mismatch for 0.weight" in str(info.value) and "(8, 4)" in str(info.value)
    assert_same(before, snapshot(wider, wider_opt))

    deeper = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Linear(3, 3))
    with pytest.raises(CheckpointError, match='missing key "3.weight"'):
        load_checkpoint(path, deeper)

    same, _ = make(seed=3)
    sgd = optim.SGD(same.parameters(), lr=0.1)
    before = snapshot(same, sgd)
    with pytest.raises(CheckpointError, match="Adam optimizer, not of a SGD"):
        load_checkpoint(path, same, sgd)
    assert_same(before, snapshot(same, sgd))  # the model was not loaded either


WRITER = textwrap.dedent(
    """
    import sys
    import torchlight as tl
    from torchlight import nn
    from torchlight.train.checkpoint import save_checkpoint
    model = nn.Linear(1000, 2000)  # 16 MB of float64: each write takes a while
    value = 1.0
    while True:
        with tl.no_grad():
            for p in model.parameters():
                p.fill_(value)
        save_checkpoint(sys.argv[1], model, value=value)
        value += 1.0
    """
)


def writing(directory: Path) -> bool:
    """Whether a temporary checkpoint file with some bytes in it exists right now."""
    for temp in directory.glob(".live.ckpt.*.tmp"):
        try:
            if temp.stat().st_size > 0:
                return True
        except FileNotFoundError:  # renamed in the meantime
            pass
    return False


def test_a_writer_killed_mid_write_leaves_a_complete_checkpoint(tmp_path):
    path = tmp_path / "live.ckpt"
    old = nn.Linear(1000, 2000)
    with tl.no_grad():
        for p in old.parameters():
            p.fill_(-1.0)
    save_checkpoint(path, old, value=-1.0)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        # kill it while a temporary file is being written (after a few complete writes)
        while time.monotonic() < deadline:
            # kill it while it writes (after it has replaced the file a few times)
            if load_checkpoint(path, nn.Linear(1000, 2000))["value"] >= 2.0 and writing(tmp_path):
                os.kill(writer.pid, signal.SIGKILL)
                break
            time.sleep(0.001)
        else:
            pytest.fail("the writer never got going")
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == -signal.SIGKILL
    assert list(tmp_path.glob(".live.ckpt.*.tmp")), "the kill should have interrupted a write"
    model = nn.Linear(1000, 2000)
    value = load_checkpoint(path, model)["value"]  # complete and valid
    assert value >= 2.0
    for p in model.parameters():
        assert np.all(p.detach().numpy() == value)  # every array from the same save
