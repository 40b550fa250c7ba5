r"""The CUDA backend's kernels: the code that runs on the GPU, one thread per output element.

Each kernel is written as a plain Python function (``_map_source`` and friends build them), which
``cuda.jit`` compiles at its first launch; the tests compile every one for a real GPU with
``numba.cuda.compile_ptx`` (:func:`kernel_sources` lists them). What they compute:

- ``map`` / ``zip`` / ``where`` / ``copy`` / ``scatter``: thread ``i`` turns ``i`` into an
  index (:func:`to_index`), the index into a position in each strided operand
  (:func:`index_to_position`; broadcast operands have stride 0), and writes one element;
- ``reduce``: one *block* per output element; its threads fold a share of the reduced elements
  each, then combine their partial results pairwise in shared memory (a tree of
  $\log_2$ 128 = 7 steps);
- ``matmul``: tiles of A and B are staged in shared memory so each element read from GPU memory
  is used many times; large products use a register-blocked kernel (each thread computes an
  8x8 piece of the output).

The backend that launches them, and the storage they work on, are in
:mod:`~torchlight.backends.cuda_backend`. Without a GPU, set ``NUMBA_ENABLE_CUDASIM=1`` before
this module is first imported: numba then runs the same kernels in its simulator.

Example:
    >>> from torchlight.backends.cuda_kernels import kernel_sources   # doctest: +SKIP
    >>> sorted({name.split()[0] for name, _, _ in kernel_sources()})  # doctest: +SKIP
    ['copy', 'gather', 'map', 'matmul', 'reduce', 'scatter', 'scatter_add', 'where', 'zip']
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

if "numba.cuda" not in sys.modules:
    numba.core.config.reload_config()  # honour NUMBA_ENABLE_CUDASIM even if set after `import numba`
from numba import cuda as _cuda  # noqa: E402

from torchlight.backends import scalar_ops  # noqa: E402

# Typed as Any: numba's stubs describe the CUDA intrinsics for numba's compiler, not for mypy.
cuda: Any = _cuda


def device_function(fn: Callable[..., Any]) -> Any:
    """``fn`` (a scalar op of :mod:`~torchlight.backends.scalar_ops`) as a CUDA device function.

    NVVM inlines such small functions into the kernel that calls them. (numba's CPU
    ``register_jitable`` is not used here: NVIDIA's numba-cuda has its own compiler pipeline,
    which does not accept functions inlined by numba's CPU one.)
    """
    return cuda.jit(device=True)(fn)


#: Threads per block of the elementwise and reduction kernels (a power of two).
THREADS = 128
#: Side of the square tiles of the shared-memory matmul (TILE x TILE threads per block). The
#: simulator uses 8 (it runs one Python thread per GPU thread, so fewer threads run faster).
TILE = 16
#: The register-blocked matmul: a block computes BM x BN outputs, in steps of BK along k,
#: each of its (BM / TM) * (BN / TN) = 256 threads a TM x TN piece.
BM, BN, BK, TM, TN = 128, 128, 8, 8, 8


# --------------------------------------------------------------------------- kernel sources
# Plain Python functions; ``cuda.jit`` compiles them at first launch (see the caches below), and
# the tests compile each one for a real GPU with ``cuda.compile_ptx``.


# The two device functions below are the GPU twins of ``to_index`` and ``index_to_position`` in
# :mod:`torchlight.shape`. A kernel keeps the index in ``cuda.local.array(len(shape), int64)``:
# ``len(shape)`` is known when numba compiles (``shape`` is a tuple), so NVVM keeps the array in
# registers. The divisions that find the index (slow on a GPU) are done once per thread, however
# many operands then read their element at that index.


@cuda.jit(device=True)
def to_index(ordinal, shape, index):  # pragma: no cover - runs on the GPU
    """Write into ``index`` the multi-index of the ``ordinal``-th element (row-major) of ``shape``."""
    for d in range(len(shape) - 1, -1, -1):
        index[d] = ordinal % shape[d]
        ordinal //= shape[d]


@cuda.jit(device=True)
def index_to_position(index, strides, offset):  # pragma: no cover - runs on the GPU
    r"""Buffer position of ``index``: $\mathrm{offset} + \sum_d \mathrm{index}_d \cdot s_d$."""
    position = offset
    for d in range(len(strides)):
        position += index[d] * strides[d]
    return position


def _map_source(fn: Callable[[Any], Any]) -> Callable[..., None]:
    f = device_function(fn)

    def map_kernel(out, a, a_offset, a_strides, shape):  # pragma: no cover - runs on the GPU
        i = cuda.grid(1)
        if i < out.size:
            index = cuda.local.array(len(shape), numba.int64)
            to_index(i, shape, index)
            out[i] = f(a[index_to_position(index, a_strides, a_offset)])

    return map_kernel


def _zip_source(fn: Callable[[Any, Any], Any]) -> Callable[..., None]:
    f = device_function(fn)

    def zip_kernel(out, a, a_offset, a_strides, b, b_offset, b_strides, shape):  # pragma: no cover
        i = cuda.grid(1)
        if i < out.size:
            index = cuda.local.array(len(shape), numba.int64)
            to_index(i, shape, index)
            x = a[index_to_position(index, a_strides, a_offset)]
            y = b[index_to_position(index, b_strides, b_offset)]
            out[i] = f(x, y)

    return zip_kernel


def _reduce_source(
    fn: Callable[[Any, Any], Any], is_sum: bool, acc_type: Any
) -> Callable[..., None]:
    f = device_function(fn)

    def reduce_kernel(out, a, kept, red):  # pragma: no cover - runs on the GPU
        # Block o computes out[o]; its threads share the elements a[kept[o] + red[r]].
        partial = cuda.shared.array(THREADS, acc_type)
        o = cuda.blockIdx.x
        t = cuda.threadIdx.x
        base = kept[o]
        total = acc_type(0) if is_sum else acc_type(a[base + red[0]])
        for r in range(t, red.size, cuda.blockDim.x):
            total = f(total, a[base + red[r]])
        partial[t] = total
        cuda.syncthreads()
        step = cuda.blockDim.x // 2
        while step > 0:  # a tree: 64 pairs, then 32, ... then 1
            if t < step:
                partial[t] = f(partial[t], partial[t + step])
            cuda.syncthreads()
            step //= 2
        if t == 0:
            out[o] = partial[0]

    return reduce_kernel


def _copy_source() -> Callable[..., None]:
    def copy_kernel(
        dst, dst_offset, dst_strides, src, src_offset, src_strides, shape
    ):  # pragma: no cover
        # dst[index] = src[index] for every index of shape, both strided (setitem, cat, contiguous)
        i = cuda.grid(1)
        size = 1
        for d in range(len(shape)):
            size *= shape[d]
        if i < size:
            index = cuda.local.array(len(shape), numba.int64)
            to_index(i, shape, index)
            pd = index_to_position(index, dst_strides, dst_offset)
            dst[pd] = src[index_to_position(index, src_strides, src_offset)]

    return copy_kernel


def _where_source() -> Callable[..., None]:
    def where_kernel(
        out, c, c_offset, c_strides, a, a_offset, a_strides, b, b_offset, b_strides, shape
    ):  # pragma: no cover
        i = cuda.grid(1)
        if i < out.size:
            index = cuda.local.array(len(shape), numba.int64)
            to_index(i, shape, index)
            pc = index_to_position(index, c_strides, c_offset)
            pa = index_to_position(index, a_strides, a_offset)
            pb = index_to_position(index, b_strides, b_offset)
            out[i] = a[pa] if c[pc] else b[pb]

    return where_kernel


def _gather_source() -> Callable[..., None]:
    def gather_kernel(out, a, positions):  # pragma: no cover - runs on the GPU
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[positions[i]]

    return gather_kernel


def _scatter_add_source() -> Callable[..., None]:
    def scatter_add_kernel(out, targets, src, src_offset, src_strides, shape):  # pragma: no cover
        # out[targets[i]] += src[i]; atomics make repeated targets add up
        i = cuda.grid(1)
        if i < targets.size:
            index = cuda.local.array(len(shape), numba.int64)
            to_index(i, shape, index)
            ps = index_to_position(index, src_strides, src_offset)
            cuda.atomic.add(out, targets[i], src[ps])

    return scatter_add_kernel


def _scatter_source() -> Callable[..., None]:
    def scatter_kernel(dst, targets, src, src_offset, src_strides, shape):  # pragma: no cover
        i = cuda.grid(1)
        if i < targets.size:
            index = cuda.local.array(len(shape), numba.int64)
            to_index(i, shape, index)
            dst[targets[i]] = src[index_to_position(index, src_strides, src_offset)]

    return scatter_kernel


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
        total = dtype(0)
        for k0 in range(0, K, TILE):
            ka = k0 + tx
            kb = k0 + ty
            tile_a[ty, tx] = a[pa + i * a_strides[1] + ka * a_strides[2]] if i < M and ka < K else 0
            tile_b[ty, tx] = b[pb + kb * b_strides[1] + j * b_strides[2]] if kb < K and j < N else 0
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
        # A block of 256 threads computes a BM x BN tile of out[s]; thread (ti, tj) owns the
        # TM x TN piece at rows ti*TM.., columns tj*TN.. and keeps it in registers (``acc``).
        # Per step of BK along k: stage A's BM x BK and B's BK x BN tiles in shared memory,
        # then each thread does TM*TN multiply-adds per TM + TN shared-memory reads.
        tile_a = cuda.shared.array((BK, BM), dtype)  # transposed: tile_a[k, i]
        tile_b = cuda.shared.array((BK, BN), dtype)
        acc = cuda.local.array((TM, TN), dtype)
        col_a = cuda.local.array(TM, dtype)
        row_b = cuda.local.array(TN, dtype)
        t = cuda.threadIdx.x
        ti = t // (BN // TN)
        tj = t % (BN // TN)
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        s = cuda.blockIdx.z
        pa = a_offset + s * a_strides[0]
        pb = b_offset + s * b_strides[0]
        threads = (BM // TM) * (BN // TN)
        for x in range(TM):
            for y in range(TN):
                acc[x, y] = 0
        for k0 in range(0, K, BK):
            for e in range(t, BM * BK, threads):
                i = row0 + e // BK
                k = k0 + e % BK
                tile_a[e % BK, e // BK] = (
                    a[pa + i * a_strides[1] + k * a_strides[2]] if i < M and k < K else 0
                )
            for e in range(t, BK * BN, threads):
                k = k0 + e // BN
                j = col0 + e % BN
                tile_b[e // BN, e % BN] = (
                    b[pb + k * b_strides[1] + j * b_strides[2]] if k < K and j < N else 0
                )
            cuda.syncthreads()
            for k in range(BK):
                for x in range(TM):
                    col_a[x] = tile_a[k, ti * TM + x]
                for y in range(TN):
                    row_b[y] = tile_b[k, tj * TN + y]
                for x in range(TM):
                    for y in range(TN):
                        acc[x, y] += col_a[x] * row_b[y]
            cuda.syncthreads()
        for x in range(TM):
            for y in range(TN):
                i = row0 + ti * TM + x
                j = col0 + tj * TN + y
                if i < M and j < N:
                    out[(s * M + i) * N + j] = acc[x, y]

    return blocked_matmul_kernel


# --------------------------------------------------------------------------- compiled kernels

_HELPERS = {
    "copy": _copy_source,
    "where": _where_source,
    "gather": _gather_source,
    "scatter": _scatter_source,
    "scatter_add": _scatter_add_source,
}


@functools.cache
def map_kernel(op: str) -> Any:
    return cuda.jit(_map_source(scalar_ops.MAP[op]))


@functools.cache
def zip_kernel(op: str) -> Any:
    return cuda.jit(_zip_source(scalar_ops.ZIP[op]))


@functools.cache
def reduce_kernel(op: str, acc_dtype: str) -> Any:
    acc_type = numba.from_dtype(np.dtype(acc_dtype))
    return cuda.jit(_reduce_source(scalar_ops.REDUCE[op], op == "sum", acc_type))


@functools.cache
def matmul_kernels(dtype: str, tile: int) -> tuple[Any, Any]:
    """``(tiled, blocked)`` matmul kernels for elements of ``dtype``."""
    t = numba.from_dtype(np.dtype(dtype))
    return cuda.jit(_tiled_matmul_source(t, tile)), cuda.jit(_blocked_matmul_source(t))


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
    out: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = []
    for op, fn1 in scalar_ops.MAP.items():
        out.append((f"map {op}", _map_source(fn1), (arr, arr, i64, tup, tup)))
    for op, fn2 in scalar_ops.ZIP.items():
        result = boolean if op in ("eq", "ne", "lt", "le", "gt", "ge") else arr
        out.append((f"zip {op}", _zip_source(fn2), (result, arr, i64, tup, arr, i64, tup, tup)))
    for op, fn2 in scalar_ops.REDUCE.items():
        out.append((f"reduce {op}", _reduce_source(fn2, op == "sum", el), (arr, arr, ints, ints)))
    matmul_args = (arr, arr, i64, tup3, arr, i64, tup3, i64, i64, i64)
    out.append(("matmul tiled", _tiled_matmul_source(el), matmul_args))
    out.append(("matmul blocked", _blocked_matmul_source(el), matmul_args))
    out.append(("copy", _copy_source(), (arr, i64, tup, arr, i64, tup, tup)))
    out.append(
        ("where", _where_source(), (arr, boolean, i64, tup, arr, i64, tup, arr, i64, tup, tup))
    )
    out.append(("gather", _gather_source(), (arr, arr, ints)))
    out.append(("scatter", _scatter_source(), (arr, ints, arr, i64, tup, tup)))
    out.append(("scatter_add", _scatter_add_source(), (arr, ints, arr, i64, tup, tup)))
    return out


def launch(kernel: Any, n: int, *args: Any) -> None:
    """Run ``kernel`` with one thread per element ``0 <= i < n``."""
    threads = min(THREADS, n)
    kernel[(n + threads - 1) // threads, threads](*args)
