r"""Hidden checks for assignment 8, *Inference and efficiency*.

- **KV cache** (``KVCache``, ``decode_step``): the library's own GPT, with random weights, decodes
  token by token; every step's logits must equal the full forward pass's row for that position
  (float64, $10^{-12}$). Half the trials start from a cache this grader filled with the keys and
  values of a prefix the sandbox never receives: only an answer that attends over the cache,
  one query row per new token, can produce those logits (recomputing the prefix is impossible,
  so the per-token cost cannot grow with it as recomputation's does).
- **Sampling** (``sampling_probs``): temperature, then top-k, then top-p (the smallest set of most
  likely tokens whose probability reaches ``top_p``: the token that crosses it is kept), on
  hidden logits; ``top_p`` is drawn half-way between two cumulative sums, so the kept set is
  never a rounding question. ``sample(probs, generator)``: the same draws as numpy's inverse CDF
  (``generator.choice``) from the same seeded generator.
- **int8 quantization** (``quantize_int8``): symmetric, one scale per output channel
  ($s_i = \max_j |W_{ij}| / 127$), rounded to nearest; ``int8_linear`` on the grader's own
  quantized weights (so a quantizer's mistake costs only its item), within the bound
  $|y_i - y^{float}_i| \le \tfrac{s_i}{2}\sum_j |x_j|$.
- **Mixed precision** (``amp_step``): float32 master weights updated from float16 gradients of the
  scaled loss; a step with an inf or nan is skipped and halves the scale; after
  ``growth_interval`` good steps in a row the scale doubles.
- **Activation checkpointing** (``Checkpoint``): the gradients of a two-layer MLP through the
  Function equal the reference's (checked against central differences); the Function saves
  only its inputs, keeps no other tensor on ``ctx``, and runs the block again in backward.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchlight_grader.checks.check import Case, Check
from torchlight_grader.checks.kinds import FunctionCheck, ValueCheck

# ------------------------------------------------------------------------------ KV cache
#: (vocab_size, d_model, nhead, num_layers, prefix the grader fills (0: none), new tokens)
KV_CASES = [(13, 8, 2, 2, 0, 6), (11, 12, 3, 1, 7, 3), (17, 8, 2, 2, 0, 5), (9, 8, 4, 2, 5, 4)]
BLOCK_SIZE = 16


def gpt_config(vocab: int, d_model: int, nhead: int, layers: int) -> dict[str, Any]:
    return {"vocab_size": vocab, "block_size": BLOCK_SIZE, "d_model": d_model, "nhead": nhead,
            "num_layers": layers}  # fmt: skip


def gpt_state(rng: np.random.Generator, config: dict[str, Any]) -> dict[str, np.ndarray]:
    """Random weights for every entry of the library GPT's state dict (the head tied to the
    token embedding, as the GPT ties them), large enough that attention is far from uniform."""
    import torchlight as tl

    shapes = {k: v.shape for k, v in tl.nn.GPT(**config).state_dict().items()}
    state = {}
    for name, shape in shapes.items():
        scale = 1.0 if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")) else 0.0
        state[name] = scale + rng.uniform(-0.6, 0.6, size=shape)
    state["head.weight"] = state["token_embedding.weight"]
    return state


def gpt_model(config: dict[str, Any], state: dict[str, np.ndarray]) -> Any:
    import torchlight as tl

    model = tl.nn.GPT(**config)
    model.load_state_dict({name: tl.tensor(array) for name, array in state.items()})
    return model.eval()


def prefix_cache(model: Any, tokens: list[int]) -> dict[str, list[np.ndarray]]:
    """Each layer's keys and values ``(1, H, T, head_dim)`` for ``tokens``, by the library."""
    import torchlight as tl
    from torchlight.nn import functional as F

    keys: list[np.ndarray] = []
    values: list[np.ndarray] = []
    with tl.no_grad():
        x = model.token_embedding(tl.tensor([tokens])) + model.position(tl.tensor([tokens]))
        for i in range(model.num_layers):
            block = model._modules[f"block{i}"]
            attn, e = block.attn, block.attn.embed_dim
            h = block.ln1(x)
            for j, out in ((1, keys), (2, values)):
                w, b = (
                    attn.in_proj_weight[j * e : (j + 1) * e],
                    attn.in_proj_bias[j * e : (j + 1) * e],
                )
                t = F.linear(h, w, b).reshape(1, len(tokens), attn.num_heads, attn.head_dim)
                out.append(t.transpose(1, 2).numpy().copy())
            x = block(x)
    return {"keys": keys, "values": values}


