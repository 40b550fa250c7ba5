"""Starting sandboxes from the grader: bubblewrap, resource limits, one time budget per notebook.

Every process that runs student code (the feedback kernel run and the hidden checks) runs in a
bubblewrap sandbox (``/usr/bin/bwrap``, started by absolute path, never through ``PATH``):

- the file system is a fresh, empty root with read-only binds of the system (``/usr``), the
  Python installation and environment, the student-facing ``torchlight`` package, and the
  sandbox's own program (:mod:`torchlight_grader.inside`: no references, no checks); a private,
  size-limited tmpfs work dir (``/sandbox``), ``/tmp`` and ``/dev/shm``. Nothing of the course
  (sources, submissions, gradebook, ``nbgrader_config.py``) and nothing of the grader is there;
- its own user: as root the grader runs bwrap in new namespaces and the program drops to uid
  and gid 65534 with every capability gone (``setpriv``); as an unprivileged user, bwrap
  maps uid 65534 in a new user namespace (and forbids further ones);
- its own PID, IPC, network, UTS and cgroup namespaces; ``--die-with-parent`` and the PID
  namespace end every process in it when it ends;
- per-process limits on memory, CPU time, file size and processes; one wall-clock budget per
  notebook, enforced here by killing the sandbox.

Student cell sources go in through stdin; results come back only through a pipe this process
holds, as frames tagged with a fresh nonce per item. Every notebook gets sandboxes of its own;
:func:`open_sandbox` starts the next notebook's while the current one runs (a *spare*: started,
its imports done, no student code yet), so Python's start-up is off the critical path. If the
sandbox cannot be built, grading refuses to start (:class:`SandboxUnavailableError`), unless the
opt-out environment variable is set.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import secrets
import select
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchlight_grader.inside import wire

BWRAP = "/usr/bin/bwrap"
SETPRIV = "/usr/bin/setpriv"
SANDBOX_UID = 65534  # "nobody"
INSIDE = Path(__file__).resolve().parent / "inside"
INSIDE_MOUNT = "/opt/torchlight-sandbox"
WORK = "/sandbox"
OPT_OUT = "TORCHLIGHT_GRADER_UNSAFE_NO_SANDBOX"
OPT_OUT_VALUE = "students-can-forge-grades"
MAX_FRAME = 64 * 1024**2
#: Bytes one sandbox (one notebook run, or one hidden-check run) may send in all frames together.
MAX_RUN_BYTES = 256 * 1024**2
_STARTUP_S = 20.0  # importing numpy/torchlight/IPython in a cold sandbox


# seccomp (classic BPF, as ``bwrap --seccomp FD`` reads it): x86-64 syscall numbers denied
# with EPERM so that no process in a sandbox can read or steer another one's memory or file
# descriptors (another item's inputs, the grader's result pipe), whatever its uid or dumpable flag
_DENIED_SYSCALLS = {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
                    "pidfd_getfd": 438}  # fmt: skip
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000


def seccomp_program() -> bytes | None:
    """The filter bwrap installs before the sandboxed program starts, or None where it is not
    built (not x86-64: documented in assignments/README.md). Other architectures' calling
    conventions (i386 via ``int 0x80``, x32) are denied outright: Python never uses them."""
    import platform
    import struct

    if platform.machine() != "x86_64":
        return None
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    denied = list(_DENIED_SYSCALLS.values())
    n = len(denied)
    prog = [
        (ld, 0, 0, 4),  # seccomp_data.arch
        (jeq, 0, n + 3, _AUDIT_ARCH_X86_64),  # not x86-64: deny
        (ld, 0, 0, 0),  # seccomp_data.nr
        (jge, n + 1, 0, _X32_BIT),  # x32: deny
    ]
    for i, nr in enumerate(denied):
        prog.append((jeq, n - i, 0, nr))  # to the deny below
    prog += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    return b"".join(struct.pack("=HBBI", *insn) for insn in prog)


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
    close_spares()  # its last members first
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # killed members are still leaving


_WARNED: set[str] = set()


def _join_cgroup(limits: Limits, *pids: int | None) -> None:
    """Move ``pids`` (a sandbox's bwrap and its program, before any student code) into the
    memory cgroup, or say once why there is none."""
    procs, why = memory_cgroup(limits.total_memory)
    if procs is None:
        if why not in _WARNED:
            _WARNED.add(why)
            print(
                f"torchlight grader: no memory cgroup ({why}): each sandbox process is limited "
                f"(RLIMIT_AS {limits.memory // 1024**2} MiB), not all of them together. Run the "
                "grader in one: `systemd-run --scope -p MemoryMax=8G make course-grade`, or in "
                "a cgroup v2 subtree delegated to the grading user.",
                file=sys.stderr,
            )
        return
    for pid in pids:
        if pid is not None:
            with contextlib.suppress(OSError):  # it has ended already
                Path(procs).write_text(str(pid))


# ------------------------------------------------------------------------------ building it
def opted_out() -> bool:
    """Whether the operator switched the sandbox off (only for a throw-away container)."""
    value = os.environ.get(OPT_OUT)
    if value is None:
        return False
    if value != OPT_OUT_VALUE:
        raise SandboxUnavailableError(
            f"{OPT_OUT}={value!r}: to grade without a sandbox (only in a throw-away container "
            f"that holds nothing but this course), set {OPT_OUT}={OPT_OUT_VALUE}"
        )
    return True


def _trusted_binary(path: str) -> None:
    """``path`` and its folders are owned by root and writable by nobody else."""
    p = Path(path)
    if not p.is_file() or p.is_symlink():
        raise SandboxUnavailableError(
            f"{path} not found: install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; "
            f"Fedora: `dnf install bubblewrap`); grading refuses to run student code without it"
        )
    for q in (p, *p.parents):
        st = q.stat()
        if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise SandboxUnavailableError(
                f"{q} is writable by someone other than root (mode {stat.filemode(st.st_mode)}, "
                f"owner uid {st.st_uid}): anyone who can write it can replace {path}"
            )


def _python_paths() -> list[str]:
    """What the interpreter needs: the installation, the environment, the torchlight package."""
    import torchlight

    paths = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    paths.add(os.path.dirname(os.path.realpath(torchlight.__file__)))
    exe = os.path.realpath(sys.executable)
    if not any(exe.startswith(p + os.sep) for p in paths) and not exe.startswith("/usr/"):
        paths.add(os.path.dirname(exe))
    # a nested path is covered by its parent's bind (torchlight inside a virtualenv, say)
    return sorted(p for p in paths if not any(p.startswith(q + os.sep) for q in paths))


def _binds(forbidden: Sequence[str]) -> list[str]:
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    paths = _python_paths()
    # bwrap makes missing parents mode 0700 (root's): the sandbox's uid must get through them
    targets = [*paths, INSIDE_MOUNT, "/etc/ld.so.cache"]
    parents = sorted({str(q) for p in targets for q in Path(p).parents if str(q) != "/"})
    for parent in parents:
        args += ["--perms", "0755", "--dir", parent]
    for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime"):
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for path in paths:
        for secret in forbidden:
            real = os.path.realpath(secret)
            if real == path or real.startswith(path + os.sep):
                raise SandboxUnavailableError(
                    f"the course directory {real} lies inside {path}, which the sandbox must "
                    "see (the Python environment): move the course or the environment apart"
                )
        args += ["--ro-bind", path, path]
    # Installed into the same environment (not editable), the grader would be in view: mask it.
    grader = os.path.dirname(os.path.realpath(__file__))
    if any(grader.startswith(p + os.sep) for p in paths):
        args += ["--size", "4096", "--tmpfs", grader]
    return args


def command(
    argv: Sequence[str],
    limits: Limits,
    forbidden: Sequence[str] = (),
    as_pid_1: bool = False,
    info_fd: int | None = None,
    seccomp_fd: int | None = None,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
) -> list[str]:
    """The bwrap command line that runs ``argv`` (a Python program) in a fresh sandbox.

    ``as_pid_1``: the program is the PID namespace's init (which no process in the sandbox can
    kill); it must reap orphans itself. ``info_fd``: bwrap writes the sandboxed program's host
    PID there (``--info-fd``), so that :meth:`Sandbox.close` can kill it directly.
    ``overlays``: ``(source, target)`` folders bound read-only over what the sandbox would see
    at ``target`` (the grader-built library, :mod:`torchlight_grader.graded_library`);
    ``masks``: folders hidden behind an empty, read-only one (a package no check needs).
    """
    root = os.geteuid() == 0
    size = str(limits.tmpfs)
    args = [BWRAP, "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts"]
    args += ["--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    if as_pid_1:
        args += ["--as-pid-1"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if not root:  # an unprivileged grader: a user namespace maps the sandbox's own uid
        args += ["--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID)]
        args += ["--gid", str(SANDBOX_UID)]
    # The private tmpfs first: bwrap mounts in order, so a checkout or venv under /tmp is
    # bound on top of the empty /tmp instead of being hidden by it.
    for where in (WORK, "/tmp"):
        args += ["--size", size, "--perms", "1777", "--tmpfs", where]
    args += _binds(forbidden)
    for source, target in overlays:  # after the environment's binds: these win
        args += ["--ro-bind", source, target]
    for folder in masks:
        args += ["--size", "4096", "--perms", "0555", "--tmpfs", folder, "--remount-ro", folder]
    args += ["--ro-bind", str(INSIDE), INSIDE_MOUNT, "--proc", "/proc", "--dev", "/dev"]
    args += ["--size", size, "--perms", "1777", "--tmpfs", "/dev/shm"]  # after /dev, not under it
    # bwrap's own root is an unsized tmpfs, writable by the sandbox's uid when the grader is
    # unprivileged (a user namespace maps it): read-only, so WORK, /tmp and /dev/shm (sized
    # above) are the only places student code can write, in both deployments (device nodes
    # such as /dev/null are binds of their own and stay as they are)
    args += ["--remount-ro", "/", "--remount-ro", "/dev"]  # /dev: bwrap's tmpfs too
    args += ["--chdir", WORK, "--"]
    if root:  # as root: a real, unprivileged uid, no capabilities at all, no way back
        args += [SETPRIV, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]
        args += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return args + list(argv)


def clean_env(workdir: str) -> dict[str, str]:
    """A minimal environment: no grader secrets, single-threaded BLAS, caches in ``workdir``."""
    return {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin",
        "HOME": workdir,
        "USER": "sandbox",
        "TMPDIR": "/tmp" if workdir == WORK else workdir,
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
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "TORCHLIGHT_SANDBOX_WORK": workdir,
    }


@functools.cache
def ensure_available() -> str:
    """``"bwrap"``, or ``"unsafe"`` when opted out; raises :class:`SandboxUnavailableError`.

    Builds one sandbox and checks from inside that it is what this module promises.
    """
    if opted_out():
        print(
            f"\n{'!' * 78}\n{OPT_OUT} is set: student code runs WITHOUT a sandbox, as this user, "
            f"with the course in reach.\nAny student can forge grades. Use this only in a "
            f"throw-away container.\n{'!' * 78}\n",
            file=sys.stderr,
        )
        return "unsafe"
    _trusted_binary(BWRAP)
    if os.geteuid() == 0:
        _trusted_binary(SETPRIV)
    probe = (
        "import os, numpy, torchlight, IPython\n"
        "assert os.getuid() != 0 and os.geteuid() != 0, 'running as root'\n"
        "caps = [l for l in open('/proc/self/status') if l.startswith('CapEff')]\n"
        "assert caps[0].split()[1].strip('0') == '', caps\n"
        "open('probe', 'w').write('ok')\n"
        "print('sandbox ok')\n"
    )
    argv = [sys.executable, "-I", "-B", "-c", probe]
    try:
        proc = subprocess.run(
            command(argv, Limits()),
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(WORK),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailableError(f"could not start {BWRAP}: {exc}") from exc
    if proc.returncode != 0 or "sandbox ok" not in proc.stdout:
        raise SandboxUnavailableError(
            f"the grading sandbox could not be built ({BWRAP} exited with {proc.returncode}):\n"
            f"{(proc.stderr or proc.stdout)[-1500:]}\n"
            "How to fix: as an unprivileged user, bubblewrap needs unprivileged user namespaces "
            "(`sysctl kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04+ also "
            "`sysctl kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile "
            "for bwrap; in Docker, run with `--security-opt seccomp=unconfined` or as root); "
            "the Python environment must be readable by the grader. To grade without a sandbox "
            f"in a throw-away container only, set {OPT_OUT}={OPT_OUT_VALUE}."
        )
    return "bwrap"


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
        info_read, info_write = os.pipe()
        extra: tuple[int, ...] = ()
        if mode == "bwrap":
            self._tmp = None
            argv = [sys.executable, "-I", "-B", f"{INSIDE_MOUNT}/{script}", str(write_end)]
            program = seccomp_program()
            seccomp_fd = None
            if program is not None:
                seccomp_fd = os.memfd_create("torchlight-seccomp", 0)
                os.write(seccomp_fd, program)
                os.lseek(seccomp_fd, 0, os.SEEK_SET)
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
        try:
            if mode == "bwrap":
                self._pidfd, child_pid = _sandboxed_pidfd(info_read)
                _join_cgroup(limits, self.proc.pid, child_pid)
        finally:
            os.close(info_read)
        self._results = read_end
        self._buffer = bytearray()  # linear: appended at the end, consumed from the front
        self._received = 0
        self.broken = ""
        self.loads = wire.loads

    def send(self, message: Any, deadline: float) -> bool:
        """Write one JSON line to the sandbox's stdin; False if it cannot be delivered in time."""
        assert self.proc.stdin is not None, "started with stdin=PIPE"
        data = (wire.dumps(message) + "\n").encode()
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
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            select.select([self._pidfd], [], [], 10.0)  # readable once it has exited
            os.close(self._pidfd)
            self._pidfd = None
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        os.close(self._results)
        self._log.close()
        if self._tmp is not None:
            self._tmp.cleanup()
        return killed


