"""The CUDA backend's memory tricks (``backends/cuda/memory.py``), counted in the simulator.

A training step must not ask numba for device memory once the first step has run (the caching
allocator reuses the buffers), and must not copy anything from the host but the batch's new
labels, once (scalars are filled on the device, index tables are uploaded once). The counts
are taken at numba's own entry points (``cuda.device_array``, ``cuda.to_device`` and a device
array's ``copy_to_device``), which every allocation and host->device copy goes through.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import torchlight as tl
from tests.test_backend_conformance import backend
from torchlight import nn, optim
from torchlight.backends.cuda.memory import integer_progression, rounded_size, uniform_value
from torchlight.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cu():
    return backend("cuda")


@pytest.fixture
def counted(cu, monkeypatch) -> Iterator[Counter]:
    """Counts of numba's device allocations and host->device copies while the test runs."""
    from torchlight.backends.cuda.kernels import cuda

    counts: Counter = Counter()
    array_type = type(cuda.device_array(1))

    def wrap(owner: object, name: str, *keys: str) -> None:
        original: Callable = getattr(owner, name)

        def counting(*args, **kwargs):
            counts.update(keys)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)

    wrap(cuda, "device_array", "allocations")
    wrap(cuda, "to_device", "allocations", "transfers")
    wrap(array_type, "copy_to_device", "transfers")
    wrap(array_type, "copy_to_host", "to_host")
    yield counts


def mlp_step(
    on: str, dtype=tl.float32, momentum: float = 0.0
) -> tuple[Callable[[tl.Tensor, tl.Tensor], float], nn.Module]:
    tl.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)).to(dtype).to(on)
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=momentum)

    def step(x: tl.Tensor, y: tl.Tensor) -> float:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    return step, model


def batches(on: str, dtype=tl.float32) -> list[tuple[tl.Tensor, tl.Tensor]]:
    rng = np.random.default_rng(0)
    return [
        (
            tl.tensor(rng.normal(size=(4, 6)), dtype=dtype).to(on),
            tl.tensor((np.arange(4) + i) % 3).to(on),
        )
        for i in range(3)  # labels 0 1 2 0, then 1 2 0 1, then 2 0 1 2
    ]


def test_rounded_sizes() -> None:
    assert [rounded_size(n) for n in (1, 512, 513, 1 << 20)] == [512, 512, 1024, 1 << 20]
    assert rounded_size((1 << 20) + 1) == 5 << 18  # 1.25 MiB
    assert rounded_size(3 << 20) == 3 << 20 and rounded_size((7 << 20) + 1) == 8 << 20


def test_after_one_step_a_training_step_allocates_nothing_and_copies_only_labels(
    cu, counted: Counter
) -> None:
    """MLP, SGD, cross-entropy, float32: the first step allocates; the next step on the same
    batch takes every buffer from the free lists and copies nothing to the GPU, and
    memory_allocated comes back to where it was once the step's tensors are gone. A batch of
    new labels costs one copy (the forward gather and the backward scatter share it), and at
    most one buffer (the table cache keeps it, until the cache is full)."""
    step, _ = mlp_step("cuda")
    data = batches("cuda")
    tl.cuda.empty_cache()
    counted.clear()
    step(*data[0])
    assert counted["allocations"] > 0, "the first step allocates its buffers"
    gc.collect()
    baseline = tl.cuda.memory_allocated()
    for _ in range(2):
        counted.clear()
        step(*data[0])
        assert counted == {"to_host": 2}, counted  # nothing to the GPU; see below
        assert tl.cuda.memory_allocated() == baseline
    for x, y in data[1:]:  # new labels
        counted.clear()
        step(x, y)
        assert counted["transfers"] == 1 and counted["allocations"] <= 1, counted
        # back to the host: the labels, once (checked, and looked at for ignore_index), and
        # the loss (.item())
        assert counted["to_host"] == 2, counted
    assert tl.cuda.memory_reserved() > tl.cuda.memory_allocated()  # free buffers, kept
    tl.cuda.empty_cache()  # the free buffers, and the cached tables, go back to the driver
    assert 0 < tl.cuda.memory_reserved() == tl.cuda.memory_allocated() < baseline


