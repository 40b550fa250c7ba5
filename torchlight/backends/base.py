"""The backend protocol: the few primitives every backend implements.

A backend owns tensor *storage* (for numpy, an ``ndarray``; for the strided reference, flat
storage + shape + strides) and knows how to run a handful of higher-order primitives on it:

- ``map(op, a)``: apply a one-argument scalar op to every element;
- ``zip(op, a, b, out=None)``: apply a two-argument scalar op elementwise, broadcasting ``a``
  and ``b`` (into ``out`` when given: how in-place ops such as ``p.sub_(g)`` avoid a temporary);
- ``reduce(op, a, dims, keepdim)``: fold the elements along ``dims`` with ``sum``/``max``/``min``;
- ``matmul(a, b)``: batched matrix product (the one op too important to leave to ``zip``+``reduce``);

plus *layout* operations that only rewrite shape, strides and offset (reshape, permute, expand,
indexing), and conversions to and from numpy. Every :class:`~torchlight.autograd.Function` is
written against these names only, so a model runs unchanged on any backend.

A few *fused kernels* (:class:`FusedKernels`: ``linear``, ``log_softmax``, and a whole LSTM
layer, ``lstm_forward`` and ``lstm_backward``) exist for speed only: each is defined here as a
composition of the primitives above, which is what every backend runs unless it overrides it
with one kernel (numpy and Numba do). They compute what the composition computes; a training
step of a small MLP makes about a third fewer Python calls, and an LSTM's step about 40 times
fewer.

Ops are named by strings (``"exp"``, ``"add"``...) rather than passed as Python functions, so a
compiled backend can look up a kernel compiled ahead of time for each name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: One-argument elementwise ops, ``map(op, a)``.
MAP_OPS = (
    "neg",  # -x
    "abs",  # |x|
    "exp",  # e^x
    "log",  # ln x
    "sqrt",  # sqrt(x)
    "sigmoid",  # 1 / (1 + e^-x), computed stably
    "relu",  # max(x, 0)
    "tanh",  # tanh x
    "sign",  # -1, 0 or 1
    "reciprocal",  # 1 / x
    "square",  # x * x
    "copy",  # x (a contiguous copy)
    "sin",  # sin x
    "cos",  # cos x
    "log1p",  # ln(1 + x), accurate for small x
    "expm1",  # e^x - 1, accurate for small x
    "erf",  # the error function 2/sqrt(pi) * integral of e^(-t^2) from 0 to x
    "floor",  # the largest integer <= x
    "round",  # the nearest integer, halves to even
)

#: Two-argument elementwise ops, ``zip(op, a, b)``; comparisons return bool storage.
ZIP_OPS = (
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
)

COMPARISON_OPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})

#: Reductions, ``reduce(op, a, dims, keepdim)``.
REDUCE_OPS = ("sum", "max", "min")

Index = tuple[Any, ...]
"""A normalized index: ints, slices, ``None``, ``Ellipsis`` and numpy int/bool arrays."""


@runtime_checkable
class Backend(Protocol):
    """What torchlight's tensors and Functions need from a backend.

    ``Storage`` below is whatever object the backend keeps a tensor's elements in.
    """

    name: str

    # conversions ---------------------------------------------------------------
    def from_numpy(self, array: np.ndarray) -> Any:
        """Storage holding a copy (or a view, if the backend can share) of ``array``."""
        ...

    def to_numpy(self, a: Any) -> np.ndarray:
        """The elements of ``a`` as a numpy array (on the host)."""
        ...

    def shape(self, a: Any) -> tuple[int, ...]: ...

    def strides(self, a: Any) -> tuple[int, ...]:
        """Strides in elements (not bytes), as PyTorch reports them."""
        ...

    def dtype(self, a: Any) -> np.dtype: ...

    # the higher-order primitives --------------------------------------------------
    def map(self, op: str, a: Any) -> Any: ...

    def zip(self, op: str, a: Any, b: Any, out: Any = None) -> Any:
        """The broadcast result in new storage, or written into ``out`` (which has the broadcast
        shape and the result's dtype, and may be ``a`` itself) and returned."""
        ...

    def reduce(self, op: str, a: Any, dims: tuple[int, ...], keepdim: bool) -> Any: ...

    def matmul(self, a: Any, b: Any) -> Any: ...

    # layout -------------------------------------------------------------------------
    def view(self, a: Any, shape: tuple[int, ...]) -> Any:
        """A view with a new shape, or ``None`` if the strides do not allow one."""
        ...

    def permute(self, a: Any, dims: tuple[int, ...]) -> Any: ...

    def expand(self, a: Any, shape: tuple[int, ...]) -> Any: ...

    def contiguous(self, a: Any) -> Any: ...

    def astype(self, a: Any, dtype: np.dtype) -> Any: ...

    # indexing and assembly ---------------------------------------------------
    def getitem(self, a: Any, index: Index) -> Any: ...

    def index_add(self, shape: tuple[int, ...], index: Index, values: Any) -> Any:
        """Zeros of ``shape`` with ``values`` added at ``index`` (repeated indices add up)."""
        ...

    def setitem(self, a: Any, index: Index, values: Any) -> None:
        """Write ``values`` into ``a[index]`` in place."""
        ...

    def cat(self, parts: Sequence[Any], dim: int) -> Any: ...

    def where(self, condition: Any, a: Any, b: Any) -> Any: ...

    def argreduce(self, op: str, a: Any, dim: int | None, keepdim: bool) -> Any:
        """Index of the ``"max"`` or ``"min"`` along ``dim`` (over all elements if None)."""
        ...

    # fused kernels (see FusedKernels) --------------------------------------------
    def linear(self, x: Any, weight: Any, bias: Any | None) -> Any:
        """``x @ weight.T + bias`` (``bias`` may be None)."""
        ...

    def log_softmax(self, a: Any, dim: int) -> Any:
        """``a - m - log(sum(exp(a - m)))`` along ``dim``, with ``m`` the max along ``dim``."""
        ...

    def lstm_forward(
        self, xp: Any, w_hh: Any, b_hh: Any | None, h0: Any, c0: Any
    ) -> tuple[Any, Any, Any]:
        """Every step of one LSTM layer: ``(out, gates, tanh_c)``; see FusedKernels."""
        ...

    def lstm_backward(
        self, w_hh: Any, h0: Any, c0: Any, out: Any, gates: Any, tanh_c: Any, grad_out: Any
    ) -> tuple[Any, Any, Any, Any, Any]:
        """Backpropagation through time of ``lstm_forward``; see FusedKernels."""
        ...


class FusedKernels:
    r"""Fused kernels, for speed only: one backend call where the Functions would make several.

    Each method here is the plain composition of the protocol's primitives, so a backend that
    inherits this class runs them unchanged; a backend may override one with a single kernel
    that computes the same thing (the numpy backend does). The Functions that call them
    (``LinearFunction``, ``LogSoftmaxFunction``, ``CrossEntropy``) say so, and their docstrings
    keep the math; their backward stays plain tensor math.
    """

    def linear(self: Any, x: Any, weight: Any, bias: Any | None) -> Any:
        r"""$y = x W^T + b$: ``matmul`` by the transposed (``permute``) weight, then ``zip("add")``."""
        out = self.matmul(x, self.permute(weight, (1, 0)))
        return out if bias is None else self.zip("add", out, bias)

    def log_softmax(self: Any, a: Any, dim: int) -> Any:
        r"""$\log \mathrm{softmax}(a) = a - m - \log \sum_j e^{a_j - m}$ along ``dim``, with
        $m = \max_j a_j$ subtracted first so $e^{a - m} \le 1$ cannot overflow."""
        shifted = self.zip("sub", a, self.reduce("max", a, (dim,), True))
        total = self.reduce("sum", self.map("exp", shifted), (dim,), True)
        return self.zip("sub", shifted, self.map("log", total))

    def lstm_forward(
        self: Any, xp: Any, w_hh: Any, b_hh: Any | None, h0: Any, c0: Any
    ) -> tuple[Any, Any, Any]:
        r"""All $L$ steps of one LSTM layer (``nn.recurrent.LSTMLayer``; the math of
        ``LSTMStep``): for $t = 1 \ldots L$, $z = xp_t + h_{t-1} W_{hh}^T + b_{hh}$, the gates
        $i, f, g, o = \sigma, \sigma, \tanh, \sigma$ of $z$'s four quarters,
        $c_t = f c_{t-1} + i g$ and $h_t = o \tanh c_t$.

        Shape: ``xp`` $(L, N, 4H)$, ``w_hh`` $(4H, H)$, ``b_hh`` $(4H)$ or None, ``h0`` and
        ``c0`` $(N, H)$. Returns ``out`` $(2, L, N, H)$ (``out[0, t]`` is $h_{t+1}$,
        ``out[1, t]`` is $c_{t+1}$), and what ``lstm_backward`` needs: ``gates`` $(L, N, 4H)$
        (the activated $i, f, g, o$) and ``tanh_c`` $(L, N, H)$.
        """
        size, w_t = self.shape(h0)[-1], self.permute(w_hh, (1, 0))
        h, c, hs, cs, gates, tanhs = h0, c0, [], [], [], []
        for t in range(self.shape(xp)[0]):
            z = self.zip("add", self.getitem(xp, (t,)), self.matmul(h, w_t))
            z = z if b_hh is None else self.zip("add", z, b_hh)
            i, f, g, o = (
                self.map(op, x) for op, x in zip(_LSTM_GATES, _quarters(self, z, size), strict=True)
            )
            c = self.zip("add", self.zip("mul", f, c), self.zip("mul", i, g))
            tanhs.append(self.map("tanh", c))
            h = self.zip("mul", o, tanhs[-1])
            hs.append(h)
            cs.append(c)
            gates.append(self.cat([i, f, g, o], 1))
        out = _stacked(self, [_stacked(self, hs), _stacked(self, cs)])
        return out, _stacked(self, gates), _stacked(self, tanhs)

    def lstm_backward(
        self: Any, w_hh: Any, h0: Any, c0: Any, out: Any, gates: Any, tanh_c: Any, grad_out: Any
    ) -> tuple[Any, Any, Any, Any, Any]:
        r"""Backpropagation through time of ``lstm_forward``, from ``grad_out`` $(2, L, N, H)$
        (the gradients of every $h_t$ and $c_t$): from the last step to the first, with
        $G_h, G_c$ what reaches $h_t, c_t$ (from ``grad_out`` and from step $t + 1$),
        $\delta_c = G_c + G_h\, o\,(1 - \tanh^2 c_t)$ and
        $\partial L/\partial z_t = [\delta_c g\, i(1-i),\ \delta_c c_{t-1} f(1-f),\
        \delta_c i (1 - g^2),\ G_h \tanh(c_t)\, o(1-o)]$; then $c_{t-1}$ gets $\delta_c f$ and
        $h_{t-1}$ gets $(\partial L/\partial z_t) W_{hh}$. Finally
        $\partial L/\partial W_{hh} = \sum_t (\partial L/\partial z_t)^T h_{t-1}$ (one matmul
        of the stacked steps) and $\partial L/\partial b_{hh} = \sum_t \partial L/\partial z_t$.

        Returns ``(grad_xp (L, N, 4H), grad_w_hh, grad_b_hh, grad_h0, grad_c0)``.
        """
        steps, batch, size = self.shape(out)[1:]
        one = self.from_numpy(np.ones((), self.dtype(gates)))

        def mul(*factors: Any) -> Any:
            product = factors[0]
            for factor in factors[1:]:
                product = self.zip("mul", product, factor)
            return product

        def one_minus(a: Any) -> Any:
            return self.zip("sub", one, a)

        grad_h, grad_c = (
            self.getitem(grad_out, (0, steps - 1)),
            self.getitem(grad_out, (1, steps - 1)),
        )
        grad_z = []
        for t in reversed(range(steps)):
            i, f, g, o = _quarters(self, self.getitem(gates, (t,)), size)
            c_prev, tc = c0 if t == 0 else self.getitem(out, (1, t - 1)), self.getitem(tanh_c, (t,))
            delta_c = self.zip("add", grad_c, mul(grad_h, o, one_minus(mul(tc, tc))))
            parts = [
                mul(delta_c, g, i, one_minus(i)),
                mul(delta_c, c_prev, f, one_minus(f)),
                mul(delta_c, i, one_minus(mul(g, g))),
                mul(grad_h, tc, o, one_minus(o)),
            ]
            grad_z.append(self.cat(parts, 1))
            grad_c, grad_h = mul(delta_c, f), self.matmul(grad_z[-1], w_hh)
            if t > 0:  # h_{t-1} and c_{t-1} are also outputs of the layer
                grad_h = self.zip("add", grad_h, self.getitem(grad_out, (0, t - 1)))
                grad_c = self.zip("add", grad_c, self.getitem(grad_out, (1, t - 1)))
        rows = self.cat(grad_z[::-1], 0)  # (L * N, 4H): step t's rows are t * N ... t * N + N - 1
        h_prev = self.cat([h0, *(self.getitem(out, (0, t)) for t in range(steps - 1))], 0)
        grad_w = self.matmul(self.permute(rows, (1, 0)), h_prev)  # all steps in one matmul
        grad_xp = self.view(rows, (steps, batch, 4 * size))
        return grad_xp, grad_w, self.reduce("sum", rows, (0,), False), grad_h, grad_c


#: The activation of each LSTM gate, in PyTorch's order: input, forget, cell candidate, output.
_LSTM_GATES = ("sigmoid", "sigmoid", "tanh", "sigmoid")


def _stacked(backend: Any, parts: list[Any]) -> Any:
    """The arrays ``parts`` (all one shape) stacked along a new first axis."""
    return backend.cat([backend.getitem(x, (None,)) for x in parts], 0)


def _quarters(backend: Any, z: Any, size: int) -> list[Any]:
    """The four gates' columns of ``z`` $(N, 4H)$, each $(N, H)$."""
    return [backend.getitem(z, (slice(None), slice(k * size, (k + 1) * size))) for k in range(4)]
