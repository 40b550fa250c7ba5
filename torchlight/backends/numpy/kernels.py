"""The numpy backend's speed tricks, each labelled with what it buys, measured with numpy 2.4
on this project's 2-core machine, under load (``benchmarks/bench_autograd.py`` and a timeit of
the kernel alone; ratios, not absolute times, are what carry over). The backend itself
(:mod:`torchlight.backends.numpy.backend`) keeps each primitive one or two lines.

- ``keep_freed_memory``: glibc's ``malloc`` told (``mallopt``) to keep freed blocks of up to
  32 MB for reuse, instead of handing each back to the kernel; the numpy backend calls it when
  it loads. Without it every array of a GPT's activation size (3 MB) is fresh memory from the
  kernel, whose first write faults once per 4 kB page: a training step of the tiny GPT of
  ``benchmarks/bench_seq.py`` took 12,200 page faults (50 MB of zeroed pages) and 90-106 ms;
  with it 10-50 faults and 70-81 ms (float32, one thread, best of 8, load ~2.5). The cost: a
  process keeps up to 64 MB of freed memory it may use again rather than returning it, and
  the setting is the whole process's (it is glibc's): ``TORCHLIGHT_KEEP_FREED_MEMORY=0``, or
  glibc's own ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_``, leave it untouched.
- ``quietly``: numpy's floating-point warnings off for one ufunc call, in a prepared context
  instead of ``np.errstate`` per call: log of a (64, 10) array 6.3 us against 12.4 us.
- ``linear``, ``log_softmax``: the fused kernels of :mod:`torchlight.backends.fused` in fewer
  numpy calls (the bias added in place, the shift and the log sum in one pass each).
- ``cross_entropy_backward``: the override of ``ops.losses.CrossEntropy``'s readable backward:
  the softmax (from forward's log-probabilities), the one-hot truth taken off and the scale in
  one array, where a composition of primitives makes four and the Function's math takes six
  tensor ops: ``F.cross_entropy`` forward + backward on (64, 10) logits 78 -> 61 us (cfb1522,
  whose backward reused forward's softmax by a grad-mode branch: 58 us); an MLP training step
  0.29 -> 0.27 ms.
- ``gelu``, ``gelu_backward``, ``layer_norm_backward``: the same formulas as GELU's forward
  (:mod:`torchlight.backends.fused`) and GELU's and layer norm's readable backward (``ops/``),
  with each ufunc writing into an array made once (``out=``) instead of a new one. A new array the size of a
  GPT's (32, 64, 384) activations costs more than the arithmetic on it: numpy asks the C
  allocator for it, which maps fresh pages from the kernel for blocks this large, and the first
  write to each 4 kB page faults. GELU's backward (best of 30, float32, (32, 64, 384)): 5.7-7.0
  ms as the composition (14 new arrays), 0.8-1.0 ms here (2); its forward 0.6-0.7 ms -> 0.5 ms.
- ``lstm_forward``, ``lstm_backward``: the backend override of the readable LSTM recurrence
  (``ops.recurrent.Recurrence`` with an ``LSTMStep``), every array allocated once per layer
  and the gates updated in place: a (35, 20, 200) layer forward + backward 149-203 ms against
  71-309 ms for the readable recurrence (noisy under load: no clear gain measured here).

- ``add_rows``: ``index_add`` of whole rows picked many times each (an embedding's backward over
  a small vocabulary) by sorting the picks and summing each run with one ``np.add.reduceat``:
  the GPT's 2048 token ids into 65 rows of 96 (float32) 0.18 ms against 1.22 ms for
  ``np.add.at``, 2048 ids into 100 rows of 64 0.17 against 0.81 ms. With few repeats sorting
  loses (2048 ids into 2048 rows: 2.0 against 0.9 ms; under 8192 numbers ``np.add.at``'s
  microseconds win), so it runs only where the picks are at least 4 times the rows.

- ``argmax_across``: ``argmax``/``argmin`` along a short axis (16 or fewer) that is not the
  array's contiguous one, by whole-array passes (the extreme, where it is, the first of
  them). ``np.argmax`` walks such an axis one strided row at a time: max pooling's windows,
  (16, 4, 4, 4, 64) float32 with the window axis outermost but one, 213 us against 33 us
  here; the CNN of ``benchmarks/bench_nn.py`` one step 1.53 -> 1.35-1.39 ms (float32). Where
  the axis is the contiguous one ``np.argmax`` is faster (the same windows laid out with the
  axis last: 169 against 979 us; 100,000 rows of 4: 5x), so it runs there, as it does for a
  long axis.
"""

from __future__ import annotations

import contextvars
import ctypes
import math
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from torchlight import threads
from torchlight.backends.fused import GELU_A, GELU_C, normalized_dims

__all__ = [
    "add_rows",
    "argmax_across",
    "cross_entropy_backward",
    "gelu",
    "gelu_backward",
    "keep_freed_memory",
    "layer_norm_backward",
    "linear",
    "log_softmax",
    "lstm_backward",
    "lstm_forward",
    "lstm_weight_gradients",
    "quietly",
]


