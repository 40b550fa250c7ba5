"""The capstone's leaderboard: every recipe re-run by the grader, the top ones twice.

``make course-leaderboard`` (``python -m torchlight_grader.course.leaderboard --course DIR``)
reads each student's latest capstone notebook in ``DIR/submitted/<student>/a9_capstone/``
and scores it the way the hidden check does (:mod:`torchlight_grader.checks.a9_capstone`): the
recipe trains in a sandbox from the board's seed, within the CPU budget, on relabelled tokens;
the grader measures the validation loss itself. Nothing a notebook says about its own loss,
and nothing the autograde step recorded, is read. Then the ``--top`` best entries are run once
more from the same seed; an entry whose second run does not give the same loss is published
with the worse of the two and marked "not reproduced".

The seed is drawn once per course and kept in ``DIR/leaderboard/seed`` (readable by the
instructor only), so regrading gives the same board. The board is written as
``DIR/leaderboard/board.csv`` and ``board.html`` (every value escaped, no script); the class
report (``make course-report``) shows it.

What scores nothing, by construction: a loss the recipe prints (not read), the validation text
(not in the sandbox), a run past the CPU budget (every process counted by the sandbox's
broker), trained weights shipped in the notebook (the tokens are relabelled by a secret
permutation; code over 24 KiB is not ranked), another student's run (a sandbox of its own).
"""

from __future__ import annotations

import argparse
import html
import math
import os
import secrets
import stat
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from torchlight_grader.checks import a9_capstone as capstone
from torchlight_grader.checks.check import Case
from torchlight_grader.checks.grader import Cell, grade
from torchlight_grader.nbgrader.spreadsheet import write_rows
from torchlight_grader.sandbox import Limits

ASSIGNMENT = "a9_capstone"
ITEM = "test_recipe"
MAX_NOTEBOOK_BYTES = 4 * 1024**2
COLUMNS = ["rank", "student_id", "loss", "status", "runs", "note"]


@dataclass
class Entry:
    student: str
    loss: float = math.inf
    status: str = "not run"  # ranked | not reproduced | over budget | failed | not ranked
    note: str = ""
    runs: int = 0
    cells: list[Cell] = field(default_factory=list, repr=False)  # kept for the re-run


def roles(source: Path) -> dict[str, tuple[str, str]]:
    """grade id -> (role, the instructor's source) of the course's own capstone notebook."""
    nb = nbformat.read(source, as_version=4)
    out = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if cell.cell_type != "code" or not grade_id:
            continue
        role = "answer" if meta.get("solution") else "test" if meta.get("grade") else "locked"
        out[grade_id] = (role, cell.source)
    return out


def cells_of(notebook: Path, layout: dict[str, tuple[str, str]]) -> list[Cell]:
    """The submission's code cells as the grader runs them: locked and test cells as the
    instructor wrote them, answer cells and added cells as the student did."""
    fd = os.open(notebook, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError("not a regular file")
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"the notebook is over {MAX_NOTEBOOK_BYTES // 1024**2} MiB")
    nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    cells = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code" or not isinstance(cell.get("source"), str):
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        role, original = layout.get(grade_id, ("student", "")) if grade_id else ("student", "")
        source = cell.source if role in ("answer", "student") else original
        cells.append(Cell(role, grade_id if role != "student" else None, source))
    return cells


def run_once(cells: Sequence[Cell], seed: int, limits: Limits) -> tuple[float, str]:
    """One sandboxed run of the recipe: (validation loss, why there is none)."""
    kept: dict[str, list[Case]] = {}
    verdict = grade(ASSIGNMENT, cells, [ITEM], seed=seed, limits=limits, keep=kept)[ITEM]
    loss = kept[ITEM][0].hidden.get("loss") if kept.get(ITEM) else None
    if isinstance(loss, float):
        return loss, ""
    return math.inf, verdict.message


