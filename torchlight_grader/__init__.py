"""Grading for the torchlight nbgrader course: hidden checks and an autograder that runs them
outside the student's kernel.

- :mod:`~torchlight_grader.checks.registry` maps each test cell to a hidden check;
- :mod:`~torchlight_grader.checks.check`, :mod:`~torchlight_grader.checks.kinds` define the checks;
- :mod:`~torchlight_grader.sandbox`, :mod:`~torchlight_grader.child` run student code in
  separate, resource-limited processes;
- :mod:`~torchlight_grader.checks.grader` judges the sandbox's raw outputs in the grader's process;
- :mod:`~torchlight_grader.nbgrader.plugins` plugs all of it into ``nbgrader autograde``.

Inside a notebook, :func:`self_check` runs the same check in the student's own kernel. That is
a convenience for instructors validating their source notebooks, never the grade: the grade is
decided by the autograder, which re-runs every check in a sandbox.
"""

from __future__ import annotations

from typing import Any

__all__ = ["self_check"]


def self_check(notebook: str, grade_id: str, namespace: dict[str, Any], seed: int = 0) -> None:
    """Run the hidden check of test cell ``grade_id`` in this kernel; raise AssertionError with
    the teaching message when it fails."""
    import numpy as np

    from torchlight_grader.checks import registry

    check = registry.find(notebook, grade_id)
    if check is None:
        raise LookupError(f"no hidden check registered for {notebook!r} / {grade_id!r}")
    cases = check.cases(np.random.default_rng(seed))
    received = []
    for n, case in enumerate(cases):
        received.append(check.run(namespace, case))
        message = check.judge(case, received[-1], check.expected(case))
        if message:
            raise AssertionError(f"trial {n + 1} of {len(cases)}: {message}")
    print(check.passed_on(cases, received))
