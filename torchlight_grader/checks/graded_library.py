"""The grader-built copy of torchlight that the hidden checks run against (issue 24 item 4).

An item that asks the student to write a derivative must score only a derivative the student
wrote. The library's own Functions compute those derivatives, and a ``backward`` can hand the
work back to them (``x.detach().requires_grad_()``, the library's ``x.tanh()`` or ``a * b``,
``.backward(G)`` under ``enable_grad``). So the hidden-check sandbox does not see the library
as installed: it sees a copy, built here once per grading process and notebook, in which the
``backward`` of every Function the notebook grades (:data:`GRADED`) is replaced by a ``raise``
that says "write it yourself". The copy is bound read-only over the library's own folder, so no
student code in that sandbox can reach the original ``backward`` (not by reloading a module,
not from a file: the code is not there). Honest answers call their own Functions and never
reach the library's ``backward`` of these ops, so nothing changes for them.

The Functions are found by their class names among torchlight's own ``Function`` subclasses
after ``import torchlight`` (wherever the library keeps them), and the file to rewrite is the
one Python reports for each class.

What stays reachable: every other Function's backward (a student can rebuild a derivative out
of ops this notebook does not grade: flagged from the code's structure by
:mod:`torchlight_grader.checks.structure`, see assignments/README.md). Real PyTorch, when it is
installed in the environment, is hidden from the same sandbox (:func:`hidden_packages`).

Where the copies live: one folder per grading process, ``<tmp>/torchlight-graded-<pid>-<start
time>-<random>`` (:func:`process_dir`), removed when the process ends. A process killed with
SIGKILL cannot remove it, so the next grading process removes every such folder of this user
whose process is gone (the pid is not running, or runs a later process: its start time
differs), and the pre-fix ``torchlight-graded-<random>`` folders older than a day.
"""

from __future__ import annotations

import ast
import atexit
import functools
import importlib.util
import inspect
import os
import py_compile
import re
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: notebook -> the class names of the library Functions whose backward the notebook grades.
#: Every item of a notebook asks for these derivatives (a1-a2: the elementary ops; a3: the
#: linear layer and the loss; a4: convolution and pooling; a5: normalization, softmax, LSTM).
GRADED: dict[str, tuple[str, ...]] = {
    "a1_functions": ("Mul", "Div", "Exp", "Log", "Sigmoid", "ReLU", "Tanh", "Pow"),
    "a2_broadcasting": ("Add", "Mul", "Sum", "MatMul", "Permute", "View", "Expand"),
    "a3_networks": ("LinearFunction", "CrossEntropy", "LogSoftmaxFunction", "NLLLossFunction"),
    "a4_convolutions": ("Conv2dFunction", "AvgPool2dFunction"),
    "a5_attention": (
        "LayerNormFunction",
        "SoftmaxFunction",
        "LogSoftmaxFunction",
        "LSTMCellFunction",
    ),
    "a8_inference": ("CheckpointFunction",),  # torchlight.utils.checkpoint's recomputing backward
}

