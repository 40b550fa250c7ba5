r"""The CUDA backend's kernels: the code that runs on the GPU.

Each kernel is written as a plain Python function (``_map_source`` and friends build them), which
``cuda.jit`` compiles at its first launch; the tests compile every one for a real GPU with
``numba.cuda.compile_ptx`` (:func:`kernel_sources` lists them). What they compute:

- ``map`` / ``zip`` / ``where`` / ``copy`` / ``fill`` / ``iota`` / ``gather`` / ``scatter`` /
  ``cat_views``:
  *grid-stride
  loops*, thread ``i`` taking elements ``i``, ``i + gridsize``, ...: each element's ordinal
  becomes an index (:func:`to_index`), the index a position in each strided operand
  (:func:`index_to_position`; broadcast operands have stride 0);
- ``reduce``: one *block* per output element (or per part of one, when there are few outputs);
  its threads fold a share of the reduced elements each, then combine their partial results
  pairwise in shared memory (a tree of $\log_2$ 128 = 7 steps). ``fold`` (few elements per
  output: a softmax's row, a pooling window) and ``argfold`` (argmax/argmin) use one thread per
  output instead;
- ``matmul``: small products one thread per output; larger ones stage tiles of A and B in
  shared memory so each element read from GPU memory is used many times; large ones use a
  register-blocked kernel (each thread computes 8x8 outputs from registers, and loads the next
  tiles while it multiplies).

The backend that launches them, and the storage they work on, are in
:mod:`~torchlight.backends.cuda.backend`. Without a GPU, set ``NUMBA_ENABLE_CUDASIM=1`` before
this module is first imported: numba then runs the same kernels in its simulator.

Example:
    >>> from torchlight.backends.cuda.kernels import kernel_sources   # doctest: +SKIP
    >>> sorted({name.split()[0] for name, _, _ in kernel_sources()})[:6]  # doctest: +SKIP
    ['argfold', 'cat_views', 'copy', 'fill', 'fold', 'gather']
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from torchlight.backends import scalar_ops


def _numba_cuda() -> Any:
    """``numba.cuda``, imported after numba has read its configuration again: so
    ``NUMBA_ENABLE_CUDASIM=1`` is honoured even when set after ``import numba``."""
    if "numba.cuda" not in sys.modules:
        numba.core.config.reload_config()
    return importlib.import_module("numba.cuda")


# Typed as Any: numba's stubs describe the CUDA intrinsics for numba's compiler, not for mypy.
cuda: Any = _numba_cuda()


def device_function(fn: Callable[..., Any], float32: bool = False) -> Any:
    """``fn`` (a scalar op of :mod:`~torchlight.backends.scalar_ops`) as a CUDA device function;
    with ``float32``, its float32 twin (:func:`~torchlight.backends.scalar_ops.float32_twin`).

    NVVM inlines such small functions into the kernel that calls them. (numba's CPU
    ``register_jitable`` is not used here: NVIDIA's numba-cuda has its own compiler pipeline,
    which does not accept functions inlined by numba's CPU one.)

    Speed trick: a float32 kernel calls the twin, whose constants are float32, so that no
    Python float (a float64 to numba) turns its arithmetic into float64, which a GPU runs 2 to
    64 times slower (``tests/test_backend_cuda.py`` checks the float32 kernels' PTX for any
    ``.f64`` instruction).
    """
    return cuda.jit(device=True)(scalar_ops.float32_twin(fn) if float32 else fn)


#: Threads per block of the elementwise and reduction kernels (a power of two).
THREADS = 128
#: Side of the square tiles of the shared-memory matmul (TILE x TILE threads per block). The
#: simulator uses 8 (it runs one Python thread per GPU thread, so fewer threads run faster).
TILE = 16
#: Products of at most this many multiply-adds (M N K) use the one-thread-per-output kernel.
SMALL_MATMUL = 1 << 18
#: Reductions of at most this many elements per output use one thread per output.
SMALL_REDUCE = 64
#: The register-blocked matmul: a block computes BM x BN outputs, in steps of BK along k,
#: each of its (BM / TM) * (BN / TN) = 256 threads a TM x TN piece.
BM, BN, BK, TM, TN = 128, 128, 8, 8, 8
#: The row length of the blocked matmul's shared tile of A: BM plus 4 words of padding (see the
#: kernel).
BM_PADDED = BM + 4
#: Threads per block of the blocked matmul (256), and how many elements of A's and of B's tile
#: each of them loads per step (numba needs local array sizes as plain constants).
MM_THREADS = (BM // TM) * (BN // TN)
LOADS_A, LOADS_B = BM * BK // MM_THREADS, BK * BN // MM_THREADS
#: BK as an unsigned integer: a loop over ``range(BK_UNSIGNED)`` gives unsigned indices, for
#: which numba skips its negative-index wraparound test (sm_90 code of the blocked matmul's
#: inner loop: 137 instructions per k instead of 142, 64 of them multiply-adds).
BK_UNSIGNED = np.uint64(BK)


# --------------------------------------------------------------------------- kernel sources
# Plain Python functions; ``cuda.jit`` compiles them at first launch (see the caches below), and
# the tests compile each one for a real GPU with ``cuda.compile_ptx``.


# The two device functions below are the GPU twins of ``to_index`` and ``index_to_position`` in
# :mod:`torchlight.shape`. A kernel keeps the index in ``cuda.local.array(len(shape), int64)``:
# ``len(shape)`` is known when numba compiles (``shape`` is a tuple), so NVVM keeps the array in
# registers. The divisions that find the index (slow on a GPU) are done once per element, however
# many operands then read their element at that index; and the backend first merges the
# dimensions that every operand walks as one (:func:`coalesce`), so a contiguous tensor is
# walked as 1-D, with no division at all.


@cuda.jit(device=True)
def to_index(ordinal, shape, index):  # pragma: no cover - runs on the GPU
    """Write into ``index`` the multi-index of the ``ordinal``-th element (row-major) of ``shape``."""
    for d in range(len(shape) - 1, 0, -1):
        index[d] = ordinal % shape[d]
        ordinal //= shape[d]
    index[0] = ordinal  # (ordinal < size, so what is left is the first index: no division)


@cuda.jit(device=True)
def index_to_position(index, strides, offset):  # pragma: no cover - runs on the GPU
    r"""Buffer position of ``index``: $\mathrm{offset} + \sum_d \mathrm{index}_d \cdot s_d$."""
    position = offset
    for d in range(len(strides)):
        position += index[d] * strides[d]
    return position


# The elementwise kernels are *grid-stride loops*: the backend launches a few blocks per
# multiprocessor, not one thread per element, and thread ``i`` handles elements
# ``i, i + gridsize, i + 2 gridsize, ...``. Neighbouring threads touch neighbouring elements
# (coalesced memory access), and each thread's set-up is paid once for many elements.


def _map_source(fn: Callable[[Any], Any], float32: bool = False) -> Callable[..., None]:
    f = device_function(fn, float32)

    def map_kernel(out, a, a_offset, a_strides, shape):  # pragma: no cover - runs on the GPU
        index = cuda.local.array(len(shape), numba.int64)
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            to_index(i, shape, index)
            out[i] = f(a[index_to_position(index, a_strides, a_offset)])

    return map_kernel


def _zip_source(fn: Callable[[Any, Any], Any], float32: bool = False) -> Callable[..., None]:
    f = device_function(fn, float32)

    def zip_kernel(
        out, out_offset, out_strides, a, a_offset, a_strides, b, b_offset, b_strides, shape
    ):  # pragma: no cover - runs on the GPU
        # out is strided too, so that an in-place op on a view (``x[::2] += y``, the windows
        # a convolution's backward adds up) writes straight into it
        size = 1
        for d in range(len(shape)):
            size *= shape[d]
        index = cuda.local.array(len(shape), numba.int64)
        for i in range(cuda.grid(1), size, cuda.gridsize(1)):
            to_index(i, shape, index)
            x = a[index_to_position(index, a_strides, a_offset)]
            y = b[index_to_position(index, b_strides, b_offset)]
            out[index_to_position(index, out_strides, out_offset)] = f(x, y)

    return zip_kernel


def _reduce_source(
    fn: Callable[[Any, Any], Any], is_sum: bool, acc_type: Any
) -> Callable[..., None]:
    f = device_function(fn, acc_type == numba.float32)

    def reduce_kernel(
        out, a, offset, kept_shape, kept_strides, red_shape, red_strides
    ):  # pragma: no cover - runs on the GPU
        # Block (o, p) folds part p of the elements that make output o: the reduced elements
        # r = p * blockDim + t, then r + parts * blockDim, ... of thread t. Many parts keep the
        # whole GPU busy when there are few outputs (a full sum); the backend then reduces the
        # parts' results, out[o * parts + p], once more.
        partial = cuda.shared.array(THREADS, acc_type)
        o = cuda.blockIdx.x
        p = cuda.blockIdx.y
        parts = cuda.gridDim.y
        t = cuda.threadIdx.x
        index = cuda.local.array(len(kept_shape), numba.int64)
        to_index(o, kept_shape, index)
        base = index_to_position(index, kept_strides, offset)
        count = 1
        for d in range(len(red_shape)):
            count *= red_shape[d]
        red_index = cuda.local.array(len(red_shape), numba.int64)
        # sum starts from 0; max/min from the first element (threads with no elements keep it)
        total = acc_type(0) if is_sum else acc_type(a[base])
        for r in range(p * cuda.blockDim.x + t, count, parts * cuda.blockDim.x):
            to_index(r, red_shape, red_index)
            total = f(total, a[index_to_position(red_index, red_strides, base)])
        partial[t] = total
        cuda.syncthreads()
        step = cuda.blockDim.x // 2
        while step > 0:  # a tree: 64 pairs, then 32, ... then 1
            if t < step:
                partial[t] = f(partial[t], partial[t + step])
            cuda.syncthreads()
            step //= 2
        if t == 0:
            out[o * parts + p] = partial[0]

    return reduce_kernel


def _fold_source(fn: Callable[[Any, Any], Any], is_sum: bool, acc_type: Any) -> Callable[..., None]:
    f = device_function(fn, acc_type == numba.float32)

    def fold_kernel(
        out, a, offset, kept_shape, kept_strides, red_shape, red_strides
    ):  # pragma: no cover - runs on the GPU
        # Few elements per output (a softmax over 10 classes, a 2x2 pooling window): one thread
        # per output folds them in a loop, which beats a block whose threads mostly idle.
        index = cuda.local.array(len(kept_shape), numba.int64)
        red_index = cuda.local.array(len(red_shape), numba.int64)
        count = 1
        for d in range(len(red_shape)):
            count *= red_shape[d]
        for o in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            to_index(o, kept_shape, index)
            base = index_to_position(index, kept_strides, offset)
            total = acc_type(0) if is_sum else acc_type(a[base])
            for r in range(count):
                to_index(r, red_shape, red_index)
                total = f(total, a[index_to_position(red_index, red_strides, base)])
            out[o] = total

    return fold_kernel


def _argfold_source(is_max: bool) -> Callable[..., None]:
    def argfold_kernel(
        out, a, offset, kept_shape, kept_strides, count, stride
    ):  # pragma: no cover - runs on the GPU
        # out[o] = the index along the reduced dimension (``count`` elements ``stride`` apart)
        # of the first largest (smallest) element of output o; a nan counts as the extreme and
        # the first nan wins, as in numpy.
        index = cuda.local.array(len(kept_shape), numba.int64)
        for o in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            to_index(o, kept_shape, index)
            base = index_to_position(index, kept_strides, offset)
            best, best_value = 0, a[base]
            for r in range(1, count):
                if best_value != best_value:
                    break
                value = a[base + r * stride]
                better = value > best_value if is_max else value < best_value
                if value != value or better:
                    best, best_value = r, value
            out[o] = best

    return argfold_kernel


def _copy_source() -> Callable[..., None]:
    def copy_kernel(
        dst, dst_offset, dst_strides, src, src_offset, src_strides, shape
    ):  # pragma: no cover
        # dst[index] = src[index] for every index of shape, both strided (setitem, cat, contiguous)
        size = 1
        for d in range(len(shape)):
            size *= shape[d]
        index = cuda.local.array(len(shape), numba.int64)
        for i in range(cuda.grid(1), size, cuda.gridsize(1)):
            to_index(i, shape, index)
            pd = index_to_position(index, dst_strides, dst_offset)
            dst[pd] = src[index_to_position(index, src_strides, src_offset)]

    return copy_kernel


def _cat_views_source() -> Callable[..., None]:
    def cat_views_kernel(
        dst, src, offsets, src_strides, shape, part_axis
    ):  # pragma: no cover - runs on the GPU
        # dst (contiguous, of ``shape``) = the parts cat'ed along ``part_axis``, where part p is
        # the strided view of ``src`` at offsets[p] (its stride along part_axis is 0): one
        # launch for the kh*kw window views of a convolution's im2col, not one per view.
        index = cuda.local.array(len(shape), numba.int64)
        for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
            to_index(i, shape, index)
            dst[i] = src[index_to_position(index, src_strides, offsets[index[part_axis]])]

    return cat_views_kernel


def _fill_source() -> Callable[..., None]:
    def fill_kernel(dst, dst_offset, dst_strides, value, shape):  # pragma: no cover
        # dst[index] = value for every index of shape (x.fill_(0), zeros on the GPU)
        size = 1
        for d in range(len(shape)):
            size *= shape[d]
        index = cuda.local.array(len(shape), numba.int64)
        for i in range(cuda.grid(1), size, cuda.gridsize(1)):
            to_index(i, shape, index)
            dst[index_to_position(index, dst_strides, dst_offset)] = value

    return fill_kernel


def _iota_source() -> Callable[..., None]:
    def iota_kernel(dst, start, step):  # pragma: no cover - runs on the GPU
        # dst[i] = start + i * step (an integer arange made on the GPU, not copied there)
        for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
            dst[i] = start + i * step

    return iota_kernel


def _where_source() -> Callable[..., None]:
    def where_kernel(
        out, c, c_offset, c_strides, a, a_offset, a_strides, b, b_offset, b_strides, shape
    ):  # pragma: no cover
        index = cuda.local.array(len(shape), numba.int64)
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            to_index(i, shape, index)
            pc = index_to_position(index, c_strides, c_offset)
            pa = index_to_position(index, a_strides, a_offset)
            pb = index_to_position(index, b_strides, b_offset)
            out[i] = a[pa] if c[pc] else b[pb]

    return where_kernel


def _gather_source() -> Callable[..., None]:
    def gather_kernel(out, a, positions):  # pragma: no cover - runs on the GPU
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = a[positions[i]]

    return gather_kernel


def _scatter_add_source() -> Callable[..., None]:
    def scatter_add_kernel(out, targets, src, src_offset, src_strides, shape):  # pragma: no cover
        # out[targets[i]] += src[i]; atomics make repeated targets add up
        index = cuda.local.array(len(shape), numba.int64)
        for i in range(cuda.grid(1), targets.size, cuda.gridsize(1)):
            to_index(i, shape, index)
            ps = index_to_position(index, src_strides, src_offset)
            cuda.atomic.add(out, targets[i], src[ps])

    return scatter_add_kernel


def _scatter_source() -> Callable[..., None]:
    def scatter_kernel(dst, targets, src, src_offset, src_strides, shape):  # pragma: no cover
        index = cuda.local.array(len(shape), numba.int64)
        for i in range(cuda.grid(1), targets.size, cuda.gridsize(1)):
            to_index(i, shape, index)
            dst[targets[i]] = src[index_to_position(index, src_strides, src_offset)]

    return scatter_kernel


def _small_matmul_source(dtype: Any) -> Callable[..., None]:
    def small_matmul_kernel(
        out, a, a_offset, a_strides, b, b_offset, b_strides, M, N, K
    ):  # pragma: no cover - runs on the GPU
        # Small products (a digits batch): one thread per output element, a plain loop over k.
        # Launching is what such a product costs; staging tiles would only add steps.
        for o in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            s = o // (M * N)
            i = o // N % M
            j = o % N
            pa = a_offset + s * a_strides[0] + i * a_strides[1]
            pb = b_offset + s * b_strides[0] + j * b_strides[2]
            total = dtype(0)
            for k in range(K):
                total += a[pa + k * a_strides[2]] * b[pb + k * b_strides[1]]
            out[o] = total

    return small_matmul_kernel


def _tiled_matmul_source(dtype: Any, TILE: int = TILE) -> Callable[..., None]:  # noqa: N803
    def tiled_matmul_kernel(
        out, a, a_offset, a_strides, b, b_offset, b_strides, M, N, K
    ):  # pragma: no cover
        # A (TILE x TILE)-thread block computes one TILE x TILE tile of out[s] = A[s] @ B[s].
        # Step by step along k, the block stages a tile of A and one of B in shared memory
        # (each thread loads one element of each), then every thread reads TILE of each.
        tile_a = cuda.shared.array((TILE, TILE), dtype)
        tile_b = cuda.shared.array((TILE, TILE), dtype)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        s = cuda.blockIdx.z
        i = cuda.blockIdx.y * TILE + ty
        j = cuda.blockIdx.x * TILE + tx
        pa = a_offset + s * a_strides[0]
        pb = b_offset + s * b_strides[0]
        total = zero = dtype(0)  # (with a literal 0, `x if inside else 0` would be a float64)
        for k0 in range(0, K, TILE):
            ka = k0 + tx
            kb = k0 + ty
            tile_a[ty, tx] = (
                a[pa + i * a_strides[1] + ka * a_strides[2]] if i < M and ka < K else zero
            )
            tile_b[ty, tx] = (
                b[pb + kb * b_strides[1] + j * b_strides[2]] if kb < K and j < N else zero
            )
            cuda.syncthreads()
            for k in range(TILE):
                total += tile_a[ty, k] * tile_b[k, tx]
            cuda.syncthreads()
        if i < M and j < N:
            out[(s * M + i) * N + j] = total

    return tiled_matmul_kernel


def _blocked_matmul_source(dtype: Any) -> Callable[..., None]:
    def blocked_matmul_kernel(
        out, a, a_offset, a_strides, b, b_offset, b_strides, M, N, K
    ):  # pragma: no cover
        # A block of 256 threads computes a BM x BN tile of out[s]. Thread (ti, tj) owns the
        # TM x TN outputs at rows ti + 16 x, columns tj + 16 y (x < TM, y < TN) and keeps them in
        # registers (``acc``). Step by step along k, BK at a time, the block stages A's BM x BK
        # and B's BK x BN tiles in shared memory; each thread then does TM*TN multiply-adds per
        # TM + TN shared-memory reads. Owning every 16th row/column (not 8 neighbouring ones)
        # makes the 16 threads of a half-warp read 16 neighbouring words of tile_b (no bank
        # conflicts) and write 16 neighbouring outputs (coalesced).
        # Latency hiding: the loads of step + 1 from GPU memory go into registers (``next_a``,
        # ``next_b``) before step's multiply-adds, which run while those loads are in flight.
        tile_a = cuda.shared.array((BK, BM_PADDED), dtype)  # transposed: tile_a[k, i]
        tile_b = cuda.shared.array((BK, BN), dtype)
        acc = cuda.local.array((TM, TN), dtype)
        col_a = cuda.local.array(TM, dtype)
        row_b = cuda.local.array(TN, dtype)
        next_a = cuda.local.array(LOADS_A, dtype)
        next_b = cuda.local.array(LOADS_B, dtype)
        # Which tile element each thread loads (the same every step): neighbouring threads
        # take neighbouring elements in memory, so each warp's loads coalesce. For a row-major
        # A that is along k; for a transposed A (a_strides[1] == 1) along i; likewise for B.
        a_row = cuda.local.array(LOADS_A, numba.int32)
        a_col = cuda.local.array(LOADS_A, numba.int32)
        b_row = cuda.local.array(LOADS_B, numba.int32)
        b_col = cuda.local.array(LOADS_B, numba.int32)
        t = cuda.threadIdx.x
        a_transposed = a_strides[1] == 1 and a_strides[2] != 1
        b_transposed = b_strides[1] == 1 and b_strides[2] != 1
        for n in range(LOADS_A):
            e = t + n * MM_THREADS
            a_row[n], a_col[n] = (e % BM, e // BM) if a_transposed else (e // BK, e % BK)
        for n in range(LOADS_B):
            e = t + n * MM_THREADS
            b_row[n], b_col[n] = (e % BK, e // BK) if b_transposed else (e // BN, e % BN)
        ti = t // (BN // TN)
        tj = t % (BN // TN)
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        s = cuda.blockIdx.z
        pa = a_offset + s * a_strides[0]
        pb = b_offset + s * b_strides[0]
        zero = dtype(0)  # (with a literal 0, `x if inside else 0` would be a float64)
        for x in range(TM):
            for y in range(TN):
                acc[x, y] = zero
        steps = (K + BK - 1) // BK
        for step in range(steps + 1):
            if step < steps:  # load tile `step` into registers
                k0 = step * BK
                for n in range(LOADS_A):
                    i = row0 + a_row[n]
                    k = k0 + a_col[n]
                    inside = i < M and k < K
                    next_a[n] = a[pa + i * a_strides[1] + k * a_strides[2]] if inside else zero
                for n in range(LOADS_B):
                    k = k0 + b_row[n]
                    j = col0 + b_col[n]
                    inside = k < K and j < N
                    next_b[n] = b[pb + k * b_strides[1] + j * b_strides[2]] if inside else zero
            if step > 0:  # multiply tile step - 1, already in shared memory
                for k in range(BK_UNSIGNED):
                    for x in range(TM):
                        col_a[x] = tile_a[k, ti + x * (BM // TM)]
                    for y in range(TN):
                        row_b[y] = tile_b[k, tj + y * (BN // TN)]
                    for x in range(TM):
                        for y in range(TN):
                            acc[x, y] += col_a[x] * row_b[y]
            cuda.syncthreads()  # everyone is done reading the tiles
            if step < steps:
                # (the padding shifts each k-row of tile_a by 4 banks, so that the stores of a
                # row-major A do not collide in one shared-memory bank)
                for n in range(LOADS_A):
                    tile_a[a_col[n], a_row[n]] = next_a[n]
                for n in range(LOADS_B):
                    tile_b[b_row[n], b_col[n]] = next_b[n]
            cuda.syncthreads()  # the new tiles are complete
        for x in range(TM):
            i = row0 + ti + x * (BM // TM)
            for y in range(TN):
                j = col0 + tj + y * (BN // TN)
                if i < M and j < N:
                    out[(s * M + i) * N + j] = acc[x, y]

    return blocked_matmul_kernel


# --------------------------------------------------------------------------- compiled kernels

_HELPERS = {
    "copy": _copy_source,
    "fill": _fill_source,
    "iota": _iota_source,
    "cat_views": _cat_views_source,
    "where": _where_source,
    "gather": _gather_source,
    "scatter": _scatter_source,
    "scatter_add": _scatter_add_source,
}


@functools.cache
def map_kernel(op: str, float32: bool = False) -> Any:
    """The ``map`` kernel of ``op``; with ``float32``, for float32 results (float32 constants)."""
    return cuda.jit(_map_source(scalar_ops.MAP[op], float32))


@functools.cache
def zip_kernel(op: str, float32: bool = False) -> Any:
    """The ``zip`` kernel of ``op``; with ``float32``, for float32 results (float32 constants)."""
    return cuda.jit(_zip_source(scalar_ops.ZIP[op], float32))


@functools.cache
def reduce_kernel(op: str, acc_dtype: str) -> Any:
    acc_type = numba.from_dtype(np.dtype(acc_dtype))
    return cuda.jit(_reduce_source(scalar_ops.REDUCE[op], op == "sum", acc_type))


@functools.cache
def fold_kernel(op: str, acc_dtype: str) -> Any:
    acc_type = numba.from_dtype(np.dtype(acc_dtype))
    return cuda.jit(_fold_source(scalar_ops.REDUCE[op], op == "sum", acc_type))


@functools.cache
def argfold_kernel(op: str) -> Any:
    return cuda.jit(_argfold_source(op == "max"))


@functools.cache
def matmul_kernels(dtype: str, tile: int) -> tuple[Any, Any, Any]:
    """``(small, tiled, blocked)`` matmul kernels for elements of ``dtype``."""
    t = numba.from_dtype(np.dtype(dtype))
    return (
        cuda.jit(_small_matmul_source(t)),
        cuda.jit(_tiled_matmul_source(t, tile)),
        cuda.jit(_blocked_matmul_source(t)),
    )


@functools.cache
def helper_kernel(name: str) -> Any:
    return cuda.jit(_HELPERS[name]())


def kernel_sources(
    dtype: Any = np.float64,
) -> list[tuple[str, Callable[..., None], tuple[Any, ...]]]:
    """Every kernel as ``(name, Python function, argument types)`` for elements of ``dtype``.

    The tests compile each one for a real GPU with ``numba.cuda.compile_ptx``, which rejects
    code that only the simulator would run.
    """
    from numba import types

    el = numba.from_dtype(np.dtype(dtype))
    arr = types.Array(el, 1, "C")
    ints, boolean = types.Array(types.int64, 1, "C"), types.Array(types.boolean, 1, "C")
    i64, tup, tup3 = types.int64, types.UniTuple(types.int64, 2), types.UniTuple(types.int64, 3)
    tup1 = types.UniTuple(types.int64, 1)  # what a contiguous operand is walked as
    out: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = []
    float32 = el == numba.float32  # the float32 twins, as the backend launches them
    for op, fn1 in scalar_ops.MAP.items():
        out.append((f"map {op}", _map_source(fn1, float32), (arr, arr, i64, tup, tup)))
    for op, fn2 in scalar_ops.ZIP.items():
        compare = op in ("eq", "ne", "lt", "le", "gt", "ge")
        result = boolean if compare else arr
        source = _zip_source(fn2, float32 and not compare)
        zip_args = (result, i64, tup, arr, i64, tup, arr, i64, tup, tup)
        out.append((f"zip {op}", source, zip_args))
    for op, fn2 in scalar_ops.REDUCE.items():
        reduce_args = (arr, arr, i64, tup, tup, tup, tup)
        out.append((f"reduce {op}", _reduce_source(fn2, op == "sum", el), reduce_args))
        out.append((f"fold {op}", _fold_source(fn2, op == "sum", el), reduce_args))
    for op in ("max", "min"):
        argfold_args = (ints, arr, i64, tup, tup, i64, i64)
        out.append((f"argfold {op}", _argfold_source(op == "max"), argfold_args))
    matmul_args = (arr, arr, i64, tup3, arr, i64, tup3, i64, i64, i64)
    out.append(("matmul small", _small_matmul_source(el), matmul_args))
    out.append(("matmul tiled", _tiled_matmul_source(el), matmul_args))
    out.append(("matmul blocked", _blocked_matmul_source(el), matmul_args))
    out.append(("copy", _copy_source(), (arr, i64, tup, arr, i64, tup, tup)))
    out.append(("copy 1-d", _copy_source(), (arr, i64, tup1, arr, i64, tup1, tup1)))
    out.append(("fill", _fill_source(), (arr, i64, tup, el, tup)))
    out.append(("iota", _iota_source(), (ints, i64, i64)))
    out.append(("cat_views", _cat_views_source(), (arr, arr, ints, tup3, tup3, i64)))
    out.append(
        ("where", _where_source(), (arr, boolean, i64, tup, arr, i64, tup, arr, i64, tup, tup))
    )
    out.append(("gather", _gather_source(), (arr, arr, ints)))
    out.append(("scatter", _scatter_source(), (arr, ints, arr, i64, tup, tup)))
    out.append(("scatter_add", _scatter_add_source(), (arr, ints, arr, i64, tup, tup)))
    return out


def grid_stride_size(n: int, max_blocks: int = 1024, threads: int = THREADS) -> tuple[int, int]:
    """``(blocks, threads)`` for a grid-stride kernel over the elements ``0 <= i < n``: one
    thread per element up to ``max_blocks`` blocks of ``threads``, and a loop in each thread
    beyond that.

    Example: ``grid_stride_size(300, max_blocks=2, threads=128)`` is ``(2, 128)``.
    """
    threads = min(threads, n)
    return min((n + threads - 1) // threads, max_blocks), threads
