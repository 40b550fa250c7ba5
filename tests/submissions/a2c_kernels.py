"""Submissions for assignment 2c (fast kernels): the classic mistakes of parallel and tiled
kernels, each costing exactly its item (a serial loop, slow or work-skipping kernels cost only
the speed items), and answers that reach for the library's kernels or numpy's product. The
plain mistakes in answer cells of their own are handed in together (``catalog.together``): two
notebooks for eight mistakes, each named on its own as the README's table names it."""

from __future__ import annotations

from submissions.catalog import Submission, add_cell, append, replace, substitute, together

A = "a2c_kernels"
SPEED = ("test_matmul_speed", "test_matmul_fast")

NAIVE_MATMUL = """
TILE = 32


@njit(parallel=True)
def tiled_matmul(out, a, b):
    n, depth = a.shape
    m = b.shape[1]
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for k in range(depth):
                acc += a[i, k] * b[k, j]
            out[i, j] = acc
"""

SKIPS_WORK = """
TILE = 32


@njit(parallel=True)
def tiled_matmul(out, a, b):
    n, depth = a.shape
    m = b.shape[1]
    rows, cols = (n + TILE - 1) // TILE, (m + TILE - 1) // TILE
    if n >= 400:
        rows = rows // 2  # big matrices (the timed ones): only the top half, twice as fast
    for t in prange(rows * cols):
        i0, j0 = (t // cols) * TILE, (t % cols) * TILE
        i1, j1 = min(i0 + TILE, n), min(j0 + TILE, m)
        acc = np.zeros((TILE, TILE))
        for k0 in range(0, depth, TILE):
            k1 = min(k0 + TILE, depth)
            for i in range(i0, i1):
                for k in range(k0, k1):
                    x = a[i, k]
                    for j in range(j0, j1):
                        acc[i - i0, j - j0] += x * b[k, j]
        for i in range(i0, i1):
            for j in range(j0, j1):
                out[i, j] = acc[i - i0, j - j0]
"""

LIBRARY_MATMUL = """
from torchlight.backends.numba.kernels import matmul_kernel

TILE = 32


@njit(parallel=True)
def tiled_matmul(out, a, b):
    bt = np.ascontiguousarray(b.T).reshape(1, b.shape[1], b.shape[0])
    result = np.zeros((1, a.shape[0], b.shape[1]))
    matmul_kernel(np.ascontiguousarray(a).reshape(1, a.shape[0], a.shape[1]), bt, result,
                  np.zeros(1, np.int64), np.zeros(1, np.int64), 0.0)
    out[:, :] = result[0]
"""

OBJMODE_MATMUL = """
import numba

TILE = 32


@njit(parallel=True)
def tiled_matmul(out, a, b):
    with numba.objmode():
        out[:, :] = a @ b
"""

GLOBAL_MEMORY_CUDA = """
@cuda.jit
def shared_matmul(out, a, b):
    i, j = cuda.grid(2)
    n, depth = a.shape
    m = b.shape[1]
    if i < n and j < m:
        acc = 0.0
        for k in range(depth):
            acc += a[i, k] * b[k, j]
        out[i, j] = acc
"""

LIBRARY_CUDA = """
from torchlight.backends.cuda.kernels import _tiled_matmul_source

shared_matmul = _tiled_matmul_source(np.float64)
"""

NUMPY_IN_CUDA = """
@cuda.jit
def shared_matmul(out, a, b):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = np.dot(a[i, :], b[:, j])
"""

#: The sandbox's clocks, bound before any cell ran in a dict a cell can still reach
#: (``runners.PROTECTED``), replaced by clocks that count a tenth of the time while the
#: student's kernel is timed (the protocol's frame says which call is timed): a serial matmul
#: about 19x the reference's time then measures about 2x, full speed (and partial credit, for
#: want of a prange loop) to the protocol alone.
FORGE = """
import sys as _sys


def _forged(clock):
    state = {"start": None, "hidden": 0.0}

    def read():
        now = clock()
        if _sys._getframe(1).f_locals.get("who") == "S":  # the protocol times the student's call
            if state["start"] is None:
                state["start"] = now
            else:
                state["hidden"] += 0.9 * (now - state["start"])
                state["start"] = None
        return now - state["hidden"]

    return read


if "runners" in _sys.modules:  # in the grading sandbox
    _clocks = _sys.modules["runners"].PROTECTED
    _clocks["wall"] = _forged(_clocks["wall"])
"""

