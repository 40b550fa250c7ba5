"""The op table: one row per differentiable op, driving forward checks against numpy and
gradient checks against central differences (tests/test_core_ops.py, and the backend
conformance suite over every backend).

Each row says how to call the op in torchlight and in numpy, and where to sample its inputs
so that central differences never straddle a kink (relu at 0, |x| at 0, ties in max...).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import torchlight as tl
from torchlight.ops.recurrent import LSTMCellFunction, lstm

Sampler = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def real(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.uniform(-2.0, 2.0, shape)


def positive(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.uniform(0.5, 2.0, shape)


def away_from_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def low_band(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """[0.2, 1]: paired with high_or_negative so that max/min never tie."""
    return rng.uniform(0.2, 1.0, shape)


def high_or_negative(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.where(
        rng.random(shape) < 0.5, rng.uniform(-1.0, -0.2, shape), rng.uniform(1.2, 2.0, shape)
    )


def away_from_clamp_bounds(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Inside (-0.4, 0.4) or outside +-0.6: never near the clamp bounds +-0.5."""
    inside = rng.uniform(-0.4, 0.4, shape)
    outside = rng.uniform(0.6, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return np.where(rng.random(shape) < 0.5, inside, outside)


@dataclass(frozen=True)
class Op:
    """One op: its torchlight call, its numpy twin, one sampler per input, and its shape cases."""

    name: str
    tl_fn: Callable[..., Any]
    np_fn: Callable[..., Any]
    samplers: tuple[Sampler, ...]
    shapes: tuple[tuple[tuple[int, ...], ...], ...]
    grad: bool = True  # whether gradients are checked
    broadcast: bool = False  # whether hypothesis should also draw broadcastable shapes
    tags: frozenset[str] = field(default_factory=frozenset)

    @property
    def arity(self) -> int:
        return len(self.samplers)


UNARY_SHAPES = (((),), ((4,),), ((2, 3),), ((0,),), ((2, 0, 3),))
BINARY_SHAPES = (
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((4, 1), (1, 5)),
    ((), (2, 2)),
    ((3,), ()),
    ((0, 3), (3,)),
)


def _unary(
    name: str, tl_fn: Callable[..., Any], np_fn: Callable[..., Any], sampler: Sampler = real
) -> Op:
    return Op(name, tl_fn, np_fn, (sampler,), UNARY_SHAPES)


def _binary(
    name: str,
    tl_fn: Callable[..., Any],
    np_fn: Callable[..., Any],
    a: Sampler = real,
    b: Sampler = real,
) -> Op:
    return Op(name, tl_fn, np_fn, (a, b), BINARY_SHAPES, broadcast=True)


def _np_sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _np_normalize(a: np.ndarray, axes: tuple[int, ...], eps: float = 1e-5) -> np.ndarray:
    mean = a.mean(axis=axes, keepdims=True)
    return (a - mean) / np.sqrt(a.var(axis=axes, keepdims=True) + eps)


def _np_lstm_cell(z: np.ndarray, c: np.ndarray) -> np.ndarray:
    i, f, g, o = np.split(z, 4, axis=-1)
    sig = _np_sigmoid
    c_new = sig(f) * c + sig(i) * np.tanh(g)
    return np.stack([sig(o) * np.tanh(c_new), c_new])


def _np_lstm_layer(
    xp: np.ndarray, w_hh: np.ndarray, b_hh: np.ndarray, h: np.ndarray, c: np.ndarray
) -> np.ndarray:
    steps = []
    for x in xp:  # each step: the cell on x_t + h_{t-1} W_hh^T + b_hh
        h, c = _np_lstm_cell(x + h @ w_hh.T + b_hh, c)
        steps.append((h, c))
    return np.stack([np.stack([h for h, _ in steps]), np.stack([c for _, c in steps])])


_ATTN_MASK = np.array([[True, False, True, True], [True, True, False, False], [False] * 3 + [True]])


def _np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: np.ndarray) -> np.ndarray:
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(keep.astype(bool), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ v


REDUCE_SHAPES = (((2, 3),), ((4,),), ((2, 3, 4),))

OPS: list[Op] = [
    # elementwise, one input
    _unary("neg", lambda a: -a, np.negative),
    _unary("abs", lambda a: a.abs(), np.abs, away_from_zero),
    _unary("exp", lambda a: a.exp(), np.exp),
    _unary("log", lambda a: a.log(), np.log, positive),
    _unary("sqrt", lambda a: a.sqrt(), np.sqrt, positive),
    _unary("sigmoid", lambda a: a.sigmoid(), _np_sigmoid),
    _unary("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0.0), away_from_zero),
    _unary("tanh", lambda a: a.tanh(), np.tanh),
    _unary(
        "clamp",
        lambda a: a.clamp(-0.5, 0.5),
        lambda a: np.clip(a, -0.5, 0.5),
        away_from_clamp_bounds,
    ),
    _unary(
        "clamp_min",
        lambda a: a.clamp(min=-0.5),
        lambda a: np.maximum(a, -0.5),
        away_from_clamp_bounds,
    ),
    _unary("pow_scalar", lambda a: a**3, lambda a: a**3),
    _unary("rpow_scalar", lambda a: 2.0**a, lambda a: 2.0**a),
    _unary("add_scalar", lambda a: a + 1.5, lambda a: a + 1.5),
    _unary("radd_scalar", lambda a: 1.5 + a, lambda a: 1.5 + a),
    _unary("rsub_scalar", lambda a: 1.5 - a, lambda a: 1.5 - a),
    _unary("mul_scalar", lambda a: a * 3, lambda a: a * 3),
    _unary("rdiv_scalar", lambda a: 1.0 / a, lambda a: 1.0 / a, away_from_zero),
    _unary("square_via_mul", lambda a: a * a, lambda a: a * a),
    _unary("clone", lambda a: a.clone(), lambda a: a.copy()),
    # elementwise, two inputs, broadcasting
    _binary("add", lambda a, b: a + b, np.add),
    _binary("sub", lambda a, b: a - b, np.subtract),
    _binary("mul", lambda a, b: a * b, np.multiply),
    _binary("div", lambda a, b: a / b, np.divide, b=away_from_zero),
    _binary("pow", lambda a, b: a**b, np.power, a=positive),
    _binary("maximum", lambda a, b: a.maximum(b), np.maximum, a=low_band, b=high_or_negative),
    _binary("minimum", lambda a, b: a.minimum(b), np.minimum, a=low_band, b=high_or_negative),
    # reductions (random values: ties have probability 0, kinks are eps-far almost surely)
    Op("sum_all", lambda a: a.sum(), lambda a: np.sum(a), (real,), (*UNARY_SHAPES, *REDUCE_SHAPES)),
    Op("sum_dim0", lambda a: a.sum(0), lambda a: np.sum(a, 0), (real,), REDUCE_SHAPES),
    Op(
        "sum_dim_last_keep",
        lambda a: a.sum(-1, keepdim=True),
        lambda a: np.sum(a, -1, keepdims=True),
        (real,),
        REDUCE_SHAPES,
    ),
    Op(
        "sum_dims",
        lambda a: a.sum((0, 1)),
        lambda a: np.sum(a, (0, 1)),
        (real,),
        (((2, 3),), ((2, 3, 4),), ((0, 3),)),
    ),
    Op("mean_all", lambda a: a.mean(), lambda a: np.mean(a), (real,), REDUCE_SHAPES),
    Op("mean_dim", lambda a: a.mean(-1), lambda a: np.mean(a, -1), (real,), REDUCE_SHAPES),
    Op("var_all", lambda a: a.var(), lambda a: np.var(a, ddof=1), (real,), REDUCE_SHAPES),
    Op(
        "var_dim_keep",
        lambda a: a.var(0, keepdim=True),
        lambda a: np.var(a, 0, ddof=1, keepdims=True),
        (real,),
        (((3, 2),), ((4, 2, 3),)),
    ),
    Op("max_all", lambda a: a.max(), lambda a: np.max(a), (real,), REDUCE_SHAPES),
    Op(
        "max_dim",
        lambda a: a.max(1).values,
        lambda a: np.max(a, 1),
        (real,),
        (((2, 3),), ((2, 3, 4),)),
    ),
    Op(
        "min_dim_keep",
        lambda a: a.min(0, keepdim=True).values,
        lambda a: np.min(a, 0, keepdims=True),
        (real,),
        REDUCE_SHAPES,
    ),
    # matmul: 1-D, 2-D, batched, broadcast batch
    Op(
        "matmul",
        lambda a, b: a @ b,
        np.matmul,
        (real, real),
        (
            ((2, 3), (3, 4)),
            ((3,), (3,)),
            ((3,), (3, 2)),
            ((2, 3), (3,)),
            ((2, 2, 3), (2, 3, 4)),
            ((2, 2, 3), (3, 4)),
            ((3,), (2, 3, 4)),
            ((1, 2, 3), (4, 3, 2)),
            ((0, 3), (3, 2)),
        ),
    ),  # fmt: skip
    # layout
    Op(
        "reshape",
        lambda a: a.reshape(3, 2),
        lambda a: a.reshape(3, 2),
        (real,),
        (((2, 3),), ((6,),)),
    ),
    Op(
        "view_infer",
        lambda a: a.view(-1),
        lambda a: a.reshape(-1),
        (real,),
        (((2, 3),), ((2, 0),)),
        tags=frozenset({"contiguous_only"}),
    ),
    Op(
        "permute",
        lambda a: a.permute(2, 0, 1),
        lambda a: a.transpose(2, 0, 1),
        (real,),
        (((2, 3, 4),),),
    ),
    Op(
        "transpose",
        lambda a: a.transpose(0, 1),
        lambda a: a.swapaxes(0, 1),
        (real,),
        (((2, 3),), ((2, 3, 4),)),
    ),
    Op("T", lambda a: a.T, lambda a: a.T, (real,), (((2, 3),),)),
    Op(
        "expand",
        lambda a: a.expand(3, 2, 4),
        lambda a: np.broadcast_to(a, (3, 2, 4)),
        (real,),
        (((2, 1),), ((4,),), ((1, 2, 4),)),
    ),
    Op("squeeze", lambda a: a.squeeze(), lambda a: a.squeeze(), (real,), (((1, 3, 1),), ((2, 1),))),
    Op(
        "unsqueeze",
        lambda a: a.unsqueeze(1),
        lambda a: np.expand_dims(a, 1),
        (real,),
        (((2, 3),), ((3,),)),
    ),
    Op(
        "flatten",
        lambda a: a.flatten(1),
        lambda a: a.reshape(a.shape[0], -1),
        (real,),
        (((2, 3, 4),), ((2, 0, 4),)),
    ),
    Op("getitem_int", lambda a: a[1], lambda a: a[1], (real,), (((3, 2),), ((2, 3, 4),))),
    Op(
        "getitem_slices",
        lambda a: a[:, 1:3],
        lambda a: a[:, 1:3],
        (real,),
        (((2, 4),), ((3, 4, 2),)),
    ),
    Op("getitem_step_none", lambda a: a[::2, None], lambda a: a[::2, None], (real,), (((5, 2),),)),
    Op(
        "getitem_int_array",
        lambda a: a[tl.tensor([0, 2, 0])],
        lambda a: a[np.array([0, 2, 0])],
        (real,),
        (((3, 2),), ((3,),)),
    ),
    Op(
        "getitem_bool_mask",
        lambda a: a[tl.tensor([True, False, True])],
        lambda a: a[np.array([True, False, True])],
        (real,),
        (((3, 2),), ((3,),)),
    ),
    Op(
        "getitem_two_arrays",
        lambda a: a[tl.tensor([0, 1, 1]), tl.tensor([2, 0, 2])],
        lambda a: a[np.array([0, 1, 1]), np.array([2, 0, 2])],
        (real,),
        (((2, 3),),),
    ),
    Op(
        "cat",
        lambda a, b: tl.cat([a, b], 1),
        lambda a, b: np.concatenate([a, b], 1),
        (real, real),
        (((2, 3), (2, 1)), ((2, 0), (2, 2))),
    ),
    Op(
        "stack",
        lambda a, b: tl.stack([a, b], -1),
        lambda a, b: np.stack([a, b], -1),
        (real, real),
        (((2, 3), (2, 3)), ((), ())),
    ),
    Op(
        "where",
        lambda a, b: tl.where(a > 0, a, b),
        lambda a, b: np.where(a > 0, a, b),
        (away_from_zero, real),
        BINARY_SHAPES[:3],
        broadcast=True,
    ),
    Op(
        "mse_loss",
        lambda a, b: a.mse_loss(b),
        lambda a, b: np.mean((a - b) ** 2),
        (real, real),
        (((2, 3), (2, 3)), ((4,), (4,))),
    ),
    # sequence models (issue 14): normalization, attention, GELU
    Op(
        "layer_norm",
        lambda a, w, b: tl.nn.functional.layer_norm(a, 4, w, b),
        lambda a, w, b: _np_normalize(a, (-1,)) * w + b,
        (real, real, real),
        (((2, 3, 4), (4,), (4,)),),
    ),
    Op(
        "batch_norm_train",
        lambda a, w, b: tl.nn.functional.batch_norm(a, None, None, w, b, training=True),
        lambda a, w, b: _np_normalize(a, (0, 2)) * w[:, None] + b[:, None],
        (real, real, real),
        (((4, 3, 2), (3,), (3,)),),
    ),
    Op(
        "group_norm",
        lambda a, w, b: tl.nn.functional.group_norm(a, 2, w, b),
        lambda a, w, b: (
            _np_normalize(a.reshape(2, 2, 6), (-1,)).reshape(2, 4, 3) * w[:, None] + b[:, None]
        ),
        (real, real, real),
        (((2, 4, 3), (4,), (4,)),),
    ),
    Op(
        "sdpa_causal",
        lambda q, k, v: tl.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda q, k, v: _np_attention(q, k, v, np.tril(np.ones((q.shape[-2], k.shape[-2])))),
        (real, real, real),
        (((2, 4, 3), (2, 4, 3), (2, 4, 2)), ((3, 2), (5, 2), (5, 3))),
    ),
    Op(
        "sdpa_bool_mask",
        lambda q, k, v: tl.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=tl.tensor(_ATTN_MASK)
        ),
        lambda q, k, v: _np_attention(q, k, v, _ATTN_MASK),
        (real, real, real),
        (((2, 3, 2), (2, 4, 2), (2, 4, 3)),),
    ),
    Op(
        "lstm_cell",
        lambda z, c: LSTMCellFunction.apply(z, c),
        lambda z, c: _np_lstm_cell(z, c),
        (real, real),
        (((3, 8), (3, 2)),),
    ),
    Op(
        "lstm_layer",  # what nn.LSTM runs: the recurrence, or the backend's fused override
        lambda xp, w, b, h, c: lstm(xp, w, b, h, c),
        _np_lstm_layer,
        (real, real, real, real, real),
        (((3, 2, 8), (8, 2), (8,), (2, 2), (2, 2)),),
    ),
    _unary(
        "gelu_tanh",
        lambda a: tl.nn.functional.gelu(a, approximate="tanh"),
        lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3))),
    ),
]

