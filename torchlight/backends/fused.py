r"""Fused kernels: an optional extension of the backend protocol, for speed only.

The protocol (:mod:`torchlight.backends.base`) lists the primitives. A few ops are also asked
of a backend as one call where the primitives would take several:

- ``linear(x, weight, bias)`` and ``log_softmax(a, dim)``: :class:`FusedKernels` defines each
  as the composition of the primitives, and that is what a backend runs unless it overrides it
  (numpy and Numba do, in their kernels files). ``Tensor._linear`` and ``Tensor._log_softmax``
  call them; the Functions that use them (``ops.linear``, ``ops.losses``) keep the math.
- ``lstm_forward`` and ``lstm_backward`` (:class:`LSTMOverride`): a whole LSTM layer in one
  call. Here the default is not a composition in this file but the readable recurrence itself,
  ``ops.recurrent.Recurrence`` with an ``LSTMStep``: ``ops.recurrent.lstm`` runs it on every
  backend that has no override, and the backend's override (``ops.recurrent.FusedLSTM``)
  where it has one. ``tests/test_recurrent.py`` checks each override equal to the recurrence.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["FusedKernels", "LSTMOverride"]


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
