"""The course's late-submission policy, as an nbgrader ``LateSubmissionPlugin``.

``nbgrader_config.py`` selects it::

    c.AssignLatePenalties.plugin_class = "torchlight_grader.nbgrader.late.PercentPerDayLate"
    c.PercentPerDayLate.percent_per_day = 10.0

nbgrader's ``AssignLatePenalties`` preprocessor calls it once per notebook of a submission whose
timestamp (``timestamp.txt``, written by ``nbgrader submit``/``collect``) is after the
assignment's due date (``nbgrader db assignment add NAME --duedate=...``), and stores the penalty
in the gradebook: ``grades.csv`` shows ``raw_score``, ``late_submission_penalty`` and the final
``score``.

**The submission time is the instructor's side's, never the student's.** ``nbgrader submit``
writes ``timestamp.txt`` and the inbound folder's name on the student's side, and the student can
rewrite both (and every file's mtime) afterwards. The course's collect step
(``torchlight_grader.nbgrader.collect``, ``make course-collect``) ignores them and writes into the collected
``submitted/<s>/<a>/timestamp.txt`` the time from :func:`observed_submission_time`: the latest
inode change time (``st_ctime``) of the inbound entry and of every file in it, as the instructor's
user sees them, and never later than the first time collect saw the same content. The kernel sets
``st_ctime`` to its own clock on every change (write, rename, chmod, ``utime``): a student can
make it later (which only costs them), never earlier, short of changing the machine's clock.

**Per-student extensions** (``make course-extensions EXTENSIONS=extensions.csv``): a CSV beside
the roster, ``student_id,assignment,extension`` with durations such as ``2 days``, ``36 hours``,
``1 day 12 hours``, ``90 minutes`` (``0`` removes one). :func:`import_extensions` checks every
row (a known student id's shape, a known assignment, a duration) and only then writes the
course's copy, ``<course>/extensions.csv``; a bad row changes nothing. The student's due date is
the assignment's plus the extension: collect reports against it, and the penalty is computed
with it wherever a score is exported or shown (``torchlight_grader.nbgrader.standing``).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

from torchlight_grader.nbgrader.ids import is_safe_student_id
from torchlight_grader.nbgrader.spreadsheet import write_rows

DAY = 24 * 3600
#: The course's copy of the extensions (written by :func:`import_extensions`).
EXTENSIONS = "extensions.csv"
EXTENSION_COLUMNS = ["student_id", "assignment", "extension"]
_UNITS = {"w": 7 * DAY, "d": DAY, "h": 3600, "m": 60}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(weeks?|w|days?|d|hours?|h|minutes?|mins?|m)\s*,?", re.I)


def parse_extension(text: str) -> timedelta:
    """``2 days``, ``36 hours``, ``1 day 12 hours``, ``90 min``, ``3d``, ``0`` -> a timedelta.

    Example:
        >>> parse_extension("1 day 12 hours")
        datetime.timedelta(days=1, seconds=43200)
    """
    text = text.strip()
    if re.fullmatch(r"0+(\.0*)?", text):
        return timedelta(0)
    seconds, at = 0.0, 0
    for part in _PART.finditer(text):
        if part.start() != at:
            break
        seconds += float(part[1]) * _UNITS[part[2][0].lower()]
        at = part.end()
    if not text or at != len(text):
        raise ValueError(
            f"expected an extension such as '2 days', '36 hours', '1 day 12 hours' or '90 "
            f"minutes', got {text!r}"
        )
    return timedelta(seconds=seconds)


def read_extensions(path: Path) -> dict[tuple[str, str], timedelta]:
    """The extensions of a course's ``extensions.csv``: ``(student, assignment) -> timedelta``
    (none when the file does not exist). A row that does not parse raises ``ValueError`` naming
    the file and the row."""
    if not path.is_file():
        return {}
    out = {}
    with open(path, newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f), start=2):
            try:
                extension = parse_extension(row.get("extension") or "")
            except ValueError as exc:
                raise ValueError(f"{path}, row {n}: {exc}") from None
            if extension:
                out[(row.get("student_id") or "", row.get("assignment") or "")] = extension
    return out


def format_extension(extension: timedelta) -> str:
    """``2 days``, ``1 day 12 hours``, ``90 minutes``: how the report and the page say it."""
    seconds = int(extension.total_seconds())
    days, rest = divmod(seconds, DAY)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = [f"{n} {unit}{'s' if n != 1 else ''}"
             for n, unit in ((days, "day"), (hours, "hour"), (minutes, "minute")) if n]  # fmt: skip
    return " ".join(parts) or "0"


def import_extensions(source: Path, course: Path) -> dict[tuple[str, str], timedelta]:
    """Check the instructor's extensions CSV and write the course's copy (``course/extensions.csv``)
    only if every row is right; raise ``ValueError`` naming each bad row otherwise."""
    assignments = sorted(p.name for p in (course / "source").iterdir() if p.is_dir())
    with open(source, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        head = reader.fieldnames or []
        if not set(EXTENSION_COLUMNS) <= set(head):
            raise ValueError(f"{source}: expected the columns {', '.join(EXTENSION_COLUMNS)}, "
                             f"got {', '.join(head) or 'none'}")  # fmt: skip
        rows, errors = [], []
        for n, row in enumerate(reader, start=2):
            student, assignment = row["student_id"] or "", row["assignment"] or ""
            try:
                if not is_safe_student_id(student):
                    raise ValueError(f"{student!r} is not a student id")
                if assignment not in assignments:
                    raise ValueError(f"no assignment {assignment!r} (expected one of "
                                     f"{', '.join(assignments)})")  # fmt: skip
                extension = parse_extension(row["extension"] or "")
            except ValueError as exc:
                errors.append(f"  row {n}: {exc}")
                continue
            rows.append([student, assignment, format_extension(extension)])
    if errors:
        raise ValueError(f"{source}: nothing imported, fix these rows:\n" + "\n".join(errors))
    tmp = course / f".{EXTENSIONS}.tmp"
    write_rows(tmp, [EXTENSION_COLUMNS, *rows])
    os.replace(tmp, course / EXTENSIONS)
    return read_extensions(course / EXTENSIONS)


def observed_submission_time(entry: Path, names: list[str]) -> datetime:
    """When the instructor's side saw the inbound ``entry`` (and the files ``names`` in it)
    last change: the largest ``st_ctime``, links never followed, in UTC."""
    times = [os.lstat(entry).st_ctime]
    times += [os.stat(name, dir_fd=None, follow_symlinks=False).st_ctime
              for name in (str(entry / n) for n in names)]  # fmt: skip
    return datetime.fromtimestamp(max(times), tz=UTC)


def format_timestamp(when: datetime) -> str:
    """``timestamp.txt``'s format, in UTC (``2026-01-15 12:00:00.000000 UTC``)."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


