"""Step time of the real PyTorch programs of tests/programs/ on torchlight (through
``torchlight.compat``, unchanged) and on PyTorch, same tiny config, float64, one CPU thread.

Run: ``.venv/bin/python benchmarks/bench_real_programs.py``. One "step" is forward, backward
and the optimizer's step on one tiny batch; the ratio is torchlight's time over PyTorch's
(lower is better for torchlight). Figures depend on the machine's load: compare one run's
columns, not runs.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_real_programs as programs  # noqa: E402
import torch  # noqa: E402

import torchlight as tl  # noqa: E402

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)


def best(fn: Any, repeat: int = 5, number: int = 3) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def step_fn(fw: Any, model: Any, loss_of: Any) -> Any:
    opt = fw.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad()
        loss_of(model).backward()
        opt.step()

    return step


def gpt_rows() -> list[tuple[str, float, float]]:
    rows = []
    x, y = programs._gpt_batch(11, 8)
    ours, theirs = (
        programs.load_program("nanogpt_model.py", "nanogpt_model", on) for on in (True, False)
    )
    kw = dict(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=16, dropout=0.0, bias=True)
    times = []
    for fw, mod in ((tl, ours), (torch, theirs)):
        model = mod.GPT(mod.GPTConfig(**kw))
        times.append(best(step_fn(fw, model, lambda m, fw=fw: m(fw.tensor(x), fw.tensor(y))[1])))
    rows.append(("nanoGPT model.py (2 layers, d=16, T=8, B=3)", *times))
    (l_mod, _), (t_mod, _) = programs.load_mingpt(True), programs.load_mingpt(False)
    x, y = programs._gpt_batch(7, 6)
    times = []
    for fw, mod in ((tl, l_mod), (torch, t_mod)):
        model = mod.GPT(programs.mingpt_config(mod))
        times.append(best(step_fn(fw, model, lambda m, fw=fw: m(fw.tensor(x), fw.tensor(y))[1])))
    rows.append(("minGPT mingpt/model.py (2 layers, d=8, T=6, B=3)", *times))
    return rows


def wlm_rows() -> list[tuple[str, float, float]]:
    rows = []
    ours, theirs = (
        programs.load_program("word_language_model_model.py", "wlm", on) for on in (True, False)
    )
    rng = np.random.default_rng(1)
    data, target = rng.integers(0, 13, (5, 3)), rng.integers(0, 13, 15)
    for kind in ("LSTM", "Transformer"):
        times = []
        for fw, mod in ((tl, ours), (torch, theirs)):
            if kind == "Transformer":
                model = mod.TransformerModel(13, 8, 2, 16, 2, dropout=0.0)

                def loss_of(m: Any, fw: Any = fw) -> Any:
                    return fw.nn.functional.nll_loss(
                        m(fw.tensor(data)).view(-1, 13), fw.tensor(target)
                    )
            else:
                model = mod.RNNModel("LSTM", 13, 8, 8, 2, dropout=0.0)

                def loss_of(m: Any, fw: Any = fw) -> Any:
                    out, _ = m(fw.tensor(data), m.init_hidden(3))
                    return fw.nn.functional.nll_loss(out.view(-1, 13), fw.tensor(target))

            times.append(best(step_fn(fw, model, loss_of)))
        rows.append((f"word_language_model model.py {kind} (2 layers, T=5, B=3)", *times))
    return rows


def super_resolution_row() -> tuple[str, float, float]:
    ours, theirs = (
        programs.load_program("super_resolution_model.py", "sr", on) for on in (True, False)
    )
    rng = np.random.default_rng(0)
    x, target = rng.normal(size=(2, 1, 8, 8)), rng.normal(size=(2, 1, 16, 16))
    times = []
    for fw, mod in ((tl, ours), (torch, theirs)):
        model = mod.Net(upscale_factor=2)
        times.append(
            best(
                step_fn(
                    fw,
                    model,
                    lambda m, fw=fw: fw.nn.functional.mse_loss(m(fw.tensor(x)), fw.tensor(target)),
                )
            )
        )
    return ("super_resolution model.py (upscale 2, 8x8 -> 16x16, B=2)", *times)


def regression_row() -> tuple[str, float, float]:
    """The whole unchanged script, start-up included (best of 3 runs): it draws its own random
    polynomial, so the two runs need different numbers of batches to reach the 1e-3 loss."""
    script = ROOT / "tests" / "programs" / "regression_main.py"
    totals = []
    for shim in (["-m", "torchlight.compat"], []):
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, *shim, str(script)], check=True, cwd=ROOT, capture_output=True
            )
            runs.append(time.perf_counter() - start)
        totals.append(min(runs))
    return ("pytorch/examples regression/main.py (whole script, incl. start-up)", *totals)


def tutorial_rows() -> list[tuple[str, float, float]]:
    """Robert Guthrie's NLP tutorials (issue 37): the program's own model and one training
    example, SGD as the programs train (their loops step once per example)."""
    rows = []
    for program in programs.NLP_PROGRAMS:
        ours, theirs = (
            programs.load_program(f"{program}.py", f"{program}_bench", on) for on in (True, False)
        )
        times = []
        for fw, mod in ((tl, ours), (torch, theirs)):
            model = programs._nlp_model(mod, program)
            opt = fw.optim.SGD(model.parameters(), lr=0.1)

            def step(
                fw: Any = fw,
                mod: Any = mod,
                model: Any = model,
                opt: Any = opt,
                name: str = program,
            ) -> None:
                model.zero_grad()
                programs._nlp_loss(mod, fw, name, model).backward()
                opt.step()

            times.append(best(step, number=20))
        rows.append((f"pytorch/tutorials nlp {program} (one example)", *times))
    return rows


def main() -> None:
    rows = [*gpt_rows(), *wlm_rows(), super_resolution_row(), *tutorial_rows(), regression_row()]
    print(f"{'program':66s} {'torchlight':>11s} {'PyTorch':>10s} {'ratio':>7s}")
    for name, ours, theirs in rows:
        print(f"{name:66s} {ours * 1e3:9.2f}ms {theirs * 1e3:8.2f}ms {ours / theirs:6.1f}x")


if __name__ == "__main__":
    main()
