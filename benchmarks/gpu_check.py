"""The GPU check: the CUDA tests on the device, then torchlight CUDA vs PyTorch CUDA vs CuPy.

    PYTHONPATH=. python benchmarks/gpu_check.py               # on a machine with an NVIDIA GPU
    PYTHONPATH=. python benchmarks/gpu_check.py --simulator   # tiny sizes, numba's simulator
    make gpu-check                                            # the first, with .venv's Python

It writes ONE Markdown report (``--out``, default ``benchmarks/results/gpu_check.md``) and
prints it. On a GPU it takes under 5 minutes and needs nothing beyond Python, numpy, numba and
numba-cuda (PyTorch and CuPy are measured when they are installed; pytest runs the CUDA test
files when it is installed, otherwise this script checks the whole op table itself):

1. the CUDA tests against the real device (``TORCHLIGHT_TEST_CUDA=gpu``);
2. ``benchmarks/bench_backends.py --device --quick`` (every backend side by side, and the
   CUDA matmul 4096 as a share of the fp32 peak);
3. matmul 1024/4096 (float32), elementwise add of 1e7, a sum of 1e7, conv2d on a digits batch,
   one MLP and one CNN training step, and host<->device transfers: the time of each through
   torchlight's public API, PyTorch's and CuPy's, GFLOP/s or GB/s, and the share of the GPU's
   fp32 peak (SMs x FP32 cores per SM x 2 x clock, from the device's properties) or of its
   memory bandwidth (2 x memory clock x bus width). torchlight's "kernel" column is the GPU time
   of the same calls queued behind a sleeping kernel, so Python's launch overhead is hidden:
   the kernels' own speed. Below the table, for one MLP and one CNN training step after two
   warm-up steps: how many device buffers numba allocated (the caching allocator should serve
   all), how many host -> device copies it made, and ``tl.cuda.memory_allocated`` /
   ``memory_reserved`` (the CNN's step only on a GPU: in the simulator it takes seconds).

In the simulator (``--simulator``, or ``NUMBA_ENABLE_CUDASIM=1``) the same steps run at tiny
sizes and the report says "simulator": its times are those of Python threads, not of a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Sizes on a GPU and in the simulator.
SIZES = {
    "gpu": {"matmul": (1024, 4096), "elementwise": 10**7, "batch": 64, "hidden": 128, "rounds": 3},
    "simulator": {"matmul": (16, 32), "elementwise": 1000, "batch": 1, "hidden": 8, "rounds": 1},
}
#: FP32 cores per multiprocessor by compute capability (CUDA C Programming Guide, "Arithmetic
#: instructions"); a capability not listed is taken as 128 and the report says so.
FP32_CORES = {
    (6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128,
    (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128,
}  # fmt: skip
TEST_FILES = ["tests/test_backend_cuda.py", "tests/test_backend_conformance.py"]
TEST_FILES += ["tests/test_backend_training.py"]


# ------------------------------------------------------------------ the machine
def choose_mode(simulator: bool) -> str:
    """``"simulator"`` or ``"gpu"``; decided before anything imports numba.cuda."""
    if simulator:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return "simulator"
    from numba import cuda

    if not cuda.is_available():
        raise SystemExit(
            "gpu_check: no CUDA GPU found (numba.cuda.is_available() is False). On a machine "
            "without one, run `python benchmarks/gpu_check.py --simulator` for the tiny version."
        )
    return "gpu"


@dataclass
class Device:
    name: str
    fp32_tflops: float | None  # peak
    bandwidth_gbs: float | None  # peak memory bandwidth
    notes: list[str]


def _attribute(device: Any, name: str) -> int | None:
    try:
        return int(getattr(device, name))
    except Exception:  # an attribute a driver or numba-cuda version does not offer
        return None


def describe_device(mode: str) -> Device:
    """The GPU's name and peaks, from its properties (numba, else PyTorch / nvidia-smi)."""
    if mode == "simulator":
        return Device("numba CUDA simulator (no GPU)", None, None, ["simulator: no peaks"])
    from numba import cuda

    device = cuda.get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    cc = tuple(device.compute_capability)
    sms = _attribute(device, "MULTIPROCESSOR_COUNT")
    clock_khz = _attribute(device, "CLOCK_RATE")
    notes = [f"compute capability {cc[0]}.{cc[1]}, {sms} SMs"]
    if clock_khz is None:  # CUDA 13 dropped the attribute from some APIs: ask nvidia-smi
        try:
            query = ["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"]
            done = subprocess.run(query, capture_output=True, text=True, timeout=20)
            clock_khz = int(float(done.stdout.split()[0]) * 1000)
            notes.append("SM clock from nvidia-smi (clocks.max.sm)")
        except Exception:
            notes.append("SM clock unknown: no fp32 peak")
    cores = FP32_CORES.get(cc)  # type: ignore[call-overload]
    if cores is None:
        cores = 128
        notes.append(f"FP32 cores per SM for cc {cc} not in the table: taken as 128")
    peak = sms * cores * 2 * clock_khz * 1e3 / 1e12 if sms and clock_khz else None
    if peak:
        notes.append(
            f"fp32 peak = {sms} SMs x {cores} cores x 2 x {clock_khz / 1e6:.3f} GHz "
            f"= {peak:.1f} TFLOP/s"
        )
    memory_khz = _attribute(device, "MEMORY_CLOCK_RATE")
    bus_bits = _attribute(device, "GLOBAL_MEMORY_BUS_WIDTH")
    bandwidth = 2 * memory_khz * 1e3 * bus_bits / 8 / 1e9 if memory_khz and bus_bits else None
    if bandwidth:
        notes.append(
            f"memory bandwidth = 2 x {memory_khz / 1e6:.3f} GHz x {bus_bits} bits / 8 "
            f"= {bandwidth:.0f} GB/s"
        )
    return Device(name, peak, bandwidth, notes)


