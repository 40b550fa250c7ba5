# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 2c: Fast kernels
#
# In assignment 2b you wrote the strided loops in plain Python: correct, and about a thousand
# times slower than numpy. Here you write them again as **compiled, parallel kernels** with
# [Numba](https://numba.readthedocs.io): the decorator `njit` with `parallel=True` compiles a Python function to
# machine code the first time it is called, and a `prange` loop splits its iterations over the
# CPU's cores. Tutorial 4 (*Writing kernels*) shows both.
#
# You write:
#
# 1. `fast_map(fn)`, `fast_zip(fn)`, `fast_reduce(fn)`: each returns a parallel kernel over
#    strided storage (any layout: permuted, sliced, broadcast);
# 2. `tiled_matmul(out, a, b)`: a parallel matrix multiply that works on tiles that stay in the
#    CPU's cache;
# 3. `shared_matmul`: a CUDA kernel that multiplies matrices with tiles in the GPU's shared
#    memory (run in numba's CUDA simulator when there is no GPU, and compiled for a real one).
#
# **How you are graded.** The hidden checks call your kernels on fresh random storages with
# every kind of layout (contiguous, permuted, sliced, broadcast, a strided output) and
# matrices whose sizes are not multiples of your tile, and compare with numpy. Then **speed**:
# inside the grading sandbox your kernel and the grader's reference kernel are timed in
# alternating pairs (a warm-up first, so compiling is not timed), each pair on fresh inputs,
# your output compared with the reference's after every pair. The sandbox times your kernel
# from outside your process and runs the reference in a process of its own; leave nothing of
# yours running meanwhile (a thread or a process a cell started): CPU time your processes use
# while the reference is timed costs the speed credit. The grade is the **median** of the
# per-pair ratios *your time / reference time*, taken on wall time and on CPU time (both
# threads counted; the larger is graded):
#
# | kernel | full credit | partial credit |
# |---|---|---|
# | `fast_map` on a 1000 x 1000 transposed input | ratio <= 2 (`test_map_fast`) | ratio <= 4 (`test_map_speed`) |
# | `tiled_matmul`, 512 x 512 | ratio <= 2 (`test_matmul_fast`) | ratio <= 4 (`test_matmul_speed`) |
#
# Full credit also needs a `prange` loop in the compiled kernel (a serial loop earns partial
# credit at most, however the timing fell). Wrong output in any pair earns no speed credit
# (so a kernel must do the whole work on every call). A machine too busy to time fairly gives "could not time" and a retry; if it stays
# busy, the item is held for a re-run, never silently zero. Your feedback shows your ratio and
# the thresholds. The hidden checks' torchlight leaves out the library's own Numba and CUDA
# kernels, and numpy's matrix product cannot be compiled there: an answer that calls them
# scores nothing for that item and is flagged for review.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import time

import numpy as np
from numba import njit, prange


@njit
def position(ordinal, shape, strides):
    """Where the `ordinal`-th element (row-major) of a layout is in its buffer."""
    pos, rest = 0, np.int64(ordinal)  # a prange index may be unsigned: int64 math
    for d in range(len(shape) - 1, -1, -1):
        pos += (rest % shape[d]) * strides[d]
        rest //= shape[d]
    return pos


@njit
def broadcast_position(ordinal, out_shape, shape, strides):
    """Where the input of `shape` (broadcast to `out_shape`) keeps the `ordinal`-th output
    element: assignment 2b's `broadcast_index`, then `index_to_position`."""
    pos, rest = 0, np.int64(ordinal)
    lead = len(out_shape) - len(shape)
    for d in range(len(out_shape) - 1, -1, -1):
        i = rest % out_shape[d]
        rest //= out_shape[d]
        if d >= lead and shape[d - lead] != 1:
            pos += i * strides[d - lead]
    return pos


@njit
def size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def layout(x):
    """A numpy view as (buffer, shape, strides): the buffer starts at its first element;
    shape and strides (in elements) are int64 arrays."""
    x = np.asarray(x)
    steps = np.array(x.strides, dtype=np.int64) // x.itemsize
    span = 1 + int(sum((n - 1) * s for n, s in zip(x.shape, steps) if n > 0))
    flat = np.lib.stride_tricks.as_strided(x, shape=(span,), strides=(x.itemsize,))
    return flat, np.array(x.shape, dtype=np.int64), steps