def _sandboxed_pidfd(info: int) -> tuple[int | None, int | None]:
    """A pidfd of the sandboxed program and its PID, from bwrap's ``--info-fd`` JSON
    (``child-pid``); None if bwrap ended before it started one."""
    data = b""
    deadline = time.monotonic() + _STARTUP_S
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


# ------------------------------------------------------------------------------ spares
_SPARES: dict[str, tuple[tuple[Any, ...], Sandbox]] = {}  # script -> (key, started sandbox)
_PLAN: dict[str, Any] = {"notebooks": None, "opened": {}}


def plan(notebooks: int | None) -> None:
    """How many notebooks this process will still grade (``None``: not known).

    :func:`open_sandbox` then starts no spare that no notebook would use (after the last one);
    without a plan it always starts one, and the last is ended unused when the process ends.
    """
    _PLAN["notebooks"], _PLAN["opened"] = notebooks, {}


def open_sandbox(
    script: str,
    limits: Limits,
    forbidden: Sequence[str] = (),
    as_pid_1: bool = False,
    settings: dict[str, Any] | None = None,
    ahead: bool = False,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
) -> Sandbox:
    """A fresh sandbox running ``script``, used by nobody before, with ``settings`` (if any)
    already sent as its first line.

    With ``ahead``, another one like it is started now, for the next call: it imports while
    this one works, and waits (without any student code) until it is handed out. A spare
    whose arguments differ, or that has ended, is closed instead of used. Only the main thread
    keeps spares (``--die-with-parent`` ends a sandbox when the thread that started it ends).
    """
    key = _key(script, limits, forbidden, as_pid_1, settings, overlays, masks)
    opened = _PLAN["opened"][script] = _PLAN["opened"].get(script, 0) + 1
    more = _PLAN["notebooks"] is None or opened < _PLAN["notebooks"]
    box = None
    if script in _SPARES:
        spare_key, spare = _SPARES.pop(script)
        if spare_key == key and spare.proc.poll() is None:
            box = spare
        else:
            spare.close()
    if box is None:
        box = _started(script, limits, forbidden, as_pid_1, settings, overlays, masks)
    if ahead and more and threading.current_thread() is threading.main_thread():
        spare = _started(script, limits, forbidden, as_pid_1, settings, overlays, masks)
        _SPARES[script] = (key, spare)
    return box


