r"""Hidden checks for assignment 6, *Tokens and embeddings*.

A byte-level BPE tokenizer (``train_merges``, ``encode``, ``decode``), compared id for id with
the library's :class:`~torchlight.train.tokenizers.BPETokenizer` on fresh random text (ASCII
words drawn with Zipf-like frequencies, so that ties between equally frequent pairs are common;
accented letters, CJK, emoji; numbers, punctuation, tabs, newlines, runs of spaces); the
embedding's forward and backward as a Function, on ids that repeat (their gradients add up),
compared with numpy and central differences; sinusoidal positions against the library's
:class:`~torchlight.nn.SinusoidalPositionalEncoding`; token plus learned position embeddings as
a graph, with the grader's own ``Embedding`` in place of the notebook's while it runs.

**Speed.** ``test_train_speed``/``test_train_fast`` time ``train_merges`` on a fresh corpus of
about 1 MB (:data:`SPEED_CHARS` characters, :data:`SPEED_VOCAB` ``- 256`` merges) against the
reference trainer in the sandbox (:mod:`torchlight_grader.sandbox.inside.language`), with the
paired protocol of :mod:`torchlight_grader.checks.timing` (fresh corpus per pair, the merges
compared after every pair); ``*_speed`` passes at the partial threshold, ``*_fast`` at the full
one, and both show the measured ratio. Training is what a naive tokenizer loses on: recounting
every pair of the whole corpus after every merge costs the corpus's length per merge, where
counts over the distinct pieces, updated per merge in the pieces that hold the merged pair,
cost next to nothing per merge. A student's call is cut after :data:`SPEED_CUT` times the
reference's CPU time (not wall time, which a busy grading machine stretches): a naive trainer
earns no speed credit and costs the grader seconds, not minutes. The whole measurement stops
after :data:`SPEED_HELD_AFTER` seconds of wall time, well inside the item's timeout: a call
already past the partial threshold in CPU time is then cut as slow, any other is held for a
re-run (a machine that busy cannot time it).

``encode`` is graded with merges the grader trained and ``decode`` with ids the grader encoded,
so a mistake in training costs only its own item. The texts an item encodes contain characters
the merges never saw (their bytes stay single tokens). The grader's library for this notebook
has neither the library's tokenizer (training, encoding, decoding) nor its embedding lookups
and position tables: an answer that calls them scores nothing for that item.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from torchlight_grader.checks import timing
from torchlight_grader.checks.check import Case, Check
from torchlight_grader.checks.kinds import FunctionCheck, ValueCheck
from torchlight_grader.checks.structure import references

SYLLABLES = ["th", "e", "an", "in", "er", "o", "re", "s", "t", "a", "ou", "ing", "l", "y", "w"]
OTHER = ["é", "ü", "ñ", "naïve", "über", "中文", "日本", "🙂", "👍🏽", "Ω", "—", "…", "€5"]
UNSEEN = ["ß", "Ж", "ψ", "한국", "🚀", "ø", "ç", "ī"]  # never in a training text
PUNCTUATION = [",", ".", "!", "?", ";", "'", '"', "(", ")", "--"]
SPACES = [" ", " ", " ", " ", " ", "  ", "\t", "\n", "\n\n", "   "]


class TextCase(Case):
    """A trial whose arguments are texts and ids: described by their sizes, not printed."""

    def describe(self) -> str:
        parts = []
        for name, a in zip(self.names, self.args, strict=False):
            if isinstance(a, str):
                parts.append(f"{name}: a text of {len(a)} characters starting {a[:40]!r}")
            elif isinstance(a, list):
                parts.append(f"{name}: {len(a)} items")
            else:
                parts.append(f"{name}={a!r}")
        return ", ".join(parts)


def random_text(rng: np.random.Generator, words: int, unseen: bool = False) -> str:
    """Words of a few syllables (a small vocabulary: frequent pairs, and ties), a few words of
    other alphabets, numbers and punctuation, separated by spaces, tabs and newlines."""
    vocabulary = ["".join(rng.choice(SYLLABLES, size=rng.integers(1, 4))) for _ in range(40)]
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    extra = OTHER + (UNSEEN if unseen else [])
    out = []
    for _ in range(words):
        roll = rng.random()
        if roll < 0.08:
            word = str(rng.choice(extra))
        elif roll < 0.12:
            word = str(rng.integers(0, 1000))
        else:
            word = str(rng.choice(vocabulary, p=weights))
            if rng.random() < 0.1:
                word = word.capitalize()
        if rng.random() < 0.1:
            word += str(rng.choice(PUNCTUATION))
        out.append(word + str(rng.choice(SPACES)))
    return "".join(out)


def library_merges(text: str, vocab_size: int) -> list[list[int]]:
    from torchlight.train.tokenizers import BPETokenizer

    return [[int(a), int(b)] for a, b in BPETokenizer.train(text, vocab_size).merges]


def _as_pairs(value: Any) -> list[tuple[int, ...]] | None:
    if not isinstance(value, list):
        return None
    if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(v, int) for v in p)
               for p in value):  # fmt: skip
        return None
    return [tuple(p) for p in value]


def _show(ids: Any, merges: list[list[int]]) -> str:
    """A pair of ids with the bytes each stands for."""
    vocab = [bytes([b]) for b in range(256)]
    for a, b in merges:
        vocab.append(vocab[a] + vocab[b])
    try:
        return f"({ids[0]}, {ids[1]}) = {vocab[ids[0]]!r} + {vocab[ids[1]]!r}"
    except (IndexError, TypeError):
        return repr(ids)


# ------------------------------------------------------------------------------ training
def train_case(rng: np.random.Generator, trial: int) -> Case:
    text = random_text(rng, int(rng.integers(300, 500)))
    size = 256 + int(rng.integers(40, 90))
    return TextCase(
        [text, size], names=("text", "vocab_size"), hidden={"expected": library_merges(text, size)}
    )


def pair_counts(text: str, merges: list[list[int]]) -> dict[tuple[int, ...], int]:
    """How often each adjacent pair occurs after ``merges`` were applied (training's counts)."""
    from collections import Counter

    from torchlight.train.tokenizers import WORD, _merge

    words = Counter(tuple(w.encode("utf-8")) for w in WORD.findall(text))
    for k, (a, b) in enumerate(merges):
        words = Counter({_merge(w, (a, b), 256 + k): c for w, c in words.items()})
    counts: Counter[tuple[int, ...]] = Counter()
    for word, count in words.items():
        for pair in zip(word, word[1:], strict=False):
            counts[pair] += count
    return dict(counts)


@dataclass
class TokensCheck(Check):
    """Calls a tokenizer function on text, ids and merges; compares its result exactly."""

    hint: str = ""

    def spec(self) -> dict[str, Any]:
        return {"runner": "tokens", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        return {"value": case.hidden["expected"]}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        exp, got = expected["value"], received.get("value")
        trial = f"on inputs ({case.describe()})"
        if self.entry == "train_merges":
            return self._judge_merges(case, exp, got, trial)
        if isinstance(exp, str):
            if not isinstance(got, str):
                return f"{self.entry} must return a str, got {received.get('type')} {trial}"
            if got == exp:
                return None
            at = next((i for i, (e, g) in enumerate(zip(exp, got, strict=False)) if e != g),
                      min(len(exp), len(got)))  # fmt: skip
            return (
                f"{self.entry} returned a text of {len(got)} characters, expected {len(exp)}; "
                f"they differ from character {at}: expected {exp[at : at + 12]!r}, got "
                f"{got[at : at + 12]!r} {trial}"
            )
        if not isinstance(got, list) or not all(isinstance(v, int) for v in got):
            return f"{self.entry} must return a list of ints, got {received.get('type')} {trial}"
        if got == exp:
            return None
        at = next((i for i, (e, g) in enumerate(zip(exp, got, strict=False)) if e != g),
                  min(len(exp), len(got)))  # fmt: skip
        return (
            f"{self.entry} returned {len(got)} ids, expected {len(exp)}; they differ from "
            f"position {at}: expected {exp[at : at + 8]}, got {got[at : at + 8]}"
            f"{self.hint} {trial}"
        )

    def _judge_merges(self, case: Case, exp: list[list[int]], got: Any, trial: str) -> str | None:
        pairs = _as_pairs(got)
        if pairs is None:
            return f"train_merges must return a list of pairs of ints, got {got!r:.80} {trial}"
        want = [tuple(p) for p in exp]
        if pairs == want:
            return None
        at = next((k for k, (e, g) in enumerate(zip(want, pairs, strict=False)) if e != g),
                  min(len(want), len(pairs)))  # fmt: skip
        if at >= len(pairs) or at >= len(want):
            return f"train_merges returned {len(pairs)} merges, expected {len(want)} {trial}"
        counts = pair_counts(case.args[0], exp[:at])
        e, g = want[at], pairs[at]
        message = (
            f"merge {at} (token {256 + at}) should be {_show(e, exp)}, which occurs "
            f"{counts.get(e, 0)} times, but yours is {_show(g, exp)}, which occurs "
            f"{counts.get(g, 0)} times (merges 0..{at - 1} agree)"
        )
        if counts.get(e, 0) == counts.get(g, 0):
            message += ": a tie, which goes to the smallest pair (compare the tuples)"
        return f"{message} {trial}"


# ------------------------------------------------------------------------------ speed
#: The speed items, as the notebook states them: ``train_merges`` on :data:`SPEED_CHARS`
#: characters (about 1 MB) learning ``SPEED_VOCAB - 256`` merges. Measured on the 2-core
#: development machine beside other graders, in the sandbox: the reference trains in about
#: 0.5 s, the notebook's solution at 1.05x; recounting the pairs over the distinct pieces per
#: merge at 10.6x; recounting the whole corpus per merge about 0.85 s per merge (some 170x: cut
#: at SPEED_CUT, after 24 s).
SPEED = timing.Thresholds(full=3.0, partial=25.0)
SPEED_CHARS = 1_000_000
SPEED_VOCAB = 356
SPEED_CUT = 50.0
#: The wall-clock seconds the whole measurement may take, and the item's timeout. Cut on CPU
#: time alone, a naive trainer on a loaded machine ran into the timeout (its message says "an
#: infinite loop"): in one loaded ``make test`` its 46 s of CPU time took over 240 s.
SPEED_HELD_AFTER = 150.0
SPEED_TIMEOUT = 240.0
SPEED_PAIRS = 3
FAIRNESS = timing.Fairness(max_spread=0.5, min_share=0.1)
PROTOCOL = Path(timing.__file__).read_text(encoding="utf-8")
#: What the sandbox reports is checked against what the student's code cannot reach: the timed
#: calls' CPU times must add up to the CPU time the sandbox counted from outside the student's
#: process (within CPU_SLACK seconds or CPU_SHARE of it: the corpora are drawn and the pieces
#: compared outside the timed calls), and the reference's CPU time there must be within
#: REFERENCE_DRIFT of the grader's own run of it on the same corpus.
CPU_SLACK = 1.5
CPU_SHARE = 0.2
REFERENCE_DRIFT = 2.0
#: A call the kernel's timer cut after N s of CPU time: the runner's clock saw at least this x N.
CUT_SEEN = 0.9


def speed_case(rng: np.random.Generator, trial: int) -> Case:
    seed = int(rng.integers(2**31))
    fairness = [FAIRNESS.max_spread, FAIRNESS.min_share]
    return TextCase([seed, SPEED_CHARS, SPEED_VOCAB, SPEED_PAIRS, 3, SPEED_CUT, SPEED.partial,
                     SPEED_HELD_AFTER, fairness, PROTOCOL],
                    names=("seed", "chars", "vocab_size", "pairs", "attempts", "cut", "partial",
                           "held_after", "fairness", "protocol"))  # fmt: skip


@dataclass
class TrainSpeedCheck(Check):
    """``train_merges`` against the reference trainer in the paired protocol (see the module)."""

    level: str = "partial"
    same_run_as: str | None = None
    """The other level's item: judged from that item's measurement (one timing, two levels)."""

    counted_cpu: bool = field(default=True, kw_only=True)  # (see Check)

    def spec(self) -> dict[str, Any]:
        return {"runner": "bpe_speed", "entry": self.entry}

    def expected(self, case: Case) -> dict[str, Any]:
        """The reference trainer's CPU time on the first pair's corpus, measured here, in the
        grader's process (once per case: both levels share it)."""
        if "reference_cpu" not in case.hidden:
            import time

            from torchlight_grader.sandbox.inside.language import fresh_corpus, reference_merges

            seed, chars, vocab_size = case.args[:3]
            text = fresh_corpus(seed, 0, chars)
            start = time.process_time()
            merges = reference_merges(text, vocab_size)
            case.hidden["reference_cpu"] = time.process_time() - start
            case.hidden["first_merges"] = [list(p) for p in merges]
        return {k: case.hidden[k] for k in ("reference_cpu", "first_merges")}

    def verdict(self, received: dict[str, Any], expected: dict[str, Any] | None = None
                ) -> timing.SpeedVerdict:  # fmt: skip
        """The protocol's verdict, once what the sandbox reported agrees with what was measured
        where the student's code cannot reach: the CPU time the sandbox counted from outside
        the student's process (every timed call's CPU time must add up to it), and the
        reference trainer's CPU time in the grader (the sandbox's may differ by 2x at most),
        and the merges of the first timed corpus, compared here with the grader's own."""
        held = received.get("held")
        if isinstance(held, str):
            return timing.held(held[:300], f" on a quieter machine (full credit at <= "
                                           f"{SPEED.full:g}x, partial at <= {SPEED.partial:g}x)")  # fmt: skip
        cut = received.get("cut")
        if isinstance(cut, int | float):  # (its ratio rests on the sandbox's CPU clock: checked)
            # the kernel's timer stopped the call after ``cut`` s of CPU time: the runner's clock
            # must have seen that much (``CUT_SEEN``: the timer's granularity) and the broker all
            problem = timing.miscounted(received, slack=CPU_SLACK, share=CPU_SHARE,
                                        what=self.what, least=CUT_SEEN * float(cut))  # fmt: skip
            if problem is not None:
                return problem
            times = received.get("cut_times")
            times = float(times) if isinstance(times, int | float) else SPEED_CUT
            return timing.SpeedVerdict("slow", None, (
                f"{self.what} was stopped after {cut:.1f} s of CPU time, {times:.0f}x the "
                f"reference trainer's on the same corpus of {SPEED_CHARS:,} characters: no speed "
                f"credit (full credit at <= {SPEED.full:g}x, partial at <= {SPEED.partial:g}x). "
                "Recounting every pair of the whole corpus after every merge is the usual "
                "cause: count over the distinct pieces, and update the counts per merge"))  # fmt: skip
        problem = self.tampered(received, expected or {})
        if problem is not None:
            return problem
        return timing.judge_wall_and_cpu(received, SPEED, threads=1, fairness=FAIRNESS,
                                         what=self.what)  # fmt: skip

    def tampered(self, received: dict[str, Any], expected: dict[str, Any]
                 ) -> timing.SpeedVerdict | None:  # fmt: skip
        pairs = received.get("pairs") or []
        if received.get("failed") or not pairs:
            return None  # nothing was timed: judge says so
        if "first_merges" in expected and received.get("first_merges") != expected["first_merges"]:
            return timing.SpeedVerdict("wrong", None, (
                f"{self.what} earns no speed credit: the merges it returned for the first "
                "timed corpus are not the reference's (checked by the grader itself)"))  # fmt: skip
        problem = timing.miscounted(received, slack=CPU_SLACK, share=CPU_SHARE, what=self.what)
        if problem is not None:
            return problem
        return timing.drifted(pairs, expected.get("reference_cpu"), REFERENCE_DRIFT,
                              "the reference trainer")  # fmt: skip

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        verdict = self.verdict(received, expected)
        case.hidden["shown"] = verdict.message  # passed_on reads it (with the CPU counted)
        if timing.points(verdict, self.level):
            return None
        if verdict.status in ("partial", "slow") and verdict.ratio is not None:
            needed = SPEED.full if self.level == "full" else SPEED.partial
            return f"{verdict.message}: this item needs a ratio of at most {needed:g}"
        return verdict.message

    def passed_on(self, cases: Any, received: Sequence[dict[str, Any]]) -> str:
        return str(cases[0].hidden.get("shown", ""))


# ------------------------------------------------------------------------------ encode, decode
def encode_case(rng: np.random.Generator, trial: int) -> Case:
    from torchlight.train.tokenizers import BPETokenizer

    corpus = random_text(rng, 400)
    merges = library_merges(corpus, 256 + int(rng.integers(40, 90)))
    text = random_text(rng, int(rng.integers(60, 120)), unseen=True)
    ids = BPETokenizer([(m[0], m[1]) for m in merges]).encode(text)
    return TextCase([text, merges], names=("text", "merges"), hidden={"expected": ids})


def decode_case(rng: np.random.Generator, trial: int) -> Case:
    from torchlight.train.tokenizers import BPETokenizer

    corpus = random_text(rng, 400)
    merges = library_merges(corpus, 256 + int(rng.integers(40, 90)))
    tokenizer = BPETokenizer([(m[0], m[1]) for m in merges])
    if trial % 2 == 0:  # a round trip: ids of a text with characters the merges never saw
        text = random_text(rng, int(rng.integers(60, 120)), unseen=True)
        ids = tokenizer.encode(text)
    else:  # any ids: merged tokens and lone bytes, invalid UTF-8 among them
        ids = [int(i) for i in rng.integers(0, tokenizer.vocab_size, size=60)]
        ids += [int(i) for i in rng.integers(128, 256, size=6)]
        rng.shuffle(ids)
    text = tokenizer.decode(ids)
    return TextCase([ids, merges], names=("ids", "merges"), hidden={"expected": text})


# ------------------------------------------------------------------------------ embedding
EMBEDDING_SHAPES = [((3, 4), 5, 3), ((9,), 4, 2), ((2, 3, 2), 6, 4)]  # ids' shape, V, D


def embedding(weight: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return weight[ids]


def embedding_vjp(g: np.ndarray, weight: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray]:
    grad = np.zeros_like(weight)
    np.add.at(grad, ids.reshape(-1), g.reshape(-1, weight.shape[1]))
    return (grad,)


def embedding_case(rng: np.random.Generator, trial: int) -> Case:
    shape, rows, dim = EMBEDDING_SHAPES[trial % len(EMBEDDING_SHAPES)]
    ids = rng.integers(0, rows, size=shape)  # more ids than rows: some repeat
    weight = rng.uniform(-2, 2, size=(rows, dim))
    return Case([weight, ids], rng.standard_normal((*shape, dim)), (0,), ("weight", "ids"))


# ------------------------------------------------------------------------------ positions
def sinusoidal(length: int, dim: int) -> np.ndarray:
    from torchlight.nn import SinusoidalPositionalEncoding

    return np.asarray(SinusoidalPositionalEncoding(length, dim)._buffers["pe"].numpy())


def sinusoidal_case(rng: np.random.Generator, trial: int) -> Case:
    length = int(rng.integers(5, 40))
    dim = int(rng.integers(2, 12)) * 2 + (1 if trial == 1 else 0)  # one odd dim
    return Case([length, dim], names=("length", "dim"))


EMBED_SHAPES = [(2, 5, 7, 3, 8), (3, 4, 5, 2, 4), (1, 6, 4, 4, 9)]  # N, T, V, D, block_size


def embed(ids: np.ndarray, tokens: np.ndarray, positions: np.ndarray) -> np.ndarray:
    return tokens[ids] + positions[: ids.shape[1]]


def embed_vjp(g: np.ndarray, ids: np.ndarray, tokens: np.ndarray, positions: np.ndarray) -> Any:
    grad_tokens = np.zeros_like(tokens)
    np.add.at(grad_tokens, ids.reshape(-1), g.reshape(-1, tokens.shape[1]))
    grad_positions = np.zeros_like(positions)
    grad_positions[: ids.shape[1]] = g.sum(0)
    return grad_tokens, grad_positions


def embed_case(rng: np.random.Generator, trial: int) -> Case:
    n, t, rows, dim, block = EMBED_SHAPES[trial % len(EMBED_SHAPES)]
    ids = rng.integers(0, rows, size=(n, t))
    tokens, positions = rng.uniform(-2, 2, size=(rows, dim)), rng.uniform(-2, 2, size=(block, dim))
    return Case(
        [ids, tokens, positions],
        rng.standard_normal((n, t, dim)),
        (1, 2),
        ("ids", "tokens", "positions"),
    )


@dataclass
class EmbedCheck(FunctionCheck):
    """A graph check (``entry(*args).backward(G)``) run with the grader's ``Embedding`` in
    place of the notebook's (:mod:`torchlight_grader.sandbox.inside.language`)."""

    call: str = "graph"
    stand_ins: tuple[str, ...] = ("Embedding",)

    def spec(self) -> dict[str, Any]:
        return {"runner": "graph_with", "entry": self.entry, "stand_ins": list(self.stand_ins)}


# ------------------------------------------------------------------------------ authorship
#: The library's tokenizer, embedding and position names an answer must not reach for.
LIBRARY = {
    "BPETokenizer", "CharTokenizer", "tokenizer_from_dict", "tokenizers", "_merge", "_encode_word",
    "Embedding", "embedding", "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding", "sparse",
}  # fmt: skip


def library_tokens(sources: Iterable[str]) -> list[str]:
    """The integrity findings of a notebook that reaches for the library's tokenizer,
    embedding or positions (an import of one of their names from torchlight, an attribute of
    that name, ``getattr`` with it as a constant:
    :func:`~torchlight_grader.checks.structure.references`); the notebook's own ``Embedding``
    class is not one of them."""
    found = references(sources, LIBRARY)
    if not found:
        return []
    return [f"reaches for the library's tokenizer, embedding or positions "
            f"({', '.join(found)}): review by hand whether the student wrote them"]  # fmt: skip


FINDINGS = library_tokens


def checks() -> dict[str, Check]:
    return {
        "test_train_merges": TokensCheck(
            "train_merges",
            ("train_merges",),
            train_case,
            trials=3,
            timeout=30.0,
            what="train_merges (the library's merges, ties to the smallest pair)",
        ),
        "test_train_speed": TrainSpeedCheck(
            "train_merges",
            ("train_merges",),
            speed_case,
            trials=1,
            timeout=SPEED_TIMEOUT,
            what="your train_merges",
            level="partial",
        ),
        "test_train_fast": TrainSpeedCheck(
            "train_merges",
            ("train_merges",),
            speed_case,
            trials=1,
            timeout=SPEED_TIMEOUT,
            what="your train_merges",
            level="full",
            same_run_as="test_train_speed",
        ),
        "test_encode": TokensCheck(
            "encode",
            ("train_merges", "encode"),
            encode_case,
            trials=3,
            timeout=30.0,
            what="encode (the library's ids, with characters the merges never saw)",
            hint=(
                ". Within a piece, merge the pair learned earliest first (the lowest rank), "
                "not the first learned pair from the left"
            ),
        ),
        "test_decode": TokensCheck(
            "decode",
            ("decode",),
            decode_case,
            trials=4,
            timeout=30.0,
            what="decode (round trips, and ids that are not valid UTF-8)",
        ),
        "test_embedding": FunctionCheck(
            "Embedding",
            ("embedding",),
            embedding_case,
            forward_ref=embedding,
            vjp_ref=embedding_vjp,
            what="Embedding forward and backward (repeated ids)",
        ),
        "test_sinusoidal": ValueCheck(
            "sinusoidal_positions",
            ("sinusoidal",),
            sinusoidal_case,
            reference=sinusoidal,
            what="sinusoidal_positions (an odd dim too)",
        ),
        "test_embed": EmbedCheck(
            "embed",
            ("embed",),
            embed_case,
            forward_ref=embed,
            vjp_ref=embed_vjp,
            what="embed: token and learned position embeddings, both tables' gradients",
        ),
    }


CHECKS = checks()