def versions() -> list[str]:
    import numba
    import numpy as np
    from numba import cuda

    out = [f"Python {platform.python_version()}", f"numpy {np.__version__}"]
    out.append(f"numba {numba.__version__}")
    out.append(f"numba.cuda: {getattr(cuda, 'implementation', 'Built-in')} ({cuda.__file__})")
    for peer in ("torch", "cupy", "pytest"):
        if importlib.util.find_spec(peer) is None:
            out.append(f"{peer}: not installed")
        else:
            module = __import__(peer)
            out.append(f"{peer} {module.__version__}")
    return out


# ------------------------------------------------------------------ 1. the tests
def run_tests(mode: str, budget: float) -> list[str]:
    """The CUDA test files under pytest on the device (or the op table here, without pytest)."""
    if mode == "simulator":
        return ["simulator: the CUDA tests run in `make test`; here a few op-table rows:"] + (
            op_table_check(budget, only=("add", "matmul", "conv2d", "max_pool2d"))
        )
    if importlib.util.find_spec("pytest") is None:
        return ["pytest is not installed: the op table checked by this script:"] + (
            op_table_check(budget)
        )
    command = [sys.executable, "-m", "pytest", "--noconftest", "-q", "-p", "no:cacheprovider"]
    command += [*TEST_FILES, "-k", "cuda", "-o", "addopts="]
    env = {**os.environ, "TORCHLIGHT_TEST_CUDA": "gpu", "PYTHONPATH": str(ROOT)}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=budget
        )
    except subprocess.TimeoutExpired as stopped:
        tail = (stopped.stdout or b"")[-1500:]
        text = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        return [f"pytest stopped at the time budget ({budget:.0f} s)", "```", text, "```"]
    lines = done.stdout.strip().splitlines()
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))][:20]
    summary = lines[-1] if lines else done.stderr[-500:]
    seconds = time.perf_counter() - start
    return [
        f"`TORCHLIGHT_TEST_CUDA=gpu pytest {' '.join(TEST_FILES)} -k cuda`: "
        f"**{summary}** (exit {done.returncode}, {seconds:.0f} s)",
        *[f"- {line}" for line in failures],
    ]


