"""The default backend: numpy arrays are the storage, numpy ufuncs the kernels.

numpy already implements strided storage, views and broadcasting, so each primitive here is
one or two lines; the strided reference backend spells out what numpy does underneath.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from torchlight import threads
from torchlight.backends.base import FusedKernels, Index


def _stable_sigmoid(x: np.ndarray) -> np.ndarray:
    # 1/(1+e^-x) overflows e^-x for very negative x; use e^x/(1+e^x) there instead.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _sigmoid_in_place(x: np.ndarray) -> None:
    """``x[...] = 1 / (1 + e^-x)`` in four passes: where ``e^-x`` overflows to inf the result is
    0, as it should be (the LSTM kernels' sigmoid; ``_quietly``, so the overflow is silent)."""
    np.negative(x, out=x)
    np.exp(x, out=x)
    x += 1
    np.reciprocal(x, out=x)


def _add_by_sorting(out: np.ndarray, index: Index, values: np.ndarray) -> bool:
    """``np.add.at(out, index, values)`` for an index of integer arrays that picks whole rows
    (an embedding's backward), about 6x faster: the positions are sorted (stably, so each
    position's rows keep their order) and each run of equal positions is summed by one
    ``np.add.reduceat``. Returns False, doing nothing, for any other index (``np.add.at`` is
    fast enough where each position is one number)."""
    picks = [i for i in index if isinstance(i, np.ndarray) and i.dtype.kind in "iu"]
    if not picks or len(picks) != len(index) or len(index) >= out.ndim or values.size == 0:
        return False
    arrays = np.broadcast_arrays(*picks)
    leading = out.shape[: len(arrays)]
    if any(a.size and (a.min() < -n or a.max() >= n) for a, n in zip(arrays, leading, strict=True)):
        return False  # out of range: np.add.at raises the IndexError
    positions = np.ravel_multi_index([a % n for a, n in zip(arrays, leading, strict=True)], leading)
    positions = positions.ravel()
    rows = np.broadcast_to(values, arrays[0].shape + out.shape[len(arrays) :])
    rows = rows.reshape(positions.size, -1)
    order = np.argsort(positions, kind="stable")
    sorted_positions = positions[order]
    starts = np.flatnonzero(np.r_[True, sorted_positions[1:] != sorted_positions[:-1]])
    out.reshape(-1, rows.shape[1])[sorted_positions[starts]] = np.add.reduceat(rows[order], starts)
    return True


def lstm_weight_gradients(
    grad_z: np.ndarray, h0: np.ndarray, out: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""$\partial L/\partial W_{hh} = \sum_t (\partial L/\partial z_t)^T h_{t-1}$ and
    $\partial L/\partial b_{hh}$ from every step's gate gradients ``grad_z`` $(L, N, 4H)$: one
    BLAS matmul of the stacked steps, $(LN, 4H)^T (LN, H)$ (the numpy and Numba LSTM kernels'
    last step; ``out[0]`` holds $h_1 \ldots h_L$)."""
    rows = grad_z.reshape(-1, grad_z.shape[-1])
    h_prev = np.concatenate([h0[None], out[0, :-1]]).reshape(-1, h0.shape[-1])
    return rows.T @ h_prev, rows.sum(0)


def _quarters(z: np.ndarray, size: int) -> list[np.ndarray]:
    """The four LSTM gates' columns of ``z`` (N, 4H), as views."""
    return [z[:, k * size : (k + 1) * size] for k in range(4)]


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0).astype(x.dtype, copy=False)


def _erf(x: np.ndarray) -> np.ndarray:
    # numpy has no erf ufunc (scipy does, but is not a dependency): call math.erf per element,
    # about 0.1 us each, the one map op here that runs a Python loop.
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x), dtype=np.result_type(x, np.float32))


def _quietly(ufunc: Callable[..., Any]) -> Callable[..., Any]:
    """``ufunc`` with numpy's floating-point warnings off: log(0) = -inf, 1/0 = inf and friends
    come back silently, as in PyTorch.

    numpy keeps its error settings in a context variable, so the call runs in a copy of the
    context made once, inside ``np.errstate(all="ignore")``: entering a ready context is cheap,
    while ``np.errstate`` builds its settings on every call (about 1 µs; a training step makes
    several such calls). A context is entered by one thread at a time: while another thread is
    inside it, the call takes the ``np.errstate`` way.
    """
    with np.errstate(all="ignore"):
        quiet = contextvars.copy_context()

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return quiet.run(ufunc, *args, **kwargs)
        except RuntimeError:  # the context is entered (by another thread)
            with np.errstate(all="ignore"):
                return ufunc(*args, **kwargs)

    return call


