"""``torch.utils``'s counterpart: :mod:`torchlight.utils.data` (Dataset, DataLoader, samplers)."""

from torchlight.utils import data

__all__ = ["data"]
