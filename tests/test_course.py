"""The nbgrader course, graded by the real nbgrader CLI: every catalog submission, item by item.

One module-scoped fixture builds a temporary copy of the course, releases every assignment,
hands in every submission of ``tests/submissions`` as its own student, then grades them with
the course's own tool, as an instructor's ``make course-grade`` does (``python -m
torchlight_grader.course.grade --jobs 2 --full``: nbgrader autograde and generate_feedback per
student in two worker processes, the exports once at the end; ``tests/test_course_scale.py``
shows its grades are nbgrader's serial run's). The tests read the exported CSVs and the
produced files.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from submissions import (
    a1_functions,
    a1b_engine,
    a2_broadcasting,
    a2b_strided,
    a2c_kernels,
    a3_networks,
    a4_convolutions,
    a5_attention,
    a6_tokens,
    a7_gpt,
    a8_inference,
)
from submissions.catalog import Submission, build
from submissions.pipeline import (
    make_course,
    max_points,
    nbgrader,
    notebooks,
    read_items,
    read_totals,
    secret_lines,
    submit,
)

from torchlight_grader.checks import timing
from torchlight_grader.checks.registry import checks_for

# The shared fixture grades every catalog submission of every assignment (~110 students): past
# pyproject's 600 s per test on a busy 2-core machine (a7 trains a small GPT per submission, a2c
# compiles and times kernels: ~64 s per student at a load of 5-7).
pytestmark = [pytest.mark.nbgrader, pytest.mark.slow, pytest.mark.timeout(3600)]

ASSIGNMENTS = (
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
MODULES = (
    a1_functions,
    a1b_engine,
    a2_broadcasting,
    a2b_strided,
    a2c_kernels,
    a3_networks,
    a4_convolutions,
    a5_attention,
    a6_tokens,
    a7_gpt,
    a8_inference,
)
CATALOG: list[Submission] = [s for module in MODULES for s in module.CATALOG]
#: The items timed against a reference kernel (the sandbox broker's ``speed`` and ``bpe_speed``).
SPEED_ITEMS = frozenset(
    grade_id
    for assignment in ASSIGNMENTS
    for grade_id, check in checks_for(assignment).items()
    if check.spec().get("runner") in ("speed", "bpe_speed")
)
# Short timeouts keep the hazards cheap; the seed makes a failure reproducible.
GRADING_FLAGS = (
    "--Execute.timeout=10",
    "--SandboxedExecute.total_timeout=120",
    "--IsolatedGrader.seed=20260115",
    "--IsolatedGrader.cell_timeout=10",
    "--IsolatedGrader.notebook_timeout=300",  # a2c: compiling kernels and timing them
)


@dataclass
class Graded:
    course: Path
    items: dict[tuple[str, str], dict[str, float]]
    totals: dict[tuple[str, str], dict[str, str]]
    points: dict[str, dict[str, float]]
    sources: dict[str, Any]
    seconds: dict[str, float]
    log: list[str]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    course = make_course(tmp_path_factory.mktemp("nbgrader"))
    log: list[str] = []
    seconds = {"release": nbgrader(course, "generate_assignment", "*", "--force", log=log)}
    sources, points = {}, {}
    # every released assignment (the capstone too: its own suite grades it, this one checks its
    # release and its row in the exports)
    released = sorted(p.name for p in (course / "release").iterdir() if p.is_dir())
    assert set(ASSIGNMENTS) <= set(released), released
    for assignment in released:
        source, release = notebooks(course, assignment)
        sources[assignment], points[assignment] = source, max_points(source)
        for sub in CATALOG:
            if sub.assignment == assignment:
                submit(course, sub.student, assignment, build(sub, source, release))
    seconds["grade"] = grade_course(course, GRADING_FLAGS, log=log)
    print("\n".join(f"{step}: {s:.1f} s" for step, s in seconds.items()))
    return Graded(course, read_items(course), read_totals(course), points, sources, seconds, log)


def grade_course(course: Path, flags: tuple[str, ...], log: list[str]) -> float:
    """Every submission, two students at a time (the speed items' paired protocol is fair
    beside a neighbour: :mod:`torchlight_grader.checks.timing`)."""
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "torchlight_grader.course.grade", "--course", str(course),
           "--jobs", "2", "--full", "--assignment", "*", "--", *flags]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    log.append(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return time.perf_counter() - start


def _written(graded: Graded, assignment: str) -> dict[str, float]:
    """``grade_id -> points`` of the written answers (nbgrader's manually graded answer cells:
    ``grade`` and ``solution``) of an assignment's source: a3's adam_why. A person grades them;
    ``graded.points`` (the autograded test cells) leaves them out."""
    return {
        cell.metadata.nbgrader["grade_id"]: float(cell.metadata.nbgrader["points"])
        for cell in graded.sources[assignment].cells
        if cell.metadata.get("nbgrader", {}).get("grade") and cell.metadata.nbgrader.get("solution")
    }


@pytest.mark.parametrize("sub", CATALOG, ids=lambda s: s.student)
def test_grades_item_by_item(graded: Graded, sub: Submission) -> None:
    expected = sub.expected(graded.points[sub.assignment])
    got = graded.items.get((sub.student, sub.assignment))
    assert got is not None, f"{sub.student} was not graded"
    got = dict(got)
    written = _written(graded, sub.assignment)  # no score before a person's (tested below)
    assert {k: got.pop(k, None) for k in written} == dict.fromkeys(written, 0.0), sub.student
    assert set(got) == set(expected), f"graded items {sorted(got)}"
    wrong = {
        item: (got.get(item), want) for item, want in expected.items() if got.get(item) != want
    }
    if wrong:
        messages = _verdicts(graded.course, sub)
        detail = "\n".join(f"  {item}: got {g}, expected {w}\n    {messages.get(item, '')[:600]}"
                           for item, (g, w) in wrong.items())  # fmt: skip
        pytest.fail(f"{sub.student} ({sub.note or sub.kind}):\n{detail}")


@pytest.mark.parametrize("sub", [s for s in CATALOG if s.members], ids=lambda s: s.student)
def test_mistakes_graded_together_change_cells_of_their_own(
    graded: Graded, sub: Submission
) -> None:
    """A notebook of several planted mistakes (``catalog.together``) is each member's notebook
    at once: each member alone changes cells no other member changes, and the notebook holds
    every member's change (the grades test above then finds each member's items at zero)."""
    source, release = notebooks(graded.course, sub.assignment)
    assert separate_changes(sub, source, release) == {}
    kept = [item for item, points in sub.expected(graded.points[sub.assignment]).items() if points]
    assert kept, "every item at zero: a notebook that fails as a whole would score the same"


def separate_changes(sub: Submission, source: Any, release: Any) -> dict[str, str]:
    """What is wrong with ``sub``'s members sharing a notebook: ``{member: why}``."""
    base = build(Submission("base", sub.assignment, "solution", "solution"), source, release)
    together = build(sub, source, release)
    owner: dict[int, str] = {}
    wrong = {}
    for member in sub.members:
        alone = build(member, source, release)
        if len(alone.cells) != len(base.cells):
            wrong[member.name] = "adds or removes cells"
            continue
        changed = [
            i
            for i, (a, b) in enumerate(zip(base.cells, alone.cells, strict=True))
            if a.source != b.source
        ]
        for i in changed:
            if i in owner:
                wrong[member.name] = f"changes cell {i}, as {owner[i]} does"
            elif together.cells[i].source != alone.cells[i].source:
                wrong[member.name] = f"its change of cell {i} is not in the notebook"
            owner[i] = member.name
        if not changed:
            wrong[member.name] = "changes nothing"
    return wrong


