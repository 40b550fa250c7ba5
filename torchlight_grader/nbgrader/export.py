"""An nbgrader export plugin with one row per graded item (nbgrader's own CSV has one per
assignment).

Usage, from the course directory::

    nbgrader export --exporter=torchlight_grader.nbgrader.export.ItemCsvExportPlugin --to=items.csv
"""

from __future__ import annotations

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin

from torchlight_grader.nbgrader.spreadsheet import write_rows

COLUMNS = ["assignment", "student_id", "notebook", "grade_id", "score", "max_score", "auto_score",
           "needs_manual_grade"]  # fmt: skip


class ItemCsvExportPlugin(ExportPlugin):
    """Write ``assignment, student_id, notebook, grade_id, score, max_score, auto_score,
    needs_manual_grade`` rows (the last ``yes`` for a cell awaiting a TA: a written answer not
    graded yet, whose score of 0 is no verdict).

    A student with no submission gets a row of zeros for every item, and so does a submission
    deleted from ``submitted/`` (``present``, set by ``CourseExportPlugin``).
    """

    present: set[tuple[str, str]] | None = None

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "items.csv"
        students = {str(s) for s in self.student}
        assignments = {str(a) for a in self.assignment}
        self.log.info("Exporting item grades to %s", dest)
        rows: list[list[object]] = [list(COLUMNS)]
        for assignment in gradebook.assignments:
            if assignments and assignment.name not in assignments:
                continue
            for student in gradebook.students:
                if students and student.id not in students:
                    continue
                gone = (
                    self.present is not None and (assignment.name, student.id) not in self.present
                )
                rows += self._rows(gradebook, assignment, student.id, gone)
        write_rows(dest, rows)

    @staticmethod
    def _rows(
        gradebook: Gradebook, assignment: object, student_id: str, gone: bool = False
    ) -> list[list[object]]:
        name = assignment.name  # type: ignore[attr-defined]
        try:
            if gone:
                raise MissingEntry()
            submission = gradebook.find_submission(name, student_id)
        except MissingEntry:
            return [
                [name, student_id, nb.name, cell.name, 0.0, cell.max_score, "", ""]
                for nb in assignment.notebooks  # type: ignore[attr-defined]
                for cell in nb.grade_cells
            ]
        rows = []
        for nb in submission.notebooks:
            for grade in sorted(nb.grades, key=lambda g: g.name):
                auto = "" if grade.auto_score is None else grade.auto_score
                waiting = "yes" if grade.needs_manual_grade else ""
                rows.append([name, student_id, nb.name, grade.name, grade.score, grade.max_score,
                             auto, waiting])  # fmt: skip
        return rows
