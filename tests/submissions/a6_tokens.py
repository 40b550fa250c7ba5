"""Submissions for assignment 6 (Tokens and embeddings): the classic mistakes, each costing
exactly its item, and answers that call the library's tokenizer, embedding or positions, which
pass the visible tests in the student's kernel and score nothing for that item (flagged)."""

from __future__ import annotations

from submissions.catalog import Submission, append, replace, substitute, together

A = "a6_tokens"

LIBRARY_TRAIN = """
from torchlight.train.tokenizers import BPETokenizer


def merge_pair(word, pair, new):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_merges(text, vocab_size):
    return [tuple(pair) for pair in BPETokenizer.train(text, vocab_size).merges]
"""

LIBRARY_EMBEDDING = """
class Embedding(Function):
    @staticmethod
    def forward(ctx, weight, ids):
        ctx.save_for_backward(ids)
        ctx.rows = weight.shape[0]
        return tl.nn.functional.embedding(ids, weight)

    @staticmethod
    def backward(ctx, grad_output):
        (ids,) = ctx.saved_tensors
        one_hot = tl.eye(ctx.rows, dtype=grad_output.dtype)[ids.reshape(-1)]
        return one_hot.T @ grad_output.reshape(-1, grad_output.shape[-1]), None
"""

LIBRARY_SINUSOIDAL = """
def sinusoidal_positions(length, dim):
    table = getattr(tl.nn, "SinusoidalPositionalEncoding")(length, dim)
    return table._buffers["pe"]
"""

MERGE_PAIR = """
def merge_pair(word, pair, new):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)
"""

#: Right merges, slowly: every pair of the whole corpus recounted after every merge.
NAIVE_TRAIN = (
    MERGE_PAIR
    + """

def train_merges(text, vocab_size):
    pieces = [tuple(w.encode("utf-8")) for w in WORD.findall(text)]
    merges = []
    for new in range(256, vocab_size):
        pairs = Counter()
        for piece in pieces:
            pairs.update(zip(piece, piece[1:]))
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        pieces = [merge_pair(piece, best, new) for piece in pieces]
    return merges
"""
)

#: Right merges, counted over the distinct pieces but all of them again after every merge.
RECOUNT_TRAIN = (
    MERGE_PAIR
    + """

def train_merges(text, vocab_size):
    words = words_of(text)
    merges = []
    for new in range(256, vocab_size):
        pairs = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        words = Counter({merge_pair(w, best, new): c for w, c in words.items()})
    return merges
"""
)

#: A cache keyed on what identifies the input cheaply (its length and the vocabulary size):
#: the second corpus of the same length gets the first one's merges.
CACHED_TRAIN = RECOUNT_TRAIN.replace(
    "def train_merges(text, vocab_size):\n",
    """_seen = {}


def train_merges(text, vocab_size):
    key = (len(text), vocab_size)
    if key not in _seen:
        _seen[key] = slow_train_merges(text, vocab_size)
    return _seen[key]


def slow_train_merges(text, vocab_size):
""",
)

#: The grader's wall clock in the sandbox (bound before any cell ran, in a dict a cell can still
#: reach) replaced by one that ticks once per reading: every call then takes "1 s".
FAKE_WALL = """
import sys as _sys

_ticks = iter(range(10**9))
if "runners" in _sys.modules:
    _sys.modules["runners"].PROTECTED["wall"] = lambda: float(next(_ticks))
"""

#: Both clocks replaced: the timed calls then report almost no CPU time at all.
FAKE_CLOCKS = (
    FAKE_WALL
    + """
    _sys.modules["runners"].PROTECTED["cpu"] = lambda: float(next(_ticks)) / 1000
"""
)

#: Planted mistakes that each cost items of their own, in answer cells of their own: graded
#: together, three to a notebook (``catalog.together``; the README names each one).
TIE_TO_THE_FIRST_COUNTED = Submission(
    "tie-to-the-first-counted",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "train_merges",
            "best = min(pairs, key=lambda p: (-pairs[p], p))",
            "best = max(pairs, key=pairs.get)",
        ),
    ),
    zero=("test_train_merges", "test_train_speed", "test_train_fast"),
    note="a tie goes to the pair counted first, not the smallest pair (speed credit needs "
    "the right merges)",
)

LEFTMOST_LEARNED_PAIR = Submission(
    "leftmost-learned-pair",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "encode",
            "pair = min(zip(word, word[1:]), key=lambda p: rank.get(p, len(rank)))\n"
            "            if pair not in rank:",
            "pair = next((p for p in zip(word, word[1:]) if p in rank), None)\n"
            "            if pair is None:",
        ),
    ),
    zero=("test_encode",),
    note="merges the first learned pair from the left, not the one learned earliest",
)

DECODE_DROPS_INVALID_BYTES = Submission(
    "decode-drops-invalid-bytes",
    A,
    "mistake",
    "solution",
    (substitute("decode", 'errors="replace"', 'errors="ignore"'),),
    zero=("test_decode",),
    note="invalid UTF-8 dropped instead of replaced by U+FFFD",
)

