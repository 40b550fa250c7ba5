"""``make homework`` for a learner without a course (issue 26): the student notebooks of a1, a1b, a2, a2b, a2c, a3-a5
in a learner's folder with the torchlight kernel and no solutions, nbgrader's Validate in that
lab only (tests/test_readme.py checks that on the README's `make lab` and `make homework`), and
``make homework-check`` grading the learner's copy with the hidden tests.

The folder is the one ``tests/test_readme.py`` made by running the README's ``make homework``
as pasted (the ``workdir`` fixture: links to the repository); released again here, it costs
nothing when nothing changed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from submissions.catalog import Submission, build
from submissions.pipeline import secret_lines
from test_readme import NO_INSTALL, Pasted, pasted, workdir  # noqa: F401 - session fixtures

pytestmark = [pytest.mark.nbgrader]

ROOT = Path(__file__).resolve().parents[1]
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
    "a9_capstone",
)
TOOL = [sys.executable, "-m", "torchlight_grader.course.homework"]


@pytest.fixture(scope="module")
def homework(pasted: dict[str, Pasted], workdir: Path) -> Path:  # noqa: F811
    """The folder the README's `make homework` wrote (after the whole README ran)."""
    return workdir / "homework"


def test_release_is_the_student_version_with_the_torchlight_kernel(homework: Path) -> None:
    assert sorted(p.name for p in homework.iterdir() if p.is_dir() and p.name[0] == "a") == list(
        ASSIGNMENTS
    )
    for name in ASSIGNMENTS:
        nb = nbformat.read(homework / name / f"{name}.ipynb", as_version=4)
        assert nb.metadata.kernelspec.name == "torchlight", nb.metadata.kernelspec
        text = json.dumps(nb)
        source = nbformat.read(homework / ".grader" / "source" / name / f"{name}.ipynb", 4)
        hidden, answers = secret_lines(source)
        assert hidden and answers
        leaked = [line for line in hidden + answers if line in text]
        assert not leaked, f"{name}: solution or hidden-test lines in the release: {leaked[:3]}"
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
        assert "YOUR CODE HERE" in text
    instructions = (homework / "README.md").read_text()
    assert "homework-check A=a1" in instructions and "Validate" in instructions


def test_release_never_overwrites_the_learners_work(homework: Path) -> None:
    mine = homework / "a2_broadcasting" / "a2_broadcasting.ipynb"
    before = mine.read_text()
    mine.write_text(before.replace("YOUR CODE HERE", "MY OWN WORK", 1))
    try:
        subprocess.run([*TOOL, "release", "--into", str(homework)], check=True, capture_output=True)
        assert "MY OWN WORK" in mine.read_text()
    finally:
        mine.write_text(before)


