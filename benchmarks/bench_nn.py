"""Training-step speed of torchlight.nn vs hand-written numpy vs PyTorch CPU, side by side.

Run: ``.venv/bin/python benchmarks/bench_nn.py`` (``--threads N`` for multi-threaded BLAS).

Rows: one training step (forward, cross-entropy, backward, SGD update) at batch 64 of
- the digits MLP 64->128->10 (ReLU), and
- the digits CNN of ``python -m torchlight.train --model cnn``
  (conv 1->8 3x3 pad 1, ReLU, conv 8->16 3x3 pad 1, ReLU, max-pool 2, linear 256->10),
in float64 and float32; then one epoch of the default ``torchlight.train`` runs on the digits
(wall time and peak memory). Times are the best of several repeats, with the three
implementations interleaved, so a busy machine slows them alike; compare columns of one run.
Ratios are torchlight's time divided by the peer's (<= 1.0: torchlight is as fast or faster).
"""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":  # BLAS reads its thread count once, when numpy is first imported
    _threads = "1"
    if "--threads" in sys.argv:
        _threads = sys.argv[sys.argv.index("--threads") + 1]
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _threads)

import time  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402

import torchlight as tl  # noqa: E402
from torchlight import optim  # noqa: E402
from torchlight.data import DataLoader, digits  # noqa: E402
from torchlight.nn import functional as F  # noqa: E402
from torchlight.train.cli import build_model, train_epoch  # noqa: E402

try:
    import torch
except ImportError:  # PyTorch is an optional peer, never a dependency
    torch = None

BATCH, LR = 64, 0.01
Step = Callable[[], object]


def batch(images: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    x, y = digits(True).tensors
    order = np.random.default_rng(seed).permutation(len(y))[:BATCH]
    xb = x.numpy()[order]
    return (xb.reshape(-1, 1, 8, 8) if images else xb), y.numpy()[order]


def initial_weights(model: str, dtype: np.dtype) -> list[np.ndarray]:
    """The torchlight model's initial parameters, so every implementation starts equal."""
    tl.manual_seed(0)
    return [p.detach().numpy().astype(dtype) for p in build_model(model, "digits").parameters()]


# ------------------------------------------------------------------ torchlight
def step_torchlight(model_name: str, dtype: np.dtype) -> Step:
    tl.manual_seed(0)
    model = build_model(model_name, "digits").to(tl.float32 if dtype == np.float32 else tl.float64)
    opt = optim.SGD(model.parameters(), lr=LR)
    xb, yb = batch(model_name == "cnn")
    x, y = tl.tensor(xb.astype(dtype)), tl.tensor(yb)

    def step() -> object:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


# ------------------------------------------------------------------ PyTorch
def step_torch(model_name: str, dtype: np.dtype) -> Step:
    nn = torch.nn
    if model_name == "mlp":
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 10),
        )  # fmt: skip
    tdtype = torch.float32 if dtype == np.float32 else torch.float64
    model = model.to(tdtype)
    with torch.no_grad():
        for p, w in zip(model.parameters(), initial_weights(model_name, dtype), strict=True):
            p.copy_(torch.from_numpy(w))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    xb, yb = batch(model_name == "cnn")
    x, y = torch.from_numpy(xb.astype(dtype)), torch.from_numpy(yb)

    def step() -> object:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


