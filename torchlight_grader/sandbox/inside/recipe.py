"""The capstone's runner: train a tiny GPT with the student's recipe, return its weights.

Runs *inside* the sandbox, next to student code, so it holds nothing worth taking: the grader
sends the training tokens (already relabelled by a secret permutation of the vocabulary), the
seed and the vocabulary size; the validation text never comes here. The runner builds the
model the student's ``CONFIG`` asks for (the library's ``GPT``, from the grader's seed), hands
it to the student's ``train(model, tokens, rng)``, and returns the configuration and the
weights as plain arrays. The grader rebuilds the model from them in its own process and
measures the validation loss itself: what the recipe prints or returns besides is not read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: CONFIG's keys, each with its smallest and largest value (the notebook states them too).
BOUNDS = {
    "d_model": (8, 64),
    "nhead": (1, 8),
    "num_layers": (1, 3),
    "block_size": (8, 64),
}


def read_config(config: Any) -> dict[str, int]:
    """``CONFIG`` as four integers within :data:`BOUNDS`, or a ValueError that says why."""
    if not isinstance(config, dict):
        raise ValueError(
            f"CONFIG must be a dict with keys {sorted(BOUNDS)}, not a {type(config).__name__}"
        )
    unknown = sorted(str(k) for k in config if k not in BOUNDS)
    missing = sorted(k for k in BOUNDS if k not in config)
    if unknown or missing:
        raise ValueError(
            f"CONFIG must have exactly the keys {sorted(BOUNDS)} (missing {missing}, unknown {unknown})"
        )
    out = {}
    for key, (low, high) in BOUNDS.items():
        value = config[key]
        if type(value) is not int or not low <= value <= high:
            raise ValueError(f"CONFIG[{key!r}] must be an int from {low} to {high}, got {value!r}")
        out[key] = value
    if out["d_model"] % out["nhead"]:
        raise ValueError(
            f"CONFIG: d_model {out['d_model']} must be a multiple of nhead {out['nhead']}"
        )
    return out


def build(config: dict[str, int], vocab: int, seed: int) -> Any:
    """The tiny GPT of ``config`` in float32, its weights drawn from ``seed``."""
    import torchlight as tl
    from torchlight.nn import GPT

    tl.manual_seed(seed)
    with _Float32():
        return GPT(vocab, block_size=config["block_size"], d_model=config["d_model"],
                         nhead=config["nhead"], num_layers=config["num_layers"])  # fmt: skip


class _Float32:
    def __enter__(self) -> None:
        import torchlight as tl

        self.before = tl.get_default_dtype()
        tl.set_default_dtype(tl.float32)

    def __exit__(self, *exc: object) -> None:
        import torchlight as tl

        tl.set_default_dtype(self.before)


def run(train: Any, config: Any, case: dict[str, Any]) -> dict[str, Any]:
    """``train(model, tokens, rng)`` on the grader's tokens; the weights it leaves."""
    import torchlight as tl

    tokens, seed, vocab = case["args"]
    config = read_config(config)
    model = build(config, int(vocab), int(seed))
    data = tl.tensor(np.asarray(tokens, dtype=np.int64))
    with _Float32():
        train(model, data, np.random.default_rng(int(seed)))
    state = {}
    for name, value in model.state_dict().items():
        state[name] = np.asarray(value.detach().numpy(), dtype=np.float32)
    return {"config": config, "state": state}
