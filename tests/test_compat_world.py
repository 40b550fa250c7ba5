"""Issue 37, finding 1: a PyTorch program sees PyTorch's defaults under ``torchlight.compat``
(float32, both ways in), ``import torchlight`` keeps the course's float64, and
``torchlight.compat.pytorch_defaults()`` gives PyTorch's defaults beside a real PyTorch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchlight as tl
from torchlight import compat

ROOT = Path(__file__).parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# What a PyTorch program does that float64 defaults break: float32 numpy data into a model built
# with the defaults (the matrix product refuses mixed dtypes, in PyTorch as in torchlight).
PROGRAM = """\
import numpy as np
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
x = torch.from_numpy(np.ones((5, 3), dtype=np.float32))
print(torch.get_default_dtype(), model[0].weight.dtype, model(x).dtype, torch.tensor([1.0]).dtype,
      torch.zeros(2).dtype, torch.randn(2).dtype, torch.tensor(np.zeros(2)).dtype)
"""
PYTORCH_SAYS = [
    "float32",
    "float32",
    "float32",
    "float32",
    "float32",
    "float32",
    "float64",
]  # fmt: skip  (the last: torch.tensor of a float64 numpy array keeps float64)


def _run(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=ENV, timeout=120, cwd=cwd
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _dtypes(out: str) -> list[str]:
    return [word.split(".")[-1] for word in out.split()]


def test_python_m_compat_runs_a_script_with_pytorchs_float32(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(PROGRAM)
    assert _dtypes(_run("-m", "torchlight.compat", str(tmp_path / "train.py"))) == PYTORCH_SAYS


def test_import_torchlight_compat_gives_float32_and_import_torchlight_keeps_float64() -> None:
    assert _dtypes(_run("-c", "import torchlight.compat\n" + PROGRAM)) == PYTORCH_SAYS
    course = _run("-c", "import torchlight as tl; print(tl.get_default_dtype(), tl.ones(1).dtype)")
    assert _dtypes(course) == ["float64", "float64"]
    # uninstall() leaves PyTorch's world: the defaults from before come back
    back = _run(
        "-c",
        "import torchlight as tl, torchlight.compat as c; a = tl.ones(1).dtype; c.uninstall(); "
        "print(a, tl.ones(1).dtype)",
    )
    assert _dtypes(back) == ["float32", "float64"]


def test_pytorch_defaults_beside_the_real_pytorch() -> None:
    torch = pytest.importorskip("torch")
    assert not compat.installed() and tl.get_default_dtype() is tl.float64
    torch.manual_seed(0)
    with compat.pytorch_defaults():
        assert tl.get_default_dtype() is tl.float32
        t_model, l_model = torch.nn.Linear(3, 2), tl.nn.Linear(3, 2)
        assert l_model.weight.dtype is tl.float32 and t_model.weight.dtype == torch.float32
        l_model.load_state_dict({k: tl.tensor(v.numpy()) for k, v in t_model.state_dict().items()})
        x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
        out = l_model(tl.from_numpy(x))
        assert out.dtype is tl.float32
        np.testing.assert_allclose(
            out.detach().numpy(),
            t_model(torch.from_numpy(x)).detach().numpy(),
            rtol=1e-5,
            atol=1e-6,  # float32: the two libraries may sum in another order
        )
        # by hand: x W^T + b
        w, b = t_model.weight.detach().numpy(), t_model.bias.detach().numpy()
        np.testing.assert_allclose(out.detach().numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    assert tl.get_default_dtype() is tl.float64  # restored on leaving
    with pytest.raises(KeyError), compat.pytorch_defaults():
        raise KeyError("restored on an error too")
    assert tl.get_default_dtype() is tl.float64


def test_a_script_imports_its_sibling_modules_from_any_working_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "helper.py").write_text("VALUE = 42\n")
    (tmp_path / "sub" / "main.py").write_text(
        "import sys\nfrom helper import VALUE\nprint(VALUE, sys.path[0])\n"
    )
    value, first = _run("-m", "torchlight.compat", "sub/main.py", cwd=tmp_path).split()
    assert value == "42" and first == str(tmp_path / "sub")  # as `python sub/main.py` has it