#: notebook -> the library's own functions (``module:name``) the notebook asks students to
#: write: their bodies become the same ``raise`` (a1b: the engine's walk and central
#: differences; ``Tensor.backward`` and ``autograd.grad`` call them, so they are gone too).
GRADED_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "a1b_engine": (
        "torchlight.autograd.engine:topological_sort",
        "torchlight.autograd.engine:backward_steps",
        "torchlight.autograd.engine:backpropagate",
        "torchlight.autograd.engine:grad",
        "torchlight.autograd.gradcheck:central_difference",
        "torchlight.autograd.gradcheck:jacobian_mismatch",
    ),
    "a2b_strided": (
        "torchlight.shape:index_to_position",
        "torchlight.shape:to_index",
        "torchlight.shape:broadcast_index",
        "torchlight.shape:broadcast_shape",
        "torchlight.backends.strided.backend:StridedBackend.map",
        "torchlight.backends.strided.backend:StridedBackend.zip",
        "torchlight.backends.strided.backend:StridedBackend.reduce",
    ),
    "a2c_kernels": (  # the library's own Numba and CUDA kernels: the notebook writes them
        "torchlight.backends.numba.kernels:_make_map_kernels",
        "torchlight.backends.numba.kernels:_make_zip_kernels",
        "torchlight.backends.numba.kernels:_make_reduce_kernels",
        "torchlight.backends.numba.kernels:matmul_kernel",
        "torchlight.backends.cuda.kernels:_map_source",
        "torchlight.backends.cuda.kernels:_zip_source",
        "torchlight.backends.cuda.kernels:_reduce_source",
        "torchlight.backends.cuda.kernels:_small_matmul_source",
        "torchlight.backends.cuda.kernels:_tiled_matmul_source",
        "torchlight.backends.cuda.kernels:_blocked_matmul_source",
    ),
    "a6_tokens": (
        "torchlight.train.tokenizers:_merge",
        "torchlight.train.tokenizers:BPETokenizer.train",
        "torchlight.train.tokenizers:BPETokenizer._encode_word",
        "torchlight.train.tokenizers:BPETokenizer.encode",
        "torchlight.train.tokenizers:BPETokenizer.decode",
        "torchlight.nn.sparse:embedding",
        "torchlight.nn.sparse:Embedding.forward",
        "torchlight.nn.transformer:SinusoidalPositionalEncoding.__init__",
        "torchlight.nn.transformer:LearnedPositionalEmbedding.forward",
    ),
    "a7_gpt": (
        "torchlight.nn.attention:attention_weights",
        "torchlight.nn.attention:scaled_dot_product_attention",
        "torchlight.nn.attention:MultiheadAttention.forward",
        "torchlight.nn.transformer:TransformerEncoderLayer.forward",
        "torchlight.nn.transformer:TransformerDecoderLayer.forward",
        "torchlight.nn.transformer:GPTBlock.forward",
        "torchlight.nn.transformer:GPT.forward",
        "torchlight.optim.adam:Adam._update",
        "torchlight.optim.adam:AdamW._decay",
        "torchlight.optim.lr_scheduler:CosineAnnealingLR.get_lr",
        "torchlight.nn.utils.clip_grad:clip_grad_norm_",
    ),
    "a8_inference": (  # the library's sampler and its loss scaler's unscaling and update
        "torchlight.train.generate:generate",
        "torchlight.amp:GradScaler.unscale_",
        "torchlight.amp:GradScaler.update",
    ),
}

#: notebook -> files of the package (relative to it) left out of that notebook's copy: the
#: capstone's recipes train on the tokens the grader sends them and never see the corpus the
#: grader holds its validation text from.
LEFT_OUT_FILES: dict[str, tuple[str, ...]] = {
    "a9_capstone": ("data/shakespeare.txt.gz",),
}

#: notebook -> gzipped text files of the package whose tail, from the given share of their
#: characters on, that notebook's copy has shuffled (the same characters in a random order,
#: drawn anew in every grading process): a7 trains on Shakespeare's first 90% in the sandbox
#: and the grader computes the loss on windows of the last 10%, which a notebook could
#: otherwise look up in the shipped text (issue 36's attack batch: a loss of 0.36 nats without
#: training). The notebook's own cells still load the text; its head, the training data, is
#: unchanged, and so is its set of characters.
SHUFFLED_TAILS: dict[str, tuple[tuple[str, float], ...]] = {
    "a7_gpt": (("data/shakespeare.txt.gz", 0.9),),
}

#: Packages of the environment no hidden check needs that carry an autograd of their own.
AUTOGRAD_PACKAGES = ("torch", "functorch", "jax", "autograd")

#: The words every left-out part of the grader's library raises with (the grader flags an
#: item whose verdict carries them: the answer reached for what the notebook grades).
LEFT_OUT = "write it yourself:"

MESSAGE = (
    "write it yourself: {name}'s backward is what this notebook grades, so the grader's "
    "torchlight leaves it out (an answer cannot hand the derivative back to the library)"
)


FUNCTION_MESSAGE = (
    "write it yourself: {name} is what this notebook grades, so the grader's torchlight leaves "
    "it out (and so everything in the library that calls it: a1b's Tensor.backward and "
    "autograd.grad, a2b's strided backend, a2c's Numba and CUDA backends, a6's tokenizer and "
    "embedding layers, a7's attention, transformer layers, AdamW and clipping)"
)


def _body_lines(fn: ast.FunctionDef) -> tuple[int, int]:
    """The first and last line of ``fn``'s body after its docstring (a docstring stays)."""
    body = fn.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body[0].lineno, fn.end_lineno or body[-1].lineno


class GradedLibraryError(RuntimeError):
    """The grader-built library cannot be built (a Function named in GRADED is gone)."""


