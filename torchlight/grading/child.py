"""The sandbox: runs a student's answer cells and calls them on the grader's inputs.

Started by :mod:`torchlight.grading.sandbox` as ``python -I -m torchlight.grading.child DIR``.
It imports numpy, torchlight and IPython once, then forks one child per graded item, so each
item runs in its own process with its own resource limits and its own copy of the modules:
whatever one answer patches, crashes or exhausts stays inside that item.

Nothing here is trusted by the grader. The files it writes (``result-ID.json``) carry only the
student's raw outputs; the grader computes the reference values after this process has exited
and compares them itself.
"""

from __future__ import annotations

import contextlib
import json
import linecache
import math
import os
import resource
import signal
import sys
import time
from typing import Any

_POLL_S = 0.01


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
    for item in request["items"]:
        open(f"started-{item['id']}", "w").close()
        pid = os.fork()
        if pid == 0:
            _child(shell, checks[item["id"]], request, item)  # never returns
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        status = _wait(pid, float(item["timeout"]))
        with open(f"status-{item['id']}.json", "w", encoding="utf-8") as f:
            json.dump(status, f)


def _wait(pid: int, timeout: float) -> dict[str, Any]:
    """Wait for the item's process; kill its whole process group when time is up."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {"timed_out": False}
    while True:
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            status["timed_out"] = True
            _kill_group(pid)
            _, code = os.waitpid(pid, 0)
            break
        time.sleep(_POLL_S)
    _kill_group(pid)  # processes the answer left behind
    status["signal"] = os.WTERMSIG(code) if os.WIFSIGNALED(code) else None
    status["exit_code"] = os.WEXITSTATUS(code) if os.WIFEXITED(code) else None
    return status


def _kill_group(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def _child(shell: Any, check: Any, request: dict[str, Any], item: dict[str, Any]) -> None:
    """Run one item in a forked process: limits, the student's cells, the check's calls."""
    try:
        os.setpgid(0, 0)
        limits = request["limits"]
        cpu = math.ceil(float(item["timeout"])) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory"], limits["memory"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["output"], limits["output"]))
        out = os.open(f"output-{item['id']}.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        result = _run(shell, check, request, item)
        payload = _dumps(result)
        with open(f"result-{item['id']}.json", "w", encoding="utf-8") as f:
            f.write(payload)
    finally:
        os._exit(0)


def _dumps(result: dict[str, Any]) -> str:
    from torchlight.grading import wire

    try:
        return wire.dumps(result)
    except BaseException as exc:  # e.g. a value wire cannot encode: report it, keep the rest
        cases = [{"error": f"the grader could not read your result: {exc}"}] * len(result["cases"])
        return wire.dumps({"cells": result["cells"], "cases": cases})


def _run(shell: Any, check: Any, request: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    from torchlight.grading.checks import Case, describe_exception

    namespace = shell.user_ns
    cell_errors = []
    for index in item["cells"]:
        cell = request["cells"][index]
        filename = f"<cell {cell['name']}>"
        try:
            source = shell.transform_cell(cell["source"])
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            code = compile(source, filename, "exec")
            with shell.builtin_trap:
                exec(code, namespace)
        except BaseException as exc:  # the student's cell failed; later cells still run
            cell_errors.append(f"{filename[1:-1]}: {describe_exception(exc)}")
    cases = []
    for raw_case in item["cases"]:
        case = Case(
            list(raw_case["args"]),
            raw_case["grad_output"],
            tuple(raw_case["differentiable"]),
            tuple(raw_case["names"]),
        )
        try:
            cases.append(check.run(namespace, case))
        except BaseException as exc:
            cases.append({"error": describe_exception(exc)})
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
    return {"cells": cell_errors, "cases": cases}


if __name__ == "__main__":
    main(sys.argv[1])
