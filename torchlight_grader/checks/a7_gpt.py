r"""Hidden checks for assignment 7, *The transformer and its training loop*.

Multi-head causal self-attention and the pre-norm block, run through the library's autograd
(``entry(*args).backward(G)``) on random float64 inputs: the output against a numpy reference,
every input's gradient against the library's own attention and layers differentiated by its
autograd (itself checked against central differences of the numpy reference). The block runs
with the grader's attention in place of the notebook's, so a mistake in one costs only its own
item. AdamW's step, the warm-up and cosine schedule (on every step of a random run, the
boundaries included) and global-norm clipping are compared with numpy. The training item trains
the notebook's loop in the sandbox, with the grader's attention and block in place, on the
first 90% of the shipped Shakespeare, from a seed the grader draws; the grader then sends
windows of the held-out 10% (and the same windows with their ends replaced) and computes the
loss of the logits that come back itself: below the notebook's stated 2.8 nats per character,
and the logits before the replaced part unchanged (a model that reads ahead fails).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchlight_grader.checks.check import Case, Check
from torchlight_grader.checks.kinds import FunctionCheck, ValueCheck
from torchlight_grader.checks.structure import references

LN_EPS = 1e-5
STEPS = 200  # the notebook's graded training run
THRESHOLD = 3.0  # nats per character on held-out text (the notebook states it)
BLOCK, WINDOWS = 32, 48
ATTENTION_SHAPES = [(2, 4, 4, 2), (1, 5, 6, 3), (3, 3, 4, 1)]  # N, T, C, heads
BLOCK_SHAPES = [(2, 3, 4, 2), (1, 4, 6, 3)]


# ---------------------------------------------------------------------------- references
def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attention(x: np.ndarray, w_qkv: Any, b_qkv: Any, w_out: Any, b_out: Any, nhead: int) -> Any:
    n, t, c = x.shape
    size = c // nhead
    qkv = x @ w_qkv.T + b_qkv
    q, k, v = (qkv[..., i * c : (i + 1) * c].reshape(n, t, nhead, size).transpose(0, 2, 1, 3)
               for i in range(3))  # fmt: skip
    future = np.triu(np.ones((t, t), dtype=bool), k=1)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + np.where(future, -np.inf, 0.0)
    out = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(n, t, c)
    return out @ w_out.T + b_out


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LN_EPS) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def block(x: np.ndarray, *args: Any) -> np.ndarray:
    ln1_w, ln1_b, w_qkv, b_qkv, w_out, b_out, ln2_w, ln2_b, w_fc, b_fc, w_proj, b_proj, h = args
    x = x + attention(_layer_norm(x, ln1_w, ln1_b), w_qkv, b_qkv, w_out, b_out, h)
    return x + _gelu(_layer_norm(x, ln2_w, ln2_b) @ w_fc.T + b_fc) @ w_proj.T + b_proj


def _library_attention(x: Any, w_qkv: Any, b_qkv: Any, w_out: Any, b_out: Any, h: int) -> Any:
    """The library's own: in-projection, ``scaled_dot_product_attention(is_causal=True)``,
    out-projection."""
    from torchlight.nn.attention import scaled_dot_product_attention

    n, t, c = x.shape
    qkv = x @ w_qkv.T + b_qkv
    q, k, v = (qkv[..., i * c : (i + 1) * c].reshape(n, t, h, c // h).permute(0, 2, 1, 3)
               for i in range(3))  # fmt: skip
    out = scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.permute(0, 2, 1, 3).reshape(n, t, c) @ w_out.T + b_out


def _library_block(x: Any, *args: Any) -> Any:
    import torchlight.nn.functional as F

    ln1_w, ln1_b, w_qkv, b_qkv, w_out, b_out, ln2_w, ln2_b, w_fc, b_fc, w_proj, b_proj, h = args
    c = x.shape[-1]
    x = x + _library_attention(F.layer_norm(x, (c,), ln1_w, ln1_b, LN_EPS), w_qkv, b_qkv,
                               w_out, b_out, h)  # fmt: skip
    z = F.layer_norm(x, (c,), ln2_w, ln2_b, LN_EPS)
    return x + F.gelu(z @ w_fc.T + b_fc, approximate="tanh") @ w_proj.T + b_proj


def _autograd_vjp(fn: Any) -> Any:
    """``vjp(G, *args)`` by the library's autograd of ``fn``, for every array argument."""

    def vjp(g: np.ndarray, *args: Any) -> tuple[np.ndarray, ...]:
        import torchlight as tl

        tensors = [tl.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a
                   for a in args]  # fmt: skip
        fn(*tensors).backward(tl.tensor(g))
        grads: list[Any] = [t.grad for t in tensors if isinstance(t, tl.Tensor)]
        return tuple(np.array(grad.numpy()) for grad in grads)

    return vjp


