"""``benchmarks/gpu_check.py``, the one-shot check of the CUDA backend on a real GPU, tested where
there is none: its tiny version in numba's CUDA simulator, that one failing item is reported
and the check goes on, its deadline, and its counting of launches and copies.

Not in the check's own GPU test run (``gpu_check.TEST_FILES``): these run the simulator.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.cuda

#: One training step's counts, as the report writes them.
STEP_LINE = re.compile(
    r"- (MLP|CNN) training step: (\d+) device allocations, (\d+) host -> device copies, "
    r"(\d+) device -> host copies, (\d+) kernel launches \(([^)]*)\)"
    r"(?:, \d+ device -> device copies)?; memory_allocated ([\d,]+) bytes, "
    r"memory_reserved ([\d,]+) bytes"
)


def _simulator_env() -> dict[str, str]:
    return {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT)}


def _gpu_check(
    *args: str, first: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """benchmarks/gpu_check.py in the simulator, in a new process; the script ``first`` (given
    its own ``first.write_text``) runs before it, in that process."""
    command = [sys.executable, "benchmarks/gpu_check.py", "--simulator", *args]
    if first is not None:
        driver = f"{first.read_text()}\nfrom benchmarks.gpu_check import main\n"
        driver += f"sys.exit(main({['--simulator', *args]!r}))\n"
        first.write_text(driver)
        command = [sys.executable, str(first)]
    return subprocess.run(
        command, cwd=ROOT, env=_simulator_env(), capture_output=True, text=True, timeout=timeout
    )


def _rows(report: str) -> dict[str, list[str]]:
    return {line.split(" | ")[0][2:]: line.split(" | ") for line in report.splitlines()}


ROWS = (
    "matmul 16 float32",
    "matmul 32 float32",
    "elementwise add of 1,000 float32",
    "sum of 1,000 float32",
    "conv2d 1->8 3x3, digits batch 1",
    "MLP training step (SGD, batch 1, float32)",
    "CNN training step (SGD, batch 1, float32)",
    "host -> device, 4,000 bytes (pageable)",
    "device -> host, 4,000 bytes (pageable)",
)


def test_gpu_check_runs_its_tiny_version_in_the_simulator(tmp_path: Path) -> None:
    """benchmarks/gpu_check.py --simulator: every section of the report, "simulator" on top,
    the op-table rows it checks all pass, each benchmark has a torchlight time, and the MLP's
    and the CNN's training step their counts of launches, copies and allocations."""
    out = tmp_path / "report.md"
    done = _gpu_check("--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    report = out.read_text()
    assert report.startswith("# torchlight GPU check: numba CUDA simulator")
    assert re.search(r"\*\*All \d+ items of the check ran, none failed\.\*\*", report), report
    assert "**simulator**" in report and "remain to be measured" in report
    for section in ("## Machine", "## 1. CUDA tests", "## 2. The `--device`", "## 3. torchlight"):
        assert section in report, section
    assert "numba.cuda: NVIDIA" in report
    passed = re.search(r"\*\*(\d+) passed, (\d+) failed\*\* of (\d+) op-table cases", report)
    assert passed and passed[2] == "0" and passed[1] == passed[3] != "0", report
    rows = _rows(report)
    for name in ROWS:
        assert name in rows, f"no row {name!r} in:\n{report}"
        assert float(rows[name][1]) > 0, rows[name]  # the torchlight CUDA time, in ms
    steps = {m[1]: m for m in STEP_LINE.finditer(report)}
    assert set(steps) == {"MLP", "CNN"}, report
    for step in steps.values():
        launches, top = int(step[5]), step[6].split(", ")
        kernels = [(name, int(count)) for name, count in (k.rsplit(" ", 1) for k in top)]
        assert launches > 0 and 1 <= len(kernels) <= 5, step[0]
        counts = [count for _, count in kernels]
        assert counts == sorted(counts, reverse=True) and sum(counts) <= launches, step[0]
        assert all(name.isidentifier() for name, _ in kernels), step[0]
        assert int(step[7].replace(",", "")) <= int(step[8].replace(",", "")), step[0]
    # the caching allocator serves a training step; the MLP's step copies nothing to the GPU
    assert steps["MLP"][2] == "0" and steps["MLP"][3] == "0", steps["MLP"][0]
    assert "host µs per launch" not in report  # a GPU's figure: the simulator's would mislead


def test_gpu_check_reports_a_failing_item_and_goes_on(tmp_path: Path) -> None:
    """conv2d made to raise (in its process only): the conv2d row, the CNN's step and its
    counts fail, each with its exception and traceback in the report; every other row still
    has its time; the report's top counts the failures, and the exit status is 1."""
    out = tmp_path / "report.md"
    broken = tmp_path / "broken_conv2d.py"
    broken.write_text(
        textwrap.dedent(
            """
            import sys
            import torchlight.nn.conv
            import torchlight.nn.functional as F
            def conv2d(*args, **kwargs):
                raise RuntimeError("conv2d is broken on purpose")
            F.conv2d = torchlight.nn.conv.conv2d = conv2d  # the face and the topic file nn.Conv2d uses
            """
        )
    )
    done = _gpu_check("--skip-tests", "--out", str(out), first=broken)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    report = out.read_text()
    top = report.splitlines()[2]
    failed = re.fullmatch(r"\*\*(\d+) of (\d+) items failed\*\*: (.*)\.", top)
    assert failed, top
    names = failed[3].split("; ")
    assert "conv2d 1->8 3x3, digits batch 1: torchlight CUDA" in names, names
    assert "CNN training step (SGD, batch 1, float32): torchlight numpy (CPU)" in names, names
    assert "CNN training-step counts" in names and int(failed[1]) == len(names), names
    assert report.count("`RuntimeError: conv2d is broken on purpose`") == len(names)
    assert 'raise RuntimeError("conv2d is broken on purpose")' in report  # the traceback
    rows = _rows(report)
    for name in ROWS:
        assert name in rows, f"no row {name!r} in:\n{report}"
        broken_row = name.startswith(("conv2d", "CNN"))
        assert (rows[name][1] == "**failed** (below)") == broken_row, rows[name]
        if not broken_row:
            assert float(rows[name][1]) > 0, rows[name]
    assert [m[1] for m in STEP_LINE.finditer(report)] == ["MLP"], report
    assert report.rstrip().splitlines()[-1].startswith("Whole check:")


def test_gpu_check_lists_what_its_deadline_left_out(tmp_path: Path) -> None:
    """--deadline 0: no item starts, each is listed as not run, and the report is written."""
    out = tmp_path / "report.md"
    done = _gpu_check("--deadline", "0", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]  # nothing failed
    report = out.read_text()
    assert report.startswith("# torchlight GPU check: numba CUDA simulator")
    top = report.splitlines()[2]
    assert re.fullmatch(r"\*\*0 of (\d+) items failed\*\*\. \1 not run \(.*\): .*\.", top), top
    for item in (
        "versions",
        "CUDA tests",
        "the side-by-side benchmarks",
        "MLP training-step counts",
    ):
        assert f"- {item}: not run: the check's time budget" in report, item
    assert "Whole check:" in report


def test_gpu_check_writes_its_report_when_terminated(tmp_path: Path) -> None:
    """SIGTERM (a time limit around the check) mid-check: the report is written with what was
    done and says the check was stopped; the exit status is not 0."""
    out = tmp_path / "report.md"
    terminate = tmp_path / "terminate.py"
    terminate.write_text(
        textwrap.dedent(
            """
            import os, signal, sys
            import benchmarks.gpu_check as check
            def versions():
                os.kill(os.getpid(), signal.SIGTERM)
                return ["never"]
            check.versions = versions
            """
        )
    )
    done = _gpu_check("--out", str(out), first=terminate)
    assert done.returncode != 0
    report = out.read_text()
    assert "**1 of 2 items failed**: the check itself." in report, report
    assert "- **failed**: the check itself: stopped from outside (KeyboardInterrupt" in report
    assert "## Machine" in report and "never" not in report and "## 1." not in report


def test_gpu_check_ends_an_item_that_hangs_past_its_deadline(tmp_path: Path) -> None:
    """An item that never returns (a kernel that hangs, on a GPU): the watchdog writes the
    report, naming the item, GRACE seconds after the deadline, and ends the check (exit 1)."""
    out = tmp_path / "report.md"
    hang = tmp_path / "hang.py"
    hang.write_text(
        textwrap.dedent(
            """
            import sys, time
            import benchmarks.gpu_check as check
            check.GRACE = 1.0
            check.versions = lambda: time.sleep(600)
            """
        )
    )
    done = _gpu_check("--deadline", "0.5", "--out", str(out), first=hang, timeout=60)
    assert done.returncode == 1, done.stderr[-3000:]
    report = out.read_text()
    assert "**1 of 2 items failed**: versions." in report, report
    assert "- **failed**: versions: still running 1 s after the check's deadline" in report


def _write_one(out):  # pragma: no cover - a kernel (run by the simulator's threads)
    out[0] = 1.0


def test_gpu_check_counts_a_step_and_puts_numba_back() -> None:
    """counting(): the launches by kernel, each once (the backend's Launcher launches through
    numba's ``kernel[grid, block]`` in the simulator), the copies each way and the
    allocations, a copy that numba makes by calling another counted function once (the
    simulator's ``to_device(..., to=)`` calls ``copy_to_device``; on a GPU ``to_device`` does),
    and afterwards numba's and the Launcher's functions and methods as they were."""
    import numpy as np

    import torchlight as tl
    from benchmarks.gpu_check import _launchers, counting
    from torchlight.backends.cuda.kernels import cuda

    x = tl.tensor(np.arange(6.0), backend="cuda")
    kernel = cuda.jit(_write_one)
    array_type = type(cuda.device_array(1))
    owners = [type(kernel), array_type, cuda, *_launchers()]
    before = [dict(vars(owner)) for owner in owners]
    with counting() as counts:
        y = (x * 2 + 1).to("numpy")
        z = tl.tensor(np.arange(3.0), backend="cuda")  # (not one value: that is a fill)
    assert counts.launches["zip_kernel"] >= 2, counts  # the multiply and the add
    assert (counts.device_to_host, counts.host_to_device) == (1, 1), counts
    np.testing.assert_allclose(y.numpy(), np.arange(6.0) * 2 + 1)
    np.testing.assert_allclose(z.to("numpy").numpy(), np.arange(3.0))
    with counting() as counts:
        target = cuda.device_array(3)
        cuda.to_device(np.arange(3.0), to=target)
        target.copy_to_device(cuda.to_device(np.ones(3)))
        kernel[1, 1](target)
        for launcher in _launchers():
            launcher(enabled=False)(kernel, 1, 1, (target,))
            # on a GPU its planned launches go past kernel[grid, block]: counted here
            assert launcher.__call__ is not before[owners.index(launcher)]["__call__"]
    assert counts.launches == {"_write_one": 1 + len(_launchers())}, counts
    assert (counts.allocations, counts.host_to_device, counts.device_to_device) == (2, 2, 1)
    np.testing.assert_allclose(target.copy_to_host(), [1, 1, 1])
    after = [dict(vars(owner)) for owner in owners]
    assert after == before


def test_gpu_check_puts_back_the_methods_numba_cuda_has_on_a_gpu() -> None:
    """wrapped() on the classes of a GPU (numba-cuda without the simulator; no GPU needed):
    CUDADispatcher's own __getitem__ and the copy_to_host that DeviceNDArray inherits are
    wrapped while open and exactly as before afterwards."""
    code = textwrap.dedent(
        """
        from numba.cuda.cudadrv.devicearray import DeviceNDArray, DeviceNDArrayBase
        from numba.cuda.dispatcher import CUDADispatcher
        from benchmarks.gpu_check import wrapped
        getitem, calls = CUDADispatcher.__getitem__, []
        def wrap(original):
            return lambda *args: calls.append(args) or original(*args)
        with wrapped([(CUDADispatcher, "__getitem__", wrap), (DeviceNDArray, "copy_to_host", wrap)]):
            assert CUDADispatcher.__getitem__ is not getitem and "copy_to_host" in vars(DeviceNDArray)
        assert CUDADispatcher.__getitem__ is getitem
        assert "copy_to_host" not in vars(DeviceNDArray)
        assert DeviceNDArray.copy_to_host is DeviceNDArrayBase.copy_to_host
        print("ok")
        """
    )
    env = {k: v for k, v in _simulator_env().items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_gpu_check_describes_a_device_that_lacks_properties() -> None:
    """describe_device on a device that answers almost nothing (the simulator's: no name, no
    SM count, clocks or bus width): a description that says what is unknown, no exception."""
    from benchmarks.gpu_check import describe_device
    from tests.test_backend_conformance import cuda_mode

    device = describe_device("gpu")
    notes = " | ".join(device.notes)
    if cuda_mode() == "gpu":  # (TORCHLIGHT_TEST_CUDA=gpu) a real GPU answers
        assert device.fp32_tflops and device.bandwidth_gbs, notes
        return
    assert device.name and device.fp32_tflops is None and device.bandwidth_gbs is None
    assert "device name unknown" in notes and "no bandwidth peak" in notes, notes


def test_gpu_check_counts_each_test_files_results(tmp_path: Path) -> None:
    """pytest_results on real ``pytest -v`` output: per test file, how many passed, failed
    and were skipped (what the report shows of the device tests, also when they are stopped)."""
    from benchmarks.gpu_check import pytest_results

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_one.py").write_text(
        "import pytest\n"
        "def test_a(): pass\n"
        "@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_b(n): assert n == 1\n"
        "def test_c(): pytest.skip('no GPU')\n"
    )
    (tmp_path / "tests" / "test_two.py").write_text("def test_d(): pass\n")
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "tests"]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # (faster: none is needed)
    env.pop("PYTEST_ADDOPTS", None)  # (the outer run's -x would stop this one at test_b[2])
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert pytest_results(done.stdout) == [
        "- tests/test_one.py: 2 passed, 1 failed, 1 skipped",
        "- tests/test_two.py: 1 passed",
    ], done.stdout


