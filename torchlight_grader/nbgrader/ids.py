"""Student ids the course accepts: a documented safe alphabet.

A student id becomes a folder name (``submitted/<id>/``), a CSV cell (``grades.csv``,
``canvas.csv``) and part of a shell-visible path. nbgrader takes it from the name of a folder the
student writes in the exchange (``<id>+<assignment>+<time>+<random>``), so it is student input.
Only ids matching :data:`SAFE_STUDENT_ID` are accepted: an ASCII letter or digit first (never
``= + - @``, a dot or a tab, so no spreadsheet formula and no hidden folder), then up to 63 letters,
digits, ``_``, ``.`` or ``-`` (no ``/``, ``+``, spaces, quotes or control characters).
"""

from __future__ import annotations

import re

SAFE_STUDENT_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_SAFE = re.compile(SAFE_STUDENT_ID)


def is_safe_student_id(student_id: object) -> bool:
    """Whether ``student_id`` matches :data:`SAFE_STUDENT_ID` (``"alice"`` yes, ``"=1+1"`` no).

    >>> is_safe_student_id("s8_ok"), is_safe_student_id("=HYPERLINK(1)")
    (True, False)
    """
    return isinstance(student_id, str) and _SAFE.fullmatch(student_id) is not None


def unsafe_student_id_message(student_id: object) -> str:
    """The refusal, naming what was expected and what came."""
    return (
        f"student id {str(student_id)[:80]!r} is outside the course's safe alphabet "
        f"(expected {SAFE_STUDENT_ID}: a letter or digit, then up to 63 letters, digits, "
        "'_', '.' or '-')"
    )
