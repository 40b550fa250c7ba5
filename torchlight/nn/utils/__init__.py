"""Utilities for training, as ``torch.nn.utils``: gradient clipping and flat parameter vectors.

Example:
    >>> import torchlight as tl
    >>> from torchlight.nn.utils import parameters_to_vector
    >>> from torchlight import nn
    >>> model = nn.Linear(3, 2)
    >>> parameters_to_vector(model.parameters()).shape
    (8,)
"""

from torchlight.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_
from torchlight.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]