# --------------------------------------------------------------------------- PyTorch's other ops
# (torchlight/ops/*.py and tensor_methods.py: elementwise math, reductions, layout, indexing)

# One 2-d shape, run contiguous and permuted: the map kernels are shared by every op, so more
# shapes would test them again, not the new ops.
SMALL_UNARY = (((2, 3),),)
_GATHER_INDEX = np.array([[0, 2, 0], [1, 1, 0]])
_SCATTER_INDEX = np.array([[2, 0], [1, 2]])  # unique per column: scatter's result is defined


def _np_scatter_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = a.copy()
    np.add.at(out, (_SCATTER_INDEX, np.arange(2)[None, :]), b[:2, :2])
    return out


def _np_scatter(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = a.copy()
    out[_SCATTER_INDEX, np.arange(2)[None, :]] = b[:2, :2]
    return out


def _np_logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(a - m), axis))


def _np_lower_median(a: np.ndarray, axis: int) -> np.ndarray:
    return np.take(np.sort(a, axis), (a.shape[axis] - 1) // 2, axis)


def _erf(a: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[float])(a)


def _not_near_half(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values at least 0.1 from an integer or a half: floor and round do not jump within eps."""
    return rng.integers(-3, 3, shape) + rng.choice([0.2, 0.3, 0.7, 0.8], shape)


def _op(
    name: str, tl_fn: Callable[..., Any], np_fn: Callable[..., Any], *shapes: Any, **kw: Any
) -> Op:
    samplers = kw.pop("samplers", (real,) * len(shapes[0]))
    return Op(name, tl_fn, np_fn, samplers, shapes, **kw)


OPS += [
    # elementwise math
    Op("sin", lambda a: a.sin(), np.sin, (real,), SMALL_UNARY),
    Op("cos", lambda a: a.cos(), np.cos, (real,), SMALL_UNARY),
    Op("log1p", lambda a: a.log1p(), np.log1p, (positive,), SMALL_UNARY),
    Op("expm1", lambda a: a.expm1(), np.expm1, (real,), SMALL_UNARY),
    Op("erf", lambda a: a.erf(), _erf, (real,), SMALL_UNARY),
    Op("floor", lambda a: a.floor(), np.floor, (_not_near_half,), SMALL_UNARY),
    Op("round", lambda a: a.round(), np.round, (_not_near_half,), SMALL_UNARY),
    Op("rsqrt", lambda a: a.rsqrt(), lambda a: 1 / np.sqrt(a), (positive,), SMALL_UNARY),
    Op("reciprocal", lambda a: a.reciprocal(), np.reciprocal, (away_from_zero,), SMALL_UNARY),
    Op("square", lambda a: a.square(), np.square, (real,), SMALL_UNARY),
    _op("add_alpha", lambda a, b: a.add(b, alpha=2), lambda a, b: a + 2 * b, ((2, 3), (3,))),
    _op("sub_alpha", lambda a, b: a.sub(b, alpha=0.5), lambda a, b: a - 0.5 * b, ((2, 3), (2, 3))),
    _op(
        "softmax_method",
        lambda a: a.softmax(-1),
        lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True),
        ((2, 3),),
    ),
    _op(
        "log_softmax_method",
        lambda a: a.log_softmax(0),
        lambda a: a - np.log(np.exp(a).sum(0)),
        ((3, 2),),
    ),
    # reductions
    _op("prod_all", lambda a: a.prod(), np.prod, ((2, 3),), ((5,),)),
    _op(
        "prod_dim",
        lambda a: a.prod(1, keepdim=True),
        lambda a: np.prod(a, 1, keepdims=True),
        ((2, 5),),
        ((2, 0),),
    ),
    _op("logsumexp", lambda a: a.logsumexp(-1), lambda a: _np_logsumexp(a, -1), ((2, 3),), ((4,),)),
    _op("norm", lambda a: a.norm(), lambda a: np.sqrt(np.sum(a * a)), ((2, 3),)),
    _op("norm_dim", lambda a: a.norm(dim=1), lambda a: np.linalg.norm(a, axis=1), ((2, 3),)),
    _op(
        "norm_p1",
        lambda a: a.norm(1),
        lambda a: np.sum(np.abs(a)),
        ((2, 3),),
        samplers=(away_from_zero,),
    ),
    _op(
        "norm_p3_keep",
        lambda a: a.norm(3, 0, True),
        lambda a: np.sum(np.abs(a) ** 3, 0, keepdims=True) ** (1 / 3),
        ((2, 3),),
        samplers=(away_from_zero,),
    ),
    _op("norm_inf", lambda a: a.norm(math.inf), lambda a: np.max(np.abs(a)), ((2, 3),)),
    _op("cumsum", lambda a: a.cumsum(-1), lambda a: np.cumsum(a, -1), ((5,),), ((2, 3),)),
    _op("cumsum_dim0", lambda a: a.cumsum(0), lambda a: np.cumsum(a, 0), ((4, 2),)),
    _op("amax", lambda a: a.amax((0, 1)), lambda a: np.max(a, (0, 1)), ((2, 3, 2),)),
    _op(
        "amin",
        lambda a: a.amin(-1, keepdim=True),
        lambda a: np.min(a, -1, keepdims=True),
        ((2, 3),),
    ),
    _op("median_all", lambda a: a.median(), lambda a: _np_lower_median(a.ravel(), 0), ((2, 3),)),
    _op(
        "median_dim",
        lambda a: a.median(1).values,
        lambda a: _np_lower_median(a, 1),
        ((3, 4),),
        ((2, 3),),
    ),
    # layout
    _op(
        "chunk",
        lambda a: tl.cat(a.chunk(2, 1)[::-1], 1),
        lambda a: np.concatenate([a[:, 2:], a[:, :2]], 1),
        ((2, 3),),
    ),
    _op(
        "split_sizes",
        lambda a: tl.cat(a.split([1, 2], 0)[::-1], 0),
        lambda a: np.concatenate([a[1:], a[:1]], 0),
        ((3, 2),),
    ),
    _op("unbind", lambda a: tl.stack(a.unbind(1)[::-1], 1), lambda a: a[:, ::-1], ((2, 3),)),
    _op("narrow", lambda a: a.narrow(1, 1, 2), lambda a: a[:, 1:3], ((2, 4),)),
    _op("repeat", lambda a: a.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), ((2, 3),)),
    _op("flip", lambda a: a.flip(0, -1), lambda a: np.flip(a, (0, -1)), ((2, 3),), ((2, 3, 2),)),
    _op(
        "roll", lambda a: a.roll((1, -1), (0, 1)), lambda a: np.roll(a, (1, -1), (0, 1)), ((3, 4),)
    ),
    _op("roll_flat", lambda a: a.roll(2), lambda a: np.roll(a, 2), ((2, 3),)),
    _op("movedim", lambda a: a.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1), ((2, 3, 4),)),
    _op("tril", lambda a: a.tril(), np.tril, ((3, 4),), ((2, 3, 3),)),
    _op("triu_diagonal", lambda a: a.triu(1), lambda a: np.triu(a, 1), ((3, 3),)),
    _op("mT", lambda a: a.mT, lambda a: np.swapaxes(a, -1, -2), ((2, 3, 4),)),
    _op("t", lambda a: a.t(), lambda a: a.T, ((2, 3),), ((3,),)),
    _op(
        "expand_as",
        lambda a: a.expand_as(tl.zeros(2, 3)),
        lambda a: np.broadcast_to(a, (2, 3)),
        ((3,),),
    ),
    _op("reshape_as", lambda a: a.reshape_as(tl.zeros(3, 2)), lambda a: a.reshape(3, 2), ((2, 3),)),
    _op(
        "view_as",
        lambda a: a.view_as(tl.zeros(3, 2)),
        lambda a: a.reshape(3, 2),
        ((2, 3),),
        tags=frozenset({"contiguous_only"}),
    ),
    # indexing and sorting (the values: the gradient goes back to the elements picked)
    _op(
        "gather",
        lambda a: a.gather(1, tl.tensor(_GATHER_INDEX)),
        lambda a: np.take_along_axis(a, _GATHER_INDEX, 1),
        ((2, 4),),
    ),
    _op(
        "scatter_add",
        lambda a, b: a.scatter_add(0, tl.tensor(_SCATTER_INDEX), b),
        _np_scatter_add,
        ((3, 2), (2, 3)),
    ),
    _op(
        "scatter",
        lambda a, b: a.scatter(0, tl.tensor(_SCATTER_INDEX), b),
        _np_scatter,
        ((3, 2), (2, 2)),
    ),
    _op(
        "index_select",
        lambda a: a.index_select(0, tl.tensor([2, 0, 2])),
        lambda a: a[[2, 0, 2]],
        ((3, 2),),
    ),
    _op(
        "masked_fill",
        lambda a: a.masked_fill(a > 0, 0.5),
        lambda a: np.where(a > 0, 0.5, a),
        ((2, 3),),
        samplers=(away_from_zero,),
    ),
    _op("sort", lambda a: a.sort(0, descending=True).values, lambda a: -np.sort(-a, 0), ((3, 2),)),
    _op(
        "topk", lambda a: a.topk(2).values, lambda a: -np.sort(-a, -1)[..., :2], ((2, 4),), ((3,),)
    ),
    # function forms built of the above
    _op(
        "einsum_matmul",
        lambda a, b: tl.einsum("ij,kj->ik", a, b),
        lambda a, b: np.einsum("ij,kj->ik", a, b),
        ((2, 3), (4, 3)),
    ),
    _op(
        "einsum_batch_trace",
        lambda a: tl.einsum("bii->b", a),
        lambda a: np.einsum("bii->b", a),
        ((2, 3, 3),),
    ),
    _op("outer", lambda a, b: tl.outer(a, b), np.outer, ((3,), (2,))),
]


def _np_conv2d(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, stride: int = 1, padding: int = 0
) -> np.ndarray:
    """Cross-correlation as in PyTorch, one output position at a time."""
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    kh, kw = w.shape[2:]
    ho, wo = (xp.shape[2] - kh) // stride + 1, (xp.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i in range(ho):
        for j in range(wo):
            patch = xp[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out if b is None else out + b[None, :, None, None]


def _np_pool2x2(x: np.ndarray, reduce: Callable[..., np.ndarray]) -> np.ndarray:
    n, c, h, w = x.shape
    return reduce(x.reshape(n, c, h // 2, 2, w // 2, 2), axis=(3, 5))


OPS += [
    # convolution and pooling (im2col on every backend, the CUDA one included)
    Op(
        "conv2d",
        lambda x, w, b: tl.nn.functional.conv2d(x, w, b, padding=1),
        lambda x, w, b: _np_conv2d(x, w, b, padding=1),
        (real, real, real),
        (((2, 2, 4, 4), (3, 2, 3, 3), (3,)),),
    ),
    Op(
        "conv2d_stride2",
        lambda x, w: tl.nn.functional.conv2d(x, w, stride=2),
        lambda x, w: _np_conv2d(x, w, stride=2),
        (real, real),
        (((1, 2, 5, 5), (2, 2, 3, 3)),),
    ),
    Op(
        "max_pool2d",
        lambda x: tl.nn.functional.max_pool2d(x, 2),
        lambda x: _np_pool2x2(x, np.max),
        (real,),
        (((2, 2, 4, 4),),),
    ),
    Op(
        "avg_pool2d",
        lambda x: tl.nn.functional.avg_pool2d(x, 2),
        lambda x: _np_pool2x2(x, np.mean),
        (real,),
        (((2, 2, 4, 4),),),
    ),
]


# ---------------------------------------------------------------------------- nn surface (issue 13)
def _np_log_softmax(a: np.ndarray, axis: int) -> np.ndarray:
    shifted = a - a.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


_CE_TARGET = np.array([0, 2, -100, 1, 2])  # -100: ignored
_CE_WEIGHT = np.array([0.5, 1.0, 2.0])


def _np_cross_entropy(x: np.ndarray, smoothing: float) -> float:
    """PyTorch's weighted, smoothed cross-entropy with ignore_index=-100, written out."""
    logp, keep = _np_log_softmax(x, 1), _CE_TARGET != -100
    picked = np.where(keep, _CE_TARGET, 0)
    w = _CE_WEIGHT[picked] * keep
    nll = -(logp[np.arange(len(picked)), picked] * w).sum() / w.sum()
    smooth = -((logp * _CE_WEIGHT).sum(1) * keep).sum() / w.sum()
    return (1 - smoothing) * nll + smoothing / x.shape[1] * smooth


def _np_conv2d_general(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: tuple[int, int, int, int],
    dilation: int, groups: int,
) -> np.ndarray:  # fmt: skip
    """Cross-correlation by loops over output channels and kernel taps; pad = (top, bottom,
    left, right)."""
    xp = np.pad(x, ((0, 0), (0, 0), pad[:2], pad[2:]))
    o, cg, kh, kw = w.shape
    ho = (xp.shape[2] - dilation * (kh - 1) - 1) // stride + 1
    wo = (xp.shape[3] - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], o, ho, wo))
    for oc in range(o):
        g = oc // (o // groups)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dilation, i * dilation + stride * (ho - 1) + 1, stride)
                cols = slice(j * dilation, j * dilation + stride * (wo - 1) + 1, stride)
                patch = xp[:, g * cg : (g + 1) * cg, rows, cols]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, i, j])
    return out + b[None, :, None, None]