def test_gpu_check_states_rates_as_shares_of_the_peaks() -> None:
    """The report's rate cells on a GPU: GFLOP/s against the fp32 peak, GB/s against the
    memory bandwidth (not for transfers, which cross PCIe), '-' without a time."""
    from benchmarks.gpu_check import Device, Row, _rate

    h200 = Device("H200", fp32_tflops=66.9, bandwidth_gbs=4800.0, notes=[])
    matmul = Row("matmul 4096 float32", 2 * 4096**3, "flop", {})
    assert _rate(matmul, 0.01, h200) == "13,743.9 GFLOP/s (20.5%)"
    add = Row("elementwise add of 10,000,000 float32", 3 * 4 * 10**7, "byte", {})
    assert _rate(add, 50e-6, h200) == "2,400.0 GB/s (50%)"
    upload = Row("host -> device, 40,000,000 bytes (pageable)", 4 * 10**7, "byte", {})
    assert _rate(upload, 0.004, h200) == "10.0 GB/s"
    step = Row("CNN training step", 0, "", {})
    assert _rate(step, 0.002, h200) == "-" and _rate(matmul, None, h200) == "-"
    simulator = Device("simulator", None, None, [])
    assert _rate(matmul, 0.01, simulator) == "13,743.9 GFLOP/s"
