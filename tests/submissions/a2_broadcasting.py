"""Submissions for assignment 2 (Broadcasting and reductions)."""

from __future__ import annotations

from submissions.catalog import Submission, grouped, substitute

A = "a2_broadcasting"

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    Submission(
        "broadcast-not-reduced",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "add",
                "return unbroadcast(grad_output, ctx.a_shape), unbroadcast(grad_output, ctx.b_shape)",
                "return grad_output, grad_output",
            ),
        ),
        zero=("test_add",),
        note="the engine would have summed it; called directly, the shape is wrong",
    ),
    Submission(
        "transposed-matmul-gradient",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "matmul",
                "grad_b = a.transpose(-1, -2) @ grad_output",
                "grad_b = grad_output.transpose(-1, -2) @ a",
            ),
        ),
        zero=("test_matmul",),
    ),
]

#: Planted mistakes in answer cells of their own, each costing items of its own: the course suite
#: grades each group as one notebook (``catalog.grouped``; the assignments' README names them).
CATALOG = grouped(
    CATALOG,
    {
        "wrong-in-one-gradient": ("broadcast-not-reduced", "transposed-matmul-gradient"),
    },
)
