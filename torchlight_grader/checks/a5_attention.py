r"""Hidden checks for assignment 5, *Normalization and attention*.

BatchNorm in training mode (batch statistics, biased variance) as a Function, the running
statistics and evaluation mode as a plain function, LayerNorm over the last dimension, softmax
(stable for logits in the hundreds), scaled dot-product attention with and without a causal mask
($\mathrm{softmax}(QK^T/\sqrt{E} + M)V$, queries and keys of different lengths when not causal),
and the backward pass of one LSTM step (PyTorch's gate order). Every reference is plain numpy in
the grader; every reference gradient is checked against central differences before it is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from torchlight_grader.checks import adversarial as against
from torchlight_grader.checks.check import Case
from torchlight_grader.checks.kinds import FunctionCheck, ValueCheck

EPS = 1e-5
BATCHNORM_SHAPES = [(6, 3), (4, 5), (9, 2)]  # (N, C)
LAYERNORM_SHAPES = [(4, 5), (2, 3, 6), (7, 3)]  # (*, D)
SOFTMAX_CASES = [((3, 5), 0.0), ((2, 3, 4), 0.0), ((4, 6), 700.0)]  # shape, offset
# (batch dims, L, S, E, Ev, causal): causal needs L == S here; keys outnumber queries otherwise.
ATTENTION_CASES = [((2,), 4, 4, 3, 2, True), ((2, 2), 5, 5, 4, 3, True), ((3,), 3, 6, 2, 4, False)]
LSTM_SHAPES = [(3, 4), (5, 2), (2, 3)]  # (N, H)


# ---------------------------------------------------------------------------- BatchNorm
def batchnorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    x_hat = (x - x.mean(0)) / np.sqrt(x.var(0) + eps)
    return x_hat * w + b


def batchnorm_vjp(g: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> Any:
    rstd = 1.0 / np.sqrt(x.var(0) + eps)
    x_hat = (x - x.mean(0)) * rstd
    gx = g * w
    grad_x = rstd * (gx - gx.mean(0) - x_hat * (gx * x_hat).mean(0))
    return grad_x, (g * x_hat).sum(0), g.sum(0)


def batchnorm_case(rng: np.random.Generator, trial: int) -> Case:
    n, c = BATCHNORM_SHAPES[trial % len(BATCHNORM_SHAPES)]
    x = rng.uniform(-2, 2, size=(n, c)) * rng.uniform(0.5, 3, size=c) + rng.uniform(-3, 3, size=c)
    w, b = rng.uniform(0.5, 2, size=c), rng.uniform(-1, 1, size=c)
    return Case(
        [x, w, b, EPS], rng.standard_normal((n, c)), (0, 1, 2), ("x", "weight", "bias", "eps")
    )


def batch_norm_step(
    x: np.ndarray,
    running_mean: np.ndarray,
    running_var: np.ndarray,
    w: np.ndarray,
    b: np.ndarray,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if training:
        n = x.shape[0]
        mean, var = x.mean(0), x.var(0)
        running_mean = (1 - momentum) * running_mean + momentum * mean
        running_var = (1 - momentum) * running_var + momentum * var * n / (n - 1)
    else:
        mean, var = running_mean, running_var
    return (x - mean) / np.sqrt(var + eps) * w + b, running_mean, running_var


def batch_norm_step_case(rng: np.random.Generator, trial: int) -> Case:
    n, c = BATCHNORM_SHAPES[trial % len(BATCHNORM_SHAPES)]
    training, momentum = [(False, 0.1), (True, 0.1), (False, 0.3)][trial % 3]
    x = rng.uniform(-2, 2, size=(n, c)) + rng.uniform(-3, 3, size=c)
    mean, var = rng.uniform(-1, 1, size=c), rng.uniform(0.5, 2, size=c)
    w, b = rng.uniform(0.5, 2, size=c), rng.uniform(-1, 1, size=c)
    return Case(
        [x, mean, var, w, b, training, momentum, EPS],
        names=("x", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"),
    )


# ---------------------------------------------------------------------------- LayerNorm
def layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def layernorm_vjp(g: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> Any:
    rstd = 1.0 / np.sqrt(x.var(-1, keepdims=True) + eps)
    x_hat = (x - x.mean(-1, keepdims=True)) * rstd
    gx = g * w
    grad_x = rstd * (gx - gx.mean(-1, keepdims=True) - x_hat * (gx * x_hat).mean(-1, keepdims=True))
    lead = tuple(range(x.ndim - 1))
    return grad_x, (g * x_hat).sum(lead), g.sum(lead)


def layernorm_case(rng: np.random.Generator, trial: int) -> Case:
    shape = LAYERNORM_SHAPES[trial % len(LAYERNORM_SHAPES)]
    x = rng.uniform(-2, 2, size=shape) * rng.uniform(0.5, 3) + rng.uniform(-3, 3)
    w, b = rng.uniform(0.5, 2, size=shape[-1]), rng.uniform(-1, 1, size=shape[-1])
    return Case(
        [x, w, b, EPS], rng.standard_normal(shape), (0, 1, 2), ("x", "weight", "bias", "eps")
    )


# ------------------------------------------------------------------------------ softmax
def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_vjp(g: np.ndarray, x: np.ndarray) -> tuple[np.ndarray]:
    s = softmax(x)
    return (s * (g - (g * s).sum(-1, keepdims=True)),)


def softmax_case(rng: np.random.Generator, trial: int) -> Case:
    shape, offset = SOFTMAX_CASES[trial % len(SOFTMAX_CASES)]
    x = rng.uniform(-3, 3, size=shape) + offset * rng.choice([-1.0, 1.0])
    return Case([x], rng.standard_normal(shape), (0,), ("x",))


# ---------------------------------------------------------------------------- attention
def _mask(length: int, source: int, causal: bool) -> np.ndarray:
    if not causal:
        return np.zeros((length, source))
    return np.where(np.triu(np.ones((length, source), dtype=bool), k=1), -np.inf, 0.0)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return softmax(scores + _mask(q.shape[-2], k.shape[-2], causal)) @ v


def attention_vjp(g: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> Any:
    scale = 1.0 / np.sqrt(q.shape[-1])
    p = softmax(q @ np.swapaxes(k, -1, -2) * scale + _mask(q.shape[-2], k.shape[-2], causal))
    grad_v = np.swapaxes(p, -1, -2) @ g
    grad_p = g @ np.swapaxes(v, -1, -2)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdims=True)) * scale
    return grad_s @ k, np.swapaxes(grad_s, -1, -2) @ q, grad_v


def attention_case(rng: np.random.Generator, trial: int) -> Case:
    lead, length, source, e, ev, causal = ATTENTION_CASES[trial % len(ATTENTION_CASES)]
    q = rng.uniform(-2, 2, size=(*lead, length, e))
    k = rng.uniform(-2, 2, size=(*lead, source, e))
    v = rng.uniform(-2, 2, size=(*lead, source, ev))
    return Case(
        [q, k, v, causal],
        rng.standard_normal((*lead, length, ev)),
        (0, 1, 2),
        ("query", "key", "value", "causal"),
    )


# ---------------------------------------------------------------------------- LSTM cell
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _gates(z: np.ndarray, c_prev: np.ndarray) -> tuple[np.ndarray, ...]:
    i, f, g, o = np.split(z, 4, axis=-1)
    return _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)


def lstm_cell(z: np.ndarray, c_prev: np.ndarray) -> np.ndarray:
    i, f, g, o = _gates(z, c_prev)
    c = f * c_prev + i * g
    return np.stack([o * np.tanh(c), c])


def lstm_cell_vjp(grad: np.ndarray, z: np.ndarray, c_prev: np.ndarray) -> Any:
    i, f, g, o = _gates(z, c_prev)
    tanh_c = np.tanh(f * c_prev + i * g)
    grad_h, grad_c = grad[0], grad[1]
    delta = grad_c + grad_h * o * (1 - tanh_c**2)
    grad_z = np.concatenate(
        [delta * g * i * (1 - i), delta * c_prev * f * (1 - f), delta * i * (1 - g**2),
         grad_h * tanh_c * o * (1 - o)],
        axis=-1,
    )  # fmt: skip
    return grad_z, delta * f


def lstm_case(rng: np.random.Generator, trial: int) -> Case:
    n, h = LSTM_SHAPES[trial % len(LSTM_SHAPES)]
    z, c = rng.uniform(-2, 2, size=(n, 4 * h)), rng.uniform(-2, 2, size=(n, h))
    return Case([z, c], rng.standard_normal((2, n, h)), (0, 1), ("z", "c_prev"))


CHECKS = {
    "test_batchnorm": FunctionCheck(
        "BatchNorm",
        ("batchnorm",),
        batchnorm_case,
        forward_ref=batchnorm,
        vjp_ref=batchnorm_vjp,
        what="BatchNorm forward and backward (training mode)",
    ),
    "test_batchnorm_eval": ValueCheck(
        "batch_norm",
        ("batchnorm", "batch_norm"),
        batch_norm_step_case,
        reference=batch_norm_step,
        what="batch_norm: running statistics in training, used in evaluation",
    ),
    "test_layernorm": FunctionCheck(
        "LayerNorm",
        ("layernorm",),
        layernorm_case,
        forward_ref=layernorm,
        vjp_ref=layernorm_vjp,
        what="LayerNorm forward and backward",
    ),
    "test_softmax": FunctionCheck(
        "Softmax",
        ("softmax",),
        softmax_case,
        forward_ref=softmax,
        vjp_ref=softmax_vjp,
        what="Softmax forward and backward (including logits near +-700)",
        adversarial=against.offset_gradient(softmax_case),
    ),
    "test_attention": FunctionCheck(
        "Attention",
        ("attention",),
        attention_case,
        forward_ref=attention,
        vjp_ref=attention_vjp,
        what="scaled dot-product attention forward and backward (with and without the causal mask)",
        adversarial=against.tiny_queries(attention_case),
    ),
    "test_lstm_cell": FunctionCheck(
        "LSTMCell",
        ("lstm_cell",),
        lstm_case,
        forward_ref=lstm_cell,
        vjp_ref=lstm_cell_vjp,
        what="LSTMCell forward and backward",
        adversarial=against.huge(lstm_case, args=(1,)),
    ),
}
