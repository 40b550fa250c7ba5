r"""Assertions for tests and homework: :func:`assert_close` (PyTorch's name and tolerances) and
:func:`assert_gradient_scales`, a check that no finite-difference gradient can pass.

>>> import torchlight as tl
>>> from torchlight.testing import assert_close
>>> assert_close(tl.tensor([1.0, 2.0]), [1.0, 2.0])
>>> assert_close(tl.tensor([1.0, 2.5]), [1.0, 2.0])  # doctest: +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
AssertionError: tl.tensor([1.0, 2.5]) is not close to [1.0, 2.0]: Tensor-likes are not close!
<BLANKLINE>
Mismatched elements: 1 / 2 (50.0%)
Greatest absolute difference: 0.5 at index (1,) (up to 1e-07 allowed)
Greatest relative difference: 0.25 at index (1,) (up to 1e-07 allowed)
At index (1,): expected 2, received 2.5
"""

from __future__ import annotations

import ast
import linecache
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from torchlight.creation import ones_like, tensor
from torchlight.tensor import Tensor

# A failed check raises in the function the test called, not in a helper: a traceback (in a
# notebook, IPython's) shows the test's line, that one ``raise`` and the message. Each also sets
# ``__tracebackhide__ = True``, by which pytest leaves out that frame too.

__all__ = ["FINITE_DIFFERENCES", "assert_close", "assert_exact", "assert_gradient_scales"]

# PyTorch's defaults for torch.testing.assert_close, by dtype: (rtol, atol)
_TOLERANCES = {
    np.dtype(np.float16): (1e-3, 1e-5),
    np.dtype(np.float32): (1.3e-6, 1e-5),
    np.dtype(np.float64): (1e-7, 1e-7),
}

FINITE_DIFFERENCES = (
    "These inputs are chosen against finite differences: there, a step h up to 1e-2 rounds "
    "back to x, overflows, or changes f by less than its rounding, so a numerically estimated "
    "gradient cannot pass. Derive the gradient with the chain rule."
)


def _array(value: Any) -> np.ndarray:
    if isinstance(value, Tensor):
        return np.asarray(value.detach().numpy())
    return np.asarray(value)


def assert_close(
    actual: Any,
    expected: Any,
    *,
    rtol: float | None = None,
    atol: float | np.ndarray | None = None,
    equal_nan: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    r"""Raise AssertionError unless $|a - e| \le \mathrm{atol} + \mathrm{rtol}\,|e|$ everywhere.

    As ``torch.testing.assert_close``: tensors, arrays, lists and numbers are compared by value
    with tolerances set by the dtype (float64: ``rtol=1e-7, atol=1e-7``; float32:
    ``1.3e-6, 1e-5``; exact for integers) unless both are given. The message names the number of
    mismatched elements, the greatest differences and where, and the expected and received values
    at the first mismatch. ``msg`` replaces it (a string) or rewrites it (a callable given the
    message). The message starts with the call's own arguments as written
    (``a.grad is not close to [4.0, 5.0]: ...``) where the source is known (a file, a notebook
    cell, a doctest), so a test with several checks says which value was wrong.

    Raises:
        AssertionError: the shapes differ, or some element is not close.
    """
    __tracebackhide__ = True  # (see the top of this file)
    mismatch = _mismatch(actual, expected, rtol, atol, equal_nan)
    if mismatch is not None:
        raise AssertionError(_worded(_named_by(_call_arguments(1)) + mismatch, msg))


def _worded(message: str, msg: str | Callable[[str], str] | None) -> str:
    """The message as ``msg`` asks: replaced by a string, rewritten by a callable."""
    if callable(msg):
        return msg(message)
    return message if msg is None else msg


def _named_by(arguments: list[str] | None) -> str:
    """``"a.grad is not close to [4.0, 5.0]: "`` from a call's arguments ('' if unknown)."""
    if not arguments or len(arguments) < 2:
        return ""
    return f"{arguments[0]} is not close to {arguments[1]}: "


def _call_arguments(depth: int) -> list[str] | None:
    """The source text of the positional arguments of the call being made ``depth`` frames
    above the caller of this function, or None when the source is unknown (a console).

    Python 3.11 records where in the source each instruction came from; the frame's current
    instruction is the call, so its position is the call's text, which is parsed for its
    arguments (what pytest's assertion messages and the ``executing`` package also do)."""
    frame = sys._getframe(depth + 1)
    try:
        positions = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    except (AttributeError, IndexError):  # Python < 3.11
        return None
    start, end, col, end_col = positions
    lines = linecache.getlines(frame.f_code.co_filename, frame.f_globals)
    if None in positions or not lines or end is None or end > len(lines):
        return None
    assert start is not None and col is not None and end_col is not None, positions
    chunk = [line.encode() for line in lines[start - 1 : end]]  # offsets count UTF-8 bytes
    chunk[-1] = chunk[-1][:end_col]
    chunk[0] = chunk[0][col:]
    try:
        call = ast.parse(b"".join(chunk).decode().strip(), mode="eval").body
    except (SyntaxError, UnicodeDecodeError):
        return None
    if not isinstance(call, ast.Call):
        return None
    text = b"".join(chunk).decode().strip()
    found = [ast.get_source_segment(text, arg) for arg in call.args]
    return [" ".join(s.split()) for s in found if s is not None]


def _mismatch(
    actual: Any,
    expected: Any,
    rtol: float | None,
    atol: float | np.ndarray | None,
    equal_nan: bool,
) -> str | None:
    """What differs between ``actual`` and ``expected`` (PyTorch's words), or None if close."""
    a, e = _array(actual), _array(expected)
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"assert_close: give both rtol and atol or neither, got rtol={rtol}, atol={atol}"
        )
    if rtol is None:
        kind = np.result_type(a.dtype, e.dtype) if a.dtype.kind == e.dtype.kind else a.dtype
        rtol, atol = _TOLERANCES.get(np.dtype(kind), (0.0, 0.0))
    assert atol is not None
    if a.shape != e.shape:
        return f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}."
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a64 - e64)
        bound = atol + rtol * np.abs(e64)
        close = diff <= bound
        both_inf = np.isinf(a64) & (a64 == e64)
        close |= both_inf
        if equal_nan:
            close |= np.isnan(a64) & np.isnan(e64)
    if close.all():
        return None
    bad = ~close
    n_bad, total = int(bad.sum()), a.size
    diff = np.where(both_inf, 0.0, diff)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = diff / np.abs(e64)
    diff, relative = (np.where(np.isnan(d), np.inf, d) for d in (diff, relative))  # NaN worst
    where_abs = _index(np.argmax(np.where(bad, diff, -1.0)) if a.ndim else 0, a.shape)
    where_rel = _index(np.argmax(np.where(bad, relative, -1.0)) if a.ndim else 0, a.shape)
    first = _index(int(np.argmax(bad.reshape(-1))), a.shape)
    atol_shown = float(np.broadcast_to(atol, a.shape)[first]) if np.ndim(atol) else atol
    return (
        "Tensor-likes are not close!\n\n"
        f"Mismatched elements: {n_bad} / {total} ({100 * n_bad / total:.1f}%)\n"
        f"Greatest absolute difference: {_fmt(diff[where_abs])} at index {where_abs} "
        f"(up to {atol_shown:g} allowed)\n"
        f"Greatest relative difference: {_fmt(relative[where_rel])} at index {where_rel} "
        f"(up to {rtol:g} allowed)\n"
        f"At index {first}: expected {_fmt(e64[first])}, received {_fmt(a64[first])}"
    )


