"""``torch.backends.mps`` as PyTorch on Linux has it: ``is_available()`` and ``is_built()`` False."""

from __future__ import annotations

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """False: torchlight has no Apple-GPU (MPS) backend."""
    return False


def is_built() -> bool:
    """False: torchlight has no Apple-GPU (MPS) backend."""
    return False
