"""Time the real grading pipeline on simulated classes (a script, not part of ``make test``).

Each simulated student hands in all four assignments; each notebook is drawn from the catalog
(mostly correct solutions, some planted mistakes, a few untouched releases, a few hazards), so
the grader does realistic work. Everything runs through the real nbgrader CLI, one command per
step, on a temporary copy of the course.

Usage::

    .venv/bin/python tests/submissions/simulate.py 1 30     # classes of 1 and of 30 students
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from submissions import (  # noqa: E402
    a1_functions,
    a1b_engine,
    a2_broadcasting,
    a2b_strided,
    a2c_kernels,
    a3_networks,
    a4_convolutions,
    a5_attention,
    a6_tokens,
    a7_gpt,
    a8_inference,
)
from submissions.catalog import build  # noqa: E402
from submissions.pipeline import (  # noqa: E402
    grade_all,
    make_course,
    nbgrader,
    notebooks,
    read_items,
    submit,
)

CATALOGS = {
    "a1_functions": a1_functions.CATALOG,
    "a1b_engine": a1b_engine.CATALOG,
    "a2_broadcasting": a2_broadcasting.CATALOG,
    "a2b_strided": a2b_strided.CATALOG,
    "a2c_kernels": a2c_kernels.CATALOG,
    "a3_networks": a3_networks.CATALOG,
    "a4_convolutions": a4_convolutions.CATALOG,
    "a5_attention": a5_attention.CATALOG,
    "a6_tokens": a6_tokens.CATALOG,
    "a7_gpt": a7_gpt.CATALOG,
    "a8_inference": a8_inference.CATALOG,
}
WEIGHTS = {"solution": 6.0, "mistake": 3.0, "release": 1.0, "cheat": 0.5, "hazard": 0.5}


def simulate(students: int, seed: int = 0) -> dict[str, float]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="torchlight-simulate-") as where:
        course = make_course(Path(where))
        seconds = {"release": nbgrader(course, "generate_assignment", "*", "--force")}
        for assignment, catalog in CATALOGS.items():
            source, release = notebooks(course, assignment)
            for n in range(students):
                sub = rng.choices(catalog, weights=[WEIGHTS[s.kind] for s in catalog])[0]
                nb = build(sub, source, release)

                submit(course, f"student{n:03d}", assignment, nb)
        start = time.perf_counter()
        seconds.update(grade_all(course))
        seconds["grading total"] = time.perf_counter() - start
        graded = read_items(course)
        assert len(graded) == students * len(CATALOGS), f"only {len(graded)} notebooks graded"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("classes", nargs="+", type=int, help="class sizes to time")
    args = parser.parse_args()
    for students in args.classes:
        seconds = simulate(students)
        notebooks_graded = students * len(CATALOGS)
        print(f"\n{students} student(s), {notebooks_graded} notebooks:")
        for step, s in seconds.items():
            print(f"  {step:>14}: {s:7.1f} s")
        per = seconds["autograde"] / notebooks_graded
        print(f"  autograde per notebook: {per:.1f} s; per student (4 notebooks): {4 * per:.1f} s")


if __name__ == "__main__":
    main()
