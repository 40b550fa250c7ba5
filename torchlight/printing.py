"""How tensors print: PyTorch's format, so output reads the same as in PyTorch's docs."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np

from torchlight import dtypes

if TYPE_CHECKING:
    from torchlight.tensor import Tensor


class _Options:
    """What :func:`set_printoptions` set (PyTorch's defaults: the "default" profile)."""

    precision, threshold, edgeitems, linewidth = 4, 1000, 3, 80
    sci_mode: bool | None = None  # None: scientific notation only when the values need it


_PROFILES = {
    "default": (4, 1000, 3, 80),
    "short": (2, 1000, 2, 80),
    "full": (4, 2**63 - 1, 3, 80),
}


def set_printoptions(
    precision: int | None = None,
    threshold: int | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """``torch.set_printoptions``: digits after the point (``precision``), how many elements
    print before the middle is elided (``threshold``, showing ``edgeitems`` at each end), the
    line width, a ``profile`` ("default", "short", "full") and ``sci_mode`` (True/False force
    or forbid scientific notation; None decides from the values).

    Example:
        >>> import torchlight as tl
        >>> tl.set_printoptions(precision=2); tl.tensor([1.2345, 2.0])
        tensor([1.23, 2.00])
        >>> tl.set_printoptions(profile="default")
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(
                f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}"
            )
        _Options.precision, _Options.threshold, _Options.edgeitems, _Options.linewidth = _PROFILES[
            profile
        ]
        _Options.sci_mode = None
    for name, value in [
        ("precision", precision),
        ("threshold", threshold),
        ("edgeitems", edgeitems),
        ("linewidth", linewidth),
    ]:
        if value is not None:
            setattr(_Options, name, int(value))
    _Options.sci_mode = (
        sci_mode if sci_mode is not None or profile is not None else _Options.sci_mode
    )


def _float_formatter(values: np.ndarray) -> tuple[str, ...] | None:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    magnitude = np.abs(finite)
    if (
        _Options.sci_mode is not True
        and np.all(finite == np.round(finite))
        and magnitude.max() < 1e8
    ):
        width = max(len(f"{v:.0f}") for v in finite) + 1
        return ("int", str(width))
    nonzero = magnitude[magnitude > 0]
    if _Options.sci_mode or (
        _Options.sci_mode is None
        and (magnitude.max() >= 1e8 or (nonzero.size and nonzero.min() < 1e-4))
    ):
        return ("sci", "")
    width = max(len(f"{v:.{_Options.precision}f}") for v in finite)
    return ("fixed", str(width))


def _format_float(value: float, style: tuple[str, ...] | None) -> str:
    if not np.isfinite(value):
        text = "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    elif style is None or style[0] == "fixed":
        text = f"{value:.{_Options.precision}f}"
    elif style[0] == "int":
        text = f"{value:.0f}."
    else:
        text = f"{value:.{_Options.precision}e}"
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
            threshold=_Options.threshold,
            edgeitems=_Options.edgeitems,
            max_line_width=_Options.linewidth,
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
