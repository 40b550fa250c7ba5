"""What makes grading fast must not make it weaker (issue 15): sandboxes started ahead, and
nbgrader's commands run in one worker process.

- a spare sandbox (started while the previous notebook ran) is handed to exactly one notebook,
  and nothing the previous notebook did (files in its work dir or ``/tmp``, a daemon) reaches it;
- no spare is started for a notebook that will not come (``sandbox.plan``);
- a hidden-check sandbox started while nbgrader sanitizes a notebook (``grader.prepare``: it
  binds that notebook's grader-built library) is handed to that notebook only;
- every process of a sandbox dies with it, also when the grader itself is killed;
- ``torchlight_grader/course/batch.py``'s worker runs every command of a job, in order, each with its own exit
  status and its own output, and a worker that died is replaced for the next job.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from torchlight_grader import sandbox
from torchlight_grader.checks.grader import Cell, grade, prepare
from torchlight_grader.course.batch import Worker
from torchlight_grader.sandbox import Limits

ROOT = Path(__file__).resolve().parents[1]

SETUP = Cell("locked", "setup", "import numpy as np\nimport torchlight as tl\n"
             "from torchlight.autograd import Function\n")  # fmt: skip
MUL = """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b, grad_output * a
"""
MARK = "torchlight-speed-test-daemon"
LEAVE = f"""
import subprocess, sys
open("/tmp/left-behind", "w").write("x")
open("/sandbox/left-behind", "w").write("x")
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{MARK}"],
                 start_new_session=True)
"""
FIND = f"""
import os
assert not os.path.exists("/tmp/left-behind"), "a file of the last notebook"
assert not os.path.exists("/sandbox/left-behind"), "a file of the last notebook"
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmdline = open(f"/proc/{{pid}}/cmdline", "rb").read()
    except OSError:
        continue
    assert b"{MARK}" not in cmdline, "a process of the last notebook"
