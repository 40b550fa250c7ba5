"""The catalog of student submissions the course is graded against, and how to build them.

A submission is a *recipe*: start from the released notebook with every answer cell either
left as released (``base="release"``) or filled with the instructor's solution
(``base="solution"``), then apply edits, the way a student would (rewrite an answer, add a
cell, delete a test cell, change metadata). Keeping recipes instead of ``.ipynb`` files keeps
the catalog reviewable and always in step with the assignment sources.

Expected grades: every item gets full marks under ``base="solution"`` and zero under
``base="release"``, except the items listed in ``zero`` / ``full``.

``files`` are changes to the handed-in folder itself (a symlink instead of the notebook, a
truncated file), made after the notebook is written. ``@COURSE@``, ``@REPO@`` and ``@VENV@`` in
a cell's source become the real paths when the notebook is built (an attacker who knows where
everything is).

``fools_kernel`` lists items whose *in-kernel* test cell the submission makes pass although the
answer is wrong: the test checks that this really happens (the cheat is real) and that the
grade is still zero (the cheat does not work on the autograder).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

Edit = Callable[[Any], None]

_SOLUTION_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


@dataclass(frozen=True)
class Submission:
    name: str
    assignment: str
    kind: str  # solution | release | mistake | cheat | hazard
    base: str  # solution | release
    edits: tuple[Edit, ...] = ()
    zero: tuple[str, ...] = ()
    full: tuple[str, ...] = ()
    fools_kernel: tuple[str, ...] = ()
    files: tuple[Callable[[Path, Path], None], ...] = ()  # (submission folder, course) -> None
    note: str = field(default="", compare=False)
    members: tuple[Submission, ...] = field(default=(), compare=False)  # (together())

    @property
    def student(self) -> str:
        return f"{self.assignment}--{self.name}"

    def expected(self, items: dict[str, float]) -> dict[str, float]:
        """Expected score per item, given ``items``: grade_id -> max points."""
        expected = {}
        for item, points in items.items():
            full = item in self.full if self.base == "release" else item not in self.zero
            expected[item] = points if full else 0.0
        return expected


def together(name: str, *members: Submission) -> Submission:
    """One notebook carrying several planted mistakes (or cheats) of one assignment, each defined
    (and named in the assignment's README) on its own: their edits in answer cells of their own,
    each costing items of its own (the ``zero`` sets are disjoint). The course's suite then
    grades it once instead of once per member (an a2c notebook costs about 30 s of CPU to
    grade). Every member's items must still score zero and every other item full, and a cheat's
    integrity finding (``FLAGGED``) must be there; what such a notebook can no longer show is a
    member that also cost another member's item. ``tests/test_course.py`` builds each member
    alone and checks that their edits touch different cells. Only a cheat that changes nothing
    outside its own cell may share a notebook: one that patches a builtin, a module or a clock,
    or starts a thread, could cost a neighbour's items for the wrong reason. The notebook fools
    the in-kernel tests its members fool (``fools_kernel``), each still checked."""
    first = members[0]
    zeros = [item for m in members for item in m.zero]
    alike = all(
        (m.assignment, m.base) == (first.assignment, "solution") and m.kind in ("mistake", "cheat")
        for m in members
    )
    if len(members) < 2 or not alike or len(set(zeros)) != len(zeros):
        raise ValueError(
            f"together({name!r}): expected two or more mistakes or cheats of one assignment on the "
            "solution, each costing items of its own; got "
            f"{[(m.name, m.kind, m.zero) for m in members]}"
        )
    if any(m.full or m.files or m.members for m in members):
        raise ValueError(f"together({name!r}): only plain edits of answer cells can share one")
    return Submission(
        name,
        first.assignment,
        "cheat" if any(m.kind == "cheat" for m in members) else "mistake",
        "solution",
        tuple(edit for m in members for edit in m.edits),
        zero=tuple(zeros),
        fools_kernel=tuple(item for m in members for item in m.fools_kernel),
        note="; ".join(f"{m.name} ({', '.join(m.zero)}): {m.note}" for m in members),
        members=members,
    )


def grouped(catalog: list[Submission], groups: dict[str, tuple[str, ...]]) -> list[Submission]:
    """``catalog`` with each group's members (entries named in it, each still defined where it
    stands) replaced by one notebook carrying them all (:func:`together`), where the first of
    them stood."""
    by_name = {s.name: s for s in catalog}
    named = [m for members in groups.values() for m in members]
    if len(set(named)) != len(named) or not set(named) <= by_name.keys():
        raise ValueError(
            f"grouped: each member must be one entry of the catalog, once; got {named}"
        )
    first = {members[0]: group for group, members in groups.items()}
    return [
        together(first[s.name], *[by_name[m] for m in groups[first[s.name]]]) if s.name in first
        else s
        for s in catalog
        if s.name in first or s.name not in named
    ]  # fmt: skip


def cell_by_id(nb: Any, grade_id: str) -> Any:
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            return cell
    raise KeyError(f"no cell {grade_id!r}")


def solution_source(source_cell: Any) -> str:
    """The instructor's answer as a student would type it: the marker lines removed."""
    lines = source_cell.source.split("\n")
    return "\n".join(line for line in lines if not _SOLUTION_MARKER.match(line))


