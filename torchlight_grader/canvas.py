"""An nbgrader export plugin that writes a gradebook CSV Canvas can import.

Usage, from the course directory (``make course-grade`` runs it)::

    nbgrader export --exporter=torchlight_grader.canvas.CanvasCsvExportPlugin --to=canvas.csv

Then in Canvas: Grades -> Import -> choose ``canvas.csv``. The layout is Canvas's own gradebook
export: the columns ``Student, ID, SIS User ID, SIS Login ID, Section``, one column per
assignment, a ``Points Possible`` row, then one row per student. Canvas matches students by
``ID`` (nbgrader's ``lms_user_id``, set by the roster import), else by ``SIS User ID`` (the
nbgrader student id). A column whose title matches no Canvas assignment becomes a new one.
Scores are the final scores: late penalties already subtracted; a student with no submission
gets 0, as in nbgrader's own ``grades.csv``.
"""

from __future__ import annotations

import csv

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Unicode

FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def number(x: float | None) -> str:
    """A score as Canvas reads it: ``9``, ``8.5``, ``7.333333`` (no float noise)."""
    value = round(float(x or 0.0), 6)
    return str(int(value)) if value == int(value) else f"{value:.6f}".rstrip("0")


class CanvasCsvExportPlugin(ExportPlugin):
    """Write the Canvas gradebook-import CSV: one row per student, one column per assignment."""

    section = Unicode("", help="The value of the Section column (Canvas may leave it empty).").tag(
        config=True
    )

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "canvas.csv"
        only_students = {str(s) for s in self.student}
        only_assignments = {str(a) for a in self.assignment}
        assignments = [
            a
            for a in sorted(
                gradebook.assignments, key=lambda a: (a.duedate is None, a.duedate, a.name)
            )
            if not only_assignments or a.name in only_assignments
        ]
        students = [
            s
            for s in sorted(gradebook.students, key=lambda s: s.id)
            if not only_students or s.id in only_students
        ]
        self.log.info("Exporting Canvas grades to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(FIXED + [a.name for a in assignments])
            writer.writerow(
                ["    Points Possible", "", "", "", ""] + [number(a.max_score) for a in assignments]
            )
            for student in students:
                name = ", ".join(p for p in (student.last_name, student.first_name) if p)
                row = [name or student.id, student.lms_user_id or "", student.id,
                       student.email or "", self.section]  # fmt: skip
                for assignment in assignments:
                    try:
                        sub = gradebook.find_submission(assignment.name, student.id)
                        score = max(0.0, sub.score - (sub.late_submission_penalty or 0.0))
                    except MissingEntry:
                        score = 0.0
                    row.append(number(score))
                writer.writerow(row)
