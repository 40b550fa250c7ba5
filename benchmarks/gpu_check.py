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
   the kernels' own speed;
4. for one MLP and one CNN training step on the CUDA backend, after its warm-up steps: the
   kernel launches (in all, and the five kernels launched most), the host -> device and
   device -> host copies, the device buffers numba allocated (the caching allocator should
   serve all), ``tl.cuda.memory_allocated`` / ``memory_reserved``, and on a GPU the step's wall
   time divided by its launches: the host's cost of one launch, what a training step of small
   tensors is made of (and how many launches the backend's Launcher planned, and why it kept
   numba's launch for a kernel). The counts come from wrapping, for that one step only, the
   backend's ``Launcher.__call__`` and the kernels' ``kernel[grid, block]`` (``__getitem__`` of
   the class ``cuda.jit`` returns: numba-cuda's ``CUDADispatcher``, or the simulator's
   ``FakeCUDAKernel``), ``cuda.device_array``, ``cuda.to_device`` and the device arrays'
   ``copy_to_device`` / ``copy_to_host``.

The check never loses its report to one failure: every item (the machine's description, the
tests, the ``--device`` benchmark, each cell of each row of the table, each training step's
counts) runs in a guard that writes an exception into the report where the item's output
would have been (its type, message and the last lines of its traceback) and goes on with the
next item. The report is written after every section (a crash or a kill leaves what was done)
and at the end; its top says how many items failed. Items not started before the whole
check's deadline (``--deadline``, 270 s) are listed as not run, and the check finishes; an
item still running 60 s after it (a kernel or a driver call that never returns) is ended by a
watchdog that writes the report first, and so is the check on SIGTERM or Ctrl-C. The exit
status is 1 if any item failed, else 0.

In the simulator (``--simulator``, or ``NUMBA_ENABLE_CUDASIM=1``) the same steps run at tiny
sizes and the report says "simulator": its times are those of Python threads, not of a GPU.
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import importlib.util
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Sizes on a GPU and in the simulator.
SIZES = {
    "gpu": {
        "matmul": (1024, 4096),
        "elementwise": 10**7,
        "batch": 64,
        "hidden": 128,
        "rounds": 3,
        "large_batch": 512,
    },
    "simulator": {
        "matmul": (16, 32),
        "elementwise": 1000,
        "batch": 1,
        "hidden": 8,
        "rounds": 1,
        "large_batch": None,
    },
}
#: FP32 cores per multiprocessor by compute capability (CUDA C Programming Guide, "Arithmetic
#: instructions"); a capability not listed is taken as 128 and the report says so.
FP32_CORES = {
    (6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128,
    (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128,
}  # fmt: skip
#: The CUDA test files, run on the device in this order (pytest stops at the tests' time
#: budget): the planned launches and the allocator (only a GPU really checks them), the op
#: table on every backend, then the rest (this file's own tests run the simulator: not here).
TEST_FILES = ["tests/test_backend_cuda_launch.py", "tests/test_backend_cuda_memory.py"]
TEST_FILES += ["tests/test_backend_conformance.py", "tests/test_backend_cuda.py"]
TEST_FILES += ["tests/test_backend_training.py"]
#: The whole check's deadline (seconds): items not started by then are listed as not run.
DEADLINE = 270.0
#: An item still running this many seconds after the deadline (a kernel or a driver call that
#: never returns) is ended by a watchdog, which writes the report first.
GRACE = 60.0
NOT_RUN = "not run: the check's time budget"
#: The table's columns, by who is timed.
WHO = {
    "torchlight": "torchlight CUDA",
    "kernel": "torchlight kernels",
    "torch": "PyTorch CUDA",
    "cupy": "CuPy",
    "numpy": "torchlight numpy (CPU)",
}


# ------------------------------------------------------------------ the guard
@dataclass
class Outcome:
    value: Any  # what the item returned (None unless it ran)
    status: str  # "ok", "failed" or "not run"
    lines: list[str]  # for the report: the failure, or the "not run" line; [] when ok


class Check:
    """The check's bookkeeping: every item runs through :meth:`run`, which turns an item's
    exception into report lines (and goes on), and does not start an item after the deadline."""

    def __init__(self, deadline: float) -> None:
        self.start = time.perf_counter()
        self.deadline = deadline
        self.items = 0
        self.failed: list[str] = []
        self.not_run: list[str] = []
        self.current = ""  # the item running now (the innermost), for the watchdog
        self.children: set[subprocess.Popen] = set()  # running, each in its own process group

    def left(self) -> float:
        """Seconds left before the deadline."""
        return self.deadline - (time.perf_counter() - self.start)

    def run(self, name: str, fn: Callable[[], Any]) -> Outcome:
        """``fn()`` as the item ``name``: its value, or the report's lines on its failure."""
        self.items += 1
        if self.left() <= 0:
            return Outcome(None, "not run", self.skip(name))
        outer, self.current = self.current, name
        try:
            return Outcome(fn(), "ok", [])
        except Exception as error:  # any failure of one item: reported, and the check goes on
            return Outcome(None, "failed", self.fail(name, error))
        finally:
            self.current = outer

    def skip(self, name: str, why: str = NOT_RUN) -> list[str]:
        self.not_run.append(name)
        return [f"- {name}: {why}"]

    def fail(self, name: str, error: BaseException | str) -> list[str]:
        """Record the failure of ``name``: an exception (with its traceback's last 15 lines) or
        a sentence saying what went wrong."""
        self.failed.append(name)
        if isinstance(error, str):
            return [f"- **failed**: {name}: {error}"]
        message = " ".join(str(error).split()).replace("`", "'")
        message = message if len(message) <= 300 else message[:300] + " ..."
        trace = traceback.format_exception(type(error), error, error.__traceback__)
        tail = "".join(trace).rstrip().splitlines()[-15:]
        return [
            f"- **failed**: {name}: `{type(error).__name__}: {message}`",
            "",
            "```",
            *tail,
            "```",
        ]

    def summary(self) -> str:
        if not self.failed and not self.not_run:
            return f"**All {self.items} items of the check ran, none failed.**"
        failed = f"**{len(self.failed)} of {self.items} items failed**"
        if self.failed:
            failed += ": " + "; ".join(self.failed)
        if self.not_run:
            failed += (
                f". {len(self.not_run)} not run (the check's time budget, "
                f"{self.deadline:.0f} s): " + "; ".join(self.not_run)
            )
        return failed + "."


def _run_limited(
    command: list[str], env: dict[str, str], timeout: float, check: Check
) -> tuple[int | None, str, str]:
    """Run ``command`` in its own process group; at ``timeout`` seconds kill the whole group
    (pytest's own subprocesses too, which would otherwise hold its output pipes open).
    Returns ``(exit status, or None at the time-out; stdout; stderr)``."""
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**env, "PYTHONUNBUFFERED": "1"},  # what it printed before a time-out comes back
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    check.children.add(process)
    try:
        out, err = process.communicate(timeout=max(timeout, 1.0))
        return process.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        try:
            out, err = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a grandchild in a session of its own holds a pipe
            out, err = "", "(its output pipes stayed open after the kill)"
        return None, out, err
    except BaseException:  # the check itself stopped (Ctrl-C, SIGTERM): its children too
        os.killpg(process.pid, signal.SIGKILL)
        raise
    finally:
        check.children.discard(process)


# ------------------------------------------------------------------ the machine
class NoGPUError(RuntimeError):
    """No CUDA GPU: the check cannot run its GPU version."""


def choose_mode(simulator: bool) -> str:
    """``"simulator"`` or ``"gpu"``; decided before anything imports numba.cuda."""
    if simulator:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return "simulator"
    from numba import cuda

    if not cuda.is_available():
        raise NoGPUError(
            "no CUDA GPU found (numba.cuda.is_available() is False). On a machine without one, "
            "run `python benchmarks/gpu_check.py --simulator` for the tiny version."
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


def _nvidia_smi(field: str) -> str:
    query = ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"]
    done = subprocess.run(query, capture_output=True, text=True, timeout=20)
    return done.stdout.strip().splitlines()[0]


def describe_device(mode: str) -> Device:
    """The GPU's name and peaks, from its properties (numba, else nvidia-smi). Every property
    may be missing (a driver or numba-cuda version that lacks it): the report then says so."""
    if mode == "simulator":
        return Device("numba CUDA simulator (no GPU)", None, None, ["simulator: no peaks"])
    from numba import cuda

    device = cuda.get_current_device()
    notes = []
    try:
        name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    except Exception as error:
        name = "unknown GPU"
        notes.append(f"device name unknown ({type(error).__name__}: {error})")
    try:
        major, minor = (int(part) for part in device.compute_capability)
        cc: tuple[int, int] | None = (major, minor)
    except Exception as error:
        cc = None
        notes.append(f"compute capability unknown ({type(error).__name__}: {error})")
    sms = _attribute(device, "MULTIPROCESSOR_COUNT")
    clock_khz = _attribute(device, "CLOCK_RATE")
    notes.append(f"compute capability {'.'.join(map(str, cc)) if cc else '?'}, {sms} SMs")
    if clock_khz is None:  # CUDA 13 dropped the attribute from some APIs: ask nvidia-smi
        try:
            clock_khz = int(float(_nvidia_smi("clocks.max.sm")) * 1000)
            notes.append("SM clock from nvidia-smi (clocks.max.sm)")
        except Exception:
            notes.append("SM clock unknown: no fp32 peak")
    cores = FP32_CORES.get(cc) if cc else None
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
    else:
        notes.append("memory clock or bus width unknown: no bandwidth peak")
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
            try:
                out.append(f"{peer} {__import__(peer).__version__}")
            except Exception as error:  # installed, but broken: its column fails below
                out.append(f"{peer}: installed, but its import fails: {error!r:.300}")
    return out


# ------------------------------------------------------------------ 1. the tests
def run_tests(mode: str, budget: float, check: Check) -> list[str]:
    """The CUDA test files under pytest on the device (or the op table here, without pytest)."""
    if mode == "simulator":
        return ["simulator: the CUDA tests run in `make test`; here a few op-table rows:"] + (
            op_table_check(budget, check, only=("add", "matmul", "conv2d", "max_pool2d"))
        )
    if importlib.util.find_spec("pytest") is None:
        return ["pytest is not installed: the op table checked by this script:"] + (
            op_table_check(budget, check)
        )
    command = [sys.executable, "-m", "pytest", "--noconftest", "-v", "-rfE", "-p"]
    files = [name for name in TEST_FILES if (ROOT / name).exists()]  # (a file renamed since)
    command += ["no:cacheprovider", *files, "-k", "cuda", "-o", "addopts="]
    env = {**os.environ, "TORCHLIGHT_TEST_CUDA": "gpu", "PYTHONPATH": str(ROOT)}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    start = time.perf_counter()
    status, out, err = _run_limited(command, env, budget, check)
    seconds = time.perf_counter() - start
    ran = f"`TORCHLIGHT_TEST_CUDA=gpu pytest {' '.join(files)} -k cuda`"
    per_file = pytest_results(out)
    if status is None:
        check.not_run.append(f"CUDA tests (stopped at their time budget, {budget:.0f} s)")
        failed = [line for line in out.splitlines() if re.search(r" (FAILED|ERROR)\b", line)]
        return [
            f"{ran}: stopped at the time budget ({budget:.0f} s); the results until then:",
            *per_file,
            *[f"- {line.strip()}" for line in failed[:20]],
            "",
            "Its last lines:",
            "```",
            out[-1500:].strip(),
            "```",
        ]
    lines = out.strip().splitlines()
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))][:20]
    summary = lines[-1] if lines else err[-500:]
    report = [f"{ran}: **{summary}** (exit {status}, {seconds:.0f} s)", *per_file]
    report += [f"- {line}" for line in failures]
    if status != 0:
        report += check.fail("CUDA tests", f"pytest exit {status}")
        if not failures:  # a collection error or a crash: its last lines say which
            report += ["```", (out + err)[-1500:].strip(), "```"]
    return report


