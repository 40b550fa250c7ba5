"""One run at a time on a course's gradebook: ``<course>/.grading.lock``.

``make course-grade``, ``make course-collect`` and ``make course-feedback-release`` write the
gradebook, ``graded.json``, ``autograded/`` and ``feedback/``. Two of them at once (a second
terminal, a rerun while a killed run's grader still ends) would interleave their writes, so each
holds an exclusive ``flock`` on the course's lock file for its whole run. The kernel drops the
lock when the holder's process ends, however it ends (no stale lock after a crash or a
``kill -9``). A second run does not wait: it stops at once with a message naming the holder's
process id, its command and when it started, and how to stop it.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d, course_lock(Path(d), "example"):
    ...     (Path(d) / LOCK).is_file()
    True
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = ".grading.lock"


class CourseBusyError(RuntimeError):
    """Another run holds the course's lock; the message names it."""


@contextmanager
def course_lock(course: Path, what: str) -> Iterator[None]:
    """Hold the course's lock while the block runs (``what``: this run, for the message of a
    second one). Raises :class:`CourseBusyError` at once when another process holds it."""
    path = course / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CourseBusyError(_busy(course, path)) from None
        holder = {"pid": os.getpid(), "what": what, "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # (releases the flock)


def _busy(course: Path, path: Path) -> str:
    try:
        holder = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        holder = {}
    pid = holder.get("pid", "?")
    return (
        f"another run holds the gradebook of {course}: pid {pid} ({holder.get('what', 'unknown')}, "
        f"since {holder.get('since', '?')}). Wait for it to end, or stop it (`kill {pid}`), then "
        "run this again; two runs at once would interleave their writes to the gradebook"
    )