def build(
    sub: Submission, source_nb: Any, release_nb: Any, paths: dict[str, str] | None = None
) -> Any:
    """The notebook a student hands in for ``sub`` (``paths``: ``{"COURSE": ..., ...}``)."""
    nb = copy.deepcopy(release_nb)
    if sub.base == "solution":
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("solution"):
                cell.source = solution_source(cell_by_id(source_nb, meta["grade_id"]))
    for edit in sub.edits:
        edit(nb)
    for cell in nb.cells:
        for key, value in (paths or {}).items():
            cell.source = cell.source.replace(f"@{key}@", value)
    nbformat.validate(nb)
    return nb


# ------------------------------------------------------------------------------ edits
def replace(grade_id: str, source: str) -> Edit:
    """Rewrite a cell's source."""

    def edit(nb: Any) -> None:
        cell_by_id(nb, grade_id).source = source.strip("\n")

    return edit


def substitute(grade_id: str, old: str, new: str) -> Edit:
    """Change one line (or fragment) of a cell; fails loudly if ``old`` is not there."""

    def edit(nb: Any) -> None:
        cell = cell_by_id(nb, grade_id)
        if old not in cell.source:
            raise ValueError(f"{old!r} not in cell {grade_id!r}")
        cell.source = cell.source.replace(old, new)

    return edit


def prepend(grade_id: str, code: str) -> Edit:
    def edit(nb: Any) -> None:
        cell = cell_by_id(nb, grade_id)
        cell.source = code.strip("\n") + "\n" + cell.source

    return edit


def append(grade_id: str, code: str) -> Edit:
    def edit(nb: Any) -> None:
        cell = cell_by_id(nb, grade_id)
        cell.source = cell.source + "\n" + code.strip("\n")

    return edit


def add_cell(after: str, source: str) -> Edit:
    """A new code cell (no nbgrader metadata) after cell ``after``."""

    def edit(nb: Any) -> None:
        index = nb.cells.index(cell_by_id(nb, after))
        cell = nbformat.v4.new_code_cell(source.strip("\n"))
        cell.pop("id", None)  # the course's notebooks are nbformat 4.4 (no cell ids)
        nb.cells.insert(index + 1, cell)

    return edit


def delete(*grade_ids: str) -> Edit:
    def edit(nb: Any) -> None:
        for grade_id in grade_ids:
            nb.cells.remove(cell_by_id(nb, grade_id))

    return edit


def delete_tests() -> Edit:
    """Delete every test cell."""

    def edit(nb: Any) -> None:
        nb.cells = [
            c for c in nb.cells if not c.get("metadata", {}).get("nbgrader", {}).get("grade")
        ]

    return edit


def metadata(cell: str, **changes: Any) -> Edit:
    """Change a cell's nbgrader metadata (``None`` removes a key)."""

    def edit(nb: Any) -> None:
        meta = cell_by_id(nb, cell).metadata["nbgrader"]
        for key, value in changes.items():
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value

    return edit


def to_markdown(grade_id: str) -> Edit:
    def edit(nb: Any) -> None:
        cell = cell_by_id(nb, grade_id)
        index = nb.cells.index(cell)
        new = nbformat.v4.new_markdown_cell(cell.source, metadata=cell.metadata)
        new.pop("id", None)
        nb.cells[index] = new

    return edit


def fake_outputs(grade_id: str) -> Edit:
    """Pre-fill a test cell with a passing output and a partial-credit result."""

    def edit(nb: Any) -> None:
        cell = cell_by_id(nb, grade_id)
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="all tests passed\n"),
            nbformat.v4.new_output(
                "execute_result", data={"text/plain": "100.0"}, execution_count=1
            ),
        ]

    return edit
