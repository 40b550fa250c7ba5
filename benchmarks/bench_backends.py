"""Backends side by side: one table of times per op, backend and dtype.

    python benchmarks/bench_backends.py              # numpy, numba, strided on the CPU
    python benchmarks/bench_backends.py --device     # + the CUDA backend on a real GPU
    python benchmarks/bench_backends.py --quick      # fewer repeats (a smoke run)
    python benchmarks/bench_backends.py --only exp   # just the benchmarks whose name has "exp"

Times are the best of several runs (this machine may be shared), in milliseconds, through the
public tensor API under ``tl.no_grad()`` (so they include torchlight's small per-op overhead).
The pure-Python strided backend is measured on small sizes and scaled up to the listed size
(by element count, or by n^3 for matmul); those cells are marked ``~``. Numba's cold compile
and warm-cache load are measured in fresh processes with an empty, then a filled, cache dir.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torchlight as tl  # noqa: E402
from torchlight import nn, optim  # noqa: E402
from torchlight.data import digits  # noqa: E402
from torchlight.nn import functional as F  # noqa: E402


def best_time(
    fn: Callable[[], Any], sync: Callable[[], None], budget: float, repeats: int = 3
) -> float:
    """The fastest of at least ``repeats`` runs (more while under ``budget`` seconds), in seconds."""
    fn()  # warm up (compiles kernels)
    sync()
    times: list[float] = []
    spent = 0.0
    while len(times) < repeats or (spent < budget and len(times) < 50):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return min(times)


def mlp_step(backend: str, dtype: Any) -> Callable[[], None]:
    """One Adam step of the digits MLP (64 -> 128 -> 10) on a batch of 64."""
    tl.manual_seed(0)
    x, y = digits(train=True).tensors
    x, y = x[:64].to(dtype).to(backend), y[:64].to(backend)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(dtype).to(backend)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    return step


# name -> (full size, the size the strided backend runs, scale factor, builder)
def cases(backend: str, dtype: Any, small: bool) -> dict[str, tuple[float, Callable[[], None]]]:
    """Each benchmark as (how much to scale the measured time, the function to time)."""
    rng = np.random.default_rng(0)

    def t(*shape: int) -> tl.Tensor:
        return tl.tensor(rng.uniform(0.5, 1.5, shape), dtype=dtype, backend=backend)

    n = 10_000 if small else 1_000_000
    side = 100 if small else 1000
    a, b = t(n), t(n)
    m, row = t(side, side), t(side)
    out: dict[str, tuple[float, Callable[[], None]]] = {
        "add 1e6": (1e6 / n, lambda: a + b),
        "exp 1e6": (1e6 / n, lambda: a.exp()),
        "broadcast add 1000x1000 + 1000": ((1000 / side) ** 2, lambda: m + row),
        "sum axis 0 of 1000x1000": ((1000 / side) ** 2, lambda: m.sum(0)),
        "sum axis 1 of 1000x1000": ((1000 / side) ** 2, lambda: m.sum(1)),
    }
    for size in (256, 512):
        k = 32 if small else size
        p, q = t(k, k), t(k, k)
        out[f"matmul {size}"] = ((size / k) ** 3, lambda p=p, q=q: p @ q)
    out["MLP train step (batch 64)"] = (1.0, mlp_step(backend, dtype))
    return out


def measure(
    backend: str, dtype: Any, budget: float, only: str = ""
) -> dict[str, tuple[float, bool]]:
    """{benchmark: (milliseconds, extrapolated?)} for one backend and dtype (names with ``only``)."""
    small = backend == "strided"
    sync: Callable[[], None] = lambda: None  # noqa: E731
    if backend == "cuda":
        from numba import cuda

        sync = cuda.synchronize
    results = {}
    for name, (scale, fn) in cases(backend, dtype, small).items():
        if only not in name:
            continue
        with tl.no_grad() if "train" not in name else contextlib.nullcontext():
            seconds = best_time(
                fn, sync, budget if not small else budget / 4, repeats=1 if small else 3
            )
        results[name] = (seconds * scale * 1e3, small and scale != 1.0)
    return results


PROBE = """
import time
start = time.perf_counter()
import torchlight as tl
from benchmarks.bench_backends import cases
for dtype in (tl.float64, tl.float32):
    for name, (_, fn) in cases("numba", dtype, small=True).items():
        fn()
print(time.perf_counter() - start)
"""


def compile_times() -> tuple[float, float]:
    """Seconds for a fresh process to run every benchmark op on numba: cold cache, then warm."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        runs = []
        for _ in range(2):
            done = subprocess.run(
                [sys.executable, "-c", PROBE],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(float(done.stdout.strip().splitlines()[-1]))
    return runs[0], runs[1]


def gpu_matmul_4096() -> str:
    """The CUDA backend's float32 matmul 4096 as a share of the GPU's fp32 peak."""
    from numba import cuda

    device = cuda.get_current_device()
    cc = device.compute_capability
    cores = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 9): 128, (9, 0): 128}.get(cc, 128)
    clock_ghz = device.CLOCK_RATE / 1e6
    peak = device.MULTIPROCESSOR_COUNT * cores * clock_ghz * 2 / 1e3  # TFLOP/s
    x = tl.randn(4096, 4096, dtype=tl.float32, backend="cuda")
    with tl.no_grad():
        seconds = best_time(lambda: x @ x, cuda.synchronize, 2.0)
    tflops = 2 * 4096**3 / seconds / 1e12
    return (
        f"CUDA matmul 4096 float32: {seconds * 1e3:.2f} ms = {tflops:.2f} TFLOP/s = "
        f"{100 * tflops / peak:.1f}% of the fp32 peak {peak:.1f} TFLOP/s "
        f"({device.name.decode() if isinstance(device.name, bytes) else device.name}, cc {cc[0]}.{cc[1]})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--device", action="store_true", help="also run the CUDA backend on a real GPU"
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no compile-time probe")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    parser.add_argument(
        "--only", metavar="TEXT", default="", help="run only the benchmarks whose name has TEXT"
    )
    args = parser.parse_args(argv)
    budget = 0.05 if args.quick else 0.5
    backends = ["numpy", "numba", "strided"] + (["cuda"] if args.device else [])
    table: dict[str, dict[str, dict[str, tuple[float, bool]]]] = {}
    for dtype in (tl.float64, tl.float32):
        for backend in backends:
            table.setdefault(dtype.name, {})[backend] = measure(backend, dtype, budget, args.only)
    names = list(next(iter(next(iter(table.values())).values())))
    width = max(map(len, names)) + 2
    for dtype_name, by_backend in table.items():
        print(f"\n{dtype_name}: milliseconds (best of several runs; ~ = strided, extrapolated)")
        print(
            "".ljust(width)
            + "".join(b.rjust(12) for b in backends)
            + "  numpy/numba  strided/numba"
        )
        for name in names:
            cells = []
            for b in backends:
                ms, extrapolated = by_backend[b][name]
                cells.append((("~" if extrapolated else "") + f"{ms:.3f}").rjust(12))
            numba_ms = by_backend["numba"][name][0]
            ratio = by_backend["numpy"][name][0] / numba_ms
            vs_strided = by_backend["strided"][name][0] / numba_ms
            print(name.ljust(width) + "".join(cells) + f"{ratio:12.2f}x{vs_strided:13.0f}x")
    if not args.quick and not args.only:
        cold, warm = compile_times()
        print(
            "\nnumba, a fresh process running every op above (float64 + float32): "
            f"cold cache {cold:.1f} s, warm cache {warm:.1f} s"
        )
    if args.device:
        print(gpu_matmul_4096())
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
