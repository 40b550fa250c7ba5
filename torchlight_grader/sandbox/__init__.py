"""The sandbox: where student code runs, the grading side's trust boundary (its bottom layer:
it imports nothing above it). Bubblewrap, resource limits, one time budget per notebook.

Every process that runs student code (the feedback kernel run and the hidden checks) runs in a
bubblewrap sandbox (``/usr/bin/bwrap``, started by absolute path, never through ``PATH``):

- the file system is a fresh, empty root with read-only binds of the system (``/usr``), the
  Python installation and environment, the student-facing ``torchlight`` package, and the
  sandbox's own program (:mod:`torchlight_grader.sandbox.inside`: no references, no checks); a private,
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

Its files: :mod:`.limits` (what one sandbox may use, the memory cgroup of all of them),
:mod:`.bwrap` (the command line, seccomp, the environment, the start-up probe), :mod:`.process`
(one running sandbox and its framed result pipe), :mod:`.spares` (sandboxes started ahead),
:mod:`.items` (one notebook's cells and checks in a sandbox), and :mod:`.inside` (the program
that runs in it: no references, no checks).
"""

from torchlight_grader.sandbox.bwrap import (
    OPT_OUT,
    OPT_OUT_VALUE,
    WORK,
    clean_env,
    command,
    ensure_available,
    opted_out,
)
from torchlight_grader.sandbox.items import CellRecord, Outcome, Run, run_items
from torchlight_grader.sandbox.limits import Limits, SandboxUnavailableError, memory_cgroup
from torchlight_grader.sandbox.process import MAX_RUN_BYTES, Sandbox
from torchlight_grader.sandbox.spares import close_spares, open_sandbox, plan, prepare

__all__ = [
    "MAX_RUN_BYTES",
    "OPT_OUT",
    "OPT_OUT_VALUE",
    "WORK",
    "CellRecord",
    "Limits",
    "Outcome",
    "Run",
    "Sandbox",
    "SandboxUnavailableError",
    "clean_env",
    "close_spares",
    "command",
    "ensure_available",
    "memory_cgroup",
    "open_sandbox",
    "opted_out",
    "plan",
    "prepare",
    "run_items",
]
