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

from torchlight_grader.course.batch import skip_slow_imports

# Before any module here imports nbformat or nbgrader: 0.8 s of every grading process's start.
skip_slow_imports()
