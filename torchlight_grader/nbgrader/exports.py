"""Every export of the course in one nbgrader command (each nbgrader start costs seconds).

Usage, from the course directory (``make course-grade`` runs it)::

    nbgrader export --exporter=torchlight_grader.nbgrader.exports.CourseExportPlugin --to=.

writes into the folder ``--to`` (default: the current one):

- ``grades.csv``: nbgrader's own CSV, one row per student and assignment (with
  ``raw_score``, ``late_submission_penalty`` and the final ``score``);
- ``items.csv``: one row per student and test cell (``torchlight_grader.nbgrader.export``);
- ``canvas.csv``: the Canvas gradebook import (``torchlight_grader.nbgrader.canvas``).

Scores are final scores with the late penalty of the **current** score (manual scores and extra
credit included) and the student's extension (``torchlight_grader.nbgrader.standing``), never
the penalty nbgrader stored at autograde: the exported score does not depend on whether a
regrade ran since the last manual grade.

Each is exactly what its own plugin writes when run alone, and no cell of any of them starts
with ``= + - @``, tab or CR (``torchlight_grader.nbgrader.spreadsheet.spreadsheet_safe``, OWASP's rule): a
student id is a folder name the student chose.
"""

from __future__ import annotations

import csv
import os
from typing import Any

from nbgrader.api import Gradebook
from nbgrader.plugins import CsvExportPlugin, ExportPlugin

from torchlight_grader.nbgrader.canvas import CanvasCsvExportPlugin
from torchlight_grader.nbgrader.export import ItemCsvExportPlugin
from torchlight_grader.nbgrader.spreadsheet import write_rows
from torchlight_grader.nbgrader.standing import final_scores


def submitted(parent: object) -> set[tuple[str, str]] | None:
    """``(assignment, student)`` for each folder ``submitted/<student>/<assignment>/`` of the
    course of ``parent`` (nbgrader's export app); None when there is no such course folder.

    A submission deleted from ``submitted/`` stays in the gradebook; the exports treat it as
    missing, so its old grade does not reach Canvas.
    """
    root = getattr(getattr(parent, "coursedir", None), "root", None)
    folder = os.path.join(root, "submitted") if isinstance(root, str) else None
    if folder is None or not os.path.isdir(folder):
        return None
    return {
        (assignment, student)
        for student in os.listdir(folder)
        if os.path.isdir(os.path.join(folder, student))
        for assignment in os.listdir(os.path.join(folder, student))
        if os.path.isdir(os.path.join(folder, student, assignment))
    }


class SafeCsvExportPlugin(CsvExportPlugin):
    """nbgrader's own ``grades.csv``, with no cell a spreadsheet runs as a formula, a submission
    deleted from ``submitted/`` written as nbgrader writes a missing one, and the late penalty
    of the current score."""

    present: set[tuple[str, str]] | None = None

    def export(self, gradebook: Gradebook) -> None:
        super().export(gradebook)
        dest = self.to or "grades.csv"
        with open(dest, newline="", encoding="utf-8") as f:
            rows: list[list[object]] = [list(r) for r in csv.reader(f)]
        if rows:
            head = [str(h) for h in rows[0]]
            at = {name: head.index(name) for name in head}
            final = final_scores(self, gradebook)
            # (nbgrader writes its rows unquoted: an id with a comma or a newline breaks its row,
            # which is then left as it is.)
            for row in (r for r in rows[1:] if len(r) == len(head)):
                unit = (row[at["assignment"]], row[at["student_id"]])
                if unit in final and row[at["timestamp"]]:
                    penalty, score = final[unit]
                    row[at["late_submission_penalty"]], row[at["score"]] = str(penalty), str(score)
                if self.present is not None and unit not in self.present:
                    row[at["timestamp"]] = ""
                    for name in ("raw_score", "late_submission_penalty", "score"):
                        row[at[name]] = "0.0"
        write_rows(dest, rows)


FILES = {
    "grades.csv": SafeCsvExportPlugin,
    "items.csv": ItemCsvExportPlugin,
    "canvas.csv": CanvasCsvExportPlugin,
}


class CourseExportPlugin(ExportPlugin):
    """Run nbgrader's CSV export, the per-item export and the Canvas export, into one folder."""

    def export(self, gradebook: Gradebook) -> None:
        folder = self.to or "."
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise ValueError(
                f"CourseExportPlugin writes three files into a folder: expected --to=FOLDER, "
                f"got the file {folder!r}"
            )
        os.makedirs(folder, exist_ok=True)
        present = submitted(self.parent)
        for name, plugin_class in FILES.items():
            plugin: Any = plugin_class(parent=self)
            plugin.present = present
            plugin.to = os.path.join(folder, name)
            plugin.student = self.student
            plugin.assignment = self.assignment
            plugin.export(gradebook)
