"""The course's collect and feedback-release steps: the exchange is a trust boundary.

Students write the exchange's ``inbound/`` folder; nbgrader's own ``collect`` copies it as the
instructor with symlinks followed and trusts the student's ``timestamp.txt`` and folder name, and
``release_feedback`` releases every ``feedback/<s>/<a>/*.html``. This module replaces both
(``make course-collect ASSIGNMENT=A``, ``make course-feedback-release ASSIGNMENT=A``; see the
"The exchange" section of ``assignments/README.md``):

- every inbound entry is opened without following links (``lstat``, ``O_NOFOLLOW``); an entry
  holding a symlink, device, FIFO, socket, folder or a file outside the allow-list (the
  assignment's released notebooks, ``timestamp.txt``, ``submission_secret.txt``, a regrade
  request, the hint count ``hints-used.json`` and what ``--allow`` declares) is refused whole,
  with a report line; the regrade request and the hint count are taken out of the submission
  (never graded) into ``regrade/`` and ``hints/`` (:mod:`torchlight_grader.nbgrader.hints`);
- sizes are checked against :data:`LIMITS` (per file, per submission, cells per notebook, JSON
  nesting depth) before anything is parsed by nbgrader;
- the student id must match :data:`torchlight_grader.nbgrader.ids.SAFE_STUDENT_ID` (an entry whose id
  holds a ``+``, ``a+b+<assignment>+...``, is refused too, not skipped);
- with ``--accounts yes`` (one OS account per student; ``auto``, the default, turns it on as
  soon as one entry is not owned by the collecting user) the entry and every file in it must be
  owned by the OS user the entry names: a folder named after a classmate is refused;
- the submission time is the one the instructor's side observed
  (:func:`torchlight_grader.nbgrader.late.observed_submission_time`), written into the collected
  ``timestamp.txt``; the student's own ``timestamp.txt`` and folder name are ignored; each
  collected line says whether it is on time against the student's own due date (the
  assignment's, plus the student's extension from ``extensions.csv``);
- latest wins: per student the accepted entry observed last is collected, replacing an older
  collected version (no ``--update`` needed); when it replaces a version whose submission holds
  manual scores, those scores are cleared (so autograde's scores count) and listed in
  ``collect/<A>-stale-manual.csv`` for review, never silently applied.

Refusals go to the instructor (printed, and ``collect/<A>-report.csv``) and to the student: the
feedback release publishes, for each notebook of a refused entry, a page saying what was refused
and why, which ``nbgrader fetch_feedback`` gives the student.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import math
import os
import pwd
import shutil
import stat
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from torchlight_grader.nbgrader import hints, regrade
from torchlight_grader.nbgrader.courselock import CourseBusyError, course_lock
from torchlight_grader.nbgrader.ids import is_safe_student_id, unsafe_student_id_message
from torchlight_grader.nbgrader.late import (
    DAY,
    EXTENSIONS,
    format_extension,
    format_timestamp,
    observed_submission_time,
    read_extensions,
)
from torchlight_grader.nbgrader.spreadsheet import write_rows
from torchlight_grader.nbgrader.standing import stale_pages

#: Documented limits, checked at collect (``--max-file-bytes`` etc. override them).
LIMITS = {
    "file_bytes": 8 * 1024**2,  # one file
    "submission_bytes": 32 * 1024**2,  # all files of one submission
    "cells": 2000,  # cells per notebook
    "json_depth": 64,  # nesting depth of a notebook's JSON
}
NBGRADER_FILES = ("timestamp.txt", "submission_secret.txt")
COURSE_ID = "torchlight-autograd"


class RefusedError(Exception):
    """One inbound entry refused; the message names what was expected and what came."""


@dataclass
class Entry:
    name: str
    student: str
    path: Path
    files: dict[str, bytes] = field(default_factory=dict)
    time: datetime | None = None
    reasons: list[str] = field(default_factory=list)
    secret: str = ""

    def digest(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.files):
            if name != "timestamp.txt":
                h.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        return h.hexdigest()


def json_depth(value: object) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
    return deepest


def check_notebook(name: str, data: bytes, limits: dict[str, int]) -> None:
    """Refuse (:class:`RefusedError`) what is not a notebook within ``limits``: parsed by the C
    decoder (which stops at Python's recursion limit rather than recursing deeper), then its
    cells counted and its nesting measured without recursion."""
    too_deep = (
        f"{name}: JSON nested deeper than {limits['json_depth']} levels (a notebook needs "
        "fewer than 10)"
    )
    try:
        nb = json.loads(data)
    except RecursionError:
        raise RefusedError(too_deep) from None
    except ValueError as exc:
        raise RefusedError(f"{name}: not a notebook (expected JSON: {exc})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise RefusedError(f"{name}: not a notebook (expected a JSON object with a 'cells' list)")
    if len(cells) > limits["cells"]:
        raise RefusedError(f"{name}: {len(cells)} cells, more than the limit of {limits['cells']}")
    if json_depth(nb) > limits["json_depth"]:
        raise RefusedError(too_deep)


def read_entry(entry: Entry, allowed: set[str], limits: dict[str, int], owner: int | None) -> None:
    """Read every file of one inbound entry without following links; raise :class:`RefusedError`."""
    st = os.lstat(entry.path)
    if not stat.S_ISDIR(st.st_mode):
        raise RefusedError(f"{entry.name} is not a plain folder (a symlink or a file)")
    if owner is not None and st.st_uid != owner:
        raise RefusedError(
            f"{entry.name} is owned by uid {st.st_uid} ({_user(st.st_uid)}), not by "
            f"{entry.student} (uid {owner}): a folder may only be submitted by the student it names"
        )
    total = 0
    fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        names = sorted(os.listdir(fd))
        for name in names:
            fst = os.stat(name, dir_fd=fd, follow_symlinks=False)
            kind = _kind(fst.st_mode)
            if kind != "file":
                raise RefusedError(f"{name}: a {kind}; only regular files are collected")
            if name not in allowed:
                raise RefusedError(
                    f"{name}: not part of the assignment (expected only: {', '.join(sorted(allowed))})"
                )
            if owner is not None and fst.st_uid != owner:
                raise RefusedError(f"{name}: owned by uid {fst.st_uid}, not by {entry.student}")
            if fst.st_size > limits["file_bytes"]:
                raise RefusedError(
                    f"{name}: {fst.st_size} bytes, more than the limit of "
                    f"{limits['file_bytes']} bytes per file"
                )
            ffd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
            with os.fdopen(ffd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise RefusedError(f"{name}: changed into a non-file while collecting")
                data = f.read(limits["file_bytes"] + 1)
            if len(data) > limits["file_bytes"]:
                raise RefusedError(f"{name}: more than {limits['file_bytes']} bytes")
            total += len(data)
            if total > limits["submission_bytes"]:
                raise RefusedError(
                    f"the submission is more than {limits['submission_bytes']} bytes in all"
                )
            if name.endswith(".ipynb"):
                check_notebook(name, data, limits)
            entry.files[name] = data
    finally:
        os.close(fd)
    if not any(n.endswith(".ipynb") for n in entry.files):
        raise RefusedError("no notebook in the submission")
    secret = entry.files.get("submission_secret.txt", b"").decode("ascii", "replace").strip()
    entry.secret = secret if secret.isalnum() and len(secret) <= 256 else ""
    entry.time = observed_submission_time(entry.path, list(entry.files))


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISREG, "file"), (stat.S_ISLNK, "symlink"), (stat.S_ISDIR, "folder"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"),
                       (stat.S_ISBLK, "device")):  # fmt: skip
        if test(mode):
            return kind
    return "special file"


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no such user"


def _secret_from(path: Path) -> str:
    try:
        fd = os.open(path / "submission_secret.txt", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ""
        text = f.read(257).decode("ascii", "replace").strip()
    return text if text.isalnum() and len(text) <= 256 else ""


def collect(course: Path, exchange: Path, assignment: str, *, course_id: str = COURSE_ID,
            accounts: str = "auto", allow: tuple[str, ...] = (),
            limits: dict[str, int] | None = None, db_url: str | None = None) -> int:  # fmt: skip
    """Collect ``assignment`` from ``exchange`` into ``course/submitted``; return the exit status
    (0 when refusals were reported, 1 when the course is not ready)."""
    limits = {**LIMITS, **(limits or {})}
    release = course / "release" / assignment
    notebooks = sorted(p.name for p in release.glob("*.ipynb"))
    if not notebooks:
        print(f"refusing to collect: no released notebooks in {release} "
              "(expected `make course-release` first)", file=sys.stderr)  # fmt: skip
        return 1
    allowed = {*notebooks, *NBGRADER_FILES, regrade.FILE, hints.FILE, *allow}
    used: dict[str, bytes] = {}  # entry -> its hints-used.json (never part of the submission)
    db = db_url or os.environ.get("COURSE_DB_URL") or f"sqlite:///{course / 'gradebook.db'}"
    asks: set[str] = set()  # entries that carry a regrade request
    inbound = exchange / course_id / "inbound"
    me = os.geteuid()
    raw = []
    for dirent in sorted(os.scandir(inbound), key=lambda d: d.name):
        parts = dirent.name.split("+")
        if len(parts) >= 3 and parts[1] == assignment:
            raw.append((dirent, parts[0]))
        elif assignment in parts[2:-1]:  # an id holding '+' ("a+b+A+time+random"): refused below
            raw.append((dirent, "+".join(parts[: parts.index(assignment, 2)])))
    if accounts == "auto":
        accounts = (
            "yes" if any(d.stat(follow_symlinks=False).st_uid != me for d, _ in raw) else "no"
        )
    ledger_dir = course / "collect"
    ledger_dir.mkdir(exist_ok=True)
    ledger_path = ledger_dir / f"{assignment}.json"
    ledger = json.loads(ledger_path.read_text()) if ledger_path.exists() else {}
    seen: dict[str, dict] = ledger.setdefault("seen", {})
    refused: list[dict] = []
    accepted: dict[str, Entry] = {}
    report: list[list[str]] = []
    for dirent, student in raw:
        entry = Entry(dirent.name, student, Path(dirent.path))
        try:
            if not is_safe_student_id(student):
                raise RefusedError(unsafe_student_id_message(student))
            owner = None
            if accounts == "yes":
                try:
                    owner = pwd.getpwnam(student).pw_uid
                except KeyError:
                    raise RefusedError(
                        f"no OS account named {student!r} (--accounts yes)"
                    ) from None
            read_entry(entry, allowed, limits, owner)
        except (RefusedError, OSError) as exc:
            reason = str(exc) if isinstance(exc, RefusedError) else f"unreadable: {exc}"
            print(f"REFUSED {student[:80]!r} {dirent.name[:120]!r}: {reason}")
            report.append([student[:80], dirent.name[:200], "refused", reason])
            if is_safe_student_id(student):
                refused.append({"student": student, "entry": dirent.name, "reason": reason,
                                "secret": _secret_from(Path(dirent.path)),
                                "notebooks": notebooks})  # fmt: skip
            continue
        assert entry.time is not None, (
            f"{dirent.name}: an accepted entry always has its observed time"
        )
        used[entry.name] = entry.files.pop(hints.FILE, b"{}")  # hint use: the report's
        request = entry.files.pop(regrade.FILE, None)  # never part of the submission
        if request is not None:
            asks.add(entry.name)
            if regrade.record(course, db, assignment, student, entry.name,
                              format_timestamp(entry.time), request):  # fmt: skip
                print(f"REGRADE REQUEST from {student} ({entry.name[:120]}): recorded for "
                      f"`make course-regrades` ({course / regrade.FOLDER})")  # fmt: skip
        digest = entry.digest()
        first = seen.get(entry.name)
        if first and first["digest"] == digest:
            entry.time = min(entry.time, datetime.fromisoformat(first["time"]))
        else:
            seen[entry.name] = {"digest": digest, "time": entry.time.isoformat()}
        best = accepted.get(student)
        if best is None or (entry.time, entry.name) > (best.time, best.name):
            accepted[student] = entry
    stale: list[list[str]] = []
    due = _duedate(course, assignment, db_url)
    extensions = read_extensions(course / EXTENSIONS)
    for student, entry in sorted(accepted.items()):
        assert entry.time is not None, (
            f"{entry.name}: an accepted entry always has its observed time"
        )
        if entry.name in asks and _same_work(course, assignment, entry):
            # a request with the notebook as it was: not a resubmission (no regrade, the
            # manual grades and comments stay, the time stays the first submission's)
            print(f"unchanged {student} {entry.name} (a regrade request, the same notebook)")
            report.append([student, entry.name, "regrade request", "the same notebook"])
            continue
        replaced = _install(course, assignment, entry)
        verdict = "collected" if replaced is not None else "unchanged"
        if replaced:
            stale += clear_manual_scores(course, assignment, student, db_url)
        hints.record(course, assignment, student, used.get(entry.name, b"{}"))
        when = lateness(entry.time, due, extensions.get((student, assignment)))
        print(f"{verdict} {student} {entry.name} (observed {format_timestamp(entry.time)}{when})")
        report.append([student, entry.name, verdict, format_timestamp(entry.time)])
    ledger["refused"] = refused
    ledger_path.write_text(json.dumps(ledger, indent=1, sort_keys=True))
    write_rows(
        ledger_dir / f"{assignment}-report.csv",
        [["student", "entry", "verdict", "detail"], *report],
    )
    if stale:
        path = ledger_dir / f"{assignment}-stale-manual.csv"
        head = (
            []
            if path.exists()
            else [["student", "assignment", "notebook", "cell", "old_manual_score"]]
        )
        write_rows(path, [*head, *stale], append=True)
        for row in stale:
            if row[3].endswith(" (comment)"):
                print(f"STALE manual comment of {row[0]} {row[2]}/{row[3]} (the student "
                      f"resubmitted): cleared, review it in the Formgrader ({path})")  # fmt: skip
                continue
            print(f"STALE manual score {row[4]} of {row[0]} {row[2]}/{row[3]} (the student "
                  f"resubmitted): cleared, review it in the Formgrader ({path})")  # fmt: skip
    if accepted:  # canvas.csv's matching, said now rather than at the first export
        from torchlight_grader.nbgrader.canvas import check_roster

        for problem in check_roster(db, set(accepted)):
            print(f"WARNING canvas.csv: {problem}")
    print(f"collect {assignment}: {len(accepted)} accepted, {sum(r[2] == 'refused' for r in report)} "
          f"refused ({accounts == 'yes' and 'one OS account per student' or 'single OS user'}); "
          f"report: {ledger_dir / (assignment + '-report.csv')}")  # fmt: skip
    return 0  # a refused entry costs only its student; the report lists it


def _duedate(course: Path, assignment: str, db_url: str | None) -> datetime | None:
    """The assignment's due date in the gradebook (UTC), None when it has none (yet)."""
    from nbgrader.api import Gradebook, MissingEntry

    db = db_url or os.environ.get("COURSE_DB_URL") or f"sqlite:///{course / 'gradebook.db'}"
    if db.startswith("sqlite:///") and not Path(db[len("sqlite:///") :].split("?")[0]).exists():
        return None
    with Gradebook(db) as gb:
        try:
            due = gb.find_assignment(assignment).duedate
        except MissingEntry:
            return None
    return None if due is None else due.replace(tzinfo=UTC)


def lateness(when: datetime, due: datetime | None, extension: timedelta | None) -> str:
    """``; due ..., extended by 2 days to ...: on time`` / ``...: 1 started day(s) late`` for
    collect's line ('' without a due date): the student's own due date, extension included."""
    if due is None:
        return ""
    mine = due + (extension or timedelta(0))
    said = f"; due {format_timestamp(due)}"
    if extension:
        said += f", extended by {format_extension(extension)} to {format_timestamp(mine)}"
    late = (when - mine).total_seconds()
    return said + (f": {math.ceil(late / DAY)} started day(s) late" if late > 0 else ": on time")


def _same_work(course: Path, assignment: str, entry: Entry) -> bool:
    """Whether ``entry``'s files, but for nbgrader's own (a new secret each submit), are those
    already in ``submitted/``."""
    dest = course / "submitted" / entry.student / assignment
    if not dest.is_dir():
        return False
    mine = {n: d for n, d in entry.files.items() if n not in NBGRADER_FILES}
    there = {p.name: p.read_bytes() for p in dest.iterdir()
             if p.is_file() and p.name not in (*NBGRADER_FILES, ".collected")}  # fmt: skip
    return mine == there


def _install(course: Path, assignment: str, entry: Entry) -> bool | None:
    """Put ``entry`` into ``submitted/<student>/<assignment>/``. Returns None when that exact
    submission is already there, False when there was none, True when it replaced another."""
    dest = course / "submitted" / entry.student / assignment
    marker = dest / ".collected"
    digest = entry.digest()
    if dest.is_dir() and marker.is_file() and marker.read_text().split()[0] == digest:
        return None
    existed = dest.exists()
    tmp = dest.with_name(f".{assignment}.collecting")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for name, data in entry.files.items():
        if name != "timestamp.txt":
            (tmp / name).write_bytes(data)
    assert entry.time is not None
    (tmp / "timestamp.txt").write_text(format_timestamp(entry.time))
    (tmp / ".collected").write_text(f"{digest} {entry.name}\n")
    if existed:
        old = dest.with_name(f".{assignment}.replaced")
        if old.exists():
            shutil.rmtree(old)
        dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old)
    else:
        tmp.rename(dest)
    return existed


