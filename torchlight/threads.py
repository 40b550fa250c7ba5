"""How many threads the math libraries under torchlight use, with PyTorch's names.

``tl.set_num_threads(n)`` / ``tl.get_num_threads()`` set and read the threads of the BLAS
(numpy's OpenBLAS or MKL, which runs every matmul) and of OpenMP, through ``threadpoolctl``;
numba's thread pool follows when numba is imported. The default is PyTorch's: one thread per
*physical* core this process may run on (hyper-threads share a core's arithmetic units), or
``TORCHLIGHT_NUM_THREADS`` / ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` /
``MKL_NUM_THREADS`` when set.

Why it matters: OpenBLAS starts one spinning thread per logical CPU. On a busy machine those
threads wait for cores that other processes hold, and a tiny GPT's training step went from
1.4 s (one thread) to 17.6 s (the default) on 2 shared cores. Small products gain nothing from
more threads either, so :func:`threads_for` gives fewer threads for small matrices, as
PyTorch's ``parallel_for`` runs work under its grain size on one thread; the numpy backend
applies it before every matmul and linear (:func:`for_matmul`).

A busy machine (a backend speed trick, not part of the math): when nobody chose a number (no
``set_num_threads`` call, no environment variable), a matmul also gets no more threads than
:func:`free_cores`, the CPUs this process may run on less what other processes keep busy
(the one-minute load average less this process's own share), read at most once a second.
This is what GNU OpenMP does with ``OMP_DYNAMIC=true`` (threads = CPUs - load average). What
it buys, on 2 cores with two other busy processes (load 8.7): a GPT step 7.1 s -> 1.05 s,
as fast as one thread (``benchmarks/bench_threads.py``); idle, it keeps both threads. The load
average counts niced jobs too, so beside low-priority jobs the default takes fewer threads. A number
the user sets is obeyed exactly, as ``torch.set_num_threads`` is, busy machine or not, and
:func:`get_num_threads` always returns that number (or the default), never the load-capped one;
:func:`max_matmul_threads` says what a large matmul gets now.

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
import math
import os
import sys
import time
from typing import Any

__all__ = [
    "get_num_interop_threads",
    "get_num_threads",
    "for_matmul",
    "free_cores",
    "max_matmul_threads",
    "physical_cores",
    "set_num_interop_threads",
    "set_num_threads",
    "threads_for",
]

# PyTorch's at::internal::GRAIN_SIZE: below this much work one thread does it all. A matmul's
# work is counted in multiply-adds, so a product under ~2**15 * threads of them stays serial.
GRAIN_SIZE = 32768

# "threads": the number set or defaulted; "explicit": 1 when the user chose it (a call or an
# environment variable), so no load cap applies; "blas": what the BLAS is set to now.
_state: dict[str, int] = {}

# The load reading, refreshed at most every LOAD_INTERVAL seconds: when ("at", monotonic
# seconds), this process's CPU seconds then ("cpu"), its own share of the load average ("own",
# an exponential average over LOAD_TAU seconds, as the kernel averages the run queue), and the
# answer ("free").
LOAD_INTERVAL = 1.0
LOAD_TAU = 60.0
_load: dict[str, float] = {"at": -math.inf, "cpu": 0.0, "own": 0.0, "free": 0.0}


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


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def free_cores() -> int:
    """The CPUs this process may run on that other processes are not keeping busy (at least 1).

    Others' load is the one-minute load average less this process's own share (its CPU time
    over the same minute: its spinning BLAS threads count in the load average too), scaled to
    the CPUs this process may use (``os.sched_getaffinity``) out of the machine's. Read at most
    once a second (:data:`LOAD_INTERVAL`); where there is no load average, every CPU is free.

    >>> import os
    >>> import torchlight as tl
    >>> 1 <= tl.threads.free_cores() <= (os.cpu_count() or 1)
    True
    """
    now = time.monotonic()
    elapsed = now - _load["at"]
    if elapsed < LOAD_INTERVAL:
        return int(_load["free"])
    cpu = time.process_time()
    if math.isfinite(elapsed):
        keep = math.exp(-elapsed / LOAD_TAU)
        rate = (cpu - _load["cpu"]) / elapsed
        _load["own"] = _load["own"] * keep + rate * (1 - keep)
    _load["at"], _load["cpu"] = now, cpu
    cpus = _cpus()
    try:
        machine_load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average here
        _load["free"] = cpus
        return cpus
    others = max(0.0, machine_load - _load["own"]) * cpus / max(cpus, os.cpu_count() or 1)
    _load["free"] = max(1, cpus - int(others + 0.5))
    return int(_load["free"])


def max_matmul_threads() -> int:
    """The threads a large matmul gets now: :func:`get_num_threads`, capped by
    :func:`free_cores` unless the user chose the number."""
    n = get_num_threads()
    return n if _state.get("explicit") else min(n, free_cores())


def _default_threads() -> int:
    for name in (
        "TORCHLIGHT_NUM_THREADS",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
    ):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                n = int(value)
            except ValueError:
                raise ValueError(
                    f"{name} must be a whole number of threads, got {value!r}"
                ) from None
            if n >= 1:
                _state["explicit"] = 1
                return n
    _state["explicit"] = 0
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

    The number is obeyed exactly, however busy the machine (only products under the grain
    size get fewer, :func:`threads_for`); the default alone adapts to the load.

    Args:
        n: the number of threads, at least 1.

    Raises:
        ValueError: ``n`` is not a positive whole number.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads expects a whole number of threads >= 1, got {n!r}")
    _apply(n)
    _state["threads"] = n
    _state["explicit"] = 1


def get_num_threads() -> int:
    """The threads set by :func:`set_num_threads` (the physical cores by default)."""
    if "threads" not in _state:
        n = _default_threads()
        _apply(n)
        _state["threads"] = n
    return _state["threads"]


def _use_default() -> None:
    """Forget the number set: the next call takes the default again, load cap included (for
    benchmarks and tests that compare the default with set numbers)."""
    _state.pop("threads", None)
    _state.pop("explicit", None)
    _load["at"] = -math.inf  # read the load afresh


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
    :func:`max_matmul_threads` (PyTorch's ``parallel_for`` rule; the default's load cap).

    >>> import torchlight as tl
    >>> tl.threads.threads_for(64 * 64 * 64) <= tl.get_num_threads()
    True
    """
    grains = work // GRAIN_SIZE
    if grains <= 1:  # serial work: no load reading needed
        return 1
    return min(max_matmul_threads(), grains)


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
    if _state["threads"] == 1 and _state.get("blas") == 1:
        return  # one thread in all: every product gets it (no size or load to weigh)
    m = a_shape[-2] if len(a_shape) > 1 else 1
    n = b_shape[-1] if len(b_shape) > 1 else 1
    want = threads_for(m * a_shape[-1] * n) if a_shape else 1
    if want != _state.get("blas"):
        for lib in _blas_controllers():
            lib.set_num_threads(want)
        _state["blas"] = want
