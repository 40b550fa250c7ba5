r"""Numerical checks of backward: :func:`central_difference`, :func:`gradcheck`, :func:`gradgradcheck`.

:func:`gradcheck` compares two Jacobians entry by entry. Analytical: one backward pass per output
element, seeded with a one-hot gradient, gives one row. Numerical: one pair of forward passes per
input element (a central difference) gives one column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from torchlight.autograd.engine import grad
from torchlight.autograd.grad_mode import no_grad

__all__ = [
    "GradcheckError",
    "central_difference",
    "gradcheck",
    "gradgradcheck",
    "jacobian_mismatch",
]

_MAX_REPORTED = 5


def _is_tensor(x: Any) -> bool:
    """Whether ``x`` is a node of the graph (this layer knows tensors by what they do)."""
    return hasattr(x, "requires_grad")


def _leaf_copies(inputs: Sequence[Any]) -> list[Any]:
    copies = []
    for i, x in enumerate(inputs):
        if _is_tensor(x) and x.requires_grad:
            if x.dtype.name != "float64":
                raise TypeError(
                    f"gradcheck: input {i} is {x.dtype}; use float64 inputs (x.double()), "
                    "float32 rounding is larger than a central difference can resolve"
                )
            x = x.detach().clone().requires_grad_()
        copies.append(x)
    return copies


def _output(fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    out = fn(*args)
    if not _is_tensor(out):
        raise TypeError(f"gradcheck: the function must return a Tensor, got {type(out).__name__}")
    return out


def _host(t: Any) -> np.ndarray:
    return np.array(t.backend.to_numpy(t.storage), dtype=np.float64, order="C")


def _pytorch_form(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """``gradcheck(fn, (x, y))``, PyTorch's one tuple of arguments, is ``gradcheck(fn, x, y)``."""
    if len(inputs) == 1 and isinstance(inputs[0], (tuple, list)):
        return tuple(inputs[0])
    return inputs


def _with_element(x: Any, flat_index: int, delta: float) -> Any:
    values = _host(x)
    values.reshape(-1)[flat_index] += delta
    return x._lift(values)


def jacobian_mismatch(
    fn: Callable[..., Any], inputs: Sequence[Any], *, eps: float, atol: float, rtol: float
) -> str:
    """A readable report of every Jacobian entry where backward and central differences disagree
    (an empty string when all agree)."""
    args = _leaf_copies(inputs)
    checked = [i for i, x in enumerate(args) if _is_tensor(x) and x.requires_grad]
    if not checked:
        raise ValueError(
            "gradcheck: no input requires grad; pass tensors made with requires_grad=True"
        )
    out = _output(fn, args)
    out_shape = out.shape
    owner = getattr(fn, "__self__", None)  # Function.apply is bound to the Function class
    name = owner.__name__ if isinstance(owner, type) else getattr(fn, "__qualname__", repr(fn))

    # analytical Jacobian, one row per output element
    analytical = {i: np.zeros((out.numel(), args[i].numel())) for i in checked}
    if out.requires_grad:
        for k in range(out.numel()):
            seed = np.zeros(out.numel())
            seed[k] = 1.0
            for i in checked:
                args[i].grad = None
            out.backward(seed.reshape(out_shape), retain_graph=True)
            for i in checked:
                grad = args[i].grad
                if grad is not None:
                    analytical[i][k] = _host(grad).reshape(-1)

    # numerical Jacobian, one column per input element
    problems: list[str] = []
    total = 0
    for i in checked:
        x = args[i]
        numerical = np.zeros_like(analytical[i])
        for j in range(x.numel()):
            up = list(args)
            down = list(args)
            up[i] = _with_element(x, j, eps)
            down[i] = _with_element(x, j, -eps)
            numerical[:, j] = (_host(_output(fn, up)) - _host(_output(fn, down))).reshape(-1) / (
                2 * eps
            )
        bad = ~np.isclose(analytical[i], numerical, atol=atol, rtol=rtol, equal_nan=True)
        total += int(bad.sum())
        for k, j in zip(*np.nonzero(bad), strict=True):
            if len(problems) < _MAX_REPORTED:
                problems.append(
                    f"  output {_unravel(k, out_shape)} w.r.t. input {i} {_unravel(j, x.shape)}: "
                    f"backward gave {analytical[i][k, j]:.8g}, central difference gave "
                    f"{numerical[k, j]:.8g}"
                )
    if not total:
        return ""
    return (
        f"gradcheck of {name}: {total} Jacobian entr{'y' if total == 1 else 'ies'} differ "
        f"(tolerance atol={atol} + rtol={rtol} * |central difference|):\n"
        + "\n".join(problems)
        + ("\n  ..." if total > len(problems) else "")
    )


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(v) for v in np.unravel_index(int(flat), shape)) if shape else ()


