# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python (torchlight)
#     language: python
#     name: torchlight
# ---

# %% [markdown]
# # Tutorial 4: Backends and the GPU
#
# So far every tensor lived in a numpy array. Underneath any framework, though, is a simple
# question: *given a flat block of memory plus a shape and strides, how do we compute
# `exp(x)`, `x + y`, `x.sum(dim)` or `x @ y`, and how do we make that fast?*
#
# torchlight answers it with **backends**. A backend owns a tensor's storage and implements a
# handful of primitives; every Function, every layer and every optimizer is written against
# those names only, so the same model runs unchanged on each backend:
#
# | backend | storage | what it teaches |
# |---|---|---|
# | `numpy` (default) | a numpy array | the fast, everyday one |
# | `strided` | a flat Python `array` + shape + strides + offset | what all the others do, as plain loops |
# | `numba` | a numpy array, with compiled parallel loops | how the loops become fast on a CPU |
# | `cuda` | a flat buffer in GPU memory | how the loops run on thousands of GPU threads |
#
# **One note before we start.** Numba decides at import time whether its CUDA part talks to a
# real GPU or to its **simulator** (which runs GPU kernels on the CPU, slowly, for learning and
# testing). So the first cell checks for a GPU, in a separate process, and switches the
# simulator on if there is none. (Without NVIDIA's driver library, `libcuda`, there is no GPU
# to find, and the check, which takes seconds to import numba, is skipped.)

# %% tags=["nbval-ignore-output"]
import ctypes.util
import os
import subprocess
import sys

probe = "from numba import cuda; print(cuda.is_available())"
real_env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
has_gpu = ctypes.util.find_library("cuda") is not None and subprocess.run(
    [sys.executable, "-c", probe], env=real_env, capture_output=True, text=True
).stdout.strip() == "True"
if not has_gpu:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # must happen before numba.cuda is imported
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    print("The cuda backend will run in numba's simulator (no CUDA GPU found, or the simulator was asked for)")
else:
    print("CUDA GPU found: the cuda backend runs on it")

# %%
import time

import numpy as np

import torchlight as tl
from torchlight import nn
from torchlight.nn import functional as F

tl.manual_seed(0)
print(tl.backends.available_backends())

# %% [markdown]
# ## 1. The backend protocol
#
# Every backend implements four higher-order primitives over its storage, plus layout
# operations (view, permute, expand, indexing) that only rewrite shape, strides and offset:
#
# - `map(op, a)`: a one-argument op on every element (`exp`, `relu`, ...);
# - `zip(op, a, b)`: a two-argument op elementwise, with broadcasting (`add`, `mul`, `lt`, ...);
# - `reduce(op, a, dims, keepdim)`: fold along dimensions (`sum`, `max`, `min`);
# - `matmul(a, b)`: batched matrix product (too important to leave to `zip` + `reduce`).
#
# Ops are named by strings, so a compiled backend can keep one kernel per name:

# %%
from torchlight.backends.base import MAP_OPS, REDUCE_OPS, ZIP_OPS

print("map:   ", ", ".join(MAP_OPS))
print("zip:   ", ", ".join(ZIP_OPS))
print("reduce:", ", ".join(REDUCE_OPS))

# %% [markdown]
# They work on a tensor's raw `storage` (a numpy array on this backend), through its
# `backend`, and record nothing in the graph: they are what the forward of a Function is
# written with. `x.exp()` is the `Exp` Function, whose forward calls the backend's `exp` map
# (through `x._map("exp")`, private because it skips autograd):

# %%
x = tl.tensor([[1.0, -2.0], [3.0, -4.0]])
b = x.backend
print(b.map("relu", x.storage))
print(b.zip("mul", x.storage, tl.tensor([10.0, 100.0]).storage))  # broadcast over rows
print(b.reduce("sum", x.storage, (0,), False))

# %% [markdown]
# ## 2. The strided reference backend
#
# The `strided` backend keeps the elements in a flat Python `array` and describes the tensor
# with three tuples -- exactly the storage + strides + offset picture of Tutorial 1. Its
# storage object prints them:

