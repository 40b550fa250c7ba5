r"""Text for language models: the shipped Shakespeare corpus, and (context, next-token) windows.

A language model learns $p(x_{t+1} \mid x_{\le t})$. From one long sequence of token ids, each
window of ``block_size + 1`` consecutive tokens gives an input ``x = ids[i : i+T]`` and a target
``y = ids[i+1 : i+T+1]`` (the same tokens shifted by one), so one window trains $T$ predictions
at once. The corpus is kept once; a single window is a view of it, and a batch copies only its
own $B \times T$ tokens (one gather), never the corpus.

Example:
    >>> from torchlight.data import DataLoader
    >>> from torchlight.data.text import TextWindows, load_text
    >>> from torchlight.train.tokenizers import CharTokenizer
    >>> text = load_text("shakespeare")
    >>> tokenizer = CharTokenizer(text)
    >>> windows = TextWindows(tokenizer.encode(text[:1000]), block_size=8)
    >>> x, y = next(iter(DataLoader(windows, batch_size=4)))
    >>> x.shape, tokenizer.decode(x[0].tolist()), tokenizer.decode(y[0].tolist())
    ((4, 8), 'BERNARDO', 'ERNARDO:')
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np

from torchlight import dtypes
from torchlight.creation import arange, tensor
from torchlight.tensor import Tensor

__all__ = ["CORPORA", "TextWindows", "load_text"]

#: The corpora shipped in the package (see torchlight/data/SHAKESPEARE_LICENSE.txt).
CORPORA = {"shakespeare": "shakespeare.txt.gz"}


def load_text(name: str = "shakespeare") -> str:
    """The text of a shipped corpus (``"shakespeare"``: 11 plays, 1.4 million characters), or of
    a UTF-8 file when ``name`` is a path."""
    if name in CORPORA:
        data = resources.files("torchlight.data").joinpath(CORPORA[name]).read_bytes()
        return gzip.decompress(data).decode("utf-8")
    try:
        with open(name, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no corpus {name!r}: expected one of {sorted(CORPORA)} or the path of a UTF-8 text file"
        ) from None


class TextWindows:
    """(context, next-token) windows over one sequence of token ids.

    ``windows[i] = (ids[s : s+T], ids[s+1 : s+T+1])`` with ``s = i * stride``; both int64.

    Args:
        ids: the token ids of the whole text (a list, numpy array or 1-D tensor).
        block_size: $T$, the context length.
        stride: the step between window starts (1: every position; ``block_size``: no overlap).
    """

    def __init__(
        self, ids: Sequence[int] | np.ndarray | Tensor, block_size: int, stride: int = 1
    ) -> None:
        self.ids = ids if isinstance(ids, Tensor) else tensor(np.asarray(ids, dtype=np.int64))
        if self.ids.ndim != 1 or self.ids.dtype.is_floating_point:
            raise ValueError(
                f"TextWindows: expected a 1-D sequence of token ids, got {self.ids.shape}"
            )
        if block_size < 1 or stride < 1 or len(self.ids) < block_size + 1:
            raise ValueError(
                f"TextWindows: need block_size >= 1, stride >= 1 and at least block_size + 1 = "
                f"{block_size + 1} tokens; got block_size={block_size}, stride={stride}, "
                f"{len(self.ids)} tokens"
            )
        self.block_size, self.stride = block_size, stride
        self.offsets = arange(block_size, dtype=dtypes.int64)  # 0..T-1, added to each start

    def __len__(self) -> int:
        return (len(self.ids) - self.block_size - 1) // self.stride + 1

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"window {index} is out of range for {len(self)} windows")
        start = (index % len(self)) * self.stride
        return self.ids[start : start + self.block_size], self.ids[
            start + 1 : start + self.block_size + 1
        ]

    def __getitems__(self, indices: Any) -> tuple[Tensor, Tensor]:
        """A whole batch in one gather (the DataLoader calls this, as PyTorch's does):
        ``ids[starts[:, None] + offsets]``, shape (B, T)."""
        starts = tensor(np.asarray(indices, dtype=np.int64) * self.stride).unsqueeze(1)
        positions = starts + self.offsets
        return self.ids[positions], self.ids[positions + 1]

    def __repr__(self) -> str:
        return f"TextWindows({len(self)} windows of {self.block_size} tokens, stride {self.stride})"
