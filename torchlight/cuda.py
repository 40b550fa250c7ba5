"""``tl.cuda``: ask whether a real GPU is there, and how much of its memory tensors use, as
``torch.cuda`` does.

Example:
    >>> import torchlight as tl
    >>> device = "cuda" if tl.cuda.is_available() else "cpu"
    >>> x = tl.ones(3, device=device)
    >>> tl.cuda.memory_allocated() <= tl.cuda.memory_reserved()
    True
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from typing import Any

__all__ = ["device_count", "empty_cache", "is_available", "memory_allocated", "memory_reserved"]


def is_available() -> bool:
    """Whether the ``cuda`` backend runs on a real GPU here.

    False without numba, without a CUDA GPU and driver, and in numba's CUDA simulator
    (``NUMBA_ENABLE_CUDASIM=1``): the simulator runs the kernels, but it is no GPU.
    """
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return False
    if importlib.util.find_spec("numba") is None:
        return False
    loaded = sys.modules.get("numba.cuda")
    if loaded is not None:  # already imported: ask it (it knows whether it is the simulator)
        from numba import config

        return not getattr(config, "ENABLE_CUDASIM", 0) and bool(loaded.is_available())
    # Not imported yet: ask the driver directly. Importing numba.cuda here would fix its mode
    # for the whole process, so a later NUMBA_ENABLE_CUDASIM=1 could no longer take effect.
    return _driver_device_count() > 0


def device_count() -> int:
    """How many GPUs torchlight can use: 1 when :func:`is_available`, else 0."""
    return 1 if is_available() else 0


def _driver_device_count() -> int:
    """The number of GPUs the CUDA driver (``libcuda``) reports; 0 without a driver."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


# The memory functions ask the ``cuda`` backend's caching allocator (a backend speed trick, in
# ``torchlight/backends/cuda/memory.py``). Before the backend is first used (simulator
# included) no tensor is on the GPU: they answer 0 without importing numba.cuda.


def _backend() -> Any:
    from torchlight.backends import _loaded

    return _loaded.get("cuda")


def memory_allocated(device: Any = None) -> int:
    """Bytes of GPU memory that tensors occupy now (each buffer's size rounded up, as the
    allocator hands it out); 0 before the ``cuda`` backend is used. ``device`` is accepted for
    PyTorch's signature (one GPU)."""
    backend = _backend()
    return 0 if backend is None else backend.memory.allocated()


def memory_reserved(device: Any = None) -> int:
    """Bytes of GPU memory the caching allocator holds: in use, plus freed buffers it keeps to
    hand out again instead of asking the driver. :func:`empty_cache` gives the latter back."""
    backend = _backend()
    return 0 if backend is None else backend.memory.reserved


def empty_cache() -> None:
    """Give the GPU memory of freed buffers (and of the cached index tables) back to the driver,
    for other programs; tensors keep theirs. Nothing gets faster: the next buffers must be
    asked of the driver again."""
    backend = _backend()
    if backend is not None:
        backend.tables.clear()
        backend.memory.empty_cache()


# ---- PyTorch compatibility (issue 25): torch.cuda's seeding, as scripts call it on any machine
def manual_seed(seed: int) -> None:
    """Seed the generator the CUDA backend draws from: torchlight has one generator for every
    backend, so this is :func:`torchlight.manual_seed` (PyTorch CPU ignores it silently)."""
    from torchlight.creation import manual_seed as seed_all

    seed_all(seed)


manual_seed_all = manual_seed
__all__ += ["manual_seed", "manual_seed_all"]


def __getattr__(name: str) -> object:
    if name == "amp":  # torch.cuda.amp (autocast, GradScaler): torchlight.amp
        import importlib

        return importlib.import_module("torchlight.amp")
    raise AttributeError(f"module 'torchlight.cuda' has no attribute {name!r}")
