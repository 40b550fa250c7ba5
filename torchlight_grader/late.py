"""The course's late-submission policy, as an nbgrader ``LateSubmissionPlugin``.

``nbgrader_config.py`` selects it::

    c.AssignLatePenalties.plugin_class = "torchlight_grader.late.PercentPerDayLate"
    c.PercentPerDayLate.percent_per_day = 10.0

nbgrader's ``AssignLatePenalties`` preprocessor calls it once per notebook of a submission whose
timestamp (``timestamp.txt``, written by ``nbgrader submit``/``collect``) is after the
assignment's due date (``nbgrader db assignment add NAME --duedate=...``), and stores the penalty
in the gradebook: ``grades.csv`` shows ``raw_score``, ``late_submission_penalty`` and the final
``score``.
"""

from __future__ import annotations

import math

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

DAY = 24 * 3600


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
