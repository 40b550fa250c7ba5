"""``torch.distributed`` as a CPU build without a process group sees it: importable, not initialized.

``is_available()`` is False (torchlight has no collective communication), ``is_initialized()``
False, ``get_rank()``/``get_world_size()`` raise as PyTorch's do before
``init_process_group``, and ``init_process_group`` raises, naming what is missing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["get_rank", "get_world_size", "init_process_group", "is_available", "is_initialized"]


def is_available() -> bool:
    """False: torchlight has no distributed (multi-process) training."""
    return False


def is_initialized() -> bool:
    """False: there is never a default process group."""
    return False


def _missing(what: str) -> RuntimeError:
    return RuntimeError(
        f"torch.distributed.{what}: torchlight has no distributed training (no process groups, "
        "no collectives); run on one process"
    )


def init_process_group(*args: Any, **kwargs: Any) -> None:
    """Raises: torchlight cannot start a process group."""
    raise _missing("init_process_group")


def get_rank(group: Any = None) -> int:
    """Raises, as PyTorch's does without a process group."""
    raise ValueError(
        "Default process group has not been initialized, please make sure to call init_process_group."
    )


def get_world_size(group: Any = None) -> int:
    """Raises, as PyTorch's does without a process group."""
    raise ValueError(
        "Default process group has not been initialized, please make sure to call init_process_group."
    )
