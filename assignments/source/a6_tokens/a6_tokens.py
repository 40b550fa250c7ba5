# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 6: Tokens and embeddings
#
# A language model reads integers, not text. This assignment builds the way in: a byte-level
# **byte-pair encoding** (BPE) tokenizer, the one GPT-2 uses, then the **embedding** that turns
# each token id into a vector (its forward and backward as a `Function`), and the **positions**
# a transformer needs, since attention itself does not know the order of its inputs.
#
# **How you are graded.** Hidden checks on fresh random text (ASCII words, accented letters,
# CJK, emoji, tabs and newlines) compared with a reference tokenizer id for id, and on random
# float64 tables compared with reference values to about $10^{-12}$ and with central
# differences. The library has a tokenizer and embeddings of its own (`torchlight.train.tokenizers`,
# `torchlight.nn.Embedding`): the grader's copy of the library leaves them out, so an answer that
# calls them scores nothing for that item (and is flagged for review). Write them yourself.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math
import re
from collections import Counter, defaultdict

import numpy as np

import torchlight as tl
from torchlight.autograd import Function, gradcheck
from torchlight.testing import assert_close

tl.manual_seed(0)

#: GPT-2's pre-split, simplified: a word with its leading space, a number, a run of punctuation
#: (anything else that is not a space: accented letters, CJK, emoji), or a run of whitespace.
#: Merges never cross these pieces.
WORD = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^A-Za-z0-9\s]+|\s+")


def words_of(text):
    """How often each piece of ``text`` occurs, each piece as a tuple of its UTF-8 bytes."""
    return Counter(tuple(w.encode("utf-8")) for w in WORD.findall(text))


print(WORD.findall("Hi there,  héllo 世界!\n"))

# %% [markdown] nbgrader={"grade": false, "grade_id": "train_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. Training the merges
#
# Tokens $0, \ldots, 255$ are the 256 byte values, so every text can be encoded, whatever its
# alphabet. Training learns `vocab_size - 256` merges, one at a time: count every adjacent pair
# of tokens over the pieces of the corpus (a piece that occurs $n$ times counts $n$ times), take
# the **most frequent pair**, give it the next id ($256, 257, \ldots$) and replace it everywhere
# (left to right, without overlaps: `(a, a, a)` with the pair `(a, a)` becomes `(new, a)`).
#
# **Ties.** When several pairs are equally frequent, merge the **smallest pair**: the one with
# the smallest first id, and among those the smallest second id (compare the tuples). A tie
# broken another way (the first pair counted, the last) gives other merges on the hidden text.
#
# Stop early when no pair is left (every piece is one token). `train_merges(text, vocab_size)`
# returns the merges in order, a list of pairs `(a, b)` of token ids.
#
# **Speed.** Training is graded for speed too, on a corpus of about 1 MB (1,000,000 characters,
# 100 merges), against the grader's reference trainer, inside the grading sandbox: alternating
# pairs of runs (yours, then the reference's, then the other way round), each pair on a **fresh
# corpus**, your merges compared with the reference's after every pair (a trainer that skips work
# or remembers an earlier answer earns no speed credit). The grade is the **median** of the
# per-pair ratios *your time / reference time*, taken on wall time and on CPU time (the larger
# counts; train in the process that calls you, without subprocesses):
#
# | item | needs |
# |---|---|
# | `test_train_speed` | ratio <= 25 |
# | `test_train_fast` | ratio <= 3 |
#
# Training is where a naive tokenizer loses, not encoding: recounting every pair of the **whole
# corpus** after every merge reads a million tokens a hundred times (over 100x the reference,
# no speed credit; each of your runs is stopped at 50x the reference's CPU time). Counting over
# the *distinct* pieces, weighted by how often each occurs (`words_of`), reads only the ~18,000
# different pieces, but still all of them per merge (about 10x: `test_train_speed` only). Full
# credit needs the reference's idea: count the pairs once, then after each merge **update** the
# counts in the pieces that contain the merged pair, and only there (keep, for each pair, the set
# of pieces it occurs in). A machine too busy to time fairly gives a retry; if it stays busy, the
# item is held for a re-run, never silently zero. Your feedback shows your ratio and the
# thresholds.

