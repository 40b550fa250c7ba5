r"""The Numba CPU kernels: ``map``, ``zip``, ``reduce`` and ``matmul`` loops over strided storage.

Each elementwise op gets two kernels, built by a factory around its scalar function from
:mod:`~torchlight.backends.scalar_ops`: a *contiguous* one (``out[i] = f(a[i])``) and a *strided*
one that walks the rows of a :func:`~torchlight.backends.numba.backend.plan`. Reductions get two
loop orders, and ``matmul`` one register-tiled kernel. Where the loops run from, and with which
layouts, is decided by :class:`~torchlight.backends.numba.backend.NumbaBackend`.

Every kernel is compiled with ``parallel=True`` (``prange`` loops are split across the CPU cores)
and ``cache=True``, which stores the machine code in ``__pycache__`` so that the next process
loads it instead of compiling again (about a second per kernel). That works for kernels built
inside a factory only because the scalar functions are plain Python functions made inlinable
with ``register_jitable(inline="always")`` (:func:`jitable`): numba keys the cached kernel by
its closure variables, and a plain function pickles by name, so the key is the same in the next
process; a closure over a ``numba.njit`` dispatcher would never match. The cache tracks this
file only: after editing ``scalar_ops.py``, delete
``torchlight/backends/__pycache__/numba_kernels*.nb*``.

Example:
    >>> from torchlight.backends.numba.kernels import map_kernels
    >>> import numpy as np
    >>> contiguous, strided = map_kernels("neg")
    >>> out = np.empty(3)
    >>> contiguous(out, np.array([1.0, -2.0, 3.0]))
    >>> out
    array([-1.,  2., -3.])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from numba import njit, prange
from numba.extending import register_jitable

from torchlight.backends import scalar_ops

#: Options of every CPU kernel: parallel loops, cached on disk, IEEE 754 division (1/0 = inf
#: rather than Python's ZeroDivisionError).
OPTIONS: dict[str, Any] = {"parallel": True, "cache": True, "error_model": "numpy", "nogil": True}


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
    def strided(
        out, a, a_strides, b, b_strides, outer, divisors, inner, a_is_out
    ):  # pragma: no cover
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
            # In place (p.mul_(0.9), a bias added into a product): read out itself, not a's view
            # of the same memory, or LLVM's overlap check sends the loop down its scalar path
            if a_is_out and step_b == 0:
                y = b[pb]
                for c in range(n):
                    o[c] = f(o[c], y)
            elif a_is_out and step_b == 1:
                row_b = b[pb : pb + n]
                for c in range(n):
                    o[c] = f(o[c], row_b[c])
            elif step_a == 1 and step_b == 1:  # two rows side by side
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


@njit(**OPTIONS)
def transpose_kernel(out, a):  # pragma: no cover - compiled by numba
    r"""$\mathrm{out}_{s,j,i} = a_{s,i,j}$: each batch matrix transposed into ``out``.

    For the matmul kernel, whose operands must be contiguous along $k$: the transposed operand
    of a linear layer's backward ($G^T X$) is a transposed view. numpy copies one element at a
    time in the output's order, reading $a$ a column at a time (a cache miss per element once
    the rows are long); here each task copies an 8-row band in tiles of 8x8 elements, so the
    lines of $a$ it reads and of ``out`` it writes stay in cache (about 5x faster at 8 MB).
    """
    rows, cols = a.shape[1], a.shape[2]
    tile = 8
    bands = (rows + tile - 1) // tile
    for t in prange(a.shape[0] * bands):
        s, r0 = t // bands, (t % bands) * tile
        r1 = min(r0 + tile, rows)
        for c0 in range(0, cols, tile):
            for c in range(c0, min(c0 + tile, cols)):
                for r in range(r0, r1):
                    out[s, c, r] = a[s, r, c]


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
