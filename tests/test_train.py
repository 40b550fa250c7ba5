"""``python -m torchlight.train``: the accuracy targets with the default settings, NaN handling,
saving and resuming, and usage errors. The default runs start together (2 cores)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from torchlight import nn
from torchlight.checkpoint import load_checkpoint
from torchlight.train import build_model

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# (flags, which accuracy the last line reports, the target)
DEFAULT_RUNS = {
    "digits-mlp": ([], "test", 0.95),
    "digits-cnn": (["--model", "cnn"], "test", 0.97),
    "spiral-mlp": (["--dataset", "spiral"], "train", 0.95),
    "xor-mlp": (["--dataset", "xor"], "train", 0.95),
}


def start(args: list[str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "torchlight.train", *args]
    return subprocess.Popen(
        command, cwd=ROOT, env=ENV, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def run(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "torchlight.train", *args]
    return subprocess.run(
        command, cwd=ROOT, env=ENV, text=True, capture_output=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def default_runs() -> dict[str, tuple[int, str, str]]:
    """Every default run, started at once; name -> (exit status, stdout, stderr)."""
    processes = {name: start(flags) for name, (flags, _, _) in DEFAULT_RUNS.items()}
    results = {}
    for name, process in processes.items():
        out, err = process.communicate(timeout=600)
        results[name] = (process.returncode, out, err)
    return results


@pytest.mark.parametrize("name", sorted(DEFAULT_RUNS))
def test_default_run_reaches_its_accuracy_target(default_runs, name):
    status, out, err = default_runs[name]
    assert status == 0, err
    _, which, target = DEFAULT_RUNS[name]
    last = out.strip().splitlines()[-1]
    match = re.fullmatch(rf"{which} accuracy: ([\d.]+)% \((\d+)/(\d+)\)", last)
    assert match, f"unexpected last line {last!r}"
    correct, total = int(match.group(2)), int(match.group(3))
    assert total == (360 if name.startswith("digits") else 200)
    assert correct / total >= target, f"{name}: {last}"
    assert "epoch 1/" in err and "batch" in err and "loss=" in err and "acc=" in err  # the tqdm bar


def test_nan_loss_stops_training_naming_the_step(tmp_path):
    result = run(
        ["--optimizer", "sgd", "--lr", "1e300", "--epochs", "2", "--save", str(tmp_path / "c.ckpt")]
    )
    assert result.returncode == 1
    assert re.search(
        r"the loss became nan at step \d+ \(batch \d+ of this epoch\); training stopped",
        result.stderr,
    )
    assert "test accuracy:" not in result.stdout
    assert not (tmp_path / "c.ckpt").exists()  # nothing saved from a diverged run


def test_save_then_resume_equals_one_uninterrupted_run(tmp_path):
    flags = ["--dataset", "circle", "--points", "64", "--batch-size", "16"]
    straight, first, resumed = tmp_path / "straight.ckpt", tmp_path / "resumed.ckpt", None
    a = run([*flags, "--epochs", "4", "--save", str(straight)])
    b = run([*flags, "--epochs", "2", "--save", str(first)])
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    resumed = run([*flags, "--epochs", "4", "--resume", str(first), "--save", str(first)])
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout and "after epoch 2" in resumed.stdout
    models = []
    for path in (straight, first):
        model = build_model("mlp", "circle")
        extra = load_checkpoint(path, model)
        assert extra["epoch"] == 4
        models.append(model)
    for (name, p), (_, q) in zip(
        models[0].named_parameters(), models[1].named_parameters(), strict=True
    ):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=name)
    assert a.stdout.strip().splitlines()[-1] == resumed.stdout.strip().splitlines()[-1]


def test_resume_from_another_setup_is_a_clear_error(tmp_path):
    ckpt = tmp_path / "xor.ckpt"
    assert run(["--dataset", "xor", "--epochs", "1", "--save", str(ckpt)]).returncode == 0
    result = run(["--dataset", "spiral", "--epochs", "2", "--resume", str(ckpt)])
    assert result.returncode == 1 and "trained with --dataset xor" in result.stderr
    result = run(["--epochs", "1", "--resume", str(ckpt)])  # digits MLP: other shapes
    assert result.returncode == 1 and "error:" in result.stderr and "size mismatch" in result.stderr
    broken = tmp_path / "broken.ckpt"
    broken.write_bytes(ckpt.read_bytes()[:100])
    result = run(["--dataset", "xor", "--epochs", "2", "--resume", str(broken)])
    assert result.returncode == 1 and "not a valid torchlight checkpoint" in result.stderr


def test_usage_errors():
    result = run(["--dataset", "xor", "--model", "cnn"])
    assert result.returncode == 2 and "the CNN is for the digits" in result.stderr
    result = run(["--dataset", "mnist"])
    assert result.returncode == 2 and "invalid choice" in result.stderr
    result = run(["--lr", "-1"])
    assert result.returncode == 2 and "--lr" in result.stderr
    result = run(["--backend", "abacus"])
    assert result.returncode == 2 and "unknown backend 'abacus'" in result.stderr


def test_backend_flag_trains_the_same_model_on_the_reference_backend():
    flags = ["--dataset", "xor", "--epochs", "2", "--points", "32"]
    numpy_run, strided_run = run(flags), run([*flags, "--backend", "strided"])
    assert numpy_run.returncode == 0 and strided_run.returncode == 0, strided_run.stderr
    assert numpy_run.stdout == strided_run.stdout  # same losses and accuracies, to the digit


def test_main_in_process_with_float32(capsys):
    from torchlight.train import main

    assert (
        main(["--dataset", "simple", "--epochs", "3", "--dtype", "float32", "--points", "64"]) == 0
    )
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("train accuracy:")


def test_build_model_shapes():
    assert isinstance(build_model("cnn", "digits")[0], nn.Conv2d)
    assert build_model("mlp", "digits")[0].in_features == 64
    assert build_model("mlp", "spiral")[-1].out_features == 2
