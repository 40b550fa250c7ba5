"""The default backend: numpy arrays are the storage, numpy ufuncs the kernels.

numpy already implements strided storage, views and broadcasting, so each primitive here is
one or two lines; the strided reference backend spells out what numpy does underneath.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from torchlight import threads
from torchlight.backends.base import Index
from torchlight.backends.fused import FusedKernels
from torchlight.backends.numpy import kernels
from torchlight.backends.numpy.kernels import quietly

kernels.keep_freed_memory()  # freed arrays reused, not faulted in afresh (numpy/kernels.py)


def _array(result: Any) -> np.ndarray:
    """A ufunc's result as an array: numpy returns a scalar for 0-d inputs. (Speed: an array
    passes through without ``np.asarray``'s call, ~0.1 us per op.)"""
    return result if type(result) is np.ndarray else np.asarray(result)


def _stable_sigmoid(x: np.ndarray) -> np.ndarray:
    # 1/(1+e^-x) overflows e^-x for very negative x; use e^x/(1+e^x) there instead.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0).astype(x.dtype, copy=False)


def _erf(x: np.ndarray) -> np.ndarray:
    # numpy has no erf ufunc (scipy does, but is not a dependency): call math.erf per element,
    # about 0.1 us each, the one map op here that runs a Python loop.
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x), dtype=np.result_type(x, np.float32))


# Ops whose domain errors numpy reports as warnings (log, sqrt, reciprocal, exp, div, pow) run
# quietly (numpy/kernels.py): PyTorch returns inf/nan silently.
_MAP: dict[str, Callable[..., Any]] = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": quietly(np.exp),
    "log": quietly(np.log),
    "sqrt": quietly(np.sqrt),
    "sigmoid": _stable_sigmoid,
    "relu": _relu,
    "tanh": np.tanh,
    "sign": np.sign,
    "reciprocal": quietly(np.reciprocal),
    "square": np.square,
    "copy": lambda a: np.array(a, order="C"),
    "sin": quietly(np.sin),
    "cos": quietly(np.cos),
    "log1p": quietly(np.log1p),
    "expm1": quietly(np.expm1),
    "erf": _erf,
    "floor": np.floor,
    "round": np.round,  # halves to even, as PyTorch
}

_ZIP: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": quietly(np.true_divide),
    "pow": quietly(np.power),
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


# (speed: the numbers lifted so far, each a read-only 0-d array: x * 0.5 looks its 0.5 up here
# instead of making an array, ~0.2 us of each such op. The key has the type, so 1, 1.0 and
# True differ; zeros are keyed by their spelling, since -0.0 == 0.0; NaN is never kept.)
_SCALARS: dict[tuple[type, Any, np.dtype | None], np.ndarray] = {}
_SCALARS_KEPT = 512  # then the table starts again, so that no loop over numbers grows it


class NumpyBackend(FusedKernels):
    """Storage is a ``numpy.ndarray``; every primitive is a numpy call. The fused kernels
    (:mod:`torchlight.backends.fused`) are overridden by :mod:`~torchlight.backends.numpy.kernels`,
    which says what each buys."""

    name = "numpy"

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array)

    def scalar(self, value: int | float | bool, dtype: np.dtype | None) -> np.ndarray:
        key = (type(value), value if value else repr(value), dtype)
        try:
            return _SCALARS[key]  # (speed: see _SCALARS)
        except KeyError:
            array = np.asarray(value, dtype)
            array.flags.writeable = False  # shared by every tensor lifting this number
            if value == value:
                if len(_SCALARS) >= _SCALARS_KEPT:
                    _SCALARS.clear()
                _SCALARS[key] = array
            return array

    def to_numpy(self, a: np.ndarray) -> np.ndarray:
        return a

    def strides(self, a: np.ndarray) -> tuple[int, ...]:
        return tuple(s // a.itemsize for s in a.strides)

    def map(self, op: str, a: np.ndarray) -> np.ndarray:
        return _array(_MAP[op](a))

    def zip(
        self, op: str, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        if out is not None:
            return _ZIP[op](a, b, out=out)
        result = _ZIP[op](a, b)  # (speed: _array's test written out, no call on every op's path)
        return result if type(result) is np.ndarray else np.asarray(result)

    def reduce(self, op: str, a: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        return _array(_REDUCE[op](a, axis=dims, keepdims=keepdim))

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
        elif not kernels.add_rows(out, index, values):  # (rows picked many times: by sorting)
            np.add.at(out, index, values)  # integer arrays may repeat: add each occurrence
        return out

    def setitem(self, a: np.ndarray, index: Index, values: Any) -> None:
        a[index] = values

    def cat(self, parts: Sequence[np.ndarray], dim: int) -> np.ndarray:
        return np.concatenate(parts, axis=dim)

    def where(self, condition: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(condition, a, b)

    def argreduce(self, op: str, a: np.ndarray, dim: int | None, keepdim: bool) -> np.ndarray:
        if dim is not None and (index := kernels.argmax_across(op, a, dim, keepdim)) is not None:
            return index  # (a short axis that is not the contiguous one: by whole-array passes)
        fn = np.argmax if op == "max" else np.argmin
        return np.asarray(fn(a, axis=dim, keepdims=keepdim)).astype(np.int64)

    # fused kernels, overridden (numpy/kernels.py: what each buys, measured)
    linear = staticmethod(kernels.linear)
    log_softmax = staticmethod(kernels.log_softmax)
    gelu = staticmethod(kernels.gelu)
    gelu_backward = staticmethod(kernels.gelu_backward)
    cross_entropy_backward = staticmethod(kernels.cross_entropy_backward)
    layer_norm_backward = staticmethod(kernels.layer_norm_backward)
    lstm_forward = staticmethod(kernels.lstm_forward)
    lstm_backward = staticmethod(kernels.lstm_backward)
