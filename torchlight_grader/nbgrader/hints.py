"""Progressive hints: written by the instructor on a test cell, unlocked one at a time after
failed attempts, on the student's own machine, without a network.

**Where the instructor writes them.** In the source notebook, as the test cell's own metadata
beside nbgrader's (the jupytext header line of the cell)::

    # %% nbgrader={"grade": true, "grade_id": "test_div", ...} torchlight={"hints": ["first", "second"]}

nbgrader's ``generate_assignment`` keeps a cell's metadata, so the released notebook carries
them; they are never in the cell's source, so nothing of them is in the hidden part, and a hint
is only the text the instructor chose: a failed hidden check never writes into it.

**When they unlock.** Every failed attempt at an item counts once: a Validate (the button in
JupyterLab; :func:`on_cell_error`, an nbclient hook of nbgrader's ``Execute``, set in the student's
``nbgrader_config.py``: ``tools/jupyter/homework/nbgrader_config.py`` for ``make homework``)
whose run of the item's visible tests fails, and a ``make homework-check`` whose hidden checks
fail the item (``torchlight_grader.course.homework``). An item not started counts no attempt
(Validate: its test raised ``NotImplementedError``, the released stub's error; homework-check:
the answer cell just above the test is as released). After ``n`` failed attempts the first
``n`` hints are shown (under the failed cell in Validate's dialog, under the item's FAIL row in
``homework-check``).

**Where the count lives.** With the student: :data:`FILE` (``hints-used.json``) in the
notebook's folder, ``{"test_div": 2, ...}``. ``nbgrader submit`` hands it in with the notebook,
and ``make course-collect`` takes it out of the submission (never graded) into
``hints/<assignment>.json`` for the class report (:func:`record`, :func:`recorded`). A student who
edits the file, or reads the hints in the notebook's metadata (JupyterLab's property inspector
shows them), unlocks hints early: their own loss, and nothing else; no step that computes a
grade reads this file or the hints (``tests/test_course_term3.py`` grades the same notebook with
and without a forged file).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import nbformat

#: The attempt count, in the notebook's folder (the student's side) and in each submission.
FILE = "hints-used.json"
#: Where the course keeps what collect took out of the submissions: ``<course>/hints/<A>.json``.
FOLDER = "hints"
#: A count file larger than this, or a count above :data:`MAX_COUNT`, is not read.
MAX_BYTES = 8000
MAX_COUNT = 1000
#: The error of an answer cell as released (``raise NotImplementedError()``): not an attempt.
NOT_STARTED = "NotImplementedError"
_GRADE_ID = re.compile(r"^[a-zA-Z0-9_\-]{1,100}$")  # nbgrader's grade_id pattern (bounded)


def hints_of(cell: Any) -> list[str]:
    """The hints written on a cell (``metadata.torchlight.hints``), [] for none or malformed."""
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    ours = meta.get("torchlight") if isinstance(meta, dict) else None
    hints = ours.get("hints") if isinstance(ours, dict) else None
    if not isinstance(hints, list):
        return []
    return [h for h in hints if isinstance(h, str) and h.strip()]


def grade_id_of(cell: Any) -> str | None:
    """The grade_id of a graded test cell (nbgrader ``grade`` and not ``solution``), else None."""
    outer = cell.get("metadata") if isinstance(cell, dict) else None
    meta = outer.get("nbgrader") if isinstance(outer, dict) else None
    if not isinstance(meta, dict) or not meta.get("grade") or meta.get("solution"):
        return None
    grade_id = meta.get("grade_id")
    return grade_id if isinstance(grade_id, str) and _GRADE_ID.match(grade_id) else None


def parse(data: bytes | str) -> dict[str, int]:
    """``grade_id -> failed attempts`` from a count file's bytes; what is malformed (not JSON,
    too large, a bad id or count) is left out, never an error: the file is the student's."""
    if len(data) > MAX_BYTES:
        return {}
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {
        k: v
        for k, v in raw.items()
        if isinstance(k, str) and _GRADE_ID.match(k) and type(v) is int and 0 <= v <= MAX_COUNT
    }


def read_used(folder: Path) -> dict[str, int]:
    """The counts of ``folder/hints-used.json`` ({} when missing or unreadable)."""
    path = folder / FILE
    try:
        if path.is_symlink() or not path.is_file():
            return {}
        with open(path, "rb") as f:
            return parse(f.read(MAX_BYTES + 1))
    except OSError:
        return {}


def failed_attempt(folder: Path, grade_id: str, hints: list[str]) -> list[str]:
    """Count one failed attempt at ``grade_id`` in ``folder/hints-used.json``; returns the hints
    unlocked now (the first ``attempts`` of ``hints``)."""
    used = read_used(folder)
    used[grade_id] = min(MAX_COUNT, used.get(grade_id, 0) + 1)
    path = folder / FILE
    tmp = folder / f".{FILE}.tmp"
    tmp.write_text(json.dumps(used, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return hints[: used[grade_id]]


def format_hints(shown: list[str], total: int, indent: str = "") -> str:
    """``Hint 1 of 3: ...`` lines, and how the next one unlocks."""
    lines = [f"{indent}Hint {i} of {total}: {text}" for i, text in enumerate(shown, 1)]
    if len(shown) < total:
        lines.append(f"{indent}(the next hint unlocks after your next failed attempt)")
    return "\n".join(lines)


def on_cell_error(cell: Any, cell_index: int, execute_reply: Any) -> None:
    """nbclient's ``on_cell_error`` hook, for the student's Validate (``c.Execute.on_cell_error``;
    called once a cell's outputs are in, for a cell that raised): a graded test cell with hints
    whose visible tests failed counts one failed attempt, and the hints unlocked are added to its
    output (stderr, which Validate's dialog shows under the cell's error). The Validator runs in
    the notebook's folder, so the count goes there."""
    grade_id, written = grade_id_of(cell), hints_of(cell)
    if grade_id is None or not written:
        return
    if execute_reply.get("content", {}).get("ename") == NOT_STARTED:  # the released stub
        return
    shown = failed_attempt(Path.cwd(), grade_id, written)
    text = format_hints(shown, len(written))
    cell.outputs.append(
        nbformat.from_dict({"output_type": "stream", "name": "stderr", "text": text + "\n"})
    )


def record(course: Path, assignment: str, student: str, data: bytes) -> dict[str, int]:
    """Keep the counts a submission carried (``make course-collect``) in
    ``<course>/hints/<assignment>.json``; returns them as read (malformed entries dropped)."""
    used = parse(data)
    folder = course / FOLDER
    folder.mkdir(exist_ok=True)
    path = folder / f"{assignment}.json"
    everyone = recorded(course, assignment)
    everyone[student] = used
    tmp = folder / f".{assignment}.json.tmp"
    tmp.write_text(json.dumps(everyone, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return used


def recorded(course: Path, assignment: str) -> dict[str, dict[str, int]]:
    """``student -> grade_id -> failed attempts`` as collected for ``assignment``."""
    path = course / FOLDER / f"{assignment}.json"
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {s: parse(json.dumps(v)) for s, v in raw.items() if isinstance(v, dict)}
