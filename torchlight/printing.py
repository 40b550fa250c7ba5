"""How tensors print: PyTorch's format, so output reads the same as in PyTorch's docs."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np

from torchlight import dtypes

if TYPE_CHECKING:
    from torchlight.tensor import Tensor


def _float_formatter(values: np.ndarray) -> tuple[str, ...] | None:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    magnitude = np.abs(finite)
    if np.all(finite == np.round(finite)) and magnitude.max() < 1e8:
        width = max(len(f"{v:.0f}") for v in finite) + 1
        return ("int", str(width))
    nonzero = magnitude[magnitude > 0]
    if magnitude.max() >= 1e8 or (nonzero.size and nonzero.min() < 1e-4):
        return ("sci", "")
    width = max(len(f"{v:.4f}") for v in finite)
    return ("fixed", str(width))


def _format_float(value: float, style: tuple[str, ...] | None) -> str:
    if not np.isfinite(value):
        text = "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    elif style is None or style[0] == "fixed":
        text = f"{value:.4f}"
    elif style[0] == "int":
        text = f"{value:.0f}."
    else:
        text = f"{value:.4e}"
    width = int(style[1]) if style and style[1] else 0
    return text.rjust(width)


def tensor_repr(t: Tensor) -> str:
    """``tensor([4., 6.], requires_grad=True)``, as PyTorch prints it."""
    values = np.asarray(t.backend.to_numpy(t.storage))
    extras = []
    if values.size == 0:
        body = "[]"
        if values.ndim != 1:
            extras.append(f"size={values.shape}")
    else:
        formatter = {}
        if values.dtype.kind == "f":
            style = _float_formatter(values.astype(np.float64))
            formatter["float_kind"] = lambda v: _format_float(float(v), style)
        elif values.dtype.kind == "b":
            formatter["bool"] = lambda v: "True" if v else "False"
        body = np.array2string(
            values,
            separator=", ",
            prefix="tensor(",
            formatter=formatter,  # type: ignore[arg-type]
            threshold=1000,
            edgeitems=3,
            max_line_width=80,
        )
    dtype = t.dtype
    if dtype is not dtypes.get_default_dtype() and dtype not in (dtypes.int64, dtypes.bool_):
        extras.append(f"dtype={dtype!r}")
    if t.backend.name != "numpy":
        extras.append(f"device={t.backend.name!r}")
    if t.history is not None:
        extras.append(f"grad_fn=<{t.history.last_fn.__name__}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + ", ".join([body, *extras]) + ")"


def tensor_html(t: Tensor) -> str:
    """A compact HTML card for Jupyter: the values plus shape, dtype, strides and graph info."""
    facts = [f"shape {t.shape}", f"dtype {t.dtype.name}", f"strides {t.stride()}"]
    if t.history is not None:
        facts.append(f"made by {t.history.last_fn.__name__}")
    elif t.requires_grad:
        facts.append("leaf, requires grad")
    return (
        f"<pre style='margin:0'>{html.escape(tensor_repr(t))}</pre>"
        f"<small style='color:#666'>{html.escape(' · '.join(facts))}</small>"
    )
