"""The homework for a learner without a course: ``make homework`` and ``make homework-check``.

``release`` writes the student versions of the course's assignments (a1, a1b, a2, a2b, a2c, a3-a9), made by nbgrader's
``generate_assignment`` from ``assignments/source``, into a learner's folder (``homework/`` by
default, not committed), one folder per assignment, with the ``torchlight`` kernel. A notebook
already there is never overwritten: it is the learner's work.

``check A`` grades the learner's copy of assignment ``A`` (``a1`` or ``a1_functions``) the way
the course grades a student, with the hidden tests, and prints the score of every test, in the
notebook's order, and where the feedback page is. The grading course, which holds the solutions
and the hidden tests, lives in ``<folder>/.grader`` (hidden in JupyterLab), so the learner sees
only the messages. The common slips get a message of their own:

- a renamed notebook (``a1_functions/my_a1.ipynb``: any notebook of the learner's folder that
  holds the assignment's graded cells) is found and graded, and named; ``release`` writes no
  fresh copy beside it, and says so;
- a notebook whose answers are all as released is "not started" (no grading is run);
- a locked cell (the tests, the instructions) deleted or edited is refused before grading, with
  the cell named and why: the grader would put it back as released, so the edit would not count;
- a written answer (a3's ``adam_why``: nbgrader's manually graded answer cell) is not
  auto-graded: its row says so, and the score is that of the hidden tests, the written points
  named beside it, never counted as failed.

Progressive hints (:mod:`torchlight_grader.nbgrader.hints`): a failed test that carries hints in
the release, whose answer cell the learner has written, counts one failed attempt in
``<assignment>/hints-used.json`` (shared with Validate in the lab) and prints the hints unlocked
so far under its FAIL row.

Usage::

    .venv/bin/python torchlight_grader/course/homework.py release [--into homework]
    .venv/bin/python torchlight_grader/course/homework.py check a1 [--into homework]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from torchlight_grader.course.manage import render, scripts
from torchlight_grader.nbgrader import hints

ROOT = Path(__file__).resolve().parents[2]

COURSE = ROOT / "assignments"
STUDENT = "learner"
GRADER = ".grader"
KERNELSPEC = {"display_name": "Python (torchlight)", "language": "python", "name": "torchlight"}
BWRAP = "/usr/bin/bwrap"
NO_SANDBOX = {"TORCHLIGHT_GRADER_UNSAFE_NO_SANDBOX": "students-can-forge-grades"}

CONFIG = '''"""Written by torchlight_grader.course.homework: the course's configuration, on this private
grading folder."""
import os

load_subconfig({course!r})  # noqa: F821 - traitlets provides it
HERE = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = HERE  # noqa: F821
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db") + "?timeout=600"  # noqa: F821
'''

INSTRUCTIONS = """\
# Your homework: the torchlight course's assignments

Each folder holds one assignment's notebook, as a student of the course receives it (no
solutions, no hidden tests). It is yours: `make homework` never overwrites it (delete a
notebook, then run `make homework` again, to start that assignment over).

1. Open a notebook; the kernel is **Python (torchlight)**. Write your code where it says
   `# YOUR CODE HERE` (remove the `raise NotImplementedError()` line).
2. Run the cells below your answer: the **visible tests** (`assert ...`) pass silently or say
   what is wrong. They are a first check only.
