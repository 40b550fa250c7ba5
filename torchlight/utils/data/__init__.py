"""``torch.utils.data``: data sets, samplers and a ``DataLoader`` with worker processes.

The same names and signatures as PyTorch's: :class:`Dataset`, :class:`IterableDataset`,
:class:`TensorDataset`, :class:`Subset`, :class:`ConcatDataset`, :func:`random_split`,
the samplers (:class:`SequentialSampler`, :class:`RandomSampler`, :class:`SubsetRandomSampler`,
:class:`WeightedRandomSampler`, :class:`BatchSampler`), :func:`default_collate`,
:func:`get_worker_info` and :class:`DataLoader` (``num_workers`` worker processes, as
PyTorch's). These are the one implementation: ``torchlight.data`` (the toy, digits and text data
sets) re-exports the same objects.

Example:
    >>> import torchlight as tl
    >>> from torchlight.utils.data import DataLoader, TensorDataset
    >>> loader = DataLoader(TensorDataset(tl.arange(10.0)), batch_size=4, drop_last=True)
    >>> [batch[0].tolist() for batch in loader]
    [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
"""

from torchlight.utils.data.dataloader import DataLoader, IterableDataset, get_worker_info
from torchlight.utils.data.dataset import (
    ConcatDataset,
    Dataset,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)
from torchlight.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset", "RandomSampler",
    "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset",
    "WeightedRandomSampler", "default_collate", "get_worker_info", "random_split",
]  # fmt: skip