def clear_manual_scores(course: Path, assignment: str, student: str,
                        db_url: str | None) -> list[list[str]]:  # fmt: skip
    """Manual scores, extra credit and comments given on the submission a resubmission
    replaced: cleared and returned (a comment on an old version must not reach the new
    version's feedback page)."""
    from nbgrader.api import Gradebook, MissingEntry

    db = db_url or os.environ.get("COURSE_DB_URL") or f"sqlite:///{course / 'gradebook.db'}"
    if db.startswith("sqlite:///") and not Path(db[len("sqlite:///") :]).exists():
        return []
    rows = []
    with Gradebook(db) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return []
        for nb in submission.notebooks:
            for grade in nb.grades:
                if grade.manual_score is not None:
                    rows.append(
                        [student, assignment, nb.name, grade.name, f"{grade.manual_score:g}"]
                    )
                    grade.manual_score = None
                if grade.extra_credit:  # the Formgrader's extra credit is a manual score too
                    cell = f"{grade.name} (extra credit)"
                    rows.append([student, assignment, nb.name, cell, f"{grade.extra_credit:g}"])
                    grade.extra_credit = None
            for comment in nb.comments:
                if comment.manual_comment:
                    cell = f"{comment.name} (comment)"
                    rows.append([student, assignment, nb.name, cell, comment.manual_comment])
                    comment.manual_comment = None
        gb.db.commit()
    return rows