3. **Validate** (the button in the notebook's toolbar) restarts the kernel, runs every cell and
   lists the failing ones, as the course's graders would see them.
4. When the visible tests pass, grade your work with the **hidden tests**, from any terminal
   (JupyterLab's too: File > New > Terminal):

       make -C {root} homework-check A=a1{folder}   # a1, a1b, a2, a2b, a2c, a3 ... a9

   It grades your saved notebook (save first!) as the course would, prints the score of every
   test and writes the feedback page (each failing test's message, never its code) to
   `feedback/<assignment>.html`. The hidden tests use fresh random inputs on every check.
   A written answer (a question answered in prose, such as a3's `adam_why`) has no hidden
   test: it is listed as not auto-graded, its points beside the score; in a course a person
   grades it, and here you compare yours with the model answer once you have written it.

The solutions are in the repository (`assignments/source/`, and `.grader/` here holds the
grading copy): look there only after your own attempt.
"""


def _nbgrader(grader: Path, *args: str) -> subprocess.CompletedProcess[str]:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("COURSE_DB_URL", None)  # the learner's gradebook, never a course's
    return subprocess.run(
        [str(bin_dir / "nbgrader"), *args], cwd=grader, env=env, text=True, capture_output=True
    )


def release(into: Path) -> list[Path]:
    """The student notebooks into ``into/<assignment>/``; returns the ones written now."""
    grader = into / GRADER
    (grader / "source").mkdir(parents=True, exist_ok=True)
    config = CONFIG.format(course=str(COURSE / "nbgrader_config.py"))
    (grader / "nbgrader_config.py").write_text(config, encoding="utf-8")
    stale = []
    for script in scripts(COURSE):
        name = script.stem
        notebook = grader / "source" / name / f"{name}.ipynb"
        released = grader / "release" / name / f"{name}.ipynb"
        text = render(script)
        if not notebook.exists() or notebook.read_text(encoding="utf-8") != text:
            notebook.parent.mkdir(parents=True, exist_ok=True)
            notebook.write_text(text, encoding="utf-8")
            stale.append(name)
        elif not released.exists():
            stale.append(name)
    if stale:  # one nbgrader start for all of them (each start costs seconds)
        run = _nbgrader(grader, "generate_assignment", "*", "--force")
        if run.returncode != 0:
            raise SystemExit(f"nbgrader generate_assignment failed:\n{run.stdout}{run.stderr}")
    written = []
    for script in scripts(COURSE):
        name = script.stem
        target = into / name / f"{name}.ipynb"
        if target.exists() or target.is_symlink():
            continue
        renamed = [p for p in learners_notebooks(into, name) if p != target]
        if renamed:  # the learner's work under another name: no second copy beside it
            mine = ", ".join(str(p.relative_to(into)) for p in renamed)
            print(f"{name}: your notebook is {mine} (renamed): no fresh copy written beside it. "
                  f"`make homework-check` grades it as it is; to start over, delete it and run "
                  f"`make homework` again")  # fmt: skip
            continue
        nb = json.loads((grader / "release" / name / f"{name}.ipynb").read_text("utf-8"))
        nb["metadata"]["kernelspec"] = dict(KERNELSPEC)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(target)
    folder = "" if into == ROOT / "homework" else f" HOMEWORK={into}"
    text = INSTRUCTIONS.format(root=ROOT, folder=folder)
    (into / "README.md").write_text(text, encoding="utf-8")
    return written


def find_assignment(into: Path, name: str) -> str:
    names = [s.stem for s in scripts(COURSE)]
    matches = [n for n in names if n == name or n.split("_")[0] == name]
    if len(matches) != 1:
        raise SystemExit(
            f"homework-check: expected one of {', '.join(names)} (or a1, a1b, a2, a2b, a2c, a3 ... a9), got {name!r}"
        )
    return matches[0]


def _graded_cells(path: Path) -> dict[str, dict]:
    """``grade_id -> cell`` of every nbgrader cell of a notebook, in order ({} if unreadable)."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    out: dict[str, dict] = {}
    for cell in cells if isinstance(cells, list) else []:
        meta = cell.get("metadata", {}).get("nbgrader") if isinstance(cell, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
            out.setdefault(meta["grade_id"], cell)
    return out


def _released(assignment: str) -> Path:
    return Path(GRADER) / "release" / assignment / f"{assignment}.ipynb"


def learners_notebooks(into: Path, assignment: str) -> list[Path]:
    """The learner's notebooks of ``assignment``: its own name first, else any notebook in the
    learner's folder (not the grader's, not checkpoints) holding the assignment's graded cells."""
    own = into / assignment / f"{assignment}.ipynb"
    if own.is_file() and not own.is_symlink():
        return [own]
    ids = {k for k, c in _graded_cells(into / _released(assignment)).items()
           if c["metadata"]["nbgrader"].get("grade")}  # fmt: skip
    found = []
    for path in sorted(into.rglob("*.ipynb")):
        parts = path.relative_to(into).parts
        if parts[0] in (GRADER, "feedback") or ".ipynb_checkpoints" in parts:
            continue
        if path.is_file() and not path.is_symlink() and ids and ids <= set(_graded_cells(path)):
            found.append(path)
    return found


def _source(cell: dict) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def locked_cell_changes(mine: Path, released: Path) -> list[str]:
    """Each locked cell of the release (tests, instructions) missing or edited in ``mine``."""
    theirs, ours = _graded_cells(released), _graded_cells(mine)
    changes = []
    for grade_id, cell in theirs.items():
        if not cell["metadata"]["nbgrader"].get("locked"):
            continue
        if grade_id not in ours:
            changes.append(f"`{grade_id}` was deleted")
        elif _source(ours[grade_id]).strip() != _source(cell).strip():
            changes.append(f"`{grade_id}` was edited")
    return changes


def attempted_items(mine: Path, released: Path) -> dict[str, list[str]]:
    """``grade_id -> hints`` of each test cell of the release that carries hints and whose
    answer cell just above it is no longer as released in ``mine`` (an item not started counts
    no failed attempt). The hints are read from the release, never from the learner's copy."""
    try:
        cells = json.loads(released.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    ours = _graded_cells(mine)
    out: dict[str, list[str]] = {}
    answer: dict | None = None
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            answer = cell
        grade_id, written = hints.grade_id_of(cell), hints.hints_of(cell)
        if grade_id is None or not written or answer is None:
            continue
        mine_answer = ours.get(answer["metadata"]["nbgrader"]["grade_id"])
        if mine_answer is not None and _source(mine_answer).strip() != _source(answer).strip():
            out[grade_id] = written
    return out


def not_started(mine: Path, released: Path) -> bool:
    """Every answer cell of ``mine`` is as released (nothing written yet)."""
    theirs, ours = _graded_cells(released), _graded_cells(mine)
    answers = [k for k, c in theirs.items() if c["metadata"]["nbgrader"].get("solution")]
    return bool(answers) and all(
        k in ours and _source(ours[k]).strip() == _source(theirs[k]).strip() for k in answers
    )


def check(into: Path, name: str) -> int:
    """Grade the learner's notebook of one assignment with the hidden tests and print the
    scores (0: graded, whatever the score, or not started; grading that could not run, or a
    notebook with a locked cell changed, raises SystemExit with the reason)."""
    assignment = find_assignment(into, name)
    grader = into / GRADER
    if not (grader / "release" / assignment).is_dir():
        release(into)
    expected = into / assignment / f"{assignment}.ipynb"
    found = learners_notebooks(into, assignment)
    if not found:
        raise SystemExit(
            f"homework-check: expected your notebook at {expected} (a regular file), and no "
            f"other notebook in {into} holds {assignment}'s cells; run `make homework` for a "
            "fresh copy"
        )
    if len(found) > 1:
        listed = "\n".join(f"  {p}" for p in found)
        raise SystemExit(f"homework-check: {len(found)} notebooks hold {assignment}'s cells:\n"
                         f"{listed}\nkeep one (rename it {expected.name}), then check again")  # fmt: skip
    mine = found[0]
    if mine != expected:
        print(f"your {assignment} is {mine} (renamed; the course would expect {expected.name})")
    released = into / _released(assignment)
    changes = locked_cell_changes(mine, released)
    if changes:
        raise SystemExit(
            f"homework-check: not graded: in {mine.name}, the locked cell(s) "
            f"{'; '.join(changes)}. Locked cells hold the tests and the instructions: the grader "
            "puts them back as released, so an edit there never counts (and a deleted test cell "
            "would score zero). Undo the change (Edit > Undo, or copy the cell from "
            f"{released}), then check again"
        )
    tests = [(k, float(c["metadata"]["nbgrader"].get("points", 0)))
             for k, c in _graded_cells(released).items()
             if c["metadata"]["nbgrader"].get("grade") and not c["metadata"]["nbgrader"].get("solution")]  # fmt: skip
    if not_started(mine, released):
        for grade_id, points in tests:
            print(f"  ----  {grade_id:32s} 0 / {points:g}")
        print(f"{assignment}: 0 / {sum(p for _, p in tests):g} points: not started (every "
              "answer cell is as released). Write your code where it says `# YOUR CODE HERE`, "
              "save, and check again")  # fmt: skip
        return 0
    submitted = grader / "submitted" / STUDENT / assignment
    shutil.rmtree(submitted, ignore_errors=True)
    submitted.mkdir(parents=True)
    shutil.copyfile(mine, submitted / expected.name)
    env = dict(os.environ)
    if not os.path.exists(BWRAP):
        print(
            f"homework-check: no bubblewrap ({BWRAP}): your notebook is graded outside the "
            "sandbox, as you, as it runs in your lab (the course's graders always sandbox it; "
            "`apt-get install bubblewrap` to do the same)"
        )
        env.update(NO_SANDBOX)
    print(f"grading {mine} with the hidden tests ...", flush=True)
    # The sandbox sees the environment at its real path: .venv reached through a link (a linked
    # checkout) is not there.
    python = Path(os.path.realpath(sys.prefix)) / "bin" / Path(sys.executable).name
    run = subprocess.run(
        [str(python), "-m", "torchlight_grader.course.manage", "grade", str(grader),
         "--assignment", assignment],
        env=env, text=True, capture_output=True,
    )  # fmt: skip
    rows = []
    items = grader / "items.csv"
    if items.exists():
        with open(items, newline="", encoding="utf-8") as f:
            rows = [
                r for r in csv.DictReader(f)
                if r["student_id"] == STUDENT and r["assignment"] == assignment
            ]  # fmt: skip
    page = grader / "feedback" / STUDENT / assignment / f"{assignment}.html"
    if run.returncode != 0 or not rows or not page.exists():
        print(run.stdout[-4000:] + run.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"homework-check: grading {assignment} failed (the output is above)")
    feedback = into / "feedback" / f"{assignment}.html"
    feedback.parent.mkdir(exist_ok=True)
    shutil.copyfile(page, feedback)
    cells = _graded_cells(released)
    order = {grade_id: i for i, grade_id in enumerate(cells)}
    rows.sort(key=lambda r: order.get(r["grade_id"], len(order)))  # the notebook's order
    auto = {grade_id for grade_id, _ in tests}
    written_answers = {grade_id for grade_id in cells if grade_id not in auto}  # (no hidden test)
    by_hand = [r for r in rows if r["grade_id"] in written_answers]
    rows = [r for r in rows if r["grade_id"] not in written_answers]
    score = sum(float(r["score"]) for r in rows)
    total = sum(float(r["max_score"]) for r in rows)
    started = attempted_items(mine, released)
    for r in rows:
        ok = float(r["score"]) == float(r["max_score"])
        print(
            f"  {'pass' if ok else 'FAIL'}  {r['grade_id']:32s} {float(r['score']):g} / {float(r['max_score']):g}"
        )
        written = started.get(r["grade_id"], [])
        if not ok and written:  # a failed attempt: unlock the next hint (issue 40)
            shown = hints.failed_attempt(mine.parent, r["grade_id"], written)
            print(hints.format_hints(shown, len(written), indent="        "))
    for r in by_hand:  # a written answer: a person grades it in a course, no hidden test
        answered = r.get("needs_manual_grade") == "yes"
        what = "answered" if answered else "not answered yet (the cell is as released)"
        print(f"  ----  {r['grade_id']:32s} ? / {float(r['max_score']):g}  written answer, "
              f"{what}: not auto-graded (in a course, a person grades it)")  # fmt: skip
    extra = sum(float(r["max_score"]) for r in by_hand)
    beside = (
        f" (auto-graded; {extra:g} more for written answers, not auto-graded)" if by_hand else ""
    )
    print(f"{assignment}: {score:g} / {total:g} points{beside}")
    print(f"feedback (each test's message): {feedback}")
    if score < total:
        print(
            "some hidden tests failed: read their messages in the feedback page, fix, save, check again"
        )
    else:
        print("every hidden test passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["release", "check"])
    parser.add_argument("assignment", nargs="?")
    parser.add_argument("--into", default=str(ROOT / "homework"), help="the learner's folder")
    args = parser.parse_args(argv)
    into = Path(args.into).resolve()
    if args.command == "check":
        if not args.assignment:
            parser.error("check needs an assignment: a1, a1b, a2, a2b, a2c, a3 ... a9")
        return check(into, args.assignment)
    written = release(into)
    for path in written:
        print(f"wrote {path}")
    print(f"your homework is in {into} (instructions: {into / 'README.md'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
