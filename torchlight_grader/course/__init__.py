"""Grading a whole class: the top layer of the grading side, run as ``python -m`` entry points.

- ``python -m torchlight_grader.course.manage build|check|grade``: the course's notebooks from
  their jupytext sources, and a serial grade (:mod:`.manage`);
- ``python -m torchlight_grader.course.grade``: the incremental, concurrent grade of a class,
  with its local pool of grading processes (:mod:`.grade`) and the Dask path beside it
  (:mod:`.dask`); each grading process is a :class:`.batch.Worker`;
- ``python -m torchlight_grader.course.report``: the class report;
- ``python -m torchlight_grader.course.homework``: the self-learner's release and check.

Below it: :mod:`torchlight_grader.nbgrader` (what nbgrader loads), :mod:`torchlight_grader.checks`
(what is graded), :mod:`torchlight_grader.sandbox` (where student code runs).
"""

import sys


def skip_slow_imports() -> None:
    """Do not import ``rfc3987_syntax``.

    jsonschema imports it, when it is installed, only to check the ``iri`` string format, and it
    builds a grammar at import time (0.8 s, a third of an nbgrader start-up). Neither nbformat's
    notebook schema nor nbgrader ever asks for that format, so no check is lost.
    ``torchlight_grader/sandbox/inside/run_notebook.py`` does the same inside the sandbox.
    """
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


# Before any module here imports nbformat or nbgrader: 0.8 s of every grading process's start.
# Every entry point of the course's tools (``python -m torchlight_grader.course.X``, a Dask
# worker's task) imports this package first, so this is the one call. (Here, not in .batch:
# ``python -m torchlight_grader.course.batch`` must not find its own module imported by the
# package first, which runpy warns about in every grading log.)
skip_slow_imports()
