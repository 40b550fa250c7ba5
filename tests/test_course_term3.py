"""Progressive hints (issue 40, round two, item 1): the instructor writes them on a test cell of
the source notebook (``torchlight={"hints": [...]}`` beside nbgrader's metadata; a1_functions has
them on test_div, test_sigmoid and test_pow); they unlock one at a time after failed attempts, in
the learner's real JupyterLab (nbgrader's Validate, through the server handler the button calls)
and in ``homework-check`` (the real nbgrader pipeline); the count lives with the student, changes
no grade, and collect takes it to the class report. Per-student variants (item 2) on two items
(a1's section 5, a3's section 4), graded through the real pipeline; the course's written answer
(a3's adam_why) in ``homework-check``; the student's side in Chromium.

One release into a temporary homework folder (real ``generate_assignment``, ~20 s) serves every
test here; the lab starts once (~5 s).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import nbformat
import pytest
from submissions.catalog import Submission, build, replace, substitute
from submissions.pipeline import secret_lines

pytestmark = [pytest.mark.nbgrader]

ROOT = Path(__file__).resolve().parents[1]
A = "a1_functions"
TOOL = [sys.executable, "-m", "torchlight_grader.course.homework"]
DIV_HINTS = 3
#: Div's backward with the wrong sign for b: the visible tests and the hidden checks both fail it.
WRONG_DIV = substitute("div", "-grad_output * a / (b * b)", "grad_output * a / (b * b)")


def test_a_malformed_hint_or_count_is_no_hint_and_no_error() -> None:
    """The student's notebook and count file are theirs: malformed metadata means no hints, and a
    malformed count (not JSON, not an object, a bad id, a bool, a negative or huge count) is read
    as no hint use, never an error that would break Validate."""
    from torchlight_grader.nbgrader import hints

    for cell in ({"metadata": {"torchlight": 3}}, {"metadata": []}, {"metadata": {"torchlight":
                 {"hints": "one"}}}, {}, 7):  # fmt: skip
        assert hints.hints_of(cell) == [] and hints.grade_id_of(cell) is None
    for data in (b"[1]", b"not json", b"{" * 10_000, b"[" * 5000, b'{"../x": 1}', b'{"t": true}', b'{"t": -1}',
                 b'{"t": 10000}', b'{"t": 1.5}'):  # fmt: skip
        assert hints.parse(data) == {}, data
    assert hints.parse(b'{"test_div": 2, "x y": 1}') == {"test_div": 2}


@pytest.fixture(scope="module")
def homework(tmp_path_factory: pytest.TempPathFactory) -> Path:
    into = tmp_path_factory.mktemp("hints") / "homework"
    run = subprocess.run([*TOOL, "release", "--into", str(into)], capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return into


def _notebooks(homework: Path) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    grader = homework / ".grader"
    return (nbformat.read(grader / "source" / A / f"{A}.ipynb", 4),
            nbformat.read(grader / "release" / A / f"{A}.ipynb", 4))  # fmt: skip


def _write(homework: Path, *edits: object) -> Path:
    """The learner's a1: the course's solution with ``edits`` (planted mistakes)."""
    source, release = _notebooks(homework)
    sub = Submission(name="me", assignment=A, kind="mistake", base="solution", edits=edits)  # type: ignore[arg-type]
    nb = build(sub, source, release)
    nb.metadata["kernelspec"] = {"display_name": "Python (torchlight)", "language": "python",
                                 "name": "torchlight"}  # fmt: skip
    mine = homework / A / f"{A}.ipynb"
    nbformat.write(nb, mine)
    return mine


def _hints(homework: Path, grade_id: str) -> list[str]:
    _, release = _notebooks(homework)
    cell = next(
        c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    )
    return list(cell.metadata["torchlight"]["hints"])


def test_hints_travel_in_the_release_as_metadata_never_as_source(homework: Path) -> None:
    """The release carries the hints as the test cell's metadata (nbgrader keeps it), never in
    any cell's source; an assignment without hints (a1b) carries none: unchanged."""
    _, release = _notebooks(homework)
    with_hints = {c.metadata.nbgrader["grade_id"]: c.metadata["torchlight"]["hints"]
                  for c in release.cells if "torchlight" in c.metadata}  # fmt: skip
    assert sorted(with_hints) == ["test_div", "test_pow", "test_sigmoid"], with_hints
    assert len(with_hints["test_div"]) == DIV_HINTS
    sources = "\n".join(c.source for c in release.cells)
    assert not [h for hs in with_hints.values() for h in hs if h in sources]
    other = json.loads((homework / "a1b_engine" / "a1b_engine.ipynb").read_text())
    assert not [c for c in other["cells"] if "torchlight" in c["metadata"]]


