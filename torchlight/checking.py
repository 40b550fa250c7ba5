"""The machinery behind :func:`torchlight.autograd.gradcheck`: two Jacobians, compared entry by entry.

Analytical: one backward pass per output element, seeded with a one-hot gradient, gives one row.
Numerical: one pair of forward passes per input element (a central difference) gives one column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from torchlight.tensor import Tensor

_MAX_REPORTED = 5


def _leaf_copies(inputs: Sequence[Any]) -> list[Any]:
    copies = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad:
            if x.dtype.name != "float64":
                raise TypeError(
                    f"gradcheck: input {i} is {x.dtype}; use float64 inputs (x.double()), "
                    "float32 rounding is larger than a central difference can resolve"
                )
            x = x.detach().clone().requires_grad_()
        copies.append(x)
    return copies


def _output(fn: Callable[..., Any], args: Sequence[Any]) -> Tensor:
    out = fn(*args)
    if not isinstance(out, Tensor):
        raise TypeError(f"gradcheck: the function must return a Tensor, got {type(out).__name__}")
    return out


def _host(t: Tensor) -> np.ndarray:
    return np.array(t.backend.to_numpy(t.storage), dtype=np.float64, order="C")


def _with_element(x: Tensor, flat_index: int, delta: float) -> Tensor:
    values = _host(x)
    values.reshape(-1)[flat_index] += delta
    return Tensor(x.backend.from_numpy(values), x.backend)


def jacobian_mismatch(
    fn: Callable[..., Any], inputs: Sequence[Any], *, eps: float, atol: float, rtol: float
) -> str:
    """A readable report of every Jacobian entry where backward and central differences disagree
    (an empty string when all agree)."""
    args = _leaf_copies(inputs)
    checked = [i for i, x in enumerate(args) if isinstance(x, Tensor) and x.requires_grad]
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
