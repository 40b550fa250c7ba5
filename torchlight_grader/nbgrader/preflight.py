"""Refuse to grade unless the course's ``nbgrader_config.py`` loads and sandboxes student code.

nbgrader logs a config file that raises and goes on with its own defaults, whose ``Execute``
runs student code in an ordinary kernel as the grader's user. The course config guards itself
(``refuse_to_grade`` when anything inside it fails), but a syntax error stops that guard from
running at all, so the make targets load the file first, strictly, with the loader nbgrader uses.
"""

from __future__ import annotations

from pathlib import Path

REQUIRED = ("SandboxedExecute", "IsolatedGrader")


class CourseConfigError(RuntimeError):
    """The course's nbgrader configuration would let nbgrader run student code unsandboxed."""


def check_config(course: Path) -> None:
    """Raise :class:`CourseConfigError` unless ``course/nbgrader_config.py`` loads cleanly and
    autogrades with the sandboxed preprocessors."""
    from traitlets.config.loader import PyFileConfigLoader

    path = Path(course) / "nbgrader_config.py"
    if not path.is_file():
        raise CourseConfigError(f"{path} not found: run the grading commands on the course folder")
    try:
        config = PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    except Exception as exc:  # noqa: BLE001 - a syntax error, an import error...
        raise CourseConfigError(
            f"{path} does not load ({type(exc).__name__}: {exc}); nbgrader would grade with its "
            "defaults and run student code without the sandboxes: fix it first"
        ) from exc
    names = [
        getattr(p, "__name__", type(p).__name__) for p in config.Autograde.autograde_preprocessors
    ]
    if "RefuseToGrade" in names:
        raise CourseConfigError(
            f"{path} failed inside and refuses to grade (its reason is printed above, "
            "'[torchlight] ... failed to load'): fix that first"
        )
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        raise CourseConfigError(
            f"{path}: Autograde.autograde_preprocessors is {names}, without {', '.join(missing)}: "
            "student code would run outside the sandbox (see the configuration's own message)"
        )
