"""Assignment a2c (fast kernels), the grader's side without a whole course: the grader-built
library has none of torchlight's own Numba or CUDA kernels, the speed items' verdicts (one
timing at two levels, full credit only with a prange loop, objmode scores nothing, a held
measurement never passes), what the structure check flags, and a speed item graded without a
sandbox.

The catalog graded end to end through nbgrader is in tests/test_course.py; the protocol itself
in tests/test_timing.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jupytext
import pytest

from torchlight_grader import sandbox
from torchlight_grader.checks import a2c_kernels, timing
from torchlight_grader.checks.grader import Cell, grade

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from submissions import a2c_kernels as catalog  # noqa: E402


def test_the_kernels_notebooks_library_has_no_numba_or_cuda_kernels() -> None:
    from torchlight_grader.checks.graded_library import for_notebook

    ((copy, _target),) = for_notebook("a2c_kernels")
    probe = (
        "import numpy as np\n"
        "from torchlight.backends.numba import kernels\n"
        "from torchlight.backends.cuda import kernels as cuda_kernels\n"
        "for call in (lambda: kernels.map_kernels('neg'), lambda: kernels.zip_kernels('add'),\n"
        "             lambda: kernels.matmul_kernel(np.ones((1, 2, 2)), np.ones((1, 2, 2)),\n"
        "                 np.zeros((1, 2, 2)), np.zeros(1, np.int64), np.zeros(1, np.int64), 0.0),\n"
        "             lambda: cuda_kernels._map_source(abs),\n"
        "             lambda: cuda_kernels._tiled_matmul_source(np.float64)):\n"
        "    try:\n"
        "        call()\n"
        "        print('ran')\n"
        "    except Exception as exc:\n"
        "        print(str(exc).split(' is what')[0])\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=Path(copy).parent,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.stdout.splitlines() == [
        "write it yourself: _make_map_kernels",
        "write it yourself: _make_zip_kernels",
        "write it yourself: matmul_kernel",
        "write it yourself: _map_source",
        "write it yourself: _tiled_matmul_source",
    ], run.stdout + run.stderr


def measurement(student: float, reference: float = 1.0, **extra: Any) -> dict[str, Any]:
    """Five pairs as the sandbox's broker reports them: paced, the student's processes idle
    while it timed the reference."""
    pairs = [{"student": student, "reference": reference, "student_cpu": student * 2,
              "reference_cpu": reference * 2, "agree": True, "order": "SR"}] * 5  # fmt: skip
    return {"pairs": pairs, "failed": None, "attempts": 1, "unfair": [], "paced": True,
            "disturbance": [0.0] * 5, **extra}  # fmt: skip


def verdicts(received: dict[str, Any]) -> dict[str, str | None]:
    checks = a2c_kernels.CHECKS
    return {grade_id: checks[grade_id].judge(checks[grade_id].cases(
        __import__("numpy").random.default_rng(0))[0], received, {})
        for grade_id in ("test_matmul_speed", "test_matmul_fast")}  # fmt: skip


def test_one_timing_two_levels_and_full_credit_needs_a_prange_loop() -> None:
    checks = a2c_kernels.CHECKS
    assert checks["test_matmul_fast"].same_run_as == "test_matmul_speed"  # type: ignore[attr-defined]
    assert checks["test_map_fast"].same_run_as == "test_map_speed"  # type: ignore[attr-defined]
    fast = verdicts(measurement(1.1, prange_loops=1))
    assert fast == {"test_matmul_speed": None, "test_matmul_fast": None}
    serial = verdicts(measurement(1.1, prange_loops=0))  # timed like a parallel one
    assert serial["test_matmul_speed"] is None
    assert "no prange loop" in (serial["test_matmul_fast"] or "")
    partial = verdicts(measurement(3.0, prange_loops=1))
    assert partial["test_matmul_speed"] is None
    assert "needs a ratio of at most 2" in (partial["test_matmul_fast"] or "")
    assert "3.00x" in (partial["test_matmul_fast"] or "")
    slow = verdicts(measurement(5.0, prange_loops=1))
    assert all("needs a ratio" in (v or "") for v in slow.values())


def test_objmode_and_held_measurements_earn_nothing() -> None:
    objmode = verdicts(measurement(0.5, prange_loops=1, object_mode=True))
    assert all("numba.objmode" in (v or "") for v in objmode.values())
    noisy = measurement(1.0, prange_loops=1)
    noisy["pairs"] = [dict(p, reference=r) for p, r in
                      zip(noisy["pairs"], [1.0, 3.0, 0.3, 2.5, 0.2], strict=True)]  # fmt: skip
    held = verdicts(noisy)
    assert all((v or "").startswith(timing.HELD) for v in held.values()), held


def test_only_the_brokers_undisturbed_measurement_earns_speed_credit() -> None:
    """A sandbox's measurement is the broker's (``paced``, which the student's process cannot
    send: the broker keeps only its error and what its kernel compiled to); the notebook's own
    check of itself runs in its own process (``in_process``). The student's processes may use
    at most a little CPU time while the broker times the reference: a thread or a process that
    runs meanwhile costs the speed credit. Each is seen to fail with the honest numbers."""
    honest = measurement(1.1, prange_loops=1)
    assert verdicts(honest) == {"test_matmul_speed": None, "test_matmul_fast": None}
    unpaced = {k: v for k, v in honest.items() if k != "paced"}
    assert all("did not time it" in (v or "") for v in verdicts(unpaced).values())
    assert verdicts({**unpaced, "in_process": True}) == verdicts(honest)
    uncounted = {k: v for k, v in honest.items() if k != "disturbance"}
    assert all("did not count" in (v or "") for v in verdicts(uncounted).values())
    # 10 s of reference CPU time: 0.05 + 0.03 * 10 = 0.35 s allowed
    assert verdicts({**honest, "disturbance": [0.069] * 5}) == verdicts(honest)
    starved = verdicts({**honest, "disturbance": [0.08] * 5})
    assert all("0.40 s of CPU time while the reference kernel was timed" in (v or "")
               for v in starved.values()), starved  # fmt: skip
    slow = measurement(5.0, prange_loops=1)
    wall_short = {**slow, "pairs": [{**p, "student": 1.0} for p in slow["pairs"]]}
    assert all("in CPU time 5.00x" in (v or "") and "needs a ratio" in (v or "")
               for v in verdicts(wall_short).values())  # fmt: skip


#: Both halves of a paced item in two processes sharing the region and the two pipes as the
#: sandbox's do, in a fresh interpreter with the sandbox's numba threading layer (a process
#: whose numba ran OpenMP may not fork). Prints why nothing was timed, and each pair's
#: comparison.
PACED_PAIR = """
import json, mmap, os, sys, time
from torchlight_grader.checks import a2c_kernels
from torchlight_grader.sandbox.inside import kernels, paced