EMBEDDING_GRADIENT_OVERWRITTEN = Submission(
    "embedding-gradient-overwritten",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "embedding",
            "        one_hot = tl.eye(ctx.rows, dtype=grad_output.dtype)[ids.reshape(-1)]\n"
            "        grad_weight = one_hot.T @ grad_output.reshape(-1, grad_output.shape[-1])",
            "        grad_weight = tl.zeros(ctx.rows, grad_output.shape[-1])\n"
            "        grad_weight[ids.reshape(-1)] = grad_output.reshape(-1, grad_output.shape[-1])",
        ),
    ),
    zero=("test_embedding",),
    note="grad[ids] = G: a row read several times keeps one of its gradients",
)

SINUSOIDAL_EXPONENT_I = Submission(
    "sinusoidal-exponent-i",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "sinusoidal",
            "frequency = 10000.0 ** (-np.arange(0, dim, 2) / dim)",
            "frequency = 10000.0 ** (-np.arange((dim + 1) // 2) / dim)",
        ),
    ),
    zero=("test_sinusoidal",),
    note="10000^(i/D) for the pair i instead of 10000^(2i/D)",
)

POSITIONS_FROM_ONE = Submission(
    "positions-from-one",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "embed",
            "steps = tl.arange(ids.shape[1])",
            "steps = tl.arange(1, ids.shape[1] + 1)",
        ),
    ),
    zero=("test_embed",),
    note="the first token reads position row 1 (off by one)",
)

#: Answers that call the library's tokenizer, embedding or positions, each in its own answer
#: cell and changing nothing outside it: graded together in one notebook, each flagged.
LIBRARY_TOKENIZER_CHEAT = Submission(
    "library-tokenizer",
    A,
    "cheat",
    "solution",
    (replace("train_merges", LIBRARY_TRAIN),),
    zero=("test_train_merges", "test_train_speed", "test_train_fast"),
    fools_kernel=("test_train_merges",),
    note="BPETokenizer.train: the library's, not the student's (not in the grader's "
    "library, so it times nothing either)",
)

LIBRARY_EMBEDDING_CHEAT = Submission(
    "library-embedding",
    A,
    "cheat",
    "solution",
    (replace("embedding", LIBRARY_EMBEDDING),),
    zero=("test_embedding",),
    fools_kernel=("test_embedding",),
    note="the forward is the library's F.embedding",
)

LIBRARY_SINUSOIDAL_CHEAT = Submission(
    "library-sinusoidal",
    A,
    "cheat",
    "solution",
    (replace("sinusoidal", LIBRARY_SINUSOIDAL),),
    zero=("test_sinusoidal",),
    fools_kernel=("test_sinusoidal",),
    note="the library's SinusoidalPositionalEncoding, named through getattr",
)

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    together(
        "wrong-in-one-detail",
        TIE_TO_THE_FIRST_COUNTED,
        DECODE_DROPS_INVALID_BYTES,
        SINUSOIDAL_EXPONENT_I,
    ),
    together(
        "wrong-in-another-detail",
        LEFTMOST_LEARNED_PAIR,
        EMBEDDING_GRADIENT_OVERWRITTEN,
        POSITIONS_FROM_ONE,
    ),
    Submission(
        "naive-trainer",
        A,
        "mistake",
        "solution",
        (replace("train_merges", NAIVE_TRAIN),),
        zero=("test_train_speed", "test_train_fast"),
        note="right merges, but every pair of the whole corpus recounted after every merge",
    ),
    Submission(
        "recount-over-pieces",
        A,
        "mistake",
        "solution",
        (replace("train_merges", RECOUNT_TRAIN),),
        zero=("test_train_fast",),
        note="counts over the distinct pieces, but all of them again after every merge",
    ),
    Submission(
        "cached-trainer",
        A,
        "cheat",
        "solution",
        (replace("train_merges", CACHED_TRAIN),),
        zero=("test_train_speed", "test_train_fast"),
        note="answers from the input's length: the next corpus gets the last one's merges",
    ),
    Submission(
        "faked-wall-clock",
        A,
        "cheat",
        "solution",
        (replace("train_merges", RECOUNT_TRAIN), append("train_merges", FAKE_WALL)),
        zero=("test_train_fast",),
        note="the recount over pieces with the grader's wall clock ticking once per reading: "
        "graded on CPU time too, it gains nothing",
    ),
    Submission(
        "faked-clocks",
        A,
        "cheat",
        "solution",
        (append("train_merges", FAKE_CLOCKS),),
        zero=("test_train_speed", "test_train_fast"),
        note="the solution with both of the grader's clocks replaced: the CPU time the sandbox "
        "counts from outside does not match, no speed credit",
    ),
    Submission(
        "decode-token-by-token",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "decode",
                'return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")',
                'return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)',
            ),
        ),
        zero=("test_decode",),
        note="a character split over two tokens comes out as two U+FFFD",
    ),
    together(
        "reaches-for-the-library",
        LIBRARY_TOKENIZER_CHEAT,
        LIBRARY_EMBEDDING_CHEAT,
        LIBRARY_SINUSOIDAL_CHEAT,
    ),
]

#: Each cheat's finding in the integrity report.
FLAGGED = {
    "library-tokenizer": "reaches for the library's tokenizer, embedding or positions (imports "
    "BPETokenizer from torchlight.train.tokenizers",
    "library-embedding": "uses .embedding",
    "library-sinusoidal": "names 'SinusoidalPositionalEncoding' through getattr",
}
