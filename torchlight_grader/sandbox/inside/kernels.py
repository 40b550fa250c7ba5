r"""Compiled kernels on described storages, and the speed protocol's timed runs, for the fast
kernels assignment's checks.

This file runs *inside* the sandbox, next to student code, like :mod:`runners`: no reference
values reach the grader from here, only what the student's kernel wrote (and, for a speed item,
the timings and whether each pair agreed).

- ``fast_map``, ``fast_zip``, ``fast_reduce``: the student's factory gets a compiled scalar
  function and returns a kernel (once per item and function: that one kernel runs every
  trial, as one kernel runs on every tensor), which is called on storages described as
  ``{"buffer", "shape", "strides", "offset"}`` (any layout) and an output of a described
  layout; the output's buffer comes back.
- ``tiled_matmul``: called on two matrices (either may be a transposed view); ``out`` comes
  back.
- ``cuda_results``: the student's ``@cuda.jit`` kernel launched in numba's CUDA simulator (the
  grader starts this sandbox with ``NUMBA_ENABLE_CUDASIM=1``) on two matrices, one block of
  ``CUDA_TILE x CUDA_TILE`` threads per tile of ``out``; ``out`` comes back, and what the
  kernel's code refers to that a GPU could not run (numpy's product, a Python function), and
  its bytecode, in which the grader looks for the ``@`` operator (no ``dis`` here: a cell could
  replace the module).
- ``cuda_ptx``: the same kernel compiled for a real GPU with ``numba.cuda.compile_ptx`` (no
  GPU needed; this sandbox runs without the simulator); the PTX comes back, and the grader
  reads it.
- ``speed``: the student's kernel against the reference kernel below in the paired protocol of
  ``torchlight_grader/checks/timing.py``, whose source the grader sends with the spec (this
  folder holds no grading code of its own). In the grading sandbox the broker paces and times
  it from outside this process (:mod:`paced`): here the student's kernel is only compiled and
  called when the broker says go, on inputs the broker has just written.

The reference kernels are plain parallel loops, as a student would write them: the library's
own kernels are not in the grader's library for this notebook.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

#: The compiled scalar functions the checks apply (built once per process, on first use).
_SCALARS: dict[str, Any] = {}
_REFERENCES: dict[str, Any] = {}
#: The kernel the student's factory made for each scalar function, in this item's process: the
#: factory is called once per item and function, and that one kernel runs every trial (numba
#: compiles a kernel on its first call: a second or two each, per trial before).
_MADE: dict[tuple[int, str], Any] = {}


def scalar(name: str) -> Any:
    """A compiled scalar function by name."""
    if not _SCALARS:
        from numba import njit

        def neg(x: float) -> float:
            return -x

        def softsign(x: float) -> float:
            return x / (1.0 + abs(x))

        def add(x: float, y: float) -> float:
            return x + y

        def sub(x: float, y: float) -> float:
            return x - y

        def maximum(x: float, y: float) -> float:
            return x if x > y else y

        def wave(x: float) -> float:  # a few dozen flops: the speed item's map is compute-bound
            return np.sin(x) * np.exp(-x * x) + np.cos(3.0 * x)

        for fn in (neg, softsign, add, sub, maximum, wave):
            _SCALARS[fn.__name__] = njit(fn)
    return _SCALARS[name]


def _is_parallel_kernel(kernel: Any) -> bool:
    """A numba CPU dispatcher compiled with ``parallel=True``."""
    options = getattr(kernel, "targetoptions", None)
    return (
        isinstance(options, dict) and bool(options.get("parallel")) and hasattr(kernel, "py_func")
    )


def _require_parallel(kernel: Any, what: str) -> None:
    if not _is_parallel_kernel(kernel):
        raise TypeError(
            f"{what} must be a kernel compiled with @njit(parallel=True), got "
            f"{type(kernel).__name__}"
        )


def _object_mode(kernel: Any) -> bool:
    """Whether a compiled kernel hands work back to the interpreter (``numba.objmode``, in the
    kernel or a function it calls): its machine code then calls Python objects
    (``PyObject_Call``), whatever spelling the notebook used."""
    try:
        return any("PyObject_Call" in text for text in kernel.inspect_llvm().values())
    except Exception:  # noqa: BLE001 - a kernel that cannot be inspected is judged by its result
        return False


def _prange_loops(kernel: Any) -> int:
    """How many ``prange`` loops numba made parallel in the compiled kernel (array expressions
    and allocations, which numba parallelizes too, are not counted)."""
    count = 0
    for signature in getattr(kernel, "signatures", []):
        try:
            diagnostics = kernel.get_metadata(signature).get("parfor_diagnostics")
            parfors = diagnostics.initial_parfors if diagnostics is not None else []
        except Exception:  # noqa: BLE001 - no diagnostics: no parallel loop shown
            parfors = []
        for parfor in parfors:
            patterns = getattr(parfor, "patterns", [])
            count += any(isinstance(p, tuple) and p and p[0] == "prange" for p in patterns)
    return count


def storage(description: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(buffer from the offset on, shape, strides)`` of a described storage."""
    buffer = np.array(description["buffer"], dtype=np.float64)[int(description["offset"]) :]
    shape = np.array(description["shape"], dtype=np.int64)
    strides = np.array(description["strides"], dtype=np.int64)
    return np.ascontiguousarray(buffer), shape, strides


