"""Per-student variants: an item draws a parameter (a constant, a function to differentiate, a
shape) from the student's id, so that two students see different but equally hard versions.

The draw is ``sha256("<salt>/<assignment>/<item>/<student>")`` reduced to one of the item's
choices: stable (the instructor reproduces any student's variant with :func:`draw`), the same
on both sides, and not the student's to choose:

- **at grading**, the student is the owner of the submission (nbgrader's student id, from the
  exchange's account at collect), never anything the notebook says: :class:`VariantCheck` gives
  the hidden check of that student's variant (``grader.grade(student=...)``), and the notebook's
  own runs (the feedback's kernel run, the grader's sandbox) get ``TORCHLIGHT_STUDENT`` set to it
  first (:func:`student_line`);
- **at the student's side**, the released notebook's setup cell draws the same way from
  ``TORCHLIGHT_STUDENT``, else ``JUPYTERHUB_USER`` (a course's JupyterHub), else ``learner``
  (``make homework``'s id, the one ``homework-check`` grades), and prints the variant.

The release is one notebook for everyone (nbgrader's), so the draw is in it and the salt is not
a secret from students: a student who sets another id only sees that student's variant, and is
still graded on their own. A secret salt would only hide which variant a classmate has, which
the classmate can tell anyway. Change :data:`SALT` (and the setup cells that draw) for a new
term so that last term's answers are for other variants.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torchlight_grader.checks.check import Check

#: The course's salt (the same string is in the setup cells of the notebooks that draw).
SALT = "torchlight-autograd"
#: The id of ``make homework``'s learner (``torchlight_grader.course.homework.STUDENT``).
LEARNER = "learner"
#: The environment variable a notebook's setup cell reads first.
ENV = "TORCHLIGHT_STUDENT"


def draw(assignment: str, item: str, student: str, choices: Sequence[Any], salt: str = SALT) -> Any:
    """``student``'s variant of ``item``: one of ``choices``."""
    if not choices:
        raise ValueError(f"{assignment}/{item}: expected at least one choice, got none")
    key = f"{salt}/{assignment}/{item}/{student}".encode()
    return choices[int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % len(choices)]


def student_from_env() -> str:
    """The student id a notebook's setup cell uses (``TORCHLIGHT_STUDENT``, ``JUPYTERHUB_USER``,
    else ``learner``)."""
    return os.environ.get(ENV) or os.environ.get("JUPYTERHUB_USER") or LEARNER


def student_line(student: str) -> str:
    """The line run before a submission's first code cell wherever the grader runs it (the
    feedback's kernel, the hidden checks' sandbox): its setup cell then draws the owner's
    variant."""
    return f"import os as _os; _os.environ[{ENV!r}] = {student!r}; del _os\n"


@dataclass
class VariantCheck:
    """The hidden check of an item with variants: ``make(choice)`` is the check of one variant.

    ``grader.grade`` asks :meth:`for_student` with the submission's owner; used as a plain check
    (``self_check`` in the source notebook's kernel), it is the variant of
    :func:`student_from_env`, as the notebook's own setup cell draws it."""

    assignment: str
    item: str
    choices: tuple[Any, ...]
    make: Callable[[Any], Check]

    def choice(self, student: str) -> Any:
        return draw(self.assignment, self.item, student, self.choices)

    def for_student(self, student: str) -> Check:
        return self.make(self.choice(student))

    def __getattr__(self, name: str) -> Any:  # cases, spec, judge, cells, ...: the env's variant
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.for_student(student_from_env()), name)
