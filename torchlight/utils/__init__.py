"""``torch.utils``'s counterpart: :mod:`torchlight.utils.data` (Dataset, DataLoader, samplers)
and :mod:`torchlight.utils.checkpoint` (activation checkpointing)."""

from torchlight.utils import checkpoint, data

__all__ = ["checkpoint", "data"]
