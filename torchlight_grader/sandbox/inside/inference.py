"""How the sandbox calls assignment a8's answers (inference and efficiency): no references.

Runs *inside* the sandbox next to student code, like :mod:`runners`, and returns raw outputs
only; the grader (:mod:`torchlight_grader.checks.a8_inference`) draws the inputs and judges.

- ``kv_cache``: a GPT of the library built from the trial's weights, the student's cache
  (``KVCache(num_layers)``), filled by this runner with the keys and values of a prefix the
  student never sees (or empty), then ``decode_step(model, token, cache)`` once per new token;
- ``draws``: ``sample(probs, generator)`` repeated from ``np.random.default_rng(seed)``;
- ``arrays``: ``entry(*args)`` on numpy arrays (some cast to a named dtype first), the result
  as float64/int64 arrays with the dtype names the student returned;
- ``mixed_precision``: the student's step applied to a sequence of float16 gradients, the state
  (master weights, float16 weights, scale, good steps) threaded from one step to the next;
- ``checkpoint``: ``Checkpoint.apply(fn, *inputs)`` on a function built here, counting how often
  ``fn`` runs in forward and in backward, and what the Function saved.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _plain(value: Any) -> tuple[Any, str]:
    """A returned array as float64 (or int64 for integers) and its dtype's name."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        value = value.detach().numpy()
    if isinstance(value, np.ndarray | np.generic):
        array = np.asarray(value)
        kind = np.int64 if array.dtype.kind in "iub" else np.float64
        return array.astype(kind), str(array.dtype)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return np.asarray(float(value)), type(value).__name__
    return f"<{type(value).__name__}>", type(value).__name__


def run(
    spec: dict[str, Any], obj: Any, namespace: dict[str, Any], case: dict[str, Any]
) -> dict[str, Any]:
    """Call the student's answer ``obj`` for one trial of ``spec``'s runner; return its raw
    outputs."""
    import importlib

    runner = spec["runner"]

    runners = importlib.import_module(f"{__package__}.runners" if __package__ else "runners")
    if runner == "kv_cache":
        return _kv_cache(obj, runners.lookup(namespace, "KVCache"), case, runners.raw)
    if runner == "draws":
        probs, seed, count = case["args"]
        generator = np.random.default_rng(int(seed))
        return {"draws": [_token(obj(probs.copy(), generator)) for _ in range(int(count))]}
    if runner == "arrays":
        casts = spec.get("casts", {})
        args = [np.array(a).astype(casts[str(i)]) if str(i) in casts else
                (np.array(a) if isinstance(a, np.ndarray) else a)
                for i, a in enumerate(case["args"])]  # fmt: skip
        out = obj(*args)
        parts = out if isinstance(out, tuple) else (out,)
        plain = [_plain(p) for p in parts]
        return {"value": tuple(p[0] for p in plain), "dtypes": [p[1] for p in plain],
                "count": len(parts)}  # fmt: skip
    if runner == "mixed_precision":
        return _mixed_precision(obj, case)
    if runner == "checkpoint":
        return _checkpoint(obj, case, runners)
    raise ValueError(f"unknown runner {runner!r}")


def _token(value: Any) -> Any:
    if isinstance(value, bool):
        return f"<{type(value).__name__}>"
    if isinstance(value, int | np.integer):
        return int(value)
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return _token(value.item())
    return f"<{type(value).__name__}>"


def _kv_cache(step: Any, cache_class: Any, case: dict[str, Any], raw: Any) -> dict[str, Any]:
    import torchlight as tl
    from torchlight import nn

    config, state, prefix, tokens = case["args"]
    model = nn.GPT(**config)
    model.load_state_dict({name: tl.tensor(array) for name, array in state.items()})
    model.eval()
    cache = cache_class(config["num_layers"])
    with tl.no_grad():
        if prefix is not None:  # the keys and values of tokens decode_step never sees
            for layer, (k, v) in enumerate(zip(prefix["keys"], prefix["values"], strict=True)):
                cache.append(layer, tl.tensor(k), tl.tensor(v))
        logits = [raw(step(model, int(t), cache)) for t in tokens]
    return {"logits": tuple(logits), "length": _token(cache.length)}


def _mixed_precision(step: Any, case: dict[str, Any]) -> dict[str, Any]:
    master, grads, scale, lr, growth_interval = case["args"]
    master, good_steps = np.asarray(master, dtype=np.float32), 0
    states = []
    for grad in grads:
        out = step(master, np.asarray(grad).astype(np.float16), scale, good_steps, lr,
                   growth_interval)  # fmt: skip
        if not isinstance(out, tuple) or len(out) != 4:
            return {"error": f"returned {type(out).__name__}, not a tuple of 4 values"}
        master, weights, scale, good_steps = out
        (m, m_type), (w, w_type) = _plain(master), _plain(weights)
        states.append({"master": m, "master_dtype": m_type, "weights": w, "weights_dtype": w_type,
                       "scale": float(scale), "good_steps": _token(good_steps)})  # fmt: skip
    return {"states": states}


def _checkpoint(checkpoint: Any, case: dict[str, Any], runners: Any) -> dict[str, Any]:
    import torchlight as tl

    calls = {"forward": 0, "backward": 0}
    phase = ["forward"]

    def block(x: Any, w1: Any, w2: Any) -> Any:  # a two-layer MLP: tanh(x W1) W2
        calls[phase[0]] += 1
        return (x @ w1).tanh() @ w2

    args = runners.to_tensors(case)
    out = checkpoint.apply(block, *args)
    history = getattr(out, "history", None)
    ctx = getattr(history, "ctx", None)
    saved = [any(s is a for a in args) for s in getattr(ctx, "_saved", ())]
    extra = []
    for name, value in vars(ctx).items() if ctx is not None else ():
        if name in ("forward_args", "_saved", "_versions"):
            continue
        values = value if isinstance(value, list | tuple) else [value]
        if any(isinstance(v, tl.Tensor) and not any(v is a for a in args) for v in values):
            extra.append(name)
    phase[0] = "backward"
    out.backward(tl.tensor(np.array(case["grad_output"])))
    result = runners._gradients(out, tuple(args[i].grad for i in case["differentiable"]))
    result.update(calls=calls, saved=saved, extra=extra)
    return result