def _check(homework: Path, name: str) -> str:
    run = subprocess.run(
        ["make", "-C", str(ROOT), *NO_INSTALL.split(), "homework-check", f"A={name}",
         f"HOMEWORK={homework}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def test_check_grades_the_learners_copy_with_the_hidden_tests(
    homework: Path,
    pasted: dict[str, Pasted],  # noqa: F811
) -> None:
    """The released notebook as it is scores 0 (the README's `make homework-check A=a1`, as
    pasted); with the course's solution typed in, full marks; the feedback page shows the
    messages and never the hidden tests."""
    name = "a1_functions"
    mine = homework / name / f"{name}.ipynb"
    released = mine.read_text()
    unsolved = next(r.text for c, r in pasted.items() if c.startswith("make homework-check A=a1"))
    got = re.search(r"a1_functions: (\S+) / (\S+) points", unsolved)
    assert got and float(got[1]) == 0 and float(got[2]) > 0, unsolved
    # untouched: "not started" (issue 40, item 6), not "some hidden tests failed"
    assert "not started" in unsolved and "some hidden tests failed" not in unsolved, unsolved
    assert "YOUR CODE HERE" in released
    source = nbformat.read(homework / ".grader" / "source" / name / f"{name}.ipynb", 4)
    release = nbformat.read(mine, as_version=4)
    solved = build(Submission(name="me", assignment=name, kind="solution", base="solution"),
                   source, release)  # fmt: skip
    nbformat.write(solved, mine)
    try:
        out = _check(homework, "a1_functions")
    finally:
        mine.write_text(released)
    got = re.search(r"a1_functions: (\S+) / (\S+) points", out)
    assert got and got[1] == got[2] and float(got[1]) > 0, out
    assert "every hidden test passed" in out and "FAIL" not in out
    # the rows in the notebook's order, not sorted by name
    tests = [c.metadata.nbgrader["grade_id"] for c in release.cells
             if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata.nbgrader.get("solution")]  # fmt: skip
    shown = re.findall(r"^\s+pass\s+(\S+)", out, re.M)
    assert shown == tests and shown != sorted(shown), (shown, tests)
    page = (homework / "feedback" / f"{name}.html").read_text()
    hidden, _ = secret_lines(source)
    assert not [line for line in hidden if line in page]


def test_check_grades_a8_with_its_hidden_tests(homework: Path) -> None:
    """`make homework-check A=a8`: the released inference notebook scores 0 and is "not
    started"; with the course's solution typed in, every hidden test passes."""
    name = "a8_inference"
    mine = homework / name / f"{name}.ipynb"
    released = mine.read_text()
    out = _check(homework, "a8")
    got = re.search(r"a8_inference: (\S+) / (\S+) points", out)
    assert got and float(got[1]) == 0 and float(got[2]) == 13 and "not started" in out, out
    source = nbformat.read(homework / ".grader" / "source" / name / f"{name}.ipynb", 4)
    release = nbformat.read(mine, as_version=4)
    solved = build(Submission(name="me", assignment=name, kind="solution", base="solution"),
                   source, release)  # fmt: skip
    nbformat.write(solved, mine)
    try:
        out = _check(homework, "a8")
    finally:
        mine.write_text(released)
    got = re.search(r"a8_inference: (\S+) / (\S+) points", out)
    assert got and float(got[1]) == float(got[2]) == 13, out
    assert "every hidden test passed" in out and "FAIL" not in out


def test_check_finds_each_assignment_by_its_short_name(tmp_path: Path) -> None:
    """`homework-check A=a1` is assignment 1, `A=a1b` the engine, `A=a2b` the strided tensor,
    `A=a2c` the fast kernels (a short name is not a prefix match),
    in the course's teaching order; an unknown name lists the choices."""
    from torchlight_grader.course import homework as tool

    assert [tool.find_assignment(tmp_path, n) for n in ("a1", "a1b", "a2")] == list(ASSIGNMENTS[:3])
    assert tool.find_assignment(tmp_path, "a1b_engine") == "a1b_engine"
    assert tool.find_assignment(tmp_path, "a8") == "a8_inference"
    assert tool.find_assignment(tmp_path, "a2c") == "a2c_kernels"
    assert tool.find_assignment(tmp_path, "a9") == "a9_capstone"
    with pytest.raises(
        SystemExit, match=r"a1_functions, a1b_engine, a2_broadcasting, a2b_strided, a2c_kernels"
    ):
        tool.find_assignment(tmp_path, "a10")


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOOL, *args], capture_output=True, text=True, timeout=300)


def test_a_renamed_notebook_is_found_and_named_and_never_copied_beside(homework: Path) -> None:
    """Issue 40, item 6: a1 renamed to my_a1.ipynb: `make homework` writes no fresh copy beside
    it and says why; `make homework-check A=a1` grades the renamed one, names it, and says "not
    started" for a notebook as released."""
    folder = homework / "a1_functions"
    mine, renamed = folder / "a1_functions.ipynb", folder / "my_a1.ipynb"
    mine.rename(renamed)
    try:
        run = _tool("release", "--into", str(homework))
        assert run.returncode == 0, run.stderr
        assert not mine.exists(), "a fresh copy was written beside the renamed notebook"
        assert "my_a1.ipynb (renamed): no fresh copy written" in run.stdout, run.stdout
        out = _check(homework, "a1")
        assert "run `make homework`" not in out
        assert f"your a1_functions is {renamed} (renamed" in out, out
        assert "not started" in out and "a1_functions: 0 / " in out, out
    finally:
        mine.unlink(missing_ok=True)
        renamed.rename(mine)


@pytest.mark.parametrize("change", ["edited", "deleted"])
def test_a_changed_locked_cell_is_refused_with_the_reason(homework: Path, change: str) -> None:
    """Issue 40, item 6: a test cell edited or deleted: refused before grading, naming the cell
    and why (the grader puts locked cells back, so the edit would never count)."""
    mine = homework / "a1_functions" / "a1_functions.ipynb"
    before = mine.read_text()
    nb = nbformat.reads(before, as_version=4)
    at = next(i for i, c in enumerate(nb.cells)
              if c.metadata.get("nbgrader", {}).get("grade_id") == "test_div")  # fmt: skip
    if change == "edited":
        nb.cells[at].source += "\nassert True  # my own test"
    else:
        del nb.cells[at]
    nbformat.write(nb, mine)
    try:
        run = _tool("check", "a1", "--into", str(homework))
    finally:
        mine.write_text(before)
    text = run.stdout + run.stderr
    assert run.returncode != 0, text
    assert f"the locked cell(s) `test_div` was {change}" in text, text
    assert "puts them back as released" in text and "grading" not in run.stdout, text
