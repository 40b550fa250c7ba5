r"""Grad mode: whether new operations are recorded in the graph (PyTorch's ``grad_mode.py``).

Recording is per thread, as in PyTorch: a :class:`no_grad` block in one thread leaves the
others recording.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["enable_grad", "is_grad_enabled", "no_grad"]

F = TypeVar("F", bound=Callable[..., Any])


class _GradModeOfThisThread(threading.local):
    """Whether recording is on, for each thread on its own (as in PyTorch): a ``no_grad()``
    in one thread must not turn recording off in another."""

    enabled = True  # what a new thread starts with


_GradMode = _GradModeOfThisThread()


def is_grad_enabled() -> bool:
    """Whether new operations are being recorded in the graph."""
    return _GradMode.enabled


class no_grad:  # noqa: N801 - named as PyTorch names it
    """Context manager (and decorator) that stops recording operations in the graph.

    Example:
        >>> import torchlight as tl
        >>> w = tl.ones(2, requires_grad=True)
        >>> with tl.no_grad():
        ...     w.sub_(0.5)  # an optimizer step: in place, not recorded
        tensor([0.5000, 0.5000], requires_grad=True)
    """

    _value = False

    def __enter__(self) -> None:
        self._previous = _GradMode.enabled
        _GradMode.enabled = self._value

    def __exit__(self, *exc: object) -> None:
        _GradMode.enabled = self._previous

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class enable_grad(no_grad):  # noqa: N801
    """Turn recording back on inside a :class:`no_grad` block."""

    _value = True
