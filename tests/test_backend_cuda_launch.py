"""The CUDA backend's planned launches (``backends/cuda/launch.py``).

A plan replaces numba-cuda's per-launch argument marshalling with packers made once per kernel
and kind of arguments. Its parameters must be exactly numba's: checked here for the argument
types of every kernel the backend has (``kernel_sources``), against numba-cuda's own
``_Kernel._prepare_args``, on device arrays of made-up device memory (numba builds those without
a GPU), in a process without the simulator. On a GPU (``TORCHLIGHT_TEST_CUDA=gpu``) the last
test trains with plans for real; in the simulator it checks that plans are off there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.test_backend_conformance import backend, cuda_mode
from tests.test_backend_cuda_memory import assert_cuda_trains_like_numpy

ROOT = Path(__file__).resolve().parents[1]

# Sample arguments of a kernel's numba argument types, on made-up device memory.
SAMPLES = """
import numpy as np
from numba import types
from numba.cuda.cudadrv import driver
from numba.cuda.cudadrv.devicearray import DeviceNDArray
from numba.cuda.dispatcher import _Kernel
from numba.cuda.typing.typeof import Purpose, typeof
from torchlight.backends.cuda import launch as cuda_launch
from torchlight.backends.cuda.kernels import kernel_sources

memory = driver.MemoryPointer(context=None, pointer=driver.binding.CUdeviceptr(1 << 16), size=1 << 20)
rng = np.random.default_rng(0)

def sample(numba_type):
    if isinstance(numba_type, types.Array):
        dtype = np.dtype(str(numba_type.dtype)) if numba_type.dtype != types.boolean else np.dtype(bool)
        n = int(rng.integers(1, 50))
        return DeviceNDArray(shape=(n,), strides=(dtype.itemsize,), dtype=dtype, gpu_data=memory)
    if isinstance(numba_type, types.BaseTuple):
        return tuple(sample(t) for t in numba_type)
    if isinstance(numba_type, types.Integer):
        return int(rng.integers(-1000, 1000))
    return np.dtype(str(numba_type)).type(1.5)  # a fill value: a numpy scalar of the dtype

class NumbasMarshalling:  # numba-cuda's own code, on an object without a compiled kernel
    extensions = []
    _prepare_args = _Kernel._prepare_args