def attention_case(rng: np.random.Generator, trial: int) -> Case:
    n, t, c, h = ATTENTION_SHAPES[trial % len(ATTENTION_SHAPES)]
    args = [rng.uniform(-1, 1, size=(n, t, c)), rng.uniform(-1, 1, size=(3 * c, c)),
            rng.uniform(-0.5, 0.5, size=3 * c), rng.uniform(-1, 1, size=(c, c)),
            rng.uniform(-0.5, 0.5, size=c), h]  # fmt: skip
    names = ("x", "w_qkv", "b_qkv", "w_out", "b_out", "nhead")
    return Case(args, rng.standard_normal((n, t, c)), (0, 1, 2, 3, 4), names)


def block_case(rng: np.random.Generator, trial: int) -> Case:
    n, t, c, h = BLOCK_SHAPES[trial % len(BLOCK_SHAPES)]

    def u(*shape: int, scale: float = 1.0) -> np.ndarray:
        return rng.uniform(-scale, scale, size=shape)

    args = [u(n, t, c), 1 + u(c, scale=0.3), u(c, scale=0.3), u(3 * c, c), u(3 * c, scale=0.5),
            u(c, c), u(c, scale=0.5), 1 + u(c, scale=0.3), u(c, scale=0.3), u(4 * c, c),
            u(4 * c, scale=0.5), u(c, 4 * c, scale=0.5), u(c, scale=0.5), h]  # fmt: skip
    names = ("x", "ln1_w", "ln1_b", "w_qkv", "b_qkv", "w_out", "b_out", "ln2_w", "ln2_b",
             "w_fc", "b_fc", "w_proj", "b_proj", "nhead")  # fmt: skip
    return Case(args, rng.standard_normal((n, t, c)), tuple(range(13)), names)


@dataclass
class GraphWithCheck(FunctionCheck):
    """A graph check run with the grader's own versions of other answers in place."""

    call: str = "graph"
    stand_ins: tuple[str, ...] = ()

    def spec(self) -> dict[str, Any]:
        return {"runner": "graph_with", "entry": self.entry, "stand_ins": list(self.stand_ins)}


# ---------------------------------------------------------------------------- optimizer
def adamw(p: Any, g: Any, m: Any, v: Any, step: int, lr: float, b1: float, b2: float,
          eps: float, wd: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    p = p * (1 - lr * wd)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr * (m / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + eps), m, v


def adamw_case(rng: np.random.Generator, trial: int) -> Case:
    shape = [(3, 4), (5,), (2, 3, 2)][trial % 3]
    p, g = rng.uniform(-2, 2, size=shape), rng.uniform(-1, 1, size=shape)
    m, v = rng.uniform(-0.1, 0.1, size=shape), rng.uniform(0, 0.05, size=shape)
    step = int(rng.integers(1, 50))
    lr, b1, b2 = (
        float(rng.uniform(1e-3, 0.1)),
        float(rng.uniform(0.8, 0.95)),
        float(rng.uniform(0.9, 0.999)),
    )
    eps, wd = float(10.0 ** rng.uniform(-8, -3)), float(rng.uniform(0.05, 0.5))
    return Case([p, g, m, v, step, lr, b1, b2, eps, wd],
                names=("param", "grad", "m", "v", "step", "lr", "beta1", "beta2", "eps",
                       "weight_decay"))  # fmt: skip


def lr_at(step: int, max_lr: float, min_lr: float, warmup: int, total: int) -> float:
    if step < warmup:
        return max_lr * (step + 1) / warmup
    if step > total:
        return min_lr
    return min_lr + 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup))) * (
        max_lr - min_lr
    )


class ScheduleCase(Case):
    def describe(self) -> str:
        max_lr, min_lr, warmup, total = self.args[0][0][1:]
        return (f"steps 0..{total + 5}, max_lr={max_lr:.6g}, min_lr={min_lr:.6g}, "
                f"warmup={warmup}, total={total}")  # fmt: skip


