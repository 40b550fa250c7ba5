"""Attacks on the grader itself (issue 11's table), as recipes on assignment 1.

Each attacker knows every path (``@COURSE@``, ``@REPO@``, ``@VENV@`` become the real ones) and
tries, from its cells (which run in the grading sandbox *and* in the feedback kernel run), to
change grades, the course, the environment or classmates' results, to read secrets, to forge
results, to outlive its sandbox, or to inject script into the pages the instructor opens.
Every attempt is wrapped, so that one blocked attempt does not stop the next; an attempt that
works prints ``ESCAPED``. Expected: the attacker gets nothing (zero everywhere, the release's
grade), every honest classmate graded before and after it gets exactly their grade, and the
course, the environment and the library are unchanged (``tests/test_course_attacks.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

from submissions.catalog import Submission, add_cell, append, delete, replace

A = "a1_functions"
DAEMON_MARK = "torchlight-attack-daemon"
HOST_MARK = "/tmp/torchlight-attack-escaped"

PRELUDE = """
import glob, gzip, json, os, shutil, signal, sqlite3, stat, sys, time
COURSE, REPO, VENV = "@COURSE@", "@REPO@", "@VENV@"


def attempt(what, action):
    try:
        action()
    except Exception as exc:
        print(f"blocked: {what}: {type(exc).__name__}")
    else:
        print(f"ESCAPED: {what}")
"""

TAMPER = (
    PRELUDE
    + """

def gradebook(sql):
    def action():
        db = sqlite3.connect(f"file:{COURSE}/gradebook.db?mode=rw", uri=True)
        db.execute(sql)
        db.commit()
    return action


def append(path, text):
    def action():
        with open(path, "a") as f:
            f.write(text)
    return action


def write(path, text, mode=0o755):
    def action():
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
    return action


def replace_file(path, text):
    def action():
        with open(path + ".new", "w") as f:
            f.write(text)
        os.replace(path + ".new", path)
    return action


def shuffle_digits():
    import torchlight.data
    path = os.path.join(os.path.dirname(torchlight.data.__file__), "digits.csv.gz")
    with gzip.open(path, "rt") as f:
        rows = f.read().splitlines()
    with gzip.open(path, "wt") as f:
        f.write("\\n".join(rows[::-1]))


def overwrite_classmates():
    release = f"{COURSE}/release/a1_functions/a1_functions.ipynb"
    found = glob.glob(f"{COURSE}/submitted/*/a1_functions/a1_functions.ipynb")
    assert found, "no submissions visible"
    for path in found:
        shutil.copy(release, path)


def forge_feedback():
    found = glob.glob(f"{COURSE}/feedback/*/*/*.html")
    assert found, "no feedback visible"
    for path in found:
        with open(path, "a") as f:
            f.write("<p>forged note</p>")


attempt("gradebook: my manual scores", gradebook("UPDATE grade SET manual_score = 100"))
attempt("gradebook: max_score", gradebook("UPDATE grade_cells SET max_score = 0"))
attempt("gradebook: setup cell", gradebook("UPDATE source_cells SET source = 'import os'"))
attempt("config", append(f"{COURSE}/nbgrader_config.py", "\\nraise SystemExit('pwned')\\n"))
attempt("config replaced", replace_file(f"{COURSE}/nbgrader_config.py", "raise SystemExit(1)\\n"))
for site in [p for p in sys.path if p.endswith("site-packages")]:
    attempt(f".pth in {site}", write(f"{site}/zz_attack.pth", "import os\\n"))
attempt("library", append(f"{REPO}/torchlight/ops/arithmetic.py", "\\n# pwned\\n"))
attempt("grader", append(f"{REPO}/torchlight_grader/checks/kinds.py", "\\n# pwned\\n"))
attempt("unshare in venv", write(f"{VENV}/bin/unshare", "#!/bin/sh\\nexec \\"$@\\"\\n"))
attempt("bwrap in venv", write(f"{VENV}/bin/bwrap", "#!/bin/sh\\nexec \\"$@\\"\\n"))
attempt("digits", shuffle_digits)
attempt("classmates' submissions", overwrite_classmates)
attempt("classmates' feedback", forge_feedback)
write("@HOST_MARK@", "written")()  # works: the sandbox's own /tmp (the host's stays clean)
"""
).replace("@HOST_MARK@", HOST_MARK)

STEAL = (
    PRELUDE
    + """