"""


def run_without_simulator(script: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SAMPLES) + textwrap.dedent(script)],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), (
        done.stdout[-2000:] + done.stderr[-3000:]
    )


def test_planned_parameters_are_numbas_for_every_kernel() -> None:
    """Every kernel's argument types (float32, float64, int64, bool elements): the packers
    give numba's parameters (same count, types and values), and the sample arguments are of
    the declared types (so it is those types that were checked). Arguments that numba types
    differently get different signature keys."""
    run_without_simulator(
        """
        checked = 0
        for dtype in (np.float32, np.float64, np.int64, np.bool_):
            for name, _, argtypes in kernel_sources(dtype):
                args = [sample(t) for t in argtypes]
                assert tuple(typeof(a, Purpose.argument) for a in args) == tuple(argtypes), name
                packers = [cuda_launch.packer(t) for t in argtypes]
                assert None not in packers, (name, argtypes)
                ours = cuda_launch.pack(packers, args)
                numbas = cuda_launch.numba_parameters(NumbasMarshalling(), argtypes, args)
                assert cuda_launch.same_parameters(ours, numbas), (name, ours, numbas)
                again = cuda_launch.pack(packers, args)  # from the arrays' kept parameters
                assert cuda_launch.same_parameters(again, numbas), name
                checked += 1
        assert checked > 150, checked
        # a parameter list differing in one value, or one type, is not numba's
        f32 = types.Array(types.float32, 1, "C")
        ints = [sample(f32), 5, (1, 2)]
        p = cuda_launch.pack([cuda_launch.packer(t) for t in (f32, types.int64, types.UniTuple(types.int64, 2))], ints)
        assert not cuda_launch.same_parameters(p[:-1] + [type(p[-1])(3)], p)
        assert not cuda_launch.same_parameters(p[:-1] + [2], p)
        assert not cuda_launch.same_parameters(p[:-1], p)
        key = cuda_launch.signature_key
        a32, a64 = sample(f32), sample(types.Array(types.float64, 1, "C"))
        assert key([a32, 1, (1,)]) == key([sample(f32), 7, (9,)])
        assert len({key([a32]), key([a64]), key([(1,)]), key([(1, 2)]), key([1]), key([1.0]),
                    key([np.float32(1)]), key([np.float64(1)])}) == 8
        print("ok")
        """
    )


def test_a_plan_is_kept_only_when_its_parameters_are_numbas() -> None:
    """``Launcher._plan`` on a dispatcher-like kernel: a plan when numba's marshalling agrees,
    numba's launch (and a reason) when it does not or a type is not planned; a plan launches
    through numba's launch function with the kernel's parameters. (No GPU: the default stream
    and the launch function are recorded instead of called.)"""
    run_without_simulator(
        """
        import types as pytypes
        from numba.cuda.typing.typeof import typeof, Purpose

        f32, i64, t1 = types.Array(types.float32, 1, "C"), types.int64, types.UniTuple(types.int64, 1)
        argtypes = (f32, i64, t1)
        args = tuple(sample(t) for t in argtypes)

        class Compiled(NumbasMarshalling):
            debug = cooperative = False
            _codelibrary = pytypes.SimpleNamespace(
                get_cufunc=lambda: pytypes.SimpleNamespace(kernel="the CUkernel"))

        class Kernel:  # what a numba-cuda dispatcher offers a plan
            __name__ = "zip_kernel"
            def __init__(self, compiled):
                self.overloads = {argtypes: compiled}
            def typeof_pyval(self, value):
                return typeof(value, Purpose.argument)

        launched = []
        launcher = cuda_launch.Launcher(enabled=True)
        assert launcher.enabled, launcher.rejected
        launcher.api.driver = pytypes.SimpleNamespace(_to_core_stream=lambda s: "default stream")
        launcher.api.launch = lambda *a: launched.append(a)

        plan = launcher._plan(Kernel(Compiled()), args)
        assert plan is not None and launcher.rejected == [], launcher.rejected
        plan.launch((2, 1, 1), (128, 1, 1), args)
        (stream, config, kernel, *params), = launched
        assert (stream, kernel) == ("default stream", "the CUkernel")
        assert config.grid == (2, 1, 1) and config.block == (128, 1, 1) and config.shmem_size == 0
        numbas = cuda_launch.numba_parameters(Compiled(), argtypes, args)
        assert cuda_launch.same_parameters(params, numbas)

        class Drifted(Compiled):  # a numba-cuda that marshals differently
            def _prepare_args(self, ty, val, stream, retr, kernelargs):
                super()._prepare_args(ty, val, stream, retr, kernelargs)
                kernelargs.append(0)
        assert launcher._plan(Kernel(Drifted()), args) is None
        assert "differ from numba's" in launcher.rejected[-1], launcher.rejected
        class Debug(Compiled):
            debug = True
        assert launcher._plan(Kernel(Debug()), args) is None
        assert "debug" in launcher.rejected[-1]
        assert launcher._plan(Kernel(Compiled()), (*args[:2], [1])) is None  # a list: unplanned
        assert cuda_launch.dim3(4) == (4, 1, 1) and cuda_launch.dim3((4, 2)) == (4, 2, 1)

        # through the launcher: numba's launch first, then the plan; a plan whose launch fails
        # gives way to numba's launch for good
        numbas_launches = []
        class Launchable(Kernel):
            def __getitem__(self, config):
                return lambda *a: numbas_launches.append((config, a))
        kernel = Launchable(Compiled())
        launched.clear()
        for _ in range(3):
            launcher(kernel, 2, 128, args)
        assert len(numbas_launches) == 1 and len(launched) == 2 and launcher.fast_launches == 2
        def broken(*a):
            raise TypeError("launch() takes 3 arguments")
        launcher.api.launch = broken
        launcher(kernel, 2, 128, args)
        launcher(kernel, 2, 128, args)
        assert len(numbas_launches) == 3 and launcher.fast_launches == 2
        assert "a plan failed" in launcher.rejected[-1], launcher.rejected
        print("ok")
        """
    )


def test_training_launches_through_plans_on_a_gpu_and_never_in_the_simulator() -> None:
    """On a GPU, after the first step nearly every launch goes through a plan, none is
    rejected, and training gives the numpy backend's numbers; in the simulator (no compiled
    kernels) plans are off and numba launches everything."""
    cu = backend("cuda")
    launcher = cu.launcher  # type: ignore[attr-defined]
    before = launcher.fast_launches
    assert_cuda_trains_like_numpy()
    if cuda_mode() == "gpu":
        assert launcher.enabled and launcher.rejected == [], launcher.rejected
        assert launcher.fast_launches - before > 100, launcher.fast_launches
    else:
        assert not launcher.enabled and launcher.fast_launches == 0
