"""What each release of an assignment handed out: ``<course>/releases.json``.

A student's notebook carries the cells of the release it was fetched from. When the instructor
changes a test cell between two releases (its points, a tolerance in its source) and releases
again, every notebook made from the earlier release differs from the gradebook in that cell.
That is the instructor's change, not the student's: :class:`RestoreGradedCells
<torchlight_grader.nbgrader.plugins.RestoreGradedCells>` restores the cell either way (the
grade uses the current points and checks), but it reports the difference as tampering only
when the handed-in cell matches no release the instructor made.

The history is a list of versions per cell, ``"assignment/notebook/grade_id" -> [{"points":
2.0, "source": sha256, "released": sha256}, ...]``: the points (``null`` for a cell that is not
a test) and SHA-256 digests of the cell's source as the instructor wrote it and as the release
shows it (without its hidden tests: the history holds no hidden test, and no source at all).
It is recorded from the gradebook, which holds what ``nbgrader generate_assignment`` released,
by ``make course-release`` (before and after ``generate_assignment``, so the version students
already hold is kept) and by every ``make course-grade`` (the gradebook's current version).
Only the instructor's own commands write it; a student's notebook never reaches it.

A student who sets a cell's points back to an earlier release's value is reported as an earlier
release: harmless, since the grade never depends on the handed-in metadata.

Usage::

    python -m torchlight_grader.nbgrader.releases record --course assignments [--db-url URL]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

HISTORY = "releases.json"

HIDDEN_TESTS = re.compile(
    r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?", re.M | re.S
)

Version = dict[str, Any]  # {"points": float | None, "source": sha256, "released": sha256}


def released(source: str) -> str:
    """A cell's source as the release shows it: without its hidden tests."""
    return HIDDEN_TESTS.sub("", source)


def digest(source: str) -> str:
    """The SHA-256 of a cell's source, surrounding white space ignored (as the restore does)."""
    return hashlib.sha256(source.strip().encode()).hexdigest()


def version(source: str, points: float | None) -> Version:
    return {"points": points, "source": digest(source), "released": digest(released(source))}


def gradebook_versions(db_url: str) -> dict[str, Version]:
    """The current version of every source cell in the gradebook, by ``assignment/nb/cell``."""
    from nbgrader.api import Gradebook

    out: dict[str, Version] = {}
    with Gradebook(db_url) as gb:
        for assignment in gb.assignments:
            for nb in assignment.notebooks:
                points = {c.name: float(c.max_score) for c in nb.grade_cells}
                for cell in nb.source_cells:
                    key = f"{assignment.name}/{nb.name}/{cell.name}"
                    out[key] = version(cell.source, points.get(cell.name))
    return out


def load(course: Path) -> dict[str, list[Version]]:
    """The course's history (empty when it has none yet, or it does not parse)."""
    try:
        data = json.loads((course / HISTORY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, dict):
        return {}
    return {str(k): [v for v in vs if isinstance(v, dict)] for k, vs in cells.items()
            if isinstance(vs, list)}  # fmt: skip


def record(course: Path, db_url: str | None = None) -> int:
    """Add the gradebook's current versions to the history; returns how many were new."""
    db = db_url or f"sqlite:///{course / 'gradebook.db'}"
    if db_url is None and not (course / "gradebook.db").exists():
        return 0
    history = load(course)
    new = 0
    for key, current in gradebook_versions(db).items():
        known = history.setdefault(key, [])
        if current not in known:
            known.append(current)
            new += 1
    if new:
        tmp = course / f".{HISTORY}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"version": 1, "cells": history}, indent=1, sort_keys=True),
                       encoding="utf-8")  # fmt: skip
        os.replace(tmp, course / HISTORY)
    return new


def earlier_release(
    history: dict[str, list[Version]], key: str, source: str | None, points: float | None
) -> Version | None:
    """The recorded release whose cell ``key`` had this handed-in ``source`` (either form: as
    written or as released; ``None``: not compared) and ``points``; ``None`` when no release did."""
    for known in history.get(key, []):
        if known.get("points") != points:
            continue
        if source is None or digest(source) in (known.get("source"), known.get("released")):
            return known
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="add the gradebook's current release to releases.json")
    rec.add_argument("--course", type=Path, required=True)
    rec.add_argument("--db-url", default=os.environ.get("COURSE_DB_URL") or None)
    args = parser.parse_args(argv)
    new = record(args.course.resolve(), args.db_url)
    print(f"releases.json: {new} new cell version(s) recorded" if new else
          "releases.json: the gradebook's release is already recorded")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
