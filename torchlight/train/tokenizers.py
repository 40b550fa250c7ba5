r"""Tokenizers: text to integer ids and back. A character tokenizer, and byte-pair encoding.

A language model predicts the next *token*. With ``CharTokenizer`` a token is one character
(65 of them in the Shakespeare corpus): tiny vocabulary, long sequences. ``BPETokenizer`` learns
bigger tokens the way GPT-2 does: start from the 256 byte values, then repeatedly merge the
most frequent adjacent pair into a new token, so frequent words become single tokens.

Example:
    >>> from torchlight.train.tokenizers import BPETokenizer, CharTokenizer
    >>> chars = CharTokenizer("hello world")
    >>> chars.encode("hold"), chars.decode(chars.encode("hold"))
    ([3, 5, 4, 1], 'hold')
    >>> bpe = BPETokenizer.train("low lower lowest low low", vocab_size=260)
    >>> bpe.decode(bpe.encode("lowest")), len(bpe.encode(" low"))
    ('lowest', 1)
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

__all__ = ["BPETokenizer", "CharTokenizer", "tokenizer_from_dict"]


class CharTokenizer:
    """One token per distinct character of ``text``, numbered in sorted order.

    Args:
        text: the corpus (or any text containing every character to be encoded).
    """

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self.ids = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        """The id of each character; raises ValueError naming a character not in the vocabulary."""
        try:
            return [self.ids[c] for c in text]
        except KeyError as error:
            raise ValueError(
                f"CharTokenizer: the character {error.args[0]!r} is not in the vocabulary "
                f"({self.vocab_size} characters seen in the training text)"
            ) from None

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly description (saved in checkpoints); see ``tokenizer_from_dict``."""
        return {"kind": "char", "chars": "".join(self.chars)}

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


#: GPT-2's pre-split, simplified: a word with its leading space, a run of punctuation, or spaces.
#: Merges never cross these pieces, so " the" can become one token but "e t" never does.
WORD = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^A-Za-z0-9\s]+|\s+")


def _merge(word: tuple[int, ...], pair: tuple[int, int], new: int) -> tuple[int, ...]:
    """``word`` with every occurrence of ``pair`` replaced by the token ``new``."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


class BPETokenizer:
    """Byte-level byte-pair encoding: tokens 0..255 are bytes; token ``256 + k`` is merge ``k``.

    Args:
        merges: the learned merges in order, each a pair of token ids; build with ``train``.
    """

    def __init__(self, merges: list[tuple[int, int]]) -> None:
        self.merges = [tuple(pair) for pair in merges]
        self.rank = {pair: i for i, pair in enumerate(self.merges)}  # earlier merges first
        self.vocab = [bytes([b]) for b in range(256)]  # id -> the bytes it stands for
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])

    @classmethod
    def train(cls, text: str, vocab_size: int) -> BPETokenizer:
        """Learn ``vocab_size - 256`` merges from ``text``: each time, merge the most frequent
        adjacent pair (counted over distinct words, weighted by how often each word occurs)."""
        if vocab_size < 256:
            raise ValueError(
                f"BPETokenizer: vocab_size must be >= 256 (the bytes), got {vocab_size}"
            )
        words = Counter(tuple(w.encode("utf-8")) for w in WORD.findall(text))
        merges: list[tuple[int, int]] = []
        for new in range(256, vocab_size):
            pairs: Counter[tuple[int, int]] = Counter()
            for word, count in words.items():
                for pair in zip(word, word[1:], strict=False):
                    pairs[pair] += count
            if not pairs:
                break  # every word is a single token already
            best = max(pairs, key=lambda p: (pairs[p], -p[0], -p[1]))  # ties: smallest ids
            merges.append(best)
            words = Counter({_merge(w, best, new): c for w, c in words.items()})
        return cls(merges)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _encode_word(self, word: tuple[int, ...]) -> tuple[int, ...]:
        while len(word) > 1:
            pair = min(
                zip(word, word[1:], strict=False), key=lambda p: self.rank.get(p, len(self.rank))
            )
            if pair not in self.rank:
                break  # no learned merge applies any more
            word = _merge(word, pair, 256 + self.rank[pair])
        return word

    def encode(self, text: str) -> list[int]:
        """Split into words, then apply the merges to each word in the order they were learned."""
        ids: list[int] = []
        done: dict[str, tuple[int, ...]] = {}  # a text repeats its words: encode each once
        for w in WORD.findall(text):
            if w not in done:
                done[w] = self._encode_word(tuple(w.encode("utf-8")))
            ids.extend(done[w])
        return ids

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "bpe", "merges": [list(pair) for pair in self.merges]}

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size})"


def tokenizer_from_dict(data: dict[str, Any]) -> CharTokenizer | BPETokenizer:
    """Rebuild a tokenizer from its ``to_dict()``."""
    if data.get("kind") == "char":
        return CharTokenizer(data["chars"])
    if data.get("kind") == "bpe":
        return BPETokenizer([(int(a), int(b)) for a, b in data["merges"]])
    raise ValueError(
        f"unknown tokenizer description {data.get('kind')!r}: expected 'char' or 'bpe'"
    )