def central_difference(
    f: Callable[..., Any], *vals: float, arg: int = 0, epsilon: float = 1e-6
) -> float:
    r"""Estimate $\partial f / \partial \mathrm{vals}_{arg}$ by a central difference.

    $$\frac{f(\ldots, x + \epsilon, \ldots) - f(\ldots, x - \epsilon, \ldots)}{2\epsilon}$$

    The error is $O(\epsilon^2)$ from truncation plus $O(\text{machine eps}/\epsilon)$ from rounding.

    Example:
        >>> from torchlight.autograd import central_difference
        >>> round(central_difference(lambda x, y: x * y, 3.0, 4.0, arg=0), 6)
        4.0
    """
    if not 0 <= arg < len(vals):
        raise IndexError(f"arg={arg} but f was given {len(vals)} value(s)")
    up = [float(v) for v in vals]
    down = list(up)
    up[arg] += epsilon
    down[arg] -= epsilon
    return (float(f(*up)) - float(f(*down))) / (2.0 * epsilon)


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` when backward disagrees with central differences."""


def gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    r"""Compare the full Jacobian from backward with central differences, entry by entry.

    For every output element $k$ and every element $j$ of every input that requires grad,
    checks $|J^{\text{backward}}_{kj} - J^{\text{numerical}}_{kj}| \le$ atol + rtol $\cdot |J^{\text{numerical}}_{kj}|$.
    Inputs must be float64: float32 rounding swamps a central difference.

    ``inputs`` are the function's arguments, or one tuple of them as PyTorch takes them
    (``gradcheck(fn, (x, 2.0))``); arguments that are not tensors are passed as they are.

    Example:
        >>> import torchlight as tl
        >>> x = tl.tensor([0.5, -1.0], requires_grad=True)
        >>> tl.autograd.gradcheck(lambda t, k: t * k, (x, 2.0))
        True

    Raises:
        GradcheckError: naming the output, the input, the index, and both values.
    """
    inputs = _pytorch_form(inputs)
    report = jacobian_mismatch(fn, inputs, eps=eps, atol=atol, rtol=rtol)
    if report and raise_exception:
        raise GradcheckError(report)
    return not report


def gradgradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    grad_outputs: Any = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    r"""Check second derivatives: :func:`gradcheck` of the first derivative's backward.

    The first derivative is $g(x, v) = v^T \partial\,\mathrm{fn}(x) / \partial x$, computed by
    ``grad(..., create_graph=True)``; its own backward (the double backward) is compared with
    central differences of $g$. ``grad_outputs`` is $v$ (random float64, fixed seed, when
    omitted). Inputs must be float64.

    Example:
        >>> import torchlight as tl
        >>> x = tl.tensor([0.5, -1.0], dtype=tl.float64, requires_grad=True)
        >>> tl.autograd.gradgradcheck(lambda t: t.tanh() * t, x)
        True

    Raises:
        GradcheckError: naming the entry of the first derivative's Jacobian that differs.
    """
    inputs = _pytorch_form(inputs)
    checked = [i for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    if not checked:
        raise ValueError(
            "gradgradcheck: no input requires grad; pass tensors made with requires_grad=True"
        )
    with no_grad():
        out = fn(*inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = out._lift(rng.standard_normal(out.shape)).requires_grad_()
    n = len(inputs)

    def first_derivative(wrt: int) -> Callable[..., Any]:
        r"""$g(x, v) = v^T \partial\,\mathrm{fn}(x) / \partial x_{wrt}$, a function of all inputs."""

        def g(*args: Any) -> Any:
            xs, v = list(args[:n]), args[n]
            for i in checked:  # (central differences pass plain tensors: make them leaves again)
                if not xs[i].requires_grad:
                    xs[i] = xs[i].detach().requires_grad_()
            y = fn(*xs)
            if not y.requires_grad:
                raise GradcheckError("gradgradcheck: the function's output does not require grad")
            (g_wrt,) = grad(y, [xs[wrt]], v, create_graph=True, allow_unused=True)
            return g_wrt if g_wrt is not None else xs[wrt]._lift(0.0).expand(xs[wrt].shape)

        g.__qualname__ = f"first derivative of {getattr(fn, '__qualname__', fn)} w.r.t. input {wrt}"
        return g

    # One gradcheck per input's first derivative (each a tensor of that input's shape).
    return all(
        gradcheck(
            first_derivative(wrt),
            *inputs,
            grad_outputs,
            eps=eps,
            atol=atol,
            rtol=rtol,
            raise_exception=raise_exception,
        )
        for wrt in checked
    )