# %%
x = tl.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], backend="strided")
print(x.storage)
print(x.T.storage)
print(x[:, 1:].storage)
print(tl.tensor([1.0, 2.0, 3.0], backend="strided").expand(2, 3).storage)

# %% [markdown]
# Transposing swaps the strides, slicing moves the offset, expanding sets a stride to 0, and
# all of them share the one buffer:

# %%
assert x.T.storage.buffer is x.storage.buffer
assert x[:, 1:].storage.offset == 1
print(x.T)

# %% [markdown]
# Here is its `zip`, the whole of it: for each position of the output, turn the position into
# an index (`to_index`), map that index back into each operand (`broadcast_index`: a size-1
# dimension always reads index 0), find each operand's element (`index_to_position`), and apply
# the scalar function. Every fast backend computes exactly this, only faster.

# %% tags=["nbval-ignore-output"]
import inspect

from torchlight.backends.strided.backend import StridedBackend

print(inspect.getsource(StridedBackend.zip))

# %% [markdown]
# The scalar functions (`scalar_ops.ZIP["mul"]`, `scalar_ops.MAP["sigmoid"]`, ...) are plain
# Python functions of numbers, shared by all backends: the strided backend calls them, the
# Numba backends compile them into their kernels.
#
# Being plain Python, it is **slow**: microseconds per element. But it is the
# reference: results on every backend must match it. A small network's loss and gradients on
# `numpy` and on `strided`:

# %%
def loss_and_grads(backend):
    tl.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(backend)
    x = tl.randn(5, 4).to(backend)
    y = tl.tensor([0, 1, 2, 1, 0]).to(backend)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.item(), [p.grad.numpy() for p in model.parameters()]


loss_numpy, grads_numpy = loss_and_grads("numpy")
loss_strided, grads_strided = loss_and_grads("strided")
print(f"numpy   loss {loss_numpy:.12f}")
print(f"strided loss {loss_strided:.12f}")
worst = max(np.abs(a - b).max() for a, b in zip(grads_numpy, grads_strided))
assert worst < 1e-12, worst
print("largest gradient difference below 1e-12")

# %% [markdown]
# ## 3. Numba: the same loops, compiled and parallel
#
# [Numba](https://numba.pydata.org) compiles a subset of Python to machine code.
# `@njit(parallel=True)` plus `prange` splits a loop across the CPU cores. The `numba` backend
# compiles the strided loops this way, with two tricks: neighbouring dimensions that every
# operand walks contiguously are merged into one long run, and fully contiguous operands take
# a simple `out[i] = f(a[i], b[i])` loop the compiler can vectorize.
#
# The first call of each kernel **compiles** it (seconds); numba caches the machine code on
# disk, so later processes load it instead. Times in this section depend on the machine, and
# are not checked.

# %% tags=["nbval-ignore-output"]
a = tl.randn(1000, 1000, backend="numba")
b = tl.randn(1000, 1000, backend="numba")
for name, run in [("add", lambda: a + b), ("exp", lambda: a.exp()), ("sum", lambda: a.sum(1)), ("matmul", lambda: a @ b)]:
    start = time.perf_counter()
    run()
    print(f"first {name:6s} call: {time.perf_counter() - start:6.2f} s (compiling or loading from cache)")

# %% [markdown]
# Results agree with numpy (matmul sums in a different order, so only up to rounding):

# %%
an, bn = a.numpy(), b.numpy()
assert np.array_equal((a + b).numpy(), an + bn)
assert np.allclose(a.exp().numpy(), np.exp(an), rtol=1e-14)
assert np.allclose(a.sum(1).numpy(), an.sum(1), rtol=1e-12)
assert np.allclose((a @ b).numpy(), an @ bn, rtol=1e-12, atol=1e-12)
print("numba agrees with numpy")

# %% [markdown]
# And gradients flow through numba kernels like through any other backend: here
# $f(w) = \sum e^{x w}$, whose gradient is $x^\top e^{x w}$:

# %%
xs = tl.randn(6, 3, backend="numba") * 0.5
w = tl.randn(3, 2, backend="numba", requires_grad=True)
(xs @ w).exp().sum().backward()
expected = xs.numpy().T @ np.exp(xs.numpy() @ w.detach().numpy())
assert np.allclose(w.grad.numpy(), expected)
print(w.grad)

