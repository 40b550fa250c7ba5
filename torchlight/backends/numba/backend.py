r"""The Numba backend: the strided loops of the reference backend, compiled and run in parallel.

Storage is a numpy array (so layout, indexing and conversions are numpy's, inherited from
:class:`~torchlight.backends.numpy.backend.NumpyBackend`); ``map``, ``zip``, ``reduce`` and
``matmul`` are our own kernels (:mod:`~torchlight.backends.numba.kernels`), compiled by Numba
with ``parallel=True`` so that ``prange`` loops are split across the CPU cores. This file plans
how the kernels walk their operands and picks the kernel for each call.

How a strided elementwise kernel stays fast:

1. every operand is broadcast to the output's shape (a broadcast dimension gets stride 0), so
   one set of strides per operand says where each element lives;
2. neighbouring dimensions that every operand walks contiguously are merged
   (:func:`plan`): a contiguous ``(64, 128)`` tensor is one run of 8192 elements;
3. the parallel loop runs over *rows*; each row computes its start position once, then walks
   the last dimension with a constant stride, a loop LLVM turns into vector instructions;
4. when all operands are contiguous, an even simpler kernel (``out[i] = f(a[i])``) is used;
   for float32 ``exp`` that is :mod:`~torchlight.backends.numba.expf`, an ``exp`` that LLVM
   can vectorize (the C library's ``expf``, called one number at a time, is slower than numpy).

The kernels are cached on disk (``cache=True``): a second process loads them instead of
compiling them again; :mod:`~torchlight.backends.numba.kernels` explains what that takes.

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([[1.0, -2.0], [3.0, -4.0]], backend="numba")
    >>> x.relu().sum(1)
    tensor([1., 3.], device='numba')
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numba import config

from torchlight.backends.fused import FusedKernels
from torchlight.backends.numba.expf import exp_float32_kernel
from torchlight.backends.numba.kernels import (
    OPTIONS,
    jitable,
    map_kernels,
    matmul_kernel,
    reduce_kernels,
    transpose_kernel,
    zip_kernels,
)
from torchlight.backends.numba.lstm import lstm_cell_backward, lstm_cell_forward
from torchlight.backends.numpy.backend import NumpyBackend
from torchlight.backends.numpy.kernels import lstm_weight_gradients
from torchlight.backends.scalar_ops import map_dtype, reduce_dtype, zip_dtype
from torchlight.backends.strided.backend import expand_strides, position_table
from torchlight.shape import broadcast_shape, reduced_shape

__all__ = [
    "CHUNK",
    "OPTIONS",
    "NumbaBackend",
    "Plan",
    "flat",
    "jitable",
    "map_kernels",
    "matmul_kernel",
    "operand",
    "plan",
    "reduce_kernels",
    "zip_kernels",
]

#: A long run of elements is cut into rows of this many, so that the cores can share it.
CHUNK = 1 << 14


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
        >>> from torchlight.backends.numba.backend import plan
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

    # The fused kernels as compositions (not numpy's overrides), so they run on the kernels below.
    log_softmax = FusedKernels.log_softmax

    def linear(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """``FusedKernels.linear``, with the bias added in place: no second output array."""
        out = self.matmul(x, self.permute(weight, (1, 0)))
        return out if bias is None else self.zip("add", out, bias, out=out)

    def __init__(self) -> None:
        self.threads: int = config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]

    def map(self, op: str, a: np.ndarray) -> np.ndarray:
        out = np.empty(a.shape, map_dtype(op, a.dtype))
        if out.size == 0:
            return out
        contiguous, strided = map_kernels(op)
        if a.flags.c_contiguous:
            if op == "exp" and a.dtype == np.float32:
                contiguous = exp_float32_kernel  # vectorized; numba's expf is one at a time
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
        # Into ``out`` directly when it is contiguous and each operand is either out itself or
        # elsewhere (p.mul_(0.9), a bias added in place), so that no element is read after
        # another thread wrote it (a read-only out, such as a lifted number, raises numpy's error)
        direct = (
            out is not None
            and out.flags.c_contiguous
            and out.flags.writeable
            and out.shape == shape
        )
        if out is not None and not (direct and _apart(out, a, b)):
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
                a is out,  # then a's positions are out's: the kernel reads out in place
            )
        return out

    def reduce(self, op: str, a: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        out_shape = reduced_shape(a.shape, dims, keepdim=keepdim)
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
        transposed = a.ndim == 2 and a.T.flags.c_contiguous and not a.flags.c_contiguous
        if transposed and a.size >= CHUNK and dtype.kind == "f":
            # A^T B with A and B stored k-major: a linear layer's weight gradient G^T X. Our
            # kernel reads both operands along k, so it would need a transposed copy of both;
            # numpy's BLAS reads them as they are (a speed trick: 2.5 ms instead of 4.4 ms for
            # an LSTM's input weights, (2048 x 1024)^T (2048 x 64) in float32)
            return np.asarray(np.matmul(a, b))
        compute = dtype if dtype.kind == "f" else np.dtype(np.int64)  # bool/int: exact in int64
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        batch = broadcast_shape(a2.shape[:-2], b2.shape[:-2])
        (M, K), N = a2.shape[-2:], b2.shape[-1]
        # Each operand keeps its own batch; a_batch[s] says which matrix batch element s uses.
        A = _k_contiguous(a2, compute).reshape(math.prod(a2.shape[:-2]), M, K)
        BT = _k_contiguous(np.swapaxes(b2, -1, -2), compute).reshape(math.prod(b2.shape[:-2]), N, K)
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

    # The override of the readable LSTM recurrence (ops/recurrent.py has the math; numba/lstm.py
    # the kernels): per step our matmul kernel, then one compiled pass over the gates. float32
    # only (see numba/lstm.py); other dtypes take the numpy backend's override.
    def lstm_forward(
        self,
        xp: np.ndarray,
        w_hh: np.ndarray,
        b_hh: np.ndarray | None,
        h0: np.ndarray,
        c0: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if xp.dtype != np.float32:
            return super().lstm_forward(xp, w_hh, b_hh, h0, c0)
        steps, batch, four = xp.shape
        size = four // 4
        xp, w = np.ascontiguousarray(xp), np.ascontiguousarray(w_hh)  # h W^T: w is (W^T)^T
        bias = np.zeros(four, xp.dtype) if b_hh is None else np.ascontiguousarray(b_hh)
        out = np.empty((2, steps, batch, size), xp.dtype)
        gates = np.empty(xp.shape, xp.dtype)
        tanh_c = np.empty((steps, batch, size), xp.dtype)
        hh = np.empty((1, batch, four), xp.dtype)  # h_{t-1} W_hh^T
        h, c = np.ascontiguousarray(h0), np.ascontiguousarray(c0)
        for t in range(steps):
            matmul_kernel(h[None], w[None], hh, _FIRST, _FIRST, np.float32(0))
            lstm_cell_forward(hh[0], xp[t], bias, c, gates[t], out[1, t], tanh_c[t], out[0, t])
            h, c = out[0, t], out[1, t]
        return out, gates, tanh_c

    def lstm_backward(
        self,
        w_hh: np.ndarray,
        h0: np.ndarray,
        c0: np.ndarray,
        out: np.ndarray,
        gates: np.ndarray,
        tanh_c: np.ndarray,
        grad_out: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if gates.dtype != np.float32:
            return super().lstm_backward(w_hh, h0, c0, out, gates, tanh_c, grad_out)
        steps, batch, size = out.shape[1:]
        w_t = np.ascontiguousarray(w_hh.T)  # dz W_hh: (W_hh^T) is the transposed operand
        c0, grad_out = np.ascontiguousarray(c0), np.ascontiguousarray(grad_out)
        grad_z = np.empty(gates.shape, gates.dtype)
        grad_h, grad_c = grad_out[0, -1].copy(), grad_out[1, -1].copy()
        grad_c_prev = np.empty_like(grad_c)
        grad_h_prev = np.empty((1, batch, size), gates.dtype)
        for t in reversed(range(steps)):
            c_prev = c0 if t == 0 else out[1, t - 1]
            lstm_cell_backward(gates[t], c_prev, tanh_c[t], grad_h, grad_c, grad_z[t], grad_c_prev)
            matmul_kernel(grad_z[t][None], w_t[None], grad_h_prev, _FIRST, _FIRST, np.float32(0))
            if t > 0:  # h_{t-1} and c_{t-1} are also outputs of the layer
                np.add(grad_h_prev[0], grad_out[0, t - 1], out=grad_h)
                np.add(grad_c_prev, grad_out[1, t - 1], out=grad_c)
            else:
                grad_h, grad_c = grad_h_prev[0], grad_c_prev
        # (L N, 4H)^T (L N, H) in numpy's BLAS: A^T B, as in matmul below
        return grad_z, *lstm_weight_gradients(grad_z, h0, out), grad_h, grad_c


def _k_contiguous(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` C-contiguous in ``dtype``; a transposed view of a contiguous array (``G.T`` in a
    linear layer's backward) is copied by ``transpose_kernel``, not ``np.ascontiguousarray``."""
    if x.flags.c_contiguous or x.ndim < 2 or x.dtype != dtype or x.size < CHUNK:
        return np.ascontiguousarray(x, dtype=dtype)
    source = np.swapaxes(x, -1, -2)
    if not source.flags.c_contiguous:
        return np.ascontiguousarray(x)
    out = np.empty(x.shape, dtype)
    rows, cols = source.shape[-2:]
    transpose_kernel(out.reshape(-1, cols, rows), source.reshape(-1, rows, cols))
    return out


#: ``a_batch``/``b_batch`` of a single matrix product: every product uses matrix 0.
_FIRST = np.zeros(1, np.int64)
