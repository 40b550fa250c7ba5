"""Submissions for assignment 8 (Inference and efficiency): the classic mistakes, each costing
exactly its item, and an answer that hands the sampling to the library's own sampler."""

from __future__ import annotations

from submissions.catalog import Submission, grouped, replace, substitute

A = "a8_inference"

#: The library's generate() draws from torchlight's own generator (``tl.manual_seed``), so an
#: answer built on it neither writes the sampler nor reproduces the seeded draws.
LIBRARY_SAMPLER = """
from torchlight.train.generate import generate


class _Fixed(tl.nn.Module):
    def __init__(self, probs):
        super().__init__()
        self.logits = tl.tensor(np.log(np.maximum(probs, 1e-300)))

    def forward(self, idx):
        return self.logits.reshape(1, 1, -1)


def sample(probs, generator):
    tl.manual_seed(int(generator.integers(2**31)))
    return generate(_Fixed(probs), [0], 1, 1)[-1]
"""

#: The library's own checkpoint: its backward is left out of the hidden checks' library.
LIBRARY_CHECKPOINT = """
from torchlight.utils.checkpoint import checkpoint


class Checkpoint(Function):
    @staticmethod
    def forward(ctx, fn, *inputs):
        ctx.fn = fn
        ctx.save_for_backward(*inputs)
        return fn(*inputs)

    @staticmethod
    def backward(ctx, grad_output):
        inputs = tuple(x.detach().requires_grad_() for x in ctx.saved_tensors)
        with tl.enable_grad():
            out = checkpoint(ctx.fn, *inputs)
        return (None, *tl.autograd.grad(out, inputs, grad_output))
"""

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    Submission(
        "position-offset-forgotten",
        A,
        "mistake",
        "solution",
        (substitute("kv_cache", "    position = cache.length\n", "    position = 0\n"),),
        zero=("test_kv_cache",),
        note="every new token gets position 0's embedding: the cache's offset is forgotten",
    ),
    Submission(
        "position-after-append",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "kv_cache",
                "    position = cache.length\n",
                "    position = cache.length + 1 if cache.length else 0\n",
            ),
        ),
        zero=("test_kv_cache",),
        note="the position read as if the new token were already in the cache (off by one)",
    ),
    Submission(
        "top-p-one-too-few",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "sampling",
                "kept = int(np.searchsorted(cumulative, top_p)) + 1",
                "kept = max(int(np.searchsorted(cumulative, top_p)), 1)",
            ),
        ),
        zero=("test_sampling_probs",),
        note="top-p stops before the token whose cumulative probability reaches top_p",
    ),
    Submission(
        "temperature-after-softmax",
        A,
        "mistake",
        "solution",
        (
            substitute("sampling", "z = logits / temperature", "z = logits"),
            substitute(
                "sampling",
                "p = p / p.sum()\n    order",
                "p = p / temperature\n    p = p / p.sum()\n    order",
            ),
        ),
        zero=("test_sampling_probs",),
        note="divides the probabilities by the temperature (renormalized: no effect at all)",
    ),
    Submission(
        "quantize-per-tensor",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "quantize",
                "scale = np.abs(weight).max(axis=1) / 127.0",
                "scale = np.full(weight.shape[0], np.abs(weight).max() / 127.0)",
            ),
        ),
        zero=("test_quantize",),
        note="one scale for the whole tensor: small channels lose their precision",
    ),
    Submission(
        "quantize-round-toward-zero",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "quantize",
                "np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)",
                "np.clip(weight / scale[:, None], -127, 127).astype(np.int8)",
            ),
        ),
        zero=("test_quantize",),
        note="astype(np.int8) alone truncates toward zero instead of rounding",
    ),
    Submission(
        "loss-scale-never-lowered",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "amp",
                "return master, master.astype(np.float16), scale / 2, 0",
                "return master, master.astype(np.float16), scale, 0",
            ),
        ),
        zero=("test_amp_step",),
        note="skips the overflowing step but keeps the scale: it overflows again and again",
    ),
    Submission(
        "checkpoint-saves-activations",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "checkpoint",
                "        ctx.save_for_backward(*inputs)\n        return fn(*inputs)",
                "        with tl.enable_grad():\n"
                "            inputs_ = tuple(x.detach().requires_grad_() for x in inputs)\n"
                "            out = fn(*inputs_)\n"
                "        ctx.save_for_backward(*inputs)\n"
                "        ctx.graph = (out, inputs_)\n"
                "        return out.detach()",
            ),
            substitute(
                "checkpoint",
                "        inputs = tuple(x.detach().requires_grad_() for x in ctx.saved_tensors)\n"
                "        with tl.enable_grad():\n"
                "            out = ctx.fn(*inputs)\n",
                "        out, inputs = ctx.graph\n",
            ),
        ),
        zero=("test_checkpoint",),
        note="keeps forward's graph (every activation) on ctx and backpropagates through it",
    ),
    Submission(
        "library-sampler",
        A,
        "cheat",
        "solution",
        (replace("sample", LIBRARY_SAMPLER),),
        zero=("test_sample",),
        note="hands the draw to the library's generate(): not the student's sampler, nor the "
        "seeded generator's draws",
    ),
    Submission(
        "library-checkpoint",
        A,
        "cheat",
        "solution",
        (replace("checkpoint", LIBRARY_CHECKPOINT),),
        zero=("test_checkpoint",),
        note="hands the recomputation to the library's checkpoint()",
    ),
]

#: Planted mistakes in answer cells of their own, each costing items of its own: the course suite
#: grades each group as one notebook (``catalog.grouped``; the assignments' README names them).
CATALOG = grouped(
    CATALOG,
    {
        "wrong-in-one-part": (
            "position-offset-forgotten",
            "top-p-one-too-few",
            "quantize-per-tensor",
            "loss-scale-never-lowered",
            "checkpoint-saves-activations",
        ),
        "wrong-in-another-part": (
            "position-after-append",
            "temperature-after-softmax",
            "quantize-round-toward-zero",
        ),
    },
)

#: What the integrity report says of the answers that reach for the library's sampler.
FLAGGED = {
    "library-sampler": "reaches for the library's sampler, checkpoint or loss scaler (imports generate",
    "library-checkpoint": "reaches for the library's sampler, checkpoint or loss scaler (imports checkpoint",
}
