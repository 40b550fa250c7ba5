"""The engine's cost against another revision of torchlight and against PyTorch, interleaved.

Run: ``.venv/bin/python benchmarks/bench_engine.py`` (against ``main``; ``--against REV`` for
another revision, ``--rounds N`` for more rounds). The revision's ``torchlight`` package is
exported with ``git archive`` into a temporary folder; then child processes, one thread each,
time the same steps on the revision and on this working tree in turn (``rev, tree, rev, tree,
...``), each child also timing PyTorch, so a machine that gets busier slows every column alike.
Each figure is the best over all rounds. Rows:

- per-op: forward and backward of a chain of 1,000 small ops (bench_autograd's chain), per op;
- MLP / CNN: one training step of the digits models at batch 64 (bench_nn's steps);
- GPT: one training step (forward, cross-entropy, backward, SGD) of a tiny GPT, float32:
  vocabulary 65, 64 positions, width 64, 4 heads, 2 blocks, batch 16; PyTorch runs the same
  model written with its own modules.

Ratios: this tree's time divided by the revision's and by PyTorch's (lower is better).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ROWS = ("per-op (us)", "MLP f64 (ms)", "MLP f32 (ms)", "CNN f32 (ms)", "GPT f32 (ms)")
VOCAB, BLOCK, WIDTH, HEADS, LAYERS, GPT_BATCH = 65, 64, 64, 4, 2, 16


def _best(fn: Callable[[], object], repeat: int, number: int) -> float:
    fn()
    fn()  # warm up
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def _gpt_step(lib: Any) -> Callable[[], object]:
    """A training step of the tiny GPT written once for both libraries (the same modules)."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
            self.fc, self.proj = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x: Any) -> Any:
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False, attn_mask=mask)[0]
            return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(VOCAB, WIDTH)
            self.pos = nn.Parameter(lib.randn(BLOCK, WIDTH) * 0.02)
            self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.ln_f, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB, bias=False)

        def forward(self, idx: Any) -> Any:
            x = self.tok(idx) + self.pos
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    mask = lib.full((BLOCK, BLOCK), float("-inf")).triu(1)  # -inf: may not attend (the future)
    model = GPT()
    opt = lib.optim.SGD(model.parameters(), lr=0.01)
    import numpy as np

    rng = np.random.default_rng(0)
    idx = lib.tensor(rng.integers(0, VOCAB, (GPT_BATCH, BLOCK)))
    target = lib.tensor(rng.integers(0, VOCAB, (GPT_BATCH * BLOCK,)))

    def step() -> object:
        loss = F.cross_entropy(model(idx).reshape(-1, VOCAB), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


def child(with_torch: bool, repeat: int) -> dict[str, dict[str, float]]:
    """Time every row in this process (one thread): torchlight's, and PyTorch's if asked."""
    sys.path.insert(0, str(HERE))
    import numpy as np
    from bench_autograd import CHAIN, chain
    from bench_nn import step_torch, step_torchlight

    import torchlight as tl

    libs: dict[str, Any] = {"torchlight": tl}
    if with_torch:
        import torch

        torch.set_num_threads(1)
        libs["pytorch"] = torch
    out: dict[str, dict[str, float]] = {}
    x0 = np.random.default_rng(0).normal(size=(4,))
    for name, lib in libs.items():
        lib.set_default_dtype(lib.float32)  # the GPT row is float32, as PyTorch's default
        gpt = _gpt_step(lib)
        lib.set_default_dtype(lib.float64 if lib is tl else lib.float32)
        mlp, step = (step_torchlight, step_torchlight) if lib is tl else (step_torch, step_torch)
        out[name] = {
            ROWS[0]: _best(chain(lib, x0), repeat, 3) / CHAIN * 1e6,
            ROWS[1]: _best(mlp("mlp", np.float64), repeat, 50) * 1e3,
            ROWS[2]: _best(mlp("mlp", np.float32), repeat, 50) * 1e3,
            ROWS[3]: _best(step("cnn", np.float32), repeat, 10) * 1e3,
            ROWS[4]: _best(gpt, repeat, 3) * 1e3,
        }
    return out


def _export(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "torchlight"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        sys.exit(f"git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", default="main", help="git revision to compare (main)")
    parser.add_argument("--rounds", type=int, default=4, help="rev/tree alternations (4)")
    parser.add_argument("--repeat", type=int, default=5, help="repeats per child (5)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--torch", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.torch, args.repeat)))
        return
    try:
        import torch  # noqa: F401

        peer = True
    except ImportError:
        peer = False
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        _export(args.against, Path(tmp))
        trees = {args.against: tmp, "this tree": str(ROOT)}
        for _ in range(args.rounds):
            for label, path in trees.items():
                argv = [sys.executable, __file__, "--child", "--repeat", str(args.repeat)]
                done = subprocess.run(
                    argv + (["--torch"] if peer else []), env={**env, "PYTHONPATH": path},
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                if done.returncode != 0:
                    sys.exit(f"the child for {label} failed:\n{done.stderr[-3000:]}")
                for name, rows in json.loads(done.stdout).items():
                    key = label if name == "torchlight" else "PyTorch"
                    mine = best.setdefault(key, dict.fromkeys(ROWS, float("inf")))
                    for row, value in rows.items():
                        mine[row] = min(mine[row], value)
    rev, tree = best[args.against], best["this tree"]
    head = f"{'row':14}{args.against[:12]:>13}{'this tree':>13}"
    head += f"{'PyTorch':>11}{'tree/rev':>10}{'tree/torch':>12}{'rev/torch':>11}" if peer else ""
    print(f"{args.rounds} rounds interleaved, one thread, best of each; times per op or step")
    print(head)
    print("-" * len(head))
    for row in ROWS:
        line = f"{row:14}{rev[row]:13.3f}{tree[row]:13.3f}"
        if peer:
            torch_t = best["PyTorch"][row]
            line += f"{torch_t:11.3f}{tree[row] / rev[row]:10.2f}"
            line += f"{tree[row] / torch_t:12.2f}{rev[row] / torch_t:11.2f}"
        print(line)


if __name__ == "__main__":
    main()
