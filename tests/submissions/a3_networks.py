"""Submissions for assignment 3 (Neural networks)."""

from __future__ import annotations

from submissions.catalog import Submission, grouped, replace, substitute
from torchlight_grader.checks.a3_networks import SGD_DAMPENING
from torchlight_grader.checks.variants import LEARNER, draw

A = "a3_networks"

#: Section 4's SGD step draws its dampening (a per-student variant) as the source does.
DRAWN = 'variant("sgd_step", (0.1, 0.2, 0.3, 0.5))'


def dampening(student: str) -> float:
    """``student``'s variant of section 4 (the catalog's students are ``a3_networks--<name>``)."""
    return draw(A, "sgd_step", student, SGD_DAMPENING)


#: What typed-dampening writes in: its own variant (0.3).
TYPED = dampening(f"{A}--typed-dampening")
#: What copied-dampening writes in: a classmate's variant (0.2, make homework's learner's too, so
#: the copy would pass if the grader drew from any id but the owner's); its own is 0.5.
COPIED = dampening(LEARNER)
assert COPIED not in (dampening(f"{A}--copied-dampening"), TYPED), "pick students of other variants"

NAIVE_CROSS_ENTROPY = """
class SoftmaxCrossEntropy(Function):
    @staticmethod
    def forward(ctx, logits, targets):
        probs = logits.exp() / logits.exp().sum(1, keepdim=True)
        onehot = tl.tensor(np.eye(logits.shape[1])[targets.numpy()])
        ctx.save_for_backward(probs, onehot)
        return -(probs.log() * onehot).sum() / logits.shape[0]

    @staticmethod
    def backward(ctx, grad_output):
        probs, onehot = ctx.saved_tensors
        return grad_output * (probs - onehot) / probs.shape[0], None
"""

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    Submission(
        "unstable-softmax",
        A,
        "mistake",
        "solution",
        (replace("cross_entropy", NAIVE_CROSS_ENTROPY),),
        zero=("test_cross_entropy",),
        note="right formula, but e^800 overflows: nan for large logits",
    ),
    Submission(
        "adam-without-bias-correction",
        A,
        "mistake",
        "solution",
        (
            substitute("adam_step", "m_hat = m / (1 - beta1**t)", "m_hat = m"),
            substitute("adam_step", "v_hat = v / (1 - beta2**t)", "v_hat = v"),
        ),
        zero=("test_adam_step",),
        note="still trains, but is not Adam",
    ),
    Submission(
        "bias-gradient-not-summed",
        A,
        "mistake",
        "solution",
        (substitute("linear_function", "grad_output.sum(0)", "grad_output"),),
        zero=("test_linear_function",),
        note="the engine sums it for the layer, so only the Function's own check fails",
    ),
    Submission(
        "typed-dampening",
        A,
        "solution",
        "solution",
        (substitute("sgd_step", DRAWN, repr(TYPED)),),
        note="its own variant's dampening written in, as a student types it: full marks",
    ),
    Submission(
        "copied-dampening",
        A,
        "mistake",
        "solution",
        (substitute("sgd_step", DRAWN, repr(COPIED)),),
        zero=("test_sgd_step",),
        note="a classmate's sgd_step (another variant's dampening written in): graded on its own",
    ),
]

#: Planted mistakes in answer cells of their own, each costing items of its own: the course suite
#: grades each group as one notebook (``catalog.grouped``; the assignments' README names them).
CATALOG = grouped(
    CATALOG,
    {
        "wrong-in-one-piece": (
            "unstable-softmax",
            "adam-without-bias-correction",
            "bias-gradient-not-summed",
        ),
    },
)