def release_feedback(course: Path, exchange: Path, assignment: str, *, course_id: str = COURSE_ID,
                     db_url: str | None = None) -> int:  # fmt: skip
    """Release into the exchange only ``feedback/<s>/<assignment>/<nb>.html`` for the notebooks
    the gradebook knows for that assignment and the students it has a submission of, plus a
    refusal page for every notebook of an entry collect refused. A page that no longer shows the
    gradebook's state (``torchlight_grader.nbgrader.standing.stale_pages``) is not released."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import notebook_hash

    db = db_url or os.environ.get("COURSE_DB_URL") or f"sqlite:///{course / 'gradebook.db'}"
    out = exchange / course_id / "feedback"
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o711)
    released = 0

    def publish(secret: str, notebook: str, data: bytes) -> None:
        name = notebook_hash(secret=secret, notebook_id=notebook)
        tmp = out / f".{name}.tmp"
        tmp.write_bytes(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out / f"{name}.html")

    with Gradebook(db) as gb:
        known = [nb.name for nb in gb.find_assignment(assignment).notebooks]
        students = [s.student.id for s in gb.find_assignment(assignment).submissions]
    # A page that no longer shows the gradebook (a manual grade since) never reaches a student:
    # `make course-feedback-release` regenerates such pages first (torchlight_grader.course.pages).
    stale = set(stale_pages(course, db, assignment))
    for student in sorted(students):
        if not is_safe_student_id(student):
            continue
        folder = course / "feedback" / student / assignment
        secret = _secret_from(course / "submitted" / student / assignment)
        if not secret:
            continue  # not submitted through the exchange: nobody to release it to
        if (student, assignment) in stale:
            print(f"NOT RELEASED {student} {assignment}: the feedback page no longer shows the "
                  "gradebook (a manual grade or comment since it was written); regenerate it "
                  "with `make course-feedback-release` (or `python -m "
                  "torchlight_grader.course.pages`)", file=sys.stderr)  # fmt: skip
            continue
        for notebook in known:
            try:
                fd = os.open(
                    folder / f"{notebook}.html", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                )
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    continue
                data = f.read()
            publish(secret, notebook, data)
            released += 1
            print(f"released {student} {assignment}/{notebook}.html")
    ledger_path = course / "collect" / f"{assignment}.json"
    refused = json.loads(ledger_path.read_text()).get("refused", []) if ledger_path.exists() else []
    for row in refused:
        if not row["secret"]:
            continue
        page = (
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Submission refused</title>"
            f"</head><body><h1>Your submission of {html.escape(assignment)} was refused</h1>"
            f"<p>{html.escape(row['reason'])}</p><p>Nothing of it was graded. Fix it and "
            "submit again (the latest accepted submission counts).</p></body></html>"
        )
        for notebook in row["notebooks"]:
            publish(row["secret"], notebook.removesuffix(".ipynb"), page.encode())
        print(f"released the refusal of {row['student']} {row['entry']}")
    print(f"feedback release {assignment}: {released} page(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["collect", "release-feedback"])
    parser.add_argument("--course", default="assignments")
    parser.add_argument("--exchange", required=True)
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--course-id", default=COURSE_ID)
    parser.add_argument("--accounts", choices=["auto", "yes", "no"], default="auto")
    parser.add_argument("--allow", action="append", default=[], help="another file name to accept")
    parser.add_argument("--db-url", default=os.environ.get("COURSE_DB_URL") or None)
    for key, value in LIMITS.items():
        parser.add_argument(f"--max-{key.replace('_', '-')}", type=int, default=value, dest=key)
    args = parser.parse_args(argv)
    course, exchange = Path(args.course).resolve(), Path(args.exchange).resolve()
    try:
        with course_lock(course, f"make course-{args.command}"):
            if args.command == "release-feedback":
                return release_feedback(course, exchange, args.assignment,
                                        course_id=args.course_id, db_url=args.db_url)  # fmt: skip
            limits = {k: getattr(args, k) for k in LIMITS}
            return collect(course, exchange, args.assignment, course_id=args.course_id,
                           accounts=args.accounts, allow=tuple(args.allow), limits=limits,
                           db_url=args.db_url)  # fmt: skip
    except CourseBusyError as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
