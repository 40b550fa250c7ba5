"""The one alphabet a student id may use, shared by collect, autograde and the exports.

A student id names folders (``submitted/<id>/``), gradebook rows and export cells. An id
outside this alphabet (a spreadsheet formula such as ``=HYPERLINK(...)``, a path, a name with
spaces or control characters) is refused with a message naming the id and the rule.
"""

from __future__ import annotations

import re

#: A letter or digit first (never ``= + - @``, a dot or a separator), then up to 63 letters,
#: digits, ``_``, ``.`` or ``-``.
SAFE_STUDENT_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_SAFE = re.compile(SAFE_STUDENT_ID)


def is_safe_student_id(student: object) -> bool:
    return isinstance(student, str) and _SAFE.fullmatch(student) is not None


def unsafe_student_id_message(student: object) -> str:
    return (
        f"student id {str(student)[:80]!r} is outside the course's safe alphabet "
        f"({SAFE_STUDENT_ID}: a letter or digit first, then letters, digits, '_', '.' or '-', "
        "at most 64 characters); rename the submission folder"
    )