# ------------------------------------------------------------------ hand-written numpy
def _log_softmax_grad(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    n = len(y)
    grad = np.exp(logp)
    grad[np.arange(n), y] -= 1.0
    return -logp[np.arange(n), y].mean(), grad / n


def step_numpy_mlp(dtype: np.dtype) -> Step:
    w1, b1, w2, b2 = initial_weights("mlp", dtype)
    xb, y = batch(False)
    x = xb.astype(dtype)

    def step() -> object:
        h = x @ w1.T + b1
        a = np.maximum(h, 0)
        loss, g = _log_softmax_grad(a @ w2.T + b2, y)
        gw2, gb2 = g.T @ a, g.sum(0)
        ga = (g @ w2) * (h > 0)
        gw1, gb1 = ga.T @ x, ga.sum(0)
        for p, gp in ((w1, gw1), (b1, gb1), (w2, gw2), (b2, gb2)):
            p -= LR * gp
        return loss

    return step


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3x3 convolution, padding 1, stride 1, of (C, H, W, N) images by im2col (the layout
    torchlight uses inside, the fastest we found for numpy); returns (output, columns)."""
    c, h, wd, n = x.shape
    xp = np.zeros((c, h + 2, wd + 2, n), dtype=x.dtype)
    xp[:, 1:-1, 1:-1] = x
    cols = np.stack([xp[:, i : i + h, j : j + wd] for i in range(3) for j in range(3)], axis=1)
    out = w.reshape(w.shape[0], -1) @ cols.reshape(c * 9, -1) + b[:, None]
    return out.reshape(w.shape[0], h, wd, n), cols.reshape(c * 9, -1)


def _conv_input_grad(g: np.ndarray, w: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    c, h, wd, n = shape
    o = w.shape[0]
    gcols = (w.reshape(o, -1).T @ g.reshape(o, -1)).reshape(c, 3, 3, h, wd, n)
    gxp = np.zeros((c, h + 2, wd + 2, n), dtype=g.dtype)
    for i in range(3):
        for j in range(3):
            gxp[:, i : i + h, j : j + wd] += gcols[:, i, j]
    return gxp[:, 1:-1, 1:-1]


def step_numpy_cnn(dtype: np.dtype) -> Step:
    params = initial_weights("cnn", dtype)
    xb, y = batch(True)
    x = np.ascontiguousarray(xb.astype(dtype).transpose(1, 2, 3, 0))  # (C, H, W, N)
    n = len(y)

    def step() -> object:
        w1, b1, w2, b2, w3, b3 = params
        h1, cols1 = _conv(x, w1, b1)
        a1 = np.maximum(h1, 0)
        h2, cols2 = _conv(a1, w2, b2)
        a2 = np.maximum(h2, 0)  # (16, 8, 8, N)
        windows = a2.reshape(16, 4, 2, 4, 2, n).transpose(0, 1, 3, 5, 2, 4).reshape(16, 4, 4, n, 4)
        pooled = windows.max(-1)
        flat = pooled.transpose(3, 0, 1, 2).reshape(n, -1)
        loss, g = _log_softmax_grad(flat @ w3.T + b3, y)
        gw3, gb3 = g.T @ flat, g.sum(0)
        gpool = (g @ w3).reshape(n, 16, 4, 4).transpose(1, 2, 3, 0)
        winner = windows.argmax(-1)
        gwin = (np.arange(4) == winner[..., None]) * gpool[..., None]
        ga2 = gwin.reshape(16, 4, 4, n, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(16, 8, 8, n)
        gh2 = ga2 * (h2 > 0)
        g2 = gh2.reshape(16, -1)
        gw2, gb2 = (g2 @ cols2.T).reshape(w2.shape), g2.sum(1)
        gh1 = _conv_input_grad(gh2, w2, a1.shape) * (h1 > 0)
        g1 = gh1.reshape(8, -1)
        gw1, gb1 = (g1 @ cols1.T).reshape(w1.shape), g1.sum(1)
        for p, gp in zip(params, (gw1, gb1, gw2, gb2, gw3, gb3), strict=True):
            p -= LR * gp
        return loss

    return step


# ------------------------------------------------------------------ timing
def best_times(steps: dict[str, Step], repeat: int, number: int) -> dict[str, float]:
    """Best seconds per call of each step, the steps interleaved within every repeat."""
    for step in steps.values():
        for _ in range(3):
            step()  # warm up
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(repeat):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(number):
                step()
            best[name] = min(best[name], (time.perf_counter() - start) / number)
    return best


def epoch_run(model_name: str) -> tuple[float, float]:
    """(seconds, peak MB traced) of one epoch of the default digits run of ``model_name``."""
    tl.manual_seed(0)
    train_set = digits(True, images=model_name == "cnn")
    model = build_model(model_name, "digits")
    opt = optim.Adam(model.parameters(), lr=1e-2)
    loader = DataLoader(train_set, batch_size=BATCH, shuffle=True, seed=0)
    train_epoch(model, opt, loader, 0)  # warm up (and the first epoch's allocations)
    tracemalloc.start()
    start = time.perf_counter()
    train_epoch(model, opt, loader, 0)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1", help="BLAS / PyTorch threads (default 1)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    if torch is not None:
        torch.set_num_threads(int(args.threads))
    peer = "PyTorch" if torch is not None else "PyTorch (not installed)"
    print(
        f"batch {BATCH}, SGD lr {LR}, {args.threads} thread(s); times per training step, best of {args.repeat}"
    )
    header = f"{'step':<22}{'torchlight':>12}{'numpy':>12}{'PyTorch':>12}{'tl/numpy':>10}{'tl/torch':>10}"
    print(header)
    print("-" * len(header))
    for model_name, number in (("mlp", 200), ("cnn", 20)):
        for dtype in (np.float64, np.float32):
            steps = {"torchlight": step_torchlight(model_name, dtype)}
            steps["numpy"] = (step_numpy_mlp if model_name == "mlp" else step_numpy_cnn)(dtype)
            if torch is not None:
                steps["torch"] = step_torch(model_name, dtype)
            t = best_times(steps, args.repeat, number)
            torch_ms = f"{t['torch'] * 1e3:10.3f}ms" if "torch" in t else f"{'-':>12}"
            ratio = f"{t['torchlight'] / t['torch']:10.2f}" if "torch" in t else f"{'-':>10}"
            name = f"{model_name.upper()} {np.dtype(dtype).name}"
            print(
                f"{name:<22}{t['torchlight'] * 1e3:10.3f}ms{t['numpy'] * 1e3:10.3f}ms{torch_ms}"
                f"{t['torchlight'] / t['numpy']:10.2f}{ratio}"
            )
    if torch is None:
        print(f"({peer}: `pip install torch` to add the PyTorch column)")
    print()
    for model_name in ("mlp", "cnn"):
        seconds, peak = epoch_run(model_name)
        print(
            f"one epoch, python -m torchlight.train --model {model_name} (digits, Adam, batch {BATCH}): "
            f"{seconds:.3f} s, peak traced memory {peak:.1f} MB"
        )


if __name__ == "__main__":
    main()
