"""Where a student's grade stands now: the late penalty of the current score, and the gradebook
state a feedback page shows.

nbgrader stores a notebook's late penalty once, at autograde (``AssignLatePenalties``), from
autograde's score, and writes the feedback page once, at ``generate_feedback``. A manual score,
extra credit or comment given afterwards in the Formgrader changed neither: the exports said
10.75 while the student's page still said 10.0 with no comment, and a late student given +2 by
hand exported 11.9, then 11.7 after the next full regrade. So here, wherever a score is exported
or shown (``grades.csv``, ``canvas.csv``, the feedback page):

- :func:`current_penalty` computes the late penalty from the **current** score (manual scores and
  extra credit included), the submission time, the due date and the student's extension
  (``extensions.csv``, :mod:`torchlight_grader.nbgrader.late`), with the course's configured
  ``LateSubmissionPlugin``; the penalty nbgrader stored at autograde is never read;
- :class:`CurrentGrades` (``generate_feedback``'s first preprocessor, in place of nbgrader's
  ``GetGrades``) puts that score on the page, and the page carries the digest of the gradebook
  state it shows (:func:`notebook_state`: every score, manual score, extra credit and comment
  of the notebook, the penalty, the submission time and the due date with its extension) in
  ``<meta name="torchlight-gradebook-state">``;
- :func:`stale_pages` lists the pages whose state is no longer the gradebook's: ``make
  course-grade`` and ``make course-feedback-release`` regenerate them
  (``torchlight_grader.course.pages``), and the release never hands out a stale page.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from datetime import timedelta
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import GetGrades

from torchlight_grader.nbgrader.ids import is_safe_student_id
from torchlight_grader.nbgrader.late import DAY, EXTENSIONS, read_extensions

#: The page's ``<meta name=...>`` holding the state it shows.
STATE_META = "torchlight-gradebook-state"
#: The state of a page that says why a notebook could not be graded: never regenerated.
NOT_GRADED = "not-graded"
# (nbconvert's HTML passes through BeautifulSoup, which may reorder a tag's attributes)
_META = re.compile(rb'<meta\s[^>]*name="' + STATE_META.encode() + rb'"[^>]*>')
_CONTENT = re.compile(rb'\scontent="([^"]*)"')
_HEAD_BYTES = 4096  # the meta is the first element of <head>

Extensions = dict[tuple[str, str], timedelta]


def late_plugin(config: Any) -> Any:
    """The course's ``LateSubmissionPlugin`` (``c.AssignLatePenalties.plugin_class``), configured
    from ``config`` as autograde configures it."""
    from nbgrader.preprocessors import AssignLatePenalties

    return AssignLatePenalties(config=config).plugin_class(config=config)


def course_config(course: Path) -> Any:
    """The course's ``nbgrader_config.py``, loaded as nbgrader loads it."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()


def seconds_late(submission: Any, extension: timedelta | None) -> float:
    """Seconds after the student's own due date (the assignment's plus ``extension``; else the
    gradebook's extension of the submission), 0 when on time or without a due date."""
    due, when = submission.assignment.duedate, submission.timestamp
    if due is None or when is None:
        return 0.0
    if extension is None:
        extension = submission.extension or timedelta(0)
    return max(0.0, (when - (due + extension)).total_seconds())


def notebook_penalty(plugin: Any, student: str, score: float, late: float) -> float:
    """What ``AssignLatePenalties`` would store for a notebook of ``score`` points ``late``
    seconds late: the plugin's penalty, at least 0 and at most the score."""
    if late <= 0:
        return 0.0
    penalty = plugin.late_submission_penalty(student, score, late)
    return 0.0 if penalty is None else min(max(0.0, float(penalty)), float(score))


def current_penalty(plugin: Any, submission: Any, extensions: Extensions) -> float:
    """The late penalty of a submission from its notebooks' current scores."""
    student, name = submission.student.id, submission.assignment.name
    late = seconds_late(submission, extensions.get((student, name)))
    return sum(notebook_penalty(plugin, student, nb.score, late) for nb in submission.notebooks)


def notebook_state(submission: Any, notebook: Any, penalty: float, extension: Any) -> str:
    """A digest of everything of the gradebook a notebook's feedback page shows."""
    grades = sorted((g.name, g.auto_score, g.manual_score, g.extra_credit, g.max_score)
                    for g in notebook.grades)  # fmt: skip
    comments = sorted((c.name, c.auto_comment, c.manual_comment) for c in notebook.comments)
    due = submission.assignment.duedate
    extension = extension if extension is not None else submission.extension
    facts = [grades, comments, round(penalty, 9), str(submission.timestamp), str(due),
             str(extension)]  # fmt: skip
    return hashlib.sha256(json.dumps(facts, default=str).encode()).hexdigest()[:32]