@pytest.mark.parametrize("sub", [s for s in CATALOG if s.fools_kernel], ids=lambda s: s.student)
def test_cheats_fool_an_in_kernel_test_but_not_the_grade(graded: Graded, sub: Submission) -> None:
    """The cheat is real: the in-kernel test cell would have given full points."""
    kernel = _kernel_scores(graded.course, sub)
    points = graded.points[sub.assignment]
    fooled = [item for item in sub.fools_kernel if kernel.get(item) == points[item]]
    assert fooled == list(sub.fools_kernel), f"in-kernel scores: {kernel}"
    assert all(graded.items[(sub.student, sub.assignment)][item] == 0 for item in sub.fools_kernel)


@pytest.mark.parametrize(
    "sub", [s for s in CATALOG if s.kind == "solution"], ids=lambda s: s.student
)
def test_solutions_pass_their_visible_tests_in_the_kernel(graded: Graded, sub: Submission) -> None:
    """The instructor's notebook is consistent: visible tests and in-kernel checks pass too. A
    speed item timed in the kernel (the notebook's own check, on this loaded machine) may be
    held instead: "could not time fairly", as the audit mark and the integrity report say."""
    kernel = _kernel_scores(graded.course, sub)
    points = graded.points[sub.assignment]
    marks = _kernel_marks(graded.course, sub)
    held = {g for g, m in marks.items() if timing.HELD in str(m.get("kernel_error", ""))}
    assert held <= SPEED_ITEMS, f"only a speed item can be held: {held}"
    assert {g: s for g, s in kernel.items() if g not in held} == {
        g: p for g, p in points.items() if g not in held
    }, {g: (kernel[g], marks[g].get("kernel_error")) for g in kernel if kernel[g] != points[g]}
    rows = [
        r for r in (graded.course / "integrity.csv").read_text().splitlines() if sub.student in r
    ]
    for grade_id in held:  # its own row says why, in the kernel
        assert any(f"test cell {grade_id}: in-kernel score 0" in r and timing.HELD in r
                   for r in rows), (grade_id, rows)  # fmt: skip


