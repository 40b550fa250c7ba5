r"""The Numba backend's LSTM kernels: one compiled loop for each step's gates, forward and back.

The Numba backend's override of the readable LSTM recurrence (``ops.recurrent.Recurrence``
with an ``LSTMStep`` has the math) runs per
step one thin matmul, which numpy's BLAS does well, and an update of the four gates of
$(N, H)$ arrays, which numpy does in 15-25 passes over memory, one ufunc each. Here each
step's update is one pass: :func:`lstm_cell_forward` reads the matmul's result and the
projected input and writes the gates, $c_t$, $\tanh c_t$ and $h_t$;
:func:`lstm_cell_backward` writes $\partial L/\partial z_t$ and $\partial L/\partial c_{t-1}$.
The loops between them, and the matmuls, stay in :class:`NumbaBackend`.

float32 only: its $e^x$ (:func:`~torchlight.backends.numba.expf.exp_float32`) is written so
that LLVM vectorizes it; for float64 Numba would call the C library's scalar ``exp`` per
element, slower than numpy's passes, so float64 layers take the numpy backend's kernels.

- $\sigma(x) = 1 / (1 + e^{-x})$: where $e^{-x}$ overflows to ``inf`` the result is 0.
- $\tanh x$, as Cephes' ``tanhf`` computes it: for $|x| < 0.625$ an odd polynomial
  $x + x^3 P(x^2)$ (its coefficients are Cephes'), since $1 - 2/(e^{2x} + 1)$ would cancel
  there; otherwise $\operatorname{sign}(x)\,(1 - 2/(e^{2|x|} + 1))$, which is $\pm 1$ once
  $e^{2|x|}$ overflows. Both branches are computed and one selected, so the loop stays
  vectorized. Within 2 ulp of float64 ``tanh`` rounded to float32 (``tests/test_backend_numba.py``).

The kernels run their rows in parallel (``prange``), like the backend's other kernels; written
as a plain ``range`` loop LLVM would not vectorize them (it cannot rule out that the output
arrays overlap the inputs). They are cached on disk like the others, and the cache tracks this
file only: after editing ``numba/expf.py``, delete
``torchlight/backends/__pycache__/numba_lstm*.nb*``.

Example:
    >>> from torchlight.backends.numba.lstm import tanh_float32_kernel
    >>> import numpy as np
    >>> x = np.array([-100.0, -1.0, 0.0, 1e-3, 1.0, 100.0], dtype=np.float32)
    >>> out = np.empty_like(x)
    >>> tanh_float32_kernel(out, x)
    >>> bool(np.all(np.abs(out - np.tanh(x)) <= 2 * np.spacing(np.abs(np.tanh(x)))))
    True
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from torchlight.backends.numba.expf import exp_float32
from torchlight.backends.numba.kernels import OPTIONS

# float32 constants: with a Python float (a float64) Numba would compute in float64.
ONE, TWO = np.float32(1.0), np.float32(2.0)
TANH_SMALL = np.float32(0.625)  # below it, the polynomial
T1, T2, T3, T4, T5 = (  # Cephes tanhf: tanh x = x + x^3 (T5 + T4 x^2 + ... + T1 x^8)
    np.float32(-5.70498872745e-3),
    np.float32(2.06390887954e-2),
    np.float32(-5.37397155531e-2),
    np.float32(1.33314422036e-1),
    np.float32(-3.33332819422e-1),
)


@njit(inline="always")
def sigmoid_float32(x):  # pragma: no cover - compiled by numba
    r"""$1 / (1 + e^{-x})$ for a float32 $x$."""
    return ONE / (ONE + exp_float32(-x))


@njit(inline="always")
def tanh_float32(x):  # pragma: no cover - compiled by numba
    r"""$\tanh x$ for a float32 $x$; see the module docstring."""
    a = abs(x)
    z = x * x
    small = ((((T1 * z + T2) * z + T3) * z + T4) * z + T5) * z * x + x
    small = small if x != 0 else x  # -0.0 stays -0.0 (the sum above gives +0.0)
    large = ONE - TWO / (exp_float32(a + a) + ONE)
    large = large if x >= 0 else -large
    return small if a < TANH_SMALL else large


@njit(**OPTIONS)
def tanh_float32_kernel(out, a):  # pragma: no cover - compiled by numba
    """``out[i] = tanh(a[i])`` for contiguous 1-D float32 arrays (for tests and the example)."""
    for i in prange(out.size):
        out[i] = tanh_float32(a[i])


@njit(**OPTIONS)
def lstm_cell_forward(hh, xp, bias, c_prev, gates, c, tanh_c, h):  # pragma: no cover
    r"""One step: $z = hh + xp + b$ $(N, 4H)$; ``gates`` = $[\sigma(z_i), \sigma(z_f),
    \tanh(z_g), \sigma(z_o)]$; $c = f c_{prev} + i g$, ``tanh_c`` = $\tanh c$, $h = o \tanh c$.
    ``bias`` is $(4H)$ (zeros for a layer without ``b_hh``); all arrays float32, C-contiguous."""
    size = c.shape[1]
    for n in prange(c.shape[0]):
        for j in range(size):
            i = sigmoid_float32(hh[n, j] + xp[n, j] + bias[j])
            f = sigmoid_float32(hh[n, size + j] + xp[n, size + j] + bias[size + j])
            g = tanh_float32(hh[n, 2 * size + j] + xp[n, 2 * size + j] + bias[2 * size + j])
            o = sigmoid_float32(hh[n, 3 * size + j] + xp[n, 3 * size + j] + bias[3 * size + j])
            c_t = f * c_prev[n, j] + i * g
            t = tanh_float32(c_t)
            gates[n, j], gates[n, size + j], gates[n, 2 * size + j], gates[n, 3 * size + j] = (
                i,
                f,
                g,
                o,
            )
            c[n, j], tanh_c[n, j], h[n, j] = c_t, t, o * t


@njit(**OPTIONS)
def lstm_cell_backward(
    gates, c_prev, tanh_c, grad_h, grad_c, grad_z, grad_c_prev
):  # pragma: no cover
    r"""One step back: $\delta_c = G_c + G_h\, o (1 - \tanh^2 c)$; ``grad_z`` $(N, 4H)$ =
    $[\delta_c g\, i(1-i),\ \delta_c c_{prev} f(1-f),\ \delta_c i (1-g^2),\ G_h \tanh(c)\,
    o(1-o)]$; ``grad_c_prev`` = $\delta_c f$ (which may be ``grad_c`` itself)."""
    size = tanh_c.shape[1]
    for n in prange(tanh_c.shape[0]):
        for j in range(size):
            i, f = gates[n, j], gates[n, size + j]
            g, o = gates[n, 2 * size + j], gates[n, 3 * size + j]
            t, g_h = tanh_c[n, j], grad_h[n, j]
            delta_c = grad_c[n, j] + g_h * o * (ONE - t * t)
            grad_z[n, j] = delta_c * g * i * (ONE - i)
            grad_z[n, size + j] = delta_c * c_prev[n, j] * f * (ONE - f)
            grad_z[n, 2 * size + j] = delta_c * i * (ONE - g * g)
            grad_z[n, 3 * size + j] = g_h * t * o * (ONE - o)
            grad_c_prev[n, j] = delta_c * f
