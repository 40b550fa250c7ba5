r"""Weight initialization, in place, as in ``torch.nn.init``; seeded through ``tl.manual_seed``.

The *fan-in* of a weight is the number of inputs each output sums over (``in_features``, or
``in_channels * kH * kW`` for a convolution); the *fan-out* the number of outputs each input
feeds. Glorot (xavier) keeps the variance of activations and gradients about equal across
layers; He (kaiming) does so for ReLU networks.

Example:
    >>> import torchlight as tl
    >>> w = tl.empty(3, 4)
    >>> _ = tl.nn.init.xavier_uniform_(w)
    >>> bool((w.abs() <= (6 / (3 + 4)) ** 0.5).all())
    True
"""

from __future__ import annotations

import math

import numpy as np

from torchlight.autograd import no_grad
from torchlight.creation import generator
from torchlight.random import rng_of
from torchlight.tensor import Tensor

__all__ = [
    "calculate_gain", "constant_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
    "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_",
]  # fmt: skip


def _fill(tensor: Tensor, values: np.ndarray) -> Tensor:
    with no_grad():
        tensor.copy_(values)
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    r"""Fill with samples of $\mathcal{U}(a, b)$."""
    return _fill(tensor, generator().uniform(a, b, tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    r"""Fill with samples of $\mathcal{N}(\mathrm{mean}, \mathrm{std}^2)$."""
    return _fill(tensor, generator().normal(mean, std, tensor.shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    return _fill(tensor, np.full(tensor.shape, val))


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with 0 in place (without recording it in the graph); returns it."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with 1 in place (without recording it in the graph); returns it."""
    return constant_(tensor, 1.0)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    r"""The recommended gain for a nonlinearity: 1 (linear, sigmoid), 5/3 (tanh), $\sqrt 2$ (relu),
    $\sqrt{2 / (1 + a^2)}$ (leaky_relu with slope $a$, default 0.01)."""
    if nonlinearity in ("linear", "identity", "conv1d", "conv2d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1.0 + slope**2))
    raise ValueError(
        f"unsupported nonlinearity {nonlinearity!r}; choose linear, sigmoid, tanh, relu or leaky_relu"
    )


def _fans(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError(
            f"fan in and fan out need a tensor of at least 2 dimensions, got shape {tensor.shape}"
        )
    receptive = int(np.prod(tensor.shape[2:], dtype=np.int64))
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    r"""Glorot: $\mathcal{U}(-a, a)$ with $a = \mathrm{gain}\sqrt{6 / (\mathrm{fan_{in}} + \mathrm{fan_{out}})}$."""
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    r"""Glorot: $\mathcal{N}(0, \sigma^2)$ with
    $\sigma = \mathrm{gain}\sqrt{2 / (\mathrm{fan_{in}} + \mathrm{fan_{out}})}$."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_uniform_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    r"""He: $\mathcal{U}(-b, b)$ with $b = \mathrm{gain}\sqrt{3 / \mathrm{fan}}$.

    ``nn.Linear`` and ``nn.Conv2d`` use ``a=sqrt(5)``, which gives $b = 1/\sqrt{\mathrm{fan_{in}}}$.
    """
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / _fan(tensor, mode))
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    r"""He: $\mathcal{N}(0, \sigma^2)$ with $\sigma = \mathrm{gain} / \sqrt{\mathrm{fan}}$."""
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std)


# ---- PyTorch compatibility (issue 25)
def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: object = None) -> Tensor:
    r"""A (semi-)orthogonal matrix (Saxe et al.), times ``gain``, as PyTorch's: the Q of the QR
    decomposition of a standard normal $(\text{rows}, \text{numel}/\text{rows})$ matrix, its
    columns' signs fixed by $R$'s diagonal; more dimensions are flattened after the first."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = rng_of(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tensor.shape))


__all__ += ["orthogonal_"]