def exec_solutions():
    with open(f"{COURSE}/source/a1_functions/a1_functions.ipynb") as f:
        source = json.load(f)
    for cell in source["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            exec("".join(cell["source"]), globals())


def show(path):
    def action():
        with open(path) as f:
            print(f.read())
    return action


def classmates():
    db = sqlite3.connect(f"file:{COURSE}/gradebook.db?mode=ro", uri=True)
    print(db.execute("SELECT * FROM grade").fetchall())


def grader():
    import torchlight_grader.checks.a1_functions as hidden
    print(hidden.CHECKS)


attempt("exec the solutions", exec_solutions)
attempt("print the solutions", show(f"{COURSE}/source/a1_functions/a1_functions.py"))
attempt("print the hidden checks", show(f"{REPO}/torchlight_grader/checks/a1_functions.py"))
attempt("import the grader", grader)
attempt("classmates' grades", classmates)
"""
)

FORGE = (
    PRELUDE
    + """
import runners  # the sandbox's own call code: the only grading code it has

FRAME = json.dumps({"result": "test_mul", "nonce": "0" * 32, "cases": []}).encode()


def forge_frames():
    for fd in range(3, 64):
        try:
            os.write(fd, b"%08x" % len(FRAME) + FRAME)
        except OSError:
            pass


def result_files():
    for item in ("test_mul", "test_div", "test_exp", "test_log", "test_pow"):
        with open(f"result-{item}.json", "w") as f:
            json.dump({"cases": [{"forward": 1.0}]}, f)


def patch_runner():
    runners.run = lambda spec, namespace, case: {"forward": case["args"][0], "forward_type": "Tensor"}


attempt("forged frames", forge_frames)
attempt("result files", result_files)
attempt("patched runner", patch_runner)
"""
)

DAEMON = (
    PRELUDE
    + f'''

def daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["{DAEMON_MARK}", "600"])
        os._exit(0)


attempt("double-fork daemon", daemon)
time.sleep(0.2)
attempt("kill everything", lambda: os.kill(-1, signal.SIGKILL))
'''
)

HOSTILE_MARKDOWN = """
# Notes <script>pwn_md()</script>

<img src="x" onerror="pwn_img()"> [click me](javascript:pwn_link()) <a href="javascript:pwn_a()">a</a>
"""

HOSTILE_OUTPUTS = """
from IPython.display import HTML, Javascript, display

display(HTML('<b>bold</b><script>pwn_html()</script><img src=x onerror=pwn_attr()>'))
display(Javascript('pwn_js()'))
display({"application/vnd.jupyter.widget-view+json": {"model_id": "pwn_widget"}, "text/plain": "w"}, raw=True)
display({"image/png": 'AAAA" onerror="pwn_png()', "text/plain": "png"}, raw=True)
display({"image/svg+xml": '<svg onload="pwn_svg()"></svg>', "text/plain": "svg"}, raw=True)
"""

MARKERS = ("pwn_md", "pwn_img", "pwn_link", "pwn_a", "pwn_html", "pwn_attr", "pwn_js", "pwn_widget",
           "pwn_png", "pwn_svg", "pwn_raw", "pwn_meta")  # fmt: skip


def hostile_notebook(nb: object) -> None:
    import nbformat

    index = next(
        i
        for i, c in enumerate(nb.cells)  # type: ignore[attr-defined]
        if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"
    )
    raw = nbformat.v4.new_raw_cell("<script>pwn_raw()</script>", metadata={"format": "text/html"})
    md = nbformat.v4.new_markdown_cell(HOSTILE_MARKDOWN.strip())
    code = nbformat.v4.new_code_cell(HOSTILE_OUTPUTS.strip())
    code.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": "<script>pwn_html()</script>"})
    ]
    for cell in (raw, md, code):
        cell.pop("id", None)
    nb.cells[index + 1 : index + 1] = [md, code, raw]  # type: ignore[attr-defined]
    nb.metadata["widgets"] = {  # type: ignore[attr-defined]
        "application/vnd.jupyter.widget-state+json": {"state": {"pwn_meta": {}}, "version_major": 2}
    }


# The unprivileged deployment's sandbox root was an unsized, writable tmpfs (issue 24 item 3):
# every write outside the sized WORK, /tmp and /dev/shm must fail, in both deployments.
FILL_ROOT = (
    PRELUDE
    + """

def fill(path):
    def action():
        with open(path, "wb") as f:
            f.write(b"x" * (8 * 1024**2))
        os.unlink(path)
    return action


for where in ("/fill", "/etc/fill", "/usr/fill", "/proc/fill", "/dev/fill"):
    attempt(f"write 8 MiB to {where}", fill(where))
attempt("make a folder at /", lambda: os.mkdir("/new-folder"))
"""
)

# A 1x1 PNG, as JupyterLab stores an image pasted into a markdown cell.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def pasted_image(nb: object) -> None:
    """An honest student pastes a picture of their derivation into a markdown cell."""
    import nbformat

    cell = nbformat.v4.new_markdown_cell("My derivation:\n\n![image.png](attachment:image.png)")
    cell.pop("id", None)
    cell["attachments"] = {"image.png": {"image/png": PNG}}
    nb.cells.insert(1, cell)  # type: ignore[attr-defined]


def huge_markdown(nb: object) -> None:
    """An honest student's notes: 4 MB of markdown, nested markup and HTML, beside correct
    answers (rendering and cleaning it all would be unbounded grader work)."""
    import nbformat

    notes = "".join(f"* **note {i}** <b>*x*</b> `{i}` [link](http://example.org/{i})\n"
                    for i in range(60_000))  # fmt: skip
    for text in (notes, "> " * 50_000 + "deep", "<div>" * 20_000 + "pwn_md()"):
        cell = nbformat.v4.new_markdown_cell(text)
        cell.pop("id", None)
        nb.cells.insert(1, cell)  # type: ignore[attr-defined]


TEX_MARK = "PWNED"


def tex_macros(nb: object) -> None:
    """Issue 39 items 1 and 5: TeX that redefines the macros a classmate's page uses (in one
    MathJax typesetter per grading process these stayed defined for every later page), and a
    page of formulas that cost minutes of the grader's CPU and a page of 167 MB."""
    import nbformat

    m = TEX_MARK
    redefine = (r"$\renewcommand{\frac}[2]{\text{" + m + r"}}\def\sum{\text{" + m + r"}}"
                r"\let\partial\PWNED$ $$\gdef\mathbf#1{\text{" + m + r"}}$$")  # fmt: skip
    heavy = "\n\n".join(f"$$\\iiiint_{{V_{{{i}}}}} " + "\\iiiint " * 400 + "f$$" for i in range(16))
    for text in (redefine, heavy):
        cell = nbformat.v4.new_markdown_cell(text)
        cell.pop("id", None)
        nb.cells.insert(1, cell)  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ folder edits