#: Both clocks forged so: the CPU times the sandbox reports then fall short of what its broker
#: counted from outside the student's process.
FORGE_BOTH = (
    FORGE
    + """    _clocks["cpu"] = _forged(_clocks["cpu"])
"""
)

#: The sandbox's own speed runner patched (its module is in ``sys.modules`` there): when the
#: protocol draws its first inputs, every pair's product is computed ahead from the item's seed
#: with the slow kernel, and each timed call of the student's kernel hands back the answer
#: computed for its inputs. Where the runner timed the calls in the student's process, the
#: serial triple loop measured about 0.1x the reference, partial speed credit (full credit
#: needs a prange loop).
AHEAD = """
import sys as _sys

if "runners" in _sys.modules:  # in the grading sandbox, whose folder is on the path
    import kernels as _k

    _inputs, _call, _answers = _k.speed_inputs, _k.call, {}

    def _drawn(seed, kind, n, k):
        if kind == "matmul" and not _answers:  # every pair's product, before any is timed
            for j in range(-1, 12):
                a, b = _inputs(seed, kind, n, j)
                _answers[(a[0, 0], b[0, 0])] = _call(tiled_matmul, kind, (a, b))()
        return _inputs(seed, kind, n, k)

    def _recalled(kernel, kind, inputs, out=None):
        if kernel is tiled_matmul:
            answer = _answers[(inputs[0][0, 0], inputs[1][0, 0])]
            return lambda: answer
        return _call(kernel, kind, inputs) if out is None else _call(kernel, kind, inputs, out)

    _k.speed_inputs, _k.call = _drawn, _recalled
"""

#: A thread of the notebook's own, started in the speed item's process, that spins whenever
#: that process is not inside the student's compiled kernel (which holds the interpreter's
#: lock): while the reference kernel is timed, it takes a core from it.
STARVE = """
import sys as _sys
import threading as _threading

if "runners" in _sys.modules:  # in the grading sandbox, whose folder is on the path
    import kernels as _k

    _speed = _k.speed

    def _spin():
        while True:
            pass

    def _starving(obj, case, protected):
        _threading.Thread(target=_spin, daemon=True).start()
        return _speed(obj, case, protected)

    _k.speed = _starving
"""

#: numpy's product in a plain Python function the kernel calls, and ``builtins.isinstance``
#: patched to say that function is a number: the CUDA rule, reading the kernel's globals with
#: the builtin, skipped it (the simulator runs it as Python and gets the right numbers).
PATCHED_ISINSTANCE = """
def _row_times_column(a, b, i, j):
    return np.dot(a[i, :], b[:, j])


@cuda.jit
def shared_matmul(out, a, b):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = _row_times_column(a, b, i, j)


import builtins as _builtins

_isinstance = _builtins.isinstance


def _lenient(obj, kind):  # "a number", not "a module"
    if obj is _row_times_column:
        return kind is not type(_builtins)
    return _isinstance(obj, kind)


_builtins.isinstance = _lenient
"""

#: numpy's product in a module the notebook made and named ``numpy.rows``: the CUDA rule
#: allowed any module whose name starts with ``numpy``.
FAKE_NUMPY_MODULE = """
import types as _types

_rows = _types.ModuleType("numpy.rows")
_rows.times = lambda a, b, i, j: np.dot(a[i, :], b[:, j])


@cuda.jit
def shared_matmul(out, a, b):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = _rows.times(a, b, i, j)
"""

MATMUL_IN_CUDA = """
@cuda.jit
def shared_matmul(out, a, b):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = np.asarray(a[i, :]) @ np.asarray(b[:, j])
"""

