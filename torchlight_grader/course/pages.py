"""Feedback pages kept in step with the gradebook, without a regrade.

A feedback page shows the gradebook as it was when ``generate_feedback`` wrote it, and carries a
digest of that state (``torchlight_grader.nbgrader.standing``). A manual score, extra credit or
comment given later in the Formgrader, or an extension, changes the state: the page is stale.
:func:`refresh` regenerates exactly the stale pages (``nbgrader generate_feedback A
--student=S --force``, in one worker process), so the page a student gets always shows the
score the exports give the LMS, with every comment. ``make course-grade`` runs it after its
exports, ``make course-feedback-release`` before it releases anything::

    .venv/bin/python -m torchlight_grader.course.pages --course assignments [--assignment A]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from torchlight_grader.course.batch import Run, Worker
from torchlight_grader.nbgrader.courselock import CourseBusyError, course_lock


def environment(db_url: str | None) -> dict[str, str]:
    """A grading worker's environment: the venv first on PATH (nbgrader runs ``alembic`` from
    it), the gradebook's URL."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    if db_url:
        env["COURSE_DB_URL"] = db_url
    return env


def refresh(
    course: Path, db_url: str | None, assignment: str = "*", worker: Worker | None = None
) -> tuple[list[tuple[str, str]], list[Run]]:
    """Regenerate every stale feedback page of the assignments matching ``assignment``; returns
    the ``(student, assignment)`` refreshed and the runs (one per submission)."""
    from torchlight_grader.nbgrader.standing import stale_pages

    db = db_url or f"sqlite:///{course / 'gradebook.db'}"
    stale = stale_pages(course, db, assignment)
    if not stale:
        return [], []
    names = ", ".join(f"{s}/{a}" for s, a in stale[:10])
    more = f", ... ({len(stale) - 10} more)" if len(stale) > 10 else ""
    print(f"feedback: {len(stale)} submission(s) whose page no longer shows the gradebook (a "
          f"manual score, comment, late penalty or extension since): {names}{more}; "
          "regenerating their pages", flush=True)  # fmt: skip
    own = worker is None
    worker = worker if worker is not None else Worker(course, environment(db_url)).start()
    try:
        runs = worker.do(
            [["generate_feedback", a, f"--student={s}", "--force"] for s, a in stale], 0
        )
    finally:
        if own:
            worker.close()
    for (s, a), run in zip(stale, runs, strict=True):
        if run.returncode != 0:
            print(f"FAILED feedback page of {s} {a}: exit {run.returncode} (the old page is not "
                  "released while it is stale)", file=sys.stderr)  # fmt: skip
    return stale, runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--course", type=Path, default=Path("assignments"))
    parser.add_argument("--assignment", default="*")
    parser.add_argument("--db-url", default=os.environ.get("COURSE_DB_URL") or None)
    args = parser.parse_args(argv)
    course = args.course.resolve()
    try:
        with course_lock(course, "feedback pages (make course-feedback-release)"):
            _, runs = refresh(course, args.db_url, args.assignment)
    except CourseBusyError as exc:
        print(f"feedback pages: {exc}", file=sys.stderr)
        return 1
    return 1 if any(r.returncode != 0 for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
