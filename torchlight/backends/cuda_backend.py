r"""The CUDA backend: tensors in GPU memory, map / zip / reduce / matmul as Numba CUDA kernels.

Storage is :class:`CudaStorage`: the strided reference backend's layout (``shape``,
``strides``, ``offset``) over a flat buffer that lives in GPU memory. Layout operations
(reshape, permute, expand, slicing) therefore never touch the GPU: they are the very functions
of :mod:`~torchlight.backends.strided`. Kernels receive the flat buffer plus the layout and do
the same index arithmetic as the reference loops, one GPU thread per output element:

- ``map`` / ``zip`` / ``where``: thread ``i`` turns ``i`` into an index, the index into a
  position in each operand (broadcast operands have stride 0), and writes ``out[i]``;
- ``reduce``: one *block* per output element; its threads fold a share of the reduced
  elements each, then combine their partial results pairwise in shared memory (a tree of
  $\log_2$ 128 = 7 steps);
- ``matmul``: tiles of A and B are staged in shared memory so each element read from GPU memory
  is used many times; large products use a register-blocked kernel (each thread computes an
  8x8 piece of the output).

Data moves between host and GPU only where you ask: ``tensor.to("cuda")`` and
``tensor.to("numpy")`` (or printing, ``.numpy()``, ``.item()``). ``argmax``/``argmin`` are
computed on the host (a documented shortcut); indexing with integer or boolean arrays computes
*which positions* on the host (numpy indexes a table of positions) and moves the elements on
the GPU.

Without a GPU, set ``NUMBA_ENABLE_CUDASIM=1`` before the backend is first used: numba then runs
the same kernels in its simulator (slowly, one Python thread per GPU thread).

Example:
    >>> import torchlight as tl                       # doctest: +SKIP
    >>> x = tl.tensor([1.0, 2.0, 3.0]).to("cuda")     # doctest: +SKIP
    >>> (x * x).sum().item()                          # doctest: +SKIP
    14.0
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np

if "numba.cuda" not in sys.modules:
    numba.core.config.reload_config()  # honour NUMBA_ENABLE_CUDASIM even if set after `import numba`
from numba import cuda as _cuda  # noqa: E402

from torchlight.backends import scalar_ops  # noqa: E402
from torchlight.backends.base import Index  # noqa: E402
from torchlight.backends.numba_backend import jitable  # noqa: E402
from torchlight.backends.numpy_backend import NumpyBackend  # noqa: E402
from torchlight.backends.scalar_ops import map_dtype, reduce_dtype, zip_dtype  # noqa: E402
from torchlight.backends.strided import (  # noqa: E402
    StridedLayout,
    basic_index,
    expand_strides,
    is_basic_index,
    is_contiguous,
    position_table,
    view_strides,
)
from torchlight.shape import broadcast_shape, permute, strides_from_shape  # noqa: E402

# Typed as Any: numba's stubs describe the CUDA intrinsics for numba's compiler, not for mypy.
cuda: Any = _cuda

#: Threads per block of the elementwise and reduction kernels (a power of two).
THREADS = 128
#: Side of the square tiles of the shared-memory matmul (TILE x TILE threads per block). The
#: simulator uses 8 (it runs one Python thread per GPU thread, so fewer threads run faster).
TILE = 16
#: The register-blocked matmul: a block computes BM x BN outputs, in steps of BK along k,
#: each of its (BM / TM) * (BN / TN) = 256 threads a TM x TN piece.
BM, BN, BK, TM, TN = 128, 128, 8, 8, 8


class CudaStorage(StridedLayout):
    """A :class:`~torchlight.backends.strided.StridedLayout` whose buffer lives on the GPU."""

    __slots__ = ()

    def __repr__(self) -> str:
        return (
            f"CudaStorage(shape={self.shape}, strides={self.strides}, offset={self.offset}, "
            f"dtype={self.dtype.name}, device buffer of {self.buffer.size})"
        )


# --------------------------------------------------------------------------- kernel sources
# Plain Python functions; ``cuda.jit`` compiles them at first launch (see ``_jit``), and the
# tests compile each one for a real GPU with ``cuda.compile_ptx``.


def _map_source(fn: Callable[[Any], Any]) -> Callable[..., None]:
    f = jitable(fn)

    def map_kernel(out, a, a_offset, a_strides, shape):  # pragma: no cover - runs on the GPU
        i = cuda.grid(1)
        if i < out.size:
            position = a_offset
            rest = i
            for d in range(len(shape) - 1, -1, -1):
                position += (rest % shape[d]) * a_strides[d]
                rest //= shape[d]
            out[i] = f(a[position])

    return map_kernel


def _zip_source(fn: Callable[[Any, Any], Any]) -> Callable[..., None]:
    f = jitable(fn)

    def zip_kernel(out, a, a_offset, a_strides, b, b_offset, b_strides, shape):  # pragma: no cover
        i = cuda.grid(1)
        if i < out.size:
            pa = a_offset
            pb = b_offset
            rest = i
            for d in range(len(shape) - 1, -1, -1):
                index = rest % shape[d]
                pa += index * a_strides[d]
                pb += index * b_strides[d]
                rest //= shape[d]
            out[i] = f(a[pa], b[pb])

    return zip_kernel


def _reduce_source(
    fn: Callable[[Any, Any], Any], is_sum: bool, acc_type: Any
) -> Callable[..., None]:
    f = jitable(fn)

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
            pd = dst_offset
            ps = src_offset
            rest = i
            for d in range(len(shape) - 1, -1, -1):
                index = rest % shape[d]
                pd += index * dst_strides[d]
                ps += index * src_strides[d]
                rest //= shape[d]
            dst[pd] = src[ps]

    return copy_kernel


def _where_source() -> Callable[..., None]:
    def where_kernel(
        out, c, c_offset, c_strides, a, a_offset, a_strides, b, b_offset, b_strides, shape
    ):  # pragma: no cover
        i = cuda.grid(1)
        if i < out.size:
            pc = c_offset
            pa = a_offset
            pb = b_offset
            rest = i
            for d in range(len(shape) - 1, -1, -1):
                index = rest % shape[d]
                pc += index * c_strides[d]
                pa += index * a_strides[d]
                pb += index * b_strides[d]
                rest //= shape[d]
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
            ps = src_offset
            rest = i
            for d in range(len(shape) - 1, -1, -1):
                ps += (rest % shape[d]) * src_strides[d]
                rest //= shape[d]
            cuda.atomic.add(out, targets[i], src[ps])

    return scatter_add_kernel


def _scatter_source() -> Callable[..., None]:
    def scatter_kernel(dst, targets, src, src_offset, src_strides, shape):  # pragma: no cover
        i = cuda.grid(1)
        if i < targets.size:
            ps = src_offset
            rest = i
            for d in range(len(shape) - 1, -1, -1):
                ps += (rest % shape[d]) * src_strides[d]
                rest //= shape[d]
            dst[targets[i]] = src[ps]

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


def _launch(kernel: Any, n: int, *args: Any) -> None:
    """Run ``kernel`` with one thread per element ``0 <= i < n``."""
    threads = min(THREADS, n)
    kernel[(n + threads - 1) // threads, threads](*args)


def _walk(
    shape: tuple[int, ...], *operands: CudaStorage
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """The shape a kernel walks and each operand's strides, broadcast to it (0-d as 1-d)."""
    strides = [expand_strides(o.shape, o.strides, shape) for o in operands]
    if not shape:
        return (1,), [(0,) for _ in operands]
    return shape, strides


