"""What guards a training run, for every app in :mod:`torchlight.train`: a loss that became nan
or infinite stops it (:class:`TrainingDivergedError`), and a Ctrl-C waits until a checkpoint
is written (:func:`ctrl_c_deferred`), so the line it prints names the file on disk.

Example:
    >>> from torchlight.train.guards import ctrl_c_deferred
    >>> with ctrl_c_deferred():
    ...     saved = "the checkpoint is written here"
    >>> saved
    'the checkpoint is written here'
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["TrainingDivergedError", "ctrl_c_deferred"]


class TrainingDivergedError(RuntimeError):
    """The loss became nan or infinite: training stops instead of silently continuing."""


@contextlib.contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Hold back Ctrl-C until the block ends: a Ctrl-C that lands between writing a checkpoint
    and noting its epoch would otherwise make the interrupted line name an older checkpoint.

    Python runs signal handlers in the main thread only, so outside it there is nothing to do;
    nor where Ctrl-C is ignored (a run started in the background, ``nohup``), which it still is.
    """
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return
    pending: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt  # the Ctrl-C that came during the block, now that it is done