#: A result line of ``pytest -v``: ``tests/x.py::test_y[z] PASSED   [ 10%]``.
RESULT = re.compile(r"^(tests/[^:\s]+)::\S+ (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.M)


def pytest_results(out: str) -> list[str]:
    """One line per test file: how many of its tests passed, failed, ... in ``pytest -v``'s
    output ``out`` (so far, if pytest was stopped)."""
    tally: dict[str, Counter] = {}
    for match in RESULT.finditer(out):
        tally.setdefault(match[1], Counter())[match[2].lower()] += 1
    return [
        f"- {name}: " + ", ".join(f"{n} {result}" for result, n in counts.items())
        for name, counts in tally.items()
    ]


def op_table_check(budget: float, check: Check, only: tuple[str, ...] = ()) -> list[str]:
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
        if time.perf_counter() - start > budget or check.left() <= 0:
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
    report = [line + (f" ({left} not run: time budget)" if left else ""), *failed[:20]]
    if failed:
        report += check.fail("op-table cases", f"{len(failed)} of {len(cases)} failed")
    if left:
        check.not_run.append(f"{left} op-table cases")
    return report


# ------------------------------------------------------------------ 2. bench_backends --device
def bench_backends(mode: str, budget: float, check: Check) -> list[str]:
    if mode == "simulator":
        return ["simulator: `bench_backends.py --device` needs a real GPU (not run)"]
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_backends.py"), "--device"]
    command.append("--quick")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    status, text, err = _run_limited(command, env, budget, check)
    lines = ["`python benchmarks/bench_backends.py --device --quick`:"]
    if status is None:
        text = text[-6000:] + f"\n(stopped at the time budget, {budget:.0f} s)"
        check.not_run.append(f"the rest of bench_backends.py --device (its {budget:.0f} s)")
    elif status != 0:
        text = text[-6000:] + err[-2000:]
        lines = check.fail("bench_backends.py --device", f"exit {status}") + lines
    return [*lines, "```", text.strip(), "```"]


# ------------------------------------------------------------------ 3. side by side
@dataclass
class Row:
    name: str
    work: float  # FLOPs, or bytes moved
    unit: str  # "flop" or "byte"
    times: dict[str, float | None]  # seconds per call: torchlight, kernel, torch, cupy, numpy
    cells: dict[str, str] = field(default_factory=dict)  # "failed" / "not run": instead of a time


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


#: One timed cell: called once (inside the cell's guard), it prepares the operands and returns
#: the function to time.
Setup = Callable[[], Callable[[], Any]]


def side_by_side(
    mode: str, check: Check, warm: dict[str, Callable[[], Any]]
) -> tuple[list[Row], list[str]]:
    """The table's rows, and the lines to write below it (each failed cell's failure, notes).
    Every row, and every cell of a row, is an item of ``check``; the torchlight CUDA training
    steps that ran are kept in ``warm`` (by model) for :func:`step_diagnostics`."""
    import numpy as np
    from numba import cuda

    import torchlight as tl
    from torchlight.data import digits
    from torchlight.nn import functional as F

    size = SIZES[mode]
    batch, rounds = size["batch"], size["rounds"]
    budget = 0.2 if mode == "gpu" else 0.0
    below: list[str] = []
    torch = cupy = kernel_time = None
    if mode == "gpu":
        for name in ("torch", "cupy"):
            got = check.run(f"importing {name} (on CUDA)", functools.partial(_import_peer, name))
            below += got.lines
            torch, cupy = (got.value, cupy) if name == "torch" else (torch, got.value)
        got = check.run("KernelTimer (the 'torchlight kernels' column)", KernelTimer)
        kernel_time = got.value
        if got.lines:
            below += ["The 'torchlight kernels' column is '-': its timer did not start.", ""]
            below += got.lines

    def torch_sync() -> None:
        torch.cuda.synchronize()

    def cupy_sync() -> None:
        cupy.cuda.Device().synchronize()

    syncs = {"torchlight": cuda.synchronize, "torch": torch_sync, "cupy": cupy_sync}
    syncs["numpy"] = _no_sync
    rng = np.random.default_rng(0)

    def measure(
        name: str,
        work: float,
        unit: str,
        setups: dict[str, Setup | None],
        calls: int,
        grad: bool = False,
        keep: str = "",
    ) -> Row:
        row = Row(name, work, unit, {})
        quiet = nullcontext if grad else tl.no_grad

        def cell(setup: Setup, who: str) -> tuple[Callable[[], Any], float]:
            with quiet():
                fn = setup()
                return fn, per_call(fn, syncs[who], budget, rounds)

        timed = {}
        for who, setup in setups.items():
            if setup is None:
                continue
            got = check.run(f"{name}: {WHO[who]}", functools.partial(cell, setup, who))
            below.extend(got.lines if got.status == "failed" else [])
            if got.status != "ok":
                row.cells[who] = got.status
                continue
            timed[who], row.times[who] = got.value
        if keep and "torchlight" in timed:
            warm[keep] = timed["torchlight"]
        if kernel_time is not None and "torchlight" in timed and calls:

            def kernels() -> float:
                with quiet():
                    return kernel_time(timed["torchlight"], calls)

            got = check.run(f"{name}: {WHO['kernel']}", kernels)
            below.extend(got.lines if got.status == "failed" else [])
            row.times["kernel"] = got.value
            if got.status != "ok":
                row.cells["kernel"] = got.status
        return row

    def matmul(n: int) -> dict[str, Setup | None]:
        a = rng.standard_normal((n, n), dtype=np.float32)

        def on_tl() -> Callable[[], Any]:
            ta = tl.tensor(a, backend="cuda")
            return lambda: ta @ ta

        def on_torch() -> Callable[[], Any]:
            pa = torch.from_numpy(a).cuda()
            return lambda: pa @ pa

        def on_cupy() -> Callable[[], Any]:
            ca = cupy.asarray(a)
            return lambda: ca @ ca

        return {
            "torchlight": on_tl,
            "torch": on_torch if torch else None,
            "cupy": on_cupy if cupy else None,
        }

    @functools.cache
    def vectors() -> tuple[Any, Any]:
        n = size["elementwise"]
        return rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)

    def elementwise(op: str) -> dict[str, Setup | None]:
        x, y = vectors()

        def on_tl() -> Callable[[], Any]:
            tx, ty = tl.tensor(x, backend="cuda"), tl.tensor(y, backend="cuda")
            return (lambda: tx + ty) if op == "add" else (lambda: tx.sum())

        def on_torch() -> Callable[[], Any]:
            px, py = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
            return (lambda: px + py) if op == "add" else (lambda: px.sum())

        def on_cupy() -> Callable[[], Any]:
            cx, cy = cupy.asarray(x), cupy.asarray(y)
            return (lambda: cx + cy) if op == "add" else (lambda: cx.sum())

        return {
            "torchlight": on_tl,
            "torch": on_torch if torch else None,
            "cupy": on_cupy if cupy else None,
        }

    def conv() -> dict[str, Setup | None]:
        images, _ = digits(True, images=True).tensors
        xb = images[:batch].to(tl.float32)
        w1 = tl.randn(8, 1, 3, 3, dtype=tl.float32)
        b1 = tl.zeros(8, dtype=tl.float32)

        def on_tl() -> Callable[[], Any]:
            gx, gw, gb = xb.to("cuda"), w1.to("cuda"), b1.to("cuda")
            return lambda: F.conv2d(gx, gw, gb, padding=1)

        def on_numpy() -> Callable[[], Any]:
            return lambda: F.conv2d(xb, w1, b1, padding=1)

        def on_torch() -> Callable[[], Any]:
            tconv = torch.nn.functional.conv2d
            tx4, tw, tb = (torch.from_numpy(t.numpy()).cuda() for t in (xb, w1, b1))
            return lambda: tconv(tx4, tw, tb, padding=1)

        return {"torchlight": on_tl, "numpy": on_numpy, "torch": on_torch if torch else None}

    def training(model_name: str, sizes: dict[str, Any] = size) -> dict[str, Setup | None]:
        return {
            "torchlight": functools.partial(_tl_step, model_name, "cuda", sizes),
            "numpy": functools.partial(_tl_step, model_name, "numpy", sizes),
            "torch": functools.partial(_torch_step, torch, model_name, sizes) if torch else None,
        }

    def transfer(up: bool) -> dict[str, Setup | None]:
        host = rng.standard_normal(size["elementwise"], dtype=np.float32)

        def on_tl() -> Callable[[], Any]:
            on_host = tl.tensor(host)
            on_device = on_host.to("cuda")
            return (lambda: on_host.to("cuda")) if up else (lambda: on_device.to("numpy"))

        def on_torch() -> Callable[[], Any]:
            on_device = torch.from_numpy(host).cuda()
            return (lambda: torch.from_numpy(host).cuda()) if up else (lambda: on_device.cpu())

        def on_cupy() -> Callable[[], Any]:
            on_device = cupy.asarray(host)
            return (lambda: cupy.asarray(host)) if up else (lambda: cupy.asnumpy(on_device))

        return {
            "torchlight": on_tl,
            "torch": on_torch if torch else None,
            "cupy": on_cupy if cupy else None,
        }

    n = size["elementwise"]
    # (name, work, unit, the row's cells, calls for the kernel timer, with autograd, keep as)
    specs: list[tuple[str, float, str, Callable[[], dict[str, Setup | None]], int, bool, str]]
    specs = [
        (f"matmul {m} float32", 2 * m**3, "flop", functools.partial(matmul, m), 3 if m > 2000 else 10, False, "")
        for m in size["matmul"]
    ]  # fmt: skip
    specs += [
        (f"elementwise add of {n:,} float32", 3 * 4 * n, "byte", lambda: elementwise("add"), 10, False, ""),
        (f"sum of {n:,} float32", 4 * n, "byte", lambda: elementwise("sum"), 10, False, ""),
        (f"conv2d 1->8 3x3, digits batch {batch}", 2 * batch * 8 * 9 * 64, "flop", conv, 10, False, ""),
    ]  # fmt: skip
    specs += [
        (f"{m.upper()} training step (SGD, batch {batch}, float32)", 0, "", functools.partial(training, m), 5, True, m)
        for m in ("mlp", "cnn")
    ]  # fmt: skip
    if size["large_batch"]:  # a small model's step is launch-bound: where a GPU pulls ahead
        large = {**size, "batch": size["large_batch"]}
        name = f"CNN training step (SGD, batch {large['batch']}, float32)"
        specs.append((name, 0, "", functools.partial(training, "cnn", large), 5, True, ""))
    specs += [
        (f"{name}, {4 * n:,} bytes (pageable)", 4 * n, "byte", functools.partial(transfer, up), 0, False, "")
        for name, up in (("host -> device", True), ("device -> host", False))
    ]  # fmt: skip
    rows = []
    for name, work, unit, cells, calls, grad, keep in specs:
        got = check.run(
            name,
            lambda: measure(name, work, unit, cells(), calls, grad, keep),  # noqa: B023
        )
        if got.status == "ok":
            rows.append(got.value)
        else:
            rows.append(Row(name, work, unit, {}, {"torchlight": got.status}))
            below += [line for line in got.lines if got.status == "failed"]
    return rows, below


