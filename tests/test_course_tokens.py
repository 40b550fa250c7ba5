"""Assignment 6 (tokens and embeddings) outside nbgrader: its hidden texts, its references, its
grader-built library and its integrity findings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from torchlight_grader.checks import a6_tokens
from torchlight_grader.checks.grader import rng_for


def test_the_hidden_texts_have_every_kind_of_character_and_round_trip() -> None:
    """The texts mix ASCII words, other alphabets, emoji, numbers, tabs and newlines; the
    encode item's texts have characters its merges never saw; the library's tokenizer (the
    reference) gives them back exactly."""
    from torchlight.train.tokenizers import BPETokenizer

    rng = np.random.default_rng(0)
    text = "".join(a6_tokens.random_text(rng, 400, unseen=True) for _ in range(3))
    for kind in ("\t", "\n", "  ", "é", "中", "🙂", "ß", "7"):
        assert kind in text, kind
    for seed in range(3):
        case = a6_tokens.encode_case(rng_for(seed, "a6_tokens", "test_encode"), 0)
        text, merges = case.args
        tokenizer = BPETokenizer([(a, b) for a, b in merges])
        assert tokenizer.decode(case.hidden["expected"]) == text
        corpus_bytes = {b for a, c in merges for b in (a, c) if b < 256}
        unseen = [i for i in case.hidden["expected"] if i < 256 and i not in corpus_bytes]
        assert unseen, "the text has bytes no merge involves"


def test_ties_are_common_and_go_to_the_smallest_pair() -> None:
    """On the hidden training texts most merges after the first few are ties, so a tie broken
    another way fails: the library's merge is always the smallest of the most frequent pairs."""
    rng = rng_for(0, "a6_tokens", "test_train_merges")
    case = a6_tokens.train_case(rng, 0)
    text, merges = case.args[0], case.hidden["expected"]
    ties = 0
    for k, pair in enumerate(merges):
        counts = a6_tokens.pair_counts(text, merges[:k])
        top = max(counts.values())
        best = [p for p, c in counts.items() if c == top]
        assert tuple(pair) == min(best), k
        ties += len(best) > 1
    assert ties >= len(merges) // 3, (ties, len(merges))


def test_decode_trials_include_invalid_utf8() -> None:
    case = a6_tokens.decode_case(rng_for(0, "a6_tokens", "test_decode"), 1)
    assert "\ufffd" in case.hidden["expected"]


def test_a_wrong_tie_is_explained() -> None:
    check = a6_tokens.CHECKS["test_train_merges"]
    case = a6_tokens.train_case(rng_for(1, "a6_tokens", "test_train_merges"), 0)
    merges = [list(p) for p in case.hidden["expected"]]
    text = case.args[0]
    k = next(
        k
        for k in range(len(merges))
        if sum(c == max(a6_tokens.pair_counts(text, merges[:k]).values())
               for c in a6_tokens.pair_counts(text, merges[:k]).values()) > 1
    )  # fmt: skip
    counts = a6_tokens.pair_counts(text, merges[:k])
    top = max(counts.values())
    other = max(p for p, c in counts.items() if c == top)
    wrong = [*merges[:k], list(other)]
    message = check.judge(case, {"value": wrong}, check.expected(case))
    assert message and f"merge {k}" in message and "a tie" in message, message


def test_the_tokens_notebooks_library_has_no_tokenizer_and_no_embedding() -> None:
    """a6: in the grader-built library the tokenizer's training, encoding and decoding, the
    embedding lookups and the position tables raise "write it yourself"; indexing and its
    backward still work."""
    from torchlight_grader.checks.graded_library import for_notebook

    ((copy, _target),) = for_notebook("a6_tokens")
    probe = (
        "import torchlight as tl\n"
        "from torchlight.train.tokenizers import BPETokenizer\n"
        "from torchlight.nn.functional import embedding\n"
        "w = tl.randn(4, 2, requires_grad=True); ids = tl.tensor([1, 1])\n"
        "for call in (lambda: BPETokenizer.train('ab ab', 260), lambda: BPETokenizer([]).encode('a'),\n"
        "             lambda: BPETokenizer([]).decode([97]), lambda: embedding(ids, w),\n"
        "             lambda: tl.nn.Embedding(4, 2)(ids),\n"
        "             lambda: tl.nn.SinusoidalPositionalEncoding(4, 2),\n"
        "             lambda: tl.nn.LearnedPositionalEmbedding(4, 2)(tl.zeros(1, 2, 2))):\n"
        "    try:\n"
        "        call()\n"
        "    except RuntimeError as exc:\n"
        "        print(str(exc).split(' is what')[0])\n"
        "w[ids].sum().backward()\n"
        "print(w.grad.tolist()[1])\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=Path(copy).parent, capture_output=True,
                         text=True, check=True)  # fmt: skip
    names = ["BPETokenizer.train", "BPETokenizer.encode", "BPETokenizer.decode", "embedding",
             "Embedding.forward", "SinusoidalPositionalEncoding.__init__",
             "LearnedPositionalEmbedding.forward"]  # fmt: skip
    assert run.stdout.splitlines() == [f"write it yourself: {n}" for n in names] + ["[2.0, 2.0]"], (
        run.stdout + run.stderr
    )


@pytest.mark.parametrize(
    "source",
    [
        "from torchlight.train.tokenizers import BPETokenizer",
        "tl.nn.functional.embedding(ids, w)",
        "import torchlight.train.tokenizers as t\nt.BPETokenizer.train(text, 300)",
        "getattr(tl.nn, 'SinusoidalPositionalEncoding')(4, 2)",
        "from torchlight.nn import *",
    ],
)
def test_the_tokens_findings_name_the_librarys_tokenizer_and_embedding(source: str) -> None:
    assert len(a6_tokens.library_tokens([source])) == 1, source


def test_the_tokens_findings_leave_the_students_own_embedding_alone() -> None:
    honest = (
        "class Embedding(Function):\n    pass\n"
        "def embed(ids, tokens, positions):\n"
        "    return Embedding.apply(tokens, ids) + Embedding.apply(positions, tl.arange(3))\n"
    )
    assert a6_tokens.library_tokens([honest]) == []