# %% [markdown]
# ### Timings (machine-dependent)
#
# Steady-state times, best of 5, on whatever machine ran this notebook last. On a laptop with
# more cores the numba column improves; numpy's `matmul` calls an optimized BLAS library, which
# a simple tiled loop does not beat. The strided backend is timed on 10,000 elements only (it
# would take seconds for a million).

# %% tags=["nbval-ignore-output"]
def best_time(fn, repeat=5):
    fn()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


a_np, b_np = a.to("numpy"), b.to("numpy")
small_s = tl.randn(100, 100, backend="strided")
rows = [
    ("add 1000x1000", best_time(lambda: a_np + b_np), best_time(lambda: a + b)),
    ("exp 1000x1000", best_time(lambda: a_np.exp()), best_time(lambda: a.exp())),
    ("sum(1) 1000x1000", best_time(lambda: a_np.sum(1)), best_time(lambda: a.sum(1))),
    ("matmul 1000x1000", best_time(lambda: a_np @ b_np, 3), best_time(lambda: a @ b, 3)),
]
print(f"{'op':18s} {'numpy':>10s} {'numba':>10s}")
for name, t_np, t_nb in rows:
    print(f"{name:18s} {t_np * 1e3:8.2f} ms {t_nb * 1e3:8.2f} ms")
t_strided = best_time(lambda: small_s + small_s, 2)
print(f"strided add on 100x100: {t_strided * 1e3:.1f} ms = {t_strided / 1e4 * 1e9:.0f} ns per element")

# %% [markdown]
# **If numba's elementwise rows (add, exp, sum) are many times slower than numpy's** (20x has
# been seen on a machine with 2 cores that other programs kept busy), nothing is broken:
#
# - A `parallel=True` kernel hands its loop to numba's thread pool on every call: it wakes one
#   thread per core, splits the range, and waits for the *slowest* thread. On an idle
#   many-core laptop that costs microseconds; when the other core is busy, the waiting thread
#   must wait until the operating system gives that core back (milliseconds).
# - numpy runs the same elementwise loop on one thread, with SIMD instructions, and never waits
#   for another thread. For `add` on a million float64s both are limited by memory bandwidth
#   (24 MB are read and written), so more threads can only help when there are idle cores.
#
# So compare on an idle machine, or give numba one thread (`NUMBA_NUM_THREADS=1` before
# numba is imported) to see the loop itself. `matmul` is different: numpy calls a tuned BLAS
# library, which a simple tiled loop does not beat on any machine.

# %% [markdown]
# ### Writing kernels (assignment 2c)
#
# The course's assignment 2c (`a2c_kernels`) has you write these kernels. Two ideas carry it.
#
# **`prange`.** Inside `@njit(parallel=True)`, `for i in prange(n)` splits the iterations over
# the cores; a plain `range` stays on one. Iterations run at the same time, so two of them must
# never write the same element. The same loop both ways, on a compute-bound function:

# %%
from numba import njit, prange


@njit
def wave(x):
    return np.sin(x) * np.exp(-x * x) + np.cos(3.0 * x)


@njit  # (parallel=True without a prange would only warn that nothing could be parallel)
def serial_map(out, a):
    for i in range(a.size):  # one core
        out[i] = wave(a[i])


@njit(parallel=True)
def parallel_map(out, a):
    for i in prange(a.size):  # every core numba may use
        out[i] = wave(a[i])


values = np.random.default_rng(0).uniform(-2, 2, 1_000_000)
out_serial, out_parallel = np.empty_like(values), np.empty_like(values)
serial_map(out_serial, values)
parallel_map(out_parallel, values)
assert np.array_equal(out_serial, out_parallel)
print("serial and parallel loops agree on", values.size, "elements")

# %% [markdown]
# **Timing fairly.** One timing of each says little on a shared machine: a neighbour's burst
# lands on one of them. The course's grader times the two kernels in *pairs*, alternating which
# goes first, each pair on fresh inputs (so a kernel cannot reuse an old answer), compares the
# outputs after every pair, and keeps the **median** of the per-pair ratios
# (`torchlight_grader/checks/timing.py`). The same idea in a few lines:

