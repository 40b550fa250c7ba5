r"""Every elementwise op as a plain Python function of numbers: the one definition all backends share.

The strided reference backend calls these functions directly, element by element. The Numba
backends compile the very same functions into their kernels: ``numba_backend.py`` and
``cuda_kernels.py`` wrap each one with ``numba.extending.register_jitable(inline="always")``,
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
from collections.abc import Callable
from typing import Any

import numpy as np

# Beyond this, e^x is larger than the largest float64 (about 1.8e308).
_EXP_OVERFLOW = 709.782712893384

# ----------------------------------------------------------------------------- one argument


def neg(x: Any) -> Any:
    r"""$-x$."""
    return -x


def abs_(x: Any) -> Any:
    r"""$|x|$."""
    return abs(x)


def exp(x: Any) -> Any:
    r"""$e^x$; ``inf`` past the float64 range (Python's ``math.exp`` would raise)."""
    if x > _EXP_OVERFLOW:
        return math.inf
    return math.exp(x)


def log(x: Any) -> Any:
    r"""$\ln x$; $\ln 0 = -\infty$ and $\ln x = \mathrm{nan}$ for $x < 0$, as in numpy."""
    if x > 0:
        return math.log(x)
    if x == 0:
        return -math.inf
    return math.nan  # x < 0, or x is nan


def sqrt(x: Any) -> Any:
    r"""$\sqrt{x}$; ``nan`` for $x < 0$."""
    if x >= 0:
        return math.sqrt(x)
    return math.nan


def sigmoid(x: Any) -> Any:
    r"""$\sigma(x) = 1 / (1 + e^{-x})$, computed without overflow.

    For very negative $x$, $e^{-x}$ overflows; there we use the equal form $e^x / (1 + e^x)$,
    whose exponential is at most 1.
    """
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def relu(x: Any) -> Any:
    r"""$\max(x, 0)$; ``nan`` stays ``nan`` (numpy's ``maximum`` propagates it)."""
    if x > 0 or x != x:
        return x
    return 0  # the backend stores it in x's type (0.0 for floats)


def tanh(x: Any) -> Any:
    r"""$\tanh x$."""
    return math.tanh(x)


def sign(x: Any) -> Any:
    r"""$-1$, $0$ or $1$ (``nan`` for ``nan``)."""
    if x > 0:
        return 1
    if x < 0:
        return -1
    if x == 0:
        return 0
    return x  # nan


def reciprocal(x: Any) -> Any:
    r"""$1 / x$; $1 / \pm 0 = \pm\infty$."""
    if x == 0:
        return math.copysign(math.inf, x)
    return 1.0 / x


def square(x: Any) -> Any:
    r"""$x^2$."""
    return x * x


def copy(x: Any) -> Any:
    r"""$x$ (the backend writes it into fresh storage)."""
    return x


def sin(x: Any) -> Any:
    r"""$\sin x$; ``nan`` for $\pm\infty$ (where Python's ``math.sin`` raises)."""
    if math.isinf(x):
        return math.nan
    return math.sin(x)


def cos(x: Any) -> Any:
    r"""$\cos x$; ``nan`` for $\pm\infty$ (where Python's ``math.cos`` raises)."""
    if math.isinf(x):
        return math.nan
    return math.cos(x)


def log1p(x: Any) -> Any:
    r"""$\ln(1 + x)$, without the rounding error of forming $1 + x$ first; as :func:`log` at
    and below $x = -1$."""
    if x > -1:
        return math.log1p(x)
    if x == -1:
        return -math.inf
    return math.nan


def expm1(x: Any) -> Any:
    r"""$e^x - 1$, accurate for small $x$ (where $e^x$ rounds to 1); ``inf`` past the range."""
    if x > _EXP_OVERFLOW:
        return math.inf
    return math.expm1(x)


def erf(x: Any) -> Any:
    r"""$\mathrm{erf}(x) = \frac{2}{\sqrt\pi}\int_0^x e^{-t^2}\,dt$."""
    return math.erf(x)


# Every float of magnitude 2^52 or more is an integer already.
_ALL_INTEGERS = 4503599627370496.0


def floor(x: Any) -> Any:
    r"""$\lfloor x \rfloor$; ``inf``, ``nan`` and huge values come back as they are (where
    ``math.floor`` would raise, or overflow int64 in a compiled kernel)."""
    if math.isinf(x) or math.isnan(x) or abs(x) >= _ALL_INTEGERS:
        return x
    return float(math.floor(x))


def round_(x: Any) -> Any:
    r"""$x$ rounded to the nearest integer, halves to the even neighbour (as numpy and PyTorch:
    ``round(0.5) = 0``, ``round(1.5) = 2``, ``round(-2.5) = -2``)."""
    if math.isinf(x) or math.isnan(x) or abs(x) >= _ALL_INTEGERS:
        return x
    below = float(math.floor(x))
    rest = x - below  # exact, in [0, 1)
    if rest > 0.5 or (rest == 0.5 and below % 2.0 != 0):
        return below + 1.0
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
    if b == 0:
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def pow_(a: Any, b: Any) -> Any:
    r"""$a^b$, with numpy's answers where Python would raise.

    - $0^b$ for $b < 0$ is $\infty$;
    - a negative base with a non-integer exponent is ``nan`` (the result is not real);
    - results beyond the float64 range are $\pm\infty$.
    """
    if a == 0 and b < 0:
        return math.inf
    if a < 0 and b != math.floor(b):
        return math.nan
    if a != 0 and b * math.log(abs(a)) > _EXP_OVERFLOW:
        if a < 0 and b % 2 != 0:
            return -math.inf  # a negative base to an odd power stays negative
        return math.inf
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
    from torchlight.backends.numpy_backend import NumpyBackend

    return NumpyBackend().map(op, np.ones(1, dtype)).dtype


@functools.cache
def zip_dtype(op: str, a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype of ``zip(op, a, b)``."""
    from torchlight.backends.numpy_backend import NumpyBackend

    return NumpyBackend().zip(op, np.ones(1, a), np.ones(1, b)).dtype


@functools.cache
def reduce_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """The dtype of ``reduce(op, a, ...)`` (the sum of bools or int32s is int64)."""
    from torchlight.backends.numpy_backend import NumpyBackend

    return NumpyBackend().reduce(op, np.ones(1, dtype), (0,), False).dtype