# %% nbgrader={"grade": false, "grade_id": "train_merges", "locked": false, "schema_version": 3, "solution": true}
def merge_pair(word, pair, new):
    """``word`` (a tuple of ids) with every occurrence of ``pair`` replaced by ``new``."""
    ### BEGIN SOLUTION
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)
    ### END SOLUTION


def train_merges(text, vocab_size):
    ### BEGIN SOLUTION
    pieces = words_of(text)
    words = list(pieces)  # the distinct pieces, each a tuple of ids
    freq = list(pieces.values())
    pairs = Counter()  # pair -> how often it occurs in the corpus
    where = defaultdict(set)  # pair -> the pieces (their index) that contain it
    for i, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pairs[pair] += freq[i]
            where[pair].add(i)
    merges = []
    for new in range(256, vocab_size):
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        for i in where.pop(best):  # only the pieces that contain the pair change
            old, count = words[i], freq[i]
            for pair in zip(old, old[1:]):
                pairs[pair] -= count
                if pairs[pair] == 0:
                    del pairs[pair]
            words[i] = merge_pair(old, best, new)
            for pair in zip(words[i], words[i][1:]):
                pairs[pair] += count
                where[pair].add(i)
    return merges
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_train_merges", "locked": true, "points": 2, "schema_version": 3, "solution": false}
merges = train_merges("aaab aaab ab", 259)
assert merges[0] == (97, 97), merges  # "aa": 4 times (twice in each "aaab"), "ab": 3 times
assert train_merges("ab ab ba", 257) == [(97, 98)]
assert train_merges("xy yx", 257) == [(32, 121)]  # " y" ties with "xy": (32, 121) < (120, 121)
assert len(train_merges("ab", 300)) == 1  # nothing left to merge after "ab"
print("train_merges: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a6_tokens", "test_train_merges", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_train_speed", "locked": true, "points": 1, "schema_version": 3, "solution": false}
import time

corpus = "".join(f"word{i % 97} and the other {i % 13} words; " for i in range(4000))
start = time.perf_counter()
fast = train_merges(corpus, 306)
print(f"train_merges: {time.perf_counter() - start:.2f} s for 50 merges on {len(corpus):,} characters")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a6_tokens", "test_train_speed", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_train_fast", "locked": true, "points": 1, "schema_version": 3, "solution": false}
print("full credit: at most 3x the grader's reference trainer (see the table above)")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a6_tokens", "test_train_fast", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "encode_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. Encoding
#
# `encode(text, merges)` splits `text` with `WORD`, turns each piece into its UTF-8 bytes, and
# applies the merges to each piece **in the order they were learned**: repeatedly find, among
# the piece's adjacent pairs, the one learned *earliest* (merge $k$ makes token $256 + k$),
# merge it everywhere in the piece, until no pair of the piece is a learned merge. (Merging
# whichever learned pair comes first from the left gives other tokens.) It returns the list of
# token ids of all pieces, in order. Bytes never seen in training stay single-byte tokens.

