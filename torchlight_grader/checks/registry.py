"""Which hidden check grades which test cell: ``notebook name -> test cell grade_id -> Check``.

The registry lives in the library, not in the notebooks, so a student who edits a notebook
cannot change what is checked. Knowing the checks does not help a student either: the grader
draws fresh random inputs every run and keeps the reference values in its own process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torchlight_grader.checks.check import Check

_MODULES = {
    "a1_functions": "torchlight_grader.checks.a1_functions",
    "a1b_engine": "torchlight_grader.checks.a1b_engine",
    "a2_broadcasting": "torchlight_grader.checks.a2_broadcasting",
    "a2b_strided": "torchlight_grader.checks.a2b_strided",
    "a2c_kernels": "torchlight_grader.checks.a2c_kernels",
    "a3_networks": "torchlight_grader.checks.a3_networks",
    "a4_convolutions": "torchlight_grader.checks.a4_convolutions",
    "a5_attention": "torchlight_grader.checks.a5_attention",
    "a6_tokens": "torchlight_grader.checks.a6_tokens",
    "a7_gpt": "torchlight_grader.checks.a7_gpt",
    "a8_inference": "torchlight_grader.checks.a8_inference",
    "a9_capstone": "torchlight_grader.checks.a9_capstone",
}


def checks_for(notebook: str) -> dict[str, Check]:
    """The checks of one notebook (empty if the notebook has none registered)."""
    import importlib

    name = _MODULES.get(notebook)
    if name is None:
        return {}
    module: Any = importlib.import_module(name)
    return dict(module.CHECKS)


def find(notebook: str, grade_id: str) -> Check | None:
    """The check for test cell ``grade_id`` of ``notebook``, or None."""
    return checks_for(notebook).get(grade_id)


def findings(notebook: str, sources: Iterable[str]) -> list[str]:
    """What ``notebook``'s check module flags in the student code from its structure (its
    ``FINDINGS(sources)``, if it has one): lines for the integrity report, never a grade."""
    import importlib

    name = _MODULES.get(notebook)
    flag = getattr(importlib.import_module(name), "FINDINGS", None) if name else None
    return list(flag(sources)) if flag is not None else []


def autograd_backwards(notebook: str) -> frozenset[str]:
    """The classes whose ``backward`` ``notebook`` asks to drive autograd (its check module's
    ``AUTOGRAD_BACKWARDS``, if any): the structure check does not flag them."""
    import importlib

    name = _MODULES.get(notebook)
    return frozenset(
        getattr(importlib.import_module(name), "AUTOGRAD_BACKWARDS", ()) if name else ()
    )


def load_all() -> None:
    """Import every assignment's checks (the grader does this before any student code runs)."""
    for notebook in _MODULES:
        try:
            checks_for(notebook)
        except ModuleNotFoundError as exc:
            if not exc.name or not exc.name.startswith("torchlight_grader."):
                raise
