"""Drive the real nbgrader CLI over a temporary copy of the course (used by the tests and by
``simulate.py``).

Every step is one nbgrader command over all assignments at once (``"*"``), because each
nbgrader command costs a few seconds of start-up.
"""

from __future__ import annotations

import atexit
import csv
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COURSE_FILES = ("nbgrader_config.py", "source", "course.mk")


def make_course(where: Path) -> Path:
    """A fresh copy of ``assignments/`` (sources and config only) with its notebooks built."""
    course = where / "course"
    course.mkdir(parents=True)
    for name in COURSE_FILES:
        src = ROOT / "assignments" / name
        if src.is_dir():
            shutil.copytree(
                src, course / name, ignore=shutil.ignore_patterns("*.ipynb", "__pycache__")
            )
        elif src.exists():
            shutil.copy(src, course / name)
    subprocess.run([sys.executable, "-m", "torchlight_grader.course.manage", "build", str(course)], check=True,
                   capture_output=True)  # fmt: skip
    return course


_RELEASED: dict[str, Path] = {}


def released_course(where: Path, assignment: str = "a1_functions") -> Path:
    """``make_course(where)`` then ``nbgrader generate_assignment ASSIGNMENT --force``, as a copy:
    the course is built and released once per test session (~10 s: the course build and
    nbgrader's slowest instructor step) and every caller gets its own copy of that tree (its
    gradebook holds the assignment, no student), at ``where/course`` like ``make_course``'s."""
    if assignment not in _RELEASED:
        base = Path(tempfile.mkdtemp(prefix="torchlight-released-"))
        atexit.register(shutil.rmtree, base, True)
        course = make_course(base)
        nbgrader(course, "generate_assignment", assignment, "--force")
        _RELEASED[assignment] = course
    where.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(_RELEASED[assignment], where / "course", symlinks=True))


def nbgrader(course: Path, *args: str, log: list[str] | None = None) -> float:
    """Run ``nbgrader ARGS`` in the course directory; raise with its output if it fails.

    Returns the wall-clock seconds it took.
    """
    start = time.perf_counter()
    proc = subprocess.run(
        [str(BIN / "nbgrader"), *args],
        cwd=course,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
        check=False,
    )
    seconds = time.perf_counter() - start
    if log is not None:
        log.append(f"$ nbgrader {' '.join(args)}  ({seconds:.1f} s)\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        raise RuntimeError(
            f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
        )
    return seconds


def notebooks(course: Path, assignment: str) -> tuple[Any, Any]:
    """The instructor's source notebook and the released notebook of one assignment."""
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    release = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    return source, release


def submit(course: Path, student: str, assignment: str, nb: Any) -> None:
    """Place a notebook where ``nbgrader collect`` would: submitted/<student>/<assignment>/."""
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{assignment}.ipynb")
    (folder / "timestamp.txt").write_text("2026-01-15 12:00:00.000000 UTC")


def read_items(course: Path, path: str = "items.csv") -> dict[tuple[str, str], dict[str, float]]:
    """``(student, assignment) -> {grade_id: score}`` from the item export."""
    items: dict[tuple[str, str], dict[str, float]] = {}
    with open(course / path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            items.setdefault((row["student_id"], row["assignment"]), {})[row["grade_id"]] = float(
                row["score"]
            )
    return items


def read_totals(course: Path, path: str = "grades.csv") -> dict[tuple[str, str], dict[str, str]]:
    with open(course / path, newline="", encoding="utf-8") as f:
        return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}


def max_points(source_nb: Any) -> dict[str, float]:
    """``grade_id -> points`` of the test cells of a source notebook."""
    points = {}
    for cell in source_nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            points[meta["grade_id"]] = float(meta["points"])
    return points


def grade_all(
    course: Path, extra: Iterable[str] = (), log: list[str] | None = None
) -> dict[str, float]:
    """autograde + generate_feedback + both exports; seconds per step."""
    return {
        "autograde": nbgrader(course, "autograde", "*", "--force", *extra, log=log),
        "feedback": nbgrader(course, "generate_feedback", "*", "--force", log=log),
        "export": nbgrader(course, "export", "--to=grades.csv", log=log),
        "export_items": nbgrader(
            course,
            "export",
            "--exporter=torchlight_grader.nbgrader.export.ItemCsvExportPlugin",
            "--to=items.csv",
            log=log,
        ),
    }


def secret_lines(source_nb: Any) -> tuple[list[str], list[str]]:
    """Distinctive lines of the hidden tests and of the solutions of a source notebook."""
    hidden, answers = [], []
    for cell in source_nb.cells:
        region = None
        for line in cell.source.split("\n"):
            if "BEGIN HIDDEN TESTS" in line or "BEGIN SOLUTION" in line:
                region = hidden if "HIDDEN" in line else answers
            elif "END HIDDEN TESTS" in line or "END SOLUTION" in line:
                region = None
            elif region is not None and len(line.strip()) >= 20:
                region.append(line.strip())
    return hidden, answers


def stop_group(proc: subprocess.Popen, timeout: float) -> None:
    """End the process group ``proc`` leads (started with ``start_new_session``): SIGTERM, then
    SIGKILL if it is still running after ``timeout`` seconds."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