def _np_conv_transpose2d(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, padding: int, extra: int,
    groups: int, dilation: int,
) -> np.ndarray:  # fmt: skip
    """Each input pixel adds the kernel times its value at stride ``stride``; then crop."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    full_h = (h - 1) * stride + dilation * (kh - 1) + 1 + extra
    full_w = (wd - 1) * stride + dilation * (kw - 1) + 1 + extra
    out = np.zeros((n, og * groups, full_h, full_w))
    for ci in range(c):
        g = ci // cg
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dilation, i * dilation + stride * (h - 1) + 1, stride)
                cols = slice(j * dilation, j * dilation + stride * (wd - 1) + 1, stride)
                out[:, g * og : (g + 1) * og, rows, cols] += (
                    x[:, ci, None] * w[ci, :, i, j][None, :, None, None]
                )
    out = out[:, :, padding : full_h - padding, padding : full_w - padding]
    return out + b[None, :, None, None]


def _np_avg_pool2d(x: np.ndarray, k: int, s: int, p: int, count_include_pad: bool) -> np.ndarray:
    """ceil_mode=True average pooling, PyTorch's divisor rule, by loops over windows."""
    h, w = x.shape[2:]

    def size(n: int) -> int:
        out = -(-(n + 2 * p - k) // s) + 1
        return out - 1 if (out - 1) * s >= n + p else out

    out = np.zeros(x.shape[:2] + (size(h), size(w)))
    for i in range(size(h)):
        for j in range(size(w)):
            h0, w0 = i * s - p, j * s - p
            h1, w1 = min(h0 + k, h + p), min(w0 + k, w + p)
            area = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            total = x[:, :, h0:h1, w0:w1].sum(axis=(2, 3))
            out[:, :, i, j] = total / (area if count_include_pad else (h1 - h0) * (w1 - w0))
    return out


def _np_adaptive_avg_pool2d(x: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    h, w = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + size)
    for i in range(size[0]):
        for j in range(size[1]):
            rows = slice(i * h // size[0], -(-(i + 1) * h // size[0]))
            cols = slice(j * w // size[1], -(-(j + 1) * w // size[1]))
            out[..., i, j] = x[..., rows, cols].mean(axis=(-2, -1))
    return out


_F = tl.nn.functional
# compositions that exercise layout ops (cat, stack, slicing, integer indexing) on every backend;
# the elementwise ones (leaky_relu, elu, silu, softplus, l1/huber/kl losses) are checked on numpy
# in tests/test_nn_pytorch_api.py
NN_OPS: list[Op] = [
    Op(
        "cross_entropy_weight_ignore_smoothing",
        lambda a: _F.cross_entropy(
            a, tl.tensor(_CE_TARGET), tl.tensor(_CE_WEIGHT, backend=a.backend), label_smoothing=0.2
        ),
        lambda a: _np_cross_entropy(a, 0.2),
        (real,),
        (((5, 3),),),
    ),
    Op(
        "cross_entropy_probabilities",
        lambda a, b: _F.cross_entropy(a, b),
        lambda a, b: -(b * _np_log_softmax(a, 1)).sum(1).mean(),
        (real, positive),
        (((4, 3), (4, 3)),),
    ),
    Op(
        "pad",
        lambda a: _F.pad(a, (1, 2, 0, 1), value=0.5),
        lambda a: np.pad(a, ((0, 0), (0, 1), (1, 2)), constant_values=0.5),
        (real,),
        (((2, 2, 3),),),
    ),
    Op(
        "adaptive_avg_pool2d",
        lambda a: _F.adaptive_avg_pool2d(a, (2, 3)),
        lambda a: _np_adaptive_avg_pool2d(a, (2, 3)),
        (real,),
        (((1, 2, 5, 4),),),
    ),
    Op(
        "avg_pool2d_ceil_no_pad_count",
        lambda a: _F.avg_pool2d(a, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda a: _np_avg_pool2d(a, 3, 2, 1, False),
        (real,),
        (((1, 2, 5, 6),),),
    ),
    Op(
        "conv2d_same_dilation_groups",
        lambda x, w, b: _F.conv2d(x, w, b, padding="same", dilation=2, groups=2),
        lambda x, w, b: _np_conv2d_general(x, w, b, 1, (2, 2, 1, 1), 2, 2),
        (real, real, real),
        (((1, 4, 5, 4), (4, 2, 3, 2), (4,)),),
    ),
    Op(
        "conv_transpose2d",
        lambda x, w, b: _F.conv_transpose2d(
            x, w, b, stride=2, padding=1, output_padding=1, groups=2, dilation=2
        ),
        lambda x, w, b: _np_conv_transpose2d(x, w, b, 2, 1, 1, 2, 2),
        (real, real, real),
        (((1, 4, 3, 2), (4, 1, 2, 2), (2,)),),
    ),
    Op(
        "embedding_padding_idx",
        lambda w: _F.embedding(tl.tensor([[1, 2, 1], [0, 2, 3]]), w, padding_idx=2),
        lambda w: w[np.array([[1, 2, 1], [0, 2, 3]])],
        (real,),
        (((4, 3),),),
        grad=False,  # by design row 2 gets no gradient (tests/test_nn_pytorch_api.py checks it)
    ),
    Op(
        "embedding",
        lambda w: _F.embedding(tl.tensor([[1, 2, 1], [0, 2, 3]]), w),
        lambda w: w[np.array([[1, 2, 1], [0, 2, 3]])],
        (real,),
        (((4, 3),),),
    ),
]
OPS += NN_OPS


OPS_BY_NAME = {op.name: op for op in OPS}


def make_inputs(
    op: Op,
    shapes: tuple[tuple[int, ...], ...],
    seed: int,
    permuted: bool = False,
    backend: str | None = None,
) -> tuple[list[np.ndarray], list[tl.Tensor]]:
    """Sample numpy inputs for ``op`` and the matching float64 leaf tensors.

    With ``permuted``, each tensor is built in reversed dimension order and permuted back, so
    the op sees non-contiguous strides.
    """
    rng = np.random.default_rng(seed)
    arrays = [sampler(rng, shape) for sampler, shape in zip(op.samplers, shapes, strict=True)]
    tensors = []
    for array in arrays:
        if permuted and array.ndim >= 2:
            order = tuple(reversed(range(array.ndim)))
            t = tl.tensor(array.transpose(order).copy(), backend=backend).permute(*order).detach()
        else:
            t = tl.tensor(array, backend=backend)
        tensors.append(t.requires_grad_())
    return arrays, tensors


def check_op(
    op: Op,
    shapes: tuple[tuple[int, ...], ...],
    seed: int = 0,
    permuted: bool = False,
    backend: str | None = None,
    rtol: float = 1e-12,
) -> None:
    """Forward against numpy; gradients against central differences (and the gradient's shape)."""
    arrays, tensors = make_inputs(op, shapes, seed, permuted, backend)
    out = op.tl_fn(*tensors)
    expected = np.asarray(op.np_fn(*arrays))
    got = np.asarray(out.detach().to("numpy").numpy())
    assert got.shape == expected.shape, (
        f"{op.name}: shape {got.shape}, numpy gives {expected.shape}"
    )
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol, err_msg=f"{op.name} forward")
    if not op.grad or out.numel() == 0:
        return
    tl.autograd.gradcheck(op.tl_fn, *tensors, eps=1e-6, atol=1e-6, rtol=1e-5)
    out.backward(tl.ones_like(out))
    for i, t in enumerate(tensors):
        assert t.grad is not None and t.grad.shape == t.shape, (
            f"{op.name}: grad {i} has the wrong shape"
        )
