"""``tl.cuda``: ask whether a real GPU is there, as ``torch.cuda`` does.

Example:
    >>> import torchlight as tl
    >>> device = "cuda" if tl.cuda.is_available() else "cpu"
    >>> x = tl.ones(3, device=device)
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys

__all__ = ["device_count", "is_available"]


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
