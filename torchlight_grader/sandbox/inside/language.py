r"""Tokens and embeddings, for the language-model assignments' checks.

This file runs *inside* the sandbox, next to student code, like :mod:`runners`: no reference
values. The grader sends plain data (text, ids, merges); this calls the student's function and
sends back what came, as plain data.

- ``tokens``: ``entry(*args)`` with the arguments as sent (a text, a vocabulary size, a list of
  ids, merges as pairs); the result comes back as a string, or a list of ints (a tensor or an
  array of ids is read as its list), or the name of its type.
- ``graph_with``: the ``graph`` runner with some of the notebook's answers replaced, while the
  item runs, by the grader's stand-ins (:func:`stand_ins`: the embedding lookup and its sum
  over repeated ids; causal self-attention; the pre-norm block), written from the library's
  tensor operations, so that a mistake in one answer costs only its own item;
- ``calls``: ``entry(*args)`` for each argument list of a batch, the floats that came back;
- ``list_value``: ``entry(tensors, *rest)`` with a list of tensors first, the list returned;
- ``lm_training``: ``train_gpt(train_ids, steps, seed)`` on the shipped Shakespeare's first
  90% (rebuilt here, not taken from the notebook), with the stand-ins of the transformer in
  place, then the model's logits (no gradient) for the inputs the grader sent. The targets
  and the loss stay in the grader.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The most ids (or merges) one answer may send back (the hidden texts are a few kB).
MAX_ITEMS = 200_000


def plain(value: Any, depth: int = 0) -> Any:
    """A student's return value as plain data: str, int, or lists of them; else its type name."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return f"<{type(value).__name__}>"
    if isinstance(value, int | np.integer):
        return int(value)
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # a tensor or an array of ids
        value = value.tolist()
    if isinstance(value, list | tuple) and depth < 2:
        if len(value) > MAX_ITEMS:
            return f"<{type(value).__name__} of {len(value)} items>"
        return [plain(v, depth + 1) for v in value]
    return f"<{type(value).__name__}>"


def stand_ins(names: list[str]) -> dict[str, Any]:
    """The grader's own versions of the named answers (plain tensor math on the library)."""
    import math

    import torchlight as tl
    import torchlight.nn.functional as F
    from torchlight.autograd import Function

    class StandInEmbedding(Function):
        """``weight[ids]``; backward: the one-hot rows' transpose times the gradient."""

        @staticmethod
        def forward(ctx: Any, weight: Any, ids: Any) -> Any:
            ctx.save_for_backward(ids)
            ctx.rows = weight.shape[0]
            return weight[ids]

        @staticmethod
        def backward(ctx: Any, grad_output: Any) -> Any:
            (ids,) = ctx.saved_tensors
            one_hot = tl.eye(ctx.rows, dtype=grad_output.dtype)[ids.reshape(-1)]
            return one_hot.T @ grad_output.reshape(-1, grad_output.shape[-1]), None

    def attention(x: Any, w_qkv: Any, b_qkv: Any, w_out: Any, b_out: Any, nhead: int) -> Any:
        n, t, c = x.shape
        size = c // nhead
        qkv = x @ w_qkv.T + b_qkv
        q, k, v = (qkv[..., i * c : (i + 1) * c].reshape(n, t, nhead, size).permute(0, 2, 1, 3)
                   for i in range(3))  # fmt: skip
        future = np.triu(np.ones((t, t), dtype=bool), k=1)
        mask = tl.tensor(np.where(future, -np.inf, 0.0), dtype=x.dtype)
        scores = q @ k.permute(0, 1, 3, 2) / math.sqrt(size) + mask
        return (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(n, t, c) @ w_out.T + b_out

    def block(x: Any, ln1_w: Any, ln1_b: Any, w_qkv: Any, b_qkv: Any, w_out: Any, b_out: Any,
              ln2_w: Any, ln2_b: Any, w_fc: Any, b_fc: Any, w_proj: Any, b_proj: Any,
              nhead: int) -> Any:  # fmt: skip
        c = x.shape[-1]
        normed = F.layer_norm(x, (c,), ln1_w, ln1_b, 1e-5)
        h = x + attention(normed, w_qkv, b_qkv, w_out, b_out, nhead)
        z = F.layer_norm(h, (c,), ln2_w, ln2_b, 1e-5)
        return h + F.gelu(z @ w_fc.T + b_fc, approximate="tanh") @ w_proj.T + b_proj

    known = {"Embedding": StandInEmbedding, "causal_self_attention": attention, "block": block}
    return {name: known[name] for name in names}


def _swapped(namespace: dict[str, Any], names: list[str], call: Any) -> Any:
    saved = {name: namespace.get(name) for name in names}
    namespace.update(stand_ins(names))
    try:
        return call()
    finally:
        namespace.update(saved)


def shakespeare_train_ids() -> np.ndarray:
    """The first 90% of the shipped Shakespeare, one id per character (the notebook's split)."""
    from torchlight.data.text import load_text
    from torchlight.train.tokenizers import CharTokenizer

    text = load_text("shakespeare")
    data = np.array(CharTokenizer(text).encode(text))
    return data[: int(0.9 * len(data))]


def run(
    spec: dict[str, Any], obj: Any, namespace: dict[str, Any], case: dict[str, Any]
) -> dict[str, Any]:
    """One trial of a language-model item: call the student's ``obj``, return raw data."""
    runner = spec["runner"]
    if runner == "tokens":
        args = [
            [tuple(int(v) for v in a) if isinstance(a, list | tuple) else int(a) for a in arg]
            if isinstance(arg, list)
            else arg
            for arg in case["args"]
        ]
        out = obj(*args)
        return {"value": plain(out), "type": type(out).__name__}
    import importlib  # the sandbox runs this file as `language`, the grader as a submodule

    runners = importlib.import_module(f"{__package__}.runners" if __package__ else "runners")
    if runner == "graph_with":
        graph = {"runner": "graph", "entry": spec["entry"]}
        return _swapped(namespace, spec["stand_ins"],
                        lambda: runners.run(graph, namespace, case))  # fmt: skip
    if runner == "calls":
        return {"values": np.array([float(obj(*args)) for args in case["args"][0]])}
    if runner == "list_value":
        import torchlight as tl

        tensors = [tl.tensor(np.array(a)) for a in case["args"][0]]
        out = obj(tensors, *case["args"][1:])
        return {"value": runners.raw(out), "type": type(out).__name__}
    if runner == "lm_training":
        import torchlight as tl

        seed, steps, inputs, altered = case["args"]
        model = _swapped(namespace, ["causal_self_attention", "block"],
                         lambda: obj(shakespeare_train_ids(), int(steps), int(seed)))  # fmt: skip
        with tl.no_grad():
            logits = _swapped(namespace, ["causal_self_attention", "block"],
                              lambda: (model(tl.tensor(inputs)), model(tl.tensor(altered))))  # fmt: skip
        return {"logits": runners.raw(logits[0]), "altered": runners.raw(logits[1])}
    raise ValueError(f"unknown language runner {runner!r}")
