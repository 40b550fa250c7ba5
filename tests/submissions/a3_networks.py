"""Submissions for assignment 3 (Neural networks)."""

from __future__ import annotations

from submissions.catalog import Submission, replace, substitute

A = "a3_networks"

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
]
