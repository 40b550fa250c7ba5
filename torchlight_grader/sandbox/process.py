"""One running sandbox (:class:`Sandbox`): its process, its stdin, and the result pipe the grader
reads, framed and bounded."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchlight_grader.sandbox import seccomp
from torchlight_grader.sandbox.bwrap import (
    INSIDE,
    INSIDE_MOUNT,
    WORK,
    clean_env,
    command,
    ensure_available,
)
from torchlight_grader.sandbox.inside import wire
from torchlight_grader.sandbox.limits import Limits, join_cgroup, leave_cgroup

MAX_FRAME = 64 * 1024**2
#: Bytes one sandbox (one notebook run, or one hidden-check run) may send in all frames together.
MAX_RUN_BYTES = 256 * 1024**2
STARTUP_S = 20.0  # importing numpy/torchlight/IPython in a cold sandbox


class Sandbox:
    """One running sandbox: its process, its stdin, and the result pipe this process reads."""

    def __init__(
        self,
        script: str,
        limits: Limits,
        forbidden: Sequence[str] = (),
        as_pid_1: bool = False,
        overlays: Sequence[tuple[str, str]] = (),
        masks: Sequence[str] = (),
    ) -> None:
        mode = ensure_available()
        read_end, write_end = os.pipe()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._pidfd: int | None = None
        self._group: Path | None = None
        info_read, info_write = os.pipe()
        extra: tuple[int, ...] = ()
        if mode == "bwrap":
            self._tmp = None
            argv = [sys.executable, "-I", "-B", f"{INSIDE_MOUNT}/{script}", str(write_end)]
            seccomp_fd = seccomp.memfd()
            if seccomp_fd is not None:
                extra = (seccomp_fd,)
            cmd = command(
                argv, limits, forbidden, as_pid_1, info_write, seccomp_fd, overlays, masks
            )
            env = clean_env(WORK)
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="torchlight-unsafe-")
            cmd = [sys.executable, "-I", "-B", str(INSIDE / script), str(write_end)]
            env = clean_env(self._tmp.name)
        try:
            self.proc = subprocess.Popen(
                cmd,
                env=env,
                cwd="/",
                stdin=subprocess.PIPE,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_end, info_write, *extra) if mode == "bwrap" else (write_end,),
                start_new_session=True,
            )
        finally:
            os.close(write_end)
            os.close(info_write)
            for fd in extra:
                os.close(fd)
        if mode == "bwrap":
            self._pidfd, self._group = watch(self.proc, info_read, limits)
        else:
            os.close(info_read)
        self._results = read_end
        self._buffer = bytearray()  # linear: appended at the end, consumed from the front
        self._received = 0
        self.broken = ""
        self.loads = wire.loads

    def send(self, message: Any, deadline: float) -> bool:
        """Write one JSON line to the sandbox's stdin; False if it cannot be delivered in time."""
        assert self.proc.stdin is not None, "started with stdin=PIPE"
        # a view: each write moves past what was written without copying the rest (slicing
        # bytes copied it, quadratic in the message: 7 minutes for a notebook of 100 MB)
        data = memoryview((wire.dumps(message) + "\n").encode())
        fd = self.proc.stdin.fileno()
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            _, ready, _ = select.select([], [fd], [], remaining)
            if ready:
                try:
                    written = os.write(fd, data[: select.PIPE_BUF])
                except OSError:  # the sandbox is gone
                    return False
                data = data[written:]
        return True

    def receive(self, deadline: float) -> dict[str, Any] | None:
        """The next frame, or None at the deadline, at the end, or after a malformed frame."""
        while not self.broken:
            if len(self._buffer) >= 8:
                try:
                    size = int(self._buffer[:8], 16)
                except ValueError:
                    self.broken = "a malformed message came from the sandbox"
                    break
                if size > MAX_FRAME:
                    self.broken = "an oversized message came from the sandbox"
                    break
                if len(self._buffer) >= 8 + size:
                    payload = bytes(self._buffer[8 : 8 + size])
                    del self._buffer[: 8 + size]  # O(1) amortized at the front of a bytearray
                    try:
                        message = self.loads(payload.decode("utf-8", errors="replace"))
                    except wire.WireError as exc:
                        self.broken = f"a malformed message came from the sandbox ({exc})"
                        break
                    if isinstance(message, dict):
                        return message
                    self.broken = "a malformed message came from the sandbox"
                    break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._results], [], [], remaining)
            if ready:
                chunk = os.read(self._results, 1 << 20)
                if not chunk:
                    return None  # every writer is gone: the sandbox ended
                self._received += len(chunk)
                if self._received > MAX_RUN_BYTES:
                    self.broken = (
                        f"the sandbox sent more than {MAX_RUN_BYTES // 1024**2} MiB of results"
                    )
                    break
                self._buffer += chunk
        return None

    def log_tail(self, n: int = 2000) -> str:
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - n))
        return self._log.read().decode("utf-8", errors="replace")

    def close(self, grace: float = 0.0) -> bool:
        """End the sandbox (every process in it dies with it); True if it had to be killed.

        The sandboxed program is killed by its pidfd, and waited for: it is the PID
        namespace's first process, so every other process in it is killed with it. (Killing
        bwrap alone is not enough: as root, ``setpriv`` changes the program's uid, which clears
        the parent-death signal ``--die-with-parent`` gave it.)"""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        killed = False
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            killed = True
        end(self.proc, self._pidfd, self._group)
        self._pidfd = None
        os.close(self._results)
        self._log.close()
        if self._tmp is not None:
            self._tmp.cleanup()
        return killed


def watch(proc: subprocess.Popen[Any], info: int, limits: Limits) -> tuple[int | None, Path | None]:
    """After bwrap started ``proc``, before any student input reaches it: a pidfd of the
    sandboxed program (from ``--info-fd`` pipe ``info``, closed here) and the memory cgroup of
    its own that it and bwrap now are in (:func:`~.limits.join_cgroup`)."""
    try:
        pidfd, child = sandboxed_pidfd(info)
    finally:
        os.close(info)
    return pidfd, join_cgroup(limits, proc.pid, child)


def end(proc: subprocess.Popen[Any], pidfd: int | None, group: Path | None) -> None:
    """Kill a sandbox and wait for it: its first process by ``pidfd`` (as root, ``setpriv``
    cleared the parent-death signal bwrap gave it), which takes its whole PID namespace with
    it, then bwrap's process group; then remove its memory cgroup. ``pidfd`` is closed."""
    if pidfd is not None:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [], 10.0)  # readable once it has exited
        os.close(pidfd)
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    leave_cgroup(group)


def sandboxed_pidfd(info: int) -> tuple[int | None, int | None]:
    """A pidfd of the sandboxed program and its PID, from bwrap's ``--info-fd`` JSON
    (``child-pid``); None if bwrap ended before it started one."""
    data = b""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([info], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(info, 4096) if ready else b""
        if not chunk:
            break
        data += chunk
    try:
        pid = int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None, None
    try:
        return os.pidfd_open(pid), pid
    except (OSError, ValueError):
        return None, None  # it has ended already
