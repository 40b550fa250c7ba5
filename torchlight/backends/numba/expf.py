r"""$e^x$ for float32, written so that LLVM vectorizes it: the Numba backend's float32 ``exp``.

numpy computes float32 ``exp`` with SIMD instructions, several numbers at a time. Numba calls
the C library's scalar ``expf`` once per element (only an LLVM built with Intel's SVML could
vectorize that call, and ours is not), which made ``exp`` the one elementwise op where the
Numba backend lost to numpy. :func:`exp_float32` is ``exp`` written out as float32 arithmetic,
with no calls and no branches that LLVM cannot turn into selects, so the loop in
:func:`exp_float32_kernel` runs 8 lanes at a time (AVX2).

The math (the constants are those of Cephes' ``expf``), for a float32 $x$:

1. *Range reduction.* $e^x = 2^k e^r$ with $k = \mathrm{round}(x / \ln 2)$ and
   $r = x - k \ln 2$, so $|r| \le \ln 2 / 2$. We use $\ln 2 = \ln 2_{hi} + \ln 2_{lo}$
   (Cody and Waite): $\ln 2_{hi}$ has only 9 significant bits, so $k \ln 2_{hi}$ and
   $x - k \ln 2_{hi}$ are exact, and $r$ keeps the low bits that one rounded product would lose.
2. *Polynomial.* $e^r \approx 1 + r + c_2 r^2 + \dots + c_7 r^7$. The $c_n$ are close to the
   Taylor coefficients $1/n!$, nudged (minimax) to spread the error evenly over
   $|r| \le \ln 2 / 2$, where it stays below float32's rounding.
3. *Scaling.* A float32 whose exponent field is $e$ and whose mantissa is 0 is $2^{e - 127}$:
   its bits are the integer $e \cdot 2^{23}$ (:func:`power_of_two`). Such a number is normal
   for $-126 \le e - 127 \le 127$, but $k$ runs from $-150$ to $128$, so we multiply by
   $2^{k_1}$ and then by $2^{k_2}$, with $k_1 = \lfloor k / 2 \rfloor$ and $k_2 = k - k_1$. The
   first product is exact; the second rounds once, to ``inf`` above the float32 range and to a
   subnormal number or 0 below it, as a correctly rounded $e^x$ would.
4. *Edges.* $x$ is first clamped to $[-104, 89]$: $e^{89}$ already overflows and $e^{-104}$
   rounds to 0, so $+\infty$ gives ``inf`` and $-\infty$ gives 0, and ``nan`` gives ``nan``.

Against numpy's float64 ``exp`` rounded to float32 the result is within 1 ulp for all $2^{32}$
float32 inputs, and equal for 99.6% of them (``tests/test_backend_numba.py`` checks a sample).
No ``fastmath``: without fused multiply-adds, every CPU gives the same bits.

Example:
    >>> from torchlight.backends.numba.expf import exp_float32_kernel
    >>> import numpy as np
    >>> x = np.array([0.0, 1.0, -100.0, 100.0, -np.inf, np.nan], dtype=np.float32)
    >>> out = np.empty_like(x)
    >>> exp_float32_kernel(out, x)
    >>> out
    array([1.0000000e+00, 2.7182817e+00, 3.7835059e-44,           inf,
           0.0000000e+00,           nan], dtype=float32)
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from torchlight.backends.numba.kernels import OPTIONS

# Float32 constants: with a Python float (a float64) numba would compute in float64.
LOG2E = np.float32(1.44269504088896341)  # 1 / ln 2
LN2_HI = np.float32(0.693359375)  # 355 / 512: ln 2 to 9 bits
LN2_LO = np.float32(-2.12194440e-4)  # ln 2 - LN2_HI
C2, C3, C4, C5, C6, C7 = (  # close to 1/2!, 1/3!, ..., 1/7!
    np.float32(5.0000001201e-1),
    np.float32(1.6666665459e-1),
    np.float32(4.1665795894e-2),
    np.float32(8.3334519073e-3),
    np.float32(1.3981999507e-3),
    np.float32(1.9875691500e-4),
)
X_MIN = np.float32(-104.0)  # e^-104 < 2^-150, half the smallest float32 > 0: rounds to 0
X_MAX = np.float32(89.0)  # e^89 > 3.4e38, the largest float32: overflows to inf
ONE, HALF = np.float32(1.0), np.float32(0.5)
EXPONENT_BIAS = np.float32(127.0)
EXPONENT_SHIFT = np.float32(2.0**23)  # the exponent field starts at bit 23


@intrinsic
def float32_from_bits(typingctx, bits):  # pragma: no cover - runs in numba's compiler
    """The float32 with the same 32 bits as the int32 ``bits`` (numpy: ``bits.view(float32)``).

    Called as ``float32_from_bits(bits)`` in compiled code; numba passes ``typingctx`` itself.
    """

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@njit(inline="always")
def power_of_two(n):  # pragma: no cover - compiled by numba
    r"""$2^n$ for a whole float32 $-126 \le n \le 127$: the float with exponent field $n + 127$.

    $(n + 127) \cdot 2^{23}$ is a whole number below $2^{31}$, exact in float32, so converting
    it to int32 gives the bits of $2^n$ (a zero mantissa and a zero sign bit).
    """
    bits = np.int32((n + EXPONENT_BIAS) * EXPONENT_SHIFT)
    return float32_from_bits(bits)  # type: ignore[call-arg]  # (numba adds typingctx)


@njit(inline="always")
def exp_float32(x):  # pragma: no cover - compiled by numba
    r"""$e^x$ for a float32 $x$, within 1 ulp; see the module docstring for the math."""
    if x != x:  # nan (the one value not equal to itself); LLVM makes this a select
        return x
    x = min(max(x, X_MIN), X_MAX)
    k = np.rint(x * LOG2E)  # the nearest whole number to x / ln 2, as a float32
    r = x - k * LN2_HI - k * LN2_LO  # |r| <= ln 2 / 2 (evaluated left to right)
    poly = ((((C7 * r + C6) * r + C5) * r + C4) * r + C3) * r + C2
    e_r = r * r * poly + r + ONE  # the small terms first, then the 1
    k1 = np.floor(k * HALF)
    return e_r * power_of_two(k1) * power_of_two(k - k1)


@njit(**OPTIONS)
def exp_float32_kernel(out, a):  # pragma: no cover - compiled by numba
    """``out[i] = e^a[i]`` for contiguous 1-D float32 arrays (the loop LLVM vectorizes)."""
    for i in prange(out.size):
        out[i] = exp_float32(a[i])
