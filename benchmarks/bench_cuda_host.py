"""The CUDA backend's host side: what one training step costs in Python before any kernel runs.

    PYTHONPATH=. python benchmarks/bench_cuda_host.py [--batch 64] [--steps 30]

A GPU runs a small model's kernels in microseconds; the step's time is then the Python that
prepares and launches them, which no GPU can hide. This script measures that part without a GPU:
it runs the digits MLP and CNN training steps of ``benchmarks/gpu_check.py`` on the CUDA backend
in numba's simulator with every kernel launch replaced by a counter (so the tensors hold garbage;
the control flow is the same, as no step looks at a value except the labels, which are copied,
not computed), and prints the host milliseconds per step, the launches, the microseconds of
torchlight's own Python per launch, and the same step on the numpy backend (which computes) side
by side. numba-cuda's own launch cost (argument marshalling, the driver call) comes on top on a
GPU; ``make gpu-check`` measures the whole.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"


def best_ms(step: Any, steps: int) -> float:
    for _ in range(3):
        step()
    best = float("inf")
    for _ in range(steps):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args(argv)

    import gpu_check

    from torchlight.backends import get_backend

    launches = [0]

    def count(*_: Any, **__: Any) -> None:
        launches[0] += 1

    get_backend("cuda").launcher = count  # type: ignore[attr-defined]  # every launch

    size = {"batch": args.batch, "hidden": 128}
    print(f"digits training steps (SGD, float32, batch {args.batch}), best of {args.steps}:")
    print(
        f"{'model':6} {'numpy step ms':>14} {'CUDA host ms':>13} {'launches':>9} "
        f"{'us per launch':>14} {'host / numpy':>13}"
    )
    for model in ("mlp", "cnn"):
        numpy_ms = best_ms(gpu_check._tl_step(model, "numpy", size), args.steps)
        step = gpu_check._tl_step(model, "cuda", size)
        host_ms = best_ms(step, args.steps)
        launches[0] = 0
        step()
        per_launch = host_ms * 1e3 / max(launches[0], 1)
        print(
            f"{model:6} {numpy_ms:14.3f} {host_ms:13.3f} {launches[0]:9d} {per_launch:14.1f} "
            f"{host_ms / numpy_ms:12.2f}x"
        )
    print()
    # numba's marshalling needs numba-cuda without its simulator: in a process of its own
    done = subprocess.run(
        [sys.executable, "-c", MARSHALLING],
        env={k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    print(done.stdout.strip() or done.stderr[-2000:])
    return 0


#: The per-launch cost of numba's argument marshalling against a plan's, for a zip kernel's
#: arguments (3 arrays, 3 offsets, 4 one-element tuples) on made-up device memory.
MARSHALLING = """
import ctypes, timeit
import numpy as np
from numba.cuda.cudadrv import driver
from numba.cuda.cudadrv.devicearray import DeviceNDArray
from numba.cuda.dispatcher import LaunchConfig, _Kernel
from numba.cuda.typing.typeof import Purpose, typeof
from torchlight.backends.cuda import launch as cuda_launch

memory = driver.MemoryPointer(context=None, pointer=driver.binding.CUdeviceptr(4096), size=1 << 20)
def array(n):
    return DeviceNDArray(shape=(n,), strides=(4,), dtype=np.float32, gpu_data=memory)
args = (array(640), 0, (1,), array(640), 0, (1,), array(10), 0, (0,), (640,))
types = tuple(typeof(a, Purpose.argument) for a in args)
class Numbas:
    extensions = []
    _prepare_args = _Kernel._prepare_args
numba = Numbas()
packers = [cuda_launch.packer(t) for t in types]
def numbas():
    cuda_launch.numba_parameters(numba, types, args)
def planned():
    cuda_launch.signature_key(args)
    cuda_launch.pack(packers, args)
    LaunchConfig(grid=(4, 1, 1), block=(128, 1, 1), shmem_size=0, is_cooperative=False)
n = 20000
a = min(timeit.repeat(numbas, number=n, repeat=3)) / n * 1e6
b = min(timeit.repeat(planned, number=n, repeat=3)) / n * 1e6
print("argument marshalling per launch of a zip kernel (3 arrays, 7 integers and tuples):")
print(f"  numba-cuda's _prepare_args {a:6.1f} us")
print(f"  a plan (key, packers, LaunchConfig) {b:6.1f} us   ({a / b:.1f}x less)")
print("  (numba's typing of the arguments and the driver call come on top of numba's; the")
print("  driver call on top of the plan's: measured on a GPU by make gpu-check)")
"""


if __name__ == "__main__":
    sys.exit(main())
