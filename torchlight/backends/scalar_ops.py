r"""Every elementwise op as a plain Python function of numbers: the one definition all backends share.

The strided reference backend calls these functions directly, element by element. The Numba
backends compile the very same functions into their kernels: ``numba/backend.py`` and
``cuda/kernels.py`` wrap each one with ``numba.extending.register_jitable(inline="always")``,
which lets numba inline it into a parallel CPU loop or a GPU kernel. So there is exactly one
place that says what ``sigmoid`` or ``maximum`` means.

Plain Python and IEEE 754 disagree at the edges: Python raises ``ZeroDivisionError`` for
``1.0 / 0.0``, ``ValueError`` for ``math.log(0.0)`` and ``OverflowError`` for
``math.exp(1000.0)``, where numpy (and PyTorch) return ``inf``, ``-inf`` or ``nan``. Each
function below handles those cases explicitly, so the strided backend agrees with numpy and the
compiled versions (which follow IEEE 754 anyway) take the same branches.

Only ``math`` and arithmetic are used here: that is the subset numba compiles for both the CPU
and the GPU.

Example:
    >>> from torchlight.backends import scalar_ops
    >>> scalar_ops.MAP["sigmoid"](0.0), scalar_ops.ZIP["div"](1.0, 0.0)
    (0.5, inf)
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable
from typing import Any

import numpy as np

# ----------------------------------------------------------------------------- constants
# The functions name their constants (``ONE``, not ``1``). Here they are Python numbers, so the
# strided and Numba CPU backends compute exactly as if the numbers were written inline. The
# CUDA backend compiles its float32 kernels from float32 twins of the functions
# (:func:`float32_twin`: the same code, with the constants of ``FLOAT32_CONSTANTS``). Why: a
# Python float is a float64 to numba, so ``0.5 * x`` of a float32 ``x`` would be computed in
# float64, and a GPU does float64 arithmetic 2 to 64 times slower than float32. The small whole
# numbers are ints, which leave an int input's type alone (``relu`` of an int64 stays int64).
ZERO, ONE, TWO = 0, 1, 2
HALF = 0.5
INF, NAN = math.inf, math.nan
#: Beyond this, $e^x$ is larger than the largest float64 (about 1.8e308).
EXP_OVERFLOW = 709.782712893384
#: Every float64 of magnitude $2^{52}$ or more is an integer already.
ALL_INTEGERS = 4503599627370496.0
#: A whole number (a Python int from ``math.floor``) as a float of the function's type.
FLOAT = float

#: The same constants for float32 kernels: every float32 of magnitude $2^{23}$ or more is an
#: integer, and $e^{89}$ is past the float32 range (about 3.4e38) already.
FLOAT32_CONSTANTS: dict[str, Any] = {
    "ZERO": np.float32(0.0),
    "ONE": np.float32(1.0),
    "TWO": np.float32(2.0),
    "HALF": np.float32(0.5),
    "INF": np.float32(math.inf),
    "NAN": np.float32(math.nan),
    "EXP_OVERFLOW": np.float32(89.0),
    "ALL_INTEGERS": np.float32(2.0**23),
    "FLOAT": np.float32,
}


def float32_twin(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with the float32 constants: what the CUDA backend compiles into float32 kernels.

    A backend speed trick (see the constants above): a copy of the function whose global names
    ``ONE``, ``HALF``... are looked up in ``FLOAT32_CONSTANTS`` first. Its Python results are
    the same numbers, as float32 where a constant takes part:

    Example:
        >>> from torchlight.backends.scalar_ops import float32_twin, log, sigmoid
        >>> sigmoid(0.0), float32_twin(sigmoid)(0.0), float32_twin(log)(0.0)
        (0.5, np.float32(0.5), np.float32(-inf))
    """
    twin = types.FunctionType(
        fn.__code__, {**fn.__globals__, **FLOAT32_CONSTANTS}, fn.__name__, fn.__defaults__
    )
    twin.__doc__, twin.__qualname__ = fn.__doc__, fn.__qualname__
    return twin


# ----------------------------------------------------------------------------- one argument


def neg(x: Any) -> Any:
    r"""$-x$."""
    return -x


def abs_(x: Any) -> Any:
    r"""$|x|$."""
    return abs(x)


def exp(x: Any) -> Any:
    r"""$e^x$; ``inf`` past the float64 range (Python's ``math.exp`` would raise)."""
    if x > EXP_OVERFLOW:
        return INF
    return math.exp(x)


