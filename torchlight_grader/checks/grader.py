"""The trusted half of grading: pick each item's cells, run them in a sandbox, judge the outputs.

Order matters for trust: the inputs are drawn here from a seed the student cannot know, the
sandbox runs and exits, and only then are the reference values computed, in this process, and
compared with what the sandbox returned.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchlight_grader import sandbox
from torchlight_grader.checks import graded_library, registry, variants
from torchlight_grader.checks.check import Case, Check, encode_case
from torchlight_grader.checks.variants import VariantCheck
from torchlight_grader.sandbox import CellRecord, Limits, Outcome, Run, run_items

ROLES = ("locked", "answer", "test", "student")


@dataclass(frozen=True)
class Cell:
    """A code cell as the grader sees it: its role (from the gradebook, not the notebook's own
    metadata), its grade id (None for cells the student added) and its source."""

    role: str
    grade_id: str | None
    source: str


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str


def rng_for(seed: int, notebook: str, grade_id: str) -> np.random.Generator:
    """Independent random inputs per item, reproducible from the run's seed."""
    key = [seed, zlib.crc32(notebook.encode()), zlib.crc32(grade_id.encode())]
    return np.random.default_rng(np.random.SeedSequence(key))


def runnable(cells: Sequence[Cell]) -> list[Cell]:
    """The cells the sandbox runs, in order: everything but the test cells (the grader brings
    its own checks), as the student's kernel would have run them."""
    return [c for c in cells if c.role != "test"]


def cell_problem(check: Check, records: Sequence[CellRecord], limits: Limits) -> str | None:
    """Why the item fails because of one of *its own* answer cells, if it does: the cell hung,
    ended the process, ran out of memory, or printed past the output limit."""
    for r in records:
        if r.name not in check.cells:
            continue
        if r.status == "timeout":
            return (
                f"your answer cell `{r.name}` was still running after {limits.cell_timeout:g} s "
                "(an infinite loop?) and was skipped"
            )
        if r.status == "ended":
            return (
                f"your answer cell `{r.name}` ended the Python process (os._exit, a crash or a "
                "kill) and was skipped: an answer must not stop the notebook"
            )
        if r.output_bytes >= limits.output:
            return (
                f"your answer cell `{r.name}` printed more than {limits.output // 1024} KiB; "
                "remove the large prints"
            )
        if r.exhausted:
            return f"your answer cell `{r.name}` ran out of resources: {r.error}"
    return None


def prepare(notebook: str, limits: Limits | None = None, forbidden: Sequence[str] = ()) -> None:
    """Start the sandbox :func:`grade` will use for ``notebook`` now, so that it imports while
    nbgrader prepares the notebook (:func:`torchlight_grader.sandbox.prepare`); nothing for a
    notebook without registered checks."""
    if registry.checks_for(notebook):
        sandbox.prepare("child.py", limits or Limits(), forbidden, as_pid_1=True,
                        **_library(notebook))  # fmt: skip


def _library(notebook: str) -> dict[str, Any]:
    """The sandbox arguments that give the hidden checks of ``notebook`` the grader-built
    library, without the graded ops' backward, and of the environment only the packages the
    checks need (:func:`~torchlight_grader.checks.graded_library.check_sandbox_view`)."""
    masks, allowed = graded_library.check_sandbox_view()
    return {"overlays": (*allowed, *graded_library.for_notebook(notebook)), "masks": masks}