def library_functions() -> dict[str, list[type]]:
    """torchlight's own Function subclasses (after ``import torchlight``), by class name."""
    import torchlight
    import torchlight.nn
    import torchlight.ops  # noqa: F401 - where the Functions live (imported for their classes)
    import torchlight.utils  # noqa: F401 - (torchlight.utils.checkpoint's Function too)
    from torchlight.autograd import Function

    found: dict[str, list[type]] = {}
    todo = list(Function.__subclasses__())
    seen: set[type] = set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo += cls.__subclasses__()
        if cls.__module__.split(".")[0] == torchlight.__name__:
            found.setdefault(cls.__name__, []).append(cls)
    return found


def _without_backward(
    source: str, classes: Iterable[str], path: str, functions: Iterable[str] = ()
) -> str:
    """``source`` with the body of each named class's ``backward``, and of each named
    module-level function, replaced by a ``raise``."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []  # (first line, last line, replacement), 1-based, inclusive
    wanted = set(classes)
    defined = {fn.name: fn for fn in tree.body if isinstance(fn, ast.FunctionDef)}
    for cls in tree.body:  # methods, as "Class.method"
        if isinstance(cls, ast.ClassDef):
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef):
                    defined[f"{cls.name}.{fn.name}"] = fn
    for name in functions:
        if name in defined:
            fn = defined[name]
            first, last = _body_lines(fn)
            indent = " " * fn.body[0].col_offset
            message = FUNCTION_MESSAGE.format(name=name)
            edits.append((first, last, f"{indent}raise RuntimeError({message!r})\n"))
    missing_functions = set(functions) - set(defined)
    if missing_functions:
        raise GradedLibraryError(f"{path}: no function {sorted(missing_functions)} to rewrite")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name in wanted):
            continue
        method = next(
            (f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "backward"),
            None,
        )
        message = MESSAGE.format(name=node.name)
        if method is None:  # inherited: give the class a backward of its own
            end = node.end_lineno or node.lineno
            indent = " " * (node.body[0].col_offset if node.body else node.col_offset + 4)
            text = (
                f"\n{indent}@staticmethod\n{indent}def backward(ctx, *grad_outputs):\n"
                f"{indent}    raise RuntimeError({message!r})\n"
            )
            edits.append((end + 1, end, text))
        else:
            first, last = method.body[0].lineno, method.end_lineno or method.body[-1].lineno
            indent = " " * method.body[0].col_offset
            edits.append((first, last, f"{indent}raise RuntimeError({message!r})\n"))
        wanted.discard(node.name)
    if wanted:
        raise GradedLibraryError(f"{path}: no class {sorted(wanted)} found to rewrite")
    for first, last, text in sorted(edits, reverse=True):
        lines[first - 1 : last] = [text]
    return "".join(lines)


PREFIX = "torchlight-graded-"
#: A pre-fix folder (no pid in its name) is removed once this old: no grading runs a day long.
LEGACY_AGE = 24 * 3600


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, Linux), "" where /proc cannot
    say, None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except FileNotFoundError:
        return None
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""


def remove_stale(tmp: Path) -> list[Path]:
    """Remove this user's grader-built copies under ``tmp`` whose grading process is gone
    (killed before its exit handler ran); returns what it removed."""
    removed = []
    for path in tmp.glob(PREFIX + "*"):
        try:
            info = path.lstat()
        except OSError:
            continue
        if not path.is_dir() or path.is_symlink() or info.st_uid != os.getuid():
            continue
        parts = path.name[len(PREFIX) :].split("-")
        if len(parts) == 3 and parts[0].isdigit():
            started = _start_time(int(parts[0]))
            if started is not None and started in ("", parts[1]):
                continue  # its process is alive (or /proc cannot tell): leave it
        elif time.time() - info.st_mtime < LEGACY_AGE:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _remove_own(root: Path, pid: int) -> None:
    if os.getpid() == pid:  # not from a forked child that inherited the handler
        shutil.rmtree(root, ignore_errors=True)


@functools.cache
def process_dir() -> Path:
    """This process's folder for its grader-built copies (made once, stale ones removed first;
    removed at exit). Its name carries the pid and the process's start time, so a later
    process can tell it from a live one; the random part keeps the name unguessable."""
    tmp = Path(tempfile.gettempdir())
    remove_stale(tmp)
    pid = os.getpid()
    started = _start_time(pid) or "0"
    root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-{started}-", dir=tmp))
    atexit.register(_remove_own, root, pid)
    os.chmod(root, 0o755)  # the sandbox's user reads the copies; mkdtemp made it 0700
    return root


def _fresh_folder() -> Path:
    root = Path(tempfile.mkdtemp(dir=process_dir()))
    os.chmod(root, 0o755)
    return root


def _copy(src: Path) -> Path:
    """A fresh folder holding a copy of ``src`` (removed when this process ends)."""
    dst = _fresh_folder() / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dst


def _compile(paths: Iterable[Path]) -> None:
    for path in paths:
        py_compile.compile(str(path), cfile=importlib.util.cache_from_source(str(path)),
                           doraise=True)  # fmt: skip


def _read_only(dst: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(dst):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o444)


@functools.cache
def compiled() -> Path:
    """The whole library, unchanged, with its byte code: the sandbox cannot write byte code
    (read-only, ``-B``) and would otherwise compile the package at every start (the feedback
    kernel runs get this one)."""
    import torchlight

    dst = _copy(Path(torchlight.__file__).resolve().parent)
    _compile(dst.rglob("*.py"))
    _read_only(dst)
    return dst


@functools.cache
def build(
    names: frozenset[str],
    functions: frozenset[str] = frozenset(),
    files: frozenset[str] = frozenset(),
    shuffled: frozenset[tuple[str, float]] = frozenset(),
) -> Path:
    """A read-only copy of the torchlight package without the backward of ``names``, without
    the module-level ``functions`` (``module:name``) and without the data ``files`` (cached for
    this process, removed when it ends); returns the copy's package folder."""
    import torchlight

    src = Path(torchlight.__file__).resolve().parent
    by_name = library_functions()
    missing = sorted(n for n in names if n not in by_name)
    if missing:
        raise GradedLibraryError(
            f"the hidden checks grade the backward of {missing}, which torchlight no longer "
            "defines (renamed or moved out of torchlight?): update GRADED in "
            "torchlight_grader/checks/graded_library.py"
        )
    by_file: dict[Path, set[str]] = {}
    for name in names:
        for cls in by_name[name]:
            file = Path(inspect.getsourcefile(cls) or "").resolve()
            if src not in file.parents:
                raise GradedLibraryError(f"{cls.__qualname__} is defined outside {src}: {file}")
            by_file.setdefault(file.relative_to(src), set()).add(cls.__name__)
    in_file = _function_files(src, functions)
    base = compiled()
    rewritten = {rel: _without_backward((src / rel).read_text(encoding="utf-8"),
                                        by_file.get(rel, ()), str(rel), in_file.get(rel, ()))
                 for rel in sorted(by_file.keys() | in_file.keys())}  # fmt: skip
    changed = set(rewritten) | {
        Path(importlib.util.cache_from_source(str(rel))) for rel in rewritten
    }  # the rewritten sources and their byte code are written anew; nothing else changes
    dst = _fresh_folder() / src.name
    left = {Path(f) for f in files} | {Path(f) for f, _ in shuffled}

    def link(source: str, target: str) -> None:
        # A hard link to the compiled copy's file (read-only already, same bytes and mtime):
        # nothing is copied of what this variant keeps as it is. The rewritten files and their
        # byte code are new files, never links, so the compiled copy (the one the feedback
        # kernel runs get) never changes.
        if Path(target).relative_to(dst) in changed or Path(target).relative_to(dst) in left:
            return
        try:
            os.link(source, target)
        except OSError:  # a file system without hard links
            shutil.copy2(source, target)

    shutil.copytree(base, dst, copy_function=link)
    for rel, text in rewritten.items():
        (dst / rel).write_text(text, encoding="utf-8")
    for name, share in shuffled:
        _write_shuffled_tail(src / name, dst / name, share)
    _compile(dst / rel for rel in rewritten)
    _read_only(dst)
    return dst