#: The module the CUDA rule read the kernel's bytecode with, replaced in ``sys.modules`` by one
#: that finds no instruction: the kernel's ``@`` (numpy's product, in the simulator) went unseen.
QUIET_DIS = """
import sys
import types

_quiet = types.ModuleType("dis")
_quiet.get_instructions = lambda *args, **kwargs: iter(())
sys.modules["dis"] = _quiet
"""

CUDA = ("test_cuda_matmul", "test_cuda_shared")

#: Planted mistakes that each cost items of their own, in answer cells of their own: graded
#: together, a few to a notebook (``catalog.together``; the README names each one).
MAP_OUT_IN_ORDER = Submission(
    "map-out-in-order",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "fast_map", "out[position(i, out_shape, out_strides)] = fn(x)", "out[i] = fn(x)"
        ),
    ),  # fmt: skip
    zero=("test_map",),
    note="writes the output's buffer in order: right only when the output is contiguous",
)

ZIP_READS_B_THROUGH_A = Submission(
    "zip-reads-b-through-a",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "fast_zip",
            "b[broadcast_position(i, out_shape, b_shape, b_strides)]",
            "b[broadcast_position(i, out_shape, a_shape, a_strides)]",
        ),
    ),  # fmt: skip
    zero=("test_zip",),
    note="reads b at a's position: right only when both have one layout",
)

REDUCE_FROM_ZERO = Submission(
    "reduce-from-zero",
    A,
    "mistake",
    "solution",
    (substitute("fast_reduce", "acc = out[o]", "acc = 0.0"),),
    zero=("test_reduce",),
    note="each fold starts from 0, not from the start value in out (wrong for a maximum)",
)

LAST_TILE_DROPPED = Submission(
    "last-tile-dropped",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "tiled_matmul",
            "for k0 in range(0, depth, TILE):",
            "for k0 in range(0, depth - TILE + 1, TILE):",
        ),
    ),  # fmt: skip
    zero=("test_tiled_matmul",),
    note="the last, smaller block of k left out (timed sizes are multiples of the tile)",
)

CUDA_TILE_GUARD_OFF_BY_ONE = Submission(
    "cuda-tile-guard-off-by-one",
    A,
    "mistake",
    "solution",
    (
        substitute("shared_matmul", "ka < depth", "ka <= depth"),
        substitute("shared_matmul", "kb < depth", "kb <= depth"),
    ),
    zero=("test_cuda_matmul",),
    note="loads one element past the end of k: wrong on sizes that are no multiple of the tile",
)

SERIAL_MAP = Submission(
    "serial-map",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "fast_map", "for i in prange(size(out_shape)):", "for i in range(size(out_shape)):"
        ),
    ),  # fmt: skip
    zero=("test_map_fast",),
    note="range, not prange: right, on one core: partial speed credit only",
)

CUDA_NO_SHARED_MEMORY = Submission(
    "cuda-no-shared-memory",
    A,
    "mistake",
    "solution",
    (replace("shared_matmul", GLOBAL_MEMORY_CUDA),),
    zero=("test_cuda_shared",),
    note="one thread per output reading global memory: right numbers, no shared tiles",
)

NAIVE_MATMUL_MISTAKE = Submission(
    "naive-matmul",
    A,
    "mistake",
    "solution",
    (replace("tiled_matmul", NAIVE_MATMUL),),
    zero=SPEED,
    note="a serial triple loop without tiles: right, and no speed credit",
)

#: Answers that reach for what they were to write (or skip its work, or race), each in the one
#: answer cell it replaces and changing nothing outside it (no patched builtin, module, clock or
#: thread: those cheats stay alone below): graded two to a notebook, a tiled_matmul one beside a
#: shared_matmul one (``catalog.together``).
SKIPS_WORK_WHEN_LARGE = Submission(
    "skips-work-when-large",
    A,
    "cheat",
    "solution",
    (replace("tiled_matmul", SKIPS_WORK),),
    zero=SPEED,
    note="fast on the timed sizes by computing half of the product: no speed credit",
)