def test_a_warning_would_have_cost_points_in_the_kernel(graded: Graded) -> None:
    sub = next(s for s in CATALOG if s.name == "warning")
    kernel = _kernel_scores(graded.course, sub)
    # Exp.backward prints to stderr while the test cell runs: plain nbgrader scores that zero.
    assert kernel["test_exp"] == 0, kernel
    assert graded.items[(sub.student, sub.assignment)]["test_exp"] == 1
    # The integrity report's row says why the kernel scored it nothing.
    report = (graded.course / "integrity.csv").read_text()
    row = next(r for r in report.splitlines() if sub.student in r and "test cell test_exp:" in r)
    assert "in-kernel score 0, isolated check passed" in row and "stderr: " in row, row
    assert "Exp.backward called" in row, row


def test_max_scores_are_the_instructors(graded: Graded) -> None:
    """nbgrader's max_score: the test cells' points and the written answers' (a3: 11 + 1)."""
    for (student, assignment), row in graded.totals.items():
        most = sum(graded.points[assignment].values()) + sum(_written(graded, assignment).values())
        assert float(row["max_score"]) == most, student
    assert _written(graded, "a3_networks") == {"adam_why": 1.0}
    assert sum(graded.points["a3_networks"].values()) == 11


def test_the_written_answer_awaits_a_person(graded: Graded) -> None:
    """a3's adam_why, the course's written answer: autograde leaves every answered one (the
    catalog's submissions on the solution) "needs manual grade" with no score, and the release's
    (as released) 0 with nothing to grade; the class report says "awaiting grading" for it, no
    pass rate, and names them; each feedback page says "not graded yet" on it (never nbgrader's
    "0.0 / 1.0") and how many points await a person; the release's page shows its 0."""
    import csv

    from torchlight_grader.course import report

    a3 = [s for s in CATALOG if s.assignment == "a3_networks"]
    with open(graded.course / "items.csv", newline="", encoding="utf-8") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f) if r["grade_id"] == "adam_why"}
    for sub in a3:
        row = rows[sub.student]
        awaiting = "yes" if sub.base == "solution" else ""
        assert (row["needs_manual_grade"], float(row["score"])) == (awaiting, 0.0), row
        page = graded.course / "feedback" / sub.student / sub.assignment / f"{sub.assignment}.html"
        text = re.sub(r"\s+", " ", _html_text(page.read_text()))
        if awaiting:
            assert (
                "adam_why written response (not graded yet: 1 point(s), graded by a person)" in text
            )
            assert "Student's answer (not graded yet: 1 point(s)" in text, sub.student
            assert "1 point(s) of written answers not graded yet" in text, sub.student
        else:
            assert "adam_why written response (Score: 0.0 / 1.0)" in text, sub.student
            assert "not graded yet" not in text, sub.student
    page = report.render(report.read(graded.course / "grades.csv", graded.course / "items.csv"))
    row = page[page.index('data-name="adam_why"') :].split("</tr>")[0]
    answered = sum(s.base == "solution" for s in a3)
    assert f"{answered} awaiting grading" in row, row
    names = page[page.index("<h2>a3_networks</h2>") :].split("<h2>")[1]
    assert "awaiting a TA" in names and "a3_networks--solution" in names, names


def test_release_contains_no_solution_and_no_hidden_test(graded: Graded) -> None:
    for assignment in graded.sources:
        folder = graded.course / "release" / assignment
        assert sorted(p.name for p in folder.iterdir()) == [f"{assignment}.ipynb"]
        text = (folder / f"{assignment}.ipynb").read_text()
        _assert_no_secrets(text, graded.sources[assignment], where=f"release of {assignment}")


def test_feedback_shows_messages_but_no_hidden_test_or_solution(graded: Graded) -> None:
    for sub in CATALOG:
        page = graded.course / "feedback" / sub.student / sub.assignment / f"{sub.assignment}.html"
        assert page.exists(), f"no feedback for {sub.student}"
        text = _html_text(page.read_text())
        secrets = graded.sources[sub.assignment]
        _assert_no_secrets(text, secrets, where=f"feedback of {sub.student}",
                           solutions=sub.base == "release" and not sub.edits)  # fmt: skip
        if sub.kind == "release":
            assert "HiddenCheckFailed" in text and "NotImplementedError" in text, sub.student