# %% nbgrader={"grade": false, "grade_id": "encode", "locked": false, "schema_version": 3, "solution": true}
def encode(text, merges):
    ### BEGIN SOLUTION
    rank = {tuple(pair): k for k, pair in enumerate(merges)}
    ids = []
    for piece in WORD.findall(text):
        word = tuple(piece.encode("utf-8"))
        while len(word) > 1:
            pair = min(zip(word, word[1:]), key=lambda p: rank.get(p, len(rank)))
            if pair not in rank:
                break
            word = merge_pair(word, pair, 256 + rank[pair])
        ids.extend(word)
    return ids
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_encode", "locked": true, "points": 2, "schema_version": 3, "solution": false}
merges = [(97, 98), (256, 99), (98, 99)]  # "ab" -> 256, "ab"+"c" -> 257, "bc" -> 258
assert encode("abc", merges) == [257]
assert encode("bc abd", merges) == [258, 32, 256, 100]
assert encode("é", []) == [195, 169]  # two UTF-8 bytes, unseen: two tokens
print("encode: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a6_tokens", "test_encode", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "decode_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. Decoding
#
# Each token stands for a string of bytes: a byte for $0..255$, and for merge $k = (a, b)$ the
# bytes of $a$ followed by those of $b$. `decode(ids, merges)` joins the bytes of all the
# tokens, then decodes them as UTF-8 **once, at the end**: one character may be split over two
# tokens (a token can end in the middle of "é"), so decoding token by token breaks it. Not every
# list of ids is valid UTF-8 (`[195]` is half a character): decode as
# `bytes.decode("utf-8", errors="replace")` does, each invalid sequence becoming one U+FFFD
# (`"\ufffd"`). Then `decode(encode(text, merges), merges) == text` for every text.

# %% nbgrader={"grade": false, "grade_id": "decode", "locked": false, "schema_version": 3, "solution": true}
def decode(ids, merges):
    ### BEGIN SOLUTION
    vocab = [bytes([b]) for b in range(256)]
    for a, b in merges:
        vocab.append(vocab[a] + vocab[b])
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_decode", "locked": true, "points": 1, "schema_version": 3, "solution": false}
merges = [(195, 169), (104, 256)]  # "é" -> 256, "h" + "é" -> 257
assert decode([257, 108, 108, 111], merges) == "héllo"
assert decode([104, 195], merges) == "h\ufffd"
text = "Tab\there, 3 spaces   and 中文 🙂\n"
assert decode(encode(text, train_merges(text, 280)), train_merges(text, 280)) == text
print("decode: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a6_tokens", "test_decode", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "embedding_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. The embedding, forward and backward
#
# An embedding is a table $W$ of shape $(V, D)$, one row per token: `Embedding.apply(weight,
# ids)` returns `weight[ids]`, of shape `(*ids.shape, D)`. It is a matrix product in
# disguise: with $H$ the one-hot rows of the ids ($H_{nv} = 1$ when id $n$ is $v$), the
# output is $HW$, so
#
# $$\frac{\partial L}{\partial W} = H^\top G,$$
#
# which *adds up* the gradients of every position that read the same row: a token that occurs
# three times gets three contributions. (Writing `grad[ids] = G` keeps only one of them.)
# `backward` returns one gradient per input of `forward`: the table's, then `None` for the ids
# (integers have no gradient). `tl.eye(V)[ids]` is one-hot.

# %% nbgrader={"grade": false, "grade_id": "embedding", "locked": false, "schema_version": 3, "solution": true}
class Embedding(Function):
    @staticmethod
    def forward(ctx, weight, ids):
        ### BEGIN SOLUTION
        ctx.save_for_backward(ids)
        ctx.rows = weight.shape[0]
        return weight[ids]
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (ids,) = ctx.saved_tensors
        one_hot = tl.eye(ctx.rows, dtype=grad_output.dtype)[ids.reshape(-1)]
        grad_weight = one_hot.T @ grad_output.reshape(-1, grad_output.shape[-1])
        return grad_weight, None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_embedding", "locked": true, "points": 2, "schema_version": 3, "solution": false}
weight = tl.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], requires_grad=True)
ids = tl.tensor([[2, 0], [2, 2]])
out = Embedding.apply(weight, ids)
assert_close(out.detach().numpy(), [[[4.0, 5.0], [0.0, 1.0]], [[4.0, 5.0], [4.0, 5.0]]])
out.sum().backward()
assert_close(weight.grad.numpy(), [[1.0, 1.0], [0.0, 0.0], [3.0, 3.0]])  # row 2 read 3 times
assert gradcheck(lambda w: Embedding.apply(w, tl.tensor([1, 1, 0])), tl.randn(4, 3, requires_grad=True))
print("Embedding: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a6_tokens", "test_embedding", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "sinusoidal_md", "locked": true, "schema_version": 3, "solution": false}
# ## 5. Sinusoidal positions
#
# Attention treats its inputs as a set. "Attention is all you need" adds to the token at
# position $t = 0, 1, \ldots$ a fixed vector of sines and cosines of geometric frequencies:
#
# $$P[t, 2i] = \sin\left(t / 10000^{2i/D}\right), \qquad P[t, 2i + 1] = \cos\left(t / 10000^{2i/D}\right).$$
#
# `sinusoidal_positions(length, dim)` returns $P$, a float64 tensor of shape `(length, dim)`
# (for an odd `dim` the last column is a sine). Positions start at **0**.

