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
- students without a Canvas ``ID`` (not on the roster) are listed in one warning;
- a submission deleted from ``submitted/`` is blank, as a missing one;
- no cell starts with ``= + - @``, tab or CR (``torchlight_grader.nbgrader.spreadsheet.spreadsheet_safe``).

Scores are the final scores: late penalties already subtracted, each computed from the current
score (manual scores included) and the student's extension
(``torchlight_grader.nbgrader.standing.final_scores``; the Formgrader's averages are before
penalties).
"""

from __future__ import annotations

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
        unmatched = [s.id for s in students if not s.lms_user_id]
        if unmatched:
            self.log.warning(
                "canvas.csv: %d student(s) have no Canvas ID (not on the roster; Canvas can only "
                "match them by SIS User ID): %s",
                len(unmatched),
                ", ".join(unmatched),
            )
        write_rows(dest, rows)
