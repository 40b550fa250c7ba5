r"""Hidden checks for assignment 2c, *Fast kernels*.

The student writes Numba-parallel kernels: factories ``fast_map(fn)``, ``fast_zip(fn)``,
``fast_reduce(fn)`` that return ``@njit(parallel=True)`` kernels over strided storage (a flat
buffer, a shape and strides, in elements), and ``tiled_matmul(out, a, b)``.

**Results.** Each kernel item runs on fresh random storages of every layout a view makes
(contiguous, permuted, sliced, broadcast with stride 0, mixed; the output strided too, in some
trials), described as data and built in the sandbox (:mod:`torchlight_grader.sandbox.inside.kernels`);
the output buffer comes back and is read here through the output's layout and compared with
numpy. The output starts filled with NaN (the start value, for a reduction): an element the
kernel never writes shows. Matrix sizes are not multiples of any tile (and one operand is a
transposed view).

**CUDA.** ``shared_matmul`` is a ``@cuda.jit`` kernel with shared-memory tiles, graded as the
library's own CUDA backend is tested without a GPU: ``test_cuda_matmul`` launches it in numba's
CUDA simulator (a sandbox of its own, started with ``NUMBA_ENABLE_CUDASIM=1``: numba reads it
once) on fresh odd sizes against numpy, and scores nothing if its code refers to what a GPU
cannot run (numpy's product, a Python function: the simulator would run it as Python; the
``@`` operator is looked for here, in the bytecode the sandbox sends, :func:`uses_matmul`);
``test_cuda_shared`` compiles it for a real GPU (``numba.cuda.compile_ptx``, sm_75, no GPU
needed) in the other sandbox, and :func:`ptx_problems` reads the PTX: two tiles in shared memory
read from there, barriers between storing and reading them and before overwriting them, no
local memory.

**Speed.** ``test_map_speed``/``test_map_fast`` and ``test_matmul_speed``/``test_matmul_fast``
time the student's kernel against a reference kernel with the paired protocol of
:mod:`torchlight_grader.checks.timing` (two CPU threads; fresh inputs and a comparison after
every pair); ``*_speed`` passes at the partial threshold, ``*_fast`` at the full one, and both
show the measured ratio. The sandbox's broker, where no student code runs, paces the protocol
(:mod:`torchlight_grader.sandbox.inside.paced`): it draws each pair's inputs from a seed of its
own only when the pair starts, times the student's call on its own clocks (wall, and the CPU
time of every student process counted from ``/proc``), reads the output when the call says it
is done, and runs the reference kernel itself. The student's process only compiles its kernel
and runs it when told: no clock it could forge is read, no input exists before its timed call
(nothing can be computed ahead), and the reference is out of its reach. What it could still do,
run something while the reference is timed, is counted and judged (:meth:`SpeedCheck.disturbed`).
The ratio is taken on wall time and on CPU time, the larger graded.

**Authorship.** The grader's library for this notebook has none of torchlight's own Numba or
CUDA kernels, and the sandbox has no SciPy, without which Numba cannot compile numpy's ``@``
or ``np.dot``. A kernel that hands its work back to the interpreter (``numba.objmode``, where
numpy's product would run) is seen in its compiled code and scores nothing for that item. The
code's structure is flagged for review (:func:`library_kernels`).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from torchlight_grader.checks import timing
from torchlight_grader.checks.a2b_strided import (
    contiguous_strides,
    describe_layout,
    layout,
    read,
    values,
)
from torchlight_grader.checks.check import Case, Check
from torchlight_grader.checks.structure import references

# One scalar function per item: each one is one more compile (seconds) in every sandbox.
MAP_OPS = {"softsign": lambda x: x / (1.0 + np.abs(x))}
ZIP_OPS = {"sub": np.subtract}  # not symmetric: a and b swapped shows
REDUCE_OPS = {"maximum": (np.max, -math.inf)}  # on negative numbers: a fold from 0 shows
KINDS = ("contiguous", "permuted", "sliced", "broadcast", "mixed")

#: The speed items' thresholds, as the notebook states them, and what a shared grading machine
#: may do to a measurement before it is held (measured here beside other graders: the
#: reference's spread reached 36% and its CPU share 16% at a load of 7 on 2 cores; a kernel
#: as fast as the reference measured up to 1.53x there, a serial one 1.14-1.27x: the full
#: threshold leaves room for that noise, and the prange rule, not the time, tells serial apart).
MAP_SPEED = timing.Thresholds(full=2.0, partial=4.0)
MATMUL_SPEED = timing.Thresholds(full=2.0, partial=4.0)
FAIRNESS = timing.Fairness(max_spread=0.5, min_share=0.1)
THREADS = 2  # NUMBA_NUM_THREADS in the sandbox
OBJECT_MODE = (
    " hands its work back to the Python interpreter (numba.objmode): the kernel itself must do "
    "the work, compiled, so this item scores nothing"
)


@dataclass
class KernelCase(Case):
    def describe(self) -> str:
        return str(self.hidden.get("what", "a storage"))


def out_layout(rng: np.random.Generator, shape: tuple[int, ...], strided: bool) -> dict[str, Any]:
    """An output storage: contiguous, or (``strided``) a permuted layout over its buffer."""
    description = layout(rng, shape, "permuted" if strided else "contiguous")
    description["buffer"] = np.zeros_like(description["buffer"])
    return description


def broadcastable(rng: np.random.Generator, big: tuple[int, ...]) -> tuple[int, ...]:
    drop = int(rng.integers(0, len(big) + 1))
    return tuple(1 if rng.random() < 0.4 else n for n in big[drop:])


def map_case(rng: np.random.Generator, trial: int) -> Case:
    shape = [(3, 4), (2, 3, 4), (37,), (5, 1, 6), (4, 3, 2)][trial % 5]
    kind = KINDS[trial % len(KINDS)]
    a = layout(rng, shape, kind)
    op = list(MAP_OPS)[trial % len(MAP_OPS)]
    out = out_layout(rng, shape, strided=trial % 2 == 1)
    what = (f"fast_map({op}) on a {kind} storage a ({describe_layout(a)}) into an output with "
            f"{describe_layout(out)}")  # fmt: skip
    return KernelCase([a, op, out], names=("a", "op", "out"), hidden={"what": what})


def zip_case(rng: np.random.Generator, trial: int) -> Case:
    big = [(3, 4), (2, 3, 4), (4, 3), (2, 1, 3), (5,)][trial % 5]
    a_shape, b_shape = broadcastable(rng, big), broadcastable(rng, big)
    if trial % 2:
        a_shape = big
    shape = tuple(int(n) for n in np.broadcast_shapes(a_shape, b_shape))
    kinds = (KINDS[trial % len(KINDS)], KINDS[(trial + 3) % len(KINDS)])
    a, b = layout(rng, a_shape, kinds[0]), layout(rng, b_shape, kinds[1])
    op = list(ZIP_OPS)[trial % len(ZIP_OPS)]
    out = out_layout(rng, shape, strided=trial % 2 == 0)
    what = (f"fast_zip({op}) with a {kinds[0]} a ({describe_layout(a)}) and a {kinds[1]} b "
            f"({describe_layout(b)}) into an output with {describe_layout(out)}")  # fmt: skip
    return KernelCase([a, b, op, out], names=("a", "b", "op", "out"), hidden={"what": what})


def reduce_case(rng: np.random.Generator, trial: int) -> Case:
    shape = [(3, 400), (2, 3, 4), (2, 300, 1), (1500,), (3, 1, 2)][trial % 5]
    kind = KINDS[(trial + 1) % len(KINDS)]
    a = layout(rng, shape, kind)
    op = list(REDUCE_OPS)[trial % len(REDUCE_OPS)]
    if op == "maximum":  # all negative: a fold that starts from 0 instead of `out` is wrong
        a["buffer"] = -1.0 - np.abs(a["buffer"])
    dim = int(np.argmax(shape)) if trial % 2 == 0 else int(rng.integers(len(shape)))
    kept = tuple(1 if d == dim else n for d, n in enumerate(shape))
    start = REDUCE_OPS[op][1]
    out = out_layout(rng, kept, strided=trial % 2 == 1)
    what = (f"fast_reduce({op})(..., dim={dim}) with start {start} on a {kind} a "
            f"({describe_layout(a)}) into an output with {describe_layout(out)}")  # fmt: skip
    return KernelCase([a, dim, op, start, out], names=("a", "dim", "op", "start", "out"),
                      hidden={"what": what})  # fmt: skip


@dataclass
class KernelCheck(Check):
    """A student's parallel kernel on described storages: the values of its output, read
    through the output's layout, against numpy."""

    hint: str = ""

    def spec(self) -> dict[str, Any]:
        return {"runner": self.entry, "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        if self.entry == "fast_map":
            a, op, _ = case.args
            return {"values": MAP_OPS[op](values(a))}
        if self.entry == "fast_zip":
            a, b, op, _ = case.args
            return {"values": ZIP_OPS[op](values(a), values(b))}
        a, dim, op, _start, _ = case.args
        return {"values": REDUCE_OPS[op][0](values(a), axis=dim, keepdims=True)}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        trial, want = f"on {case.describe()}", expected["values"]
        if received.get("object_mode"):
            return f"the kernel {self.entry} returns{OBJECT_MODE} ({trial})"
        out = case.args[-1]
        buffer = received.get("buffer")
        if not isinstance(buffer, np.ndarray) or buffer.shape != (
            len(out["buffer"]) - out["offset"],
        ):
            return f"the grader could not read the output of {self.entry} {trial}"
        got = read(buffer, out["shape"], out["strides"], 0)
        problem = self.compare(f"the output of {self.entry}", want, got, trial)
        if problem and not np.all(np.isfinite(got)):
            problem += " (NaN: an output element your kernel never wrote)"
        return problem + self.hint if problem else None

    def passed(self, cases: Any) -> str:
        kinds = sorted({k for c in cases for k in KINDS if k in c.describe()})
        return f"{self.what}: passed on {len(cases)} storages ({', '.join(kinds)} layouts)."


def matmul_case(rng: np.random.Generator, trial: int) -> Case:
    n, k, m = [(1, 1, 1), (33, 65, 31), (70, 33, 41), (64, 64, 64), (5, 97, 3)][trial % 5]
    a, b = rng.uniform(-1, 1, size=(n, k)), rng.uniform(-1, 1, size=(k, m))
    transposed = trial % 2 == 1
    what = f"a ({n}, {k}) and b ({k}, {m}){' read through a transposed view' if transposed else ''}"
    return KernelCase([a, b, transposed], names=("a", "b", "transposed"), hidden={"what": what})


@dataclass
class MatmulCheck(Check):
    def spec(self) -> dict[str, Any]:
        return {"runner": "tiled_matmul", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        a, b, _ = case.args
        return {"out": a @ b}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        trial = f"on {case.describe()}"
        if received.get("object_mode"):
            return f"tiled_matmul{OBJECT_MODE} ({trial})"
        problem = self.compare("out", expected["out"], received.get("out"), trial)
        if problem and isinstance(received.get("out"), np.ndarray):
            bad = ~np.isclose(received["out"], expected["out"], rtol=1e-9, atol=1e-9)
            rows, cols = np.nonzero(bad)
            problem += (f" (wrong in rows {rows.min()}..{rows.max()}, columns {cols.min()}.."
                        f"{cols.max()} of {expected['out'].shape}: the last, smaller tiles?)")  # fmt: skip
        return problem

    def passed(self, cases: Any) -> str:
        return f"tiled_matmul: right on {len(cases)} products ({'; '.join(c.describe() for c in cases)})."


# ------------------------------------------------------------------------------ CUDA
#: numba reads this once, when ``numba.cuda`` is first imported: the results item runs in a
#: sandbox of its own with the simulator on, the other items in one without it.
SIMULATOR = (("NUMBA_ENABLE_CUDASIM", "1"),)
REAL_GPU = (("NUMBA_ENABLE_CUDASIM", "0"),)
NOT_GPU_CODE = (
    "; in the simulator every line is Python, so this would run there, but a GPU cannot run it: "
    "the kernel itself must do the product, so this item scores nothing"
)


def _matmul_units() -> frozenset[bytes]:
    """The two bytes of the instructions ``@`` and ``@=`` compile to in this Python (the sandbox
    runs the same one), read here with ``dis``."""
    import dis

    sample = compile("a @ b\na @= b", "<@>", "exec")
    return frozenset(bytes([i.opcode, i.arg or 0]) for i in dis.get_instructions(sample)
                     if i.argrepr in ("@", "@="))  # fmt: skip


MATMUL_UNITS = _matmul_units()


def uses_matmul(bytecode: Any) -> bool:
    """Whether any of the code objects the sandbox sent (their ``co_code``, in hex) holds the
    ``@`` operator: read here, where no cell of the notebook can change how."""
    if not isinstance(bytecode, list):
        return False
    for text in bytecode:
        try:
            raw = bytes.fromhex(text) if isinstance(text, str) else b""
        except ValueError:
            continue
        if any(raw[k : k + 2] in MATMUL_UNITS for k in range(0, len(raw) - 1, 2)):
            return True
    return False


def cuda_case(rng: np.random.Generator, trial: int) -> Case:
    """Small (the simulator runs one Python thread per GPU thread), odd sizes (no multiple of
    an even tile), ``k`` over at least two tiles of 8 (so a missing barrier shows)."""
    n, m = (int(x) for x in rng.choice(np.arange(9, 20, 2), size=2))
    k = int(rng.choice(np.arange(17, 28, 2)))
    a, b = rng.uniform(-1, 1, size=(n, k)), rng.uniform(-1, 1, size=(k, m))
    transposed = trial % 2 == 1
    what = f"a ({n}, {k}) and b ({k}, {m}){' read through a transposed view' if transposed else ''}"
    return KernelCase([a, b, transposed], names=("a", "b", "transposed"), hidden={"what": what})


@dataclass
class CudaResultsCheck(Check):
    """The kernel's numbers in numba's CUDA simulator against numpy."""

    def spec(self) -> dict[str, Any]:
        return {"runner": "cuda_results", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        a, b, _ = case.args
        return {"out": a @ b}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        trial = f"on {case.describe()}"
        found = list(received.get("not_gpu_code") or [])
        if uses_matmul(received.get("bytecode")):
            found.append("the @ operator")
        if found:
            return f"shared_matmul refers to {', '.join(map(str, found))}{NOT_GPU_CODE} ({trial})"
        problem = self.compare("out", expected["out"], received.get("out"), trial)
        if problem and isinstance(received.get("out"), np.ndarray):
            got = received["out"]
            bad = ~np.isclose(got, expected["out"], rtol=1e-9, atol=1e-9)
            rows, cols = np.nonzero(bad)
            tile = received.get("tile")
            problem += (f" (wrong in rows {rows.min()}..{rows.max()}, columns {cols.min()}.."
                        f"{cols.max()} of {expected['out'].shape}, tiles of {tile}: the last, "
                        "partial tiles? a barrier missing?)")  # fmt: skip
        return problem

    def passed(self, cases: Any) -> str:
        return (f"shared_matmul: right in the CUDA simulator on {len(cases)} products "
                f"({'; '.join(c.describe() for c in cases)}).")  # fmt: skip


def ptx_case(rng: np.random.Generator, trial: int) -> Case:
    return KernelCase([[7, 5]], names=("cc",), hidden={"what": "sm_75 (Turing, a T4)"})


def ptx_problems(ptx: str, tile: int) -> list[str]:
    """What the PTX of a shared-memory tiled matmul must show, in words a student can act on:
    two tiles declared in shared memory and read from there, a barrier (``bar.sync``) between
    every store to shared memory and the next load of it and between the last load and the next
    store (the loop's wrap-around), no tile in local memory."""
    lines = [line.strip() for line in ptx.splitlines()]
    problems = []
    declared = 0
    for line in lines:
        if ".shared" in line and not line.startswith(("ld.", "st.", "atom.", "red.", "cvta")):
            size = line.rsplit("[", 1)[-1].split("]")[0]
            declared += int(size) if size.isdigit() else 0
    if declared < 2 * tile * tile * 8:
        problems.append(
            f"it declares {declared} bytes of shared memory, and two float64 tiles of "
            f"{tile} x {tile} need {2 * tile * tile * 8}: stage the tiles of a and of b in "
            "cuda.shared.array((CUDA_TILE, CUDA_TILE), float64)"
        )
    order = "".join(
        "B" if line.startswith(("bar.sync", "barrier.sync", "bar.cta.sync"))
        else "L" if line.startswith("ld.shared") else "S" if line.startswith("st.shared")
        else "" for line in lines
    )  # fmt: skip
    if declared and "L" not in order:
        problems.append("it never reads shared memory: compute from the shared tiles")
    if "B" not in order:
        problems.append("it has no barrier (bar.sync): call cuda.syncthreads()")
    else:
        cyclic = order + order  # the tile loop comes round: its end runs before its start
        if _unguarded(cyclic, "S", "L"):
            problems.append("a thread reads a tile that other threads may not have stored yet: "
                            "cuda.syncthreads() between loading a tile and using it")  # fmt: skip
        if _unguarded(cyclic, "L", "S"):
            problems.append("a thread may overwrite a tile that other threads are still reading: "
                            "cuda.syncthreads() after using a tile, before loading the next")  # fmt: skip
    local = [line for line in lines if line.startswith((".local", "ld.local", "st.local"))]
    if local:
        problems.append(f"it keeps data in local memory ({local[0]}): a tile belongs in shared "
                        "memory (cuda.shared.array), not in cuda.local.array or a spill")  # fmt: skip
    return problems


def _unguarded(order: str, first: str, then: str) -> bool:
    """Whether some ``first`` is followed by a ``then`` with no barrier (``B``) between them."""
    pending = False
    for op in order:
        if op == "B":
            pending = False
        elif op == first:
            pending = True
        elif op == then and pending:
            return True
    return False


@dataclass
class CudaPtxCheck(Check):
    """The kernel compiled for a real GPU; its PTX shows shared tiles and barriers."""

    def spec(self) -> dict[str, Any]:
        return {"runner": "cuda_ptx", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        return {}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        ptx, tile = received.get("ptx"), received.get("tile")
        if not isinstance(ptx, str) or not isinstance(tile, int):
            return "the grader could not read the compiled kernel"
        if ".target sm_75" not in ptx:
            return "the compiled kernel is not for the GPU the grader asked for (sm_75)"
        problems = ptx_problems(ptx, tile)
        if problems:
            return "compiled for a real GPU (sm_75), shared_matmul's code: " + "; ".join(problems)
        return None

    def passed(self, cases: Any) -> str:
        return ("shared_matmul compiles for a real GPU (sm_75): two tiles in shared memory, "
                "barriers between storing and reading them, no local memory.")  # fmt: skip


# ------------------------------------------------------------------------------ speed
PROTOCOL = Path(timing.__file__).read_text(encoding="utf-8")
#: The sandbox's broker paces a speed item from outside the student's process (see
#: :mod:`torchlight_grader.sandbox.inside.paced`): it draws each pair's inputs when the pair
#: starts, times the student's call on its own clocks, and runs the reference kernel itself. The
#: student side could still slow the reference down by running something of its own meanwhile:
#: the CPU time it used during the timed reference calls (``disturbance``, all pairs) must stay
#: within DISTURBANCE_SLACK seconds plus DISTURBANCE_SHARE of the reference's own CPU time. An
#: honest notebook's processes are idle then (its item process waits for "go", its main line
#: polls that process): measured on the 2-core development machine, 0-0.02 s of 1-2 s.
DISTURBANCE_SLACK = 0.05
DISTURBANCE_SHARE = 0.03


@dataclass
class SpeedCheck(Check):
    """The student's kernel against the reference in the paired protocol (see the module)."""

    kind: str = "map"
    size: int = 1000
    level: str = "partial"
    thresholds: timing.Thresholds = MAP_SPEED
    pairs: int = 9
    attempts: int = 3
    same_run_as: str | None = None
    """Another speed item of the same kernel: this one is judged from that item's measurement
    (one timing in the sandbox, two levels of credit), when both are graded together."""

    def spec(self) -> dict[str, Any]:
        return {"runner": "speed", "entry": self.entry, "paced_bytes": 3 * self.size**2 * 8}

    def expected(self, case: Case) -> dict[str, Any]:
        return {}

    def run(self, namespace: dict[str, Any], case: Case) -> dict[str, Any]:
        """The notebook's check of itself: both kernels timed in this process (the student's own
        machine), marked so; a sandbox's result is the broker's (``paced``) and never has it."""
        return {**super().run(namespace, case), "in_process": True}

    def verdict(self, received: dict[str, Any]) -> timing.SpeedVerdict:
        """The protocol's verdict, once the broker timed the item undisturbed
        (:meth:`disturbed`), on wall time and on CPU time, the larger ratio graded; full credit
        also needs a ``prange`` loop in the compiled kernel (on a busy machine two threads may
        get one core's time between them, and a serial kernel would then time like a parallel
        one)."""
        problem = self.disturbed(received)
        if problem is not None:
            return problem
        verdict = timing.judge_wall_and_cpu(received, self.thresholds, threads=THREADS,
                                            fairness=FAIRNESS, what=self.what)  # fmt: skip
        if verdict.ratio is None:
            return verdict
        if verdict.status == "fast" and not received.get("prange_loops"):
            return timing.SpeedVerdict("partial", verdict.ratio, verdict.message + (
                "; but numba made no prange loop of it parallel: on one core, partial credit "
                "at most"))  # fmt: skip
        return verdict

    def disturbed(self, received: dict[str, Any]) -> timing.SpeedVerdict | None:
        """Why a sandbox's measurement cannot be graded (the broker did not pace it, or the
        student's processes ran while the reference kernel was timed), or None."""
        pairs = received.get("pairs") or []
        if received.get("in_process") or received.get("failed") or not pairs:
            return None  # the notebook's own check; or nothing was timed: judge says so
        if not received.get("paced"):
            return timing.SpeedVerdict("wrong", None, (
                f"{self.what} earns no speed credit: the sandbox's broker did not time it"))  # fmt: skip
        used = received.get("disturbance")
        if not isinstance(used, list) or len(used) != len(pairs):
            return timing.SpeedVerdict("wrong", None, (
                f"{self.what} earns no speed credit: the sandbox's broker did not count what "
                "your processes used while it timed the reference"))  # fmt: skip
        spent = sum(float(u) for u in used)
        reference = sum(float(p["reference_cpu"]) for p in pairs)
        allowed = DISTURBANCE_SLACK + DISTURBANCE_SHARE * reference
        if spent <= allowed:
            return None
        return timing.SpeedVerdict("wrong", None, (
            f"{self.what} earns no speed credit: your notebook's processes used {spent:.2f} s of "
            f"CPU time while the reference kernel was timed (at most {allowed:.2f} s is fair): "
            "something of yours runs in the background (a thread or a process a cell started), "
            "and it slows the reference down"))  # fmt: skip

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        if received.get("object_mode"):
            return f"{self.what}{OBJECT_MODE}"
        verdict = self.verdict(received)
        case.hidden[f"shown-{self.level}"] = verdict.message  # passed_on reads it
        if timing.points(verdict, self.level):
            return None
        if verdict.status in ("partial", "slow") and verdict.ratio is not None:
            needed = self.thresholds.full if self.level == "full" else self.thresholds.partial
            return f"{verdict.message}: this item needs a ratio of at most {needed:g}"
        return verdict.message

    def passed_on(self, cases: Any, received: Sequence[dict[str, Any]]) -> str:
        return str(cases[0].hidden.get(f"shown-{self.level}", ""))


def speed_case(kind: str, size: int, pairs: int, attempts: int) -> Any:
    def sample(rng: np.random.Generator, trial: int) -> Case:
        seed = int(rng.integers(2**31))
        what = f"{size} x {size} {'inputs read transposed' if kind == 'map' else 'matrices'}"
        fairness = [FAIRNESS.max_spread, FAIRNESS.min_share]
        return KernelCase([seed, kind, size, pairs, attempts, THREADS, fairness, PROTOCOL],
                          names=("seed", "kind", "size", "pairs", "attempts", "threads",
                                 "fairness", "protocol"), hidden={"what": what})  # fmt: skip

    return sample


def speed_check(entry: str, kind: str, size: int, level: str, thresholds: timing.Thresholds,
                what: str, pairs: int, same_run_as: str | None = None) -> SpeedCheck:  # fmt: skip
    return SpeedCheck(entry, (entry,), speed_case(kind, size, pairs, 3), trials=1, timeout=150.0,
                      what=what, kind=kind, size=size, level=level, thresholds=thresholds,
                      pairs=pairs, same_run_as=same_run_as)  # fmt: skip


# ------------------------------------------------------------------------------ authorship
#: What a notebook could reach for instead of writing the kernel: the library's kernels,
#: numpy's product, the interpreter from compiled code, the grader's own timing.
LIBRARY = {"matmul_kernel", "map_kernels", "zip_kernels", "reduce_kernels", "_make_map_kernels",
           "_make_zip_kernels", "_make_reduce_kernels", "matmul", "dot", "objmode", "einsum",
           "tensordot", "perf_counter", "process_time", "PROTECTED", "kernels", "ModuleType",
           "runners", "_tiled_matmul_source", "_blocked_matmul_source", "_small_matmul_source",
           "_map_source", "_zip_source", "_reduce_source"}  # fmt: skip


def library_kernels(sources: Iterable[str]) -> list[str]:
    """One line if the student code reaches for a kernel it should write, numpy's product (``@``,
    ``np.dot``, ``matmul``, ...), ``numba.objmode``, the grader's clocks or the sandbox's own
    modules: an import or an attribute of one of :data:`LIBRARY`, the ``@`` operator, an import
    of a :data:`SANDBOX` module or a look-up of one in ``sys.modules``, or ``getattr`` with such
    a name (:func:`~torchlight_grader.checks.structure.references`)."""
    modules = ("torchlight.backends", "numpy", "numba", "time")
    found = references(sources, LIBRARY, modules, extra=_product_or_backend)
    if not found:
        return []
    return [f"reaches for a kernel it should write, numpy's product, the grader's clocks or the "
            f"grading sandbox's own code ({', '.join(found)}): review by hand whether the student "
            "wrote the kernels"]  # fmt: skip


#: The grading sandbox's own modules (``torchlight_grader/sandbox/inside``, on the path there):
#: a notebook has no reason to import them, or to look them up in ``sys.modules``.
SANDBOX = {"runners", "kernels", "paced", "wire", "child", "builtins"}


def _product_or_backend(node: ast.AST) -> str | None:
    """The ``@`` operator, ``import torchlight.backends...``, an import of the sandbox's own
    modules (or of ``builtins``, to rewrite them), or one of them looked up in ``sys.modules``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return "uses @"
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names
                 if a.name.startswith("torchlight.backends") or a.name in SANDBOX]  # fmt: skip
        return ", ".join(f"imports {n}" for n in names) or None
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "modules"
        and isinstance(node.slice, ast.Constant)
        and node.slice.value in SANDBOX
    ):
        return f"looks up sys.modules[{node.slice.value!r}]"
    return None


FINDINGS = library_kernels


def checks() -> dict[str, Check]:
    return {
        "test_map": KernelCheck(
            "fast_map",
            ("fast_map",),
            map_case,
            trials=4,
            timeout=60.0,
            what="fast_map",
            hint=(
                ". Write out[position(i, out_shape, out_strides)]: the output has strides of "
                "its own"
            ),
        ),
        "test_zip": KernelCheck(
            "fast_zip",
            ("fast_zip",),
            zip_case,
            trials=4,
            timeout=60.0,
            what="fast_zip",
            hint=(
                ". Each operand reads its own element: broadcast_position(i, out_shape, "
                "a_shape, a_strides)"
            ),
        ),
        "test_reduce": KernelCheck(
            "fast_reduce",
            ("fast_reduce",),
            reduce_case,
            trials=4,
            timeout=60.0,
            what="fast_reduce",
            hint=(
                ". One prange iteration per output element, each folding along dim on its own: "
                "iterations that update the same element at once lose updates (a race)"
            ),
        ),
        "test_tiled_matmul": MatmulCheck(
            "tiled_matmul",
            ("tiled_matmul",),
            matmul_case,
            trials=5,
            timeout=60.0,
            what="tiled_matmul",
        ),  # fmt: skip
        "test_cuda_matmul": CudaResultsCheck(
            "shared_matmul",
            ("shared_matmul",),
            cuda_case,
            trials=3,
            timeout=90.0,
            what="shared_matmul",
            environ=SIMULATOR,
        ),
        "test_cuda_shared": CudaPtxCheck(
            "shared_matmul",
            ("shared_matmul",),
            ptx_case,
            trials=1,
            timeout=60.0,
            what="shared_matmul",
            environ=REAL_GPU,
        ),
        "test_map_speed": speed_check(
            "fast_map", "map", 1000, "partial", MAP_SPEED, "your fast_map", 11
        ),  # fmt: skip
        "test_map_fast": speed_check(
            "fast_map",
            "map",
            1000,
            "full",
            MAP_SPEED,
            "your fast_map",
            11,
            same_run_as="test_map_speed",
        ),  # fmt: skip
        "test_matmul_speed": speed_check(
            "tiled_matmul", "matmul", 512, "partial", MATMUL_SPEED, "your tiled_matmul", 7
        ),  # fmt: skip
        "test_matmul_fast": speed_check(
            "tiled_matmul",
            "matmul",
            512,
            "full",
            MATMUL_SPEED,
            "your tiled_matmul",
            7,
            same_run_as="test_matmul_speed",
        ),  # fmt: skip
    }


def _one_sandbox_without_the_simulator(items: dict[str, Check]) -> dict[str, Check]:
    """Every item but the simulator's runs in one sandbox, with ``numba.cuda`` the real one (the
    notebook's setup turns the simulator on unless told otherwise)."""
    for check in items.values():
        if not check.environ:
            check.environ = REAL_GPU
    return items


CHECKS = _one_sandbox_without_the_simulator(checks())

__all__ = ["CHECKS", "FINDINGS", "contiguous_strides"]