def score(student: str, notebook: Path, layout: dict[str, tuple[str, str]], seed: int,
          limits: Limits) -> Entry:  # fmt: skip
    entry = Entry(student)
    try:
        cells = cells_of(notebook, layout)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        entry.status, entry.note = "failed", f"the notebook could not be read: {exc}"
        return entry
    written = [c.source for c in cells if c.role in ("answer", "student")]
    if capstone.code_size(written) > capstone.CODE_LIMIT:
        entry.status = "not ranked"
        entry.note = f"code over {capstone.CODE_LIMIT // 1024} KiB"
        return entry
    entry.loss, why = run_once(cells, seed, limits)
    entry.runs = 1
    if why and "CPU time" in why:  # (how far over varies with the machine: not on the board)
        entry.status, entry.note = "over budget", f"past {capstone.CPU_BUDGET:g} s of CPU time"
    elif why:  # the error itself, not the inputs' description (it names the grader's seed)
        entry.status, entry.note = "failed", why.splitlines()[0].split(" raised ")[-1][:300]
    else:
        entry.status = "ranked"
    entry.cells = cells
    return entry


def rerun(entry: Entry, seed: int, limits: Limits) -> None:
    """Run a top entry again: published with the worse loss, marked if the two differ."""
    loss, why = run_once(entry.cells, seed, limits)
    entry.runs += 1
    if why or not math.isclose(loss, entry.loss, rel_tol=1e-9, abs_tol=1e-12):
        entry.status = "not reproduced"
        entry.note = f"a second run gave {loss:.4f}" + (
            f" ({why.splitlines()[0][:200]})" if why else ""
        )
        entry.loss = max(entry.loss, loss)


def course_seed(folder: Path) -> int:
    """The board's seed: drawn once per course, kept for every later regrade."""
    path = folder / "seed"
    if path.exists():
        return int(path.read_text().strip())
    folder.mkdir(parents=True, exist_ok=True)
    seed = secrets.randbits(31)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{seed}\n")
    return seed


def build_board(course: Path, top: int = 3, jobs: int = 1, seed: int | None = None) -> list[Entry]:
    """Score every submission, re-run the top ``top``, write the CSV and HTML; the entries."""
    source = course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    if not source.is_file():
        raise FileNotFoundError(f"{source} not found: build the course first (make course-release)")
    layout = roles(source)
    folder = course / "leaderboard"
    seed = course_seed(folder) if seed is None else seed
    limits = Limits()
    submitted = sorted((course / "submitted").glob(f"*/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"))
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        entries = list(pool.map(lambda nb: score(nb.parents[1].name, nb, layout, seed, limits),
                                submitted))  # fmt: skip
    ranked = sorted((e for e in entries if e.status == "ranked"), key=lambda e: (e.loss, e.student))
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(lambda e: rerun(e, seed, limits), ranked[:top]))
    order = sorted(
        entries, key=lambda e: (e.status not in ("ranked", "not reproduced"), e.loss, e.student)
    )
    write(folder, order)
    return order


def rows(entries: Sequence[Entry]) -> list[list[str]]:
    out, rank = [], 0
    for e in entries:
        placed = e.status in ("ranked", "not reproduced")
        rank += placed
        loss = f"{e.loss:.4f}" if math.isfinite(e.loss) else ""
        out.append([str(rank) if placed else "", e.student, loss, e.status, str(e.runs), e.note])
    return out


def write(folder: Path, entries: Sequence[Entry]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    table = rows(entries)
    write_rows(folder / "board.csv", [COLUMNS, *table])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>\n" for row in table
    )
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    page = (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>Capstone leaderboard</title>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\"><style>body{font-family:sans-serif}td,th{padding:2px 8px;"
        "text-align:left}</style></head><body><h1>Capstone leaderboard</h1>"
        f"<p>Validation loss in nats per character, measured by the grader; lower is better. "
        f"Every recipe was re-run by the grader (CPU budget {capstone.CPU_BUDGET:g} s); the "
        "top entries twice.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table></body></html>\n"
    )
    (folder / "board.html").write_text(page, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--course", required=True, type=Path)
    parser.add_argument("--top", type=int, default=3, help="entries re-run before publishing")
    parser.add_argument("--jobs", type=int, default=1, help="recipes run at once")
    args = parser.parse_args(argv)
    try:
        entries = build_board(args.course, args.top, args.jobs)
    except FileNotFoundError as exc:
        print(f"course-leaderboard: {exc}", file=sys.stderr)
        return 2
    placed = sum(e.status in ("ranked", "not reproduced") for e in entries)
    print(f"leaderboard: {placed} of {len(entries)} recipes ranked -> "
          f"{args.course / 'leaderboard' / 'board.html'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
