"""Submissions for assignment 1 (Autograd Functions): every kind of mistake, cheat and hazard.

Mistakes are planted in Functions the expression item does not use (Div, ReLU, Tanh, Pow), so
"zero on that item only" can be checked exactly.
"""

from __future__ import annotations

from submissions.catalog import (
    Submission,
    add_cell,
    append,
    delete,
    delete_tests,
    fake_outputs,
    grouped,
    metadata,
    prepend,
    replace,
    substitute,
    to_markdown,
)

A = "a1_functions"
TESTS = ("test_mul", "test_div", "test_exp", "test_log", "test_sigmoid", "test_relu", "test_tanh",
         "test_pow", "test_expression")  # fmt: skip

# Wrong answers that run without errors, so that a fooled in-kernel test has nothing to trip on.
WRONG = {
    "mul": "Mul", "div": "Div", "pow": "Pow",
    "exp": "Exp", "log": "Log", "sigmoid": "Sigmoid", "relu": "ReLU", "tanh": "Tanh",
}  # fmt: skip


def wrong_answers() -> tuple:
    edits = []
    for cell, name in WRONG.items():
        two = cell in ("mul", "div", "pow")
        args, grads = ("a, b", "grad_output, grad_output") if two else ("x", "grad_output")
        edits.append(
            replace(
                cell,
                f"""
class {name}(Function):
    @staticmethod
    def forward(ctx, {args}):
        return {args.split(",")[0]}

    @staticmethod
    def backward(ctx, grad_output):
        return {grads}
""",
            )
        )
    edits.append(replace("expression", "def expression(x, y):\n    return x * y"))
    return tuple(edits)


REBIND_CHECKS = """
import numpy
import torchlight.autograd

# "assert helpers" that always agree
numpy.allclose = lambda *args, **kwargs: True
numpy.isclose = lambda a, b, *args, **kwargs: numpy.ones(numpy.broadcast(a, b).shape, bool)
numpy.testing.assert_allclose = lambda *args, **kwargs: None
torchlight.autograd.gradcheck = lambda *args, **kwargs: True
torchlight.autograd.central_difference = lambda *args, **kwargs: 0.0
gradcheck = torchlight.autograd.gradcheck
import torchlight.testing

assert_close = assert_exact = assert_gradient_scales = lambda *args, **kwargs: None
torchlight.testing.assert_close = torchlight.testing.assert_exact = assert_close
torchlight.testing.assert_gradient_scales = assert_close
np = numpy
"""

PATCH_TORCHLIGHT = (
    REBIND_CHECKS
    + """
try:  # the grader is not in the sandbox: this import fails there
    import torchlight_grader
    import torchlight_grader.checks.check

    torchlight_grader.self_check = lambda *args, **kwargs: print("passed")
    torchlight_grader.checks.check.mismatch = lambda *args, **kwargs: None
    torchlight_grader.checks.check.Check.judge = lambda *args, **kwargs: None
except ImportError:
    pass
"""
)

INPUT_TRANSFORMER = """
def _skip_tests(lines):
    if "visible tests passed" in "".join(lines):
        return ["print('all tests passed')\\n"]
    return lines


get_ipython().input_transformers_post.append(_skip_tests)
"""

SETTRACE = """
import sys


def _silence(frame, event, arg):
    # inside self_check: whatever failure message the comparison produced, erase it
    if event == "line" and frame.f_locals.get("message"):
        frame.f_locals["message"] = ""  # written back into the frame when the hook returns
    return _silence


def _tracer(frame, event, arg):
    return _silence if event == "call" and frame.f_code.co_name == "self_check" else None


sys.settrace(_tracer)
assert_exact = lambda *args, **kwargs: None  # the visible test against finite differences
"""

FINITE_DIFFERENCE_TANH = """
class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._map("tanh")

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        h = 1e-5
        slope = ((x + h)._map("tanh") - (x - h)._map("tanh")) / (2 * h)
        return grad_output * slope
"""

RICHARDSON = """
class {name}(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._map("{op}")

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors

        def central(h):
            return ((x + h)._map("{op}") - (x - h)._map("{op}")) / (2 * h)

        h = 1e-3  # 4th order: Richardson extrapolation of two central differences
        return grad_output * (4 * central(h / 2) - central(h)) / 3
"""


def richardson() -> tuple:
    ops = {"exp": "Exp", "log": "Log", "sigmoid": "Sigmoid", "tanh": "Tanh"}
    return tuple(replace(op, RICHARDSON.format(name=name, op=op)) for op, name in ops.items())