def prepare(
    script: str,
    limits: Limits,
    forbidden: Sequence[str] = (),
    as_pid_1: bool = False,
    settings: dict[str, Any] | None = None,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
) -> None:
    """Start now the sandbox that the next :func:`open_sandbox` with these arguments gets (a
    spare, as ``ahead`` starts one), unless one like it is waiting already.

    For a sandbox whose arguments depend on the notebook (the hidden checks' grader-built
    library), which a spare started while the previous notebook ran cannot know: the grader
    calls this as soon as it knows which notebook comes (while nbgrader sanitizes it), so the
    sandbox imports meanwhile; it sees no student code until :func:`open_sandbox` hands it
    out. A waiting spare of ``script`` with other arguments is
    closed (only one spare per script waits). Main thread only, as for ``ahead``.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    key = _key(script, limits, forbidden, as_pid_1, settings, overlays, masks)
    if script in _SPARES:
        spare_key, spare = _SPARES[script]
        if spare_key == key and spare.proc.poll() is None:
            return
        del _SPARES[script]
        spare.close()
    box = _started(script, limits, forbidden, as_pid_1, settings, overlays, masks)
    _SPARES[script] = (key, box)


def _key(
    script: str,
    limits: Limits,
    forbidden: Sequence[str],
    as_pid_1: bool,
    settings: dict[str, Any] | None,
    overlays: Sequence[tuple[str, str]],
    masks: Sequence[str],
) -> tuple[Any, ...]:
    """Everything a started sandbox was built from: a spare is handed out only for the same."""
    return (script, limits, tuple(forbidden), as_pid_1, wire.dumps(settings), ensure_available(),
            tuple(overlays), tuple(masks))  # fmt: skip


def _started(
    script: str,
    limits: Limits,
    forbidden: Sequence[str],
    as_pid_1: bool,
    settings: dict[str, Any] | None,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
) -> Sandbox:
    box = Sandbox(script, limits, forbidden, as_pid_1, overlays, masks)
    if settings is not None:
        box.send(settings, time.monotonic() + _STARTUP_S)
    return box


@atexit.register
def close_spares() -> None:
    """End every spare sandbox (they would also die with this process)."""
    while _SPARES:
        _, (_, box) = _SPARES.popitem()
        box.close()


# ------------------------------------------------------------------------------ the checks
def run_items(
    notebook: str,
    cells: Sequence[dict[str, str]],
    items: Sequence[dict[str, Any]],
    limits: Limits,
    forbidden: Sequence[str] = (),
    ahead: bool = False,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
) -> Run:
    """Run the cells once and then each item, in one sandbox, within ``limits.budget`` seconds.

    ``cells`` are ``{"name", "source"}`` in notebook order; ``items`` are
    ``{"id", "spec", "cases", "timeout"}``. Items the sandbox never reached because it died get
    one more try in a fresh sandbox, within the same budget. ``ahead``: start the next
    notebook's sandbox now (:func:`open_sandbox`). ``overlays``, ``masks``: see :func:`command`
    (the grader-built library the checks run against).
    """
    run = Run()
    deadline = time.monotonic() + limits.budget
    remaining = list(items)
    for _attempt in range(2):
        if not remaining or time.monotonic() >= deadline:
            break
        remaining = _one_sandbox(
            notebook, cells, remaining, limits, forbidden, deadline, run, ahead, overlays, masks
        )
    for item in remaining:
        if item["id"] not in run.outcomes:
            run.outcomes[item["id"]] = Outcome(
                problem=(
                    f"the notebook's time budget of {limits.budget:g} s ran out before this "
                    "check ran"
                    if time.monotonic() >= deadline
                    else "the grading sandbox stopped before this check ran"
                )
            )
    return run


def _one_sandbox(
    notebook: str,
    cells: Sequence[dict[str, str]],
    items: Sequence[dict[str, Any]],
    limits: Limits,
    forbidden: Sequence[str],
    deadline: float,
    run: Run,
    ahead: bool,
    overlays: Sequence[tuple[str, str]] = (),
    masks: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One sandbox over ``items``; returns the items it never reached."""
    box = open_sandbox(
        "child.py", limits, forbidden, as_pid_1=True, ahead=ahead, overlays=overlays, masks=masks
    )
    try:
        request = {
            "notebook": notebook,
            "cells": list(cells),
            "budget": max(0.0, deadline - time.monotonic()),
            "limits": {
                "memory": limits.memory,
                "output": limits.output,
                "cell_timeout": limits.cell_timeout,
                "processes": limits.processes,
            },
        }
        if not box.send(request, deadline):
            return list(items)
        message = box.receive(deadline)
        while message is not None and "cells" not in message:
            message = box.receive(deadline)  # frames a cell wrote itself: ignored
        if message is None:
            return list(items)
        if not run.cells:
            run.cells = _cells(cells, message.get("cells"), limits)
        for n, item in enumerate(items):
            nonce = secrets.token_hex(16)
            timeout = min(float(item["timeout"]), max(0.0, deadline - time.monotonic()))
            if timeout <= 0:
                return list(items[n:])
            ask = {**item, "nonce": nonce, "timeout": timeout}
            if not box.send(ask, deadline):
                return list(items[n:])
            outcome = _collect(box, item, nonce, timeout, limits, deadline)
            if outcome is None:
                return list(items[n:])
            run.outcomes[item["id"]] = outcome
        box.send({"end": True}, min(deadline, time.monotonic() + 2))
        return []
    finally:
        box.close()  # what it had to say is read: end it now, without waiting for its exit


