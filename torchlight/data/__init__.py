"""Data sets: toy 2-D sets, the 8x8 handwritten digits (and, in ``torchlight.data.text``, text).

``Dataset``, ``TensorDataset``, ``random_split``, ``DataLoader``... are re-exported from their one
home, :mod:`torchlight.utils.data` (PyTorch's path): ``torchlight.data.DataLoader is
torchlight.utils.data.DataLoader``.

Example:
    >>> from torchlight.data import DataLoader, spiral
    >>> loader = DataLoader(spiral(n=200), batch_size=32, shuffle=True, seed=0)
    >>> len(loader)
    7
"""

from torchlight.data.digits import NUM_DIGITS, digits, load_digits
from torchlight.data.toy import TOY_DATASETS, circle, diag, simple, spiral, split, xor
from torchlight.utils.data import (
    ConcatDataset,
    DataLoader,
    Dataset,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)

__all__ = [
    "NUM_DIGITS", "TOY_DATASETS", "ConcatDataset", "DataLoader", "Dataset", "Subset",
    "TensorDataset", "circle", "default_collate", "diag", "digits", "load_digits", "random_split",
    "simple", "spiral", "split", "xor",
]  # fmt: skip