# %% tags=["nbval-ignore-output"]
ratios = []
for k in range(7):
    fresh = np.random.default_rng(k).uniform(-2, 2, 1_000_000)
    order = (serial_map, parallel_map) if k % 2 == 0 else (parallel_map, serial_map)
    took = {}
    for kernel in order:
        out = np.empty_like(fresh)
        start = time.perf_counter()
        kernel(out, fresh)
        took[kernel] = time.perf_counter() - start
    ratios.append(took[serial_map] / took[parallel_map])
print("serial / parallel, per pair:", " ".join(f"{r:.2f}" for r in ratios))
print(f"median: {sorted(ratios)[len(ratios) // 2]:.2f} (about the number of idle cores)")

# %% [markdown]
# **Tiles.** A matrix product's triple loop reads `b` a column at a time, far apart in memory.
# A *tiled* product computes `out` one `TILE x TILE` block at a time, one `prange` iteration
# per block, accumulating over blocks of `k`, so the pieces of `a` and `b` it reads stay in the
# CPU's cache while they are used. The last tiles are smaller when sizes are not multiples of
# `TILE`: the assignment's checks use such sizes.

# %% [markdown]
# ## 4. The GPU
#
# A GPU runs thousands of threads at once. A CUDA **kernel** is a function every thread runs;
# threads are grouped in **blocks**, and the blocks form a **grid**. Each thread finds its own
# element from its position, `cuda.grid(1)` = block index x block size + thread index. Here is
# the smallest useful kernel, written with `numba.cuda`:

# %%
import warnings

from numba import cuda
from numba.core.errors import NumbaPerformanceWarning

# A real GPU warns that grids this small leave it mostly idle: true, and fine for learning.
warnings.simplefilter("ignore", NumbaPerformanceWarning)


@cuda.jit
def add_kernel(a, b, out):
    i = cuda.grid(1)  # this thread's global index
    if i < out.size:  # the last block may have threads past the end
        out[i] = a[i] + b[i]


n = 1000
a_host = np.arange(n, dtype=np.float64)
b_host = np.ones(n)
a_dev, b_dev = cuda.to_device(a_host), cuda.to_device(b_host)  # host -> GPU memory
out_dev = cuda.device_array(n)
threads = 128
blocks = (n + threads - 1) // threads  # enough blocks to cover every element
add_kernel[blocks, threads](a_dev, b_dev, out_dev)
out = out_dev.copy_to_host()  # GPU -> host memory
print(blocks, "blocks of", threads, "threads;", out[:3], "...", out[-1])
assert np.array_equal(out, a_host + b_host)

# %% [markdown]
# The `cuda` backend is built from kernels like this one: `map` and `zip` use one thread per
# output element doing the strided index arithmetic of section 2; `reduce` uses one block per
# output element, whose threads combine partial sums pairwise in fast **shared memory**;
# `matmul` loads tiles of both matrices into shared memory so each element fetched from GPU
# memory is used many times.
#
# Data moves between the host and the GPU **only where you ask**: `.to("cuda")` copies a
# tensor to the GPU, `.to("numpy")` back (printing, `.numpy()` and `.item()` copy too).

# %%
x = tl.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).to("cuda")
print(x)
print((x * x).sum(1))
print(x.exp().to("numpy"))

# %% [markdown]
# A tiled matrix product on the cuda backend against numpy (16 x 16, one tile, because the
# simulator runs every GPU thread as a Python thread):

# %%
a = tl.randn(16, 16)
b = tl.randn(16, 16)
c = a.to("cuda") @ b.to("cuda")
assert np.allclose(c.to("numpy").numpy(), a.numpy() @ b.numpy(), rtol=1e-12, atol=1e-12)
print("cuda matmul agrees with numpy")

# %% [markdown]
# ### Shared memory and barriers (assignment 2c)
#
# The threads of one block share a small, fast memory, `cuda.shared.array(shape, dtype)` (its
# shape a constant numba knows when it compiles), and wait for each other at a barrier,
# `cuda.syncthreads()`: no thread of the block passes it before every thread has reached it.
# A tiled matrix multiply (assignment 2c's `shared_matmul`) repeats one pattern for each tile
# along `k`: every thread **stores** one element of the tile of `a` and one of `b` (0 where the
# tile sticks out past the matrix), **waits**, **reads** the whole row and column it needs from
# shared memory, and **waits again** before the next tiles overwrite these. The kernel below
# shows the same pattern on one small job: each block sums its piece of an array through
# shared memory. Thread 0 reads the elements every other thread stored, so without the barrier
# it could read them before they are there.