def argmax_across(op: str, a: np.ndarray, dim: int, keepdim: bool) -> np.ndarray | None:
    """``np.argmax``/``np.argmin`` of ``a`` along ``dim`` (``op`` is ``"max"`` or ``"min"``)
    where ``dim`` is short (16 or fewer) and not ``a``'s contiguous axis; None, doing nothing,
    elsewhere.

    Marks where the extreme is (a NaN counts as the extreme, as in numpy), weighs position k
    by size - k, and the largest weight marks the first extreme.
    """
    dim = dim % a.ndim if a.ndim else dim
    if a.size < 1024 or not 1 < a.shape[dim] <= 16 or a.strides[dim] == a.itemsize:
        return None
    size = a.shape[dim]
    best = (np.maximum if op == "max" else np.minimum).reduce(a, axis=dim, keepdims=True)
    hit = a == best
    if a.dtype.kind == "f":
        hit |= np.isnan(a)
    weight = np.arange(size, 0, -1, dtype=np.int8).reshape(
        [size if d == dim else 1 for d in range(a.ndim)]
    )
    index = size - np.maximum.reduce(hit * weight, axis=dim, keepdims=True).astype(np.int64)
    return index if keepdim else index.squeeze(dim)


def add_rows(out: np.ndarray, index: tuple[Any, ...], values: np.ndarray) -> bool:
    """``np.add.at(out, index, values)`` where ``index`` (integer arrays) picks whole rows of
    ``out``, at least 4 picks a row and 8192 numbers in all; False, doing nothing, otherwise.

    The picks' positions are sorted (stably, so each position's rows keep their order) and
    each run of equal positions is summed by one ``np.add.reduceat``.
    """
    picks = [i for i in index if isinstance(i, np.ndarray) and i.dtype.kind in "iu"]
    if not picks or len(picks) != len(index) or len(index) >= out.ndim or values.size < 8192:
        return False
    arrays = np.broadcast_arrays(*picks)
    leading = out.shape[: len(arrays)]
    if arrays[0].size < 4 * math.prod(leading):
        return False  # few repeats: np.add.at is faster
    if any(a.min() < -n or a.max() >= n for a, n in zip(arrays, leading, strict=True)):
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


# glibc's <malloc.h> option numbers
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory(mmap_threshold: int = 32 << 20, trim_threshold: int = 64 << 20) -> bool:
    """Have glibc's ``malloc`` reuse freed blocks of up to ``mmap_threshold`` bytes and keep up
    to ``trim_threshold`` bytes of freed memory; True when it took the settings.

    numpy takes every array's memory from ``malloc``. glibc serves a block of
    ``M_MMAP_THRESHOLD`` bytes or more with its own ``mmap`` and unmaps it when freed. The
    threshold starts at 128 kB and follows the largest block freed so far, but a block of that
    very size is still mapped: a training step that makes and frees many arrays of one large
    shape gets fresh pages for each, and the kernel zeroes each 4 kB page on its first write (a
    page fault, slower than the arithmetic on it). ``M_TRIM_THRESHOLD`` is how much free memory
    at the top of the heap may stay before it too goes back. Done only with glibc on Linux,
    and not when the environment sets ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_``
    (glibc's own variables: a setting made there wins) or ``TORCHLIGHT_KEEP_FREED_MEMORY=0``
    (torchlight's opt-out: the allocator of a program that imports torchlight stays glibc's
    default).
    """
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    if os.environ.get("TORCHLIGHT_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(
        mallopt(_M_MMAP_THRESHOLD, mmap_threshold) and mallopt(_M_TRIM_THRESHOLD, trim_threshold)
    )


def quietly(ufunc: Callable[..., Any]) -> Callable[..., Any]:
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


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """``x @ weight.T + bias`` (the fused ``linear``), the bias added in place."""
    threads.for_matmul(x.shape, weight.shape[::-1])  # issue 26: as in matmul
    out = np.matmul(x, weight.T)
    if bias is not None:
        np.add(out, bias, out=out)  # in place: no second (rows, out_features) array
    return out


def _log_softmax(a: np.ndarray, dim: int) -> np.ndarray:
    shifted = a - np.maximum.reduce(a, axis=dim, keepdims=True)  # e^shifted <= 1: no overflow
    shifted -= np.log(np.add.reduce(np.exp(shifted), axis=dim, keepdims=True))
    return shifted


def log_softmax(a: np.ndarray, dim: int) -> np.ndarray:
    """``FusedKernels.log_softmax`` in three numpy passes (quietly: an inf among the inputs gives
    nan silently, as in PyTorch)."""
    return np.asarray(_quiet_log_softmax(a, dim))


_quiet_log_softmax = quietly(_log_softmax)