def schedule_case(rng: np.random.Generator, trial: int) -> Case:
    warmup, total = int(rng.integers(3, 20)), int(rng.integers(40, 120))
    max_lr = float(rng.uniform(1e-3, 1.0))
    min_lr = float(max_lr * rng.uniform(0.0, 0.3))
    calls = [[s, max_lr, min_lr, warmup, total] for s in range(total + 6)]
    return ScheduleCase([calls], names=("calls",))


@dataclass
class ScheduleCheck(Check):
    """``entry(step, ...)`` at every step of a run (past its end too), compared with numpy."""

    def spec(self) -> dict[str, Any]:
        return {"runner": "calls", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        return {"values": np.array([lr_at(*args) for args in case.args[0]])}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        problem = self.compare(
            f"{self.entry}(step, ...)", expected["values"], received.get("values"),
            f"on ({case.describe()}); the index is the step",
        )  # fmt: skip
        if problem and "at index (0,)" in problem:
            problem += ". The warm-up's first step (step 0) is max_lr / warmup, not 0"
        return problem


def clip(grads: list[np.ndarray], max_norm: float) -> tuple[np.ndarray, ...]:
    total = math.sqrt(sum(float((g * g).sum()) for g in grads))
    scale = min(1.0, max_norm / (total + 1e-6))
    return tuple(g * scale for g in grads)


class ClipCase(Case):
    def describe(self) -> str:
        grads, max_norm = self.args
        norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
        shapes = ", ".join(str(g.shape) for g in grads)
        return f"gradients of shapes {shapes}, global norm {norm:.6g}, max_norm={max_norm:.6g}"


def clip_case(rng: np.random.Generator, trial: int) -> Case:
    shapes = [[(3, 4), (4,), (2, 2, 2)], [(5,), (6, 2)], [(2, 3), (3,), (1,), (4, 4)]][trial % 3]
    grads = [rng.uniform(-1, 1, size=s) * rng.uniform(0.1, 3) for s in shapes]
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
    max_norm = norm * (rng.uniform(0.1, 0.6) if trial != 1 else rng.uniform(1.2, 2.0))
    return ClipCase([grads, float(max_norm)], names=("grads", "max_norm"))


@dataclass
class ClipCheck(Check):
    def spec(self) -> dict[str, Any]:
        return {"runner": "list_value", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        return {"value": clip(*case.args)}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        exp, got = expected["value"], received.get("value")
        trial = f"on {case.describe()}"
        if not isinstance(got, tuple) or len(got) != len(exp):
            n = len(got) if isinstance(got, tuple) else received.get("type")
            return f"{self.entry} must return a list of {len(exp)} gradients, got {n} {trial}"
        for k, (e, g) in enumerate(zip(exp, got, strict=True)):
            problem = self.compare(f"gradient {k}", e, g, trial)
            if problem:
                return problem + (
                    ". Every gradient is scaled by the same factor, max_norm / (global norm + "
                    "1e-6), from the norm of all of them together"
                )
        return None


# ---------------------------------------------------------------------------- training
@functools.cache
def shakespeare_held_out() -> np.ndarray:
    from torchlight.data.text import load_text
    from torchlight.train.tokenizers import CharTokenizer

    text = load_text("shakespeare")
    data = np.array(CharTokenizer(text).encode(text))
    return data[int(0.9 * len(data)) :]


def training_case(rng: np.random.Generator, trial: int) -> Case:
    held = shakespeare_held_out()
    starts = rng.integers(0, len(held) - BLOCK - 1, size=WINDOWS)
    windows = np.stack([held[s : s + BLOCK + 1] for s in starts])
    inputs, targets = windows[:, :-1], windows[:, 1:]
    cut = int(rng.integers(BLOCK // 4, 3 * BLOCK // 4))
    altered = inputs.copy()
    altered[:, cut:] = rng.integers(0, int(held.max()) + 1, size=altered[:, cut:].shape)
    seed = int(rng.integers(0, 2**31 - 1))
    return Case(
        [seed, STEPS, inputs, altered],
        names=("seed", "steps", "inputs", "altered"),
        hidden={"targets": targets, "cut": cut},
    )


@dataclass
class LanguageModelCheck(Check):
    """Trains the notebook's loop in the sandbox; the loss is computed here, on targets the
    sandbox never sees."""

    threshold: float = THRESHOLD

    def spec(self) -> dict[str, Any]:
        return {"runner": "lm_training", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        return {"targets": case.hidden["targets"], "cut": case.hidden["cut"]}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        targets, cut = expected["targets"], expected["cut"]
        logits, altered = received.get("logits"), received.get("altered")
        for got in (logits, altered):
            if not isinstance(got, np.ndarray) or got.ndim != 3 or got.shape[:2] != targets.shape:
                shape = got.shape if isinstance(got, np.ndarray) else type(got).__name__
                return (
                    f"the trained model must return logits of shape {targets.shape} + "
                    f"(vocabulary,), got {shape}"
                )
        assert isinstance(logits, np.ndarray) and isinstance(altered, np.ndarray), "checked above"
        if not np.all(np.isfinite(logits)):
            return "the trained model's logits are not all finite (the training diverged?)"
        if not np.allclose(logits[:, :cut], altered[:, :cut], rtol=1e-9, atol=1e-9):
            return (
                f"the logits at positions before {cut} changed when only the characters from "
                f"position {cut} on did: the model reads ahead (its mask lets a position see "
                "later ones)"
            )
        shifted = logits - logits.max(-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        if targets.max() >= logits.shape[-1]:
            return f"the logits have {logits.shape[-1]} classes, fewer than the vocabulary"
        loss = float(-np.take_along_axis(log_probs, targets[..., None], -1).mean())
        case.hidden["loss"] = loss
        if not loss < self.threshold:
            return (
                f"after train_gpt(train_ids, {STEPS}, seed={case.args[0]}), the loss on "
                f"{targets.size} held-out characters is {loss:.3f} nats; below "
                f"{self.threshold} is needed"
            )
        return None

    def passed(self, cases: Any) -> str:
        losses = ", ".join(f"{c.hidden.get('loss', float('nan')):.3f}" for c in cases)
        return f"{self.what}: held-out loss {losses} (below {self.threshold} needed)."


# ---------------------------------------------------------------------------- authorship
#: The library's attention, transformer layers, optimizers and schedulers.
LIBRARY = {
    "scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward",
    "attention_weights", "GPTBlock", "TransformerEncoderLayer", "TransformerDecoderLayer",
    "Adam", "AdamW", "clip_grad_norm_", "CosineAnnealingLR", "LambdaLR", "SequentialLR",
    "LinearLR", "OneCycleLR", "lr_scheduler", "optim",
}  # fmt: skip


def library_transformer(sources: Iterable[str]) -> list[str]:
    """The integrity findings of a notebook that reaches for the library's attention,
    transformer layers, optimizers or schedulers (by an imported name, an attribute, a
    ``getattr`` with a constant: :func:`~torchlight_grader.checks.structure.references`)."""
    found = references(sources, LIBRARY)
    if not found:
        return []
    return [f"reaches for the library's attention, transformer or optimizer "
            f"({', '.join(found)}): review by hand whether the student wrote them"]  # fmt: skip


FINDINGS = library_transformer


def checks() -> dict[str, Check]:
    return {
        "test_attention": FunctionCheck(
            "causal_self_attention",
            ("attention",),
            attention_case,
            forward_ref=attention,
            vjp_ref=_autograd_vjp(_library_attention),
            call="graph",
            adversarial_trials=0,
            what="causal_self_attention forward and gradients (one to three heads)",
        ),
        "test_block": GraphWithCheck(
            "block",
            ("block",),
            block_case,
            trials=2,
            forward_ref=block,
            vjp_ref=_autograd_vjp(_library_block),
            stand_ins=("causal_self_attention",),
            adversarial_trials=0,
            what="the pre-norm block forward and gradients",
        ),
        "test_adamw": ValueCheck(
            "adamw_step", ("adamw",), adamw_case, reference=adamw, what="adamw_step"
        ),
        "test_schedule": ScheduleCheck(
            "lr_at", ("schedule",), schedule_case, what="lr_at (warm-up and cosine)"
        ),
        "test_clip": ClipCheck(
            "clip_gradients", ("clip",), clip_case, what="clip_gradients (global norm)"
        ),
        "test_train": LanguageModelCheck(
            "train_gpt",
            ("train", "adamw", "schedule", "clip"),
            training_case,
            trials=1,
            timeout=240.0,
            what=f"train_gpt: {STEPS} steps on Shakespeare",
        ),
    }


CHECKS = checks()
