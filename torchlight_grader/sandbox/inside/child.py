"""The sandbox's own program: runs a student's cells once, then calls their answers.

Started by :mod:`torchlight_grader.sandbox` inside bubblewrap as
``python -I -B /opt/torchlight-sandbox/child.py FD``. It sees only this folder (``child.py``,
``runners.py``, ``wire.py``: no references, no checks), the student-facing ``torchlight``
library, the Python environment (read-only) and an empty private work dir.

Protocol (everything untrusted by the grader):

- stdin, one JSON line each: first ``{"cells", "limits", "budget", "environ"}`` (``environ``:
  variables set before the first cell); then, one at a time,
  ``{"id", "nonce", "spec", "cases", "timeout"}`` for the next item, or ``{"end": true}``;
- file descriptor ``FD`` (a pipe the grader holds), length-prefixed frames: ``{"cells": [...]}``
  once the cells ran, then per item ``{"result": id, "nonce", "cases"}`` (the outputs of the
  item's own process, after its calls returned) and ``{"status": id, "nonce", ...}`` once that
  process has ended.

Only this program's first process, the *broker* (PID 1 of the sandbox), ever holds the grader's
stdin and ``FD``, and no student code ever runs in it (issue 24 item 7). Before the first cell
it forks the student side, which gets neither: stdin is ``/dev/null`` there and ``FD`` is
closed. The broker passes each item on without its nonce, through a pipe of its own, only once
the grader sends it (after the last item's status), and reads what the student side sends back
through another pipe: the first ``cells`` frame, then for the item being run its first result
frame and its status frame, which it forwards to the grader with the nonce added. A frame for
any other item, a second result, anything sent outside an item is dropped. So no student
process can learn a nonce, read an item before it runs, or write a frame the grader reads.

A speed item (spec runner ``speed``) is paced by the broker itself (:mod:`paced`): the
student side gets it without its seed and the protocol's source, compiles the kernel and says
it is ready; the broker then times every call from outside the student's processes, runs the
reference kernel in its own process, and builds the item's result: its own measurement, and of
what the item's process sent only its error or what its compiled kernel is. The request's
``paced_bytes`` asks for the memory region the two sides share for it, mapped before the fork.

The cells run in notebook order, as in Jupyter, each in a fork of the process that ran the cells
before it (a *checkpoint*): if a cell finishes, its process carries on with the next cell; if it
loops forever, exhausts its limits or ends the process, it is killed or gone, and its parent
carries on from the state before that cell. So one answer that hangs or exits costs only the
items that need it. Each item runs in its own fork of the state after the last cell.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import linecache
import mmap
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Captured before any student code runs: patching the modules later does not reach these.
_fork, _exit, _waitpid, _killpg, _setpgid = os.fork, os._exit, os.waitpid, os.killpg, os.setpgid
_write, _monotonic, _sleep, _select = os.write, time.monotonic, time.sleep, select.select
_getrlimit, _setrlimit = (
    resource.getrlimit,
    resource.setrlimit,
)  # a cell's patch cannot lift a limit

_POLL_S = 0.01
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_DUMPABLE = 4
_RESULT_FD = -1  # the grader's result pipe: held by the broker only
_UP = -1  # the student side's frames to the broker
_COUNTS_CPU = os.getpid() == 1  # the first process of a PID namespace sees all of its /proc
_MAX_FRAME = 64 * 1024**2
_MAX_RUN_BYTES = 256 * 1024**2  # what the grader reads of one sandbox (sandbox.MAX_RUN_BYTES)


def _frame(payload: bytes) -> bytes:
    return b"%08x" % len(payload) + payload


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[_write(fd, data) :]


def send(message: dict[str, Any]) -> None:
    """One frame from the student side to the broker: 8 hex digits of length, then JSON."""
    import wire

    _write_all(_UP, _frame(wire.dumps(message).encode()))


def main(argv: list[str]) -> None:
    global _RESULT_FD
    _RESULT_FD = int(argv[1])
    # Not dumpable before any student code runs, inherited by every fork: no process of the
    # sandbox (same uid) may open another's /proc/PID/mem, fd or environ, or ptrace it
    # (seccomp denies ptrace, process_vm_* and pidfd_getfd too). A student's fork may make
    # itself dumpable again; its parents, which hold the item inputs to come, stay closed.
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    os.chdir(os.environ.get("TORCHLIGHT_SANDBOX_WORK", "/sandbox"))
    _setrlimit(resource.RLIMIT_CORE, (0, 0))
    import numpy  # noqa: F401  - imported once here, before the forks
    import wire
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    import torchlight  # noqa: F401

    request = wire.loads(sys.stdin.buffer.readline().decode())
    deadline = _monotonic() + float(request["budget"])
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    with contextlib.suppress(OSError, AttributeError):  # orphans come back to us
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    down_r, down_w = os.pipe()
    up_broker, up_student = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    # every chunk the broker receives carries its sender's PID, stamped by the kernel
    up_broker.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    up_r, up_w = up_broker.detach(), up_student.detach()
    pacing = _pacing(int(request.get("paced_bytes") or 0))
    if _fork() == 0:  # the student side: neither the grader's stdin nor its result pipe
        global _UP
        os.close(down_w)
        os.close(up_r)
        os.close(_RESULT_FD)
        if pacing is not None:  # the student side's ends: it reads "go" and answers "back"
            import runners

            os.close(pacing.pop("go_w"))
            os.close(pacing.pop("back_r"))
            runners.PROTECTED["pacing"] = pacing
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        _UP = up_w
        _mainline(shell, request, deadline, os.fdopen(down_r, "rb"))  # never returns
    os.close(down_r)
    os.close(up_w)
    if pacing is not None:
        os.close(pacing.pop("go"))
        os.close(pacing.pop("back"))
        pacing["go"], pacing["back"] = pacing.pop("go_w"), pacing.pop("back_r")
    _broker(down_w, up_r, pacing)


def _pacing(size: int) -> dict[str, Any] | None:
    """For a paced speed item (:mod:`paced`): a memory region of ``size`` bytes that the broker
    and the student side share, and the ``go`` and ``back`` pipes, both ends of each (each side
    closes the ends it does not use once forked). None when no item of this sandbox needs it."""
    if size <= 0:
        return None
    go, go_w = os.pipe()
    back_r, back = os.pipe()
    region = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
    return {"region": region, "go": go, "go_w": go_w, "back": back, "back_r": back_r}


class _Broker:
    """What the broker knows: the main line's PID (the sender of the ``cells`` frame), the item
    being run (its id and nonce) and the result frames that came for it, by sender PID."""

    def __init__(self) -> None:
        self.mainline: int | None = None
        self.item: tuple[str, str] | None = None  # (id, nonce) of the item being run
        self.results: dict[int, Any] = {}  # sender PID -> its first result frame for the item
        self.cpu_start = 0.0  # the student side's CPU seconds when the item was passed on
        self.paced: dict[str, Any] | None = None  # a speed item's case and deadline (paced.py)
        self.measured: dict[str, Any] | None = None  # what the broker measured for it

    def from_grader(self, message: dict[str, Any]) -> dict[str, Any]:
        """A grader line as the student side gets it: an item without its nonce (and a speed
        item without its seed and the protocol's source: the broker paces it)."""
        if "nonce" in message:
            self.item, self.results = (str(message["id"]), str(message["nonce"])), {}
            self.cpu_start = _student_cpu() if _COUNTS_CPU else 0.0
            self.paced, self.measured = None, None
            spec = message.get("spec")
            if isinstance(spec, dict) and spec.get("runner") == "speed":  # paced, whatever came
                args = _speed_args(message.get("cases"))
                deadline = _monotonic() + max(0.0, float(message.get("timeout") or 0) - 3.0)
                self.paced = {"args": args, "deadline": deadline}
                cases = [{"args": [None, *args[1:-1], ""]}] if args is not None else []
                message = {**message, "cases": cases}
            return {k: v for k, v in message.items() if k != "nonce"}
        return message

    def serve(self, pacing: dict[str, Any]) -> None:
        """The student side said its speed item is ready: time it (:func:`paced.measure`),
        once per item."""
        if self.paced is None or self.measured is not None:
            return
        import paced

        if not _COUNTS_CPU or self.paced["args"] is None:
            why = "no case" if self.paced["args"] is None else (
                "speed items are not timed without a sandbox: the grader cannot count the CPU "
                "time of all the notebook's processes")  # fmt: skip
            self.measured = {"pairs": [], "failed": why, "paced": True}
            _write(pacing["go"], b"e")  # the student side waits for "go": end it now, not at
            return  # the item's timeout (it said ready, so it reads this "e" as its own end)
        try:
            self.measured = paced.measure(self.paced["args"], pacing, self.paced["deadline"],
                                          _student_cpu)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the broker outlives what it measures
            self.measured = {"pairs": [], "failed": f"the sandbox could not time it: {exc!r}",
                             "paced": True}  # fmt: skip

    def paced_cases(self, cases: Any) -> list[dict[str, Any]]:
        """A speed item's result as the grader gets it: the measurement is the broker's; of
        what the student side sent, only its error, or what its compiled kernel is."""
        sent = cases[0] if isinstance(cases, list) and cases and isinstance(cases[0], dict) else {}
        if "error" in sent:
            return [{"error": str(sent["error"])}]
        found = {k: sent[k] for k in ("object_mode", "prange_loops")
                 if isinstance(sent.get(k), int)}  # fmt: skip
        measured = self.measured or {
            "pairs": [], "failed": "your kernel was never ready to be timed", "paced": True}  # fmt: skip
        return [{**found, **measured}]

    def to_grader(self, message: Any, sender: int) -> list[dict[str, Any]]:
        """The frames to forward for one frame of the student side from PID ``sender``.

        The first ``cells`` frame (before any item) names the main line. While an item runs,
        result frames are kept by sender; the main line's status frame names the PID of the
        item's process, and only that process's first result goes on, then the status."""
        if not isinstance(message, dict):
            return []
        if "cells" in message and self.mainline is None and self.item is None:
            self.mainline = sender
            return [{"cells": message["cells"]}]
        if self.item is None:
            return []
        ident, nonce = self.item
        if message.get("result") == ident and sender != self.mainline:
            self.results.setdefault(sender, message.get("cases"))
            return []
        if message.get("status") == ident and sender == self.mainline:
            self.item = None
            out = []
            pid = message.get("pid")
            if isinstance(pid, int) and pid != self.mainline and pid in self.results:
                cases = self.results[pid]
                if self.paced is not None:
                    cases = self.paced_cases(cases)
                out.append({"result": ident, "nonce": nonce, "cases": cases})
            status = {k: message.get(k) for k in
                      ("timed_out", "signal", "exit_code", "output_bytes", "output_tail")}  # fmt: skip
            cpu = round(_student_cpu() - self.cpu_start, 3) if _COUNTS_CPU else None
            return [*out, {**status, "status": ident, "nonce": nonce, "cpu_seconds": cpu}]
        return []


def _speed_args(cases: Any) -> list[Any] | None:
    """A speed item's one case, as the grader sends it (:func:`paced.measure`); None if the
    cases are not that."""
    if isinstance(cases, list) and len(cases) == 1 and isinstance(cases[0], dict):
        args = cases[0].get("args")
        if isinstance(args, list) and len(args) == 8:
            return args
    return None


def _student_cpu() -> float:
    """CPU seconds the student side has used so far, every thread and process of it, as the
    kernel counts them (the broker's own excepted): each live process's time and that of the
    children it reaped, from ``/proc``, plus what the broker reaped (the main line, orphans).
    A process auto-reaped by a parent that ignores SIGCHLD is not counted: the item's wall
    clock, kept by the grader, still bounds it."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended meanwhile: its time is in its reaper's count now
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total / ticks + reaped.ru_utime + reaped.ru_stime


def _broker(down: int, up: int, pacing: dict[str, Any] | None = None) -> None:
    """Carry lines from the grader to the student side and frames back (see the module's
    docstring), and reap every process that ends (ours and orphans), until the grader closes
    its end of stdin (it is done, or it died) or no process is left: then return, and the
    kernel kills every process left in this PID namespace (a daemon an answer started).

    As the namespace's first process this one ignores the parent-death signal bwrap's
    ``--die-with-parent`` relies on, so it watches stdin instead."""
    os.set_blocking(down, False)
    state, inbox, outbox = _Broker(), bytearray(), bytearray()
    upbox: dict[int, bytearray] = {}  # sender PID -> what it sent that is not a frame yet
    dropped: set[int] = set()
    received = 0
    sock = socket.socket(fileno=up)
    ucred = struct.calcsize("iII")
    reading_up, writing = True, False
    watch = select.poll()
    watch.register(0, select.POLLIN)
    watch.register(up, select.POLLIN)
    if pacing is not None:
        watch.register(pacing["back"], select.POLLIN)
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        if bool(outbox) != writing:  # watch the main line's pipe only while there is news
            writing = bool(outbox)
            if writing:
                watch.register(down, select.POLLOUT)
            else:
                watch.unregister(down)
        for fd, event in watch.poll(100):
            if fd == 0:
                chunk = os.read(0, 1 << 20) if event & select.POLLIN else b""
                if not chunk:
                    return  # the grader is done, or gone
                inbox += chunk
                while (end := inbox.find(b"\n")) >= 0:
                    outbox += _line_for_student(state, bytes(inbox[:end]))
                    del inbox[: end + 1]
            elif fd == up and reading_up:
                chunk, sender = b"", 0
                if event & select.POLLIN:
                    chunk, ancillary, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(ucred))
                    for level, kind, data in ancillary:
                        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS):
                            sender = struct.unpack("iII", data[:ucred])[0]
                if not chunk:
                    reading_up = False  # every copy of the student side's end is closed
                    watch.unregister(up)
                    continue
                received += len(chunk)
                if received > _MAX_RUN_BYTES:  # as the grader would: nothing more is read
                    reading_up = False
                    watch.unregister(up)
                    continue
                if sender in dropped:
                    continue
                box = upbox.setdefault(sender, bytearray())
                box += chunk
                if not _forward(state, box, sender):
                    dropped.add(sender)  # a malformed frame: nothing more of it is read
                    del upbox[sender]
            elif pacing is not None and fd == pacing["back"]:
                chunk = os.read(fd, 4096) if event & select.POLLIN else b""
                if not chunk:
                    watch.unregister(fd)  # every student process is gone
                elif b"r" in chunk:
                    state.serve(pacing)
            elif fd == down:
                try:
                    del outbox[: os.write(down, outbox)]
                except BlockingIOError:
                    pass
                except OSError:  # the main line is gone: nobody will read it
                    outbox.clear()


def _line_for_student(state: _Broker, line: bytes) -> bytes:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return b""
    if not isinstance(message, dict):
        return b""
    return json.dumps(state.from_grader(message)).encode() + b"\n"


def _forward(state: _Broker, upbox: bytearray, sender: int) -> bool:
    """Forward what the frames complete in ``upbox`` (from PID ``sender``) call for; False
    once a malformed one came."""
    while len(upbox) >= 8:
        try:
            size = int(upbox[:8], 16)
        except ValueError:
            return False
        if size > _MAX_FRAME:
            return False
        if len(upbox) < 8 + size:
            return True
        payload = bytes(upbox[8 : 8 + size])
        del upbox[: 8 + size]
        try:
            message = json.loads(payload)
        except (ValueError, RecursionError):
            return False
        for out in state.to_grader(message, sender):
            _write_all(_RESULT_FD, _frame(json.dumps(out).encode()))
    return True


def _limit(cpu_seconds: float, limits: dict[str, Any], processes: int | None = None) -> None:
    """CPU seconds (never above what the process already has: limits only go down), memory,
    file size and processes (``processes``: an item's own, lower bound; 1 lets it start none)."""
    _, hard = _getrlimit(resource.RLIMIT_CPU)
    cpu = int(cpu_seconds) + 1
    if hard != resource.RLIM_INFINITY:
        cpu = min(cpu, hard - 1)
    nproc = limits["processes"] if processes is None else min(processes, limits["processes"])
    _setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    _setrlimit(resource.RLIMIT_AS, (limits["memory"], limits["memory"]))
    _setrlimit(resource.RLIMIT_FSIZE, (limits["output"], limits["output"]))
    _setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _redirect(path: str) -> None:
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _tail(path: str, n: int = 1500) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, _size(path) - n))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _mainline(shell: Any, request: dict[str, Any], deadline: float, items: Any) -> None:
    """Run the cells with a checkpoint fork per cell, then the items the grader sends."""
    try:
        limits = request["limits"]
        # before any cell: numba reads NUMBA_ENABLE_CUDASIM once, when numba.cuda is imported
        environ = request.get("environ") or {}
        os.environ.update({str(k): str(v) for k, v in environ.items()})
        records: list[dict[str, Any]] = []
        for index, cell in enumerate(request["cells"]):
            timeout = min(float(limits["cell_timeout"]), max(0.0, deadline - _monotonic()))
            read_end, write_end = os.pipe()
            pid = _fork()
            if pid == 0:  # run the cell; on success this process becomes the main line
                os.close(read_end)
                _setpgid(0, 0)
                _limit(max(0.0, deadline - _monotonic()), limits)  # the wall clock is ours
                _redirect(f"output-cell-{index}.txt")
                records.append(_run_cell(shell, index, cell))
                records[-1]["output_bytes"] = _size(f"output-cell-{index}.txt")
                with contextlib.suppress(OSError):  # the cell may have killed its parent
                    os.write(write_end, b"done")
                    os.close(write_end)
                continue
            os.close(write_end)
            finished = _wait_for_word(read_end, timeout)
            os.close(read_end)
            if finished:
                _exit(0)  # the child carries on; it is re-parented to the reaper
            with contextlib.suppress(OSError):
                _killpg(pid, signal.SIGKILL)
            records.append(
                {
                    "index": index,
                    "name": cell["name"],
                    "status": "timeout" if finished is None else "ended",
                    "output_bytes": _size(f"output-cell-{index}.txt"),
                }
            )
        _redirect("output-mainline.txt")
        import wire

        send({"cells": records})
        while True:
            line = items.readline()  # from the broker: the next item, without its nonce
            if not line:
                break
            item = wire.loads(line.decode())
            if item.get("end"):
                break
            _run_item(shell, item, limits)
    finally:
        _exit(0)