def log(x: Any) -> Any:
    r"""$\ln x$; $\ln 0 = -\infty$ and $\ln x = \mathrm{nan}$ for $x < 0$, as in numpy."""
    if x > ZERO:
        return math.log(x)
    if x == ZERO:
        return -INF
    return NAN  # x < 0, or x is nan


def sqrt(x: Any) -> Any:
    r"""$\sqrt{x}$; ``nan`` for $x < 0$."""
    if x >= ZERO:
        return math.sqrt(x)
    return NAN


def sigmoid(x: Any) -> Any:
    r"""$\sigma(x) = 1 / (1 + e^{-x})$, computed without overflow.

    For very negative $x$, $e^{-x}$ overflows; there we use the equal form $e^x / (1 + e^x)$,
    whose exponential is at most 1.
    """
    if x >= ZERO:
        return ONE / (ONE + math.exp(-x))
    e = math.exp(x)
    return e / (ONE + e)


def relu(x: Any) -> Any:
    r"""$\max(x, 0)$; ``nan`` stays ``nan`` (numpy's ``maximum`` propagates it)."""
    if x > ZERO or x != x:
        return x
    return ZERO  # the backend stores it in x's type (0.0 for floats)


def tanh(x: Any) -> Any:
    r"""$\tanh x$."""
    return math.tanh(x)


def sign(x: Any) -> Any:
    r"""$-1$, $0$ or $1$ (``nan`` for ``nan``)."""
    if x > ZERO:
        return ONE
    if x < ZERO:
        return -ONE
    if x == ZERO:
        return ZERO
    return x  # nan


def reciprocal(x: Any) -> Any:
    r"""$1 / x$; $1 / \pm 0 = \pm\infty$."""
    if x == ZERO:
        return math.copysign(INF, x)
    return ONE / x


def square(x: Any) -> Any:
    r"""$x^2$."""
    return x * x


def copy(x: Any) -> Any:
    r"""$x$ (the backend writes it into fresh storage)."""
    return x


def sin(x: Any) -> Any:
    r"""$\sin x$; ``nan`` for $\pm\infty$ (where Python's ``math.sin`` raises)."""
    if math.isinf(x):
        return NAN
    return math.sin(x)


def cos(x: Any) -> Any:
    r"""$\cos x$; ``nan`` for $\pm\infty$ (where Python's ``math.cos`` raises)."""
    if math.isinf(x):
        return NAN
    return math.cos(x)


def log1p(x: Any) -> Any:
    r"""$\ln(1 + x)$, without the rounding error of forming $1 + x$ first; as :func:`log` at
    and below $x = -1$."""
    if x > -ONE:
        return math.log1p(x)
    if x == -ONE:
        return -INF
    return NAN


def expm1(x: Any) -> Any:
    r"""$e^x - 1$, accurate for small $x$ (where $e^x$ rounds to 1); ``inf`` past the range."""
    if x > EXP_OVERFLOW:
        return INF
    return math.expm1(x)


def erf(x: Any) -> Any:
    r"""$\mathrm{erf}(x) = \frac{2}{\sqrt\pi}\int_0^x e^{-t^2}\,dt$."""
    return math.erf(x)


def floor(x: Any) -> Any:
    r"""$\lfloor x \rfloor$; ``inf``, ``nan`` and huge values come back as they are (where
    ``math.floor`` would raise, or overflow int64 in a compiled kernel)."""
    if math.isinf(x) or math.isnan(x) or abs(x) >= ALL_INTEGERS:
        return x
    return FLOAT(math.floor(x))


def round_(x: Any) -> Any:
    r"""$x$ rounded to the nearest integer, halves to the even neighbour (as numpy and PyTorch:
    ``round(0.5) = 0``, ``round(1.5) = 2``, ``round(-2.5) = -2``)."""
    if math.isinf(x) or math.isnan(x) or abs(x) >= ALL_INTEGERS:
        return x
    below = FLOAT(math.floor(x))
    rest = x - below  # exact, in [0, 1)
    if rest > HALF or (rest == HALF and below % TWO != ZERO):
        return below + ONE
    return below


# ----------------------------------------------------------------------------- two arguments


def add(a: Any, b: Any) -> Any:
    r"""$a + b$."""
    return a + b


def sub(a: Any, b: Any) -> Any:
    r"""$a - b$."""
    return a - b


def mul(a: Any, b: Any) -> Any:
    r"""$a b$."""
    return a * b


