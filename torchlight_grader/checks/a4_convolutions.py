r"""Hidden checks for assignment 4, *Convolutions*.

Convolution here is cross-correlation without padding, stride 1 (as ``torch.nn.functional``):

$$y_{n,o,t} = \sum_{c}\sum_{k} x_{n,c,t+k}\, w_{o,c,k}$$

Kernels are non-square and smaller than the input in every trial, so a swapped index or a
missing sum shows up in the shapes or the values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from torchlight_grader.checks.check import Case
from torchlight_grader.checks.kinds import FunctionCheck

CONV1D_SHAPES = [((2, 3, 7), (4, 3, 3)), ((1, 2, 5), (3, 2, 2)), ((3, 1, 6), (2, 1, 4))]
CONV2D_SHAPES = [
    ((2, 3, 5, 6), (4, 3, 2, 3)),
    ((1, 2, 4, 5), (3, 2, 3, 2)),
    ((2, 1, 6, 4), (2, 1, 3, 3)),
]
POOL_CASES = [((2, 3, 4, 6), 2), ((1, 2, 6, 3), 3), ((2, 1, 4, 8), 2)]


def conv1d(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    windows = sliding_window_view(x, w.shape[2], axis=2)  # (N, C, T, K)
    return np.einsum("nctk,ock->not", windows, w)


def conv1d_vjp(g: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    windows = sliding_window_view(x, w.shape[2], axis=2)
    grad_w = np.einsum("not,nctk->ock", g, windows)
    grad_x = np.zeros_like(x)
    steps = g.shape[2]
    for k in range(w.shape[2]):
        grad_x[:, :, k : k + steps] += np.einsum("not,oc->nct", g, w[:, :, k])
    return grad_x, grad_w


def conv2d(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))  # (N, C, H', W', KH, KW)
    return np.einsum("nchwij,ocij->nohw", windows, w)


def conv2d_vjp(g: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))
    grad_w = np.einsum("nohw,nchwij->ocij", g, windows)
    grad_x = np.zeros_like(x)
    out_h, out_w = g.shape[2:]
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            grad_x[:, :, i : i + out_h, j : j + out_w] += np.einsum(
                "nohw,oc->nchw", g, w[:, :, i, j]
            )
    return grad_x, grad_w


def avg_pool2d(x: np.ndarray, k: int) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // k, k, w // k, k).mean(axis=(3, 5))


def avg_pool2d_vjp(g: np.ndarray, x: np.ndarray, k: int) -> tuple[np.ndarray]:
    return (np.repeat(np.repeat(g, k, axis=2), k, axis=3) / (k * k),)


def conv_case(shapes: list) -> Callable[[np.random.Generator, int], Case]:
    def sample(rng: np.random.Generator, trial: int) -> Case:
        sx, sw = shapes[trial % len(shapes)]
        x, w = rng.uniform(-2, 2, size=sx), rng.uniform(-1, 1, size=sw)
        out_shape = conv1d(x, w).shape if len(sx) == 3 else conv2d(x, w).shape
        return Case([x, w], rng.standard_normal(out_shape), (0, 1), ("x", "weight"))

    return sample


def pool_case(rng: np.random.Generator, trial: int) -> Case:
    shape, k = POOL_CASES[trial % len(POOL_CASES)]
    x = rng.uniform(-2, 2, size=shape)
    return Case([x, k], rng.standard_normal(avg_pool2d(x, k).shape), (0,), ("x", "kernel_size"))


CHECKS = {
    "test_conv1d": FunctionCheck(
        "Conv1d",
        ("conv1d",),
        conv_case(CONV1D_SHAPES),
        forward_ref=conv1d,
        vjp_ref=conv1d_vjp,
        what="Conv1d forward and backward",
    ),
    "test_conv2d": FunctionCheck(
        "Conv2d",
        ("conv2d",),
        conv_case(CONV2D_SHAPES),
        forward_ref=conv2d,
        vjp_ref=conv2d_vjp,
        what="Conv2d forward and backward",
    ),
    "test_avg_pool2d": FunctionCheck(
        "AvgPool2d",
        ("avg_pool2d",),
        pool_case,
        forward_ref=avg_pool2d,
        vjp_ref=avg_pool2d_vjp,
        what="AvgPool2d forward and backward",
    ),
}
