"""``torch.accelerator``: which accelerator there is (CUDA when torchlight's CUDA backend runs on a GPU)."""

from __future__ import annotations

from typing import Any

__all__ = ["current_accelerator", "device_count", "is_available"]


def is_available() -> bool:
    """True only when a real GPU runs torchlight's CUDA backend (``tl.cuda.is_available()``)."""
    from torchlight import cuda

    return cuda.is_available()


def current_accelerator(check_available: bool = False) -> Any:
    """``tl.device("cuda")`` when there is one, else None (as PyTorch CPU)."""
    from torchlight.device import device

    return device("cuda") if is_available() else None


def device_count() -> int:
    """1 with a GPU (torchlight uses one), else 0."""
    return 1 if is_available() else 0