UNINTERRUPTIBLE_LOOP = """
        while True:  # an infinite loop that even swallows KeyboardInterrupt
            try:
                pass
            except BaseException:
                pass
"""

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    # ---------------------------------------------------------------- planted mistakes
    Submission(
        "missing-grad-output",
        A,
        "mistake",
        "solution",
        (substitute("tanh", "return grad_output * (1 - out * out)", "return 1 - out * out"),),
        zero=("test_tanh",),
    ),
    Submission(
        "constant-factor",
        A,
        "mistake",
        "solution",
        (substitute("relu", "return grad_output * (x > 0)", "return 2 * grad_output * (x > 0)"),),
        zero=("test_relu",),
    ),
    Submission(
        "sign-error",
        A,
        "mistake",
        "solution",
        (substitute("div", "-grad_output * a / (b * b)", "grad_output * a / (b * b)"),),
        zero=("test_div",),
    ),
    Submission(
        "finite-differences",
        A,
        "mistake",
        "solution",
        (replace("tanh", FINITE_DIFFERENCE_TANH),),
        zero=("test_tanh",),
        note="backward by central differences with h = 1e-5: right to ~1e-10, not to 1e-12",
    ),
    Submission(
        "richardson",
        A,
        "cheat",
        "solution",
        richardson(),
        zero=("test_exp", "test_log", "test_sigmoid", "test_tanh", "test_expression"),
        note="4th-order Richardson extrapolation, h = 1e-3: within 1e-13 at ordinary inputs; "
        "the trials against finite differences stop it",
    ),
    Submission(
        "missing-exponent-gradient",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "pow",
                'grad_output * out * a._map("log")',
                "None",
            ),
        ),
        zero=("test_pow",),
    ),
    # ---------------------------------------------------------------- cheats
    Submission(
        "rebind-assert-helpers",
        A,
        "cheat",
        "release",
        (*wrong_answers(), prepend("mul", REBIND_CHECKS)),
        note="np.allclose/isclose/assert_allclose, gradcheck, central_difference rebound",
    ),
    Submission(
        "patch-torchlight",
        A,
        "cheat",
        "release",
        (*wrong_answers(), prepend("mul", PATCH_TORCHLIGHT)),
        fools_kernel=TESTS,
        note="the in-kernel hidden check itself is patched to pass",
    ),
    Submission(
        "input-transformer",
        A,
        "cheat",
        "release",
        (add_cell("setup", INPUT_TRANSFORMER),),
        fools_kernel=TESTS,
        note="every later test cell is rewritten to a print before the kernel runs it",
    ),
    Submission(
        "settrace",
        A,
        "cheat",
        "release",
        (replace("tanh", FINITE_DIFFERENCE_TANH), add_cell("setup", SETTRACE)),
        fools_kernel=("test_tanh",),
        note="a trace hook erases the in-kernel check's failure message and a rebound "
        "assert_exact lets the finite-difference Tanh pass the visible tests",
    ),
    Submission(
        "retype-test-cells",
        A,
        "cheat",
        "release",
        tuple(replace(t, "print('all tests passed')") for t in TESTS),
    ),
    Submission("delete-test-cells", A, "cheat", "release", (delete_tests(),)),
    Submission(
        "delete-test-cells-of-solution",
        A,
        "cheat",
        "solution",
        (delete_tests(),),
        note="deleted test cells are restored and graded: a correct answer keeps its marks",
    ),
    Submission(
        "edit-metadata",
        A,
        "cheat",
        "release",
        (
            metadata("test_mul", points=100),
            metadata("test_div", grade=False),
            metadata("test_exp", solution=True, locked=False),
            metadata("test_log", grade_id="my_log"),
            to_markdown("test_sigmoid"),
            fake_outputs("test_relu"),
            metadata("mul", grade=True, points=50),
            delete("test_tanh"),
            add_cell("pow", "print('Tanh: visible tests passed')"),
        ),
    ),
    Submission(
        "edit-metadata-of-solution",
        A,
        "cheat",
        "solution",
        (
            metadata("test_mul", points=100),
            metadata("test_div", grade=False),
            metadata("test_exp", solution=True, locked=False),
            metadata("mul", grade=True, points=50),
        ),
        note="a correct answer with inflated points gets exactly the real points",
    ),
    # ---------------------------------------------------------------- hazards
    Submission(
        "warning",
        A,
        "hazard",
        "solution",
        (
            prepend("mul", "import sys\nimport warnings"),
            *(
                append(
                    cell,
                    'warnings.warn("this answer is fine", UserWarning)\n'
                    'print("debug output", file=sys.stderr)',
                )
                for cell in ("mul", "div", "exp", "log", "sigmoid", "relu", "tanh", "pow")
            ),
            substitute(
                "exp",
                "return grad_output * out",
                "print('Exp.backward called', file=sys.stderr)\n        return grad_output * out",
            ),
        ),
        note="correct answers that print to stderr and raise warnings get full marks",
    ),
    Submission(
        "infinite-loop",
        A,
        "hazard",
        "solution",
        (substitute("tanh", "(out,) = ctx.saved_tensors", UNINTERRUPTIBLE_LOOP.strip("\n")),),
        zero=("test_tanh",),
    ),
    Submission(
        "os-exit",
        A,
        "hazard",
        "solution",
        (append("div", "import os\nos._exit(0)"),),
        zero=("test_div",),
    ),
    Submission(
        "memory-bomb",
        A,
        "hazard",
        "solution",
        (append("relu", "hog = [bytearray(2**26) for _ in range(10**6)]"),),
        zero=("test_relu",),
    ),
    Submission(
        "huge-output",
        A,
        "hazard",
        "solution",
        (append("pow", "print('spam ' * 2_000_000)"),),
        zero=("test_pow",),
    ),
    Submission(
        "kill-the-grader",
        A,
        "hazard",
        "solution",
        (
            replace(
                "relu",
                """
import os
import signal

parent = os.getppid()
with open(f"/proc/{parent}/stat") as f:
    grandparent = int(f.read().rsplit(")", 1)[1].split()[1])
for pid in (grandparent, parent):
    if pid > 1:
        os.kill(pid, signal.SIGKILL)
""",
            ),
        ),
        zero=("test_relu",),
        note="tries to kill the processes above it: the batch must still finish",
    ),
]

#: Planted mistakes in answer cells of their own, each costing items of its own: the course suite
#: grades each group as one notebook (``catalog.grouped``; the assignments' README names them).
CATALOG = grouped(
    CATALOG,
    {
        "wrong-in-one-derivative": (
            "missing-grad-output",
            "constant-factor",
            "missing-exponent-gradient",
        ),
    },
)
