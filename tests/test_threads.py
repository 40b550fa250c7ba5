"""``tl.set_num_threads`` / ``get_num_threads`` (PyTorch's names) reach the BLAS that numpy
runs, through threadpoolctl; the default is the physical cores or the environment's choice."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from threadpoolctl import threadpool_info

import torchlight as tl


def blas_threads() -> list[int]:
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


def test_set_num_threads_reaches_numpys_blas():
    before = tl.get_num_threads()
    try:
        tl.set_num_threads(1)
        assert tl.get_num_threads() == 1 and blas_threads() and set(blas_threads()) == {1}
    finally:
        tl.set_num_threads(before)
    assert tl.get_num_threads() == before


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_set_num_threads_rejects_what_is_not_a_thread_count(bad):
    with pytest.raises(ValueError, match="whole number of threads >= 1"):
        tl.set_num_threads(bad)


def test_interop_threads_are_recorded():
    tl.set_num_interop_threads(3)
    assert tl.get_num_interop_threads() == 3


def test_default_is_physical_cores_or_the_environment():
    code = (
        "import torchlight as tl; from threadpoolctl import threadpool_info as i; "
        "print(tl.get_num_threads(), {x['num_threads'] for x in i() if x['user_api'] == 'blas'})"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    }
    env.pop("TORCHLIGHT_NUM_THREADS", None)
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    cores = tl.threads.physical_cores()
    assert plain.stdout.split(maxsplit=1) == [str(cores), f"{{{cores}}}\n"], plain.stderr
    one = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "TORCHLIGHT_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
    )
    assert one.stdout == "1 {1}\n", one.stderr


LOADED = """
import os, sys
reads = []
def loadavg():  # the machine's load average, as given on the command line
    reads.append(1)
    return (float(sys.argv[1]),) * 3
os.getloadavg = loadavg
import torchlight as tl
from threadpoolctl import threadpool_info
def blas():
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
import time
y = tl.randn(200, 200)
start, first = time.monotonic(), len(reads)
for _ in range(500):
    _ = y @ y
seconds = time.monotonic() - start  # the load is read at most once a second
print(tl.get_num_threads(), blas(), len(reads) - first <= 1 + seconds)
tl.set_num_threads(2)
_ = y @ y
print(tl.get_num_threads(), blas())
"""


def test_the_default_gives_a_busy_machine_fewer_threads_and_a_set_number_stays():
    """With nobody choosing a number, a large matmul gets no more BLAS threads than the CPUs
    others leave free (the load average, read at most once a second though 500 matmuls ask):
    one on a machine loaded far past its CPUs, all of them on an idle one. ``get_num_threads``
    still says the default, and ``set_num_threads(2)`` is obeyed on the busy machine."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    cores = tl.threads.physical_cores()

    def run(load: float) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", LOADED, str(load)], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()

    busy = run(100.0 * (os.cpu_count() or 1))
    assert busy == [f"{cores} {{1}} True", "2 {2}"]
    idle = run(0.0)
    assert idle == [f"{cores} {{{cores}}} True", "2 {2}"]


def test_threads_for_small_work_is_one():
    assert tl.threads.threads_for(8 * 8 * 8) == 1
    assert 1 <= tl.threads.threads_for(2048 * 96 * 96) <= tl.get_num_threads()


def test_small_matmuls_run_on_fewer_blas_threads():
    """The numpy backend's matmul and linear set the BLAS threads by ``threads_for`` (PyTorch's
    grain-size rule): one for an 8x8 product, all of them for a 200x200 one."""
    before = tl.get_num_threads()
    try:
        tl.set_num_threads(2)
        x = tl.randn(8, 8)
        _ = x @ x
        assert set(blas_threads()) == {1}
        y = tl.randn(200, 200)
        _ = y @ y
        assert set(blas_threads()) == {2}
        _ = tl.nn.functional.linear(tl.randn(4, 8), tl.randn(3, 8))
        assert set(blas_threads()) == {1}
    finally:
        tl.set_num_threads(before)