# %% nbgrader={"grade": false, "grade_id": "sinusoidal", "locked": false, "schema_version": 3, "solution": true}
def sinusoidal_positions(length, dim):
    ### BEGIN SOLUTION
    t = np.arange(length)[:, None]
    frequency = 10000.0 ** (-np.arange(0, dim, 2) / dim)
    table = np.zeros((length, dim))
    table[:, 0::2] = np.sin(t * frequency)
    table[:, 1::2] = np.cos(t * frequency)[:, : dim // 2]
    return tl.tensor(table)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sinusoidal", "locked": true, "points": 1, "schema_version": 3, "solution": false}
P = sinusoidal_positions(3, 4)
assert P.shape == (3, 4)
assert_close(P.numpy()[0], [0.0, 1.0, 0.0, 1.0])
assert_close(P.numpy()[2], [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)])
print("sinusoidal_positions: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a6_tokens", "test_sinusoidal", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "embed_md", "locked": true, "schema_version": 3, "solution": false}
# ## 6. Token and learned position embeddings
#
# GPT-2 learns its positions instead: a second table $P$ of shape `(block_size, D)`, one row
# per position, trained like the tokens' table. `embed(ids, tokens, positions)` takes `ids` of
# shape `(N, T)` and returns `tokens[ids] + positions[0..T-1]`, shape `(N, T, D)`, built from
# your `Embedding` (positions are looked up like tokens: the ids of the positions are
# $0, 1, \ldots, T - 1$, `tl.arange(T)`) so that both tables get their gradients. Position $t$
# reads row $t$: the first token of every sequence row 0.
#
# (While this item is graded, `Embedding` is the grader's own: a mistake in section 4 costs
# only section 4.)

# %% nbgrader={"grade": false, "grade_id": "embed", "locked": false, "schema_version": 3, "solution": true}
def embed(ids, tokens, positions):
    ### BEGIN SOLUTION
    steps = tl.arange(ids.shape[1])
    return Embedding.apply(tokens, ids) + Embedding.apply(positions, steps)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_embed", "locked": true, "points": 1, "schema_version": 3, "solution": false}
tokens = tl.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
positions = tl.tensor([[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]], requires_grad=True)
out = embed(tl.tensor([[0, 1], [1, 1]]), tokens, positions)
assert_close(out.detach().numpy(), [[[11.0, 10.0], [20.0, 21.0]], [[10.0, 11.0], [20.0, 21.0]]])
out.sum().backward()
assert_close(positions.grad.numpy(), [[2.0, 2.0], [2.0, 2.0], [0.0, 0.0]])
print("embed: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a6_tokens", "test_embed", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## What you built
#
# Text to ids and back, exactly, whatever the alphabet; ids to vectors, with the gradient each
# row of the table receives; and the positions. Tutorial 8 (*Language models*) trains a GPT on
# Shakespeare from exactly these pieces; assignment 7 writes the transformer itself.
