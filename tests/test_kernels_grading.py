"""Assignment a2c (fast kernels), the grader's side without a whole course: the grader-built
library has none of torchlight's own Numba or CUDA kernels, the speed items' verdicts (one
timing at two levels, full credit only with a prange loop, objmode scores nothing, a held
measurement never passes), and what the structure check flags.

The catalog graded end to end through nbgrader is in tests/test_course.py; the protocol itself
in tests/test_timing.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from torchlight_grader.checks import a2c_kernels, timing

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
    """Five pairs as the sandbox reports them, and what its broker counted: the runner's clock
    saw the timed calls, 0.1 s between them, and 3 s of compiling before."""
    pairs = [{"student": student, "reference": reference, "student_cpu": student * 2,
              "reference_cpu": reference * 2, "agree": True, "order": "SR"}] * 5  # fmt: skip
    stretch = 5 * 2 * (student + reference) + 0.1
    return {"pairs": pairs, "failed": None, "attempts": 1, "unfair": [], "stretch_cpu": stretch,
            "reported_cpu": stretch + 3.0, "counted_cpu": stretch + 3.05, **extra}  # fmt: skip


def verdicts(received: dict[str, Any], reference_cpu: float | None = None) -> dict[str, str | None]:
    checks = a2c_kernels.CHECKS
    expected = {} if reference_cpu is None else {"reference_cpu": reference_cpu}
    return {grade_id: checks[grade_id].judge(checks[grade_id].cases(
        __import__("numpy").random.default_rng(0))[0], received, expected)
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


def forge(received: dict[str, Any], share: float) -> dict[str, Any]:
    """What a clock that counts ``share`` of the student's calls reports: each timed student
    call shorter, the CPU time it hid gone from what the clock saw (or, ``paid back``, put
    between the timed calls)."""
    pairs = [{**p, "student_cpu": p["student_cpu"] * share} for p in received["pairs"]]
    hidden = sum(p["student_cpu"] for p in received["pairs"]) * (1 - share)
    return {
        **received,
        "pairs": pairs,
        "stretch_cpu": received["stretch_cpu"] - hidden,
        "reported_cpu": received["reported_cpu"] - hidden,
    }


def test_forged_clocks_earn_nothing_where_the_counted_cpu_time_disagrees() -> None:
    """The clocks sit in a dict the student's cells can reach: a forged wall clock alone gains
    nothing (the CPU-time ratio is graded too); forged CPU clocks disagree with the CPU time the
    sandbox's broker counted, or leave CPU time between the timed calls that no pair's work
    explains; a reference that takes other CPU time in the sandbox than in the grader is held;
    no count from the broker holds the item. Each is seen to fail with the honest numbers."""
    honest = measurement(1.1, prange_loops=1)  # 2.2 s of CPU per timed call: full credit
    assert verdicts(honest, reference_cpu=2.0) == {
        "test_matmul_speed": None,
        "test_matmul_fast": None,
    }
    slow = measurement(5.0, prange_loops=1)
    wall_forged = {**slow, "pairs": [{**p, "student": 1.0} for p in slow["pairs"]]}
    assert all("in CPU time 5.00x" in (v or "") and "needs a ratio" in (v or "")
               for v in verdicts(wall_forged).values())  # fmt: skip
    both = {**forge(slow, 0.1), "pairs": [{**p, "student": 0.5} for p in forge(slow, 0.1)["pairs"]]}
    assert all("sandbox counted" in (v or "") for v in verdicts(both).values())
    paid_back = {**both, "stretch_cpu": slow["stretch_cpu"], "reported_cpu": slow["reported_cpu"]}
    assert all("add up to" in (v or "") for v in verdicts(paid_back).values())
    drift = verdicts(honest, reference_cpu=0.5)  # the reference's 2 s in the sandbox: 4x
    assert all((v or "").startswith(timing.HELD) and "in the grader" in (v or "")
               for v in drift.values())  # fmt: skip
    uncounted = verdicts({**honest, "counted_cpu": None})
    assert all((v or "").startswith(timing.HELD) for v in uncounted.values())


def test_the_grader_times_the_same_reference_kernel_on_the_first_pairs_inputs() -> None:
    """The grader compiles the sandbox's reference kernels and times them on the inputs the
    sandbox draws for the first pair: both get the same output."""
    import numpy as np

    from torchlight_grader.sandbox.inside import kernels

    for kind, size in (("map", 60), ("matmul", 40)):
        inputs = kernels.speed_inputs(3, kind, size, 0)
        again = kernels.speed_inputs(3, kind, size, 0)
        assert all(np.array_equal(x, y) for x, y in zip(inputs, again, strict=True))
        out = kernels.call(kernels.reference(kind), kind, inputs)()
        if kind == "matmul":
            np.testing.assert_allclose(out, inputs[0] @ inputs[1], rtol=1e-12, atol=1e-12)
        else:
            x = inputs[0]
            np.testing.assert_allclose(out, np.sin(x) * np.exp(-x * x) + np.cos(3.0 * x))
        assert a2c_kernels.reference_cpu(3, kind, size) > 0


def test_findings_name_the_librarys_kernels_and_numpys_product_and_no_solution() -> None:
    library = a2c_kernels.FINDINGS([catalog.LIBRARY_MATMUL])
    assert len(library) == 1 and catalog.FLAGGED["library-matmul"] in library[0]
    objmode = a2c_kernels.FINDINGS([catalog.OBJMODE_MATMUL])
    assert len(objmode) == 1 and "uses .objmode" in objmode[0] and "uses @" in objmode[0]
    for honest in (catalog.NAIVE_MATMUL, catalog.SKIPS_WORK):  # no speed, but the student's own
        assert a2c_kernels.FINDINGS([honest]) == []


def test_cuda_items_grade_the_catalog_in_the_sandbox() -> None:
    """The CUDA kernel's two items on the solution and the six CUDA entries of the catalog, in
    the real sandbox (one with numba's simulator, one compiling for sm_75): each loses exactly
    the items the catalog names (numpy's ``@`` in the kernel too, with the ``dis`` module
    replaced in ``sys.modules``: the grader reads the bytecode itself)."""
    import jupytext
    from submissions.catalog import build

    from torchlight_grader.checks.grader import Cell, grade

    source = jupytext.read(ROOT / "assignments/source/a2c_kernels/a2c_kernels.py")
    items = ("test_cuda_matmul", "test_cuda_shared")
    names = ("solution", "cuda-tile-guard-off-by-one", "cuda-no-shared-memory",
             "cuda-missing-syncthreads", "library-cuda-matmul", "numpy-in-cuda-kernel",
             "matmul-operator-in-cuda-quiet-dis")  # fmt: skip
    got, want = {}, {}
    for sub in [s for s in catalog.CATALOG if s.name in names]:
        cells = []
        for cell in build(sub, source, source).cells:
            meta = cell.metadata.get("nbgrader", {}) if cell.cell_type == "code" else None
            if meta is not None:
                role = (
                    "test" if meta.get("grade") else "answer" if meta.get("solution") else "locked"
                )
                cells.append(Cell(role, meta.get("grade_id"), cell.source))
        verdicts = grade("a2c_kernels", cells, list(items), seed=7)
        got[sub.name] = sorted(i for i in items if not verdicts[i].passed)
        want[sub.name] = sorted(i for i in items if i in sub.zero)
    assert got == want
    assert len(got) == len(names)


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
