"""``torch.onnx`` as far as torchlight goes: importable, with an ``export`` that says what is missing.

A training script often ends by exporting its model (``torch.onnx.export(model, x, "m.onnx")``);
torchlight has no ONNX exporter, so that call raises a ``NotImplementedError`` naming what to do
instead, and everything before it runs.

Example:
    >>> import torchlight.onnx
    >>> torchlight.onnx.is_in_onnx_export()
    False
"""

from __future__ import annotations

from typing import Any

__all__ = ["export", "is_in_onnx_export"]


def export(model: Any, args: Any, f: Any = None, *more: Any, **kwargs: Any) -> None:
    """Raises ``NotImplementedError``: torchlight cannot write ONNX graphs."""
    raise NotImplementedError(
        "torch.onnx.export: torchlight has no ONNX exporter. Save the weights with "
        "torch.save(model.state_dict(), path) and export from PyTorch if you need an ONNX file."
    )


def is_in_onnx_export() -> bool:
    """False: torchlight never traces a model for ONNX."""
    return False
