"""One training step of the same small GPT and LSTM language models, torchlight vs PyTorch CPU.

    .venv/bin/python benchmarks/bench_seq.py            # needs torch (pip install torch==2.13.0)
    .venv/bin/python benchmarks/bench_seq.py --profile  # and where torchlight's time goes

float32, one BLAS/OpenMP thread for both (set before numpy and torch load). The models are the
CLI's defaults (``torchlight/train_text.py``): a GPT of 3 pre-norm blocks, d_model 96, 4 heads,
context 64, tied embeddings; an LSTM of hidden size 256 on 64-dim embeddings; batch 32, Adam.
Both frameworks run the *same* model code: torchlight's layers have PyTorch's names, so
``build_gpt(nn)`` builds either. Printed: the median time of forward, backward, optimizer step
and the whole step, side by side, and the ratio.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import torchlight as tl  # noqa: E402

VOCAB, BLOCK, BATCH = 65, 64, 32
D_MODEL, HEADS, LAYERS = 96, 4, 3
EMBED, HIDDEN = 64, 256


def build_gpt(nn: Any) -> Any:
    """The CLI's GPT, written once against PyTorch's nn API (torch.nn or torchlight.nn)."""

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
            self.attn = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
            self.fc, self.proj = nn.Linear(D_MODEL, 4 * D_MODEL), nn.Linear(4 * D_MODEL, D_MODEL)
            self.act = nn.GELU(approximate="tanh")

        def forward(self, x: Any, mask: Any) -> Any:
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.proj(self.act(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(BLOCK, D_MODEL)
            self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
            self.ln_f = nn.LayerNorm(D_MODEL)
            self.head = nn.Linear(D_MODEL, VOCAB, bias=False)
            self.head.weight = self.tok.weight  # tied

        def forward(self, idx: Any, mask: Any) -> Any:
            x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.ln_f(x))

    return GPT()


def build_lstm(nn: Any) -> Any:
    class LSTMModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(VOCAB, EMBED)
            self.lstm = nn.LSTM(EMBED, HIDDEN, batch_first=True)
            self.head = nn.Linear(HIDDEN, VOCAB)

        def forward(self, idx: Any, mask: Any) -> Any:
            return self.head(self.lstm(self.embedding(idx))[0])

    return LSTMModel()


def framework(name: str) -> dict[str, Any]:
    """What a training step needs from torchlight or torch: nn, F, Adam, tensor factories."""
    causal = np.triu(np.full((BLOCK, BLOCK), -np.inf, dtype=np.float32), 1)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, VOCAB, (BATCH, BLOCK)), rng.integers(0, VOCAB, (BATCH, BLOCK))
    if name == "torch":
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(0)
        return {
            "nn": torch.nn,
            "F": torch.nn.functional,
            "Adam": torch.optim.Adam,
            "mask": torch.from_numpy(causal),
            "x": torch.from_numpy(x),
            "y": torch.from_numpy(y),
            "float": lambda m: m.float(),
        }
    tl.manual_seed(0)
    return {
        "nn": tl.nn,
        "F": tl.nn.functional,
        "Adam": tl.optim.Adam,
        "mask": tl.tensor(causal),
        "x": tl.tensor(x),
        "y": tl.tensor(y),
        "float": lambda m: m.to(tl.float32),
    }


def timed_steps(name: str, build: Callable[[Any], Any], steps: int) -> dict[str, float]:
    """Median milliseconds of forward (+ loss), backward, optimizer step, and the whole step."""
    fw = framework(name)
    model = fw["float"](build(fw["nn"]))
    optimizer = fw["Adam"](model.parameters(), lr=1e-3)
    times: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": [], "step": []}
    for i in range(steps + 3):  # 3 warm-up steps
        t0 = time.perf_counter()
        logits = model(fw["x"], fw["mask"])
        loss = fw["F"].cross_entropy(logits.reshape(-1, VOCAB), fw["y"].reshape(-1))
        t1 = time.perf_counter()
        optimizer.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        if i >= 3:
            for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
                times[key].append(dt * 1000)
    return {key: statistics.median(values) for key, values in times.items()}


def profile(build: Callable[[Any], Any], steps: int = 5) -> None:
    fw = framework("torchlight")
    model = fw["float"](build(fw["nn"]))
    optimizer = fw["Adam"](model.parameters(), lr=1e-3)

    def run() -> None:
        for _ in range(steps):
            logits = model(fw["x"], fw["mask"])
            loss = fw["F"].cross_entropy(logits.reshape(-1, VOCAB), fw["y"].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    run()  # warm up
    profiler = cProfile.Profile()
    profiler.runcall(run)
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    print(f"  where torchlight's step goes ({total / steps * 1000:.1f} ms per step, by own time):")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:10]  # type: ignore[attr-defined]
    for (path, line, fn), (_, calls, own, _cum, _) in rows:
        where = f"{os.path.basename(path)}:{line}({fn})" if line else fn
        print(f"    {own / total:6.1%}  {calls // steps:6d} calls/step  {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("bench_seq.py compares with PyTorch: pip install torch==2.13.0") from None
    print(f"one training step, float32, 1 thread, batch {BATCH} x {BLOCK} tokens (median ms)")
    print(f"{'model':<6} {'part':<10} {'torchlight':>11} {'pytorch':>9} {'ratio':>7}")
    for label, build in (("gpt", build_gpt), ("lstm", build_lstm)):
        ours, theirs = (
            timed_steps("torchlight", build, args.steps),
            timed_steps("torch", build, args.steps),
        )
        for part in ours:
            ratio = ours[part] / theirs[part]
            print(f"{label:<6} {part:<10} {ours[part]:11.1f} {theirs[part]:9.1f} {ratio:6.2f}x")
        if args.profile:
            profile(build)


if __name__ == "__main__":
    main()