def op_table_check(budget: float, only: tuple[str, ...] = ()) -> list[str]:
    """Every op-table case on the CUDA backend: forward and gradients against numpy's."""
    import numpy as np

    import torchlight as tl
    from tests.op_table import OPS, make_inputs
    from torchlight.backends import get_backend

    def run(op: Any, shapes: Any, permuted: bool, backend: Any) -> list[np.ndarray]:
        _, tensors = make_inputs(op, shapes, seed=3, permuted=permuted, backend=backend)
        out = op.tl_fn(*tensors)
        results = [out.detach().to("numpy").numpy()]
        if op.grad and out.numel() > 0:
            grad = np.random.default_rng(4).normal(size=out.shape)
            out.backward(tl.tensor(grad, backend=backend))
            results += [t.grad.to("numpy").numpy() for t in tensors]
        return results

    cuda, numpy = get_backend("cuda"), get_backend("numpy")
    passed, failed, start = 0, [], time.perf_counter()
    cases = [
        (op, shapes, permuted)
        for op in OPS
        if not only or op.name in only
        for shapes in op.shapes
        for permuted in (False, True)
        if not (permuted and "contiguous_only" in op.tags)
    ]
    for op, shapes, permuted in cases:
        if time.perf_counter() - start > budget:
            break
        try:
            got, expected = run(op, shapes, permuted, cuda), run(op, shapes, permuted, numpy)
            for g, e in zip(got, expected, strict=True):
                np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
            passed += 1
        except Exception as error:
            failed.append(f"- {op.name} {shapes}{' permuted' if permuted else ''}: {error!r:.200}")
    left = len(cases) - passed - len(failed)
    line = f"**{passed} passed, {len(failed)} failed** of {len(cases)} op-table cases"
    return [line + (f" ({left} not run: time budget)" if left else ""), *failed[:20]]


# ------------------------------------------------------------------ 2. bench_backends --device
def bench_backends(mode: str, budget: float) -> list[str]:
    if mode == "simulator":
        return ["simulator: `bench_backends.py --device` needs a real GPU (not run)"]
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_backends.py"), "--device"]
    command.append("--quick")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=budget
        )
        text = done.stdout if done.returncode == 0 else done.stdout + done.stderr[-2000:]
    except subprocess.TimeoutExpired as stopped:
        out = stopped.stdout or b""
        text = out.decode(errors="replace") if isinstance(out, bytes) else out
        text += f"\n(stopped at the time budget, {budget:.0f} s)"
    return ["`python benchmarks/bench_backends.py --device --quick`:", "```", text.strip(), "```"]


# ------------------------------------------------------------------ 3. side by side
@dataclass
class Row:
    name: str
    work: float  # FLOPs, or bytes moved
    unit: str  # "flop" or "byte"
    times: dict[str, float | None]  # seconds per call: torchlight, kernel, torch, cupy, numpy


def per_call(
    fn: Callable[[], Any], sync: Callable[[], None], budget: float, rounds: int = 3
) -> float:
    """Best seconds per call: warm-up calls, then at least ``rounds`` calls (more while under
    ``budget`` seconds), each ended by ``sync``."""
    for _ in range(min(rounds, 2)):
        fn()
    sync()
    best, spent, done = float("inf"), 0.0, 0
    while done < rounds or (spent < budget and done < 20):
        start = time.perf_counter()
        fn()
        sync()
        seconds = time.perf_counter() - start
        best, spent, done = min(best, seconds), spent + seconds, done + 1
    return best


class KernelTimer:
    """GPU seconds per call of ``fn``, its launches queued behind a kernel that sleeps, so the
    GPU runs them back to back however slowly Python issues them (CUDA events around them)."""

    def __init__(self) -> None:
        from numba import cuda

        @cuda.jit
        def sleep(microseconds):  # pragma: no cover - runs on the GPU
            for _ in range(microseconds):
                cuda.nanosleep(1000)

        self.cuda, self.sleep = cuda, sleep
        self.sleep[1, 1](1)  # compile
        cuda.synchronize()

    def __call__(self, fn: Callable[[], Any], calls: int) -> float:
        cuda = self.cuda
        fn()
        cuda.synchronize()
        best = float("inf")
        for _ in range(3):
            start, end = cuda.event(), cuda.event()
            # numba frees device memory in batches, and a free waits for the GPU: deferred
            # here, so that no free makes Python wait for the sleeping kernel mid-queue
            with cuda.defer_cleanup():
                self.sleep[1, 1](20_000)  # about 20 ms (nanosleep is approximate)
                start.record()
                for _ in range(calls):
                    fn()
                end.record()
                end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3 / calls)
        return best