def _wait_for_word(fd: int, timeout: float) -> bool | None:
    """True when the cell's process wrote ``done``; False when it ended first; None on timeout."""
    deadline = _monotonic() + timeout
    while True:
        remaining = deadline - _monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = _select([fd], [], [], min(remaining, 1.0))
        if ready:
            return os.read(fd, 4) == b"done"


def _run_cell(shell: Any, index: int, cell: dict[str, str]) -> dict[str, Any]:
    from runners import describe_exception

    filename = f"<cell {cell['name']}>"
    record: dict[str, Any] = {"index": index, "name": cell["name"], "status": "ok"}
    try:
        source = shell.transform_cell(cell["source"])
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile(source, filename, "exec")
        with shell.builtin_trap:
            exec(code, shell.user_ns)
    except BaseException as exc:  # the student's cell failed; later cells still run
        record["status"] = "error"
        record["error"] = describe_exception(exc)
        record["exhausted"] = isinstance(exc, MemoryError | RecursionError)
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    return record


def _run_item(shell: Any, item: dict[str, Any], limits: dict[str, Any]) -> None:
    ident, timeout = item["id"], float(item["timeout"])
    output = f"output-{ident}.txt"
    pid = _fork()
    if pid == 0:
        try:
            _setpgid(0, 0)
            _redirect(output)
            # an item may have less CPU time than wall time (a training budget) and no forks
            _limit(float(item.get("cpu") or timeout), limits, item.get("processes"))
            cases = _call(shell, item)
            try:
                send({"result": ident, "cases": cases})
            except BaseException as exc:  # e.g. a value wire cannot encode
                error = {"error": f"the grader could not read your result: {exc}"}
                send({"result": ident, "cases": [error] * len(cases)})
        finally:
            _exit(0)
    with contextlib.suppress(OSError):
        _setpgid(pid, pid)
    status = _wait(pid, timeout)
    status.update(status=ident, pid=pid, output_bytes=_size(output), output_tail=_tail(output))
    send(status)