class PercentPerDayLate(LateSubmissionPlugin):
    """Penalty = score * min(1, percent_per_day / 100 * started days late).

    One second late is one started day; at ``100 / percent_per_day`` days the penalty is the whole
    score. The result is rounded to 1e-6 so that a CSV round trip stays exact.

    Example:
        >>> PercentPerDayLate(percent_per_day=10.0).late_submission_penalty("s1", 8.0, 1.5 * DAY)
        1.6
    """

    percent_per_day = Float(
        10.0, help="Percent of the notebook's score lost per started day late (0 to 100)."
    ).tag(config=True)

    def late_submission_penalty(
        self, student_id: str, score: float, total_seconds_late: float
    ) -> float | None:
        if not 0.0 <= self.percent_per_day <= 100.0:
            raise ValueError(
                f"PercentPerDayLate.percent_per_day must be between 0 and 100, got "
                f"{self.percent_per_day}: set it in nbgrader_config.py"
            )
        if total_seconds_late <= 0:
            return None
        days = math.ceil(total_seconds_late / DAY)
        fraction = min(1.0, self.percent_per_day / 100.0 * days)
        self.log.info(
            "%s is %d day(s) late: -%.0f%% of %s", student_id, days, 100 * fraction, score
        )
        return round(score * fraction, 6)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Import per-student extensions into a course.")
    parser.add_argument("command", choices=["import-extensions"])
    parser.add_argument("file", type=Path, help="student_id,assignment,extension")
    parser.add_argument("--course", type=Path, default=Path("assignments"))
    args = parser.parse_args(argv)
    try:
        found = import_extensions(args.file, args.course)
    except (OSError, ValueError) as exc:
        print(f"course-extensions: {exc}", file=sys.stderr)
        return 1
    for (student, assignment), extension in sorted(found.items()):
        print(f"extension: {student} {assignment} +{format_extension(extension)}")
    print(f"{len(found)} extension(s) in {args.course / EXTENSIONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
