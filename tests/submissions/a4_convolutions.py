"""Submissions for assignment 4 (Convolutions)."""

from __future__ import annotations

from submissions.catalog import Submission, grouped, substitute

A = "a4_convolutions"

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    Submission(
        "conv2d-weight-gradient-misaligned",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "conv2d",
                "grad_w[:, :, i, j] = (g * patch).sum((0, 3, 4))",
                "grad_w[:, :, i, j] = (g * patch).sum((0, 3, 4)) / x.shape[0]",
            ),
        ),
        zero=("test_conv2d",),
        note="averages the weight gradient over the batch instead of summing it",
    ),
    Submission(
        "pool-missing-division",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "avg_pool2d",
                "return spread.reshape(n, c, h, w) / (k * k)",
                "return spread.reshape(n, c, h, w) / k",
            ),
        ),
        zero=("test_avg_pool2d",),
    ),
]

#: Planted mistakes in answer cells of their own, each costing items of its own: the course suite
#: grades each group as one notebook (``catalog.grouped``; the assignments' README names them).
CATALOG = grouped(
    CATALOG,
    {
        "wrong-in-one-layer": ("conv2d-weight-gradient-misaligned", "pool-missing-division"),
    },
)