class CudaBackend:
    """Tensors in GPU memory (strided layout over a flat device buffer), Numba CUDA kernels.

    Raises:
        RuntimeError: at creation when numba finds no GPU and the simulator is off.
    """

    name = "cuda"

    def __init__(self) -> None:
        if not cuda.is_available():
            raise RuntimeError(
                "the 'cuda' backend found no CUDA GPU (numba.cuda.is_available() is False). "
                "To run its kernels in numba's CUDA simulator instead, set the environment "
                "variable NUMBA_ENABLE_CUDASIM=1 before Python starts (e.g. "
                "`NUMBA_ENABLE_CUDASIM=1 jupyter lab`); or use backend='numba' on the CPU."
            )
        # (asked of numba.cuda itself: numba's config follows the environment, which may change)
        self.simulator = cuda.device_array.__module__.startswith("numba.cuda.simulator")
        self.tile = 8 if self.simulator else TILE

    # ------------------------------------------------------------------ conversions (explicit transfers)
    def empty(self, shape: Sequence[int], dtype: Any) -> CudaStorage:
        """Fresh contiguous device storage (uninitialized: every caller overwrites it)."""
        shape = tuple(shape)
        buffer = cuda.device_array(max(math.prod(shape), 1), dtype=np.dtype(dtype))
        return CudaStorage(buffer, shape, strides_from_shape(shape), 0, dtype)

    def from_numpy(self, array: np.ndarray) -> CudaStorage:
        """Copy ``array`` from the host to the GPU."""
        array = np.asarray(array, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
        host = array.reshape(-1) if array.size else np.zeros(1, array.dtype)
        return CudaStorage(
            cuda.to_device(host), array.shape, strides_from_shape(array.shape), 0, array.dtype
        )

    def to_numpy(self, a: CudaStorage) -> np.ndarray:
        """Copy ``a`` from the GPU to the host (made contiguous on the GPU first)."""
        if a.size == 0:
            return np.zeros(a.shape, a.dtype)
        c = self.contiguous(a)
        return c.buffer[c.offset : c.offset + c.size].copy_to_host().reshape(a.shape)

    def shape(self, a: CudaStorage) -> tuple[int, ...]:
        return a.shape

    def strides(self, a: CudaStorage) -> tuple[int, ...]:
        return a.strides

    def dtype(self, a: CudaStorage) -> np.dtype:
        return a.dtype

    # ------------------------------------------------------------------ the primitives
    def map(self, op: str, a: CudaStorage, dtype: Any = None) -> CudaStorage:
        out = self.empty(a.shape, dtype if dtype is not None else map_dtype(op, a.dtype))
        if out.size:
            shape, (strides,) = _walk(a.shape, a)
            _launch(map_kernel(op), out.size, out.buffer, a.buffer, a.offset, strides, shape)
        return out

    def zip(self, op: str, a: CudaStorage, b: CudaStorage) -> CudaStorage:
        out = self.empty(broadcast_shape(a.shape, b.shape), zip_dtype(op, a.dtype, b.dtype))
        if out.size:
            shape, (sa, sb) = _walk(out.shape, a, b)
            _launch(
                zip_kernel(op),
                out.size,
                out.buffer,
                a.buffer,
                a.offset,
                sa,
                b.buffer,
                b.offset,
                sb,
                shape,
            )
        return out

    def reduce(self, op: str, a: CudaStorage, dims: tuple[int, ...], keepdim: bool) -> CudaStorage:
        kept_shape = tuple(1 if d in dims else n for d, n in enumerate(a.shape))
        out_shape = (
            kept_shape if keepdim else tuple(n for d, n in enumerate(a.shape) if d not in dims)
        )
        out_dtype = reduce_dtype(op, a.dtype)
        count = math.prod(a.shape[d] for d in dims)
        if count == 0 and op != "sum":
            raise ValueError(f"{op}() of an empty dimension has no value (shape {a.shape})")
        if count == 0 or a.size == 0:
            return self.from_numpy(np.zeros(out_shape, out_dtype))
        acc_dtype = np.dtype(np.int64) if a.dtype.kind == "b" else out_dtype
        kept_dims = [d for d in range(len(a.shape)) if d not in dims]
        kept = position_table(
            [a.shape[d] for d in kept_dims], [a.strides[d] for d in kept_dims], a.offset
        )
        red = position_table([a.shape[d] for d in dims], [a.strides[d] for d in dims], 0)
        out = self.empty(out_shape, acc_dtype)
        threads = min(THREADS, 1 << (red.size - 1).bit_length())  # a power of two for the tree
        kernel = reduce_kernel(op, acc_dtype.name)
        kernel[kept.size, threads](
            out.buffer, a.buffer, cuda.to_device(kept.ravel()), cuda.to_device(red.ravel())
        )
        return out if acc_dtype == out_dtype else self.astype(out, out_dtype)

    def matmul(self, a: CudaStorage, b: CudaStorage) -> CudaStorage:
        dtype = np.result_type(a.dtype, b.dtype)
        compute = dtype if dtype.kind == "f" else np.dtype(np.int64)
        a = a if a.dtype == compute else self.astype(a, compute)
        b = b if b.dtype == compute else self.astype(b, compute)
        a2 = a if len(a.shape) > 1 else self._reshape(a, (1, *a.shape))
        b2 = b if len(b.shape) > 1 else self._reshape(b, (*b.shape, 1))
        batch = broadcast_shape(a2.shape[:-2], b2.shape[:-2])
        (M, K), N = a2.shape[-2:], b2.shape[-1]
        count = math.prod(batch)
        a3 = self._reshape(self.expand(a2, (*batch, M, K)), (count, M, K))
        b3 = self._reshape(self.expand(b2, (*batch, K, N)), (count, K, N))
        out = self.empty((*batch, M, N), compute)
        if out.size and K == 0:
            self.setitem(out, (...,), 0)
        elif out.size:
            tiled, blocked = matmul_kernels(compute.name, self.tile)
            args = (
                out.buffer,
                a3.buffer,
                a3.offset,
                a3.strides,
                b3.buffer,
                b3.offset,
                b3.strides,
                M,
                N,
                K,
            )
            if M >= BM and N >= BN:
                blocked[(math.ceil(N / BN), math.ceil(M / BM), count), (BM // TM) * (BN // TN)](
                    *args
                )
            else:
                tile = self.tile
                tiled[(math.ceil(N / tile), math.ceil(M / tile), count), (tile, tile)](*args)
        shape = out.shape
        if len(a.shape) == 1:
            shape = shape[:-2] + shape[-1:]
        if len(b.shape) == 1:
            shape = shape[:-1]
        out = self._reshape(out, shape)
        return out if compute == dtype else self.astype(out, dtype)

    # ------------------------------------------------------------------ layout: no kernels at all
    def view(self, a: CudaStorage, shape: tuple[int, ...]) -> CudaStorage | None:
        strides = view_strides(a.shape, a.strides, shape)
        return None if strides is None else CudaStorage(a.buffer, shape, strides, a.offset, a.dtype)

    def _reshape(self, a: CudaStorage, shape: tuple[int, ...]) -> CudaStorage:
        out = self.view(a, shape)
        if out is None:
            out = self.view(self.contiguous(a), shape)
        assert out is not None, "a contiguous tensor can always be viewed in a shape of its size"
        return out

    def permute(self, a: CudaStorage, dims: tuple[int, ...]) -> CudaStorage:
        shape, strides = permute(a.shape, a.strides, dims)
        return CudaStorage(a.buffer, shape, strides, a.offset, a.dtype)

    def expand(self, a: CudaStorage, shape: tuple[int, ...]) -> CudaStorage:
        return CudaStorage(
            a.buffer, shape, expand_strides(a.shape, a.strides, shape), a.offset, a.dtype
        )

    def contiguous(self, a: CudaStorage) -> CudaStorage:
        return a if is_contiguous(a.shape, a.strides) else self.map("copy", a)

    def astype(self, a: CudaStorage, dtype: np.dtype) -> CudaStorage:
        return self.map("copy", a, dtype=dtype)

    # ------------------------------------------------------------------ indexing and assembly
    def getitem(self, a: CudaStorage, index: Index) -> CudaStorage:
        """Basic indices give a view; integer/boolean arrays gather on the GPU the positions
        that numpy computed on the host (by indexing a table of positions)."""
        if is_basic_index(index):
            shape, strides, offset = basic_index(a.shape, a.strides, a.offset, index)
            return CudaStorage(a.buffer, shape, strides, offset, a.dtype)
        table = position_table(a.shape, a.strides, a.offset)[index]
        out = self.empty(table.shape, a.dtype)
        if out.size:
            _launch(
                helper_kernel("gather"),
                out.size,
                out.buffer,
                a.buffer,
                cuda.to_device(table.ravel()),
            )
        return out

    def index_add(self, shape: tuple[int, ...], index: Index, values: CudaStorage) -> CudaStorage:
        """Zeros of ``shape`` with ``values`` added at ``index`` (atomic adds on the GPU)."""
        out = self.empty(shape, values.dtype)
        self.setitem(out, (...,), 0)
        table = position_table(out.shape, out.strides, 0)[index]
        if table.size:
            shape_, (strides,) = _walk(table.shape, values)
            targets = cuda.to_device(table.ravel())
            _launch(
                helper_kernel("scatter_add"),
                table.size,
                out.buffer,
                targets,
                values.buffer,
                values.offset,
                strides,
                shape_,
            )
        return out

    def setitem(self, a: CudaStorage, index: Index, values: Any) -> None:
        """Write ``values`` (device storage or a number, broadcast) into ``a[index]`` on the GPU."""
        if any(s == 0 and n > 1 for n, s in zip(a.shape, a.strides, strict=True)):
            raise ValueError("assignment destination is read-only (an expanded view)")
        if not isinstance(values, CudaStorage):
            values = self.from_numpy(np.asarray(values, dtype=a.dtype))
        if values.dtype != a.dtype:
            values = self.astype(values, a.dtype)
        elif values.buffer is a.buffer:
            values = self.map("copy", values)  # read everything before writing (x[1:] = x[:-1])
        if is_basic_index(index):
            shape, strides, offset = basic_index(a.shape, a.strides, a.offset, index)
            while len(values.shape) > len(shape) and values.shape[0] == 1:
                values = self._reshape(values, values.shape[1:])  # numpy drops leading 1s too
            walk, (dst, src) = _walk(
                shape, CudaStorage(a.buffer, shape, strides, offset, a.dtype), values
            )
            if math.prod(shape):
                copy = helper_kernel("copy")
                _launch(
                    copy,
                    math.prod(shape),
                    a.buffer,
                    offset,
                    dst,
                    values.buffer,
                    values.offset,
                    src,
                    walk,
                )
            return
        table = position_table(a.shape, a.strides, a.offset)[index]
        if table.size:
            walk, (src,) = _walk(table.shape, values)
            targets = cuda.to_device(table.ravel())
            _launch(
                helper_kernel("scatter"),
                table.size,
                a.buffer,
                targets,
                values.buffer,
                values.offset,
                src,
                walk,
            )

    def cat(self, parts: Sequence[CudaStorage], dim: int) -> CudaStorage:
        shape = list(parts[0].shape)
        shape[dim] = sum(p.shape[dim] for p in parts)
        out = self.empty(shape, np.result_type(*[p.dtype for p in parts]))
        start = 0
        for part in parts:
            self.setitem(out, (slice(None),) * dim + (slice(start, start + part.shape[dim]),), part)
            start += part.shape[dim]
        return out

    def where(self, condition: CudaStorage, a: CudaStorage, b: CudaStorage) -> CudaStorage:
        shape = broadcast_shape(broadcast_shape(condition.shape, a.shape), b.shape)
        out = self.empty(shape, np.result_type(a.dtype, b.dtype))
        if out.size:
            walk, (sc, sa, sb) = _walk(shape, condition, a, b)
            args = (
                condition.buffer,
                condition.offset,
                sc,
                a.buffer,
                a.offset,
                sa,
                b.buffer,
                b.offset,
                sb,
                walk,
            )
            _launch(helper_kernel("where"), out.size, out.buffer, *args)
        return out

    def argreduce(self, op: str, a: CudaStorage, dim: int | None, keepdim: bool) -> CudaStorage:
        """Computed on the host (a shortcut: the values go to the host, the indices come back)."""
        return self.from_numpy(NumpyBackend().argreduce(op, self.to_numpy(a), dim, keepdim))