def assert_exact(
    actual: Any, expected: Any, *, atol: float | np.ndarray = 0.0, why: str = FINITE_DIFFERENCES
) -> None:
    """:func:`assert_close` at ``rtol=1e-12`` (and ``atol``), for a gradient at inputs chosen
    against finite differences; the message ends with ``why``.

    Raises:
        AssertionError: some element differs by more than the tolerance.
    """
    __tracebackhide__ = True  # (see the top of this file)
    mismatch = _mismatch(actual, expected, 1e-12, atol, False)
    if mismatch is not None:
        raise AssertionError(f"{_named_by(_call_arguments(1))}{mismatch}\n{why}")


def _index(flat: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(flat), shape)) if shape else ()


def _fmt(v: Any) -> str:
    return f"{float(v):.12g}"


def assert_gradient_scales(
    fn: Callable[..., Tensor],
    inputs: Sequence[Any],
    index: int,
    *,
    power: int = 0,
    grad_output: Any = None,
    scale: float = 2.0**50,
) -> None:
    r"""Check the gradient for ``inputs[index]`` where finite differences cannot reach it.

    Many gradients scale exactly with their input, $\nabla f(cx) = c^{p}\nabla f(x)$ for
    $c > 0$: $p = 0$ for anything linear in the input (sums, products, matmul, convolution, a
    layer's weight, ReLU), $p = -1$ for $\log$, $p = -2$ for the divisor of $a/b$. Pass that
    ``power`` $p$. The gradient is computed
    at the input and at the input times ``scale`` $= 2^{50}$ (an exact scaling), and the two must
    agree to 1e-12. Near $10^{15}$, $x + h$ rounds back to $x$ for every step below 0.1, so a
    finite-difference estimate there is 0 and fails with a message that says so.

    Args:
        fn: called as ``fn(*inputs)``; returns a Tensor.
        inputs: the arguments; ``inputs[index]`` is a float64 Tensor.
        index: which input's gradient to check.
        power: $k - 1$ above.
        grad_output: the gradient flowing into the output (default: ones).

    Raises:
        AssertionError: the two gradients differ.
    """

    def gradient(factor: float) -> np.ndarray:
        args = [
            a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
            for a in inputs
        ]
        x = args[index]
        if not isinstance(x, Tensor) or x.dtype.name != "float64":
            raise TypeError(f"assert_gradient_scales: input {index} must be a float64 Tensor")
        args[index] = (x.detach() * factor).requires_grad_()
        out = fn(*args)
        g = ones_like(out) if grad_output is None else grad_output
        out.backward(g if isinstance(g, Tensor) else tensor(np.asarray(g, dtype=np.float64)))
        grad = args[index].grad
        if grad is None:
            raise AssertionError(f"the gradient for input {index} is None")
        return _array(grad).astype(np.float64)

    __tracebackhide__ = True
    arguments = _call_arguments(1)
    of = f" of {arguments[0]}" if arguments else ""
    at_x = gradient(1.0)
    expected = at_x * scale**power
    atol = 1e-12 * float(np.abs(expected).max(initial=0.0))
    mismatch = _mismatch(gradient(scale), expected, 1e-12, atol, False)
    if mismatch is not None:
        times = "the same as" if power == 0 else f"2**{50 * power} times"
        raise AssertionError(
            f"the gradient{of} for input {index} at the input times 2**50 should be {times} the "
            f"one at the input, but it is not.\n{mismatch}\n{FINITE_DIFFERENCES}"
        )
