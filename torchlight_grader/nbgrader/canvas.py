"""An nbgrader export plugin that writes a gradebook CSV Canvas can import.

Usage, from the course directory (``make course-grade`` runs it)::

    nbgrader export --exporter=torchlight_grader.nbgrader.canvas.CanvasCsvExportPlugin --to=canvas.csv

Then in Canvas: Grades -> Import -> choose ``canvas.csv``. The layout is Canvas's own gradebook
export: the columns ``Student, ID, SIS User ID, SIS Login ID, Section``, one column per
assignment, a ``Points Possible`` row, then one row per student. Canvas matches students by
``ID`` (nbgrader's ``lms_user_id``, set by the roster import), else by ``SIS User ID`` (the
nbgrader student id).

Safe to import mid-term:

- only assignments with at least one graded submission get a column (an assignment not yet
  due is left out, so the import cannot overwrite what Canvas holds for it);
- a student with no submission for an exported assignment gets a *blank* cell, which Canvas
  reads as "no change" (a 0 would overwrite an excused or extended grade);
- ``c.CanvasCsvExportPlugin.columns`` maps a course assignment to its Canvas column, with the
  Canvas assignment id Canvas matches on (``{"a1_functions": "Homework 1 (48213)"}``); an
  assignment without a mapping keeps its nbgrader name, and Canvas creates a new column unless
  a title matches exactly;
- students without a Canvas ``ID`` are named in a warning that says why (not on the roster, an
  empty ``lms_user_id``, or a roster without that column: :func:`roster_problems`), at
  ``make course-roster`` and ``make course-collect`` already, when the problem first shows;
- a submission deleted from ``submitted/`` is blank, as a missing one;
- no cell starts with ``= + - @``, tab or CR (``torchlight_grader.nbgrader.spreadsheet.spreadsheet_safe``).

Scores are the final scores: late penalties already subtracted, each computed from the current
score (manual scores included) and the student's extension
(``torchlight_grader.nbgrader.standing.final_scores``; the Formgrader's averages are before
penalties).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Dict, Unicode

from torchlight_grader.nbgrader.spreadsheet import write_rows
from torchlight_grader.nbgrader.standing import final_scores

FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def number(x: float | None) -> str:
    """A score as Canvas reads it: ``9``, ``8.5``, ``7.333333`` (no float noise)."""
    value = round(float(x or 0.0), 6)
    return str(int(value)) if value == int(value) else f"{value:.6f}".rstrip("0")


class CanvasCsvExportPlugin(ExportPlugin):
    """Write the Canvas gradebook-import CSV: one row per student, one column per graded
    assignment (blank where a student has no submission)."""

    section = Unicode("", help="The value of the Section column (Canvas may leave it empty).").tag(
        config=True
    )

    columns = Dict(
        value_trait=Unicode(),
        key_trait=Unicode(),
        help="Course assignment -> Canvas column title with its Canvas assignment id, "
        'e.g. {"a1_functions": "Homework 1 (48213)"}.',
    ).tag(config=True)

    #: ``(assignment, student)`` still in ``submitted/`` (set by CourseExportPlugin); any other
    #: submission of the gradebook was deleted and is exported as missing.
    present: set[tuple[str, str]] | None = None

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "canvas.csv"
        only_students = {str(s) for s in self.student}
        only_assignments = {str(a) for a in self.assignment}
        assignments = [
            a
            for a in sorted(
                gradebook.assignments, key=lambda a: (a.duedate is None, a.duedate, a.name)
            )
            if (not only_assignments or a.name in only_assignments) and a.num_submissions > 0
        ]
        students = [
            s
            for s in sorted(gradebook.students, key=lambda s: s.id)
            if not only_students or s.id in only_students
        ]
        final = final_scores(self, gradebook)
        self.log.info("Exporting Canvas grades to %s", dest)
        rows: list[list[object]] = [
            [*FIXED, *(self.columns.get(a.name, a.name) for a in assignments)],
            ["    Points Possible", "", "", "", "", *(number(a.max_score) for a in assignments)],
        ]
        for student in students:
            name = ", ".join(p for p in (student.last_name, student.first_name) if p)
            row: list[object] = [name or student.id, student.lms_user_id or "", student.id,
                                 student.email or "", self.section]  # fmt: skip
            for assignment in assignments:
                try:
                    gradebook.find_submission(assignment.name, student.id)
                    if (
                        self.present is not None
                        and (assignment.name, student.id) not in self.present
                    ):
                        raise MissingEntry()  # deleted from submitted/: its grade is gone
                except MissingEntry:
                    row.append("")  # Canvas: no change
                    continue
                row.append(number(final[(assignment.name, student.id)][1]))
            rows.append(row)
        for problem in roster_problems(students):
            self.log.warning("canvas.csv: %s", problem)
        write_rows(dest, rows)


def roster_problems(students: Sequence[Any], only: set[str] | None = None) -> list[str]:
    """Why Canvas cannot match some of ``students`` (gradebook rows) by its own ID, each cause
    named as it is, with the students it concerns (``only``: just these ids, e.g. the students
    collect just took in; an id the gradebook lacks is not on the roster)."""
    known = {s.id: s for s in students}
    wanted = sorted(only) if only is not None else sorted(known)
    if not wanted:
        return []
    absent = [sid for sid in wanted if sid not in known]
    rows = [known[sid] for sid in wanted if sid in known]
    if rows and only is None and not any(s.lms_user_id for s in rows):
        return [
            "no student has a Canvas ID: the roster imported (`make course-roster`) has no "
            "lms_user_id column, or it is empty. Canvas can then only match students by SIS User "
            "ID (the student id); add the column (the Canvas user ID) and import the roster again"
        ]
    bare = [
        s.id for s in rows if not s.lms_user_id and not (s.first_name or s.last_name or s.email)
    ]
    named = [s.id for s in rows if not s.lms_user_id and (s.first_name or s.last_name or s.email)]
    out = []
    if absent or bare:
        who = [*absent, *bare]
        out.append(f"{len(who)} student(s) not on the roster (nbgrader knows them only from a "
                   "submission, or from a roster row with nothing but an id), so they have no "
                   "Canvas ID and Canvas can only match them by SIS User ID: " + ", ".join(who))  # fmt: skip
    if named:
        out.append(f"{len(named)} student(s) on the roster with an empty lms_user_id (the Canvas "
                   "user ID), so Canvas can only match them by SIS User ID: " + ", ".join(named))  # fmt: skip
    return out


def check_roster(db_url: str, only: set[str] | None = None) -> list[str]:
    """:func:`roster_problems` of a gradebook (at roster import, at collect)."""
    with Gradebook(db_url) as gb:
        return roster_problems(list(gb.students), only)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m torchlight_grader.nbgrader.canvas roster --course C``: the roster's problems
    for canvas.csv, at once (``make course-roster`` runs it after the import)."""
    import argparse
    import os
    from pathlib import Path

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("command", choices=["roster"])
    parser.add_argument("--course", type=Path, default=Path("assignments"))
    parser.add_argument("--db-url", default=os.environ.get("COURSE_DB_URL") or None)
    args = parser.parse_args(argv)
    db = args.db_url or f"sqlite:///{args.course.resolve() / 'gradebook.db'}"
    problems = check_roster(db)
    for problem in problems:
        print(f"WARNING canvas.csv: {problem}", file=sys.stderr)
    if not problems:
        print("roster: every student has a Canvas ID (lms_user_id)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