@njit
def neg(x):
    return -x


@njit
def add(x, y):
    return x + y


@njit
def maximum(x, y):
    return x if x > y else y


def seconds(kernel, *args, repeat=5):
    """The best of `repeat` timings of `kernel(*args)` (called once before, to compile)."""
    kernel(*args)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        kernel(*args)
        best = min(best, time.perf_counter() - start)
    return best


# %% [markdown] nbgrader={"grade": false, "grade_id": "map_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. Parallel map, zip and reduce
#
# A storage is passed as three arrays: its flat `buffer` (starting at its first element), its
# `shape` and its `strides` (in elements). The output is a storage too, with its own strides
# (it need not be contiguous). The helpers above do the index arithmetic of 2b, compiled:
# `position(ordinal, shape, strides)` and `broadcast_position(ordinal, out_shape, shape,
# strides)`; `size(shape)` counts the elements. Each factory receives a compiled scalar
# function `fn` and returns a kernel decorated with `njit(parallel=True)` whose loop over the
# output's elements is a `prange`:
#
# - `fast_map(fn)` returns `kernel(out, out_shape, out_strides, a, a_shape, a_strides)`:
#   `out[i] = fn(a[i])`;
# - `fast_zip(fn)` returns `kernel(out, out_shape, out_strides, a, a_shape, a_strides, b,
#   b_shape, b_strides)`: `out[i] = fn(a[i], b[i])`, `a` and `b` broadcast to `out_shape`;
# - `fast_reduce(fn)` returns `kernel(out, out_shape, out_strides, a, a_shape, a_strides,
#   dim)`: `out_shape` is `a_shape` with `dim` of size 1; `out` already holds the start value
#   in every element; fold `out[j] = fn(out[j], a[j with index dim = r])` for `r = 0, 1, ...`.
#
# Iterations of a `prange` run at the same time on different cores: two iterations must never
# write the same element (a *race*: one write is lost).


# %% nbgrader={"grade": false, "grade_id": "fast_map", "locked": false, "schema_version": 3, "solution": true}
def fast_map(fn):
    ### BEGIN SOLUTION
    @njit(parallel=True)
    def kernel(out, out_shape, out_strides, a, a_shape, a_strides):
        for i in prange(size(out_shape)):
            x = a[broadcast_position(i, out_shape, a_shape, a_strides)]
            out[position(i, out_shape, out_strides)] = fn(x)

    return kernel
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_map", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = np.arange(24.0).reshape(2, 3, 4).transpose(2, 0, 1)  # (4, 2, 3), not contiguous
kernel = fast_map(neg)  # compiled on its first call (a few seconds), then fast
out = np.zeros((4, 2, 3))
kernel(*layout(out), *layout(x))
assert np.array_equal(out, -x)
out_t = np.zeros((3, 4, 2)).transpose(1, 2, 0)  # a strided output
kernel(*layout(out_t), *layout(x))
assert np.array_equal(out_t, -x)
print("fast_map: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_map", globals())
### END HIDDEN TESTS


# %% nbgrader={"grade": false, "grade_id": "fast_zip", "locked": false, "schema_version": 3, "solution": true}
def fast_zip(fn):
    ### BEGIN SOLUTION
    @njit(parallel=True)
    def kernel(out, out_shape, out_strides, a, a_shape, a_strides, b, b_shape, b_strides):
        for i in prange(size(out_shape)):
            x = a[broadcast_position(i, out_shape, a_shape, a_strides)]
            y = b[broadcast_position(i, out_shape, b_shape, b_strides)]
            out[position(i, out_shape, out_strides)] = fn(x, y)

    return kernel
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_zip", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x, y = np.arange(6.0).reshape(2, 3), np.array([10.0, 20.0, 30.0])
kernel = fast_zip(maximum)
out = np.zeros((2, 3))
kernel(*layout(out), *layout(x), *layout(y))
assert np.array_equal(out, np.maximum(x, y))
column = np.arange(4.0).reshape(4, 1)
out = np.zeros((4, 3))
kernel(*layout(out), *layout(column), *layout(x[1]))
assert np.array_equal(out, np.maximum(column, x[1]))
print("fast_zip: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_zip", globals())
### END HIDDEN TESTS


