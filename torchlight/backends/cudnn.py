"""``torch.backends.cudnn`` as PyTorch CPU has it: settable flags, ``is_available()`` False.

torchlight's CUDA backend has its own kernels, not cuDNN, so the flags change nothing;
scripts that set ``torch.backends.cudnn.benchmark = True`` run as on PyTorch CPU.
"""

from __future__ import annotations

__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available", "version"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: torchlight does not use cuDNN."""
    return False


def version() -> None:
    """None, as PyTorch without cuDNN."""
    return None
