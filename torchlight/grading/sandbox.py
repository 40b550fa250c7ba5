"""Starting sandboxes from the grader: a fresh process, resource limits, a clean environment.

What the sandbox guarantees: student code never runs in the grader's process, each graded item
runs in its own process with a wall-clock timeout, a CPU-time limit, an address-space limit and
a cap on output and written files, and a crashed, hung or exhausted item does not stop the
others. Where the grader may create Linux namespaces (root, ``unshare`` available) the sandbox
also gets its own PID namespace (it cannot see or signal the grader; every process it started
dies with it), its own /proc, and no network.

What it does not guarantee: the sandbox runs as the grader's OS user. Code in it can read and
write whatever that user can (the gradebook, the course files). Run the autograder as a
dedicated user inside a container to close that gap (see the README).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torchlight.grading import wire

_STARTUP_S = 20.0  # importing numpy/torchlight/IPython in a cold sandbox
MAX_RESULT_BYTES = 64 * 1024**2


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed item (or one notebook run)."""

    memory: int = 2 * 1024**3  # RLIMIT_AS, bytes
    output: int = 1024**2  # RLIMIT_FSIZE: printed output and any file written, bytes
    cell_timeout: float = 30.0  # wall-clock seconds one cell may run before it is skipped


@dataclass
class Outcome:
    """What became of one item: its decoded result, or why there is none."""

    result: dict[str, Any] | None = None
    problem: str | None = None
    output_bytes: int = 0
    output_tail: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class CellRecord:
    """What became of one cell in the sandbox: ``ok``, ``error``, ``timeout`` (killed and
    skipped), ``ended`` (the process exited; skipped) or ``not run``."""

    name: str
    status: str
    error: str = ""
    exhausted: bool = False  # ran out of memory or printed past the output limit
    output_bytes: int = 0


@dataclass
class Run:
    """One notebook's sandbox run: the cells' records and each item's outcome."""

    cells: list[CellRecord] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)