def _cells(cells: Sequence[dict[str, str]], reported: Any, limits: Limits) -> list[CellRecord]:
    by_index = {}
    if isinstance(reported, list):
        by_index = {r.get("index"): r for r in reported if isinstance(r, dict)}
    records = []
    for index, cell in enumerate(cells):
        r = by_index.get(index, {})
        size = r.get("output_bytes", 0)
        size = size if isinstance(size, int) else 0
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


def _collect(
    box: Sandbox,
    item: dict[str, Any],
    nonce: str,
    timeout: float,
    limits: Limits,
    deadline: float,
) -> Outcome | None:
    """The item's result frame (its own process, right nonce) and the main line's status."""
    ident, result = item["id"], None
    item_deadline = min(deadline, time.monotonic() + timeout + 5.0)
    while True:
        message = box.receive(item_deadline)
        if message is None:
            return None  # the sandbox died, broke the protocol, or ran out of time
        if message.get("nonce") != nonce:
            continue  # a frame student code wrote: it cannot know this item's nonce
        if message.get("result") == ident and result is None:
            result = message
        elif message.get("status") == ident:
            status = message
            break
    tail = status.get("output_tail")
    size = status.get("output_bytes")
    outcome = Outcome(
        output_bytes=size if isinstance(size, int) else 0,
        output_tail=tail if isinstance(tail, str) else "",
        details={k: status.get(k) for k in ("timed_out", "signal", "exit_code")},
    )
    if status.get("timed_out"):
        outcome.problem = (
            f"your code was stopped after {timeout:g} s (an infinite loop, or far too slow)"
        )
    elif outcome.output_bytes >= limits.output:
        outcome.problem = (
            f"your code printed or wrote more than {limits.output // 1024} KiB; remove the "
            "large prints"
        )
    elif result is None or status.get("exit_code") != 0:
        sig = status.get("signal")
        if sig == signal.SIGXCPU:
            outcome.problem = "your code used too much CPU time (an infinite loop?)"
        elif isinstance(sig, int):
            outcome.problem = f"your code was killed by signal {_signal_name(sig)}"
        else:
            outcome.problem = (
                f"your code ended the Python process (exit code {status.get('exit_code')}) "
                "before the check finished: do not call os._exit, sys.exit or kill processes "
                "in an answer"
            )
    elif not isinstance(result.get("cases"), list):
        outcome.problem = "the grader could not read the results of your code"
    else:
        outcome.result = {"cases": result["cases"]}
    return outcome


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)
