"""The one CSV writer of the grading side: every CSV the project writes goes through
:func:`write_rows`, so no cell anywhere starts as a spreadsheet formula.

Student ids, refused entries' names and refused files' names come from names a student chose
(a folder in the exchange, a file in a submission), so any of them may be ``=HYPERLINK(...)``.
The layout guard (``tests/test_layout.py``) holds that no other module of ``torchlight_grader``
calls ``csv.writer`` or ``csv.DictWriter``.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path

#: What a spreadsheet reads as the start of a formula (OWASP's CSV-injection rule): ``= + - @``,
#: tab and carriage return.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: object) -> object:
    """A CSV cell no spreadsheet runs as a formula: text starting with ``= + - @``, tab or CR
    gets a leading ``'`` (OWASP's rule); numbers and other text pass unchanged.

    Example::

        spreadsheet_safe("=1+1")  # "'=1+1"
        spreadsheet_safe(2.5)     # 2.5
    """
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def safe_rows(rows: Iterable[Sequence[object]]) -> list[list[object]]:
    """Every cell of ``rows`` through :func:`spreadsheet_safe`."""
    return [[spreadsheet_safe(cell) for cell in row] for row in rows]


def write_rows(path: str | Path, rows: Iterable[Sequence[object]], append: bool = False) -> None:
    """Write (or with ``append``, add) ``rows`` to the CSV file ``path``, every cell guarded."""
    with open(path, "a" if append else "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(safe_rows(rows))