def side_by_side(mode: str, budget: float) -> list[Row]:
    import numpy as np
    from numba import cuda

    import torchlight as tl
    from torchlight.data import digits
    from torchlight.nn import functional as F

    size = SIZES[mode]
    on_gpu = mode == "gpu"
    torch = _import_peer("torch") if on_gpu else None
    cupy = _import_peer("cupy") if on_gpu else None
    kernel_time = KernelTimer() if on_gpu else None
    tl_sync = cuda.synchronize

    def torch_sync() -> None:
        torch.cuda.synchronize()

    def cupy_sync() -> None:
        cupy.cuda.Device().synchronize()

    rows: list[Row] = []
    rng = np.random.default_rng(0)

    def measure(name: str, work: float, unit: str, fns: dict[str, Any], calls: int = 10) -> None:
        times: dict[str, float | None] = {}
        syncs = {"torchlight": tl_sync, "torch": torch_sync, "cupy": cupy_sync, "numpy": _no_sync}
        for who, fn in fns.items():
            times[who] = per_call(fn, syncs[who], budget, size["rounds"]) if fn else None
        if kernel_time is not None and fns.get("torchlight") is not None:
            times["kernel"] = kernel_time(fns["torchlight"], calls)
        rows.append(Row(name, work, unit, times))

    with tl.no_grad():
        for n in size["matmul"]:
            a = rng.standard_normal((n, n), dtype=np.float32)
            ta = tl.tensor(a, backend="cuda")
            fns: dict[str, Any] = {"torchlight": lambda ta=ta: ta @ ta}
            if torch is not None:
                torch.backends.cuda.matmul.allow_tf32 = False  # fp32 against fp32
                torch.backends.cudnn.allow_tf32 = False  # (convolutions too)
                pa = torch.from_numpy(a).cuda()
                fns["torch"] = lambda pa=pa: pa @ pa
            if cupy is not None:
                ca = cupy.asarray(a)
                fns["cupy"] = lambda ca=ca: ca @ ca
            measure(f"matmul {n} float32", 2 * n**3, "flop", fns, calls=3 if n > 2000 else 10)

        n = size["elementwise"]
        x, y = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
        tx, ty = tl.tensor(x, backend="cuda"), tl.tensor(y, backend="cuda")
        px, py = (torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()) if torch else (0, 0)
        cx, cy = (cupy.asarray(x), cupy.asarray(y)) if cupy else (0, 0)
        measure(
            f"elementwise add of {n:,} float32",
            3 * 4 * n,
            "byte",
            {
                "torchlight": lambda: tx + ty,
                "torch": (lambda: px + py) if torch else None,
                "cupy": (lambda: cx + cy) if cupy else None,
            },
        )
        measure(
            f"sum of {n:,} float32",
            4 * n,
            "byte",
            {
                "torchlight": lambda: tx.sum(),
                "torch": (lambda: px.sum()) if torch else None,
                "cupy": (lambda: cx.sum()) if cupy else None,
            },
        )
        batch = size["batch"]
        images, labels = digits(True, images=True).tensors
        xb = images[:batch].to(tl.float32)
        w1 = tl.randn(8, 1, 3, 3, dtype=tl.float32)
        b1 = tl.zeros(8, dtype=tl.float32)
        fns = {
            "torchlight": lambda: F.conv2d(gx, gw, gb, padding=1),
            "numpy": lambda: F.conv2d(xb, w1, b1, padding=1),
        }
        gx, gw, gb = xb.to("cuda"), w1.to("cuda"), b1.to("cuda")
        if torch is not None:
            tconv = torch.nn.functional.conv2d
            tx4, tw, tb = (torch.from_numpy(t.numpy()).cuda() for t in (xb, w1, b1))
            fns["torch"] = lambda: tconv(tx4, tw, tb, padding=1)
        flops = 2 * batch * 8 * 1 * 9 * 64
        measure(f"conv2d 1->8 3x3, digits batch {batch}", flops, "flop", fns)

    for model_name in ("mlp", "cnn"):
        steps: dict[str, Any] = {}
        for who in ("torchlight", "numpy"):
            steps[who] = _tl_step(model_name, "cuda" if who == "torchlight" else "numpy", size)
        if torch is not None:
            steps["torch"] = _torch_step(torch, model_name, size)
        name = f"{model_name.upper()} training step (SGD, batch {batch}, float32)"
        measure(name, 0, "", steps, calls=5)

    n = size["elementwise"]
    host = rng.standard_normal(n, dtype=np.float32)
    on_host = tl.tensor(host)
    on_device = on_host.to("cuda")
    for name, t, up in (("host -> device", on_host, True), ("device -> host", on_device, False)):
        rows.append(_transfer_row(name, 4 * n, t, torch, cupy, host, budget, up, size["rounds"]))
    return rows


