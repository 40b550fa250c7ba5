r"""Fused kernels: an optional extension of the backend protocol, for speed only.

The protocol (:mod:`torchlight.backends.base`) lists the primitives. A few ops are also asked
of a backend as one call where the primitives would take several:

- ``linear(x, weight, bias)`` and ``log_softmax(a, dim)``: :class:`FusedKernels` defines each
  as the composition of the primitives, and that is what a backend runs unless it overrides it
  (numpy and Numba do, in their kernels files). ``Tensor._linear`` and ``Tensor._log_softmax``
  call them; the Functions that use them (``ops.linear``, ``ops.losses``) keep the math.
- ``gelu(x)``: the tanh GELU, which ``ops.activations.GELUFunction`` runs through
  ``Tensor._fused``. Written as tensor math it is eight ops, each making a new array (for a
  transformer, the size of its largest activations); numpy's override makes one
  (``backends/numpy/kernels.py``). Like every kernel ``Tensor._fused`` calls, it returns a
  tuple of storages.
- ``gelu_backward``, ``layer_norm_backward`` and ``cross_entropy_backward``
  (:class:`GradientOverrides`): three first derivatives in one call each. As for the LSTM
  below, their default is not a composition here but the readable tensor math itself, in the
  Functions' ``backward`` (``ops.activations.GELUFunction``, ``ops.normalization.
  LayerNormFunction``, ``ops.losses.CrossEntropy``), which runs on every backend without an
  override; where a backend has one (numpy, and Numba, which inherits numpy's), backward runs
  a Function whose forward is the kernel and whose backward is the second derivative in
  tensor math (``GELUBackward``, ``LayerNormBackward``, ``CrossEntropyBackward``), so
  ``create_graph`` and double backward still work. ``tests/test_fused_gradients.py`` checks
  each override equal to the readable derivative, first and second.
- ``lstm_forward`` and ``lstm_backward`` (:class:`LSTMOverride`): a whole LSTM layer in one
  call. Here the default is not a composition in this file but the readable recurrence itself,
  ``ops.recurrent.Recurrence`` with an ``LSTMStep``: ``ops.recurrent.lstm`` runs it on every
  backend that has no override, and the backend's override (``ops.recurrent.FusedLSTM``)
  where it has one. ``tests/test_recurrent.py`` checks each override equal to the recurrence.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

__all__ = [
    "GELU_A",
    "GELU_C",
    "FusedKernels",
    "GradientOverrides",
    "LSTMOverride",
    "normalized_dims",
]

GELU_C = math.sqrt(2.0 / math.pi)  # the tanh GELU's constants: t = tanh(c (x + a x^3))
GELU_A = 0.044715


class FusedKernels:
    """The fused kernels as compositions of the protocol's primitives: a backend inherits this
    class and runs them unchanged, or overrides one with a single kernel computing the same."""

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

    def gelu(self: Any, x: Any) -> tuple[Any]:
        r"""$(\tfrac{x}{2}(1 + t),)$ with $t = \tanh(c\,(x + a x^3))$, $c = \sqrt{2/\pi}$,
        $a = 0.044715$: ``zip`` and ``map("tanh")`` over a float ``x``."""
        mul, add, c = _ops(self, x)
        t = self.map("tanh", mul(c(GELU_C), add(x, mul(c(GELU_A), mul(x, mul(x, x))))))
        return (mul(mul(c(0.5), x), add(c(1.0), t)),)


def _ops(backend: Any, like: Any) -> tuple[Any, Any, Any]:
    """``mul(a, b)``, ``add(a, b)`` and ``c(number)`` (a 0-d constant of ``like``'s dtype) on
    ``backend``: the compositions above read as the formulas they compute."""

    def mul(a: Any, b: Any) -> Any:
        return backend.zip("mul", a, b)

    def add(a: Any, b: Any) -> Any:
        return backend.zip("add", a, b)

    def c(value: float) -> Any:
        return backend.from_numpy(np.asarray(value, dtype=like.dtype))

    return mul, add, c


def normalized_dims(shape: tuple[int, ...], kept: tuple[int, ...]) -> tuple[int, ...]:
    """The dimensions a keepdim statistic of ``kept`` shape was reduced over, of an input of
    ``shape``: those where it has size 1 and the input does not."""
    return tuple(d for d, (n, k) in enumerate(zip(shape, kept, strict=True)) if k == 1 != n)


class GradientOverrides(Protocol):
    r"""A backend's overrides of three readable first derivatives (each Function's ``backward``
    in ``ops/`` has the math), each returning a tuple of one storage.

    Shape: ``gelu_backward``'s and ``layer_norm_backward``'s ``x`` and ``grad`` any (the same
    shape; ``mean`` and ``rstd`` kept dimensions, ``weight`` the normalized dimensions' shape
    or None); ``cross_entropy_backward``'s ``log_probs`` $(N, C)$, ``labels`` a host integer
    array $(N,)$, ``grad`` $(N,)$ for ``"none"`` and 0-d otherwise.
    """

    def gelu_backward(self, x: Any, grad: Any) -> tuple[Any]:
        r"""$(G\,\mathrm{GELU}'(x),)$, as ``ops.activations.GELUFunction.backward``."""
        ...

    def layer_norm_backward(
        self, x: Any, mean: Any, rstd: Any, weight: Any | None, grad: Any
    ) -> tuple[Any]:
        r"""$(r\,(g - \langle g\rangle - \hat x \langle g \hat x\rangle),)$ from forward's
        $\mu$ (``mean``) and $r$ (``rstd``), as ``ops.normalization.LayerNormFunction.backward``;
        the normalized dimensions are those where ``mean`` has size 1 and ``x`` does not
        (:func:`normalized_dims`)."""
        ...

    def cross_entropy_backward(
        self, log_probs: Any, grad: Any, labels: np.ndarray, reduction: str
    ) -> tuple[Any]:
        r"""$(c\,(\mathrm{softmax}(x) - \mathrm{onehot}(y)),)$ from forward's ``log_probs``
        $\log \mathrm{softmax}(x)$, $c$ the loss's gradient per row ($G/N$ for ``"mean"``),
        as ``ops.losses.CrossEntropy.backward``."""
        ...


class LSTMOverride(Protocol):
    r"""A backend's override of the readable LSTM recurrence (``ops.recurrent.Recurrence`` with
    an ``LSTMStep``, whose docstrings have the math), for one layer in one direction.

    Shape: ``xp`` $(L, N, 4H)$ (the projected inputs), ``w_hh`` $(4H, H)$, ``b_hh`` $(4H)$ or
    None, ``h0`` and ``c0`` $(N, H)$.
    """

    def lstm_forward(
        self, xp: Any, w_hh: Any, b_hh: Any | None, h0: Any, c0: Any
    ) -> tuple[Any, Any, Any]:
        """``(out, gates, tanh_c)``: ``out`` $(2, L, N, H)$ is what the recurrence returns
        (``out[0, t]`` is $h_{t+1}$, ``out[1, t]`` is $c_{t+1}$); ``gates`` $(L, N, 4H)$ (the
        activated $i, f, g, o$) and ``tanh_c`` $(L, N, H)$ are kept for ``lstm_backward``."""
        ...

    def lstm_backward(
        self, w_hh: Any, h0: Any, c0: Any, out: Any, gates: Any, tanh_c: Any, grad_out: Any
    ) -> tuple[Any, Any, Any, Any, Any]:
        """Backpropagation through time from ``grad_out`` $(2, L, N, H)$: ``(grad_xp, grad_w_hh,
        grad_b_hh, grad_h0, grad_c0)``."""
        ...
