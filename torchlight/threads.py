"""How many threads the math libraries under torchlight use, with PyTorch's names.

``tl.set_num_threads(n)`` / ``tl.get_num_threads()`` set and read the threads of the BLAS
(numpy's OpenBLAS or MKL, which runs every matmul) and of OpenMP, through ``threadpoolctl``;
numba's thread pool follows when numba is imported. The default is PyTorch's: one thread per
*physical* core this process may run on (hyper-threads share a core's arithmetic units), or
``OMP_NUM_THREADS`` / ``TORCHLIGHT_NUM_THREADS`` when set.

Why it matters: OpenBLAS starts one spinning thread per logical CPU. On a busy machine those
threads wait for cores that other processes hold, and a tiny GPT's training step went from
1.4 s (one thread) to 17.6 s (the default) on 2 shared cores. Small products gain nothing from
more threads either, so :func:`threads_for` gives fewer threads for small matrices, as
PyTorch's ``parallel_for`` runs work under its grain size on one thread; the numpy backend
applies it before every matmul and linear (:func:`for_matmul`).

``set_num_interop_threads`` exists for PyTorch code: torchlight runs one op after another, so
there is no inter-op pool and the number is only recorded.

Example:
    >>> import torchlight as tl
    >>> tl.set_num_threads(1)
    >>> tl.get_num_threads()
    1
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
from typing import Any

__all__ = [
    "get_num_interop_threads",
    "get_num_threads",
    "for_matmul",
    "physical_cores",
    "set_num_interop_threads",
    "set_num_threads",
    "threads_for",
]

# PyTorch's at::internal::GRAIN_SIZE: below this much work one thread does it all. A matmul's
# work is counted in multiply-adds, so a product under ~2**15 * threads of them stays serial.
GRAIN_SIZE = 32768

_state: dict[str, int] = {}


def physical_cores() -> int:
    """The physical cores among the CPUs this process may run on (at least 1)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return max(1, (os.cpu_count() or 2) // 2)
    cores = set()
    for cpu in cpus:
        siblings = glob.glob(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        if not siblings:
            return max(1, len(cpus))
        with open(siblings[0]) as f:
            cores.add(f.read().strip())
    return max(1, len(cores))


def _default_threads() -> int:
    for name in ("TORCHLIGHT_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                n = int(value)
            except ValueError:
                raise ValueError(
                    f"{name} must be a whole number of threads, got {value!r}"
                ) from None
            if n >= 1:
                return n
    return physical_cores()


def _apply(n: int) -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)  # called, not entered: the limit stays until changed
    _state["blas"] = n
    numba = sys.modules.get("numba")
    if numba is not None:
        # numba's pool size is capped by NUMBA_NUM_THREADS; past that its own default stays
        with contextlib.suppress(AttributeError, ValueError, RuntimeError):
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for BLAS, OpenMP and numba's parallel kernels (PyTorch's name).

    Args:
        n: the number of threads, at least 1.

    Raises:
        ValueError: ``n`` is not a positive whole number.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads expects a whole number of threads >= 1, got {n!r}")
    _apply(n)
    _state["threads"] = n


def get_num_threads() -> int:
    """The threads set by :func:`set_num_threads` (the physical cores by default)."""
    if "threads" not in _state:
        set_num_threads(_default_threads())
    return _state["threads"]


def set_num_interop_threads(n: int) -> None:
    """Recorded for PyTorch code; torchlight runs ops one after another (no inter-op pool)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(
            f"set_num_interop_threads expects a whole number of threads >= 1, got {n!r}"
        )
    _state["interop"] = n


def get_num_interop_threads() -> int:
    """What :func:`set_num_interop_threads` recorded (1 by default: ops run one at a time)."""
    return _state.get("interop", 1)


def threads_for(work: int) -> int:
    """Threads worth using for ``work`` multiply-adds: one per ``GRAIN_SIZE``, at most
    :func:`get_num_threads` (PyTorch's ``parallel_for`` rule).

    >>> import torchlight as tl
    >>> tl.threads.threads_for(64 * 64 * 64) <= tl.get_num_threads()
    True
    """
    return max(1, min(get_num_threads(), work // GRAIN_SIZE))


# The BLAS libraries' threadpoolctl controllers, found once: setting a count through one is a
# single C call (about a microsecond), where threadpool_limits() inspects every loaded library.
_blas: list[Any] = []


def _blas_controllers() -> list[Any]:
    if not _blas:
        from threadpoolctl import ThreadpoolController

        _blas.extend(ThreadpoolController().select(user_api="blas").lib_controllers)
        _blas.append(None)  # found (even if there is none): never look again
    return _blas[:-1]


def for_matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    """Set the BLAS threads for one ``a @ b`` by :func:`threads_for` of its multiply-adds.

    The numpy backend calls it before each matmul (PyTorch's ``parallel_for`` rule: a product
    under ``GRAIN_SIZE`` multiply-adds per thread runs on fewer threads). A stacked matmul is one
    BLAS call per matrix, so one matrix's ``m * k * n`` counts. Nothing is called when the count
    is already right, so a run of same-sized products costs one comparison each.
    """
    if "threads" not in _state:
        get_num_threads()
    m = a_shape[-2] if len(a_shape) > 1 else 1
    n = b_shape[-1] if len(b_shape) > 1 else 1
    want = threads_for(m * a_shape[-1] * n) if a_shape else 1
    if want != _state.get("blas"):
        for lib in _blas_controllers():
            lib.set_num_threads(want)
        _state["blas"] = want
