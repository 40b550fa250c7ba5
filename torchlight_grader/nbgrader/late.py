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
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

DAY = 24 * 3600


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