def div(a: Any, b: Any) -> Any:
    r"""$a / b$; division by zero gives $\pm\infty$ (or ``nan`` for $0/0$), as IEEE 754 says."""
    if b == ZERO:
        if a == ZERO or a != a:
            return NAN
        return math.copysign(INF, a) * math.copysign(ONE, b)
    return a / b


def pow_(a: Any, b: Any) -> Any:
    r"""$a^b$, with numpy's answers where Python would raise.

    - $0^b$ for $b < 0$ is $\infty$;
    - a negative base with a non-integer exponent is ``nan`` (the result is not real);
    - results beyond the float64 range are $\pm\infty$.
    """
    if a == ZERO and b < ZERO:
        return INF
    if a < ZERO and b % ONE != ZERO:  # not a whole number (Python's % of floats is exact)
        return NAN
    if a != ZERO and b * math.log(abs(a)) > EXP_OVERFLOW:
        if a < ZERO and b % TWO != ZERO:
            return -INF  # a negative base to an odd power stays negative
        return INF
    return a**b


def maximum(a: Any, b: Any) -> Any:
    r"""$\max(a, b)$; a ``nan`` in either wins, as in numpy (Python's ``max`` would not)."""
    if a != a:
        return a
    if b != b:
        return b
    if a >= b:
        return a
    return b


def minimum(a: Any, b: Any) -> Any:
    r"""$\min(a, b)$; a ``nan`` in either wins."""
    if a != a:
        return a
    if b != b:
        return b
    if a <= b:
        return a
    return b


def eq(a: Any, b: Any) -> bool:
    return a == b


def ne(a: Any, b: Any) -> bool:
    return a != b


def lt(a: Any, b: Any) -> bool:
    return a < b


def le(a: Any, b: Any) -> bool:
    return a <= b


def gt(a: Any, b: Any) -> bool:
    return a > b


def ge(a: Any, b: Any) -> bool:
    return a >= b


# ----------------------------------------------------------------------------- the tables

#: ``map`` op name -> scalar function of one argument (names from ``base.MAP_OPS``).
MAP: dict[str, Callable[[Any], Any]] = {
    "neg": neg,
    "abs": abs_,
    "exp": exp,
    "log": log,
    "sqrt": sqrt,
    "sigmoid": sigmoid,
    "relu": relu,
    "tanh": tanh,
    "sign": sign,
    "reciprocal": reciprocal,
    "square": square,
    "copy": copy,
    "sin": sin,
    "cos": cos,
    "log1p": log1p,
    "expm1": expm1,
    "erf": erf,
    "floor": floor,
    "round": round_,
}

#: ``zip`` op name -> scalar function of two arguments (names from ``base.ZIP_OPS``).
ZIP: dict[str, Callable[[Any, Any], Any]] = {
    "add": add,
    "sub": sub,
    "mul": mul,
    "div": div,
    "pow": pow_,
    "maximum": maximum,
    "minimum": minimum,
    "eq": eq,
    "ne": ne,
    "lt": lt,
    "le": le,
    "gt": gt,
    "ge": ge,
}

#: ``reduce`` op name -> how two partial results combine. ``sum`` starts from 0; ``max`` and
#: ``min`` start from the first element (so they need no identity such as $-\infty$, which
#: integers do not have).
REDUCE: dict[str, Callable[[Any, Any], Any]] = {
    "sum": add,
    "max": maximum,
    "min": minimum,
}


# ----------------------------------------------------------------------------- result types
# Which dtype an op returns follows numpy's rules (int / int is float64, comparisons are bool,
# the sum of bools is int64...). Rather than restate those rules, ask the numpy backend once
# per (op, dtypes) on a one-element array.


@functools.cache
def map_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """The dtype of ``map(op, a)`` for ``a`` of ``dtype``."""
    from torchlight.backends.numpy.backend import NumpyBackend

    return NumpyBackend().map(op, np.ones(1, dtype)).dtype


@functools.cache
def zip_dtype(op: str, a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype of ``zip(op, a, b)``."""
    from torchlight.backends.numpy.backend import NumpyBackend

    return NumpyBackend().zip(op, np.ones(1, a), np.ones(1, b)).dtype


@functools.cache
def reduce_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """The dtype of ``reduce(op, a, ...)`` (the sum of bools or int32s is int64)."""
    from torchlight.backends.numpy.backend import NumpyBackend

    return NumpyBackend().reduce(op, np.ones(1, dtype), (0,), False).dtype