# %% nbgrader={"grade": false, "grade_id": "fast_reduce", "locked": false, "schema_version": 3, "solution": true}
def fast_reduce(fn):
    ### BEGIN SOLUTION
    @njit(parallel=True)
    def kernel(out, out_shape, out_strides, a, a_shape, a_strides, dim):
        for j in prange(size(out_shape)):
            o = position(j, out_shape, out_strides)
            start = position(j, out_shape, a_strides)  # index j, with index dim = 0, in a
            acc = out[o]
            for r in range(a_shape[dim]):
                acc = fn(acc, a[start + r * a_strides[dim]])
            out[o] = acc

    return kernel
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_reduce", "locked": true, "points": 2, "schema_version": 3, "solution": false}
x = (np.arange(24.0).reshape(2, 3, 4) - 30.0).transpose(1, 2, 0)  # (3, 4, 2), all negative
total, largest = fast_reduce(add), fast_reduce(maximum)
for dim in range(3):
    shape = tuple(1 if d == dim else n for d, n in enumerate(x.shape))
    out = np.zeros(shape)
    total(*layout(out), *layout(x), dim)
    assert np.array_equal(out, x.sum(axis=dim, keepdims=True)), dim
    out = np.full(shape, -np.inf)
    largest(*layout(out), *layout(x), dim)
    assert np.array_equal(out, x.max(axis=dim, keepdims=True)), dim