def start_lab(folder: Path, **env: str) -> tuple[subprocess.Popen, str]:
    """The learner's JupyterLab as `make homework` starts it (its Jupyter config folder) in
    ``folder``, on a free port, token ``t``; returns the process and ``http://127.0.0.1:PORT``
    once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    environ = {**os.environ, "JUPYTER_CONFIG_PATH": str(ROOT / "tools" / "jupyter" / "homework"),
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env}  # fmt: skip
    root = ["--allow-root"] if os.geteuid() == 0 else []
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", f"--port={port}",
         "--ServerApp.token=t", "--ServerApp.ip=127.0.0.1", *root],
        cwd=folder, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status?token=t", timeout=5)
            break
        except OSError:
            time.sleep(0.5)
    return proc, url


@pytest.fixture(scope="module")
def lab(homework: Path) -> Iterator[str]:
    """The learner's lab on the homework folder; yields its URL (token ``t``)."""
    proc, url = start_lab(homework)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def validate(url: str, path: str) -> dict:
    """What the Validate button gets back from the lab's server (nbgrader's handler)."""
    request = urllib.request.Request(f"{url}/assignments/validate", data=f"path={path}".encode(),
                                     headers={"Authorization": "token t"}, method="POST")  # fmt: skip
    with urllib.request.urlopen(request, timeout=240) as r:
        return json.loads(r.read().decode())


def _errors(result: dict) -> str:
    assert result["success"], result
    return "\n".join(f["raw_error"] for f in result["value"].get("failed", []))


def test_validate_unlocks_one_hint_per_failed_attempt(homework: Path, lab: str) -> None:
    """Div wrong: the first Validate shows hint 1 (only), the second hints 1-2, under test_div's
    error; the items that pass, and the released stub of another notebook (not started), count
    nothing. The count is the learner's file beside the notebook."""
    mine = _write(homework, WRONG_DIV)
    used = mine.parent / "hints-used.json"
    used.unlink(missing_ok=True)
    written = _hints(homework, "test_div")
    first = _errors(validate(lab, f"{A}/{A}.ipynb"))
    assert f"Hint 1 of {DIV_HINTS}: {written[0]}" in first, first[-2000:]
    assert "Hint 2 of" not in first and "the next hint unlocks" in first
    assert json.loads(used.read_text()) == {"test_div": 1}
    second = _errors(validate(lab, f"{A}/{A}.ipynb"))
    assert f"Hint 2 of {DIV_HINTS}: {written[1]}" in second and "Hint 3 of" not in second
    assert json.loads(used.read_text()) == {"test_div": 2}
    # a notebook as released (every answer raises NotImplementedError): no attempt, no hint
    fresh = homework / "fresh"
    fresh.mkdir(exist_ok=True)
    shutil.copyfile(homework / ".grader" / "release" / A / f"{A}.ipynb", fresh / f"{A}.ipynb")
    untouched = _errors(validate(lab, f"fresh/{A}.ipynb"))
    assert "NotImplementedError" in untouched and "Hint" not in untouched
    assert not (fresh / "hints-used.json").exists()


