r"""Toy 2-D classification data sets: points in the unit square, labelled 0 or 1 by a rule.

Each function takes ``n`` (the number of points), ``noise`` (the standard deviation of Gaussian
jitter added to the points *after* they are labelled, so classes overlap near the boundary)
and ``seed`` (its own generator: the same arguments always give the same points), and returns
a :class:`~torchlight.data.TensorDataset` of inputs $(n, 2)$ and int64 labels $(n,)$.

========  =====================================================================
simple    $y = [x_1 < 0.5]$: a vertical line
diag      $y = [x_1 + x_2 < 0.5]$: a diagonal line near the corner
split     $y = [x_1 < 0.2 \lor x_1 > 0.8]$: two outer bands (needs a hidden layer)
xor       $y = [x_1 < 0.5] \oplus [x_2 < 0.5]$: opposite quadrants
circle    $y = [(x_1 - 0.5)^2 + (x_2 - 0.5)^2 > 0.1]$: outside a circle
spiral    two interleaved spiral arms, one per class
========  =====================================================================

Example:
    >>> from torchlight.data import xor
    >>> ds = xor(n=100, seed=0)
    >>> ds.tensors[0].shape, ds.tensors[1].shape
    ((100, 2), (100,))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from torchlight.creation import tensor
from torchlight.utils.data.dataset import TensorDataset

__all__ = ["TOY_DATASETS", "circle", "diag", "simple", "spiral", "split", "xor"]


def _dataset(
    points: np.ndarray, labels: np.ndarray, noise: float, rng: np.random.Generator, dtype: Any
) -> TensorDataset:
    if noise < 0:
        raise ValueError(f"noise is a standard deviation and must be >= 0, got {noise}")
    if noise > 0:
        points = points + rng.normal(0.0, noise, points.shape)
    return TensorDataset(tensor(points, dtype=dtype), tensor(labels.astype(np.int64)))


def _uniform_points(n: int, seed: int) -> tuple[np.ndarray, np.random.Generator]:
    if n < 1:
        raise ValueError(f"n (the number of points) must be positive, got {n}")
    rng = np.random.default_rng(seed)
    return rng.random((n, 2)), rng


def simple(n: int = 100, noise: float = 0.0, seed: int = 0, dtype: Any = None) -> TensorDataset:
    r"""$y = [x_1 < 0.5]$: linearly separable by a vertical line."""
    x, rng = _uniform_points(n, seed)
    return _dataset(x, x[:, 0] < 0.5, noise, rng, dtype)


def diag(n: int = 100, noise: float = 0.0, seed: int = 0, dtype: Any = None) -> TensorDataset:
    r"""$y = [x_1 + x_2 < 0.5]$: linearly separable, unbalanced (1/8 of the points are 1)."""
    x, rng = _uniform_points(n, seed)
    return _dataset(x, x.sum(axis=1) < 0.5, noise, rng, dtype)


def split(n: int = 100, noise: float = 0.0, seed: int = 0, dtype: Any = None) -> TensorDataset:
    r"""$y = [x_1 < 0.2 \lor x_1 > 0.8]$: two bands, not linearly separable."""
    x, rng = _uniform_points(n, seed)
    return _dataset(x, (x[:, 0] < 0.2) | (x[:, 0] > 0.8), noise, rng, dtype)


def xor(n: int = 100, noise: float = 0.0, seed: int = 0, dtype: Any = None) -> TensorDataset:
    r"""$y = [x_1 < 0.5] \oplus [x_2 < 0.5]$: the classic problem a single layer cannot solve."""
    x, rng = _uniform_points(n, seed)
    return _dataset(x, (x[:, 0] < 0.5) != (x[:, 1] < 0.5), noise, rng, dtype)


def circle(n: int = 100, noise: float = 0.0, seed: int = 0, dtype: Any = None) -> TensorDataset:
    r"""$y = [(x_1 - 0.5)^2 + (x_2 - 0.5)^2 > 0.1]$: a disc of class 0 inside class 1."""
    x, rng = _uniform_points(n, seed)
    return _dataset(x, ((x - 0.5) ** 2).sum(axis=1) > 0.1, noise, rng, dtype)


def spiral(n: int = 200, noise: float = 0.0, seed: int = 0, dtype: Any = None) -> TensorDataset:
    r"""Two spiral arms around $(0.5, 0.5)$, the second the first turned by $\pi$:

    $$r = 0.45\, t,\quad \theta = 3\pi t + k\pi,\quad t \in [0.1, 1],\quad k \in \{0, 1\}$$

    ``n // 2`` points per arm at evenly spaced $t$ (plus one for arm 0 if ``n`` is odd); the
    seed only matters for ``noise``.
    """
    if n < 2:
        raise ValueError(f"n (the number of points) must be at least 2 for two arms, got {n}")
    rng = np.random.default_rng(seed)
    points, labels = [], []
    for k, count in enumerate((n - n // 2, n // 2)):
        t = np.linspace(0.1, 1.0, count)
        theta = 3 * np.pi * t + k * np.pi
        points.append(
            np.stack([0.5 + 0.45 * t * np.cos(theta), 0.5 + 0.45 * t * np.sin(theta)], axis=1)
        )
        labels.append(np.full(count, k))
    return _dataset(np.concatenate(points), np.concatenate(labels), noise, rng, dtype)


TOY_DATASETS: dict[str, Callable[..., TensorDataset]] = {
    "simple": simple,
    "diag": diag,
    "split": split,
    "xor": xor,
    "circle": circle,
    "spiral": spiral,
}