# ------------------------------------------------------------------ 4. one training step, counted
@dataclass
class Counts:
    """What the CUDA backend asked of numba while :func:`counting` was open."""

    launches: Counter = field(default_factory=Counter)  # by kernel name
    allocations: int = 0
    host_to_device: int = 0
    device_to_host: int = 0
    device_to_device: int = 0


def _probe() -> None:  # pragma: no cover - never launched: cuda.jit's class is what counts
    return None


def _launchers() -> list[type]:
    """The classes through which the CUDA backend launches kernels besides numba's
    ``kernel[grid, block]``: its ``Launcher`` (``torchlight/backends/cuda/launch.py``), which
    after a kernel's first launch goes past numba's launch path, where there is one."""
    try:
        from torchlight.backends.cuda.launch import Launcher
    except ImportError:
        return []
    return [Launcher]


@contextmanager
def counting() -> Iterator[Counts]:
    """Count, while open, the kernel launches (the backend's ``Launcher`` calls, and
    ``kernel[grid, block]`` on the class that ``cuda.jit`` returns: numba-cuda's
    CUDADispatcher, the simulator's FakeCUDAKernel), device allocations (``cuda.device_array``,
    ``cuda.to_device``) and copies (``cuda.to_device`` and ``copy_to_device``: host -> device,
    or device -> device from a device array; ``copy_to_host``: device -> host). A call made
    inside a counted call of its kind (``to_device`` calls ``copy_to_device`` on a GPU; the
    Launcher calls ``kernel[grid, block]``) is not counted again. All is put back on exit."""
    from torchlight.backends.cuda.kernels import cuda

    counts = Counts()
    array_type = type(cuda.device_array(1))
    kernel_type = type(cuda.jit(_probe))
    # the class that defines the copies (DeviceNDArrayBase on a GPU: every kind of device array)
    copies = next(cls for cls in array_type.__mro__ if "copy_to_host" in vars(cls))
    depth = Counter[str]()  # calls in progress, by kind: "launch" or "memory"

    def on_device(source: Any) -> bool:
        return isinstance(source, array_type) or hasattr(source, "__cuda_array_interface__")

    def tally(args: tuple, kwargs: dict, what: str) -> None:
        if what in ("launch", "launcher"):
            kernel = args[0] if what == "launch" else kwargs.get("kernel", args[1])
            name = getattr(getattr(kernel, "py_func", kernel), "__name__", type(kernel).__name__)
            counts.launches[name] += 1
        elif what == "device_array":
            counts.allocations += 1
        elif what == "to_device":
            counts.host_to_device += 1
            if kwargs.get("to", args[3] if len(args) > 3 else None) is None:
                counts.allocations += 1  # a new device array (else it copies into ``to``)
        elif what == "copy_to_device":
            source = kwargs.get("ary", args[1] if len(args) > 1 else None)
            if on_device(source):
                counts.device_to_device += 1
            else:
                counts.host_to_device += 1
        else:
            counts.device_to_host += 1

    def counted(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        kind = "launch" if what in ("launch", "launcher") else "memory"

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(original)
            def call(*args: Any, **kwargs: Any) -> Any:
                if depth[kind] == 0:
                    tally(args, kwargs, what)
                depth[kind] += 1
                try:
                    return original(*args, **kwargs)
                finally:
                    depth[kind] -= 1

            return call

        return wrap

    with wrapped(
        [
            *[(launcher, "__call__", counted("launcher")) for launcher in _launchers()],
            (kernel_type, "__getitem__", counted("launch")),
            (cuda, "device_array", counted("device_array")),
            (cuda, "to_device", counted("to_device")),
            (copies, "copy_to_device", counted("copy_to_device")),
            (copies, "copy_to_host", counted("copy_to_host")),
        ]
    ):
        yield counts


@contextmanager
def wrapped(patches: list[tuple[Any, str, Callable[[Any], Any]]]) -> Iterator[None]:
    """``owner.name = wrap(owner.name)`` for each ``(owner, name, wrap)`` (a module or a class)
    while open; then each is put back as it was: its own attribute again, or (a method it
    inherited, like ``DeviceNDArray.copy_to_host`` on a GPU) deleted, so that it inherits."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for owner, name, wrap in patches:
            saved.append((owner, name, vars(owner).get(name, _MISSING)))
            setattr(owner, name, wrap(getattr(owner, name)))
        yield
    finally:
        for owner, name, before in reversed(saved):
            if before is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, before)


_MISSING = object()


def step_diagnostics(model_name: str, mode: str, warm: dict[str, Callable[[], Any]]) -> str:
    """One line on one training step of ``model_name`` on the CUDA backend, after at least two
    warm-up steps, the last right before it (the steps of the table's row, when it ran, are
    the first): kernel launches (the five most launched by name), copies, device allocations,
    the allocator's memory_allocated / memory_reserved (of every tensor alive in the check);
    on a GPU also the step's wall time per launch."""
    import torchlight as tl
    from torchlight.backends import get_backend
    from torchlight.backends.cuda.kernels import cuda

    step = warm.get(model_name)
    if step is None:
        step = _tl_step(model_name, "cuda", SIZES[mode])
        step()  # warm-up: the second step may still need a few more buffers
    # and one right before: the other model's steps ran since, and took freed buffers
    step()
    cuda.synchronize()
    seconds = None
    if mode == "gpu":  # timed without the counting wrappers
        start = time.perf_counter()
        step()
        cuda.synchronize()
        seconds = time.perf_counter() - start
    launcher = getattr(get_backend("cuda"), "launcher", None)  # (backends/cuda/launch.py)
    fast_before = getattr(launcher, "fast_launches", None)
    with counting() as counts:
        step()
        cuda.synchronize()
    launches = sum(counts.launches.values())
    top = ", ".join(f"{name} {count}" for name, count in counts.launches.most_common(5))
    line = (
        f"- {model_name.upper()} training step: {counts.allocations} device allocations, "
        f"{counts.host_to_device} host -> device copies, {counts.device_to_host} device -> host "
        f"copies, {launches} kernel launches ({top or 'none'})"
    )
    if counts.device_to_device:
        line += f", {counts.device_to_device} device -> device copies"
    line += (
        f"; memory_allocated {tl.cuda.memory_allocated():,} bytes, memory_reserved "
        f"{tl.cuda.memory_reserved():,} bytes"
    )
    if seconds is not None:
        line += f"; step {seconds * 1e3:.2f} ms wall"
        if launches:
            line += f" = {seconds / launches * 1e6:.1f} host µs per launch"
    if getattr(launcher, "enabled", False) and isinstance(fast_before, int):
        fast = launcher.fast_launches - fast_before  # type: ignore[union-attr]
        line += f"; {fast} of the {launches} launches planned (the backend's fast launch)"
    return line


def launcher_state() -> list[str]:
    """What the CUDA backend's Launcher (``backends/cuda/launch.py``) did in the check: whether it
    plans launches, how many launches it planned, and why a kernel kept numba's launch."""
    from torchlight.backends import get_backend

    launcher = getattr(get_backend("cuda"), "launcher", None)
    if launcher is None:
        return ["- the CUDA backend has no Launcher: every launch is numba's"]
    plans = getattr(launcher, "plans", {})
    rejected = list(getattr(launcher, "rejected", []))
    lines = [
        f"- the backend's Launcher: enabled {getattr(launcher, 'enabled', '?')}, "
        f"{sum(plan is not None for plan in plans.values())} plans, "
        f"{getattr(launcher, 'fast_launches', '?')} planned launches in the whole check, "
        f"{len(rejected)} kernels kept numba's launch" + (":" if rejected else "")
    ]
    return lines + [f"  - {reason[:300]}" for reason in rejected[:10]]


def _no_sync() -> None:
    return None


def _import_peer(name: str) -> Any:
    """The module ``name``, or None when it is not installed."""
    if importlib.util.find_spec(name) is None:
        return None
    module = __import__(name)
    if name == "torch":
        if not module.cuda.is_available():
            raise RuntimeError(
                f"torch {module.__version__} is installed, but torch.cuda.is_available() is "
                "False (a CPU-only build, or a driver it cannot use): no PyTorch CUDA column"
            )
        module.backends.cuda.matmul.allow_tf32 = False  # fp32 against fp32
        module.backends.cudnn.allow_tf32 = False  # (convolutions too)
    return module


def _tl_step(model_name: str, backend: str, size: dict[str, Any]) -> Callable[[], Any]:
    """One SGD step of the digits MLP (64 -> hidden -> 10) or CNN (``torchlight.train``)."""
    import torchlight as tl
    from torchlight import nn, optim
    from torchlight.data import digits
    from torchlight.nn import functional as F
    from torchlight.train.cli import build_model

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

        def ms(who: str, row: Row = row) -> str:
            status = row.cells.get(who)
            if status == "failed":
                return "**failed** (below)"
            return NOT_RUN if status == "not run" else _ms(row.times.get(who))

        lines.append(
            f"| {row.name} | {ms('torchlight')} | {ms('kernel')} | {ms('torch')} | "
            f"{ms('cupy')} | {ms('numpy')} | {_rate(row, t.get('torchlight'), device)} | "
            f"{_rate(row, t.get('kernel'), device)} | {_rate(row, t.get('torch'), device)} |"
        )
    return lines


EXPLANATION = (
    "Times are the best of several calls, each ended by a synchronize; rates are GFLOP/s "
    "(matmul, conv) or GB/s moved (elementwise: 2 reads + 1 write; sum: 1 read), with the "
    "share of the fp32 peak or of the memory bandwidth in brackets. 'torchlight kernels' is "
    "the GPU time of the same calls queued back to back (CUDA events), without Python's "
    "launch overhead (for a training step an upper bound: cross-entropy checks its labels "
    "on the host, and that copy lets the queue drain). Training steps: forward, "
    "cross-entropy, backward, SGD update; 'torchlight numpy (CPU)' is the same step on the "
    "numpy backend. On a GPU the CNN's step also runs at a large batch: at the small one, "
    "Python's ~100 launches per step bound the GPU's time, and the CPU's time grows with the "
    "batch. Below each training step's counts: the launches are that one step's "
    "kernel launches (the backend's Launcher calls, and `kernel[grid, block]` calls outside "
    "it), by kernel (the five most launched in brackets); copies are `cuda.to_device` / "
    "`copy_to_device` (host -> device) and `copy_to_host` (device -> host); device "
    "allocations are the buffers asked of numba (`cuda.device_array`, `cuda.to_device`), "
    "which the caching allocator should make 0; "
    "memory_allocated / memory_reserved are those of every tensor alive in the check. On a "
    "GPU, the step's wall time (timed without the counting) divided by its launches is what "
    "one launch costs the host, when the GPU keeps up: the launch overhead that a step of "
    "small tensors is made of."
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--simulator", action="store_true", help="tiny sizes in the simulator")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_check.md"
    )
    parser.add_argument("--skip-tests", action="store_true", help="only the benchmarks")
    parser.add_argument(
        "--deadline",
        type=float,
        default=DEADLINE,
        help=f"seconds for the whole check (default {DEADLINE:.0f}): items not started by "
        "then are listed as not run",
    )
    args = parser.parse_args(argv)
    faulthandler.enable()  # a crash in a driver still prints where it happened
    for stream in (sys.stdout, sys.stderr):  # (a terminal that cannot print "µ" prints "?")
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    check = Check(args.deadline)
    body: list[str] = []

    def save(final: bool) -> None:
        """The report so far (after every section), and at the end with its summary (printed
        too; written to the temporary directory instead if ``--out`` cannot be written)."""
        titled = body and body[0].startswith("# ")
        title, rest = (body[0], body[1:]) if titled else ("# torchlight GPU check", body)
        state = check.summary() if final else "**incomplete**: the check is still running"
        text = "\n".join([title, "", state, "", *rest]) + "\n"
        if final:
            print(text, flush=True)
        written = "nowhere"
        for out in (args.out, Path(tempfile.gettempdir()) / "gpu_check.md"):
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(text, encoding="utf-8")
                written = str(out)
                break
            except OSError as error:
                print(f"gpu_check: cannot write {out}: {error}", file=sys.stderr)
        if final:
            print(f"(written to {written})")

    def overrun() -> None:
        """The watchdog: an item hangs past the deadline and its grace; report it, and end."""
        why = f"still running {GRACE:.0f} s after the check's deadline: the check ended here"
        body.extend(["", *check.fail(check.current or "the check itself", why), ""])
        body.append(f"Whole check: {time.perf_counter() - check.start:.0f} s (ended).")
        save(final=True)
        for child in list(check.children):
            os.killpg(child.pid, signal.SIGKILL)
        os._exit(1)

    watchdog = threading.Timer(max(args.deadline, 0.0) + GRACE, overrun)
    watchdog.daemon = True
    watchdog.start()
    # SIGTERM (a time limit around the check) ends it like Ctrl-C: with the report written
    signal.signal(signal.SIGTERM, _stop)
    try:
        _check(args, check, body, save)
    except Exception as error:  # a failure outside every item's guard: still reported
        body += ["", *check.fail("the check itself", error), ""]
    except BaseException as error:  # stopped from outside: what it has, then stop
        body += [
            "",
            *check.fail(
                "the check itself", f"stopped from outside ({type(error).__name__}: {error})"
            ),
            "",
        ]
        raise
    finally:
        watchdog.cancel()
        body += [f"Whole check: {time.perf_counter() - check.start:.0f} s.", ""]
        save(final=True)
    return 1 if check.failed else 0


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _check(
    args: argparse.Namespace, check: Check, body: list[str], save: Callable[[bool], None]
) -> None:
    """The check's sections, appended to ``body`` (its first line: the report's title)."""
    try:
        mode = choose_mode(args.simulator)
    except Exception as error:
        body += ["# torchlight GPU check: no GPU", "## Machine", ""]
        body += [*check.fail("finding the GPU", error), ""]
        return
    fallback = "numba CUDA simulator (no GPU)" if mode == "simulator" else "unknown GPU"
    device = Device(fallback, None, None, [])
    got = check.run("the GPU's properties", functools.partial(describe_device, mode))
    device = got.value or device
    body += [f"# torchlight GPU check: {device.name}"]
    if mode == "simulator":
        body += [
            "**simulator**: numba's CUDA simulator at tiny sizes; the times are those of Python "
            "threads, not of a GPU. The GPU numbers remain to be measured on a GPU machine.",
            "",
        ]
    body += ["## Machine", "", *got.lines]
    got = check.run("versions", versions)
    body += [*[f"- {line}" for line in got.value or []], *got.lines]
    if mode == "gpu":
        fields = "name,driver_version,memory.total,clocks.max.sm,clocks.max.memory,power.limit"
        got = check.run("nvidia-smi", functools.partial(_nvidia_smi, fields))
        body += [f"- nvidia-smi {fields}: {got.value}" if got.value else "", *got.lines]
    body += [*[f"- {line}" for line in device.notes], ""]
    save(False)

    body += ["## 1. CUDA tests on the device", ""]
    if args.skip_tests:
        body += ["(skipped: --skip-tests)", ""]
    else:  # on a GPU: what the deadline leaves after 100 s for what follows, at most 140 s
        budget = min(140.0, check.left() - 100) if mode == "gpu" else 30.0
        if budget < 10:
            body += [*check.skip("CUDA tests", f"{NOT_RUN} (less than 10 s of it left)"), ""]
        else:
            got = check.run("CUDA tests", functools.partial(run_tests, mode, budget, check))
            body += [*(got.value or []), *got.lines, ""]
    save(False)

    body += ["## 2. The `--device` benchmark", ""]
    budget = min(80.0, check.left() - 60)  # (60 s kept for the rest)
    if mode == "gpu" and budget < 10:
        why = f"{NOT_RUN} (less than 10 s of it left)"
        body += [*check.skip("bench_backends.py --device", why), ""]
    else:
        bench = functools.partial(bench_backends, mode, budget, check)
        got = check.run("bench_backends.py --device", bench)
        body += [*(got.value or []), *got.lines, ""]
    save(False)

    body += ["## 3. torchlight CUDA vs PyTorch CUDA vs CuPy", ""]
    warm: dict[str, Callable[[], Any]] = {}
    got = check.run(
        "the side-by-side benchmarks", functools.partial(side_by_side, mode, check, warm)
    )
    if got.value:
        rows, below = got.value
        body += [*table(rows, device), "", *below]
    body += [*got.lines, ""]
    save(False)

    body += ["Per training step, after two or more warm-up steps (the same batch every step):", ""]
    for model_name in ("mlp", "cnn"):
        item = f"{model_name.upper()} training-step counts"
        got = check.run(item, functools.partial(step_diagnostics, model_name, mode, warm))
        body += [got.value, *got.lines] if got.value else got.lines
    got = check.run("the backend's Launcher", launcher_state)
    body += [*(got.value or []), *got.lines]
    body += ["", EXPLANATION, ""]


if __name__ == "__main__":
    sys.exit(main())
