"""A program other than the Python broker (Node.js typesetting a student's TeX), run in a fresh
sandbox of its own and spoken to a line at a time, inside budgets of CPU time, memory, wall
time and answer bytes.

Everything a student wrote that the grader must *process* (not only run) belongs inside that
student's budgets: a page of ``\\iiiint`` cost two minutes of the grader's CPU and a 167 MB page
when MathJax ran in the grading process. Here it runs as :func:`~.bwrap.command` builds any
sandbox (the same filesystem, identity, namespaces and seccomp allowlist), with rlimits set by
``prlimit`` before the program starts, and every answer read into chunks, never past its cap.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence

from torchlight_grader.sandbox import seccomp
from torchlight_grader.sandbox.bwrap import INSIDE_MOUNT, WORK, clean_env, command
from torchlight_grader.sandbox.limits import Limits
from torchlight_grader.sandbox.process import end, watch

PRLIMIT = "/usr/bin/prlimit"  # util-linux: sets the rlimits, then runs the program


class ProgramError(RuntimeError):
    """The program could not start, failed, or went past a budget."""


class LineProgram:
    """``argv`` in a fresh sandbox; :meth:`ask` sends one line and reads one line back.

    ``argv[0]`` must lie where the sandbox sees it (``/usr``, ``/bin``, the Python environment);
    ``INSIDE`` in an argument is replaced by the folder of the sandbox's own programs
    (``torchlight_grader/sandbox/inside/``, read-only in every sandbox).
    """

    def __init__(self, argv: Sequence[str], limits: Limits, cpu_seconds: int) -> None:
        if not os.path.isfile(PRLIMIT):
            raise ProgramError(f"{PRLIMIT} not found (util-linux)")
        rlimits = [f"--cpu={cpu_seconds}", f"--as={limits.memory}", f"--fsize={limits.output}"]
        rlimits += [f"--nproc={limits.processes}", "--core=0"]
        program = [a.replace("INSIDE", INSIDE_MOUNT) for a in argv]
        filter_fd = seccomp.memfd()
        info_read, info_write = os.pipe()
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        fds = (info_write,) if filter_fd is None else (info_write, filter_fd)
        try:
            self.proc = subprocess.Popen(
                command([PRLIMIT, *rlimits, "--", *program], limits, as_pid_1=True,
                        info_fd=info_write, seccomp_fd=filter_fd),
                env=clean_env(WORK), cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self.errors, pass_fds=fds, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            self.errors.close()
            os.close(info_read)
            raise ProgramError(f"{argv[0]} did not start in a sandbox: {exc}") from exc
        finally:
            os.close(info_write)
            if filter_fd is not None:
                os.close(filter_fd)
        # before it reads any TeX: what the TeX makes it hold is charged to its own group
        self.pidfd, self.group = watch(self.proc, info_read, limits)

    def ask(self, line: bytes, deadline: float, max_bytes: int) -> bytes:
        """Send ``line`` (one line, newline added) and return the answer line (without its
        newline); raises :class:`ProgramError` past ``deadline`` (``time.monotonic()``) or
        ``max_bytes``, or when the program ends."""
        assert self.proc.stdin is not None and self.proc.stdout is not None, "started with pipes"
        try:
            self.proc.stdin.write(line + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise ProgramError(f"the program ended: {self.error_tail()}") from exc
        fd, size = self.proc.stdout.fileno(), 0
        chunks: list[bytes] = []
        while not chunks or not chunks[-1].endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProgramError("it went past its time budget")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self.proc.wait()
                raise ProgramError(f"it ended ({_how(self.proc.returncode)}): {self.error_tail()}")
            size += len(chunk)
            if size > max_bytes:
                raise ProgramError(f"its answer went past {max_bytes // 1024**2} MiB")
            chunks.append(chunk)  # a list joined once: no quadratic `bytes +=`
        answer = b"".join(chunks)
        if answer.count(b"\n") != 1:
            raise ProgramError("it answered more than one line")
        return answer[:-1]

    def error_tail(self, n: int = 1500) -> str:
        self.errors.seek(0, os.SEEK_END)
        self.errors.seek(max(0, self.errors.tell() - n))
        return self.errors.read().decode("utf-8", errors="replace")

    def close(self) -> None:
        """End the sandbox (:func:`~.process.end`)."""
        end(self.proc, self.pidfd, self.group)
        self.pidfd = None
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.errors.close()


def _how(code: int | None) -> str:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"