@pytest.mark.parametrize(
    "module",
    [a1b_engine, a2b_strided, a2c_kernels, a6_tokens, a7_gpt, a8_inference],
    ids=lambda m: m.A,
)
def test_answers_that_reach_for_the_librarys_own_code_are_flagged(
    graded: Graded, module: Any
) -> None:
    """a1b, a2b, a2c, a6, a7 and a8: every answer that calls the library's engine, index
    arithmetic, kernels, tokenizer, attention, AdamW or sampler (by an imported name, a method, a
    name built at run time; a2c: numpy's product from numba.objmode) is in the integrity
    findings; no honest answer or planted mistake is."""
    for sub in module.CATALOG:
        findings = " ".join(_autograded(graded.course, sub).metadata["torchlight"]["findings"])
        flagged = [
            module.FLAGGED[m.name] for m in sub.members or (sub,) if m.name in module.FLAGGED
        ]
        if flagged:  # (a notebook of several members: each member's finding)
            assert all(words in findings for words in flagged), (sub.name, flagged, findings)
        else:
            words = ("reaches for", "called a part of torchlight")
            if module is a8_inference:  # its Checkpoint's backward recomputes, by design
                words += ("drives torchlight's own autograd",)
            for word in words:
                assert word not in findings, (sub.name, findings)


def test_a6_speed_messages_name_the_cause(graded: Graded) -> None:
    """a6's speed items, graded for real in the sandbox (the trainers' verdicts are checked item
    by item above): the message shows the measured ratio and the thresholds; the trainer that
    recounts the whole corpus is cut or over 25x; a cache keyed on the input's length disagrees
    with the reference on a fresh corpus; a forged wall clock gains nothing (CPU time is graded
    too, and shown); forging both clocks is caught by the count taken outside the process."""
    messages = {
        sub.name: _verdicts(graded.course, sub)["test_train_speed"]
        for sub in a6_tokens.CATALOG
        if sub.name in ("solution", "recount-over-pieces", "naive-trainer", "cached-trainer",
                        "faked-wall-clock", "faked-clocks")
    }  # fmt: skip
    assert len(messages) == 6, sorted(messages)
    for name in ("solution", "recount-over-pieces", "faked-wall-clock"):
        assert "x the reference" in messages[name], (name, messages[name])
        assert "partial at <= 25x" in messages[name], (name, messages[name])
    ratio = re.search(r"took ([0-9.]+)x", messages["naive-trainer"])
    cut = re.search(r"stopped after [0-9.]+ s of CPU time, ([0-9]+)x the reference trainer's",
                    messages["naive-trainer"])  # fmt: skip
    assert (cut is not None and int(cut.group(1)) >= 25) or (
        ratio is not None and float(ratio.group(1)) > 25
    ), messages["naive-trainer"]
    assert "disagreed with the reference's" in messages["cached-trainer"], messages
    cpu = re.search(r"in CPU time ([0-9.]+)x", messages["faked-wall-clock"])
    assert cpu is not None and float(cpu.group(1)) > 3, messages["faked-wall-clock"]
    assert "the grader's clocks were changed" in messages["faked-clocks"], messages


def _assert_no_secrets(text: str, source_nb: Any, where: str, solutions: bool = True) -> None:
    hidden, answers = secret_lines(source_nb)
    for line in hidden:
        assert line not in text, f"hidden test line {line!r} in {where}"
    assert "BEGIN HIDDEN TESTS" not in text, where
    if solutions:
        for line in answers:
            assert line not in text, f"solution line {line!r} in {where}"


def _html_text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _autograded(course: Path, sub: Submission) -> Any:
    path = course / "autograded" / sub.student / sub.assignment / f"{sub.assignment}.ipynb"
    return nbformat.read(path, as_version=4)


def _kernel_scores(course: Path, sub: Submission) -> dict[str, float]:
    """What a plain in-kernel test cell would have scored (kept by IsolatedGrader)."""
    return {g: mark["kernel_score"] for g, mark in _kernel_marks(course, sub).items()}


def _kernel_marks(course: Path, sub: Submission) -> dict[str, dict[str, Any]]:
    """Each test cell's audit mark: its in-kernel score, its isolated verdict, the in-kernel
    error where there was one."""
    return {
        cell.metadata["nbgrader"]["grade_id"]: dict(cell.metadata["torchlight"])
        for cell in _autograded(course, sub).cells
        if "torchlight" in cell.metadata
    }


def _verdicts(course: Path, sub: Submission) -> dict[str, str]:
    try:
        nb = _autograded(course, sub)
    except FileNotFoundError:
        return {}
    out = {}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id and cell.cell_type == "code" and cell.outputs:
            o = cell.outputs[0]
            out[grade_id] = o.get("text") or o.get("evalue") or ""
    return out
