"""The sandbox: runs a student's cells once, then calls their answers on the grader's inputs.

Started by :mod:`torchlight.grading.sandbox` as ``python -I -m torchlight.grading.child DIR``.

The cells run in notebook order, as in Jupyter, each in a fork of the process that ran the
cells before it (a *checkpoint*): if a cell finishes, its process carries on with the next
cell; if it loops forever, exhausts its limits or ends the process, it is killed or gone, and
its parent carries on from the state before that cell. So one answer that hangs or exits costs
only the items that need it. From the state after the last cell, each graded item runs in its
own fork, with its own time limit, and writes the raw outputs of its calls to
``result-ID.json``.

Nothing here is trusted by the grader: results carry only the student's raw outputs, and the
grader computes the reference values after this process has exited.
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

# Captured before any student code runs: patching the modules later does not reach these.
_fork, _exit, _waitpid, _killpg, _setpgid = os.fork, os._exit, os.waitpid, os.killpg, os.setpgid
_monotonic, _sleep, _select = time.monotonic, time.sleep, select.select

_POLL_S = 0.01
_PR_SET_CHILD_SUBREAPER = 36


def main(workdir: str) -> None:
    os.chdir(workdir)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    import numpy  # noqa: F401  - imported once here, before the forks
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    import torchlight  # noqa: F401
    from torchlight.grading import registry, wire

    with open("request.json", encoding="utf-8") as f:
        request = wire.loads(f.read())
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    checks = registry.checks_for(request["notebook"])
    with contextlib.suppress(OSError, AttributeError):  # orphans come back to us, not to init
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if _fork() == 0:
        _mainline(shell, checks, request)  # never returns
    _reap_until_done()


def _reap_until_done() -> None:
    """Collect every process that ends (ours and orphans) until the items are done."""
    while not os.path.exists("done"):
        try:
            pid, _ = _waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # nothing left at all
        if pid == 0:
            _sleep(_POLL_S)


def _limit(cpu_seconds: float, limits: dict[str, Any]) -> None:
    cpu = int(cpu_seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory"], limits["memory"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["output"], limits["output"]))


def _redirect(path: str) -> None:
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)


def _mainline(shell: Any, checks: dict[str, Any], request: dict[str, Any]) -> None:
    """Run the cells with a checkpoint fork per cell, then the items; then say ``done``."""
    try:
        limits = request["limits"]
        budget = float(limits["cell_timeout"]) + sum(float(i["timeout"]) for i in request["items"])
        records: list[dict[str, Any]] = []
        for index, cell in enumerate(request["cells"]):
            read_end, write_end = os.pipe()
            pid = _fork()
            if pid == 0:  # run the cell; on success this process becomes the main line
                os.close(read_end)
                _setpgid(0, 0)
                _limit(budget, limits)
                _redirect(f"output-cell-{index}.txt")
                records.append(_run_cell(shell, index, cell))
                with contextlib.suppress(OSError):  # the cell may have killed its parent
                    os.write(write_end, b"done")
                    os.close(write_end)
                continue
            os.close(write_end)
            finished = _wait_for_word(read_end, pid, float(limits["cell_timeout"]))
            os.close(read_end)
            if finished:
                _exit(0)  # the child carries on; it is re-parented to the reaper
            reason = "timeout" if finished is None else "ended"
            with contextlib.suppress(OSError):
                _killpg(pid, signal.SIGKILL)
            records.append({"index": index, "name": cell["name"], "status": reason})
        _redirect("output-mainline.txt")
        with open("cells.json", "w", encoding="utf-8") as f:
            json.dump(records, f)
        for item in request["items"]:
            _run_item(shell, checks[item["id"]], item, records, limits)
    finally:
        with contextlib.suppress(BaseException):
            open("done", "w").close()
        _exit(0)


def _wait_for_word(fd: int, pid: int, timeout: float) -> bool | None:
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
    from torchlight.grading.checks import describe_exception

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


def _run_item(
    shell: Any,
    check: Any,
    item: dict[str, Any],
    records: list[dict[str, Any]],
    limits: dict[str, Any],
) -> None:
    open(f"started-{item['id']}", "w").close()
    pid = _fork()
    if pid == 0:
        try:
            _setpgid(0, 0)
            _limit(float(item["timeout"]), limits)
            _redirect(f"output-{item['id']}.txt")
            payload = _dumps({"cells": records, "cases": _call(shell, check, item)})
            with open(f"result-{item['id']}.json", "w", encoding="utf-8") as f:
                f.write(payload)
        finally:
            _exit(0)
    with contextlib.suppress(OSError):
        _setpgid(pid, pid)
    status = _wait(pid, float(item["timeout"]))
    with open(f"status-{item['id']}.json", "w", encoding="utf-8") as f:
        json.dump(status, f)


def _call(shell: Any, check: Any, item: dict[str, Any]) -> list[dict[str, Any]]:
    from torchlight.grading.checks import Case, describe_exception

    results = []
    for raw in item["cases"]:
        case = Case(
            list(raw["args"]), raw["grad_output"], tuple(raw["differentiable"]), tuple(raw["names"])
        )
        try:
            results.append(check.run(shell.user_ns, case))
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


def _dumps(result: dict[str, Any]) -> str:
    from torchlight.grading import wire

    try:
        return wire.dumps(result)
    except BaseException as exc:  # e.g. a value wire cannot encode: report it, keep the rest
        cases = [{"error": f"the grader could not read your result: {exc}"}] * len(result["cases"])
        return wire.dumps({"cells": result["cells"], "cases": cases})


if __name__ == "__main__":
    main(sys.argv[1])
