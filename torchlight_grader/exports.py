"""Every export of the course in one nbgrader command (each nbgrader start costs seconds).

Usage, from the course directory (``make course-grade`` runs it)::

    nbgrader export --exporter=torchlight_grader.exports.CourseExportPlugin --to=.

writes into the folder ``--to`` (default: the current one):

- ``grades.csv``: nbgrader's own CSV, one row per student and assignment (with
  ``raw_score``, ``late_submission_penalty`` and the final ``score``);
- ``items.csv``: one row per student and test cell (``torchlight_grader.export``);
- ``canvas.csv``: the Canvas gradebook import (``torchlight_grader.canvas``).

Each is exactly what its own plugin writes when run alone, and no cell of any of them starts
with ``= + - @``, tab or CR (``torchlight_grader.export.spreadsheet_safe``, OWASP's rule): a
student id is a folder name the student chose.
"""

from __future__ import annotations

import csv
import os

from nbgrader.api import Gradebook
from nbgrader.plugins import CsvExportPlugin, ExportPlugin

from torchlight_grader.canvas import CanvasCsvExportPlugin
from torchlight_grader.export import ItemCsvExportPlugin, safe_rows


class SafeCsvExportPlugin(CsvExportPlugin):
    """nbgrader's own ``grades.csv``, with no cell a spreadsheet runs as a formula."""

    def export(self, gradebook: Gradebook) -> None:
        super().export(gradebook)
        dest = self.to or "grades.csv"
        with open(dest, newline="", encoding="utf-8") as f:
            rows: list[list[object]] = list(csv.reader(f))
        with open(dest, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(safe_rows(rows))


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
        for name, plugin_class in FILES.items():
            plugin = plugin_class(parent=self)
            plugin.to = os.path.join(folder, name)
            plugin.student = self.student
            plugin.assignment = self.assignment
            plugin.export(gradebook)