print("fast_reduce: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_reduce", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "matmul_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. A tiled matrix multiply
#
# `out[i, j] = sum_k a[i, k] * b[k, j]` for 2-D float64 arrays `a` (n x k), `b` (k x m), `out`
# (n x m), of any layout. A plain triple loop reads `b` a column at a time, far apart in
# memory, and reads every row of `a` m times: most of its time is spent waiting for memory.
# Split `out` into `TILE x TILE` tiles, one `prange` iteration per tile; each accumulates its
# tile over blocks of `k`, so that the pieces of `a` and `b` it reads stay in the cache while
# they are used. Sizes are not multiples of `TILE`: the last tiles are smaller. Decorate
# `tiled_matmul` itself with `njit(parallel=True)`. (Numba compiles numpy's `@` and
# `np.dot` only with SciPy, which the grader's sandbox does not have: write the loops.)

# %% nbgrader={"grade": false, "grade_id": "tiled_matmul", "locked": false, "schema_version": 3, "solution": true}
TILE = 32


### BEGIN SOLUTION
@njit(parallel=True)
def tiled_matmul(out, a, b):
    n, depth = a.shape
    m = b.shape[1]
    rows, cols = (n + TILE - 1) // TILE, (m + TILE - 1) // TILE
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
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_tiled_matmul", "locked": true, "points": 2, "schema_version": 3, "solution": false}
rng = np.random.default_rng(0)
for n, k, m in [(3, 4, 5), (TILE + 1, 2 * TILE - 1, TILE), (70, 33, 41)]:
    a, b = rng.normal(size=(n, k)), rng.normal(size=(m, k)).T  # b is a transposed view
    out = np.zeros((n, m))
    tiled_matmul(out, a, b)
    assert np.allclose(out, a @ b, rtol=1e-12, atol=1e-12), (n, k, m)
print("tiled_matmul: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_tiled_matmul", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "cuda_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. A CUDA matrix multiply with shared-memory tiles
#
# On a GPU, `@cuda.jit` compiles a *kernel* that thousands of threads run at once. They are
# grouped in *blocks*; the threads of one block share a small, fast *shared memory* and can
# wait for each other at a *barrier*, `cuda.syncthreads()`. Launched as
# `shared_matmul[grid, (CUDA_TILE, CUDA_TILE)](out, a, b)` with
# `grid = (ceil(n / CUDA_TILE), ceil(m / CUDA_TILE))`, the thread `(tx, ty)` of block `(bx, by)`
# computes `out[bx * CUDA_TILE + tx, by * CUDA_TILE + ty]`.
#
# Reading `a` and `b` straight from the GPU's global memory, every thread would read a whole row
# and a whole column: `n * m * k` slow reads. Instead, for each step `t` along `k`, the block
# **loads one tile** of `a` (rows of the block, columns `t * CUDA_TILE ...`) and one of `b` into
# `cuda.shared.array((CUDA_TILE, CUDA_TILE), float64)`, one element per thread; **waits**
# (`cuda.syncthreads()`) until every thread has stored its element; multiplies the two tiles
# from shared memory; and **waits again** before the next step overwrites the tiles, which other
# threads may still be reading. Each element of `a` and `b` is then read from global memory
# `CUDA_TILE` times fewer. Sizes are not multiples of the tile: a thread whose element lies
# outside `a` or `b` stores 0 in the tile (so the sum is unchanged), and only threads inside
# `out` write. Every thread of a block must reach every barrier: do not `return` early.
#
# **How you are graded.** `test_cuda_matmul` launches your kernel in numba's **CUDA
# simulator** (no GPU needed: it runs each GPU thread as a Python thread, slowly, so the sizes
# are small) on random sizes that are no multiple of the tile, against numpy. `test_cuda_shared`
# compiles the same kernel **for a real GPU** (`numba.cuda.compile_ptx`, which needs no GPU)
# and reads the GPU code (PTX): both tiles declared `.shared` and read from there, a barrier
# (`bar.sync`) between storing a tile and reading it and between reading it and storing the next,
# no tile in local memory.
#
# What the simulator can and cannot catch: it catches wrong numbers, partial tiles handled
# wrong (an index past the end raises `IndexError` there; a GPU would read garbage silently), and
# usually a missing barrier (it runs each thread until it blocks, so a thread races ahead of the
# others). It cannot tell whether the kernel uses shared memory at all (a plain kernel reading
# global memory gives the same numbers, many times slower on a GPU), it accepts code a GPU
# rejects (allocating an array, calling numpy or Python functions), and its schedule is not a
# GPU's: a race it happens to hide still breaks on the device. Hence the second item. In the
# kernel use only `cuda`, numba's types, `math`, numbers, `range`/`min`/`max` and device
# functions: no numpy.

# %% nbgrader={"grade": false, "grade_id": "cuda_setup", "locked": true, "schema_version": 3, "solution": false}
import os

import numba

import torchlight as tl

if not tl.cuda.is_available():  # no GPU here: numba's simulator runs the kernels (slowly)
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
numba.core.config.reload_config()  # numba read its settings at `import numba`: again, now
from numba import cuda, float64  # noqa: E402 - after the switch above

SIMULATOR = bool(numba.core.config.ENABLE_CUDASIM)
CUDA_TILE = 8  # 8 x 8 = 64 threads a block: the simulator runs one Python thread each


def launch(kernel, out, a, b):
    """`kernel[grid, block](out, a, b)`: one block of CUDA_TILE x CUDA_TILE threads per tile
    of `out` (the grader launches your kernel the same way)."""
    grid = (
        (out.shape[0] + CUDA_TILE - 1) // CUDA_TILE,
        (out.shape[1] + CUDA_TILE - 1) // CUDA_TILE,
    )
    kernel[grid, (CUDA_TILE, CUDA_TILE)](out, a, b)


# %% nbgrader={"grade": false, "grade_id": "shared_matmul", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
@cuda.jit
def shared_matmul(out, a, b):
    tile_a = cuda.shared.array((CUDA_TILE, CUDA_TILE), float64)
    tile_b = cuda.shared.array((CUDA_TILE, CUDA_TILE), float64)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    i = cuda.blockIdx.x * CUDA_TILE + tx  # this thread's row and column of out
    j = cuda.blockIdx.y * CUDA_TILE + ty
    n, depth = a.shape
    m = b.shape[1]
    acc = 0.0
    for t in range((depth + CUDA_TILE - 1) // CUDA_TILE):
        ka, kb = t * CUDA_TILE + ty, t * CUDA_TILE + tx  # the columns of a, rows of b loaded
        tile_a[tx, ty] = a[i, ka] if i < n and ka < depth else 0.0
        tile_b[tx, ty] = b[kb, j] if kb < depth and j < m else 0.0
        cuda.syncthreads()  # every element of both tiles stored
        for q in range(CUDA_TILE):
            acc += tile_a[tx, q] * tile_b[q, ty]
        cuda.syncthreads()  # every thread done with the tiles before they are overwritten
    if i < n and j < m:
        out[i, j] = acc
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_cuda_matmul", "locked": true, "points": 2, "schema_version": 3, "solution": false}
rng = np.random.default_rng(3)
for n, k, m in [(5, 3, 4), (CUDA_TILE + 3, 2 * CUDA_TILE + 1, CUDA_TILE - 1)]:
    a, b = rng.normal(size=(n, k)), rng.normal(size=(k, m))
    out = np.zeros((n, m))
    launch(shared_matmul, out, a, b)
    assert np.allclose(out, a @ b, rtol=1e-12, atol=1e-12), (n, k, m)
print(f"shared_matmul: visible tests passed ({'simulator' if SIMULATOR else 'GPU'})")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_cuda_matmul", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_cuda_shared", "locked": true, "points": 1, "schema_version": 3, "solution": false}
if SIMULATOR:  # the simulator's numba.cuda cannot compile for a GPU
    print(
        "the grader compiles shared_matmul for a real GPU and reads its PTX: start Jupyter "
        "with NUMBA_ENABLE_CUDASIM=0 to see it here (compile_ptx needs the CUDA toolkit)"
    )
else:
    matrix = float64[:, :]
    ptx, _ = cuda.compile_ptx(shared_matmul.py_func, (matrix, matrix, matrix), cc=(7, 5))
    print({word: ptx.count(word) for word in (".shared", "bar.sync", ".local")})
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_cuda_shared", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "speed_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. Speed
#
# The cells below time your kernels here, on your machine, against themselves on one core
# (`numba.set_num_threads(1)`): a `prange` kernel on two cores should take about half the time.
# The grader times them against its own reference kernels with the protocol described at the
# top; the thresholds are in the table there.

# %% nbgrader={"grade": true, "grade_id": "test_map_speed", "locked": true, "points": 1, "schema_version": 3, "solution": false}
import numba

x = np.random.default_rng(1).normal(size=(1000, 1000)).T
out = np.empty((1000, 1000))
kernel = fast_map(neg)
args = (*layout(out), *layout(x))
threads = numba.get_num_threads()
numba.set_num_threads(1)
one = seconds(kernel, *args)
numba.set_num_threads(threads)
every = seconds(kernel, *args)
assert np.array_equal(out, -x)
print(f"fast_map: {one * 1e3:.1f} ms on one thread, {every * 1e3:.1f} ms on {threads}")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_map_speed", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_map_fast", "locked": true, "points": 1, "schema_version": 3, "solution": false}
print("full credit: at most 2x the grader's reference map (see the table above)")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_map_fast", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_matmul_speed", "locked": true, "points": 1, "schema_version": 3, "solution": false}
a, b = np.random.default_rng(2).normal(size=(2, 512, 512))
out = np.empty((512, 512))
numba.set_num_threads(1)
one = seconds(tiled_matmul, out, a, b)
numba.set_num_threads(threads)
every = seconds(tiled_matmul, out, a, b)
assert np.allclose(out, a @ b, rtol=1e-12, atol=1e-12)
print(f"tiled_matmul: {one * 1e3:.1f} ms on one thread, {every * 1e3:.1f} ms on {threads}")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_matmul_speed", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_matmul_fast", "locked": true, "points": 1, "schema_version": 3, "solution": false}
print("full credit: at most 2x the grader's reference matmul (see the table above)")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2c_kernels", "test_matmul_fast", globals())
### END HIDDEN TESTS