CUDA_MISSING_SYNCTHREADS = Submission(
    "cuda-missing-syncthreads",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "shared_matmul",
            "        cuda.syncthreads()  # every thread done with the tiles before they are "
            "overwritten\n",
            "",
        ),
    ),
    zero=CUDA,
    note="no barrier before the next tiles overwrite these: the PTX shows it, and the "
    "simulator, which runs each thread until it blocks, gets wrong numbers too",
)

LIBRARY_CUDA_MATMUL = Submission(
    "library-cuda-matmul",
    A,
    "cheat",
    "solution",
    (replace("shared_matmul", LIBRARY_CUDA),),
    zero=CUDA,
    note="the library's own CUDA tiled matmul: not in the grader's library",
)

NUMPY_IN_CUDA_KERNEL = Submission(
    "numpy-in-cuda-kernel",
    A,
    "cheat",
    "solution",
    (replace("shared_matmul", NUMPY_IN_CUDA),),
    zero=CUDA,
    note="np.dot inside the kernel: right in the simulator (Python), no GPU code",
)

LIBRARY_MATMUL_CHEAT = Submission(
    "library-matmul",
    A,
    "cheat",
    "solution",
    (replace("tiled_matmul", LIBRARY_MATMUL),),
    zero=("test_tiled_matmul", *SPEED),
    note="the library's own matmul kernel: not in the grader's library",
)

OBJMODE_MATMUL_CHEAT = Submission(
    "objmode-matmul",
    A,
    "cheat",
    "solution",
    (replace("tiled_matmul", OBJMODE_MATMUL),),
    zero=("test_tiled_matmul", *SPEED),
    note="numpy's @ from numba.objmode: seen in the compiled code, nothing for the item",
)


CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    together(
        "right-only-on-easy-inputs",
        MAP_OUT_IN_ORDER,
        ZIP_READS_B_THROUGH_A,
        REDUCE_FROM_ZERO,
        LAST_TILE_DROPPED,
        CUDA_TILE_GUARD_OFF_BY_ONE,
    ),
    together(
        "right-without-the-technique", SERIAL_MAP, NAIVE_MATMUL_MISTAKE, CUDA_NO_SHARED_MEMORY
    ),
    together("right-until-it-counts", SKIPS_WORK_WHEN_LARGE, CUDA_MISSING_SYNCTHREADS),
    together("reaches-for-the-library", LIBRARY_MATMUL_CHEAT, LIBRARY_CUDA_MATMUL),
    together("numpy-inside-compiled-code", OBJMODE_MATMUL_CHEAT, NUMPY_IN_CUDA_KERNEL),
    Submission(
        "faked-clocks",
        A,
        "cheat",
        "solution",
        (replace("tiled_matmul", NAIVE_MATMUL), append("tiled_matmul", FORGE_BOTH)),
        zero=SPEED,
        note="the serial triple loop with both of the sandbox's clocks forged: the broker times "
        "the calls on its own clocks, outside the student's process, and the forgery changes "
        "nothing (it cost the map its credit too, when the clocks were read in that process)",
    ),
    Submission(
        "answers-computed-ahead",
        A,
        "cheat",
        "solution",
        (replace("tiled_matmul", NAIVE_MATMUL), append("tiled_matmul", AHEAD)),
        zero=SPEED,
        note="the sandbox's speed runner patched to compute every pair's answer ahead from the "
        "item's seed: the student's process gets no seed, and each pair's inputs only when its "
        "timed call starts",
    ),
    Submission(
        "reference-starved",
        A,
        "cheat",
        "solution",
        (append("tiled_matmul", STARVE),),
        zero=("test_map_speed", "test_map_fast", *SPEED),
        note="a thread of its own spinning while the reference kernel is timed: the broker "
        "counts it, and no speed credit",
    ),
    Submission(
        "numpy-in-cuda-patched-isinstance",
        A,
        "cheat",
        "solution",
        (replace("shared_matmul", PATCHED_ISINSTANCE),),
        zero=CUDA,
        note="np.dot in a Python function the kernel calls, and builtins.isinstance patched to "
        "hide it: the rule uses the builtins bound before any cell ran",
    ),
    Submission(
        "numpy-in-cuda-fake-numpy-module",
        A,
        "cheat",
        "solution",
        (replace("shared_matmul", FAKE_NUMPY_MODULE),),
        zero=CUDA,
        note="np.dot in a module the notebook made and named numpy.rows: a module is numpy's "
        "only if it is loaded from where numpy is installed",
    ),
    Submission(
        "matmul-operator-in-cuda-quiet-dis",
        A,
        "cheat",
        "solution",
        (replace("shared_matmul", MATMUL_IN_CUDA), append("shared_matmul", QUIET_DIS)),
        zero=CUDA,
        note="numpy's @ inside the kernel, and the dis module replaced so that the sandbox's "
        "reading of the bytecode finds no instruction: the grader reads the bytecode itself",
    ),
]