def _write_shuffled_tail(source: Path, target: Path, share: float) -> None:
    """``source`` (gzipped UTF-8 text) written to ``target`` with its characters from
    ``int(share * len(text))`` on in a random order (a seed from the operating system)."""
    import gzip

    import numpy as np

    text = gzip.decompress(source.read_bytes()).decode("utf-8")
    head = int(share * len(text))
    tail = np.array(list(text[head:]))
    np.random.default_rng(int.from_bytes(os.urandom(8), "little")).shuffle(tail)
    target.write_bytes(gzip.compress((text[:head] + "".join(tail)).encode("utf-8"), mtime=0))


def _function_files(src: Path, functions: Iterable[str]) -> dict[Path, set[str]]:
    """The library files that define ``functions`` (``module:name``), and which names each."""
    found: dict[Path, set[str]] = {}
    for entry in functions:
        module, _, name = entry.partition(":")
        try:
            obj = importlib.import_module(module)
            for part in name.split("."):  # a method: "Class.method"
                obj = getattr(obj, part)
            obj = getattr(obj, "py_func", obj)  # a numba kernel: the function it compiles
            source = inspect.unwrap(obj) if callable(obj) else obj  # a decorated one: its own file
            file = Path(inspect.getsourcefile(source) or "").resolve()
        except (ImportError, AttributeError, TypeError) as exc:
            raise GradedLibraryError(
                f"the hidden checks grade {entry}, which torchlight no longer defines ({exc}): "
                "update GRADED_FUNCTIONS in torchlight_grader/checks/graded_library.py"
            ) from exc
        if src not in file.parents:
            raise GradedLibraryError(f"{entry} is defined outside {src}: {file}")
        found.setdefault(file.relative_to(src), set()).add(name)
    return found