# Ops whose domain errors numpy reports as warnings (log, sqrt, reciprocal, exp, div, pow) run
# _quietly: PyTorch returns inf/nan silently.
_MAP: dict[str, Callable[..., Any]] = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": _quietly(np.exp),
    "log": _quietly(np.log),
    "sqrt": _quietly(np.sqrt),
    "sigmoid": _stable_sigmoid,
    "relu": _relu,
    "tanh": np.tanh,
    "sign": np.sign,
    "reciprocal": _quietly(np.reciprocal),
    "square": np.square,
    "copy": lambda a: np.array(a, order="C"),
    "sin": _quietly(np.sin),
    "cos": _quietly(np.cos),
    "log1p": _quietly(np.log1p),
    "expm1": _quietly(np.expm1),
    "erf": _erf,
    "floor": np.floor,
    "round": np.round,  # halves to even, as PyTorch
}

_ZIP: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _quietly(np.true_divide),
    "pow": _quietly(np.power),
    "maximum": np.maximum,
    "minimum": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


# The ufuncs' own reduce skips np.sum's Python wrapper (a few microseconds per call).
_REDUCE: dict[str, Callable[..., Any]] = {
    "sum": np.add.reduce,
    "max": np.maximum.reduce,
    "min": np.minimum.reduce,
}


def _log_softmax(a: np.ndarray, dim: int) -> np.ndarray:
    shifted = a - np.maximum.reduce(a, axis=dim, keepdims=True)  # e^shifted <= 1: no overflow
    shifted -= np.log(np.add.reduce(np.exp(shifted), axis=dim, keepdims=True))
    return shifted


# (quietly: an inf among the inputs gives nan silently, as in PyTorch)
_quiet_log_softmax = _quietly(_log_softmax)
_sigmoid_in_place = _quietly(_sigmoid_in_place)


# np.argmax walks the rows along ``dim`` one by one, which is slow when they are short and
# many (max pooling: thousands of windows of 4), about 30x the cost of the max itself. For such
# a short axis, find the first extreme with whole-array passes instead.
_SHORT, _MANY = 16, 256


def _argreduce_short(op: str, a: np.ndarray, dim: int, keepdim: bool) -> np.ndarray:
    """``np.argmax``/``np.argmin`` along a short ``dim`` (at most ``_SHORT`` long): mark where
    the extreme is (a NaN counts as the extreme, as in numpy), weigh position k by size - k, and
    the largest weight marks the first extreme."""
    size = a.shape[dim]
    best = (np.maximum if op == "max" else np.minimum).reduce(a, axis=dim, keepdims=True)
    hit = a == best
    if a.dtype.kind == "f":
        hit |= np.isnan(a)
    weight = np.arange(size, 0, -1, dtype=np.int8).reshape(
        [size if d == dim else 1 for d in range(a.ndim)]
    )
    first = np.maximum.reduce(hit * weight, axis=dim, keepdims=True)
    index = (size - first).astype(np.int64)
    return index if keepdim else index.squeeze(dim)


