r"""The Numba backend: the strided loops of the reference backend, compiled and run in parallel.

Storage is a numpy array (so layout, indexing and conversions are numpy's, inherited from
:class:`~torchlight.backends.numpy_backend.NumpyBackend`); ``map``, ``zip``, ``reduce`` and
``matmul`` are our own kernels, compiled by Numba with ``parallel=True`` so that ``prange``
loops are split across the CPU cores.

How a strided elementwise kernel stays fast:

1. every operand is broadcast to the output's shape (a broadcast dimension gets stride 0), so
   one set of strides per operand says where each element lives;
2. neighbouring dimensions that every operand walks contiguously are merged
   (:func:`plan`): a contiguous ``(64, 128)`` tensor is one run of 8192 elements;
3. the parallel loop runs over *rows*; each row computes its start position once, then walks
   the last dimension with a constant stride, a loop LLVM turns into vector instructions;
4. when all operands are contiguous, an even simpler kernel (``out[i] = f(a[i])``) is used.

The scalar functions come from :mod:`~torchlight.backends.scalar_ops`, made inlinable with
``register_jitable(inline="always")``. That matters for numba's on-disk cache (``cache=True``):
a kernel built inside a factory function is cached under a key that includes its closure
variables. A plain Python function pickles by name, so the key is the same in the next process
and the compiled kernel is loaded from ``__pycache__`` instead of compiled again; a closure over
a ``numba.njit`` dispatcher would never match. (The cache tracks this file only: after editing
``scalar_ops.py``, delete ``torchlight/backends/__pycache__/numba_backend*.nb*``.)

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([[1.0, -2.0], [3.0, -4.0]], backend="numba")
    >>> x.relu().sum(1)
    tensor([1., 3.], device='numba')
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from numba import config, njit, prange
from numba.extending import register_jitable

from torchlight.backends import scalar_ops
from torchlight.backends.numpy_backend import NumpyBackend
from torchlight.backends.scalar_ops import map_dtype, reduce_dtype, zip_dtype
from torchlight.backends.strided import expand_strides, position_table
from torchlight.shape import broadcast_shape

#: Options of every CPU kernel: parallel loops, cached on disk, IEEE 754 division (1/0 = inf
#: rather than Python's ZeroDivisionError).
OPTIONS: dict[str, Any] = {"parallel": True, "cache": True, "error_model": "numpy", "nogil": True}

#: A long run of elements is cut into rows of this many, so that the cores can share it.
CHUNK = 1 << 14


@functools.cache
def jitable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` registered with numba so compiled code can inline it (done once per function)."""
    return register_jitable(inline="always")(fn)


# --------------------------------------------------------------------------- kernel factories