def page_state(page: Path) -> str | None:
    """The state a feedback page was written from (its meta), None for no page or no meta."""
    try:
        fd = os.open(page, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        found = _META.search(f.read(_HEAD_BYTES))
    content = _CONTENT.search(found[0]) if found else None
    return content[1].decode() if content else None


def stale_pages(course: Path, db: str, assignment: str = "*",
                config: Any = None) -> list[tuple[str, str]]:  # fmt: skip
    """``(student, assignment)`` of each submission still in ``submitted/`` whose feedback page
    (for any of its autograded notebooks) does not show the gradebook's current state: a manual
    score, extra credit, comment or late penalty given or changed since, or a page written before
    pages carried their state. Pages saying why a notebook could not be graded are left alone."""
    plugin = late_plugin(config if config is not None else course_config(course))
    extensions = read_extensions(course / EXTENSIONS)
    stale = []
    with Gradebook(db) as gb:
        for a in gb.assignments:
            if not fnmatch(a.name, assignment):
                continue
            for submission in a.submissions:
                student = submission.student.id
                if not is_safe_student_id(student):
                    continue
                if not (course / "submitted" / student / a.name).is_dir():
                    continue  # deleted: exported as missing, nothing to show
                penalty_late = seconds_late(submission, extensions.get((student, a.name)))
                for nb in submission.notebooks:
                    autograded = course / "autograded" / student / a.name / f"{nb.name}.ipynb"
                    if not autograded.is_file():
                        continue
                    shown = page_state(course / "feedback" / student / a.name / f"{nb.name}.html")
                    if shown == NOT_GRADED:
                        continue
                    penalty = notebook_penalty(plugin, student, nb.score, penalty_late)
                    ext = extensions.get((student, a.name))
                    if shown != notebook_state(submission, nb, penalty, ext):
                        stale.append((student, a.name))
                        break
    return sorted(stale)


def course_root(plugin: object) -> str:
    """The course directory of an export plugin (its config's, else the working directory)."""
    config = getattr(plugin, "config", None)
    root = config.CourseDirectory.get("root") if config is not None else None
    return root if isinstance(root, str) and root else os.getcwd()


def final_scores(plugin: Any, gradebook: Gradebook) -> dict[tuple[str, str], tuple[float, float]]:
    """``(assignment, student) -> (late penalty, final score)`` of every submission, the penalty
    from the current score (:func:`current_penalty`)."""
    late = late_plugin(plugin.config)
    extensions = read_extensions(Path(course_root(plugin)) / EXTENSIONS)
    out = {}
    for assignment in gradebook.assignments:
        for sub in assignment.submissions:
            penalty = current_penalty(late, sub, extensions)
            out[(assignment.name, sub.student.id)] = (penalty, max(0.0, sub.score - penalty))
    return out


class CurrentGrades(GetGrades):
    """nbgrader's ``GetGrades`` (each cell's score and comment onto the page), with the late
    penalty of the current score (:func:`current_penalty`), the student's due date and extension,
    and the page's gradebook state (:func:`notebook_state`) in ``resources["nbgrader"]``; each
    graded cell's ``awaiting`` (no score yet, automatic or manual: a written answer a person has
    not graded) and the points awaiting in all (``resources["nbgrader"]["awaiting"]``)."""

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        nb, resources = super().preprocess(nb, resources)
        info = resources["nbgrader"]
        student, assignment = info["student"], info["assignment"]
        extension = read_extensions(Path(course_root(self)) / EXTENSIONS).get((student, assignment))
        plugin = late_plugin(self.config)
        with Gradebook(info["db_url"]) as gb:
            try:
                submission = gb.find_submission(assignment, student)
                notebook = gb.find_submission_notebook(info["notebook"], assignment, student)
            except MissingEntry:  # (GetGrades found them a moment ago)
                return nb, resources
            # A cell no one has scored (a written answer awaiting a person): "not graded yet" on
            # the page, never nbgrader's "0.0 / 1.0". Set on every cell, whatever it carried.
            waiting = {g.name: g.max_score for g in notebook.grades
                       if g.auto_score is None and g.manual_score is None}  # fmt: skip
            for cell in nb.cells:
                meta = cell.metadata.get("nbgrader")
                if isinstance(meta, dict):
                    meta["awaiting"] = bool(meta.get("grade")) and meta.get("grade_id") in waiting
            info["awaiting"] = sum(waiting.values())
            late = seconds_late(submission, extension)
            penalty = notebook_penalty(plugin, student, notebook.score, late)
            info["late_penalty"] = penalty
            info["score"] = max(0.0, notebook.score - penalty)
            info["state"] = notebook_state(submission, notebook, penalty, extension)
            due = submission.assignment.duedate
            info["duedate"] = f"{due:%Y-%m-%d %H:%M} UTC" if due is not None else ""
            info["extended_to"] = (
                f"{due + extension:%Y-%m-%d %H:%M} UTC" if due is not None and extension else ""
            )
            info["days_late"] = math.ceil(late / DAY)
        return nb, resources
