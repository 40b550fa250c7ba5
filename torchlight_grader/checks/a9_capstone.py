r"""Hidden check of the capstone, *a leaderboard that checks itself*: a training recipe for a tiny
GPT, re-run by the grader and scored on text it never saw.

A student hands in ``CONFIG`` (the model's size, within :data:`~torchlight_grader.sandbox.inside.recipe.BOUNDS`)
and ``train(model, tokens, rng)`` (the optimizer, the schedule, the batches, how many steps).
The grader, not the recipe, decides everything that makes a score:

- **the run**: in the sandbox, from the grader's seed, on the first :data:`TRAIN_CHARS`
  characters of the shipped Shakespeare, within :data:`CPU_BUDGET` CPU seconds counted by the
  sandbox's broker over every process and thread (a recipe that runs past it scores nothing);
- **the data**: the characters are relabelled by a secret permutation of the vocabulary, drawn
  anew for every run, so weights trained elsewhere and shipped inside the notebook do not fit
  the tokens they meet (and the corpus itself is not in the sandbox's library);
- **the score**: the grader rebuilds the model from the returned weights in its own process
  and computes the mean cross-entropy (nats per character) on :data:`EVAL_WINDOWS` windows of
  the last :data:`VAL_CHARS` characters, which the sandbox never receives. What the recipe
  prints is not read.

The item passes at a validation loss of at most :data:`TARGET` (a model that learned more than
the characters' frequencies); the leaderboard (:mod:`torchlight_grader.course.leaderboard`)
ranks every recipe by its loss and re-runs the top entries before it publishes.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from torchlight_grader.checks.check import Case, Check
from torchlight_grader.sandbox.inside.recipe import build, read_config

TRAIN_CHARS = 300_000  # the recipe's training text: the corpus's first characters
VAL_CHARS = 100_000  # the grader's validation text: the corpus's last characters
EVAL_WINDOWS = 48  # windows of block_size + 1 characters drawn from the validation text
CPU_BUDGET = 6.0  # CPU seconds of the whole run (building the model included)
TARGET = 3.0  # nats per character: the unigram model of the text is at ~3.3, uniform at 4.2
CODE_LIMIT = 24 * 1024  # bytes of code a recipe may have (weights cannot hide in it)
#: One judge at a time in a process: rebuilding the model sets torchlight's process-wide default
#: dtype to float32 for a moment, and the leaderboard judges recipes in threads (``--jobs``).
_JUDGE = threading.Lock()


@functools.cache
def corpus() -> tuple[np.ndarray, int]:
    """The shipped Shakespeare as character ids (in the grader's process only), and how many
    distinct characters it has."""
    from torchlight.data.text import load_text

    text = load_text("shakespeare")
    chars = sorted(set(text))
    table = {c: i for i, c in enumerate(chars)}
    return np.fromiter((table[c] for c in text), dtype=np.uint8, count=len(text)), len(chars)


class RecipeCheck(Check):
    """Runs ``train`` with ``CONFIG`` in the sandbox; judges the weights it leaves."""

    def spec(self) -> dict[str, Any]:
        return {"runner": "recipe", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        return {}

    def loss(self, case: Case, received: dict[str, Any]) -> float:
        """The validation loss of the returned weights, computed here (ValueError: unusable)."""
        config = read_config(received.get("config"))
        with _JUDGE:
            return self._loss(config, case, received)

    def _loss(self, config: dict[str, int], case: Case, received: dict[str, Any]) -> float:
        import torchlight as tl
        from torchlight.nn.functional import cross_entropy

        vocab, perm, seed = case.args[2], case.hidden["perm"], case.args[1]
        model = build(config, vocab, seed)  # the same architecture, here: then its weights
        state = received.get("state")
        own = model.state_dict()
        if not isinstance(state, dict) or set(state) != set(own):
            raise ValueError(
                f"the weights returned are not those of the GPT CONFIG describes (expected the "
                f"parameters {sorted(own)[:4]}...)"
            )
        loaded = {}
        for name, value in own.items():
            got = state[name]
            if not isinstance(got, np.ndarray) or got.shape != tuple(value.shape):
                raise ValueError(f"parameter {name} has the wrong shape or type")
            if not np.isfinite(got).all():
                raise ValueError(f"parameter {name} is not finite after training (diverged?)")
            loaded[name] = tl.tensor(got.astype(np.float32))
        model.load_state_dict(loaded)
        ids, _ = corpus()
        val = perm[ids[-VAL_CHARS:]].astype(np.int64)
        block = config["block_size"]
        rng = np.random.default_rng(case.hidden["eval_seed"])
        starts = rng.integers(0, len(val) - block - 1, EVAL_WINDOWS)
        x = np.stack([val[s : s + block] for s in starts])
        y = np.stack([val[s + 1 : s + block + 1] for s in starts])
        with tl.no_grad():
            logits = model(tl.tensor(x)).reshape(-1, vocab).to(tl.float64)
            loss = cross_entropy(logits, tl.tensor(y.reshape(-1)))
        return float(loss.item())

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        try:
            loss = self.loss(case, received)
        except ValueError as exc:
            return str(exc)
        case.hidden["loss"] = loss
        if not loss <= TARGET:
            return (
                f"your recipe reached a validation loss of {loss:.3f} nats per character "
                f"(measured by the grader on text the recipe never saw); the item asks for at "
                f"most {TARGET:g}: train longer within the budget, or a larger model"
            )
        return None

    def passed(self, cases: Any) -> str:
        loss = cases[0].hidden.get("loss", float("nan"))
        return (
            f"your recipe reached a validation loss of {loss:.3f} nats per character, measured "
            f"by the grader on text it never saw (target {TARGET:g}, CPU budget {CPU_BUDGET:g} s)."
        )


def sample(rng: np.random.Generator, trial: int) -> Case:
    """One run: the training text relabelled by a fresh secret permutation, the seed."""
    ids, vocab = corpus()
    perm = rng.permutation(vocab).astype(np.uint8)
    seed = int(rng.integers(0, 2**31))
    tokens = perm[ids[:TRAIN_CHARS]].astype(np.int32)
    hidden = {"perm": perm, "eval_seed": int(rng.integers(0, 2**31))}
    return Case([tokens, seed, vocab], None, (), ("tokens", "seed", "vocab"), hidden)


CHECKS = {
    "test_recipe": RecipeCheck(
        "train",
        ("recipe",),
        sample,
        trials=1,
        timeout=60.0,  # wall clock: the CPU budget is what counts, this only stops a hang
        what="the training recipe",
        cpu=CPU_BUDGET,
        processes=1,
    ),
}


def code_size(sources: Iterable[str]) -> int:
    """Bytes of code the student wrote (answer cells and cells they added)."""
    return sum(len(s.encode("utf-8")) for s in sources)


def FINDINGS(sources: Iterable[str]) -> list[str]:  # noqa: N802 - the registry's name
    size = code_size(sources)
    if size > CODE_LIMIT:
        return [
            f"the recipe's code is {size // 1024} KiB (a recipe has at most "
            f"{CODE_LIMIT // 1024} KiB): weights or data shipped inside the notebook? It is not "
            "ranked on the leaderboard"
        ]
    return []
