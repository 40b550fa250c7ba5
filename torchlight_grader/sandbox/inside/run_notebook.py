"""Runs a whole notebook in a kernel, inside the sandbox, for the outputs shown in feedback.

Started by :class:`~torchlight_grader.nbgrader.plugins.SandboxedExecute` inside bubblewrap as
``python -I -B /opt/torchlight-sandbox/run_notebook.py FD``. Two JSON lines come on stdin: the
settings (limits, cell timeout, kernel arguments), then, once the kernel is up, the notebook.
So the sandbox and its kernel can be started before the notebook is known (the grader starts
the next notebook's sandbox while the current one runs); no student code runs before the
notebook comes, and the kernel inherits this process's resource limits and namespaces. Each
finished cell's outputs are sent at once (truncated to a size cap) as a frame on file
descriptor ``FD``, a pipe the grader holds, so whatever happens later (the kernel exits, a cell
never returns) the outputs so far survive; after the last cell comes ``{"done": true}`` (and
the grader ends the sandbox without waiting for the kernel to shut down). These outputs never
decide a grade.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

MAX_TEXT = 64 * 1024  # characters kept per text output
MAX_TRACEBACK_LINES = 40
MAX_OUTPUTS = 100  # outputs kept per cell
MAX_FILE = 64 * 1024**2  # RLIMIT_FSIZE for the runner and its kernel


class StopRunError(Exception):
    """Raised from a hook to stop the run (a cell timed out: the kernel is likely still busy)."""


def truncate(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... output truncated ({len(text) - limit} more characters) ...\n"


def shrink(output: dict[str, Any]) -> dict[str, Any]:
    """A copy of one output that fits the size caps."""
    kind = output.get("output_type")
    if kind == "stream":
        text = output.get("text", "")
        text = "".join(text) if isinstance(text, list) else str(text)
        return {
            "output_type": "stream",
            "name": output.get("name", "stdout"),
            "text": truncate(text),
        }
    if kind == "error":
        tb = [truncate(str(line), 2000) for line in output.get("traceback", [])]
        if len(tb) > MAX_TRACEBACK_LINES:
            tb = tb[:5] + ["... traceback truncated ..."] + tb[-(MAX_TRACEBACK_LINES - 6) :]
        return {
            "output_type": "error",
            "ename": truncate(str(output.get("ename", "")), 200),
            "evalue": truncate(str(output.get("evalue", "")), 2000),
            "traceback": tb,
        }
    data = {}
    for mime, value in dict(output.get("data", {})).items():
        text = "".join(value) if isinstance(value, list) else value
        size = len(text) if isinstance(text, str) else len(json.dumps(text, default=str))
        if size <= 4 * MAX_TEXT:
            data[mime] = text
    if not data:
        data = {"text/plain": "[output too large, not kept]"}
    shrunk = {"output_type": kind, "data": data, "metadata": {}}
    if kind == "execute_result":
        shrunk["execution_count"] = output.get("execution_count")
    return shrunk


def main(argv: list[str]) -> None:
    result_fd = int(argv[1])
    import ctypes

    # the runner holds the grader's pipe, the kernel (student code, a separate exec'd process,
    # which never inherits it) runs as the same uid: it may not read this process's memory or fds
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    # jsonschema imports rfc3987_syntax, if installed, only to validate IRIs; it builds a grammar
    # at import time (~3 s). Notebook validation never needs it.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    workdir = os.environ.get("TORCHLIGHT_SANDBOX_WORK", "/sandbox")
    os.chdir(workdir)
    settings = json.loads(sys.stdin.buffer.readline().decode())
    memory, cpu = int(settings["memory"]), int(settings["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE, MAX_FILE))
    processes = int(settings["processes"])
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))

    def record(entry: dict[str, Any]) -> None:
        payload = json.dumps(entry).encode()
        data = b"%08x" % len(payload) + payload
        while data:
            data = data[os.write(result_fd, data) :]

    def started(cell: Any, cell_index: int, **_: Any) -> None:
        record({"start": cell_index})

    def executed(cell: Any, cell_index: int, execute_reply: dict[str, Any], **_: Any) -> None:
        outputs = [shrink(o) for o in cell.get("outputs", [])[:MAX_OUTPUTS]]
        record({"index": cell_index, "outputs": outputs, "count": cell.get("execution_count")})
        if execute_reply.get("content", {}).get("ename") == "CellTimeoutError":
            raise StopRunError(cell_index)

    config = Config()
    config.KernelManager.transport = "ipc"  # no TCP: the sandbox has no network
    client = NotebookClient(
        nbformat.v4.new_notebook(),  # the real one comes once the kernel is up
        config=config,
        timeout=int(settings["timeout"]),
        interrupt_on_timeout=True,
        allow_errors=True,
        kernel_name="python3",
        extra_arguments=list(settings["extra_arguments"]),
        error_on_timeout={
            "ename": "CellTimeoutError",
            "evalue": "",
            "traceback": [f"CellTimeoutError: the cell ran longer than {settings['timeout']} s"],
        },
        on_cell_execute=started,
        on_cell_executed=executed,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": workdir}},
    )
    try:
        # What NotebookClient.execute does, with the wait for the notebook between the
        # kernel's start and the first cell.
        with client.setup_kernel():
            line = sys.stdin.buffer.readline()
            if not line:
                return  # a spare sandbox that was never used
            nb = nbformat.reads(json.loads(line.decode())["notebook"], as_version=4)
            client.nb = nb
            client.reset_execution_trackers()
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
            record({"done": True})
    except StopRunError:
        record({"stopped": "timeout"})
    except BaseException as exc:  # the kernel died, or nbclient gave up
        record({"stopped": type(exc).__name__, "message": str(exc)[:500]})


if __name__ == "__main__":
    main(sys.argv)
