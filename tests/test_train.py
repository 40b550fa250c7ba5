"""``python -m torchlight.train``: the accuracy targets with the default settings, NaN handling,
saving and resuming, and usage errors. The default runs start together (2 cores)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from torchlight import nn
from torchlight.train.checkpoint import load_checkpoint
from torchlight.train.cli import build_model
from torchlight.train.guards import ctrl_c_deferred

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
    *_, accuracy, saved = a.stdout.strip().splitlines()
    assert accuracy == resumed.stdout.strip().splitlines()[-2]
    assert saved == (
        f"the model (epoch 4) is saved in {straight}: continue it with python -m "
        f"torchlight.train --resume {straight} --epochs 5 (or more)"
    )


def test_resume_from_another_setup_is_a_clear_error(tmp_path):
    ckpt = tmp_path / "xor.ckpt"
    assert run(["--dataset", "xor", "--epochs", "1", "--save", str(ckpt)]).returncode == 0
    result = run(["--dataset", "spiral", "--epochs", "2", "--resume", str(ckpt)])
    assert result.returncode == 1 and "trained with --dataset xor" in result.stderr
    result = run(["--dataset", "digits", "--epochs", "1", "--resume", str(ckpt)])
    assert result.returncode == 1 and "trained with --dataset xor" in result.stderr
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
    assert result.returncode == 2 and "--lr must be a positive number" in result.stderr
    assert "--epochs" not in result.stderr.splitlines()[-1]  # a message for the flag that is wrong
    result = run(["--epochs", "-1"])
    assert result.returncode == 2 and "--epochs must be 0 or more" in result.stderr
    assert "--lr must" not in result.stderr and "--batch-size must" not in result.stderr
    result = run(["--batch-size", "0", "--lr", "0"])
    assert result.returncode == 2 and "--batch-size must be at least 1, " not in result.stderr
    assert "got 0\n" in result.stderr and "--lr must be a positive number" in result.stderr
    result = run(["--backend", "abacus"])
    assert result.returncode == 2 and "unknown backend 'abacus'" in result.stderr


def test_backend_flag_trains_the_same_model_on_the_reference_backend():
    flags = ["--dataset", "xor", "--epochs", "2", "--points", "32"]
    numpy_run, strided_run = run(flags), run([*flags, "--backend", "strided"])
    assert numpy_run.returncode == 0 and strided_run.returncode == 0, strided_run.stderr
    assert numpy_run.stdout == strided_run.stdout  # same losses and accuracies, to the digit


def test_main_in_process_with_float32(capsys):
    from torchlight.train.cli import main

    assert (
        main(["--dataset", "simple", "--epochs", "3", "--dtype", "float32", "--points", "64"]) == 0
    )
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("train accuracy:")


def test_build_model_shapes():
    assert isinstance(build_model("cnn", "digits")[0], nn.Conv2d)
    assert build_model("mlp", "digits")[0].in_features == 64
    assert build_model("mlp", "spiral")[-1].out_features == 2


def test_resume_alone_takes_the_data_set_and_model_from_the_checkpoint(tmp_path):
    ckpt = tmp_path / "xor.ckpt"
    flags = ["--points", "32", "--save", str(ckpt)]
    assert run(["--dataset", "xor", "--epochs", "1", *flags]).returncode == 0
    result = run(["--epochs", "2", "--resume", str(ckpt), *flags])  # no --dataset, no --model
    assert result.returncode == 0, result.stderr
    assert "resumed from" in result.stdout and "after epoch 1" in result.stdout
    assert load_checkpoint(ckpt, build_model("mlp", "xor"))["epoch"] == 2


def test_a_bad_save_path_fails_before_training(tmp_path):
    result = run(["--dataset", "xor", "--save", str(tmp_path / "missing" / "x.ckpt")], timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"the folder {tmp_path / 'missing'} does not exist" in result.stderr
    assert "epoch 1/" not in result.stderr and "Traceback" not in result.stderr  # nothing trained
    result = run(["--dataset", "xor", "--save", str(tmp_path)], timeout=60)
    assert result.returncode == 2 and "is a folder; give a file name" in result.stderr


def test_ctrl_c_prints_one_line_naming_the_last_checkpoint(tmp_path):
    ckpt = tmp_path / "long.ckpt"
    process = start(
        ["--dataset", "xor", "--points", "32", "--epochs", "100000", "--save", str(ckpt)]
    )
    try:
        deadline = time.monotonic() + 60
        while not ckpt.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert ckpt.exists(), "no checkpoint written within 60 s"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = [line.split("\r")[-1].strip() for line in err.splitlines()]
    message = [line for line in lines if line.startswith("interrupted")]
    assert len(message) == 1, err
    assert f"the last checkpoint is {ckpt} (epoch " in message[0]
    assert f"--resume {ckpt}" in message[0]
    saved = load_checkpoint(ckpt, build_model("mlp", "xor"))["epoch"]  # intact, readable
    assert f"(epoch {saved})" in message[0]


def test_a_deferred_ctrl_c_is_raised_after_the_block_and_an_ignored_one_stays_ignored():
    previous = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with pytest.raises(KeyboardInterrupt), ctrl_c_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            written = "the checkpoint"  # the block runs to its end first
        assert written == "the checkpoint"
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # `nohup`, a shell's `&`: no Ctrl-C at all
        with ctrl_c_deferred():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_help_names_the_command_used_without_rst_markup():
    script = Path(sys.executable).parent / "torchlight-train"
    assert script.exists(), f"{script} is missing: `make venv` installs the console script"
    shown = subprocess.run([str(script), "--help"], env=ENV, text=True, capture_output=True)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: torchlight-train ")
    assert "``" not in shown.stdout and "python -m" not in shown.stdout
    assert run(["--help"]).stdout.startswith("usage: python -m torchlight.train ")


def test_resume_alone_saves_back_into_the_checkpoint_unless_no_save(tmp_path):
    ckpt = tmp_path / "circle.ckpt"
    flags = ["--dataset", "circle", "--points", "32", "--batch-size", "16"]
    assert run([*flags, "--epochs", "1", "--save", str(ckpt)]).returncode == 0
    resumed = run(["--epochs", "2", "--resume", str(ckpt)])  # the README's "alone"
    assert resumed.returncode == 0, resumed.stderr
    assert load_checkpoint(ckpt, build_model("mlp", "circle"))["epoch"] == 2
    kept = run(["--epochs", "3", "--resume", str(ckpt), "--no-save"])
    assert kept.returncode == 0, kept.stderr
    assert load_checkpoint(ckpt, build_model("mlp", "circle"))["epoch"] == 2  # unchanged
    both = run(["--resume", str(ckpt), "--no-save", "--save", str(ckpt)], timeout=60)
    assert both.returncode == 2 and "contradict" in both.stderr


def test_resume_from_a_file_that_is_no_checkpoint_says_what_it_is(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    array = tmp_path / "weights.npy"
    np.save(array, np.arange(3.0))
    for path, what in ((text, "a text file"), (array, "a single numpy array (.npy)")):
        result = run(["--dataset", "xor", "--epochs", "1", "--resume", str(path)], timeout=60)
        assert result.returncode == 1, result.stderr
        assert f"{path} is not a torchlight checkpoint" in result.stderr
        assert what in result.stderr and "pickle" not in result.stderr
        assert "Traceback" not in result.stderr


def test_epochs_0_and_a_finished_run_say_there_is_nothing_to_train(tmp_path):
    result = run(["--dataset", "xor", "--points", "32", "--epochs", "0"], timeout=60)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first == "--epochs 0: nothing to train; the untrained model is evaluated"
    ckpt = tmp_path / "xor.ckpt"
    saved = run(["--dataset", "xor", "--points", "32", "--epochs", "2", "--save", str(ckpt)])
    assert saved.returncode == 0, saved.stderr
    again = run(["--resume", str(ckpt), "--no-save"], timeout=60)  # xor's default: 100 epochs
    assert again.returncode == 0 and "nothing to train" not in again.stdout
    again = run(["--resume", str(ckpt), "--epochs", "2"], timeout=60)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == (
        f"{ckpt} is already at epoch 2, and --epochs 2 is the total: nothing to train; continue "
        f"it with python -m torchlight.train --resume {ckpt} --epochs 3 (or more)"
    )
    assert "epoch 3/" not in again.stderr and "the model (epoch" not in again.stdout


def test_a_text_model_run_names_the_file_it_saved_and_what_reads_it(tmp_path, capsys):
    from torchlight.train import cli, text

    ckpt = tmp_path / "gpt.ckpt"
    tiny = {"block_size": 8, "d_model": 8, "nhead": 2, "num_layers": 1}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text, "load_text", lambda name: (ROOT / "README.md").read_text()[:3000])
        patch.setitem(text.MODEL_CONFIGS, "gpt", tiny)
        flags = ["--dataset", "shakespeare", "--model", "gpt", "--epochs", "1"]
        assert cli.main([*flags, "--save", str(ckpt)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        f"the model (epoch 1) is saved in {ckpt}: sample from it with python -m "
        f"torchlight.train.generate --checkpoint {ckpt}"
    )


def test_ctrl_c_in_a_resumed_run_names_the_epoch_it_resumed_from(tmp_path, capsys):
    """Before the first new epoch ends (a text model's epoch takes minutes), the line names the
    checkpoint's epoch, not 0."""
    from torchlight.train import cli

    ckpt = tmp_path / "xor.ckpt"
    assert (
        cli.main(["--dataset", "xor", "--points", "32", "--epochs", "2", "--save", str(ckpt)]) == 0
    )
    capsys.readouterr()

    def interrupted(args, progress):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt  # Ctrl-C during the first new epoch

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "run", interrupted)
        assert cli.main(["--resume", str(ckpt), "--epochs", "5"]) == 130
    err = capsys.readouterr().err.strip()
    assert err == (
        f"interrupted after epoch 2/5; nothing new was saved, the last checkpoint is still {ckpt}"
    )