class NumpyBackend(FusedKernels):
    """Storage is a ``numpy.ndarray``; every primitive is a numpy call."""

    name = "numpy"

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array)

    def to_numpy(self, a: np.ndarray) -> np.ndarray:
        return a

    def shape(self, a: np.ndarray) -> tuple[int, ...]:
        return a.shape

    def strides(self, a: np.ndarray) -> tuple[int, ...]:
        return tuple(s // a.itemsize for s in a.strides)

    def dtype(self, a: np.ndarray) -> np.dtype:
        return a.dtype

    def map(self, op: str, a: np.ndarray) -> np.ndarray:
        return np.asarray(_MAP[op](a))

    def zip(
        self, op: str, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        ufunc = _ZIP[op]
        return np.asarray(ufunc(a, b) if out is None else ufunc(a, b, out=out))

    def reduce(self, op: str, a: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        return np.asarray(_REDUCE[op](a, axis=dims, keepdims=keepdim))

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        threads.for_matmul(a.shape, b.shape)  # issue 26: fewer BLAS threads for small products
        return np.asarray(np.matmul(a, b))

    def view(self, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
        try:
            out = a.view()
            out.shape = shape  # raises instead of copying when the strides do not allow it
        except AttributeError:
            return None
        return out

    def permute(self, a: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
        return a.transpose(dims)

    def expand(self, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(a, shape)

    def contiguous(self, a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a)

    def astype(self, a: np.ndarray, dtype: np.dtype) -> np.ndarray:
        return a.astype(dtype)

    def getitem(self, a: np.ndarray, index: Index) -> np.ndarray:
        return np.asarray(a[index])

    def index_add(self, shape: tuple[int, ...], index: Index, values: np.ndarray) -> np.ndarray:
        out = np.zeros(shape, dtype=values.dtype)
        if all(isinstance(i, (int, slice, type(None), type(Ellipsis))) for i in index):
            out[index] = values  # a basic index never repeats a position: plain assignment
        elif not _add_by_sorting(out, index, values):
            np.add.at(out, index, values)  # integer arrays may repeat: add each occurrence
        return out

    def setitem(self, a: np.ndarray, index: Index, values: Any) -> None:
        a[index] = values

    def cat(self, parts: Sequence[np.ndarray], dim: int) -> np.ndarray:
        return np.concatenate(parts, axis=dim)

    def where(self, condition: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(condition, a, b)

    def argreduce(self, op: str, a: np.ndarray, dim: int | None, keepdim: bool) -> np.ndarray:
        if dim is not None and 1 < a.shape[dim] <= _SHORT and a.size >= _MANY * a.shape[dim]:
            return _argreduce_short(op, a, dim, keepdim)
        fn = np.argmax if op == "max" else np.argmin
        return np.asarray(fn(a, axis=dim, keepdims=keepdim)).astype(np.int64)

    # fused kernels (FusedKernels): the same results as the compositions, in fewer numpy calls
    def linear(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        threads.for_matmul(x.shape, weight.shape[::-1])  # issue 26: as in matmul
        out = np.matmul(x, weight.T)
        if bias is not None:
            np.add(out, bias, out=out)  # in place: no second (rows, out_features) array
        return out

    def log_softmax(self, a: np.ndarray, dim: int) -> np.ndarray:
        return np.asarray(_quiet_log_softmax(a, dim))

    # An LSTM layer (FusedKernels.lstm_forward/lstm_backward has the math): the same steps, but
    # every array is allocated once per layer and each step's gates are updated in place with
    # ufuncs' ``out=``; the composition makes ~15 new (N, H) arrays a step.
    def lstm_forward(
        self,
        xp: np.ndarray,
        w_hh: np.ndarray,
        b_hh: np.ndarray | None,
        h0: np.ndarray,
        c0: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        steps, batch, four = xp.shape
        size = four // 4
        out = np.empty((2, steps, batch, size), xp.dtype)
        gates = np.empty((steps, batch, four), xp.dtype)
        tanh_c = np.empty((steps, batch, size), xp.dtype)
        h, c = h0, c0
        for t in range(steps):
            z = gates[t]
            np.matmul(h, w_hh.T, out=z)
            z += xp[t]
            if b_hh is not None:
                z += b_hh
            i, f, g, o = _quarters(z, size)
            _sigmoid_in_place(z[:, : 2 * size])  # i and f, side by side
            np.tanh(g, out=g)
            _sigmoid_in_place(o)
            h, c, tc = out[0, t], out[1, t], tanh_c[t]
            np.multiply(f, c0 if t == 0 else out[1, t - 1], out=c)
            np.multiply(i, g, out=tc)
            c += tc
            np.tanh(c, out=tc)
            np.multiply(o, tc, out=h)
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
        steps, batch, size = out.shape[1:]
        grad_z = np.empty(gates.shape, gates.dtype)
        grad_h, grad_c = grad_out[0, -1].copy(), grad_out[1, -1].copy()
        scratch = np.empty((batch, size), gates.dtype)
        for t in reversed(range(steps)):
            i, f, g, o = _quarters(gates[t], size)
            di, df, dg, do = _quarters(grad_z[t], size)
            tc, c_prev = tanh_c[t], c0 if t == 0 else out[1, t - 1]
            np.multiply(tc, tc, out=scratch)  # delta_c = G_c + G_h o (1 - tanh^2 c), in grad_c
            np.subtract(1, scratch, out=scratch)
            scratch *= o
            scratch *= grad_h
            grad_c += scratch
            np.subtract(1, i, out=di)  # delta_c g i (1 - i)
            di *= i
            di *= g
            di *= grad_c
            np.subtract(1, f, out=df)  # delta_c c_{t-1} f (1 - f)
            df *= f
            df *= c_prev
            df *= grad_c
            np.multiply(g, g, out=dg)  # delta_c i (1 - g^2)
            np.subtract(1, dg, out=dg)
            dg *= i
            dg *= grad_c
            np.subtract(1, o, out=do)  # G_h tanh(c) o (1 - o)
            do *= o
            do *= tc
            do *= grad_h
            grad_c *= f
            np.matmul(grad_z[t], w_hh, out=grad_h)
            if t > 0:
                grad_h += grad_out[0, t - 1]
                grad_c += grad_out[1, t - 1]
        return grad_z, *lstm_weight_gradients(grad_z, h0, out), grad_h, grad_c
