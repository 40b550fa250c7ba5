"""``torch.distributed`` as a CPU build without a process group sees it: importable, not initialized.

``is_available()`` is False (torchlight has no collective communication), ``is_initialized()``
False, ``get_rank()``/``get_world_size()`` raise as PyTorch's do before
``init_process_group``, and ``init_process_group`` raises, naming what is missing.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ReduceOp", "all_gather", "all_reduce", "barrier", "broadcast", "destroy_process_group",
    "get_rank", "get_world_size", "init_process_group", "is_available", "is_initialized",
]  # fmt: skip


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


def _no_group() -> ValueError:
    return ValueError(
        "Default process group has not been initialized, please make sure to call init_process_group."
    )


def get_rank(group: Any = None) -> int:
    """Raises, as PyTorch's does without a process group."""
    raise _no_group()


def get_world_size(group: Any = None) -> int:
    """Raises, as PyTorch's does without a process group."""
    raise _no_group()


def destroy_process_group(group: Any = None) -> None:
    """Raises, as PyTorch's does without a process group (a script's clean-up after training
    imports it; only calling it needs one)."""
    raise _no_group()


def barrier(*args: Any, **kwargs: Any) -> None:
    """Raises, as PyTorch's does without a process group."""
    raise _no_group()


def all_reduce(tensor: Any, *args: Any, **kwargs: Any) -> None:
    """Raises, as PyTorch's does without a process group."""
    raise _no_group()


def all_gather(tensor_list: Any, tensor: Any, *args: Any, **kwargs: Any) -> None:
    """Raises, as PyTorch's does without a process group."""
    raise _no_group()


def broadcast(tensor: Any, src: int, *args: Any, **kwargs: Any) -> None:
    """Raises, as PyTorch's does without a process group."""
    raise _no_group()


class ReduceOp:
    """The reduction names collectives take (``dist.ReduceOp.SUM``); importable, as in PyTorch."""

    SUM, PRODUCT, MIN, MAX, AVG = "sum", "product", "min", "max", "avg"