def assert_cuda_trains_like_numpy() -> None:
    """Six float64 SGD steps (momentum 0.9) of the MLP on the CUDA backend give the numpy
    backend's losses and parameters, to rounding."""
    losses = {}
    for on in ("numpy", "cuda"):
        step, model = mlp_step(on, tl.float64, momentum=0.9)
        losses[on] = [step(x, y) for x, y in batches(on, tl.float64) * 2]
        losses[on] += [p.detach().to("numpy").numpy() for p in model.parameters()]
    for got, want in zip(losses["cuda"], losses["numpy"], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_training_with_reused_buffers_gives_numpys_numbers(cu) -> None:
    """Reused buffers never leak one tensor's values into another: float64 training on the
    CUDA backend follows the numpy backend's to rounding."""
    assert_cuda_trains_like_numpy()


def test_a_freed_buffer_is_reused_but_never_while_a_view_holds_it(cu) -> None:
    cu.memory.empty_cache()  # no free blocks: each block below is new, or reused from here
    first = cu.from_numpy(np.arange(10.0))
    view = cu.getitem(first, (slice(2, 5),))  # a view shares the buffer
    del first
    gc.collect()
    reserved = cu.memory.reserved
    other = cu.from_numpy(np.arange(10.0) * 7)
    assert cu.memory.reserved == reserved + 512  # a new block: the view holds the first one
    cu.setitem(other, (...,), -1.0)
    np.testing.assert_array_equal(cu.to_numpy(view), [2.0, 3.0, 4.0])
    del view
    gc.collect()
    again = cu.from_numpy(np.arange(10.0) + 1)  # now the first block serves it
    assert cu.memory.reserved == reserved + 512
    np.testing.assert_array_equal(cu.to_numpy(again), np.arange(10.0) + 1)
    np.testing.assert_array_equal(cu.to_numpy(other), np.full(10, -1.0))


def test_uniform_arrays_are_filled_on_the_device_bit_for_bit(cu, counted: Counter) -> None:
    assert uniform_value(np.array([0.0, -0.0])) is None  # -0.0 is another value
    assert np.isnan(uniform_value(np.full(3, np.nan)))
    for array in (
        np.asarray(2.5, np.float32),
        np.full((2, 3), -0.0),
        np.ones(5, bool),
        np.full(4, 7, np.int64),
        np.array([1.0, 2.0, 1.0]),
    ):
        counted.clear()
        got = cu.to_numpy(cu.from_numpy(array))
        assert got.dtype == array.dtype and got.shape == array.shape
        assert got.tobytes() == array.tobytes()
        assert counted["transfers"] == (array.size == 3), array  # only the last is copied


def test_integer_aranges_are_made_on_the_device(cu, counted: Counter) -> None:
    """An integer arithmetic progression (``arange``, a pooling backward's window offsets) is
    written by the iota kernel, not copied; anything else that looks like one is copied."""
    assert integer_progression(np.array([3, 5, 7])) == (3, 2)
    assert integer_progression(np.array([0, 1, 5, 3])) is None  # the ends fit, the middle not
    assert integer_progression(np.arange(3.0)) is None  # floats are copied
    for array, made in (
        (np.arange(9), True),
        (np.arange(10, -20, -3, dtype=np.int32).reshape(2, 5), True),
        (np.array([7, -2]), True),
        (np.array([0, 1, 5, 3]), False),
        (np.array([5, 5, 6]), False),
        (np.arange(4.0), False),
        (np.arange(6, dtype=np.uint8), False),
    ):
        counted.clear()
        got = cu.to_numpy(cu.from_numpy(array))
        assert got.dtype == array.dtype and got.shape == array.shape
        np.testing.assert_array_equal(got, array)
        assert counted["transfers"] == (not made), array
    x = tl.randn(1, 1, 4, 4).to(tl.float32).to("cuda").requires_grad_()
    for _ in range(2):  # the first pass uploads the windows' offset table (cached then)
        counted.clear()
        x.grad = None
        F.max_pool2d(x, 2).sum().backward()  # its backward's tl.arange(4): on the device
    assert counted["transfers"] == 0, counted
    assert x.grad.sum().item() == 4.0


def test_an_in_place_op_on_a_view_writes_into_it_in_one_kernel(cu, monkeypatch) -> None:
    """``view.add_(y)`` on a strided view (a convolution's backward adds its windows so) is
    one zip kernel writing through the view's strides, not a result and a copy; an operand
    that overlaps the view otherwise still goes through a copy, and both give numpy's
    numbers."""
    launches: list[str] = []
    original = cu._launch

    def counting(kernel, n, *args):
        launches.append(getattr(kernel, "__name__", str(kernel)))
        return original(kernel, n, *args)

    monkeypatch.setattr(cu, "_launch", counting)
    expected = np.arange(24.0).reshape(4, 6)
    x = tl.tensor(expected, backend="cuda")
    y = tl.tensor(np.arange(6.0).reshape(2, 3) * 10, backend="cuda")
    with tl.no_grad():
        launches.clear()
        x[1::2, ::2].add_(y)  # offset 6, strides (12, 2)
        assert len(launches) == 1, launches
        expected[1::2, ::2] += np.arange(6.0).reshape(2, 3) * 10
        launches.clear()
        x.T[2:4].mul_(-1.0)  # a transposed view, times a scalar: a fill and the zip
        assert len(launches) == 2, launches
        expected.T[2:4] *= -1.0
        launches.clear()
        x[1:].add_(x[:-1])  # overlapping rows: the result first, then the copy
        assert launches == ["zip_kernel", "copy_kernel"], launches
        expected[1:] += expected[:-1].copy()
    np.testing.assert_array_equal(x.numpy(), expected)


def test_the_gpu_view_of_a_block_in_a_process_without_simulator() -> None:
    """On a GPU a buffer is a DeviceNDArray on its block's memory: built here on a block of
    made-up device memory (the constructor needs no GPU when it is given the memory)."""
    script = textwrap.dedent(
        """
        import numpy as np
        from numba.cuda.cudadrv import driver
        from numba.cuda.cudadrv.devicearray import DeviceNDArray
        from torchlight.backends.cuda.memory import CachingAllocator
        memory = driver.MemoryPointer(context=None, pointer=driver.binding.CUdeviceptr(4096), size=1024)
        block = DeviceNDArray(shape=(1024,), strides=(1,), dtype=np.uint8, gpu_data=memory)
        array = CachingAllocator(simulator=False)._typed_view(block, 100, np.dtype(np.float32))
        assert type(array) is DeviceNDArray and array.gpu_data is memory
        assert (array.shape, array.strides, array.dtype, array.size) == ((100,), (4,), np.float32, 100)
        assert array.alloc_size == 400 and array.device_ctypes_pointer.value == 4096
        import weakref
        assert weakref.ref(array)() is array  # take() watches each buffer with a finalizer
        # empty_cache: numba's queue of pending frees (the memory manager's) is flushed
        import types
        from numba import cuda
        import logging
        driver._logger = logging.getLogger("numba.cuda")  # (made when a GPU driver loads)
        manager = driver.NumbaCUDAMemoryManager(context=None)
        freed = []
        manager.deallocations.add_item(freed.append, "a device pointer", 512)
        cuda.current_context = lambda: types.SimpleNamespace(memory_manager=manager)
        CachingAllocator(simulator=False).empty_cache()
        assert freed == ["a device pointer"], freed
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
