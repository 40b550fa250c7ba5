"""The numpy backend's ``keep_freed_memory`` (``backends/numpy/kernels.py``): with glibc,
freed arrays of a transformer's activation size are reused instead of being mapped afresh
from the kernel (whose every 4 kB page then faults on its first write). Counted in page
faults, in fresh interpreters (the allocator's settings are per process)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

ROUNDS, ARRAYS = 10, 4  # rounds of 4 live 3 MB float32 arrays, then freed: 768 pages each

PROGRAM = f"""
import resource
import numpy as np
import torchlight
from torchlight.backends.numpy import kernels

torchlight.tensor([1.0])  # the numpy backend loads, and sets the allocator up

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def round():  # as a training step's activations: made, used, then all freed
    arrays = [np.ones((32, 64, 384), np.float32) for _ in range({ARRAYS})]
    del arrays

round()
before = faults()
for _ in range({ROUNDS}):
    round()
print(faults() - before)
print(kernels.keep_freed_memory())
"""


def run(**env: str) -> tuple[int, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env={**environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return int(out[0]), out[1]


GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def test_freed_arrays_are_reused_without_page_faults() -> None:
    faults, took = run()
    assert took == str(GLIBC)  # glibc takes the settings; elsewhere nothing is changed
    if GLIBC:
        assert faults < 768  # not one array's pages: the first round's memory, reused


def test_torchlights_opt_out_leaves_the_allocator_as_it_is() -> None:
    """``TORCHLIGHT_KEEP_FREED_MEMORY=0`` (README, Backends): glibc's defaults stay, so the
    arrays each round frees go back to the kernel and are faulted in afresh."""
    faults, took = run(TORCHLIGHT_KEEP_FREED_MEMORY="0")
    assert took == "False"
    if GLIBC:
        assert faults >= ROUNDS * 768  # at least one array's pages faulted in afresh each round


@pytest.mark.parametrize("variable", ["MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"])
def test_a_malloc_setting_in_the_environment_wins(variable: str) -> None:
    """glibc's own variables are the user's choice: left as they are. With the mmap
    threshold at 128 kB every array is mapped afresh, and each faults on all its pages (as,
    by default, the ones a round frees together go back to the kernel: see the test above
    fail with ``keep_freed_memory`` not called)."""
    faults, took = run(**{variable: "131072"})
    assert took == "False"
    if GLIBC and variable == "MALLOC_MMAP_THRESHOLD_":
        assert faults >= ROUNDS * ARRAYS * 768