def _out(description: dict[str, Any], fill: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    buffer, shape, strides = storage(description)
    buffer[:] = fill
    return buffer, shape, strides


def _made(factory: Any, op: str) -> Any:
    """``factory(scalar(op))``, made once in this process (the item's fork)."""
    key = (id(factory), op)
    if key not in _MADE:
        _MADE[key] = factory(scalar(op))
    return _MADE[key]


def run(runner: str, obj: Any, namespace: dict[str, Any], case: dict[str, Any],
        protected: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """One trial of a kernel item: call the student's ``obj`` and return raw data."""
    if runner == "speed":
        return speed(obj, case, protected)
    if runner == "cuda_results":
        return cuda_results(obj, namespace, case, protected)
    if runner == "cuda_ptx":
        return cuda_ptx(obj, namespace, case)
    if runner == "tiled_matmul":
        a, b, transposed = case["args"]
        a = np.array(a, dtype=np.float64)
        b = np.array(b, dtype=np.float64)
        if transposed:
            b = np.ascontiguousarray(b.T).T  # the same values, read through a transposed view
        out = np.full((a.shape[0], b.shape[1]), np.nan)
        _require_parallel(obj, "tiled_matmul")
        obj(out, a, b)
        return {"out": out, "object_mode": _object_mode(obj)}
    if runner == "fast_reduce":
        a, dim, op, start, out_description = case["args"]
        kernel = _made(obj, op)
        _require_parallel(kernel, "the kernel fast_reduce returns")
        target = _out(out_description, float(start))  # the start value in every element
        kernel(*target, *storage(a), int(dim))
    else:  # fast_map, fast_zip
        *inputs, op, out_description = case["args"]
        kernel = _made(obj, op)
        _require_parallel(kernel, f"the kernel {runner} returns")
        target = _out(out_description, np.nan)
        kernel(*target, *[part for d in inputs for part in storage(d)])
    return {"buffer": target[0], "object_mode": _object_mode(kernel)}


# ------------------------------------------------------------------------------ CUDA
#: What a GPU kernel may refer to, besides numba's CUDA module and types, ``math``, numeric
#: constants and other ``@cuda.jit`` device functions (checked the same way).
GPU_BUILTINS = {"range", "min", "max", "abs", "len", "float", "int", "bool", "round"}
#: numpy attributes that compute a product: in the simulator they would run as numpy.
PRODUCTS = {"dot", "matmul", "einsum", "tensordot", "inner", "vdot", "outer", "linalg", "objmode"}


def _tile(namespace: dict[str, Any]) -> int:
    tile = namespace.get("CUDA_TILE")
    if not isinstance(tile, int) or isinstance(tile, bool) or not 1 <= tile <= 32:
        raise ValueError(f"CUDA_TILE must be an int from 1 to 32 (a block has CUDA_TILE**2 <= "
                         f"1024 threads), got {tile!r}")  # fmt: skip
    return tile


def _not_gpu_code(fn: Any, protected: dict[str, Any], seen: set[int] | None = None,
                  codes: list[str] | None = None) -> list[str]:  # fmt: skip
    """What the kernel function ``fn`` (and the device functions it calls) refers to that a GPU
    cannot run: in the simulator every line is Python, so ``np.dot`` or a plain Python function
    would run there and give the right numbers. What it needs to know about Python was bound
    before any cell ran (``protected``, from :mod:`runners`: the builtins it calls too, so that
    a cell's ``builtins.isinstance`` does not answer for it); a module is numpy's, numba's or
    ``math`` only if it is loaded from where those are installed (a module a cell made and
    named ``numpy.something`` is not). The bytecode of every code object visited is added to
    ``codes`` (hex), for the grader to read operators in (``@``)."""
    import numba

    code_type, module_type = protected["code_type"], protected["module_type"]
    builtin_names, math = protected["builtin_names"], protected["math"]
    is_a, has, get = protected["isinstance"], protected["hasattr"], protected["getattr"]
    seen = set() if seen is None else seen
    codes = [] if codes is None else codes
    code = get(fn, "__code__", None)
    if code is None or id(code) in seen:
        return []
    seen.add(id(code))
    found: list[str] = []
    pending = [code]
    while pending:
        c = pending.pop()
        pending += [k for k in c.co_consts if is_a(k, code_type)]
        codes.append(c.co_code.hex())
        found += [f"`{n}`" for n in c.co_names if n in PRODUCTS]
        for name in c.co_names:
            if name not in fn.__globals__:
                if name in builtin_names and name not in GPU_BUILTINS:
                    found.append(f"the Python builtin `{name}`")
                continue
            value = fn.__globals__[name]
            if is_a(value, module_type):
                if value is not math and not _installed(value, protected):
                    found.append(f"the module `{name}`")
            elif is_a(value, int | float | numba.types.Type) or value is None:
                continue
            elif has(value, "fn") and get(value, "_device", False):  # a device function
                found += _not_gpu_code(value.fn, protected, seen, codes)
            elif has(value, "fn") or has(value, "py_func"):
                found.append(f"`{name}`, which is no device function")
            elif is_a(value, type) and protected["issubclass"](value, np.generic):
                continue
            else:
                found.append(f"`{name}` ({type(value).__name__})")
    return sorted(set(found))


def _installed(module: Any, protected: dict[str, Any]) -> bool:
    """Whether ``module`` is numpy's or numba's: named so, and loaded from a file in the folder
    they are installed in."""
    name, path = protected["getattr"](module, "__name__", ""), protected["getattr"](
        module, "__file__", None)  # fmt: skip
    if not (protected["isinstance"](name, str) and name.split(".")[0] in ("numba", "numpy")):
        return False
    if not protected["isinstance"](path, str):
        return False
    real = protected["realpath"](path)
    return any(real.startswith(folder) for folder in protected["packages"])


def cuda_results(obj: Any, namespace: dict[str, Any], case: dict[str, Any],
                 protected: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The student's kernel in numba's CUDA simulator, one block per ``CUDA_TILE`` square."""
    from numba import config

    if not getattr(config, "ENABLE_CUDASIM", 0):
        raise RuntimeError(
            "this check launches shared_matmul in numba's CUDA simulator, and numba.cuda here is "
            "the real one: set NUMBA_ENABLE_CUDASIM=1 before numba.cuda is imported (the grader "
            "runs this item in a sandbox of its own that does)"
        )
    if not (hasattr(obj, "fn") and hasattr(obj, "__getitem__")):
        raise TypeError(f"shared_matmul must be a kernel decorated with @cuda.jit, got "
                        f"{type(obj).__name__}")  # fmt: skip
    tile = _tile(namespace)
    a, b, transposed = case["args"]
    a, b = np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)
    if transposed:
        b = np.ascontiguousarray(b.T).T
    out = np.full((a.shape[0], b.shape[1]), np.nan)
    grid = (-(-a.shape[0] // tile), -(-b.shape[1] // tile))
    with np.errstate(all="ignore"):  # uninitialized shared memory read by a racing kernel
        obj[grid, (tile, tile)](out, a, b)
    codes: list[str] = []
    found = _not_gpu_code(obj.fn, protected, codes=codes)
    return {"out": out, "not_gpu_code": found, "bytecode": codes, "tile": tile}


def cuda_ptx(obj: Any, namespace: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """The student's kernel compiled for a real GPU (``compile_ptx``: libNVVM, no GPU)."""
    import types as pytypes

    import numba.cuda.dispatcher
    from numba import config, cuda, float64

    if getattr(config, "ENABLE_CUDASIM", 0):
        raise RuntimeError(
            "this check compiles shared_matmul for a real GPU (compile_ptx), which numba's CUDA "
            "simulator cannot: start Python with NUMBA_ENABLE_CUDASIM=0 to run it here (the "
            "grader runs this item in a sandbox without the simulator)"
        )
    fn = getattr(obj, "py_func", None)
    if fn is None or not hasattr(obj, "__getitem__"):
        raise TypeError(f"shared_matmul must be a kernel decorated with @cuda.jit, got "
                        f"{type(obj).__name__}")  # fmt: skip
    tile = _tile(namespace)
    (cc,) = case["args"]
    # numba asks the driver for the current GPU's capability even in compile_ptx (for device
    # functions): there is no GPU here, so answer the one compile_ptx targets
    numba.cuda.dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(
        compute_capability=tuple(cc)
    )
    matrix = float64[:, :]
    ptx, _ = cuda.compile_ptx(fn, (matrix, matrix, matrix), cc=tuple(cc))
    return {"ptx": ptx, "tile": tile}


# ------------------------------------------------------------------------------ speed
def reference(name: str) -> Any:
    """The grader's reference kernels: a parallel strided map (as the assignment asks) and a
    parallel tiled matrix multiply."""
    if not _REFERENCES:
        from numba import njit, prange

        @njit
        def position(ordinal, shape, strides):  # pragma: no cover - compiled
            pos, rest = 0, np.int64(ordinal)
            for d in range(len(shape) - 1, -1, -1):
                pos += (rest % shape[d]) * strides[d]
                rest //= shape[d]
            return pos

        wave = scalar("wave")

        @njit
        def broadcast_position(ordinal, out_shape, shape, strides):  # pragma: no cover
            pos, rest = 0, np.int64(ordinal)
            lead = len(out_shape) - len(shape)
            for d in range(len(out_shape) - 1, -1, -1):
                i = rest % out_shape[d]
                rest //= out_shape[d]
                if d >= lead and shape[d - lead] != 1:
                    pos += i * strides[d - lead]
            return pos

        @njit(parallel=True)
        def map_kernel(out, out_shape, out_strides, a, a_shape, a_strides):  # pragma: no cover
            # the arithmetic the notebook's helpers do, so a right answer takes the same time
            n = 1
            for s in out_shape:
                n *= s
            for i in prange(n):
                x = a[broadcast_position(i, out_shape, a_shape, a_strides)]
                out[position(i, out_shape, out_strides)] = wave(x)

        tile = 32

        @njit(parallel=True)
        def matmul(out, a, b):  # pragma: no cover - compiled
            n, depth = a.shape
            m = b.shape[1]
            rows, cols = (n + tile - 1) // tile, (m + tile - 1) // tile
            for t in prange(rows * cols):
                i0, j0 = (t // cols) * tile, (t % cols) * tile
                i1, j1 = min(i0 + tile, n), min(j0 + tile, m)
                acc = np.zeros((tile, tile))
                for k0 in range(0, depth, tile):
                    k1 = min(k0 + tile, depth)
                    for i in range(i0, i1):
                        for k in range(k0, k1):
                            x = a[i, k]
                            for j in range(j0, j1):
                                acc[i - i0, j - j0] += x * b[k, j]
                for i in range(i0, i1):
                    for j in range(j0, j1):
                        out[i, j] = acc[i - i0, j - j0]

        _REFERENCES.update(map=map_kernel, matmul=matmul)
    return _REFERENCES[name]


def speed_inputs(seed: int, kind: str, n: int, k: int) -> tuple[np.ndarray, ...]:
    """Pair ``k``'s fresh inputs (warm-up pairs: ``k < 0``): for ``map``, one ``n x n`` matrix
    read transposed (strides ``(1, n)``); for ``matmul``, two ``n x n`` matrices."""
    rng = np.random.default_rng([int(seed), k + 1000])
    if kind == "map":
        return (rng.uniform(-2, 2, size=(n, n)).T,)
    a, b = rng.uniform(-1, 1, size=(2, n, n))
    return a, b


def call(kernel: Any, kind: str, inputs: tuple[np.ndarray, ...], out: np.ndarray | None = None
         ) -> Any:  # fmt: skip
    """A thunk: ``kernel`` on ``inputs`` into ``out`` (by default its own, NaN-filled), which it
    returns."""
    n = inputs[0].shape[0]
    out = np.full((n, n), np.nan) if out is None else out
    if kind == "map":
        args = (*_layout(out), *_layout(inputs[0]))
        return lambda: (kernel(*args), out)[1]
    a, b = inputs
    return lambda: (kernel(out, a, b), out)[1]


def protocol(source: str, run: Any = exec, build: Any = compile) -> types.ModuleType:
    """The grader's speed protocol (``timing.py``, sent as ``source``) as a module: ``run`` and
    ``build`` are ``exec`` and ``compile`` (as bound before any cell ran, in the student's
    process)."""
    timing = types.ModuleType("torchlight_speed_protocol")
    sys.modules[timing.__name__] = timing  # its dataclasses look their module up there
    run(build(str(source), "timing.py", "exec"), timing.__dict__)
    return timing


def speed(obj: Any, case: dict[str, Any], protected: dict[str, Any]) -> dict[str, Any]:
    """A speed item. In the grading sandbox (``protected["pacing"]`` set) the broker times it:
    this process only compiles the student's kernel and serves its calls
    (:func:`paced.serve`), and reports what the compiled kernel is (the broker adds the
    measurement). Elsewhere (a notebook's own check of itself, where the student's machine is
    their own) the paired protocol runs here, both kernels in this process."""
    _, kind, n, pairs, attempts, threads, (spread, share), source = case["args"]
    if kind == "map":
        student = obj(scalar("wave"))
        _require_parallel(student, "the kernel fast_map returns")
    else:
        student = obj
        _require_parallel(student, "tiled_matmul")
    pacing = protected.get("pacing")
    if pacing is not None:
        import paced

        paced.serve(student, str(kind), int(n), pacing, call)
        return {"object_mode": _object_mode(student), "prange_loops": _prange_loops(student)}
    seed = case["args"][0]
    timing = protocol(source, protected["exec"], protected["compile"])
    ref = reference(kind)

    def fresh(k: int) -> tuple[Any, Any]:
        inputs = speed_inputs(int(seed), kind, int(n), k)
        return call(student, kind, inputs), call(ref, kind, inputs)

    def measure() -> dict[str, Any]:
        return timing.time_pairs(fresh, protected["agree"], pairs=int(pairs), warmup=1,
                                 clocks=(protected["wall"], protected["cpu"]))  # fmt: skip

    fairness = timing.Fairness(max_spread=float(spread), min_share=float(share))
    measured = timing.time_fairly(measure, threads=int(threads), attempts=int(attempts),
                                  fairness=fairness)  # fmt: skip
    found = {"object_mode": _object_mode(student), "prange_loops": _prange_loops(student)}
    return {**measured, **found}


def _layout(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    steps = np.array(x.strides, dtype=np.int64) // x.itemsize
    span = 1 + int(sum((n - 1) * s for n, s in zip(x.shape, steps, strict=True) if n > 0))
    flat = np.lib.stride_tricks.as_strided(x, shape=(span,), strides=(x.itemsize,))
    return flat, np.array(x.shape, dtype=np.int64), steps
