"""Submissions for assignment 5 (Normalization and attention): the classic mistakes, each
costing exactly its item."""

from __future__ import annotations

from submissions.catalog import Submission, grouped, substitute

A = "a5_attention"

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    Submission(
        "batch-statistics-in-eval",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "batch_norm",
                "y = (x - running_mean) / (running_var + eps).sqrt() * weight + bias",
                "y = BatchNorm.apply(x, weight, bias, eps)",
            ),
        ),
        zero=("test_batchnorm_eval",),
        note="normalizes with the batch's statistics in evaluation mode too",
    ),
    Submission(
        "batchnorm-missing-variance-term",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "batchnorm",
                "grad_x = rstd * (g - mean_g - x_hat * mean_gx)",
                "grad_x = rstd * (g - mean_g)",
            ),
        ),
        zero=("test_batchnorm",),
        note="drops the gradient that flows through the batch variance",
    ),
    Submission(
        "mask-after-softmax",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "attention",
                "ctx.save_for_backward(q, k, v, p)",
                "if causal:\n            p = p * tl.tensor(np.tril(np.ones(p.shape[-2:])))\n"
                "        ctx.save_for_backward(q, k, v, p)",
            ),
            substitute(
                "attention",
                "scores = scores + tl.tensor(np.where(upper, -np.inf, 0.0))",
                "pass",
            ),
        ),
        zero=("test_attention",),
        note="zeroes the future's weights after the softmax: the rows no longer sum to 1",
    ),
    Submission(
        "attention-scale-forgotten",
        A,
        "mistake",
        "solution",
        (substitute("attention", "scale = 1.0 / math.sqrt(q.shape[-1])", "scale = 1.0"),),
        zero=("test_attention",),
        note="softmax(Q K^T) V without the 1/sqrt(E)",
    ),
]

#: Planted mistakes in answer cells of their own, each costing items of its own: the course suite
#: grades each group as one notebook (``catalog.grouped``; the assignments' README names them).
CATALOG = grouped(
    CATALOG,
    {
        "wrong-in-one-layer": ("batch-statistics-in-eval", "mask-after-softmax"),
        "wrong-in-another-layer": ("batchnorm-missing-variance-term", "attention-scale-forgotten"),
    },
)