def notebook_is_symlink_to_source(folder: Path, course: Path) -> None:
    notebook = folder / f"{A}.ipynb"
    notebook.unlink()
    notebook.symlink_to(course / "source" / A / f"{A}.ipynb")


def symlinks_beside(folder: Path, course: Path) -> None:
    (folder / "gradebook.db").symlink_to(course / "gradebook.db")
    (folder / "answers.txt").symlink_to(course / "source" / A / f"{A}.py")
    (folder / "zero").symlink_to("/dev/zero")
    os.mkfifo(folder / "pipe")


def truncated(folder: Path, course: Path) -> None:
    notebook = folder / f"{A}.ipynb"
    text = notebook.read_text()
    notebook.write_text(text[: len(text) // 2])


def bogus_metadata(nb: object) -> None:
    for cell in nb.cells:  # type: ignore[attr-defined]
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_div":
            cell.metadata["nbgrader"] = ["grade"]


ATTACKS = [
    Submission("attack-tamper", A, "cheat", "release", (add_cell("setup", TAMPER),)),
    Submission("attack-steal", A, "cheat", "release", (add_cell("setup", STEAL),)),
    Submission(
        "attack-forge",
        A,
        "cheat",
        "release",
        (
            add_cell("setup", FORGE),
            replace(
                "mul", "import os\nclass Mul:\n    def forward(ctx, a, b):\n        os._exit(0)"
            ),
        ),
    ),
    Submission("attack-daemon", A, "cheat", "release", (add_cell("setup", DAEMON),)),
    Submission("attack-hostile-html", A, "cheat", "release", (hostile_notebook,)),
    Submission(
        "attack-symlink-notebook", A, "cheat", "release", files=(notebook_is_symlink_to_source,)
    ),
    Submission(
        "attack-symlinks-beside",
        A,
        "cheat",
        "solution",
        files=(symlinks_beside,),
        note="a correct notebook keeps its marks; the links are refused, never copied",
    ),
    Submission("attack-truncated-json", A, "hazard", "release", files=(truncated,)),
    Submission("attack-tex-macros", A, "cheat", "release", (tex_macros,)),
    Submission(
        "attack-built-in",
        A,
        "cheat",
        "solution",
        (append("mul", "import torchlight.ops.arithmetic as built_in  # reaches for the answers"),),
        note="imports the library's own Functions: flagged for review, not zeroed",
    ),
    Submission(
        "attack-bogus-metadata",
        A,
        "hazard",
        "solution",
        (delete("test_tanh"), bogus_metadata),
        note='`"nbgrader": ["grade"]` on a test cell: dropped, the cell restored, full marks',
    ),
]

# Issue 24 item 4: backwards that hand the derivative back to an autograd (no `functions.X`
# spelled anywhere): the hidden checks run against a grader-built torchlight whose graded ops
# have no backward, and without real PyTorch; still flagged for review from their structure.
LIBRARY_AUTOGRAD = """
import torchlight as tl


def _ask_the_library(x, grad_output):
    with tl.enable_grad():
        leaf = x.detach().requires_grad_()
        leaf.tanh().backward(grad_output)
    return leaf.grad


class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._map("tanh")

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return _ask_the_library(x, grad_output)
"""

LIBRARY_MUL = """
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

PYTORCH_EXP = """
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._map("exp")

    @staticmethod
    def backward(ctx, grad_output):
        import torch  # real PyTorch, installed beside torchlight

        (x,) = ctx.saved_tensors
        leaf = torch.tensor(x.detach().numpy(), requires_grad=True)
        leaf.exp().backward(torch.tensor(grad_output.numpy()))
        return tl.tensor(leaf.grad.numpy())
"""

# Issue 24 item 5: Romberg's table of central differences on a relative step, inline in numpy:
# exact for the linear and piecewise-linear items (Mul, ReLU) and within 1e-12 for Div on the
# random trials; Log fails its huge-input trial (and so `expression`). All four are flagged.
RICHARDSON = """
import numpy as np


def _richardson(f, x, levels=4):
    h = 1e-2 * np.maximum(1.0, np.abs(x))
    table = [(f(x + h / 2**k) - f(x - h / 2**k)) / (2 * h / 2**k) for k in range(levels)]
    for m in range(1, levels):
        table = [(4**m * fine - coarse) / (4**m - 1) for coarse, fine in zip(table, table[1:])]
    return table[0]


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a._zip("mul", b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = (t.detach().numpy() for t in ctx.saved_tensors)
        g = grad_output.numpy()
        return tl.tensor(g * _richardson(lambda z: z * b, a)), tl.tensor(g * _richardson(lambda z: a * z, b))
"""


# Issue 24 item 7: a thread left running by the last cell lives on in the process that then
# receives the items. It watches that process's frames for the item being run (and its nonce,
# where there is one) and writes a correct-looking result and an "exit 0" status for Tanh into
# every pipe and socket it holds (the grader's result pipe among them, before the broker),
# while the real Tanh is slow and wrong.
SLOW_WRONG_TANH = """
import time


class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        return x._map("tanh")

    @staticmethod
    def backward(ctx, grad_output):
        time.sleep(0.5)  # the forged frames come first
        return grad_output * 0.0
"""

FORGE_FRAMES = """
import os as _os, stat as _stat, sys as _sys, threading as _threading, time as _time


def _forge():
    import wire  # the sandbox's own encoder, next to child.py

    main = _threading.main_thread().ident
    while True:
        frame = _sys._current_frames().get(main)
        while frame is not None:
            item = frame.f_locals.get("item")
            if isinstance(item, dict) and item.get("id") == "test_tanh":
                cases = []
                for case in item["cases"]:
                    t = np.tanh(np.asarray(case["args"][0]))
                    grad = np.asarray(case["grad_output"]) * (1 - t * t)
                    cases.append({"forward": t, "forward_type": "Tensor", "grads": [grad],
                                  "grad_types": ["Tensor"]})
                nonce = item.get("nonce", "")
                frames = [{"result": "test_tanh", "nonce": nonce, "cases": cases},
                          {"status": "test_tanh", "nonce": nonce, "pid": _os.getpid() + 1,
                           "timed_out": False, "signal": None, "exit_code": 0,
                           "output_bytes": 0, "output_tail": ""}]
                for message in frames:
                    payload = wire.dumps(message).encode()
                    for fd in range(3, 64):
                        try:
                            mode = _os.fstat(fd).st_mode
                            if _stat.S_ISFIFO(mode) or _stat.S_ISSOCK(mode):
                                _os.write(fd, b"%08x" % len(payload) + payload)
                        except OSError:
                            pass
                return
            frame = frame.f_back
        _time.sleep(0.001)


_threading.Thread(target=_forge, daemon=True).start()
"""


def _numeric(name, f):
    return f"""
class {name}(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._map("{name.lower()}")

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return tl.tensor(grad_output.numpy() * _richardson({f}, x.detach().numpy()))
"""


RICHARDSON_DIV = """
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a._zip("div", b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = (t.detach().numpy() for t in ctx.saved_tensors)
        g = grad_output.numpy()
        return tl.tensor(g * _richardson(lambda z: z / b, a)), tl.tensor(g * _richardson(lambda z: a / z, b))
"""

ATTACKS += [
    Submission(
        "attack-library-autograd",
        A,
        "cheat",
        "solution",
        (
            replace("tanh", LIBRARY_AUTOGRAD),
            replace("mul", LIBRARY_MUL),
            replace("exp", PYTORCH_EXP),
        ),  # fmt: skip
        zero=("test_tanh", "test_mul", "test_exp", "test_expression"),
        note="backwards through the library's tanh and mul and through PyTorch: zero, flagged",
    ),
    Submission(
        "attack-forge-frames",
        A,
        "cheat",
        "solution",
        (replace("tanh", SLOW_WRONG_TANH), append("expression", FORGE_FRAMES)),
        zero=("test_tanh",),
        note="a thread in the item-receiving process forges Tanh's result and status: zero",
    ),
    Submission(
        "attack-relative-step",
        A,
        "cheat",
        "solution",
        (
            replace("mul", RICHARDSON),
            replace("div", RICHARDSON_DIV),
            replace("log", _numeric("Log", "np.log")),
            replace("relu", _numeric("ReLU", "lambda z: np.maximum(z, 0)")),
        ),  # fmt: skip
        zero=("test_log", "test_expression"),
        note="Romberg differences on a relative step: Mul, ReLU, Div pass, flagged for review",
    ),
    Submission("attack-fill-root", A, "cheat", "release", (add_cell("setup", FILL_ROOT),)),
    Submission(
        "hazard-pasted-image",
        A,
        "hazard",
        "solution",
        (pasted_image,),
        note="an image pasted in JupyterLab (a markdown attachment): full marks, shown as text",
    ),
    Submission(
        "hazard-huge-markdown",
        A,
        "hazard",
        "solution",
        (huge_markdown,),
        note="4 MB of markdown beside correct answers: full marks, over-budget cells as text",
    ),
]

HONEST = [
    Submission("0-honest-first", A, "solution", "solution"),
    Submission("zz-honest-last", A, "solution", "solution"),
]
