"""Build the nbgrader course's notebooks from their reviewable text sources.

Each assignment's source of truth is a jupytext "percent" script,
``assignments/source/<assignment>/<assignment>.py``, whose cell headers carry the nbgrader
metadata (``# %% nbgrader={...}``). nbgrader works on ``.ipynb`` files, so this tool writes
``assignments/source/<assignment>/<assignment>.ipynb`` next to each script (without outputs:
nbgrader clears them anyway). The course's ``nbgrader_config.py`` tells nbgrader to ignore the
``.py`` scripts, so they (and their solutions) never reach the release.

It also runs the grading steps serially: ``grade`` runs nbgrader's autograde,
generate_feedback and both exports one after the other, in one process
(``torchlight_grader/course/batch.py``), *always all four*: one broken submission (truncated JSON, a
symlink) costs only that student, and the failures are listed at the end (exit status 1).
``make course-grade`` runs ``torchlight_grader/course/grade.py``, which grades students concurrently.

Usage::

    .venv/bin/python torchlight_grader/course/manage.py build [COURSE_DIR]     # write the .ipynb files
    .venv/bin/python torchlight_grader/course/manage.py check [COURSE_DIR]     # exit 1 if one is out of date
    .venv/bin/python torchlight_grader/course/manage.py grade [COURSE_DIR] [--assignment A] [-- NBGRADER_ARGS]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def scripts(course: Path) -> list[Path]:
    """The jupytext sources: ``source/<a>/<a>.py`` for every assignment ``<a>``."""
    return sorted(p for p in (course / "source").glob("*/*.py") if p.stem == p.parent.name)


def render(script: Path) -> str:
    """The ``.ipynb`` text for one script (deterministic, so ``check`` can compare)."""
    import jupytext  # here, not at the top: the grading commands never need it (0.5 s)

    nb = jupytext.read(script, fmt="py:percent")
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        cell.pop("id", None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.nbformat, nb.nbformat_minor = 4, 4
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def build(course: Path, check_only: bool) -> int:
    stale = []
    for script in scripts(course):
        target = script.with_suffix(".ipynb")
        text = render(script)
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        stale.append(target)
        if not check_only:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target.relative_to(course)}")
    if check_only and stale:
        print("out of date: " + ", ".join(str(p) for p in stale), file=sys.stderr)
        return 1
    return 0


FAILED = re.compile(r"There was an error processing assignment '([^']*)' for student '([^']*)'")
EXPORTER = "torchlight_grader.nbgrader.export.ItemCsvExportPlugin"


def gradebook_snapshot(course: Path, db_url: str | None = None) -> dict[tuple[str, ...], object]:
    """What only the instructor (``generate_assignment``, the formgrader) may change: every
    source cell (source, checksum, locked), every test cell's points, every manual score.

    ``db_url``: another gradebook than the course's ``gradebook.db`` (e.g. PostgreSQL)."""
    from nbgrader.api import Gradebook, MissingEntry

    snapshot: dict[tuple[str, ...], object] = {}
    db = course / "gradebook.db"
    if db_url is None and not db.exists():
        return snapshot
    with Gradebook(db_url or f"sqlite:///{db}") as gb:
        for assignment in gb.assignments:
            for nb in assignment.notebooks:
                key = (assignment.name, nb.name)
                for cell in nb.source_cells:
                    value = (cell.source, cell.checksum, cell.locked, cell.cell_type)
                    snapshot[("source cell", *key, cell.name)] = value
                for cell in nb.grade_cells:
                    snapshot[("points", *key, cell.name)] = float(cell.max_score)
            for student in gb.students:
                try:
                    submission = gb.find_submission(assignment.name, student.id)
                except MissingEntry:
                    continue
                for snb in submission.notebooks:
                    for g in snb.grades:
                        snapshot[
                            ("manual score", student.id, assignment.name, snb.name, g.name)
                        ] = g.manual_score
    return snapshot


def gradebook_changes(before: dict, after: dict) -> list[str]:
    """Changes autograde never makes: any change to a source cell, to points or to a manual
    score (new submissions start without one)."""
    changes = []
    for key in sorted(before.keys() | after.keys(), key=str):
        kind = key[0]
        if kind == "manual score" and before.get(key) is None and after.get(key) is None:
            continue
        if before.get(key) != after.get(key):
            changes.append(
                f"{kind} {'/'.join(key[1:])}: {before.get(key)!r:.80} -> {after.get(key)!r:.80}"
            )
    return changes


#: ``integrity.csv``'s three sections, in this order: what a student did to the notebook or the
#: exchange (review these); what the instructor changed since the release a submission was made
#: from (a test cell's points or source: one row per change for the class, with the number of
#: submissions, never a finding against a student); answers whose in-kernel run and isolated
#: check disagree (the isolated grade counts; nearly always an ordinary wrong answer that passes
#: the visible test but not the hidden inputs, listed so that a high count on one item shows up).
INTEGRITY_SECTIONS = ("tampering", "instructor", "answers")