# %%
from numba import float64

TILE = 8


@cuda.jit
def block_sums(x, out):
    piece = cuda.shared.array(TILE, float64)  # one per block, seen by all its threads
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TILE + t
    piece[t] = x[i] if i < x.size else 0.0  # store (0 past the end: the last block is partial)
    cuda.syncthreads()  # every thread has stored its element
    if t == 0:  # one thread reads what all the others stored
        total = 0.0
        for k in range(TILE):
            total += piece[k]
        out[cuda.blockIdx.x] = total


x = np.arange(20.0)
blocks = (x.size + TILE - 1) // TILE
out = np.zeros(blocks)
block_sums[blocks, TILE](x, out)
print(out)
assert np.array_equal(out, np.add.reduceat(x, np.arange(0, x.size, TILE)))

# %% [markdown]
# Numba's simulator runs each GPU thread as a Python thread until it blocks at a barrier, so a
# missing barrier usually shows there as wrong numbers; but it cannot tell whether a kernel
# uses shared memory at all, and it accepts code a GPU rejects. `numba.cuda.compile_ptx`
# compiles a kernel for a real GPU without one (the CUDA toolkit's libNVVM does the work): the
# GPU code (PTX) of `block_sums` declares its tile `.shared` and has the barrier as
# `bar.sync`. The assignment's grader reads the same two things in the PTX of your kernel.

# %% [markdown]
# And the small network from section 2, trained for one step on the GPU (or the simulator),
# gives the same loss and gradients as on numpy:

# %%
loss_cuda, grads_cuda = loss_and_grads("cuda")
print(f"cuda    loss {loss_cuda:.12f}")
worst = max(np.abs(a - b).max() for a, b in zip(grads_numpy, grads_cuda))
assert worst < 1e-12, worst
print("largest gradient difference below 1e-12")

# %% [markdown]
# Mixing backends in one operation is an error that names both (moving data must be a
# decision, never an accident):

# %%
try:
    tl.ones(2).to("cuda") + tl.ones(2)
except RuntimeError as error:
    print("RuntimeError:", error)

# %% [markdown]
# ## Summary
#
# - A backend owns storage and implements `map`, `zip`, `reduce`, `matmul` and the layout
#   operations; everything above it is backend-independent.
# - The `strided` backend is the reference: flat buffer + shape + strides + offset, and loops
#   that turn positions into indices and indices into positions.
# - The `numba` backend compiles those loops (parallel, vectorized on contiguous runs); the
#   first call compiles, later processes load from numba's cache.
# - The `cuda` backend runs one GPU thread per element (or a block per reduction, tiles for
#   matmul); without a GPU, numba's simulator runs the same kernels slowly on the CPU.
# - Choose a backend per tensor (`backend=`, `.to(...)`), per process
#   (`tl.set_default_backend`) or with `TORCHLIGHT_BACKEND=numba`.
#
# ## Exercises
#
# 1. Time the strided backend's `add` for 100, 1,000 and 10,000 elements. Is it linear? How long
#    would a million take?
# 2. Write `map` for the strided storage yourself (a loop over positions, using `to_index` and
#    `index_to_position`) and check it on a transposed tensor against `x.exp()`.
# 3. Change `add_kernel` to compute `out[i] = a[i] * b[n - 1 - i]`. Run it with 3 blocks of
#    128 threads for `n = 1000`: what goes wrong, and why?
# 4. `reduce` on the GPU combines partial sums pairwise in 7 steps for 128 threads. Write the
#    same tree reduction for a Python list of 128 numbers and count the additions.
# 5. Train the digits MLP of Tutorial 3 for one epoch with `tl.set_default_backend("numba")`.
#    Is the loss the same as on numpy? Is it faster on your machine?
#
# Next: [Tutorial 5: Convolutions](05_convolutions.ipynb).