def step_memory(mode: str) -> list[str]:
    """What one MLP and one CNN (on a GPU; in the simulator its steps take seconds) training
    step on the CUDA backend ask of numba after two warm-up steps: device allocations (the
    caching allocator should serve them all), host -> device copies, and the allocator's
    memory_allocated / memory_reserved (bytes)."""
    from collections import Counter

    import torchlight as tl
    from torchlight.backends.cuda_kernels import cuda

    counts: Counter = Counter()
    array_type = type(cuda.device_array(1))
    originals = {
        "device_array": cuda.device_array,
        "to_device": cuda.to_device,
        "copy_to_device": array_type.copy_to_device,
    }

    def counting(name: str, *keys: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts.update(keys)
            return originals[name](*args, **kwargs)

        return call

    lines = []
    for model_name in ("mlp", "cnn") if mode == "gpu" else ("mlp",):
        step = _tl_step(model_name, "cuda", SIZES[mode])
        step(), step()  # warm-up: the second step may still need a few more buffers
        counts.clear()
        cuda.device_array = counting("device_array", "allocations")
        cuda.to_device = counting("to_device", "allocations", "copies")
        array_type.copy_to_device = counting("copy_to_device", "copies")
        try:
            step()
        finally:
            cuda.device_array, cuda.to_device = originals["device_array"], originals["to_device"]
            array_type.copy_to_device = originals["copy_to_device"]
        lines.append(
            f"- {model_name.upper()} training step: {counts['allocations']} device allocations, "
            f"{counts['copies']} host -> device copies; memory_allocated "
            f"{tl.cuda.memory_allocated():,} bytes, memory_reserved "
            f"{tl.cuda.memory_reserved():,} bytes"
        )
    return lines


def _no_sync() -> None:
    return None


def _import_peer(name: str) -> Any:
    if importlib.util.find_spec(name) is None:
        return None
    module = __import__(name)
    if name == "torch" and not module.cuda.is_available():
        return None
    return module


def _tl_step(model_name: str, backend: str, size: dict[str, Any]) -> Callable[[], Any]:
    """One SGD step of the digits MLP (64 -> hidden -> 10) or CNN (``torchlight.train``)."""
    import torchlight as tl
    from torchlight import nn, optim
    from torchlight.data import digits
    from torchlight.nn import functional as F
    from torchlight.train import build_model

    tl.manual_seed(0)
    if model_name == "mlp":
        model = nn.Sequential(
            nn.Linear(64, size["hidden"]), nn.ReLU(), nn.Linear(size["hidden"], 10)
        )
    else:
        model = build_model("cnn", "digits")
    model = model.to(tl.float32).to(backend)
    optimizer = optim.SGD(model.parameters(), lr=0.01)
    x, y = digits(True, images=model_name == "cnn").tensors
    x, y = x[: size["batch"]].to(tl.float32).to(backend), y[: size["batch"]].to(backend)

    def step() -> Any:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def _torch_step(torch: Any, model_name: str, size: dict[str, Any]) -> Callable[[], Any]:
    from torchlight.data import digits

    nn = torch.nn
    if model_name == "mlp":
        model = nn.Sequential(
            nn.Linear(64, size["hidden"]), nn.ReLU(), nn.Linear(size["hidden"], 10)
        )
    else:
        model = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 10),
        )  # fmt: skip
    model = model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = digits(True, images=model_name == "cnn").tensors
    tx = torch.from_numpy(x.numpy()[: size["batch"]].astype("float32")).cuda()
    ty = torch.from_numpy(y.numpy()[: size["batch"]]).cuda()

    def step() -> Any:
        loss = torch.nn.functional.cross_entropy(model(tx), ty)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def _transfer_row(
    name: str,
    nbytes: int,
    t: Any,
    torch: Any,
    cupy: Any,
    host: Any,
    budget: float,
    up: bool,
    rounds: int,
) -> Row:
    from numba import cuda

    times: dict[str, float | None] = {}
    target = "cuda" if up else "numpy"
    times["torchlight"] = per_call(lambda: t.to(target), cuda.synchronize, budget, rounds)
    if torch is not None:
        device_tensor = torch.from_numpy(host).cuda()
        fn = (lambda: torch.from_numpy(host).cuda()) if up else (lambda: device_tensor.cpu())
        times["torch"] = per_call(fn, torch.cuda.synchronize, budget, rounds)
    if cupy is not None:
        device_array = cupy.asarray(host)
        fn = (lambda: cupy.asarray(host)) if up else (lambda: cupy.asnumpy(device_array))
        times["cupy"] = per_call(fn, cupy.cuda.Device().synchronize, budget, rounds)
    return Row(f"{name}, {nbytes:,} bytes (pageable)", nbytes, "byte", times)


