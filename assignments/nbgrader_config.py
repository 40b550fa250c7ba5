"""nbgrader configuration of the torchlight course (run nbgrader from this directory).

Grades are decided outside the student's kernel: see ``torchlight_grader`` and the README's
"Grading you can trust" section. The student's notebook still runs in a kernel (in a sandbox
process) so that the feedback shows its outputs, but no test cell's grade depends on that run.
"""

import os

from nbconvert.preprocessors import Preprocessor

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file


def refuse_to_grade(c, error):
    """nbgrader logs a config file that fails to load and goes on with its own defaults, whose
    Execute preprocessor runs student code in an ordinary kernel, as this user, with the course in
    reach. So if anything below fails (a missing package, a broken torchlight_grader), every step
    that would run or judge student code is configured to refuse, with the reason."""
    reason = (
        f"{__file__} failed to load ({type(error).__name__}: {error}): refusing to run student "
        "code without the sandbox. Install the course (`pip install -e '.[course]'`, or "
        "`make venv`) and fix the error."
    )

    class RefuseToGrade(Preprocessor):
        def __call__(self, nb, resources):  # whether or not the preprocessor is "enabled"
            raise RuntimeError(reason)

    c.Autograde.sanitize_preprocessors = [RefuseToGrade]
    c.Autograde.autograde_preprocessors = [RefuseToGrade]
    c.GenerateFeedback.preprocessors = [RefuseToGrade]
    c.Validator.preprocessors = [RefuseToGrade]
    print(f"[torchlight] {reason}")


try:
    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        CheckCellMetadata,
        ClearHiddenTests,
        ClearOutput,
        DeduplicateIds,
        IgnorePattern,
        LimitOutput,
        OverwriteCells,
        OverwriteKernelspec,
        SaveAutoGrades,
    )

    from torchlight_grader.nbgrader.hostile import CheckSubmission, SanitizeNotebook
    from torchlight_grader.nbgrader.plugins import IsolatedGrader, RestoreGradedCells, SandboxedExecute
    from torchlight_grader.nbgrader.standing import CurrentGrades

    c.CourseDirectory.course_id = "torchlight-autograd"
    c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
    # The jupytext scripts next to each notebook hold the solutions: never copy them anywhere.
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py"]
    c.CourseDirectory.db_url = "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")

    # The in-kernel run (feedback outputs only): per-cell timeout, short tracebacks.
    c.Execute.timeout = 30
    c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--InteractiveShell.xmode=Minimal"]
    c.SandboxedExecute.total_timeout = 300
    c.SandboxedExecute.background = True  # IsolatedGrader collects it: the two sandboxes overlap
    c.LimitOutput.max_lines = 200
    c.LimitOutput.max_traceback = 40

    # The grade: hidden checks re-run outside the kernel (IsolatedGrader), on the notebook structure
    # rebuilt from the gradebook (RestoreGradedCells), recorded by nbgrader's SaveAutoGrades.
    c.IsolatedGrader.seed = None  # fresh hidden inputs every run; the seed is printed on failures
    c.IsolatedGrader.memory_limit = 2 * 1024**3
    c.IsolatedGrader.output_limit = 1024**2
    c.IsolatedGrader.cell_timeout = 30  # a cell still running then is skipped (in the sandbox)
    # One wall-clock budget per notebook (all cells and all checks), however many cells it has.
    c.IsolatedGrader.notebook_timeout = 300

    c.Autograde.sanitize_preprocessors = [
        CheckSubmission,  # refuse symlinked notebooks, drop malformed metadata (torchlight_grader.nbgrader.hostile)
        ClearOutput,
        DeduplicateIds,
        RestoreGradedCells,
        OverwriteKernelspec,
        OverwriteCells,
        CheckCellMetadata,
    ]
    c.Autograde.autograde_preprocessors = [
        SandboxedExecute,
        IsolatedGrader,
        IgnorePattern,
        ClearMetadataPreprocessor,
        LimitOutput,
        SanitizeNotebook,  # what the formgrader and the feedback render: no scripts, no raw HTML
        SaveAutoGrades,
        AssignLatePenalties,
        CheckCellMetadata,
    ]

    # Feedback shows each failure's message, never the hidden tests' code, and the current score:
    # CurrentGrades is nbgrader's GetGrades with the late penalty of the current score (manual
    # grades included) and the gradebook state the page shows (torchlight_grader/nbgrader/standing.py).
    c.GenerateFeedback.preprocessors = [
        CurrentGrades,
        SanitizeNotebook,
        CSSHTMLHeaderPreprocessor,
        ClearHiddenTests,
    ]

    # --- The gradebook and the exchange for a course of hundreds (make course-grade DB_URL=... JOBS=N,
    # make course-lab; see torchlight_grader/course/grade.py and the README's "The instructor's term") ---
    # COURSE_DB_URL selects another gradebook, e.g. PostgreSQL. On sqlite, several nbgrader processes
    # at once (JOBS=N, or the formgrader while grading) wait up to 10 min for sqlite's write lock
    # instead of failing with "database is locked".
    if os.environ.get("COURSE_DB_URL"):
        c.CourseDirectory.db_url = os.environ["COURSE_DB_URL"]
    elif c.CourseDirectory.db_url.startswith("sqlite:") and "?" not in c.CourseDirectory.db_url:
        c.CourseDirectory.db_url += "?timeout=600"
    # COURSE_EXCHANGE: a local exchange folder (make course-lab), instead of /srv/nbgrader/exchange.
    if os.environ.get("COURSE_EXCHANGE"):
        c.Exchange.root = os.environ["COURSE_EXCHANGE"]
    # A late submission loses 10% of its points per started day, down to zero (LateSubmissionPlugin).
    c.AssignLatePenalties.plugin_class = "torchlight_grader.nbgrader.late.PercentPerDayLate"
    c.PercentPerDayLate.percent_per_day = 10.0

    # --- The feedback page (torchlight_grader/nbgrader/feedback.py): each graded cell named in the table of
    # contents, verdicts that wrap, and a local MathJax inlined into the page (no CDN: the page
    # renders its math offline, and it travels alone through release_feedback/fetch_feedback).
    from torchlight_grader.nbgrader import feedback

    # Only generate_feedback's exporter gets the template: the Formgrader renders submissions with
    # nbgrader's own HTMLExporter ("formgrade" template), which must stay untouched.
    c.GenerateFeedback.exporter_class = "torchlight_grader.nbgrader.feedback.FeedbackExporter"
    c.FeedbackExporter.template_file = feedback.TEMPLATE_FILE
    c.FeedbackExporter.extra_template_basedirs = [
        str(feedback.TEMPLATES),
        str(feedback.nbgrader_templates()),
    ]
    c.FeedbackExporter.filters = {
        "mathjax_script": "torchlight_grader.nbgrader.feedback.mathjax_script",
        "points": "torchlight_grader.nbgrader.canvas.number",  # a score as canvas.csv writes it
    }
    # The Formgrader's grading page (nbgrader's HTMLExporter, "formgrade" template): the local
    # MathJax 2 the Jupyter server serves (jupyter-server-mathjax) instead of a CDN, so manual
    # grading works offline. Only its mathjax macro changes (templates/formgrader/base/).
    c.HTMLExporter.extra_template_basedirs = [
        str(feedback.TEMPLATES / "formgrader"),
        str(feedback.nbgrader_templates()),  # nbgrader's "formgrade" template (what it sets itself)
    ]

except Exception as error:  # noqa: BLE001 - any failure must fail closed
    refuse_to_grade(c, error)