def _call(shell: Any, item: dict[str, Any]) -> list[dict[str, Any]]:
    from runners import describe_exception, run

    results = []
    for case in item["cases"]:
        try:
            results.append(run(item["spec"], shell.user_ns, case))
        except BaseException as exc:
            results.append({"error": describe_exception(exc)})
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
    return results


def _wait(pid: int, timeout: float) -> dict[str, Any]:
    """Wait for an item's process; kill its whole process group when time is up."""
    deadline = _monotonic() + timeout
    status: dict[str, Any] = {"timed_out": False}
    while True:
        done, code = _waitpid(pid, os.WNOHANG)
        if done:
            break
        if _monotonic() > deadline:
            status["timed_out"] = True
            with contextlib.suppress(OSError):
                _killpg(pid, signal.SIGKILL)
            _, code = _waitpid(pid, 0)
            break
        _sleep(_POLL_S)
    with contextlib.suppress(OSError):
        _killpg(pid, signal.SIGKILL)  # processes the answer left behind
    status["signal"] = os.WTERMSIG(code) if os.WIFSIGNALED(code) else None
    status["exit_code"] = os.WEXITSTATUS(code) if os.WIFEXITED(code) else None
    return status


if __name__ == "__main__":
    json.loads("{}")  # json is imported before student code; wire relies on it
    main(sys.argv)
