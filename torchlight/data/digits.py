"""The 8x8 handwritten digits (UCI optical recognition of handwritten digits, 1,797 images).

Shipped inside the package (``digits.csv.gz``, 57 kB), so it works offline; source and license
(CC BY 4.0) are in ``DIGITS_LICENSE.txt`` next to it. Each image is 8x8 pixels with values
0..16; :func:`digits` scales them to [0, 1].

Example:
    >>> from torchlight.data import digits
    >>> train, test = digits(train=True), digits(train=False)
    >>> len(train), len(test), train.tensors[0].shape[1:]
    (1437, 360, (64,))
"""

from __future__ import annotations

import gzip
import math
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from torchlight.creation import tensor
from torchlight.utils.data.dataset import TensorDataset

__all__ = ["NUM_DIGITS", "digits", "load_digits"]

NUM_DIGITS = 1797


@cache
def _read() -> tuple[np.ndarray, np.ndarray]:
    raw = resources.files("torchlight.data").joinpath("digits.csv.gz").read_bytes()
    table = np.loadtxt(
        gzip.decompress(raw).decode("ascii").splitlines(), delimiter=",", dtype=np.int64
    )
    if table.shape != (NUM_DIGITS, 65):
        raise RuntimeError(
            f"digits.csv.gz is damaged: expected {NUM_DIGITS} rows of 65 numbers, got {table.shape}"
        )
    table.setflags(write=False)
    return table[:, :64], table[:, 64]


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """All 1,797 images as raw integers: pixels (1797, 64) in 0..16 and labels (1797,) in 0..9
    (read-only numpy arrays)."""
    return _read()


def digits(
    train: bool = True,
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
    images: bool = False,
    dtype: Any = None,
) -> TensorDataset:
    """The training or the test part of the digits, as inputs scaled to [0, 1] and int64 labels.

    Args:
        train: the training part (``1 - test_fraction`` of the images) or the test part.
        test_fraction: how much is held out for testing; 0.2 gives 1,437 / 360 images.
        seed: the shuffle before the split (the same seed always gives the same split, and the
            training and test parts never share an image).
        images: shape (N, 1, 8, 8) for a CNN instead of (N, 64) for an MLP.
        dtype: float64 (the default dtype) or float32.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    pixels, labels = _read()
    order = np.random.default_rng(seed).permutation(NUM_DIGITS)
    n_test = math.ceil(NUM_DIGITS * test_fraction)  # as scikit-learn's train_test_split
    chosen = order[n_test:] if train else order[:n_test]
    x = pixels[chosen] / 16.0
    if images:
        x = x.reshape(-1, 1, 8, 8)
    return TensorDataset(tensor(x, dtype=dtype), tensor(labels[chosen]))