@functools.cache
def namespaces_available() -> bool:
    """Whether ``unshare`` can give the sandbox its own PID, mount and network namespaces."""
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(
            [*namespace_prefix(), "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def namespace_prefix(network: bool = False) -> list[str]:
    prefix = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--ipc"]
    return prefix if network else [*prefix, "--net"]


def clean_env(workdir: str) -> dict[str, str]:
    """A minimal environment: no grader secrets, single-threaded BLAS, caches in ``workdir``."""
    return {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMBA_NUM_THREADS": "1",
        "NUMBA_CACHE_DIR": os.path.join(workdir, ".numba"),
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
        "IPYTHONDIR": os.path.join(workdir, ".ipython"),
        "JUPYTER_RUNTIME_DIR": os.path.join(workdir, ".jupyter-runtime"),
        "JUPYTER_DATA_DIR": os.path.join(workdir, ".jupyter-data"),
        "JUPYTER_CONFIG_DIR": os.path.join(workdir, ".jupyter-config"),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }


def start(
    module: str, workdir: str, use_namespaces: bool | None, network: bool = False
) -> subprocess.Popen:
    """Start ``python -I -m module workdir`` in its own session (and namespaces, if possible)."""
    if use_namespaces is None:
        use_namespaces = namespaces_available()
    prefix = namespace_prefix(network) if use_namespaces else []
    log = open(os.path.join(workdir, "sandbox.log"), "wb")  # noqa: SIM115 - closed by the caller
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-I", "-m", module, workdir],
        cwd=workdir,
        env=clean_env(workdir),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    return proc


def wait(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to ``timeout`` s; on expiry kill the sandbox's process group. True if it timed out."""
    try:
        proc.wait(timeout=timeout)
        return False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything left in its session


def read_capped(path: str, limit: int) -> str | None:
    """The file's text if it exists and is at most ``limit`` bytes, else None."""
    try:
        if os.path.getsize(path) > limit:
            return None
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def tail(path: str, n: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - n))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_items(
    notebook: str,
    cells: Sequence[dict[str, str]],
    items: Sequence[dict[str, Any]],
    limits: Limits,
    use_namespaces: bool | None = None,
) -> Run:
    """Run the cells once and then each item, in a sandbox; collect one :class:`Outcome` per item.

    ``cells`` are ``{"name", "source"}`` in notebook order; ``items`` are
    ``{"id", "cases", "timeout"}``. Items the sandbox never reached (because something killed
    it) get one more try in a fresh sandbox.
    """
    run = Run()
    remaining = list(items)
    for attempt in range(2):
        with tempfile.TemporaryDirectory(prefix="torchlight-grade-") as work:
            request = {
                "notebook": notebook,
                "cells": list(cells),
                "items": remaining,
                "limits": {
                    "memory": limits.memory,
                    "output": limits.output,
                    "cell_timeout": limits.cell_timeout,
                },
            }
            with open(os.path.join(work, "request.json"), "w", encoding="utf-8") as f:
                f.write(wire.dumps(request))
            proc = start("torchlight.grading.child", work, use_namespaces)
            budget = (
                _STARTUP_S
                + len(cells) * (limits.cell_timeout + 1.0)
                + sum(float(item["timeout"]) + 1.0 for item in remaining)
            )
            timed_out = wait(proc, budget)
            if not run.cells:
                run.cells = _read_cells(work, cells, limits)
            not_started = []
            for item in remaining:
                if os.path.exists(os.path.join(work, f"started-{item['id']}")):
                    run.outcomes[item["id"]] = _collect(work, item, limits)
                else:
                    not_started.append(item)
            if not_started and (attempt == 1 or len(not_started) == len(remaining)):
                reason = "timed out" if timed_out else f"exited with code {proc.returncode}"
                log = tail(os.path.join(work, "sandbox.log"))
                for item in not_started:
                    run.outcomes[item["id"]] = Outcome(
                        problem=f"the grading sandbox stopped before this check ran ({reason})",
                        details={"log": log},
                    )
                not_started = []
            remaining = not_started
        if not remaining:
            break
    return run


def _read_cells(work: str, cells: Sequence[dict[str, str]], limits: Limits) -> list[CellRecord]:
    """What became of each cell: the sandbox's account, and the output size measured here."""
    text = read_capped(os.path.join(work, "cells.json"), MAX_RESULT_BYTES)
    try:
        reported = wire.loads(text) if text else []
    except wire.WireError:
        reported = []
    by_index = (
        {r.get("index"): r for r in reported if isinstance(r, dict)}
        if isinstance(reported, list)
        else {}
    )
    records = []
    for index, cell in enumerate(cells):
        path = os.path.join(work, f"output-cell-{index}.txt")
        size = os.path.getsize(path) if os.path.exists(path) else 0
        r = by_index.get(index, {})
        records.append(
            CellRecord(
                name=cell["name"],
                status=str(r.get("status", "not run")),
                error=str(r.get("error", "")),
                exhausted=bool(r.get("exhausted")) or size >= limits.output,
                output_bytes=size,
            )
        )
    return records


def _collect(work: str, item: dict[str, Any], limits: Limits) -> Outcome:
    ident = item["id"]
    output_path = os.path.join(work, f"output-{ident}.txt")
    size = os.path.getsize(output_path) if os.path.exists(output_path) else 0
    outcome = Outcome(output_bytes=size, output_tail=tail(output_path, 1500))
    status_text = read_capped(os.path.join(work, f"status-{ident}.json"), 10_000)
    try:
        status = wire.loads(status_text) if status_text else {}
    except wire.WireError:
        status = {}
    outcome.details = status if isinstance(status, dict) else {}
    timeout = float(item["timeout"])
    if outcome.details.get("timed_out"):
        outcome.problem = (
            f"your code was stopped after {timeout:g} s (an infinite loop, or far too slow)"
        )
        return outcome
    if size >= limits.output:
        outcome.problem = (
            f"your code printed or wrote more than {limits.output // 1024} KiB; remove the "
            "large prints"
        )
        return outcome
    text = read_capped(os.path.join(work, f"result-{ident}.json"), MAX_RESULT_BYTES)
    if text is None:
        sig = outcome.details.get("signal")
        if sig == signal.SIGXCPU:
            outcome.problem = "your code used too much CPU time (an infinite loop?)"
        elif sig is not None:
            outcome.problem = f"your code was killed by signal {signal.Signals(sig).name}"
        else:
            code = outcome.details.get("exit_code")
            outcome.problem = (
                f"your code ended the Python process (exit code {code}) before the check "
                "finished: do not call os._exit, sys.exit or kill processes in an answer"
            )
        return outcome
    try:
        result = wire.loads(text)
    except wire.WireError as exc:
        outcome.problem = f"the grader could not read the results of your code ({exc})"
        return outcome
    if not isinstance(result, dict) or not isinstance(result.get("cases"), list):
        outcome.problem = "the grader could not read the results of your code"
        return outcome
    outcome.result = result
    return outcome