def test_homework_check_goes_on_counting_and_the_count_changes_no_grade(homework: Path) -> None:
    """`homework-check` after two failed Validates: the third attempt shows all three hints under
    test_div's FAIL row. A forged count (every hint of every item, junk entries) shows hints only
    under failed items, from the release, and the score is the same; no hidden check's line is
    in the output."""
    mine = _write(homework, WRONG_DIV)
    used = mine.parent / "hints-used.json"
    used.write_text(json.dumps({"test_div": 2}))
    written = _hints(homework, "test_div")
    run = subprocess.run([*TOOL, "check", "a1", "--into", str(homework)], capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    out = run.stdout
    assert run.returncode == 0, out[-3000:] + run.stderr[-3000:]
    block = re.search(r"FAIL\s+test_div.*?\n((?:\s{8}.*\n)+)", out)
    assert block, out
    assert [f"Hint {i} of {DIV_HINTS}: {h}" for i, h in enumerate(written, 1)] == [
        line.strip() for line in block[1].splitlines()
    ], block[1]
    assert json.loads(used.read_text()) == {"test_div": 3}
    score = re.search(rf"{A}: (\S+) / (\S+) points", out)
    assert score and float(score[1]) == float(score[2]) - 1, out
    hidden, _ = secret_lines(_notebooks(homework)[0])
    assert not [line for line in hidden if line.strip() and line in out]
    # forged: every hint unlocked, junk beside it; the grade is the same
    used.write_text(json.dumps({"test_div": 1000, "test_pow": 1000, "../x": 5, "test_mul": "all"}))
    again = subprocess.run([*TOOL, "check", "a1", "--into", str(homework)], capture_output=True,
                           text=True, timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    forged = re.search(rf"{A}: (\S+) / (\S+) points", again.stdout)
    assert forged and forged.groups() == score.groups(), again.stdout
    assert "Hint 1 of" in again.stdout and "d(a**b)/da" not in again.stdout  # pow passed
    assert json.loads(used.read_text()) == {"test_div": 1000, "test_pow": 1000}


def test_collect_takes_hint_use_to_the_class_report(
    homework: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make course-collect` takes hints-used.json out of each submission (never graded: it is
    not in submitted/) into hints/<A>.json, malformed entries dropped; the class report names
    who unlocked which hints, as "seen of written"."""
    from torchlight_grader.course import report
    from torchlight_grader.nbgrader import collect, hints

    course, exchange = tmp_path / "course", tmp_path / "exchange"
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    release = homework / ".grader" / "release" / A / f"{A}.ipynb"
    (course / "release" / A).mkdir(parents=True)
    shutil.copyfile(release, course / "release" / A / f"{A}.ipynb")
    inbound = exchange / collect.COURSE_ID / "inbound"
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    for student, used in (("alice", {"test_div": 2, "test_pow": 9}), ("bob", None),
                          ("carol", "not json")):  # fmt: skip
        entry = inbound / f"{student}+{A}+{stamp}+x"
        entry.mkdir(parents=True)
        shutil.copyfile(release, entry / f"{A}.ipynb")
        (entry / "timestamp.txt").write_text(stamp)
        if used is not None:
            (entry / hints.FILE).write_text(used if isinstance(used, str) else json.dumps(used))
    assert collect.collect(course, exchange, A, accounts="no") == 0
    for student in ("alice", "bob", "carol"):
        assert (course / "submitted" / student / A / f"{A}.ipynb").is_file()
        assert not (course / "submitted" / student / A / hints.FILE).exists()
    assert hints.recorded(course, A) == {"alice": {"test_div": 2, "test_pow": 9}, "bob": {},
                                         "carol": {}}  # fmt: skip
    grades = course / "grades.csv"
    grades.write_text("assignment,duedate,timestamp,student_id,last_name,first_name,email,"
                      "raw_score,late_submission_penalty,score,max_score\n"
                      + "".join(f"{A},,{stamp},{s},,,,0,0,0,11\n" for s in ("alice", "bob", "carol")))  # fmt: skip
    items = course / "items.csv"
    items.write_text("assignment,student_id,notebook,grade_id,score,max_score\n")
    page = report.render(report.read(grades, items))
    assert 'data-kind="hints"' in page, page
    assert "alice (test_div: 2 of 3, test_pow: 3 of 3)" in page, page
    assert "bob (" not in page and "carol (" not in page


# --- Per-student variants (item 2): a1's section 5 draws c of sigma(c x y) from the student id,
# a3's section 4 the dampening tau of SGD's v <- mu v + (1 - tau) g ---

#: Students whose variants differ (tested below); "learner" (make homework's id) draws c = 5.
VARIANTS = {"frank": 2, "bob": 3, "carol": 4}
PARAMETRIC = 'variant("expression", (2, 3, 4, 5))'
A3 = "a3_networks"
#: a3's dampening of the same students; "learner" draws 0.2 (bob's copy below).
DAMPENINGS = {"frank": 0.1, "bob": 0.3, "carol": 0.3, "learner": 0.2}
PARAMETRIC_A3 = 'variant("sgd_step", (0.1, 0.2, 0.3, 0.5))'
#: a3's written answer (nbgrader's manually graded answer cell, 1 point)
WRITTEN = "adam_why"


def hard_coded(c: int) -> object:
    """The solution of section 5 with ``c`` written in (what a student types, or copies)."""
    return substitute("expression", PARAMETRIC, str(c))


def hard_coded_a3(tau: float) -> object:
    """a3's solution of section 4 with the dampening ``tau`` written in."""
    return substitute("sgd_step", PARAMETRIC_A3, str(tau))


def test_the_draw_is_the_same_on_both_sides_and_spreads() -> None:
    """The setup cells of a1 and a3 draw what the grader draws (the same hash and salt, the
    checks' own choices), for every id; each item's variants all occur in a class of 40."""
    from torchlight_grader.checks import a1_functions, a3_networks, variants

    ids = [f"s{i}" for i in range(40)]
    for assignment, item, choices in (
        (A, "expression", a1_functions.EXPRESSION_C),
        (A3, "sgd_step", a3_networks.SGD_DAMPENING),
    ):
        setup = next(
            c
            for c in _notebook_of_the_repo(assignment).cells
            if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"
        )
        namespace: dict = {}
        exec(setup.source, namespace)  # noqa: S102 - the release's own setup cell
        for sid in ids:
            namespace["STUDENT"] = sid
            drawn = variants.draw(assignment, item, sid, choices)
            assert namespace["variant"](item, choices) == drawn, (assignment, sid)
        assert {variants.draw(assignment, item, s, choices) for s in ids} == set(choices)
    assert {s: variants.draw(A, "expression", s, (2, 3, 4, 5)) for s in VARIANTS} == VARIANTS
    assert variants.draw(A, "expression", variants.LEARNER, (2, 3, 4, 5)) == 5
    assert {s: variants.draw(A3, "sgd_step", s, a3_networks.SGD_DAMPENING)
            for s in DAMPENINGS} == DAMPENINGS  # fmt: skip


def _notebook_of_the_repo(assignment: str) -> nbformat.NotebookNode:
    from torchlight_grader.course.manage import render

    source = ROOT / "assignments" / "source" / assignment / f"{assignment}.py"
    return nbformat.reads(render(source), as_version=4)


def test_each_student_is_graded_on_their_own_variant(homework: Path) -> None:
    """The real pipeline (nbgrader autograde and feedback, the sandboxes) on three students of
    different variants, in a1 (section 5's c) and a3 (section 4's dampening): the course's
    solution (which draws the parameter as the notebook does) gets full marks; an answer with the
    student's own parameter written in passes; a copy of a classmate's (another variant's) fails
    that item only (each would be the other way round if the grader used any id but the
    owner's: bob's copies are make homework's learner's variants too); each feedback page shows
    the student's own variant, never another's."""
    grader = homework / ".grader"
    submitted = grader / "submitted"
    shutil.rmtree(submitted, ignore_errors=True)
    plans = {
        A: {
            "frank": (),  # the course's solution
            "carol": (hard_coded(4),),  # her own c, typed in (graded as anyone else: 0)
            "bob": (hard_coded(5),),  # a classmate's answer (c = 5, as "learner" too), copied
        },
        A3: {
            "frank": (),
            "carol": (hard_coded_a3(0.3),),  # her own dampening
            "bob": (hard_coded_a3(0.2),),  # a classmate's (0.2, as "learner"); his is 0.3
        },
    }
    failing = {(A, "bob"): "test_expression", (A3, "bob"): "test_sgd_step"}
    for assignment, plan in plans.items():
        source = nbformat.read(grader / "source" / assignment / f"{assignment}.ipynb", 4)
        release = nbformat.read(grader / "release" / assignment / f"{assignment}.ipynb", 4)
        for student, edits in plan.items():
            sub = Submission(name=student, assignment=assignment, kind="mistake", base="solution",
                             edits=edits)  # type: ignore[arg-type]  # fmt: skip
            folder = submitted / student / assignment
            folder.mkdir(parents=True)
            nbformat.write(build(sub, source, release), folder / f"{assignment}.ipynb")
            (folder / "timestamp.txt").write_text("2026-03-01 10:00:00.000000 UTC")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("TORCHLIGHT_STUDENT", None)
    for assignment in plans:
        run = subprocess.run([sys.executable, "-m", "torchlight_grader.course.manage", "grade",
                              str(grader), "--assignment", assignment], capture_output=True,
                             text=True, env=env, timeout=900)  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    import csv

    with open(grader / "items.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["student_id"] in plans[A]]
    # a3's written answer (the solution's text, in every plan) awaits a person, no score yet
    waiting = {(r["assignment"], r["student_id"], r["grade_id"]) for r in rows
               if r["needs_manual_grade"] == "yes"}  # fmt: skip
    assert waiting == {(A3, s, WRITTEN) for s in plans[A3]}, waiting
    rows = [r for r in rows if r["needs_manual_grade"] != "yes"]
    scores = {(r["assignment"], r["student_id"], r["grade_id"]): float(r["score"]) for r in rows}
    for assignment, plan in plans.items():
        maxima = {r["grade_id"]: float(r["max_score"]) for r in rows
                  if r["assignment"] == assignment}  # fmt: skip
        assert maxima, (assignment, "not graded")
        for student in plan:
            for grade_id, most in maxima.items():
                want = 0.0 if failing.get((assignment, student)) == grade_id else most
                got = scores[(assignment, student, grade_id)]
                assert got == want, (assignment, student, grade_id, scores)
    for student, c in VARIANTS.items():
        page = (grader / "feedback" / student / A / f"{A}.html").read_text()
        assert f"your variant ({student}): in section 5, c = {c}" in page, student
        others = [f"in section 5, c = {o}" for s, o in VARIANTS.items() if o != c]
        assert not [o for o in others if o in page], (student, others)
        page = html.unescape((grader / "feedback" / student / A3 / f"{A3}.html").read_text())
        tau = DAMPENINGS[student]
        assert f"your variant ({student}): in section 4, sgd_step's dampening = {tau}" in page
        others = [f"sgd_step's dampening = {o}" for o in set(DAMPENINGS.values()) - {tau}]
        assert not [o for o in others if o in page], (student, others)
    bob = (grader / "feedback" / "bob" / A / f"{A}.html").read_text()
    assert "graded on your variant of expression: 3" in bob, "the failure names bob's variant"
    bob = (grader / "feedback" / "bob" / A3 / f"{A3}.html").read_text()
    assert "graded on your variant of sgd_step: 0.3" in bob, "the failure names bob's variant"


# --- The course's written answer: a3's adam_why, graded by a person, not by homework-check ---


def test_homework_check_says_a_written_answer_is_not_auto_graded(homework: Path) -> None:
    """The self-learner's `homework-check a3`: with every answer right and the written answer
    written, every hidden test passes and the written answer's row says it is not auto-graded
    (no FAIL, no "some hidden tests failed"); the score is the hidden tests' (11 / 11), the
    written point named beside it. Left as released, the row says it is not answered yet."""
    source = nbformat.read(homework / ".grader" / "source" / A3 / f"{A3}.ipynb", 4)
    release = nbformat.read(homework / ".grader" / "release" / A3 / f"{A3}.ipynb", 4)
    released = next(c.source for c in release.cells
                    if c.metadata.get("nbgrader", {}).get("grade_id") == WRITTEN)  # fmt: skip
    mine = homework / A3 / f"{A3}.ipynb"
    outputs = {}
    for case, edits in (("answered", ()), ("left", (replace(WRITTEN, released),))):
        sub = Submission(name="me", assignment=A3, kind="mistake", base="solution", edits=edits)  # type: ignore[arg-type]
        nbformat.write(build(sub, source, release), mine)
        run = subprocess.run([*TOOL, "check", "a3", "--into", str(homework)], capture_output=True,
                             text=True, timeout=900)  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        outputs[case] = run.stdout
    for out in outputs.values():
        row = next((line for line in out.splitlines() if f" {WRITTEN} " in line), "")
        assert row.split()[:4] == ["----", WRITTEN, "?", "/"] and "not auto-graded" in row, out
        assert "FAIL" not in out and "some hidden tests failed" not in out, out
        assert "every hidden test passed" in out, out
        assert f"{A3}: 11 / 11 points (auto-graded; 1 more for written answers" in out, out
    assert "written answer, answered" in outputs["answered"], outputs["answered"]
    assert "not answered yet" in outputs["left"], outputs["left"]


# --- The student's side in Chromium: a failed Validate shows the first hint; two variants ---


def _shots(tmp_path: Path) -> Path:
    """Where the screenshots go: ``TORCHLIGHT_SHOTS`` when set (the closing note's), else the
    test's own folder."""
    folder = Path(os.environ.get("TORCHLIGHT_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _open_notebook(browser: object, url: str, path: str) -> object:
    page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    page.goto(f"{url}/lab/tree/{path}?token=t&reset")
    page.locator(".jp-Notebook").first.wait_for(timeout=120_000)
    page.locator(".jp-Cell").nth(1).wait_for(timeout=120_000)
    page.get_by_text("Python (torchlight) | Idle").first.wait_for(timeout=120_000)
    return page


@pytest.mark.browser
def test_the_students_side_in_chromium(homework: Path, lab: str, tmp_path: Path) -> None:
    """In JupyterLab in Chromium: Div wrong, the student clicks Validate and the dialog shows
    hint 1 of 3 (not hint 2) under test_div's error; then two students (two labs, two ids) run
    the setup cell and see different variants of section 5."""
    from playwright.sync_api import sync_playwright
    from test_browser import CHROMIUM, CHROMIUM_ARGS

    shots = _shots(tmp_path)
    _write(homework, WRONG_DIV)
    (homework / A / "hints-used.json").unlink(missing_ok=True)
    written = _hints(homework, "test_div")
    students: dict[str, tuple[subprocess.Popen, str]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = _open_notebook(browser, lab, f"{A}/{A}.ipynb")
            page.get_by_role("button", name="Validate").first.click()
            dialog = page.locator(".jp-Dialog")
            dialog.get_by_text(f"Hint 1 of {DIV_HINTS}").first.wait_for(timeout=240_000)
            text = dialog.inner_text()
            assert written[0] in text and "Hint 2 of" not in text, text[-2000:]
            page.evaluate(  # the dialog's end: test_div's error and the hint under it
                """() => document.querySelectorAll('.jp-Dialog *').forEach(
                    e => { if (e.scrollHeight > e.clientHeight) e.scrollTop = e.scrollHeight; })"""
            )
            page.screenshot(path=str(shots / "hint-after-failed-validate.png"))
            page.close()
            for sid in ("frank", "bob"):
                folder = homework.parent / f"student-{sid}"
                (folder / A).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(homework / A / f"{A}.ipynb", folder / A / f"{A}.ipynb")
                students[sid] = start_lab(folder, TORCHLIGHT_STUDENT=sid)
            for sid, c in (("frank", 2), ("bob", 3)):
                page = _open_notebook(browser, students[sid][1], f"{A}/{A}.ipynb")
                page.locator(".jp-Cell").nth(1).locator(".jp-InputPrompt").click()  # setup
                page.keyboard.press("Shift+Enter")
                shown = page.get_by_text(f"your variant ({sid}): in section 5, c = {c}")
                shown.first.wait_for(timeout=120_000)
                page.screenshot(path=str(shots / f"variant-{sid}.png"))
                page.close()
        finally:
            browser.close()
            for proc, _ in students.values():
                proc.terminate()
                proc.wait(timeout=30)
    from PIL import Image

    left, right = (Image.open(shots / f"variant-{s}.png") for s in ("frank", "bob"))
    both = Image.new(
        "RGB", (left.width + right.width + 10, max(left.height, right.height)), "white"
    )
    both.paste(left, (0, 0))
    both.paste(right, (left.width + 10, 0))
    both.save(shots / "variants-side-by-side.png")