# ------------------------------------------------------------------ the report
def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def _rate(row: Row, seconds: float | None, device: Device) -> str:
    if seconds is None or not row.unit or seconds <= 0:
        return "-"
    if row.unit == "flop":
        gflops = row.work / seconds / 1e9
        peak = f" ({100 * gflops / 1e3 / device.fp32_tflops:.1f}%)" if device.fp32_tflops else ""
        return f"{gflops:,.1f} GFLOP/s{peak}"
    gbs = row.work / seconds / 1e9
    transfer = row.name.startswith(("host", "device"))
    share = device.bandwidth_gbs and not transfer
    return f"{gbs:,.1f} GB/s" + (f" ({100 * gbs / device.bandwidth_gbs:.0f}%)" if share else "")


def table(rows: list[Row], device: Device) -> list[str]:
    lines = [
        "| benchmark | torchlight CUDA ms | torchlight kernels ms | PyTorch CUDA ms | CuPy ms | "
        "torchlight numpy (CPU) ms | torchlight rate (% of peak) | kernels rate | PyTorch rate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        t = row.times
        lines.append(
            f"| {row.name} | {_ms(t.get('torchlight'))} | {_ms(t.get('kernel'))} | "
            f"{_ms(t.get('torch'))} | {_ms(t.get('cupy'))} | {_ms(t.get('numpy'))} | "
            f"{_rate(row, t.get('torchlight'), device)} | {_rate(row, t.get('kernel'), device)} | "
            f"{_rate(row, t.get('torch'), device)} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--simulator", action="store_true", help="tiny sizes in the simulator")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_check.md"
    )
    parser.add_argument("--skip-tests", action="store_true", help="only the benchmarks")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    mode = choose_mode(args.simulator)
    device = describe_device(mode)
    budget = 0.2 if mode == "gpu" else 0.0
    report = [f"# torchlight GPU check: {device.name}", ""]
    if mode == "simulator":
        report += [
            "**simulator**: numba's CUDA simulator at tiny sizes; the times are those of Python "
            "threads, not of a GPU. The GPU numbers remain to be measured on a GPU machine.",
            "",
        ]
    report += ["## Machine", "", *[f"- {line}" for line in versions() + device.notes], ""]
    report += ["## 1. CUDA tests on the device", ""]
    if args.skip_tests:
        report += ["(skipped: --skip-tests)", ""]
    else:
        report += [*run_tests(mode, 140.0 if mode == "gpu" else 30.0), ""]
    report += ["## 2. The `--device` benchmark", "", *bench_backends(mode, 80.0), ""]
    rows = side_by_side(mode, budget)
    report += ["## 3. torchlight CUDA vs PyTorch CUDA vs CuPy", "", *table(rows, device), ""]
    report += ["Per training step, after two warm-up steps (the same batch every step):", ""]
    report += [*step_memory(mode), ""]
    report += [
        "Times are the best of several calls, each ended by a synchronize; rates are GFLOP/s "
        "(matmul, conv) or GB/s moved (elementwise: 2 reads + 1 write; sum: 1 read), with the "
        "share of the fp32 peak or of the memory bandwidth in brackets. 'torchlight kernels' is "
        "the GPU time of the same calls queued back to back (CUDA events), without Python's "
        "launch overhead (for a training step an upper bound: cross-entropy checks its labels "
        "on the host, and that copy lets the queue drain). Training steps: forward, "
        "cross-entropy, backward, SGD update; 'torchlight numpy (CPU)' is the same step on the "
        "numpy backend.",
        "",
        f"Whole check: {time.perf_counter() - start:.0f} s.",
    ]
    text = "\n".join(report) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(f"(written to {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