def _cross_entropy_backward(
    log_probs: np.ndarray, grad: np.ndarray, labels: np.ndarray, reduction: str
) -> tuple[np.ndarray]:
    out = np.exp(log_probs)  # the softmax, in the one new array
    out[np.arange(len(labels)), labels] -= 1  # minus the one-hot truth (one pick a row)
    if reduction == "none":
        out *= grad.reshape(-1, 1)
    else:
        out *= grad / len(labels) if reduction == "mean" else grad
    return (out,)


cross_entropy_backward = quietly(_cross_entropy_backward)
cross_entropy_backward.__doc__ = """``GradientOverrides.cross_entropy_backward`` in one new
array: the softmax, 1 taken off each row's picked class, then scaled, each in place."""


def _floating(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind == "f" else x.astype(np.float64)  # integers: as tanh would give


def gelu(x: np.ndarray) -> tuple[np.ndarray]:
    r"""``FusedKernels.gelu``, $\tfrac{x}{2}(1 + \tanh(x\,(c + ca x^2)))$, in one new array."""
    x = _floating(x)
    out = np.multiply(x, x, out=np.empty(x.shape, x.dtype))  # (an array even when 0-d)
    out *= GELU_C * GELU_A
    out += GELU_C
    out *= x  # u = c (x + a x^3)
    np.tanh(out, out=out)
    out += 1.0
    out *= x
    out *= 0.5
    return (out,)


def gelu_backward(x: np.ndarray, grad: np.ndarray) -> tuple[np.ndarray]:
    r"""``GradientOverrides.gelu_backward`` in two new arrays, the slope written as
    $\mathrm{GELU}'(x) = \tfrac12 (1 + t)(1 + x u' (1 - t))$, since $1 - t^2 = (1 + t)(1 - t)$
    (with $u' = c (1 + 3a x^2)$)."""
    x = _floating(x)
    slope = np.multiply(x, x, out=np.empty(x.shape, x.dtype))  # (an array even when 0-d)
    t = np.multiply(slope, GELU_C * GELU_A, out=np.empty(x.shape, x.dtype))
    t += GELU_C
    t *= x
    np.tanh(t, out=t)  # t = tanh(c (x + a x^3))
    slope *= 3 * GELU_C * GELU_A
    slope += GELU_C
    slope *= x  # x u'
    np.subtract(1.0, t, out=t)  # 1 - t
    slope *= t
    slope += 1.0
    np.subtract(2.0, t, out=t)  # 1 + t
    slope *= t
    slope *= 0.5
    slope *= grad
    return (slope,)


def layer_norm_backward(
    x: np.ndarray, mean: np.ndarray, rstd: np.ndarray, weight: np.ndarray | None, grad: np.ndarray
) -> tuple[np.ndarray]:
    r"""``GradientOverrides.layer_norm_backward``, $r\,(g - \langle g\rangle - \hat x \langle g
    \hat x\rangle)$, in three new arrays (as a composition of primitives: nine)."""
    dims = normalized_dims(x.shape, mean.shape)
    x_hat = np.subtract(x, mean)
    x_hat *= rstd
    g = grad if weight is None else np.multiply(grad, weight)
    out = np.multiply(g, x_hat)
    mean_gx = np.mean(out, axis=dims, keepdims=True)
    np.multiply(x_hat, mean_gx, out=out)
    np.subtract(g, out, out=out)
    out -= np.mean(g, axis=dims, keepdims=True)
    out *= rstd
    return (out,)


def _sigmoid_in_place(x: np.ndarray) -> None:
    """``x[...] = 1 / (1 + e^-x)`` in four passes: where ``e^-x`` overflows to inf the result is
    0, as it should be (the LSTM kernels' sigmoid; ``quietly``, so the overflow is silent)."""
    np.negative(x, out=x)
    np.exp(x, out=x)
    x += 1
    np.reciprocal(x, out=x)


_sigmoid_in_place = quietly(_sigmoid_in_place)


def _quarters(z: np.ndarray, size: int) -> list[np.ndarray]:
    """The four LSTM gates' columns of ``z`` (N, 4H), as views."""
    return [z[:, k * size : (k + 1) * size] for k in range(4)]


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


# The override of the readable LSTM recurrence (ops/recurrent.py has the math): the same
# steps, every array allocated once per layer, each step's gates updated in place with ufuncs'
# ``out=`` (the readable recurrence makes ~15 new (N, H) arrays a step).
def lstm_forward(
    xp: np.ndarray,
    w_hh: np.ndarray,
    b_hh: np.ndarray | None,
    h0: np.ndarray,
    c0: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A whole LSTM layer forward (the override of the readable recurrence): ``(h, c)`` of
    every step stacked as ``out``, plus the activated gates and ``tanh(c)`` that
    :func:`lstm_backward` reads; each step's gates updated in place in arrays made once."""
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
    w_hh: np.ndarray,
    h0: np.ndarray,
    c0: np.ndarray,
    out: np.ndarray,
    gates: np.ndarray,
    tanh_c: np.ndarray,
    grad_out: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Backpropagation through time for :func:`lstm_forward`'s layer: the gradients of the
    gate pre-activations, ``w_hh``, ``b_hh``, ``h0`` and ``c0``, in place where it can."""
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
