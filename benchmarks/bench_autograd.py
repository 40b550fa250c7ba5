"""Autograd overhead and large-matmul throughput: torchlight vs hand-written numpy vs PyTorch.

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_autograd.py``. Prints one table;
the ratio columns are torchlight's time divided by the peer's (lower is better for torchlight).
Figures depend on the machine and its load: compare columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import torchlight as tl

try:
    import torch
except ImportError:  # PyTorch is an optional peer, never a dependency
    torch = None


def best_time(fn: Callable[[], object], repeat: int, number: int) -> float:
    """The best of ``repeat`` runs of ``number`` calls, in seconds per call."""
    fn()  # warm up
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


# ------------------------------------------------------------------ 1000 chained small ops
CHAIN = 1000  # ops per chain: alternating mul by a constant and add of a constant (and tanh)


def chain(lib: Any, x0: np.ndarray) -> Callable[[], object]:
    """The chain in ``lib`` (torchlight or torch: the same code runs on both)."""

    def run() -> object:
        x = lib.tensor(x0, requires_grad=True)
        y = x
        for i in range(CHAIN // 2):
            y = (y * 0.999).tanh() if i % 8 == 0 else y * 0.999 + 0.001
        y.sum().backward()
        return x.grad

    return run


def chain_numpy(x0: np.ndarray) -> Callable[[], object]:
    """The same chain with its backward written by hand: the floor a Python framework can reach."""

    def run() -> object:
        y = x0
        saved = []
        for i in range(CHAIN // 2):
            if i % 8 == 0:
                y = np.tanh(y * 0.999)
                saved.append(y)
            else:
                y = y * 0.999 + 0.001
        grad = np.ones_like(x0)
        for i in reversed(range(CHAIN // 2)):
            if i % 8 == 0:
                grad = grad * (1 - saved.pop() ** 2) * 0.999
            else:
                grad = grad * 0.999
        return grad

    return run


# ------------------------------------------------------------------ matmul forward + backward
def matmul_torchlight(a: np.ndarray, b: np.ndarray) -> Callable[[], object]:
    ta, tb = tl.tensor(a, requires_grad=True), tl.tensor(b, requires_grad=True)

    def run() -> object:
        ta.grad = tb.grad = None
        out = ta @ tb
        out.backward(tl.ones_like(out))
        return ta.grad

    return run


def matmul_numpy(a: np.ndarray, b: np.ndarray) -> Callable[[], object]:
    def run() -> object:
        out = a @ b
        g = np.ones_like(out)
        return g @ b.T, a.T @ g

    return run


def matmul_torch(a: np.ndarray, b: np.ndarray) -> Callable[[], object]:
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)

    def run() -> object:
        ta.grad = tb.grad = None
        out = ta @ tb
        out.backward(torch.ones_like(out))
        return ta.grad

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []

    x0 = rng.standard_normal(16)
    times = {"torchlight": best_time(chain(tl, x0), args.repeat, 3) / CHAIN}
    times["numpy"] = best_time(chain_numpy(x0), args.repeat, 3) / CHAIN
    if torch is not None:
        times["pytorch"] = best_time(chain(torch, x0), args.repeat, 3) / CHAIN
    rows.append(("per-op overhead, fwd+bwd (us/op)", times, 1e6))

    for n in (512,):
        for dtype in (np.float64, np.float32):
            a = rng.standard_normal((n, n)).astype(dtype)
            b = rng.standard_normal((n, n)).astype(dtype)
            times = {
                "torchlight": best_time(matmul_torchlight(a, b), args.repeat, 3),
                "numpy": best_time(matmul_numpy(a, b), args.repeat, 3),
            }
            if torch is not None:
                times["pytorch"] = best_time(matmul_torch(a, b), args.repeat, 3)
            rows.append((f"matmul {n}x{n} fwd+bwd {np.dtype(dtype).name} (ms)", times, 1e3))

    peers = ["numpy"] + (["pytorch"] if torch is not None else [])
    header = f"{'benchmark':44} {'torchlight':>11}" + "".join(
        f" {p:>9} {'ratio':>6}" for p in peers
    )
    print(header)
    print("-" * len(header))
    for name, times, scale in rows:
        line = f"{name:44} {times['torchlight'] * scale:11.3f}"
        for p in peers:
            line += f" {times[p] * scale:9.3f} {times['torchlight'] / times[p]:6.2f}"
        print(line)
    if torch is None:
        print("(PyTorch not installed: `pip install torch` to add it as a peer)")
    else:
        print(
            f"(PyTorch {torch.__version__}, threads={torch.get_num_threads()}; numpy {np.__version__})"
        )


if __name__ == "__main__":
    main()