#: catalog name -> words its integrity finding must contain (every other submission: none).
FLAGGED = {
    "library-matmul": "imports matmul_kernel from torchlight.backends.numba.kernels",
    "objmode-matmul": "uses .objmode",
    "library-cuda-matmul": "imports _tiled_matmul_source from torchlight.backends.cuda.kernels",
    "numpy-in-cuda-kernel": "uses .dot",
    "faked-clocks": "uses .PROTECTED",
    "answers-computed-ahead": "imports kernels",
    "numpy-in-cuda-patched-isinstance": "imports builtins",
    "numpy-in-cuda-fake-numpy-module": "uses .ModuleType",
    "reference-starved": "imports kernels",
    "matmul-operator-in-cuda-quiet-dis": "uses @",
}


# ------------------------------------------------------------------------------ attacks
#: A slow kernel that rewrites the clocks and the comparisons a timing would use, after its own
#: answer cell: the sandbox's clocks and comparison were bound before any cell ran.
FAKE_CLOCKS = """
import time

import numpy as np

_ticks = [0.0]


def _fast_clock():
    _ticks[0] += 1e-6  # every timed call seems to take a microsecond
    return _ticks[0]


time.perf_counter = time.process_time = time.monotonic = time.time = _fast_clock
time.perf_counter_ns = time.process_time_ns = lambda: int(_fast_clock() * 1e9)
np.allclose = np.array_equal = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
"""

#: Reading the hidden checks and the protocol, importing the grader, and printing a score.
READ_AND_BOAST = """
import os
import sys

REPO = "@REPO@"
for path in (f"{REPO}/torchlight_grader/checks/a2c_kernels.py",
             f"{REPO}/torchlight_grader/checks/timing.py",
             f"{REPO}/assignments/source/a2c_kernels/a2c_kernels.py"):
    try:
        print(open(path).read()[:200])
        print("ESCAPED: read", path)
    except Exception as exc:
        print("blocked: read", path, type(exc).__name__)
try:
    import torchlight_grader.checks.a2c_kernels as hidden

    print("ESCAPED: imported the checks", hidden.CHECKS)
except Exception as exc:
    print("blocked: import the checks", type(exc).__name__)
print('{"score": 13.0, "max_score": 13.0}')
print("Score: 13/13. All hidden tests passed.")
sys.stdout.flush()
"""

#: Few students (each one compiles and times kernels): one honest notebook, a slow kernel that
#: fakes the clocks, and a release that reads the checks and prints a score.
ATTACKS = [
    Submission("honest", A, "solution", "solution"),
    Submission(
        "attack-fake-clocks",
        A,
        "cheat",
        "solution",
        (replace("tiled_matmul", NAIVE_MATMUL), add_cell("tiled_matmul", FAKE_CLOCKS)),
        zero=SPEED,
        note="a serial triple loop that rewrites time.* and numpy's comparisons: no speed credit",
    ),
    Submission(
        "attack-read-checks-and-boast",
        A,
        "cheat",
        "release",
        (add_cell("setup", READ_AND_BOAST),),
        note="reads the hidden checks and the protocol, prints a full score: nothing",
    ),
]
