"""Regrade requests: a student asks, a person answers, nothing changes a grade by itself.

**The student** puts a short text file, ``regrade-request.txt``, beside the notebook in the
assignment folder (what the cell or the grade is, and why it should be looked at again) and
submits again (``nbgrader submit``, or the Assignments tab). The notebook may stay as it was:

- ``make course-collect`` takes the request out of the submission (it never reaches
  ``submitted/``, the grader or the gradebook) and records it in ``<course>/regrade/requests.json``;
  a notebook that did not change is *not* a resubmission: it is not regraded, and the manual
  grades and comments on it stay;
- the text is hostile input: at most :data:`MAX_BYTES` bytes are read (the rest is dropped and
  the request says so), decoded as UTF-8 with replacement, control characters removed, at most
  :data:`MAX_LINES` lines; it is escaped wherever it is shown (the report, the CSV: no formula).

**The instructor** sees the queue: ``make course-regrades`` (one line per request, open ones
first; ``<course>/regrade/queue.csv``) and the class report (``make course-report``). The answer is
a comment in the Formgrader on the student's submission (and a new manual score if the grade
changes: a person's decision, in the Formgrader like any manual grade). A request is *answered*
once the submission's comments differ from what they were when the request came.

**The student's next feedback** shows the answer: a new comment makes the page stale, and
``make course-feedback-release`` regenerates it from the gradebook before releasing
(``torchlight_grader.nbgrader.standing``).

Usage::

    python -m torchlight_grader.nbgrader.regrade queue --course assignments
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

FILE = "regrade-request.txt"
MAX_BYTES = 2000
MAX_LINES = 20
FOLDER = "regrade"


def clean(data: bytes) -> str:
    """The request's text as it may be shown: bounded, decoded, without control characters."""
    cut = len(data) > MAX_BYTES
    text = data[:MAX_BYTES].decode("utf-8", "replace")
    text = "".join(ch if ch == "\n" or (ch.isprintable() and ch != "\x7f") else " " for ch in text)
    lines = [line.rstrip() for line in text.strip().splitlines()]
    if len(lines) > MAX_LINES:
        lines, cut = lines[:MAX_LINES], True
    text = "\n".join(lines).strip()
    return text + (f"\n(cut at {MAX_BYTES} bytes / {MAX_LINES} lines)" if cut else "")


def _path(course: Path) -> Path:
    return course / FOLDER / "requests.json"


def load(course: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(_path(course).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return (
        [r for r in data.get("requests", []) if isinstance(r, dict)]
        if isinstance(data, dict)
        else []
    )


def _save(course: Path, requests: list[dict[str, Any]]) -> None:
    path = _path(course)
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(f".requests.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": 1, "requests": requests}, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def comments_digest(db_url: str, assignment: str, student: str) -> str:
    """A digest of every comment on the student's submission (empty: no submission yet)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return ""
        texts = sorted((nb.name, c.name, c.manual_comment or "") for nb in submission.notebooks
                       for c in nb.comments)  # fmt: skip
    return hashlib.sha256(json.dumps(texts).encode()).hexdigest()


def record(course: Path, db_url: str, assignment: str, student: str, entry: str, when: str,
           data: bytes) -> bool:  # fmt: skip
    """Record the request of one inbound entry (once: the entry's name is its key); returns
    whether it was new."""
    requests = load(course)
    if any(r.get("entry") == entry for r in requests):
        return False
    requests.append({"student": student, "assignment": assignment, "entry": entry, "time": when,
                     "reason": clean(data),
                     "comments": comments_digest(db_url, assignment, student)})  # fmt: skip
    _save(course, requests)
    return True


def queue(course: Path, db_url: str) -> list[dict[str, Any]]:
    """Every request with its ``status`` (``open`` / ``answered``), open ones first, oldest first."""
    out = []
    for r in load(course):
        now = comments_digest(db_url, str(r.get("assignment")), str(r.get("student")))
        status = "answered" if now != r.get("comments") else "open"
        out.append({**r, "status": status})
    return sorted(
        out, key=lambda r: (r["status"] != "open", str(r.get("time")), str(r.get("entry")))
    )


def write_queue(course: Path, db_url: str) -> tuple[Path, list[dict[str, Any]]]:
    """``<course>/regrade/queue.csv`` (what the class report reads)."""
    from torchlight_grader.nbgrader.spreadsheet import write_rows

    rows = queue(course, db_url)
    path = course / FOLDER / "queue.csv"
    path.parent.mkdir(exist_ok=True)
    head = ["status", "student", "assignment", "time", "reason"]
    write_rows(path, [head, *([r["status"], r.get("student"), r.get("assignment"), r.get("time"),
                               r.get("reason")] for r in rows)])  # fmt: skip
    return path, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["queue"])
    parser.add_argument("--course", type=Path, default=Path("assignments"))
    parser.add_argument("--db-url", default=os.environ.get("COURSE_DB_URL") or None)
    parser.add_argument("--quiet", action="store_true", help="write queue.csv only")
    args = parser.parse_args(argv)
    course = args.course.resolve()
    db = args.db_url or f"sqlite:///{course / 'gradebook.db'}"
    path, rows = write_queue(course, db)
    if args.quiet:
        return 0
    still = [r for r in rows if r["status"] == "open"]
    print(f"regrade requests: {len(still)} open, {len(rows) - len(still)} answered ({path})")
    for r in rows:
        first = str(r.get("reason", "")).splitlines()[0][:100] if r.get("reason") else ""
        print(
            f"  {r['status']:8} {r.get('student')} {r.get('assignment')} {r.get('time')}: {first}"
        )
    if still:
        print("answer each in the Formgrader (a comment on the submission; a new manual score if "
              "the grade changes), then `make course-feedback-release`")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
