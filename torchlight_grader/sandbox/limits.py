"""What one sandbox may use (:class:`Limits`), and the memory cgroup that holds every sandbox of
one grading process together (:func:`memory_cgroup`).

The bottom of the grading side: it imports nothing of ``torchlight_grader``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


class SandboxUnavailableError(RuntimeError):
    """The bubblewrap sandbox cannot be built here: grading refuses to start."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one notebook's sandbox."""

    memory: int = 2 * 1024**3  # RLIMIT_AS per process, bytes
    output: int = 1024**2  # RLIMIT_FSIZE: printed output and any file written, bytes
    cell_timeout: float = 30.0  # wall-clock seconds one cell may run before it is skipped
    budget: float = 300.0  # wall-clock seconds for the whole notebook, however many cells
    processes: int = 256  # RLIMIT_NPROC
    tmpfs: int = 256 * 1024**2  # size of each private tmpfs (work dir, /tmp, /dev/shm)
    #: memory (resident, tmpfs files included) of all sandboxes of this grading process
    #: together, enforced by a memory cgroup where the host allows one (:func:`memory_cgroup`)
    total_memory: int = field(default_factory=lambda: _total_memory_default())
    #: everything one sandbox makes the kernel hold (its processes' memory, its tmpfs files and
    #: their inodes, its page cache), in a memory cgroup of its own inside ``total_memory``
    sandbox_memory: int = 3 * 1024**3


# ------------------------------------------------------------------------------ memory cgroup
MEMORY_ENV = "TORCHLIGHT_GRADER_MEMORY_MAX"
_CGROUP_ROOT = "/sys/fs/cgroup"


def _total_memory_default() -> int:
    """``TORCHLIGHT_GRADER_MEMORY_MAX`` (bytes, or with a K/M/G suffix), else 8 GiB."""
    value = os.environ.get(MEMORY_ENV, "").strip().upper()
    if not value:
        return 8 * 1024**3
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(value[-1:], 1)
    try:
        return int(float(value.rstrip("KMG")) * scale)
    except ValueError:
        raise SandboxUnavailableError(
            f"{MEMORY_ENV}={value!r}: expected bytes or a size such as 8G"
        ) from None


@functools.cache
def memory_cgroup(limit: int) -> tuple[str | None, str]:
    """A memory cgroup of ``limit`` bytes for this process's sandboxes: ``(its cgroup.procs,
    "")``, or ``(None, why there is none)``. cgroup v2: a child of this process's own cgroup
    (it must be delegated to this user with the memory controller enabled, as
    ``systemd-run --user --scope -p Delegate=yes`` or an administrator gives it); v1: a child
    of this process's cgroup in the memory hierarchy (writable by root)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as exc:
        return None, f"cannot read /proc/self/cgroup ({exc})"
    parts = [line.split(":", 2) for line in lines if line.count(":") >= 2]
    v1 = [p for h, c, p in parts if "memory" in c.split(",")]
    v2 = [p for h, c, p in parts if h == "0" and c == ""]
    if v1:
        base, limit_file = Path(_CGROUP_ROOT, "memory", v1[0].lstrip("/")), "memory.limit_in_bytes"
    elif v2 and "memory" in _read(Path(_CGROUP_ROOT, "cgroup.controllers")):
        base, limit_file = Path(_CGROUP_ROOT, v2[0].lstrip("/")), "memory.max"
    else:
        return None, "the host has no memory controller for this process's cgroup"
    group = base / f"torchlight-grader-{os.getpid()}-{limit}"
    try:
        group.mkdir(exist_ok=True)
        (group / limit_file).write_text(str(limit))
        if limit_file == "memory.max":
            (group / "memory.swap.max").write_text("0")
    except OSError as exc:
        with contextlib.suppress(OSError):
            group.rmdir()
        return None, f"cannot create a memory cgroup under {base} ({exc.strerror or exc})"
    atexit.register(_remove_cgroup, group)
    return str(group / "cgroup.procs"), ""


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _remove_cgroup(group: Path) -> None:
    """End whatever still runs in the group (at exit: spare sandboxes), then remove it (its
    sandboxes' own groups first)."""
    with contextlib.suppress(OSError):
        for child in [c for c in group.iterdir() if c.is_dir()]:
            _remove_cgroup(child)
    with contextlib.suppress(OSError):
        (group / "cgroup.kill").write_text("1")  # cgroup v2 (Linux 5.14+): every member at once
    with contextlib.suppress(OSError, ValueError):
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # killed members are still leaving


_WARNED: set[str] = set()


def join_cgroup(limits: Limits, *pids: int | None) -> Path | None:
    """Move ``pids`` (a sandbox's bwrap and its program, before any student code) into a memory
    cgroup of their own (``limits.sandbox_memory``) inside this process's group
    (``limits.total_memory``), or say once why there is none. Returns the sandbox's own group,
    for :func:`leave_cgroup` when the sandbox has ended (None: no group of its own)."""
    procs, why = memory_cgroup(limits.total_memory)
    if procs is None:
        if why not in _WARNED:
            _WARNED.add(why)
            print(
                f"torchlight grader: no memory cgroup ({why}): each sandbox process is limited "
                f"(RLIMIT_AS {limits.memory // 1024**2} MiB) and each tmpfs in size, not what "
                "the kernel holds for a sandbox (its files' inodes) nor all of them together. "
                "Run the grader in one: `systemd-run --scope -p MemoryMax=8G make "
                "course-grade`, or in a cgroup v2 subtree delegated to the grading user.",
                file=sys.stderr,
            )
        return None
    group = _sandbox_group(Path(procs).parent, limits.sandbox_memory)
    target = (group or Path(procs).parent) / "cgroup.procs"
    for pid in pids:
        if pid is not None:
            with contextlib.suppress(OSError):  # it has ended already
                target.write_text(str(pid))
    return group


def _sandbox_group(parent: Path, limit: int) -> Path | None:
    """A new child of ``parent`` limited to ``limit`` bytes, or None where it cannot be made."""
    v2 = (parent / "memory.max").exists()
    group = parent / f"sandbox-{secrets.token_hex(8)}"
    try:
        if v2:  # the children get the memory controller (the parent itself holds no process)
            (parent / "cgroup.subtree_control").write_text("+memory")
        group.mkdir()
        (group / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(limit))
        if v2:
            (group / "memory.swap.max").write_text("0")
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        return None
    return group


def leave_cgroup(group: Path | None) -> None:
    """Remove a sandbox's own group (:func:`join_cgroup`) once the sandbox has ended."""
    if group is not None:
        _remove_cgroup(group)