def whole() -> tuple[tuple[str, str], ...]:
    """The read-only bind that gives a sandbox the unchanged library with its byte code."""
    import torchlight

    return ((str(compiled()), str(Path(torchlight.__file__).resolve().parent)),)


def for_notebook(notebook: str) -> tuple[tuple[str, str], ...]:
    """The read-only binds ``(source, target)`` that give ``notebook``'s hidden checks the
    grader-built library (none for a notebook without graded Functions)."""
    import torchlight

    names, functions = GRADED.get(notebook, ()), GRADED_FUNCTIONS.get(notebook, ())
    files = LEFT_OUT_FILES.get(notebook, ())
    shuffled = SHUFFLED_TAILS.get(notebook, ())
    if not names and not functions and not files and not shuffled:
        return ()
    target = str(Path(torchlight.__file__).resolve().parent)
    copy = build(frozenset(names), frozenset(functions), frozenset(files), frozenset(shuffled))
    return ((str(copy), target),)


#: What the hidden-check sandbox may import from the environment (issue 39 item 4): these
#: distributions and what they require (extras left out). Everything else installed (sympy,
#: scipy, jax, torch, nbgrader, the grader itself) is not in the sandbox at all. Numba (and its
#: llvmlite) for a2c's kernels; without SciPy it cannot compile numpy's ``@`` or ``np.dot``.
#: NVIDIA's numba-cuda (its simulator, and ``compile_ptx`` with the system's libNVVM) and NVRTC
#: for a2c's CUDA kernel.
ALLOWED_DISTRIBUTIONS = ("numpy", "ipython", "traitlets", "torchlight-edu", "numba", "numba-cuda",
                         "nvidia-cuda-nvrtc")  # fmt: skip


def allowed_distributions(sites: Iterable[str]) -> list[Any]:
    """The distributions installed in ``sites`` (site-packages folders) that
    :data:`ALLOWED_DISTRIBUTIONS` name, and what they require."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    installed = {norm(d.metadata["Name"]): d for d in metadata.distributions(path=list(sites))}
    seen: dict[str, Any] = {}
    todo = [norm(n) for n in ALLOWED_DISTRIBUTIONS]
    while todo:
        key = todo.pop()
        if key in seen or key not in installed:
            continue
        seen[key] = dist = installed[key]
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(norm(requirement.name))
    return [seen[k] for k in sorted(seen)]


@functools.cache
def check_sandbox_view() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``(masks, binds)`` for the hidden-check sandbox: every site-packages folder of the
    environment behind an empty one (``masks``), and in it, read-only, only the files and
    folders of :func:`allowed_distributions` (``binds``, each at its own path).

    An allowlist, not a list of what to hide: computer algebra (``sympy.Derivative``), another
    autograd (PyTorch, JAX) or anything installed later is simply not there."""
    import site

    sites = sorted({os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)})
    binds: set[str] = set()
    for dist in allowed_distributions(sites):
        base = os.path.realpath(str(dist.locate_file("")))
        tops = {entry.parts[0] for entry in dist.files or []} - {"..", "__pycache__"}
        binds.update(path for top in tops if os.path.lexists(path := os.path.join(base, top)))
    return tuple(sites), tuple((path, path) for path in sorted(binds))