def integrity_report(course: Path) -> Path:
    """``integrity.csv``, in three sections (column ``section``, :data:`INTEGRITY_SECTIONS`):

    - ``tampering``: per student and notebook, what the grader found and undid or flagged
      (refused files, edited or deleted locked/test cells, changed metadata, a backward that
      uses the library's own autograd or Functions);
    - ``instructor``: each change the instructor made to a cell since a release students
      handed in (``torchlight_grader.nbgrader.releases``), once, with how many submissions were
      made from the earlier release (the grade uses the current release);
    - ``answers``: each test cell whose in-kernel score differs from its isolated grade, with
      the in-kernel error where there was one (a speed item's "could not time fairly: ..." says
      the machine was too busy for the notebook's own timing, not that the answer is wrong).

    Prints one summary line per section."""
    from torchlight_grader.nbgrader.spreadsheet import write_rows

    path = course / "integrity.csv"
    rows: dict[str, list[list[str]]] = {section: [] for section in INTEGRITY_SECTIONS}
    earlier: dict[tuple[str, str, str], list[str]] = {}
    for nb_path in sorted((course / "autograded").glob("*/*/*.ipynb")):
        student, assignment = nb_path.parts[-3], nb_path.parts[-2]
        where = [student, assignment, nb_path.stem]
        nb = nbformat.read(nb_path, as_version=4)
        report = nb.metadata.get("torchlight", {})
        for finding in [*report.get("refused", []), *report.get("findings", [])]:
            rows["tampering"].append([*where, finding])
        for change in report.get("release", []):
            earlier.setdefault((assignment, nb_path.stem, str(change)), []).append(student)
        for cell in nb.cells:
            mark = cell.metadata.get("torchlight")
            if isinstance(mark, dict) and bool(mark.get("kernel_score")) != bool(
                mark.get("passed")
            ):
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                verdict = "passed" if mark.get("passed") else "failed"
                finding = (f"test cell {grade_id}: in-kernel score {mark.get('kernel_score')}, "
                           f"isolated check {verdict} (the isolated grade counts)")  # fmt: skip
                if mark.get("kernel_error"):  # (its first line)
                    finding += f"; in the kernel: {str(mark['kernel_error']).splitlines()[0]}"
                rows["answers"].append([*where, finding])
    for (assignment, notebook, change), students in sorted(earlier.items()):
        rows["instructor"].append(
            [f"({len(students)} submissions)", assignment, notebook,
             f"{change}: the instructor's change since the release these submissions were made "
             "from (graded with the current release; not tampering)"]
        )  # fmt: skip
    head = ["section", "student", "assignment", "notebook", "finding"]
    write_rows(path, [head, *([s, *row] for s in INTEGRITY_SECTIONS for row in rows[s])])
    tampering, answers = rows["tampering"], rows["answers"]
    print(f"integrity: {len(tampering)} tampering findings ({len({r[0] for r in tampering})} "
          f"students: review them), {len(rows['instructor'])} changes of the instructor's since "
          f"a release ({sum(len(v) for v in earlier.values())} submissions from an earlier "
          f"release: not tampering), {len(answers)} answers whose in-kernel and isolated results "
          f"differ ({len({r[0] for r in answers})} students: usually ordinary wrong answers)")  # fmt: skip
    return path


def grade(course: Path, assignment: str = "*", extra: list[str] | None = None) -> int:
    """autograde, generate_feedback, grades.csv, items.csv: all four steps, failures at the end.

    After the steps the gradebook is checked against a snapshot taken before them: a change the
    grader did not make fails loudly, naming the student or the cell.
    """
    from torchlight_grader.course.batch import Worker
    from torchlight_grader.nbgrader.preflight import CourseConfigError, check_config

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    steps = [
        ("autograde", ["autograde", assignment, "--force", *(extra or [])]),
        ("feedback", ["generate_feedback", assignment, "--force"]),
        ("export", ["export", "--to=grades.csv"]),
        ("export_items", ["export", f"--exporter={EXPORTER}", "--to=items.csv"]),
    ]
    failures: list[str] = []
    worker = Worker(course, env).start()  # imports nbgrader while the config is checked
    try:
        try:
            check_config(course)  # nbgrader itself would go on with its unsandboxed defaults
        except CourseConfigError as exc:
            print(f"refusing to grade: {exc}", file=sys.stderr)
            return 1
        before = gradebook_snapshot(course)
        notebooks = sum(1 for nb in (course / "submitted").glob(f"*/{assignment}/*.ipynb"))
        runs = worker.do([args for _, args in steps], notebooks)
    finally:
        worker.close()
    for (name, _), run in zip(steps, runs, strict=True):
        sys.stdout.write(run.output)
        print(f"step {name}: {run.seconds:.1f} s (exit {run.returncode})")
        if run.returncode != 0:
            found = FAILED.findall(run.output)
            failures += [f"{name}: {a} of student {s}" for a, s in found] or [f"{name} failed"]
    failures += [
        f"gradebook changed outside the grader: {c}"
        for c in gradebook_changes(before, gradebook_snapshot(course))
    ]
    print(f"integrity report: {integrity_report(course)}")
    if failures:
        print(f"grading finished with {len(failures)} failure(s):", file=sys.stderr)
        for failure in failures:
            print(f"  FAILED {failure}", file=sys.stderr)
        return 1
    print(f"grades: {course}/grades.csv (per assignment), {course}/items.csv (per test cell)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "check", "grade"])
    parser.add_argument("course", nargs="?", default=str(ROOT / "assignments"))
    parser.add_argument("--assignment", default="*")
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []  # for nbgrader autograde
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.command == "grade":
        return grade(Path(args.course), args.assignment, extra)
    return build(Path(args.course), check_only=args.command == "check")


if __name__ == "__main__":
    sys.exit(main())