"""


def notebook(before: str = "") -> list[Cell]:
    """The setup cell and a correct ``Mul`` whose cell runs ``before`` first (if that raises,
    ``Mul`` is never defined and test_mul fails)."""
    return [SETUP, Cell("answer", "mul", before + MUL)]


@pytest.fixture
def spares() -> Iterator[None]:
    sandbox.plan(None)
    sandbox.close_spares()
    yield
    sandbox.plan(None)
    sandbox.close_spares()


def daemons() -> list[psutil.Process]:
    return [
        p for p in psutil.process_iter(["cmdline"]) if MARK in " ".join(p.info["cmdline"] or [])
    ]


def spare_pid() -> int | None:
    entry = sandbox.spares._SPARES.get("child.py")
    return entry[1].proc.pid if entry else None


def test_a_spare_serves_one_notebook_and_nothing_of_the_last_reaches_it(spares: None) -> None:
    limits = Limits(cell_timeout=10)
    first = grade("a1_functions", notebook(LEAVE), ["test_mul"], seed=0, limits=limits,
                  ahead=True)  # fmt: skip
    assert first["test_mul"].passed, first["test_mul"].message
    spare = spare_pid()
    assert spare is not None, "no sandbox was started ahead"
    second = grade("a1_functions", notebook(FIND), ["test_mul"], seed=0, limits=limits,
                   ahead=True)  # fmt: skip
    assert second["test_mul"].passed, second["test_mul"].message  # FIND found nothing
    assert spare_pid() not in (None, spare), "the spare was not handed out, or handed out twice"
    assert not psutil.pid_exists(spare) or psutil.Process(spare).status() == psutil.STATUS_ZOMBIE
    assert not daemons(), "a daemon outlived its sandbox"


def test_no_spare_is_started_for_a_notebook_that_will_not_come(spares: None) -> None:
    sandbox.plan(2)
    for expected_spare in (True, False):
        verdicts = grade("a1_functions", notebook(), ["test_mul"], seed=0, ahead=True)
        assert verdicts["test_mul"].passed, verdicts["test_mul"].message
        assert (spare_pid() is not None) == expected_spare


LIBRARY_MUL = MUL.replace(
    """        a, b = ctx.saved_tensors
        return grad_output * b, grad_output * a""",
    """        a, b = ctx.saved_tensors
        with tl.enable_grad():  # the library's own Mul backward does the work
            a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
            (a * b).backward(grad_output)
        return a.grad, b.grad""",
)


def test_a_sandbox_prepared_for_a_notebook_serves_only_that_notebook(spares: None) -> None:
    """The hidden-check sandbox started while nbgrader sanitizes a notebook (``prepare``) binds
    that notebook's grader-built library. One prepared for a4 (whose library keeps Mul's
    backward) is never handed to a1, which grades Mul: a1's answer that hands its derivative
    back to the library still meets "write it yourself"; one prepared for a1 is used by a1."""
    assert LIBRARY_MUL != MUL
    limits = Limits(cell_timeout=10)
    prepare("a4_convolutions", limits)
    other = spare_pid()
    assert other is not None, "prepare started no sandbox"
    verdict = grade("a1_functions", [SETUP, Cell("answer", "mul", LIBRARY_MUL)],
                    ["test_mul"], seed=0, limits=limits)["test_mul"]  # fmt: skip
    assert not verdict.passed and "write it yourself" in verdict.message, verdict.message
    assert not psutil.pid_exists(other) or psutil.Process(other).status() == psutil.STATUS_ZOMBIE
    prepare("a1_functions", limits)
    mine = spare_pid()
    assert mine is not None and mine != other
    prepare("a1_functions", limits)  # one like it is waiting: nothing new is started
    assert spare_pid() == mine
    verdict = grade("a1_functions", notebook(), ["test_mul"], seed=0, limits=limits)["test_mul"]
    assert verdict.passed, verdict.message
    assert spare_pid() is None, "the prepared sandbox was not handed out"
    assert not psutil.pid_exists(mine) or psutil.Process(mine).status() == psutil.STATUS_ZOMBIE


def test_a_worker_runs_every_command_with_its_own_status_and_output(tmp_path: Path) -> None:
    worker = Worker(tmp_path, {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}).start()
    try:
        runs = worker.do([["autograde", "no_such_assignment"], ["--version"]])
        assert [r.args[0] for r in runs] == ["autograde", "--version"]
        assert runs[0].returncode != 0 and "nbgrader version" not in runs[0].output
        # (a worker's start says nothing: runpy warned when the package imported .batch first)
        assert "Warning" not in runs[0].output, runs[0].output[:2000]
        assert runs[1].returncode == 0 and "nbgrader version" in runs[1].output, runs[1].output
        assert worker.proc is not None
        worker.proc.kill()
        worker.proc.wait()
        again = worker.do([["--version"]])  # a new worker process
        assert again[0].returncode == 0 and "nbgrader version" in again[0].output
    finally:
        worker.close()


def test_a_grader_killed_mid_notebook_takes_its_sandboxes_with_it(tmp_path: Path) -> None:
    """SIGKILL of the grading process while an answer's daemon runs: nothing survives (the
    hidden-check program, PID 1 of its sandbox, is immune to the parent-death signal, so it
    watches the grader's end of its stdin)."""
    script = tmp_path / "grader.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import test_course_speed as t\n"
        "from torchlight_grader.checks.grader import grade\n"
        "from torchlight_grader.sandbox import Limits\n"
        "grade('a1_functions', t.notebook(t.LEAVE + 'import time\\ntime.sleep(120)\\n'),"
        " ['test_mul'], seed=0, limits=Limits(cell_timeout=120))\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 60
        while not daemons():
            assert time.monotonic() < deadline and proc.poll() is None, "no daemon started"
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while daemons() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not daemons(), "a daemon outlived the grader"