def _make_map_kernels(fn: Callable[[Any], Any]) -> tuple[Any, Any]:
    f = jitable(fn)

    @njit(**OPTIONS)
    def contiguous(out, a):  # pragma: no cover - compiled by numba
        for i in prange(out.size):
            out[i] = f(a[i])

    @njit(**OPTIONS)
    def strided(out, a, a_strides, outer, divisors, inner):  # pragma: no cover
        nd = outer.size
        rows = (out.size + inner - 1) // inner
        step = a_strides[nd]
        for r in prange(rows):
            pa = 0
            for d in range(nd):
                i = (r // divisors[d]) % outer[d]
                pa += i * a_strides[d]
            start = r * inner
            n = min(inner, out.size - start)
            o = out[start : start + n]
            if step == 1:  # the same loop over a slice (known unit stride): LLVM vectorizes it
                row = a[pa : pa + n]
                for c in range(n):
                    o[c] = f(row[c])
            else:
                for c in range(n):
                    o[c] = f(a[pa + c * step])

    return contiguous, strided


def _make_zip_kernels(fn: Callable[[Any, Any], Any]) -> tuple[Any, Any]:
    f = jitable(fn)

    @njit(**OPTIONS)
    def contiguous(out, a, b):  # pragma: no cover - compiled by numba
        for i in prange(out.size):
            out[i] = f(a[i], b[i])

    @njit(**OPTIONS)
    def strided(out, a, a_strides, b, b_strides, outer, divisors, inner):  # pragma: no cover
        nd = outer.size
        rows = (out.size + inner - 1) // inner
        step_a, step_b = a_strides[nd], b_strides[nd]
        for r in prange(rows):
            pa = 0
            pb = 0
            for d in range(nd):
                i = (r // divisors[d]) % outer[d]
                pa += i * a_strides[d]
                pb += i * b_strides[d]
            start = r * inner
            n = min(inner, out.size - start)
            # The common layouts get loops over slices (known unit steps), which LLVM vectorizes.
            o = out[start : start + n]
            if step_a == 1 and step_b == 1:  # two rows side by side
                row_a, row_b = a[pa : pa + n], b[pb : pb + n]
                for c in range(n):
                    o[c] = f(row_a[c], row_b[c])
            elif step_a == 1 and step_b == 0:  # a row and a broadcast number
                row_a, y = a[pa : pa + n], b[pb]
                for c in range(n):
                    o[c] = f(row_a[c], y)
            elif step_a == 0 and step_b == 1:
                x, row_b = a[pa], b[pb : pb + n]
                for c in range(n):
                    o[c] = f(x, row_b[c])
            else:
                for c in range(n):
                    o[c] = f(a[pa + c * step_a], b[pb + c * step_b])

    return contiguous, strided


def _make_reduce_kernels(fn: Callable[[Any, Any], Any], is_sum: bool) -> tuple[Any, Any]:
    """Two loop orders over the same fold ``out[o] = fold_r a[kept[o] + red[r]]``.

    ``kept`` and ``red`` list the buffer positions of the outputs' first elements and of the
    reduced elements relative to them; ``unit`` says that the inner loop's positions are
    consecutive, so that it can read ``a`` directly (a loop LLVM vectorizes). ``reassoc``
    lets it reorder a sum into vector lanes; ``nan`` still propagates (no ``nnan`` flag).
    """
    f = jitable(fn)

    @njit(**OPTIONS, fastmath={"reassoc"})
    def inner(acc, a, kept, red, zero, parts, unit):  # pragma: no cover - compiled by numba
        # One task per (output, part): walks its share of the reduced elements (best when
        # they are close together in memory). ``parts`` > 1 splits long reductions over cores.
        length = (red.size + parts - 1) // parts
        for t in prange(kept.size * parts):
            base = kept[t // parts]
            lo = (t % parts) * length
            hi = min(lo + length, red.size)
            total = zero
            if not is_sum:
                total = a[base + red[lo]]
            if unit:  # red[r] == r: a slice, so LLVM knows the step
                run = a[base + lo : base + hi]
                for r in range(hi - lo):
                    total = f(total, run[r])
            else:
                for r in range(lo, hi):
                    total = f(total, a[base + red[r]])
            acc[t] = total

    @njit(**OPTIONS, fastmath={"reassoc"})
    def outer(acc, a, kept, red, zero, parts, unit):  # pragma: no cover - compiled by numba
        # One task per block of outputs, reduced elements in the outer loop: the inner loop
        # then walks neighbouring outputs (best for e.g. column sums of a row-major matrix).
        block = 512
        for t in prange((kept.size + block - 1) // block):
            lo = t * block
            hi = min(lo + block, kept.size)
            for o in range(lo, hi):
                acc[o] = zero if is_sum else a[kept[o] + red[0]]
            for r in range(red.size):
                if unit:  # kept[o] == kept[lo] + (o - lo): slices, so LLVM knows the step
                    start = red[r] + kept[lo]
                    run, into = a[start : start + hi - lo], acc[lo:hi]
                    for o in range(hi - lo):
                        into[o] = f(into[o], run[o])
                else:
                    shift = red[r]
                    for o in range(lo, hi):
                        acc[o] = f(acc[o], a[kept[o] + shift])

    return inner, outer


@njit(**OPTIONS, fastmath={"reassoc", "contract"})
def matmul_kernel(a, bt, out, a_batch, b_batch, zero):  # pragma: no cover - compiled by numba
    r"""$\mathrm{out}_{s,i,j} = \sum_k a_{a\_batch[s],i,k}\ bt_{b\_batch[s],j,k}$ (``bt`` is $B^T$).

    Each task computes a band of 32 rows of one matrix product. The band is done in 4x4
    *register tiles*: 16 accumulators stay in CPU registers while ``k`` runs, so each loaded
    element of ``a`` and ``bt`` is used four times. Both operands are read along ``k``, their
    contiguous axis; ``fastmath`` lets LLVM reorder the sums over ``k`` into vector lanes.
    Columns are taken in blocks of 32 so that the rows of ``bt`` in use stay in cache.
    """
    M, K = a.shape[1], a.shape[2]
    N = bt.shape[1]
    band = 32
    bands = (M + band - 1) // band
    for t in prange(out.shape[0] * bands):
        s = t // bands
        A = a[a_batch[s]]
        BT = bt[b_batch[s]]
        C = out[s]
        i_end = min((t % bands) * band + band, M)
        for j_block in range(0, N, band):
            j_end = min(j_block + band, N)
            for i in range((t % bands) * band, i_end, 4):
                for j in range(j_block, j_end, 4):
                    if i + 4 > i_end or j + 4 > j_end:  # a ragged edge: plain dot products
                        for ii in range(i, min(i + 4, i_end)):
                            for jj in range(j, min(j + 4, j_end)):
                                total = zero
                                for k in range(K):
                                    total += A[ii, k] * BT[jj, k]
                                C[ii, jj] = total
                        continue
                    c00 = c01 = c02 = c03 = zero
                    c10 = c11 = c12 = c13 = zero
                    c20 = c21 = c22 = c23 = zero
                    c30 = c31 = c32 = c33 = zero
                    a0, a1, a2, a3 = A[i], A[i + 1], A[i + 2], A[i + 3]
                    b0, b1, b2, b3 = BT[j], BT[j + 1], BT[j + 2], BT[j + 3]
                    for k in range(K):
                        c00 += a0[k] * b0[k]
                        c01 += a0[k] * b1[k]
                        c02 += a0[k] * b2[k]
                        c03 += a0[k] * b3[k]
                        c10 += a1[k] * b0[k]
                        c11 += a1[k] * b1[k]
                        c12 += a1[k] * b2[k]
                        c13 += a1[k] * b3[k]
                        c20 += a2[k] * b0[k]
                        c21 += a2[k] * b1[k]
                        c22 += a2[k] * b2[k]
                        c23 += a2[k] * b3[k]
                        c30 += a3[k] * b0[k]
                        c31 += a3[k] * b1[k]
                        c32 += a3[k] * b2[k]
                        c33 += a3[k] * b3[k]
                    C[i, j], C[i, j + 1], C[i, j + 2], C[i, j + 3] = c00, c01, c02, c03
                    C[i + 1, j], C[i + 1, j + 1], C[i + 1, j + 2], C[i + 1, j + 3] = (
                        c10,
                        c11,
                        c12,
                        c13,
                    )
                    C[i + 2, j], C[i + 2, j + 1], C[i + 2, j + 2], C[i + 2, j + 3] = (
                        c20,
                        c21,
                        c22,
                        c23,
                    )
                    C[i + 3, j], C[i + 3, j + 1], C[i + 3, j + 2], C[i + 3, j + 3] = (
                        c30,
                        c31,
                        c32,
                        c33,
                    )


@functools.cache
def map_kernels(op: str) -> tuple[Any, Any]:
    """``(contiguous, strided)`` kernels of the ``map`` op ``op`` (compiled at first call)."""
    return _make_map_kernels(scalar_ops.MAP[op])


@functools.cache
def zip_kernels(op: str) -> tuple[Any, Any]:
    """``(contiguous, strided)`` kernels of the ``zip`` op ``op``."""
    return _make_zip_kernels(scalar_ops.ZIP[op])


@functools.cache
def reduce_kernels(op: str) -> tuple[Any, Any]:
    """``(inner, outer)`` kernels of the reduction ``op``."""
    return _make_reduce_kernels(scalar_ops.REDUCE[op], op == "sum")


# --------------------------------------------------------------------------- host-side planning


class Plan(NamedTuple):
    """How a strided kernel walks an output: rows over ``outer``, each ``inner`` long."""

    strides: list[np.ndarray]  # per operand: strides over outer dims, then the inner stride
    outer: np.ndarray
    divisors: np.ndarray  # row number // divisors[d] % outer[d] = index along outer dim d
    inner: int


def plan(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> Plan:
    """Merge the dimensions every operand walks contiguously, then cut a long run into rows.

    Plans are cached: a training loop asks for the same few layouts again and again.

    Example:
        >>> p = plan((4, 5), [(5, 1), (0, 1)])  # a (4, 5) matrix + a broadcast row
        >>> p.outer.tolist(), p.inner, [s.tolist() for s in p.strides]
        ([4], 5, [[5, 1], [0, 1]])
    """
    return _plan(tuple(shape), tuple(tuple(s) for s in strides))


@functools.lru_cache(maxsize=1024)
def _plan(shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...]) -> Plan:
    dims: list[tuple[int, list[int]]] = []
    for d, n in enumerate(shape):
        if n == 1:
            continue
        here = [s[d] for s in strides]
        if dims and all(prev == s * n for prev, s in zip(dims[-1][1], here, strict=True)):
            dims[-1] = (dims[-1][0] * n, here)  # one longer run
        else:
            dims.append((n, here))
    if not dims:
        dims = [(1, [0] * len(strides))]
    if len(dims) == 1 and dims[0][0] > CHUNK:
        n, here = dims[0]
        dims = [(math.ceil(n / CHUNK), [s * CHUNK for s in here]), (CHUNK, here)]
    outer = [n for n, _ in dims[:-1]]
    divisors = [math.prod(outer[d + 1 :]) for d in range(len(outer))]
    return Plan(
        strides=[_frozen([s[k] for _, s in dims]) for k in range(len(strides))],
        outer=_frozen(outer),
        divisors=_frozen(divisors),
        inner=dims[-1][0],
    )


def _frozen(values: Sequence[int] | np.ndarray) -> np.ndarray:
    out = np.array(values, dtype=np.int64)
    out.flags.writeable = False  # shared by every call with this plan
    return out


@functools.lru_cache(maxsize=256)
def _reduce_tables(
    shape: tuple[int, ...], strides: tuple[int, ...], dims: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, bool, bool]:
    """Positions of each output's first element (``kept``) and of the reduced elements
    relative to it (``red``), and whether each list is consecutive (cached per layout)."""
    kept_dims = [d for d in range(len(shape)) if d not in dims]
    kept = position_table([shape[d] for d in kept_dims], [strides[d] for d in kept_dims], 0)
    red = position_table([shape[d] for d in dims], [strides[d] for d in dims], 0)
    kept, red = _frozen(kept.ravel()), _frozen(red.ravel())
    return kept, red, bool(np.all(np.diff(kept) == 1)), bool(np.all(red == np.arange(red.size)))


def flat(x: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """A read-only 1-D view of the memory ``x`` spans, and ``x``'s strides in elements.

    Kernels then find element ``(i, j, ...)`` at ``i * strides[0] + j * strides[1] + ...``.
    (Read-only on purpose: numba compiles one version per array type, and a read-only input
    is a different type from a writable one.)
    """
    if any(s < 0 for s in x.strides):
        x = np.ascontiguousarray(x)  # a reversed view: copy rather than handle negative steps
    strides = [s // x.itemsize for s in x.strides]
    span = 1 + sum((n - 1) * s for n, s in zip(x.shape, strides, strict=True))
    return np.lib.stride_tricks.as_strided(x, (span,), (x.itemsize,), writeable=False), strides


def _readonly_ravel(x: np.ndarray) -> np.ndarray:
    out = x.reshape(-1)
    out.flags.writeable = False
    return out


def operand(x: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, ...]]:
    """``x``'s memory as a read-only 1-D array, and ``x``'s strides broadcast to ``shape``."""
    if x.flags.c_contiguous:
        buffer, strides = _readonly_ravel(x), [s // x.itemsize for s in x.strides]
    else:
        buffer, strides = flat(x)
    return buffer, expand_strides(x.shape, strides, shape)


def _apart(out: np.ndarray, *operands: np.ndarray) -> bool:
    """Whether a parallel kernel may write ``out`` while reading ``operands``: each operand is
    either ``out`` itself (element i is read, then written, by the same thread) or elsewhere."""
    return all(x is out or not np.may_share_memory(out, x) for x in operands)


class NumbaBackend(NumpyBackend):
    """numpy arrays as storage; map, zip, reduce and matmul as parallel Numba kernels."""

    name = "numba"

    def __init__(self) -> None:
        self.threads: int = config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]

    def map(self, op: str, a: np.ndarray) -> np.ndarray:
        out = np.empty(a.shape, map_dtype(op, a.dtype))
        if out.size == 0:
            return out
        contiguous, strided = map_kernels(op)
        if a.flags.c_contiguous:
            contiguous(out.reshape(-1), _readonly_ravel(a))
        else:
            buffer, strides = operand(a, a.shape)
            p = plan(a.shape, [strides])
            strided(out.reshape(-1), buffer, p.strides[0], p.outer, p.divisors, p.inner)
        return out

    def zip(
        self, op: str, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        shape = broadcast_shape(a.shape, b.shape)
        same = a.shape == b.shape and a.flags.c_contiguous and b.flags.c_contiguous
        if out is not None and not (same and out.flags.c_contiguous and _apart(out, a, b)):
            out[...] = self.zip(op, a, b)  # the result, then a copy (safe when out overlaps a)
            return out
        if out is None:
            out = np.empty(shape, zip_dtype(op, a.dtype, b.dtype))
        if out.size == 0:
            return out
        contiguous, strided = zip_kernels(op)
        if same:  # element i of out depends on element i of a and b only: out may be a
            contiguous(out.reshape(-1), _readonly_ravel(a), _readonly_ravel(b))
        else:
            buffer_a, strides_a = operand(a, shape)
            buffer_b, strides_b = operand(b, shape)
            p = plan(shape, [strides_a, strides_b])
            strided(
                out.reshape(-1),
                buffer_a,
                p.strides[0],
                buffer_b,
                p.strides[1],
                p.outer,
                p.divisors,
                p.inner,
            )
        return out

    def reduce(self, op: str, a: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        kept_shape = tuple(1 if d in dims else n for d, n in enumerate(a.shape))
        out_shape = (
            kept_shape if keepdim else tuple(n for d, n in enumerate(a.shape) if d not in dims)
        )
        out_dtype = reduce_dtype(op, a.dtype)
        count = math.prod(a.shape[d] for d in dims)
        if count == 0 and op != "sum":
            raise ValueError(f"{op}() of an empty dimension has no value (shape {a.shape})")
        if count == 0 or a.size == 0:
            return np.zeros(out_shape, out_dtype)
        # Sums accumulate in 64 bits (float32 sums in float64); max and min are exact anyway.
        acc_dtype = a.dtype if op != "sum" else (np.float64 if a.dtype.kind == "f" else np.int64)
        zero = np.dtype(acc_dtype).type(0)
        buffer, strides = flat(a)
        kept, red, kept_unit, red_unit = _reduce_tables(a.shape, tuple(strides), dims)
        inner, outer = reduce_kernels(op)
        kept_dims = [d for d in range(a.ndim) if d not in dims]
        closest_kept = min((abs(strides[d]) for d in kept_dims if a.shape[d] > 1), default=math.inf)
        closest_red = min((abs(strides[d]) for d in dims if a.shape[d] > 1), default=math.inf)
        if closest_kept < closest_red and kept.size >= 4 * self.threads:
            acc = np.empty(kept.size, acc_dtype)
            outer(acc, buffer, kept, red, zero, 1, kept_unit)
        else:
            parts = 1
            if kept.size < 4 * self.threads:  # few long reductions: split them over the cores
                parts = max(1, min(4 * self.threads, red.size // CHUNK))
            acc = np.empty(kept.size * parts, acc_dtype)
            inner(acc, buffer, kept, red, zero, parts, red_unit)
            if parts > 1:  # combine each output's partial results
                partial = acc
                partial.flags.writeable = False  # the same kernel signature as the first call
                acc = np.empty(kept.size, acc_dtype)
                starts = _frozen(list(range(0, kept.size * parts, parts)))
                inner(acc, partial, starts, _frozen(list(range(parts))), zero, 1, True)
        return acc.astype(out_dtype, copy=False).reshape(out_shape)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        dtype = np.result_type(a.dtype, b.dtype)
        compute = dtype if dtype.kind == "f" else np.dtype(np.int64)  # bool/int: exact in int64
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        batch = broadcast_shape(a2.shape[:-2], b2.shape[:-2])
        (M, K), N = a2.shape[-2:], b2.shape[-1]
        # Each operand keeps its own batch; a_batch[s] says which matrix batch element s uses.
        A = np.ascontiguousarray(a2, dtype=compute).reshape(math.prod(a2.shape[:-2]), M, K)
        BT = np.ascontiguousarray(np.swapaxes(b2, -1, -2), dtype=compute).reshape(
            math.prod(b2.shape[:-2]), N, K
        )
        a_batch = np.broadcast_to(np.arange(A.shape[0]).reshape(a2.shape[:-2]), batch).ravel()
        b_batch = np.broadcast_to(np.arange(BT.shape[0]).reshape(b2.shape[:-2]), batch).ravel()
        out = np.empty((math.prod(batch), M, N), compute)
        if out.size:
            matmul_kernel(A, BT, out, a_batch, b_batch, compute.type(0))
        shape = (*batch, M, N)
        if a.ndim == 1:
            shape = shape[:-2] + shape[-1:]
        if b.ndim == 1:
            shape = shape[:-1]
        return out.reshape(shape).astype(dtype, copy=False)
