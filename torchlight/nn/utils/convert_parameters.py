"""All parameters as one flat vector, and back (e.g. for a second-order method or a line search).

Example:
    >>> import torchlight as tl
    >>> from torchlight.nn.utils import vector_to_parameters
    >>> from torchlight import nn
    >>> layer = nn.Linear(2, 1)
    >>> vector_to_parameters(tl.tensor([1.0, 2.0, 3.0]), layer.parameters())
    >>> layer.weight, layer.bias
    (Parameter containing:
    tensor([[1., 2.]], requires_grad=True), Parameter containing:
    tensor([3.], requires_grad=True))
"""

from __future__ import annotations

from collections.abc import Iterable

from torchlight.autograd import no_grad
from torchlight.creation import cat
from torchlight.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Every parameter flattened and joined, in order: ``cat([p.reshape(-1) for p in ...])``.

    The result is part of the graph (differentiable), as in PyTorch.
    """
    params = list(parameters)
    if not params:
        raise ValueError("parameters_to_vector: got no parameters")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the flat ``vec`` into the parameters, in place (not recorded)."""
    params = list(parameters)
    if not isinstance(vec, Tensor) or vec.ndim != 1:
        got = vec.shape if isinstance(vec, Tensor) else type(vec).__name__
        raise TypeError(f"vector_to_parameters: expected a 1-d tensor, got {got}")
    needed = sum(p.numel() for p in params)
    if vec.numel() != needed:
        raise ValueError(
            f"vector_to_parameters: the vector has {vec.numel()} elements, the parameters {needed}"
        )
    offset = 0
    with no_grad():
        for p in params:
            p.copy_(vec[offset : offset + p.numel()].reshape(*p.shape))
            offset += p.numel()