sys.path.insert(0, os.path.dirname(kernels.__file__))  # as in the sandbox: `import kernels`
early = sys.argv[1] == "early"
size, kind = 64, "matmul"
args = [None, kind, size, 3, 1, 1, [0.9, 0.0], a2c_kernels.PROTOCOL]
go, go_w = os.pipe()
back_r, back = os.pipe()
region = mmap.mmap(-1, paced.region_bytes(size), flags=mmap.MAP_SHARED)
if os.fork() == 0:  # the student side
    try:
        os.close(go_w)
        os.close(back_r)
        call = kernels.call
        if early:
            def call(kernel, kind, inputs, out):  # done first, the product a moment after
                def thunk():
                    os.write(back, b"d")
                    time.sleep(2.0)
                    kernel(out, *inputs)
                return thunk
        paced.serve(kernels.reference(kind), kind, size, {"region": region, "go": go, "back": back}, call)
    finally:
        os._exit(0)
os.close(go)
os.close(back)
said = b""
while b"r" not in said:  # (the early kernel's warm-up says "d" first)
    chunk = os.read(back_r, 16)
    assert chunk, "the student side ended before it was ready"
    said += chunk
measured = paced.measure(args, {"region": region, "go": go_w, "back": back_r},
                         time.monotonic() + 60, lambda: 0.0)