def grade(
    notebook: str,
    cells: Sequence[Cell],
    test_ids: Sequence[str],
    *,
    seed: int,
    limits: Limits | None = None,
    timeout_cap: float | None = None,
    forbidden: Sequence[str] = (),
    ahead: bool = False,
    keep: dict[str, list[Case]] | None = None,
    student: str | None = None,
) -> dict[str, Verdict]:
    """Grade the test cells ``test_ids`` of one notebook; one :class:`Verdict` per id.

    ``ahead``: start the next notebook's sandbox while this one runs (for a batch). ``keep``:
    receives each item's cases after judging (what a check noted in them: the capstone's loss).
    ``student``: the submission's owner, whose variant an item with variants checks
    (:mod:`~torchlight_grader.checks.variants`; the notebook's cells run with it set first)."""
    limits = limits or Limits()
    checks = registry.checks_for(notebook)
    verdicts: dict[str, Verdict] = {}
    notes: dict[str, str] = {}  # an item with variants: which one was graded (on a failure)
    items: list[dict[str, Any]] = []
    plans: dict[str, tuple[Check, list[Case]]] = {}
    environs: dict[str, tuple[tuple[str, str], ...]] = {}
    for grade_id in test_ids:
        check = checks.get(grade_id)
        if isinstance(check, VariantCheck):  # the owner's own variant, never the notebook's say
            owner = student or variants.LEARNER
            notes[grade_id] = f"(graded on your variant of {check.item}: {check.choice(owner)})"
            check = check.for_student(owner)
        if check is None:
            verdicts[grade_id] = Verdict(
                False, f"no hidden check is registered for test cell {grade_id!r} of {notebook!r}"
            )
            continue
        shared = getattr(check, "same_run_as", None)
        if (
            isinstance(shared, str) and shared in plans
        ):  # judged from another item's run (a2c: one timing, two levels)
            plans[grade_id] = (check, plans[shared][1])
            continue
        cases = check.cases(rng_for(seed, notebook, grade_id))
        timeout = check.timeout if timeout_cap is None else min(check.timeout, timeout_cap)
        plans[grade_id] = (check, cases)
        items.append(
            {
                "id": grade_id,
                "spec": check.spec(),
                "cases": [encode_case(c) for c in cases],
                "timeout": timeout,
                "cpu": check.cpu,
                "processes": check.processes,
            }
        )
        environs[grade_id] = tuple(check.environ)
    sources = [
        {"name": c.grade_id or f"new cell {i + 1}", "source": c.source}
        for i, c in enumerate(runnable(cells))
    ]
    if sources and student is not None:  # the setup cell draws the owner's variant
        sources[0]["source"] = variants.student_line(student) + sources[0]["source"]
    run = Run()
    # against the grader-built library: the graded ops' own backward is not there; one sandbox
    # per environment the items ask for (a2c's CUDA simulator), each running the cells once,
    # all of them within the notebook's one budget
    deadline = time.monotonic() + limits.budget
    for environ in dict.fromkeys(environs.values()):
        group = [item for item in items if environs[item["id"]] == environ]
        part = run_items(notebook, sources, group, limits, forbidden, ahead, environ=environ,
                         deadline=deadline, **_library(notebook))  # fmt: skip
        run.cells = run.cells or part.cells
        run.outcomes.update(part.outcomes)
    for grade_id, (check, cases) in plans.items():
        problem = cell_problem(check, run.cells, limits)
        if problem:
            verdicts[grade_id] = Verdict(False, problem)
            continue
        ran = getattr(check, "same_run_as", None) if grade_id not in run.outcomes else None
        outcome = run.outcomes.get(ran or grade_id) or Outcome(
            problem="the sandbox did not run this item"
        )
        cell_errors = [f"cell {r.name}: {r.error}" for r in run.cells if r.status == "error"]
        verdicts[grade_id] = judge(check, cases, outcome, cell_errors[:5])
        if not verdicts[grade_id].passed and grade_id in notes:
            verdicts[grade_id] = Verdict(False, f"{verdicts[grade_id].message}\n{notes[grade_id]}")
        if keep is not None:
            keep[grade_id] = list(cases)
    return verdicts


def judge(
    check: Check, cases: Sequence[Case], outcome: Outcome, cell_errors: Sequence[str] = ()
) -> Verdict:
    """Compare the sandbox's raw outputs with references computed here, case by case."""
    used = outcome.details.get("cpu_seconds")
    if check.cpu is not None and (not isinstance(used, int | float) or used > check.cpu + 1):
        spent = f"{used:.1f} s" if isinstance(used, int | float) else "an unknown amount"
        return Verdict(False, f"your code used {spent} of CPU time (every process and thread "
                              f"counted); this item's budget is {check.cpu:g} s")  # fmt: skip
    if outcome.problem or outcome.result is None:
        return Verdict(False, _with_output(outcome.problem or "no result", outcome))
    received = outcome.result["cases"]
    for n, case in enumerate(cases):
        got = received[n] if n < len(received) else None
        if not isinstance(got, dict):
            return Verdict(False, "the grader received no result for this check")
        if "error" in got:
            message = f"calling {check.entry} on inputs ({case.describe()}) raised {got['error']}"
        else:
            if check.counted_cpu:  # a speed item checks what it was told
                got = {**got, "counted_cpu": used}  # counted outside the student's process
            expected = check.expected(case)  # computed here, now that the sandbox is gone
            try:
                message = check.judge(case, got, expected) or ""
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
                message = f"the grader could not read the results of your code ({exc!r:.200})"
        if message:
            if cell_errors:
                message += "\nRunning your cells raised:\n  " + "\n  ".join(cell_errors)
            return Verdict(False, f"trial {n + 1} of {len(cases)}: {message}")
    return Verdict(True, check.passed_on(cases, received))


def _with_output(message: str, outcome: Outcome) -> str:
    if outcome.output_tail.strip():
        return f"{message}\nThe last lines your code printed:\n{outcome.output_tail[-300:]}"
    return message
