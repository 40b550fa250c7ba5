"""The sandbox's own program: runs a student's cells once, then calls their answers.

Started by :mod:`torchlight_grader.sandbox` inside bubblewrap as
``python -I -B /opt/torchlight-sandbox/child.py FD``. It sees only this folder (``child.py``,
``runners.py``, ``wire.py``: no references, no checks), the student-facing ``torchlight``
library, the Python environment (read-only) and an empty private work dir.

Protocol (everything untrusted by the grader):

- stdin, one JSON line each: first ``{"cells", "limits", "budget"}``; then, one at a time,
  ``{"id", "nonce", "spec", "cases", "timeout"}`` for the next item, or ``{"end": true}``;
- file descriptor ``FD`` (a pipe the grader holds), length-prefixed frames: ``{"cells": [...]}``
  once the cells ran, then per item ``{"result": id, "nonce", "cases"}`` written by the item's
  own process after its calls returned, and ``{"status": id, "nonce", ...}`` from the main line
  once that process has ended.

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
import os
import resource
import select
import signal
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Captured before any student code runs: patching the modules later does not reach these.
_fork, _exit, _waitpid, _killpg, _setpgid = os.fork, os._exit, os.waitpid, os.killpg, os.setpgid
_write, _monotonic, _sleep, _select = os.write, time.monotonic, time.sleep, select.select

_POLL_S = 0.01
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_DUMPABLE = 4
_RESULT_FD = -1


def send(message: dict[str, Any]) -> None:
    """One frame to the grader: 8 hex digits of length, then the JSON text."""
    import wire

    payload = wire.dumps(message).encode()
    data = b"%08x" % len(payload) + payload
    while data:
        data = data[_write(_RESULT_FD, data) :]


def main(argv: list[str]) -> None:
    global _RESULT_FD
    _RESULT_FD = int(argv[1])
    # Not dumpable before any student code runs, inherited by every fork: no process of the
    # sandbox (same uid) may open another's /proc/PID/mem, fd or environ, or ptrace it
    # (seccomp denies ptrace, process_vm_* and pidfd_getfd too). A student's fork may make
    # itself dumpable again; its parents, which hold the item inputs to come, stay closed.
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    os.chdir(os.environ.get("TORCHLIGHT_SANDBOX_WORK", "/sandbox"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
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
    if _fork() == 0:
        _mainline(shell, request, deadline)  # never returns
    _reap_until_the_grader_is_gone()


def _reap_until_the_grader_is_gone() -> None:
    """Reap every process that ends (ours and orphans) until none is left, or until the
    grader closes its end of stdin (it is done, or it died): then return, and the kernel kills
    every process left in this PID namespace (a daemon an answer started) with this one.

    As the namespace's first process this one ignores the parent-death signal bwrap's
    ``--die-with-parent`` relies on, so it watches stdin instead (without reading it: the
    main line reads the items from it)."""
    watch = select.poll()
    watch.register(0, 0)  # POLLHUP and POLLERR are always reported
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        if watch.poll(100):
            return


def _limit(cpu_seconds: float, limits: dict[str, Any]) -> None:
    """CPU seconds (never above what the process already has: limits only go down), memory,
    file size and processes."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    cpu = int(cpu_seconds) + 1
    if hard != resource.RLIM_INFINITY:
        cpu = min(cpu, hard - 1)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory"], limits["memory"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["output"], limits["output"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))


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


def _mainline(shell: Any, request: dict[str, Any], deadline: float) -> None:
    """Run the cells with a checkpoint fork per cell, then the items the grader sends."""
    try:
        limits = request["limits"]
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
            line = sys.stdin.buffer.readline()
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
    ident, nonce, timeout = item["id"], item["nonce"], float(item["timeout"])
    output = f"output-{ident}.txt"
    pid = _fork()
    if pid == 0:
        try:
            _setpgid(0, 0)
            _redirect(output)
            _limit(timeout, limits)
            cases = _call(shell, item)
            try:
                send({"result": ident, "nonce": nonce, "cases": cases})
            except BaseException as exc:  # e.g. a value wire cannot encode
                error = {"error": f"the grader could not read your result: {exc}"}
                send({"result": ident, "nonce": nonce, "cases": [error] * len(cases)})
        finally:
            _exit(0)
    with contextlib.suppress(OSError):
        _setpgid(pid, pid)
    status = _wait(pid, timeout)
    status.update(status=ident, nonce=nonce, output_bytes=_size(output), output_tail=_tail(output))
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