os.wait()
assert measured["paced"] and len(measured["disturbance"]) == len(measured["pairs"]), measured
print(json.dumps({"failed": measured["failed"], "agree": [p["agree"] for p in measured["pairs"]]}))
"""


def test_both_sides_of_a_paced_item_read_and_write_page_aligned_memory() -> None:
    """The student's kernel works in the shared region and the reference in the broker's own
    copy: both page-aligned, as an ``ndarray`` of that size is, so that neither is timed on
    worse-aligned memory (the reference on a ``bytearray`` took 10% longer than the same kernel
    in the region: an honest kernel as fast as the reference measured 0.90x)."""
    import mmap

    from torchlight_grader.sandbox.inside import kernels, paced

    for kind in ("map", "matmul"):
        size = 96
        region = mmap.mmap(-1, paced.region_bytes(size), flags=mmap.MAP_SHARED)
        shared = paced._StudentCall({"region": region, "go": -1, "back": -1}, kind, size, 0.0)
        own = paced._ReferenceCall(kernels.reference(kind), kind, size, kernels.call)
        for arrays in ((*shared.inputs, shared.out), (*own.inputs, own.out)):
            assert arrays[0].ctypes.data % mmap.PAGESIZE == 0, kind
            assert all(a.ctypes.data % 64 == 0 for a in arrays), kind


def test_the_broker_paces_a_speed_item_the_student_side_only_serves() -> None:
    """The broker's half and the student side's half of a paced item (``paced.py``): the
    student side gets no seed and each pair's inputs only after "go"; the broker's measurement
    agrees pair by pair, and an answer finished after "done" is not seen (a kernel that says
    done before writing its product, 2 s later, disagrees in the untimed first pair: nothing is
    timed)."""
    import json
    import os

    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue", "NUMBA_NUM_THREADS": "2"}
    early = {"failed": "the kernel's output disagrees with the reference's", "agree": []}
    for variant, said in (("honest", {"failed": None, "agree": [True] * 3}), ("early", early)):
        run = subprocess.run([sys.executable, "-c", PACED_PAIR, variant], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        assert json.loads(run.stdout.splitlines()[-1]) == said, run.stdout


def test_without_a_sandbox_a_speed_item_ends_at_once_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Graded with the sandbox opted out (TORCHLIGHT_GRADER_UNSAFE_NO_SANDBOX), the broker is not
    its PID namespace's first process and cannot count the CPU time of the notebook's processes,
    so it times nothing. It used to leave the student side waiting for "go" until the item's
    timeout: each speed item took 150 s and said "your code was stopped". Now the item ends when
    the kernel is ready, and says why it earns nothing."""
    source = jupytext.read(ROOT / "assignments" / "source" / "a2c_kernels" / "a2c_kernels.py")
    cells = [
        Cell("answer" if meta.get("solution") else "locked", meta.get("grade_id"), cell.source)
        for cell in source.cells
        if cell.cell_type == "code" and not (meta := cell.metadata.get("nbgrader", {})).get("grade")
    ]
    monkeypatch.setenv(sandbox.OPT_OUT, sandbox.OPT_OUT_VALUE)
    sandbox.ensure_available.cache_clear()
    try:
        assert sandbox.ensure_available() == "unsafe"
        (verdict,) = grade("a2c_kernels", cells, ["test_map_speed"], seed=0).values()
    finally:
        monkeypatch.undo()
        sandbox.ensure_available.cache_clear()
    assert sandbox.ensure_available() == "bwrap"  # the next test's grading is sandboxed again
    assert not verdict.passed
    assert "speed items are not timed without a sandbox" in verdict.message, verdict.message


def test_findings_name_the_librarys_kernels_and_numpys_product_and_no_solution() -> None:
    library = a2c_kernels.FINDINGS([catalog.LIBRARY_MATMUL])
    assert len(library) == 1 and catalog.FLAGGED["library-matmul"] in library[0]
    objmode = a2c_kernels.FINDINGS([catalog.OBJMODE_MATMUL])
    assert len(objmode) == 1 and "uses .objmode" in objmode[0] and "uses @" in objmode[0]
    for honest in (catalog.NAIVE_MATMUL, catalog.SKIPS_WORK):  # no speed, but the student's own
        assert a2c_kernels.FINDINGS([honest]) == []


# The CUDA entries of the catalog (the simulator's rule, the PTX rule, each bypass) are graded
# item by item, all items, through nbgrader in the real sandbox by the course suite's shared
# fixture (tests/test_course.py, test_grades_item_by_item); grading them a second time here cost
# about a minute of CI.


def test_ptx_rules_name_what_is_missing() -> None:
    ok = "\n".join([".visible .shared .align 8 .b8 s1[512];", ".visible .shared .align 8 .b8 s2[512];",
                    "st.shared.f64 [a], b;", "bar.sync 0;", "ld.shared.f64 c, [a];", "bar.sync 0;"])  # fmt: skip
    assert a2c_kernels.ptx_problems(ok, 8) == []
    no_first = ok.replace("bar.sync 0;\nld", "ld", 1)
    assert "not have stored yet" in " ".join(a2c_kernels.ptx_problems(no_first, 8))
    no_second = ok.rsplit("\nbar.sync 0;", 1)[0]
    assert "still reading" in " ".join(a2c_kernels.ptx_problems(no_second, 8))
    assert "need 4096" in " ".join(a2c_kernels.ptx_problems(ok, 16))  # a quarter of it
    spilled = ok + "\n.local .align 8 .b8 tile[512];"
    assert "local memory" in " ".join(a2c_kernels.ptx_problems(spilled, 8))
