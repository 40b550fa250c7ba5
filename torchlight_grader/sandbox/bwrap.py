"""The bubblewrap command line that builds one sandbox, its seccomp filter, its environment,
and the start-up probe that refuses to grade where no sandbox can be built."""

from __future__ import annotations

import functools
import os
import secrets
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from torchlight_grader.sandbox import seccomp
from torchlight_grader.sandbox.limits import Limits, SandboxUnavailableError

BWRAP = "/usr/bin/bwrap"
SETPRIV = "/usr/bin/setpriv"
SANDBOX_UID = 65534  # "nobody": the uid inside an unprivileged grader's sandboxes
#: As root, each sandbox runs as a kernel uid of its own, drawn from this range (above any
#: account or container subuid block): nothing owned by one uid (keys, the per-uid process
#: count, files in a shared place) is another sandbox's.
ROOT_UIDS = range(2**30, 2**30 + 2**24)
INSIDE = Path(__file__).resolve().parent / "inside"  # the sandbox's own program
INSIDE_MOUNT = "/opt/torchlight-sandbox"
WORK = "/sandbox"
OPT_OUT = "TORCHLIGHT_GRADER_UNSAFE_NO_SANDBOX"
OPT_OUT_VALUE = "students-can-forge-grades"


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
    grader = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the whole package
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
    at ``target`` (the grader-built library, :mod:`torchlight_grader.checks.graded_library`);
    ``masks``: folders hidden behind an empty, read-only one (the environment's site-packages
    in the hidden checks' sandbox), in which ``overlays`` may bind what is allowed.
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
    for folder in masks:  # empty, and read-only once the overlays have their mount points
        args += ["--size", "65536", "--perms", "0555", "--tmpfs", folder]
    for source, target in overlays:  # after the environment's binds and the masks: these win
        args += ["--ro-bind", source, target]
    for folder in masks:
        args += ["--remount-ro", folder]
    args += ["--ro-bind", str(INSIDE), INSIDE_MOUNT, "--proc", "/proc", "--dev", "/dev"]
    args += ["--size", size, "--perms", "1777", "--tmpfs", "/dev/shm"]  # after /dev, not under it
    # bwrap's own root is an unsized tmpfs, writable by the sandbox's uid when the grader is
    # unprivileged (a user namespace maps it): read-only, so WORK, /tmp and /dev/shm (sized
    # above) are the only places student code can write, in both deployments (device nodes
    # such as /dev/null are binds of their own and stay as they are)
    args += ["--remount-ro", "/", "--remount-ro", "/dev"]  # /dev: bwrap's tmpfs too
    args += ["--chdir", WORK, "--"]
    if root:  # as root: a real, unprivileged uid, no capabilities at all, no way back
        uid = sandbox_uid()
        args += [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        args += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return args + list(argv)


def sandbox_uid() -> int:
    """A fresh kernel uid for one sandbox of a grader running as root (two sandboxes running at
    once share one with probability about 1 in 1.7 million per pair)."""
    return ROOT_UIDS[secrets.randbelow(len(ROOT_UIDS))]


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
        # two threads for numba's prange (the fast kernels' speed items time parallel loops;
        # the workqueue layer survives the sandbox's forks); BLAS stays single-threaded
        "NUMBA_NUM_THREADS": "2",
        "NUMBA_THREADING_LAYER": "workqueue",
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
    filter_fd = seccomp.memfd()  # with the filter every sandbox gets: it must let Python run
    try:
        proc = subprocess.run(
            command(argv, Limits(), seccomp_fd=filter_fd),
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(WORK),
            stdin=subprocess.DEVNULL,
            pass_fds=() if filter_fd is None else (filter_fd,),
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailableError(f"could not start {BWRAP}: {exc}") from exc
    finally:
        if filter_fd is not None:
            os.close(filter_fd)
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