def kv_case(rng: np.random.Generator, trial: int) -> Case:
    vocab, d, heads, layers, prefix, new = KV_CASES[trial % len(KV_CASES)]
    config = gpt_config(vocab, d, heads, layers)
    state = gpt_state(rng, config)
    hidden_prefix = [int(t) for t in rng.integers(0, vocab, size=prefix)]
    tokens = rng.integers(0, vocab, size=new)
    cache = prefix_cache(gpt_model(config, state), hidden_prefix) if prefix else None
    return Case([config, state, cache, tokens], names=("config", "weights", "cache", "tokens"),
                hidden={"prefix": hidden_prefix})  # fmt: skip


@dataclass
class KVCacheCheck(Check):
    """``decode_step`` token by token against the library GPT's full forward pass."""

    def spec(self) -> dict[str, Any]:
        return {"runner": "kv_cache", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        import torchlight as tl

        config, state, _cache, tokens = case.args
        prefix = case.hidden["prefix"]
        with tl.no_grad():
            full = gpt_model(config, state)(tl.tensor([prefix + [int(t) for t in tokens]]))
        return {"logits": full.numpy()[0, len(prefix) :], "length": len(prefix) + len(tokens)}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        prefix = len(case.hidden["prefix"])
        start = (f"from a cache holding the keys and values of {prefix} earlier tokens (which "
                 "decode_step is not given)") if prefix else "from an empty cache"  # fmt: skip
        config = case.args[0]
        trial = (f"on a GPT(vocab_size={config['vocab_size']}, d_model={config['d_model']}, "
                 f"nhead={config['nhead']}, num_layers={config['num_layers']}), {start}")  # fmt: skip
        logits = received.get("logits") or ()
        for n, exp in enumerate(expected["logits"]):
            got = logits[n] if n < len(logits) else None
            if isinstance(got, np.ndarray) and got.shape != exp.shape and got.size == exp.size:
                got = got.reshape(exp.shape)
            what = (f"the logits decode_step returned for new token {n + 1} (position "
                    f"{prefix + n})")  # fmt: skip
            problem = self.compare(what, exp, got, trial)
            if problem:
                if n == 0 and not prefix:
                    return problem
                return problem + (
                    ": the full forward pass gives these at that position. Is the position of "
                    "the new token the number of tokens already in the cache, and are the new "
                    "key and value appended before attending?"
                )
        if received.get("length") != expected["length"]:
            return (f"cache.length is {received.get('length')!r} after the steps, expected "
                    f"{expected['length']} (one key and value per token) {trial}")  # fmt: skip
        return None

    def passed(self, cases: Any) -> str:
        return (f"{self.what}: the logits of every step equal the full forward pass's on "
                f"{len(cases)} random GPTs, from an empty cache and from a cache of unseen "
                "tokens.")  # fmt: skip


# ------------------------------------------------------------------------------ sampling
def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def _top_k(p: np.ndarray, top_k: int | None) -> np.ndarray:
    if top_k is None or top_k >= p.size:
        return p
    keep = np.zeros(p.size, dtype=bool)
    keep[np.argsort(-p, kind="stable")[:top_k]] = True
    p = np.where(keep, p, 0.0)
    return p / p.sum()


def _kept_for_top_p(p: np.ndarray, top_p: float) -> int:
    """How many of the most likely tokens top-p keeps: the first whose cumulative sum reaches
    ``top_p``, and all before it."""
    c = np.cumsum(np.sort(p)[::-1])
    return min(int(np.searchsorted(c, top_p, side="left")) + 1, p.size)


def sampling_probs(
    z: np.ndarray, temperature: float, top_k: int | None, top_p: float | None
) -> np.ndarray:
    p = _top_k(softmax(z / temperature), top_k)
    if top_p is not None:
        keep = np.zeros(p.size, dtype=bool)
        keep[np.argsort(-p, kind="stable")[: _kept_for_top_p(p, top_p)]] = True
        p = np.where(keep, p, 0.0)
        p = p / p.sum()
    return p


#: (vocabulary, temperature, top_k, use top_p)
PROBS_CASES = [(12, 0.7, None, False), (15, 1.4, 6, False), (10, 1.0, None, True),
               (16, 0.8, 7, True), (14, 1.7, None, True)]  # fmt: skip


def probs_case(rng: np.random.Generator, trial: int) -> Case:
    vocab, temperature, top_k, use_p = PROBS_CASES[trial % len(PROBS_CASES)]
    z = rng.normal(0.0, 2.0, size=vocab)
    top_p = None
    if use_p:  # half-way between two cumulative sums: which tokens stay is never a rounding call
        c = np.cumsum(np.sort(_top_k(softmax(z / temperature), top_k))[::-1])
        j = int(rng.integers(1, min(len(c) - 1, 6)))
        top_p = float((c[j - 1] + c[j]) / 2)
    return Case([z, temperature, top_k, top_p], names=("logits", "temperature", "top_k", "top_p"))


def draws(probs: np.ndarray, seed: int, count: int) -> list[int]:
    """numpy's ``Generator.choice(len(probs), p=probs)``: one uniform number per draw, the first
    token whose normalized cumulative probability exceeds it."""
    generator = np.random.default_rng(seed)
    cdf = np.cumsum(probs)
    cdf /= cdf[-1]
    return [int(cdf.searchsorted(generator.random(), side="right")) for _ in range(count)]


def draws_case(rng: np.random.Generator, trial: int) -> Case:
    vocab = [9, 14, 20][trial % 3]
    p = rng.uniform(0.0, 1.0, size=vocab) ** 3
    p[rng.choice(vocab, size=vocab // 3, replace=False)] = 0.0  # filtered tokens: never drawn
    p /= p.sum()
    return Case([p, int(rng.integers(2**31)), 200], names=("probs", "seed", "draws"))


@dataclass
class DrawsCheck(Check):
    def spec(self) -> dict[str, Any]:
        return {"runner": "draws", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        return {"draws": draws(*case.args)}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        exp, got = expected["draws"], received.get("draws") or []
        for n, (e, g) in enumerate(zip(exp, got, strict=False)):
            if g != e:
                zero = " (a token of probability 0)" if isinstance(g, int) and 0 <= g < len(
                    case.args[0]) and case.args[0][g] == 0 else ""  # fmt: skip
                return (f"draw {n + 1} of {len(exp)} from the seeded generator is {g!r}{zero}, "
                        f"the reference draws {e} from the same generator (probabilities of "
                        f"{len(case.args[0])} tokens): draw one uniform number with "
                        "generator.random() per token and take the first token whose cumulative "
                        "probability exceeds it, as generator.choice(len(probs), p=probs) does")  # fmt: skip
        if len(got) != len(exp):
            return f"sample returned {len(got)} draws' worth of tokens, expected {len(exp)}"
        return None

    def passed(self, cases: Any) -> str:
        return (
            f"{self.what}: the same {cases[0].args[2]} draws as the reference, {len(cases)} seeds."
        )


# -------------------------------------------------------------------------- quantization
def quantize_int8(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = np.abs(w).max(axis=1) / 127.0
    scale = np.where(scale == 0.0, 1.0, scale)
    return np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8), scale


def quantize_case(rng: np.random.Generator, trial: int) -> Case:
    out_features, in_features = [(6, 5), (4, 9), (8, 3)][trial % 3]
    # channels of very different sizes: one scale for the whole tensor loses the small ones
    w = rng.normal(size=(out_features, in_features)) * rng.choice([0.01, 0.1, 1.0, 5.0], size=(
        out_features, 1))  # fmt: skip
    if trial == 2:
        w[1] = 0.0  # a channel of zeros: scale 1, codes 0
    return Case([w], names=("weight",))


@dataclass
class TypedCheck(ValueCheck):
    """A function on numpy arrays whose results must also have the stated dtypes."""

    dtypes: tuple[str, ...] = ()
    casts: dict[str, str] | None = None
    bound: Any = None

    def spec(self) -> dict[str, Any]:
        return {"runner": "arrays", "entry": self.entry, "casts": self.casts or {}}

    def expected(self, case: Case) -> dict[str, Any]:
        value = self.reference(*case.args) if self.reference is not None else None
        return {"value": tuple(np.asarray(v, dtype=np.float64) for v in (
            value if isinstance(value, tuple) else (value,)))}  # fmt: skip

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        trial = f"on inputs ({case.describe()})"
        exp, got = expected["value"], received.get("value") or ()
        if received.get("count") != len(exp):
            return (
                f"{self.entry} must return {len(exp)} value(s), got {received.get('count')} {trial}"
            )
        for k, (e, g, dtype) in enumerate(zip(exp, got, self.dtypes, strict=True)):
            what = f"value {k} of {self.entry}" if len(exp) > 1 else f"the result of {self.entry}"
            if received["dtypes"][k] != dtype:
                return f"{what} has dtype {received['dtypes'][k]}, expected {dtype} {trial}"
            problem = self.compare(what, e, g, trial)
            if problem:
                return problem
        if self.bound is not None:
            return self.bound(case, got)
        return None


@dataclass
class ProbsCheck(TypedCheck):
    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        problem = super().judge(case, received, expected)
        if problem is None or not isinstance((received.get("value") or (None,))[0], np.ndarray):
            return problem
        exp, got = expected["value"][0], received["value"][0]
        top_p = case.args[3]
        if got.shape == exp.shape and top_p is not None and (got > 0).sum() != (exp > 0).sum():
            problem += (f"; top_p={top_p:.6g} keeps {(exp > 0).sum()} tokens (the most likely ones "
                        f"until their probabilities reach top_p, the one that crosses it "
                        f"included), your answer keeps {(got > 0).sum()}")  # fmt: skip
        return problem


def int8_linear(x: np.ndarray, q: np.ndarray, scale: np.ndarray, b: np.ndarray) -> np.ndarray:
    return x @ (q.astype(np.float64) * scale[:, None]).T + b


def int8_linear_case(rng: np.random.Generator, trial: int) -> Case:
    n, out_features, in_features = [(4, 6, 5), (3, 4, 9), (5, 8, 3)][trial % 3]
    w = rng.normal(size=(out_features, in_features)) * rng.uniform(0.05, 3, size=(out_features, 1))
    q, scale = quantize_int8(w)
    case = Case([rng.normal(size=(n, in_features)), q.astype(np.int64), scale,
                 rng.normal(size=out_features)], names=("x", "q", "scale", "bias"))  # fmt: skip
    case.hidden["weight"] = w
    return case


def int8_bound(case: Case, got: tuple[Any, ...]) -> str | None:
    """The stated bound against the float layer: each weight is off by at most half a step."""
    x, _q, scale, b = case.args
    exact = x @ case.hidden["weight"].T + b
    bound = np.abs(x).sum(axis=1, keepdims=True) * scale[None, :] / 2
    if np.any(np.abs(got[0] - exact) > bound * (1 + 1e-9) + 1e-12):
        return "int8_linear's output is further from the float layer's than half a step per weight"
    return None


# ------------------------------------------------------------------------- mixed precision
def amp_step(
    master: np.ndarray, grad: np.ndarray, scale: float, good: int, lr: float, growth: int
) -> tuple[np.ndarray, np.ndarray, float, int]:
    if not np.all(np.isfinite(grad)):  # overflow in float16: skip the step, halve the scale
        return master, master.astype(np.float16), scale / 2, 0
    master = master - np.float32(lr) * (grad.astype(np.float32) / np.float32(scale))
    good += 1
    if good == growth:
        scale, good = scale * 2, 0
    return master, master.astype(np.float16), scale, good


#: (shape, steps, which steps overflow: (step, "inf" | "nan"), growth_interval)
AMP_CASES = [((3, 4), 6, ((2, "inf"),), 2), ((5,), 7, ((1, "nan"), (4, "inf")), 3),
             ((2, 3), 5, (), 2)]  # fmt: skip


def amp_case(rng: np.random.Generator, trial: int) -> Case:
    shape, steps, bad, growth = AMP_CASES[trial % len(AMP_CASES)]
    master = rng.normal(size=shape).astype(np.float32).astype(np.float64)
    grads = []
    for step in range(steps):
        g = (rng.normal(size=shape) * 300.0).astype(np.float16)
        for where, kind in bad:
            if where == step:
                g.reshape(-1)[int(rng.integers(g.size))] = np.inf if kind == "inf" else np.nan
        grads.append(g.astype(np.float64))
    return Case([master, grads, 2.0**12, 0.01, growth],
                names=("master", "scaled_grads", "scale", "lr", "growth_interval"))  # fmt: skip


@dataclass
class AmpCheck(Check):
    def spec(self) -> dict[str, Any]:
        return {"runner": "mixed_precision", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        master, grads, scale, lr, growth = case.args
        master, good, states = master.astype(np.float32), 0, []
        for g in grads:
            master, weights, scale, good = amp_step(master, g.astype(np.float16), scale, good, lr,
                                                    growth)  # fmt: skip
            states.append((master.astype(np.float64), weights.astype(np.float64), scale, good))
        return {"states": states}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        if "error" in received:
            return f"{self.entry} {received['error']}: return (master, weights, scale, good_steps)"
        got = received.get("states") or []
        for n, (master, weights, scale, good) in enumerate(expected["states"]):
            finite = np.all(np.isfinite(case.args[1][n]))
            trial = (f"at step {n + 1} of {len(expected['states'])} (a float16 gradient "
                     f"{'without' if finite else 'with'} inf or nan, growth_interval "
                     f"{case.args[4]})")  # fmt: skip
            if n >= len(got):
                return f"no state after step {n + 1}"
            s = got[n]
            if s["master_dtype"] != "float32" or s["weights_dtype"] != "float16":
                return (f"the master weights must stay float32 and the working copy float16; "
                        f"got {s['master_dtype']} and {s['weights_dtype']} {trial}")  # fmt: skip
            if s["scale"] != scale:
                why = "" if finite else ": an overflow skips the step and halves the scale"
                return f"the loss scale is {s['scale']:g}, expected {scale:g} {trial}{why}"
            if s["good_steps"] != good:
                return f"good_steps is {s['good_steps']!r}, expected {good} {trial}"
            for what, e, g, rtol in (("the master weights", master, s["master"], 1e-6),
                                     ("the float16 weights", weights, s["weights"], 2.0**-10)):  # fmt: skip
                if not isinstance(g, np.ndarray) or g.shape != e.shape:
                    return f"{what} have the wrong shape {trial}"
                if not np.all(np.abs(g - e) <= rtol * np.abs(e) + 1e-30):
                    i = int(np.argmax(np.abs(g - e)))
                    return (f"{what} are wrong {trial}: expected {e.reshape(-1)[i]:.9g}, got "
                            f"{g.reshape(-1)[i]:.9g} (unscale the gradient: divide by the scale "
                            "before the update)")  # fmt: skip
        return None

    def passed(self, cases: Any) -> str:
        return f"{self.what}: every state right over {len(cases)} runs of float16 gradients."


# ------------------------------------------------------------------------ checkpointing
def mlp(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    return np.tanh(x @ w1) @ w2


def mlp_vjp(g: np.ndarray, x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> Any:
    a = np.tanh(x @ w1)
    grad_h = (g @ w2.T) * (1 - a * a)
    return grad_h @ w1.T, x.T @ grad_h, a.T @ g


def checkpoint_case(rng: np.random.Generator, trial: int) -> Case:
    n, d, hidden, out = [(4, 3, 5, 2), (2, 5, 7, 3), (6, 2, 4, 4)][trial % 3]
    x, w1 = rng.uniform(-1, 1, size=(n, d)), rng.uniform(-1, 1, size=(d, hidden))
    w2 = rng.uniform(-1, 1, size=(hidden, out))
    return Case([x, w1, w2], rng.standard_normal((n, out)), (0, 1, 2), ("x", "w1", "w2"))


@dataclass
class CheckpointCheck(FunctionCheck):
    """``Checkpoint.apply(block, x, w1, w2)``: gradients like the block's own, and the
    structure of checkpointing (only the inputs saved, the block run again in backward)."""

    call: str = "graph"

    def __post_init__(self) -> None:  # the block is the library's ops: no trial against
        pass  # finite differences is needed (the student writes no derivative formula)

    def spec(self) -> dict[str, Any]:
        return {"runner": "checkpoint", "entry": self.entry}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        problem = super().judge(case, received, expected)
        if problem:
            return problem
        calls, saved = received.get("calls") or {}, received.get("saved") or []
        if not all(saved) or received.get("extra"):
            kept = [
                f"saved tensor {i} (not one of the inputs)" for i, s in enumerate(saved) if not s
            ]
            kept += [f"ctx.{name}" for name in received.get("extra") or []]
            return (f"{self.entry} keeps {', '.join(kept)}: a checkpoint saves only its inputs "
                    "and recomputes the block's activations in backward (that is the memory "
                    "it saves)")  # fmt: skip
        if calls.get("forward") != 1 or calls.get("backward") != 1:
            return (f"the block ran {calls.get('forward')} time(s) in forward and "
                    f"{calls.get('backward')} in backward; a checkpoint runs it once in each "
                    "(without a graph in forward, with one in backward)")  # fmt: skip
        return None


# ------------------------------------------------------------------------------ authorship
#: The library's own sampler (torchlight.train.generate), checkpoint (torchlight.utils) and
#: loss scaler (torchlight.amp).
LIBRARY = {"generate", "checkpoint", "CheckpointFunction", "GradScaler"}


def library_sampler(sources: Iterable[str]) -> list[str]:
    """One line if the student code reaches for the library's sampler or checkpoint
    (``generate`` or ``checkpoint`` imported from torchlight, ``torchlight.train`` or
    ``torchlight.utils.checkpoint`` imported, an attribute of those names, or named through
    ``getattr``)."""
    found: list[str] = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torchlight"):
                found += [f"imports {a.name} from {node.module}" for a in node.names
                          if a.name in LIBRARY | {"*"}]  # fmt: skip
            elif isinstance(node, ast.Import):
                found += [f"imports {a.name}" for a in node.names if a.name.startswith(
                    ("torchlight.train", "torchlight.utils", "torchlight.amp"))]  # fmt: skip
            elif isinstance(node, ast.Attribute) and node.attr in LIBRARY:
                found.append(f"uses .{node.attr}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id == "getattr" and len(node.args) > 1
                  and isinstance(node.args[1], ast.Constant) and node.args[1].value in LIBRARY):  # fmt: skip
                found.append(f"names {node.args[1].value!r} through getattr")
    if not found:
        return []
    return [f"reaches for the library's sampler, checkpoint or loss scaler "
            f"({', '.join(dict.fromkeys(found))}): "
            "review by hand whether the student wrote them"]  # fmt: skip


FINDINGS = library_sampler

#: A checkpoint's backward runs its block again with a graph and backpropagates through it:
#: the structure check's "drives torchlight's own autograd" does not apply to it.
AUTOGRAD_BACKWARDS = ("Checkpoint",)


CHECKS: dict[str, Check] = {
    "test_kv_cache": KVCacheCheck(
        "decode_step", ("kv_cache",), kv_case, trials=4, timeout=20.0,
        what="KVCache and decode_step",
    ),
    "test_sampling_probs": ProbsCheck(
        "sampling_probs", ("sampling",), probs_case, trials=5, reference=sampling_probs,
        dtypes=("float64",), what="sampling_probs: temperature, top-k and top-p",
    ),
    "test_sample": DrawsCheck("sample", ("sample",), draws_case, trials=3, what="sample"),
    "test_quantize": TypedCheck(
        "quantize_int8", ("quantize",), quantize_case, trials=3, reference=quantize_int8,
        dtypes=("int8", "float64"), what="quantize_int8: per-channel symmetric int8",
    ),
    "test_int8_linear": TypedCheck(
        "int8_linear", ("int8_linear",), int8_linear_case, trials=3, reference=int8_linear,
        dtypes=("float64",), casts={"1": "int8"}, bound=int8_bound,
        what="int8_linear (within half a step per weight of the float layer)",
    ),
    "test_amp_step": AmpCheck("amp_step", ("amp",), amp_case, trials=3,
                              what="amp_step: loss scaling with float32 master weights"),
    "test_checkpoint": CheckpointCheck(
        "Checkpoint", ("checkpoint",), checkpoint_case, forward_ref=mlp, vjp_ref=mlp_vjp,
        what="Checkpoint: the same gradients, only the inputs saved, the block recomputed",
    ),
}  # fmt: skip
