"""``torch.autograd.detect_anomaly`` and ``set_detect_anomaly``: accepted, so that programs that
switch them on run; torchlight's engine does not trace anomalies (it keeps no forward stack
traces, and a NaN gradient is not raised as PyTorch raises it in this mode): check a loss or a
gradient with ``torch.isnan(x).any()`` where you suspect one.

Example:
    >>> import torchlight as tl, warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with tl.autograd.detect_anomaly():
    ...         tl.autograd.is_anomaly_enabled()
    True
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["detect_anomaly", "is_anomaly_enabled", "set_detect_anomaly"]


class _Anomaly:
    enabled = False


def is_anomaly_enabled() -> bool:
    """Whether a ``detect_anomaly``/``set_detect_anomaly(True)`` is on."""
    return _Anomaly.enabled


class set_detect_anomaly:  # noqa: N801 - PyTorch's name
    """Switch anomaly mode on or off (as a call it stays so; as a context manager, until exit)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.before, _Anomaly.enabled = _Anomaly.enabled, bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        _Anomaly.enabled = self.before


class detect_anomaly:  # noqa: N801 - PyTorch's name
    """Anomaly mode for a block, with PyTorch's warning that it slows training down, and
    torchlight's that it does not trace (see the module docstring)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> None:
        warnings.warn(
            "Anomaly Detection has been enabled. torchlight does not trace anomalies: a nan "
            "gradient is not raised (PyTorch's anomaly mode raises it); check with isnan()",
            UserWarning,
            stacklevel=2,
        )
        self.before, _Anomaly.enabled = _Anomaly.enabled, True

    def __exit__(self, *exc: Any) -> None:
        _Anomaly.enabled = self.before
