r"""Losses, in functional form (``F.l1_loss`` ...) and as Modules (``nn.L1Loss`` ...).

The class-index losses here handle what PyTorch users rely on beyond the plain case:
``ignore_index`` (by default a target of $-100$ is skipped), per-class ``weight``,
``label_smoothing``, probability targets, extra dimensions $(N, C, d_1, \ldots)$ and unbatched
inputs $(C)$. They are compositions of differentiable tensor ops: ``log_softmax``, one picked entry
per sample (integer indexing, whose backward puts the gradient back where it was read), a
weighted sum. ``F.cross_entropy`` and ``F.nll_loss`` use them whenever the one-node Functions of
:mod:`torchlight.ops.losses` (plain $(N, C)$ input, no options) do not apply.

Example:
    >>> import torchlight as tl
    >>> import torchlight.nn.functional as F
    >>> logits = tl.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    >>> F.cross_entropy(logits, tl.tensor([0, -100]))  # the second sample is ignored
    tensor(0.1698)
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from torchlight.creation import arange, tensor, where
from torchlight.nn.module import Module
from torchlight.nn.sparse import check_labels, host_labels
from torchlight.ops.activations import SoftplusFunction
from torchlight.ops.losses import (
    BinaryCrossEntropy,
    BinaryCrossEntropyWithLogits,
    CrossEntropy,
    NLLLossFunction,
    log_softmax,
)
from torchlight.tensor import Tensor

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss",
    "MSELoss", "NLLLoss", "SmoothL1Loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "cross_entropy", "huber_loss", "kl_div", "l1_loss",
    "mse_loss", "nll_loss", "smooth_l1_loss",
]  # fmt: skip

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(fn_name: str, reduction: str, allowed: tuple[str, ...] = _REDUCTIONS) -> None:
    if reduction not in allowed:
        raise ValueError(f"{fn_name}: reduction must be one of {allowed}, got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _classes_last(input: Tensor) -> Tensor:  # noqa: A002
    """(N, C, d1, ...) -> (N * d1 * ..., C): one row of class scores per prediction."""
    if input.ndim == 2:
        return input
    order = (0, *range(2, input.ndim), 1)
    return input.permute(*order).reshape(-1, input.shape[1])


def _check_weight(fn_name: str, weight: Tensor | None, num_classes: int) -> None:
    if weight is not None and weight.shape != (num_classes,):
        raise ValueError(
            f"{fn_name}: weight must have one entry per class, shape ({num_classes},); got "
            f"{weight.shape}"
        )


def class_index_loss(
    fn_name: str,
    logp: Tensor,
    target: Tensor,
    weight: Tensor | None,
    ignore_index: int,
    reduction: str,
    label_smoothing: float = 0.0,
) -> Tensor:
    r"""$\ell_n = -w_{y_n} \mathrm{logp}_{n, y_n}$ (0 where $y_n$ = ``ignore_index``); the mean is
    $\sum_n \ell_n / \sum_n w_{y_n}$ over the samples not ignored, as in PyTorch.

    With label smoothing $\varepsilon$ and $C$ classes: $(1 - \varepsilon)\,\ell_n +
    \frac{\varepsilon}{C}\,\big(-\sum_c w_c\, \mathrm{logp}_{n, c}\big)$.

    Shape: ``logp`` $(N, C, d_1, \ldots)$ of log-probabilities, ``target`` $(N, d_1, \ldots)$ of
    class indices; unbatched: $(C)$ and $()$.
    """
    if logp.ndim == 1:  # unbatched: one sample
        if target.ndim != 0:
            raise ValueError(
                f"{fn_name}: an unbatched input of shape (C,) = {logp.shape} needs a 0-d target, "
                f"got {target.shape}"
            )
        loss = class_index_loss(
            fn_name, logp.unsqueeze(0), target.reshape(1), weight, ignore_index, reduction,
            label_smoothing,
        )  # fmt: skip
        return loss.reshape(()) if reduction == "none" else loss
    if logp.ndim < 2 or target.shape != (logp.shape[0], *logp.shape[2:]):
        raise ValueError(
            f"{fn_name}: expected an input of shape (N, C) and a target of shape (N,) (or input "
            f"(N, C, d1, ...) and target (N, d1, ...)), got input {logp.shape} and target "
            f"{target.shape}"
        )
    num_classes = logp.shape[1]
    _check_weight(fn_name, weight, num_classes)
    labels = target.numpy().reshape(-1)
    keep = labels != ignore_index
    bad = keep & ((labels < 0) | (labels >= num_classes))
    if bad.any():
        position = int(np.argmax(bad))
        where_ = np.unravel_index(position, target.shape) if target.ndim > 1 else position
        raise IndexError(
            f"{fn_name}: target {int(labels[position])} (at position {where_}) is out of bounds: "
            f"with {num_classes} classes, class indices must be in 0..{num_classes - 1} (or "
            f"ignore_index={ignore_index}, which is skipped)"
        )
    rows = _classes_last(logp)  # (M, C)
    picked_class = np.where(keep, labels, 0)  # an ignored row reads class 0, weighted by 0
    picked = rows[arange(len(labels)), picked_class]  # logp[m, y_m]
    w = tensor(keep, dtype=logp.dtype, backend=logp.backend)
    if weight is not None:
        w = w * weight[picked_class]
    loss = -picked * w
    total = w.sum()
    if label_smoothing > 0.0:
        spread = rows * weight if weight is not None else rows
        smooth = -spread.sum(1) * tensor(keep, dtype=logp.dtype, backend=logp.backend)
        if reduction == "mean":
            nll, smooth_part = loss.sum() / total, smooth.sum() / total
            return nll * (1 - label_smoothing) + smooth_part * (label_smoothing / num_classes)
        loss = loss * (1 - label_smoothing) + smooth * (label_smoothing / num_classes)
    if reduction == "mean":
        return loss.sum() / total  # 0 / 0 = nan when every target is ignored, as in PyTorch
    return loss.sum() if reduction == "sum" else loss.reshape(target.shape)


def probability_target_loss(
    logp: Tensor, target: Tensor, weight: Tensor | None, reduction: str, label_smoothing: float
) -> Tensor:
    r"""$\ell_n = -\sum_c w_c\, p_{n, c} \log q_{n, c}$ for target probabilities $p$ (smoothed to
    $(1 - \varepsilon) p + \varepsilon / C$); the mean divides by the number of predictions.

    Shape: ``logp`` and ``target`` both $(N, C, d_1, \ldots)$ (or $(C)$); the class dimension is 1.
    """
    class_dim = 0 if logp.ndim == 1 else 1
    num_classes = logp.shape[class_dim]
    _check_weight("cross_entropy", weight, num_classes)
    if label_smoothing > 0.0:
        target = target * (1 - label_smoothing) + label_smoothing / num_classes
    terms = logp * target
    if weight is not None:
        shape = [1] * logp.ndim
        shape[class_dim] = num_classes
        terms = terms * weight.reshape(*shape)
    loss = -terms.sum(class_dim)
    return _reduce(loss, reduction)


# --------------------------------------------------------------------------- regression losses
def _same_shape(fn_name: str, input: Tensor, target: Any) -> Tensor:  # noqa: A002
    if not isinstance(target, Tensor):
        target = tensor(target, dtype=input.dtype, backend=input.backend)
    if target.shape != input.shape:
        raise ValueError(
            f"{fn_name}: input {input.shape} and target {target.shape} must have the same shape"
        )
    return target


def _legacy_reduction_keywords(loss: Any) -> Any:
    """PyTorch's deprecated ``size_average=``/``reduce=`` keywords on a functional loss
    (``F.nll_loss(out, y, size_average=False)``, as old examples write), turned into
    ``reduction=`` with PyTorch's warning and rule."""

    @functools.wraps(loss)
    def wrapped(*args: Any, size_average: Any = None, reduce: Any = None, **kwargs: Any) -> Any:
        if size_average is not None or reduce is not None:
            kwargs["reduction"] = _legacy_to_reduction(size_average, reduce)
        return loss(*args, **kwargs)

    return wrapped


def _legacy_to_reduction(size_average: Any, reduce: Any) -> str:
    reduction = "none" if reduce is False else "mean" if size_average in (None, True) else "sum"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{reduction}' "
        "instead.",
        UserWarning,
        stacklevel=3,
    )
    return reduction


@_legacy_reduction_keywords
def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    r"""$|x_i - y_i|$, averaged (or summed, or each term).

    Shape: input and target of the same shape.
    """
    _check_reduction("l1_loss", reduction)
    return _reduce((input - _same_shape("l1_loss", input, target)).abs(), reduction)


@_legacy_reduction_keywords
def smooth_l1_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    r"""$\tfrac12 d^2 / \beta$ where $|d| < \beta$, else $|d| - \tfrac12 \beta$, with $d = x - y$
    (an L1 loss with its kink rounded off; ``beta=0`` is the L1 loss).

    Shape: input and target of the same shape.
    """
    _check_reduction("smooth_l1_loss", reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = input - _same_shape("smooth_l1_loss", input, target)
    if beta == 0:
        return _reduce(d.abs(), reduction)
    return _reduce(where(d.abs() < beta, d * d * (0.5 / beta), d.abs() - 0.5 * beta), reduction)


def huber_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    reduction: str = "mean",
    delta: float = 1.0,
) -> Tensor:
    r"""$\tfrac12 d^2$ where $|d| < \delta$, else $\delta (|d| - \tfrac12 \delta)$, with $d = x - y$
    (``delta`` times ``smooth_l1_loss`` with ``beta=delta``).

    Shape: input and target of the same shape.
    """
    _check_reduction("huber_loss", reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    d = input - _same_shape("huber_loss", input, target)
    return _reduce(where(d.abs() < delta, d * d * 0.5, (d.abs() - 0.5 * delta) * delta), reduction)


@_legacy_reduction_keywords
def kl_div(
    input: Tensor,  # noqa: A002
    target: Tensor,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    r"""$y\,(\log y - x)$ elementwise for log-probabilities $x$ (``input``) and probabilities $y$
    (0 where $y = 0$); with ``log_target``, $e^{y} (y - x)$ for log-probability targets.

    ``reduction="batchmean"`` divides the sum by the batch size (the true KL divergence per
    sample); ``"mean"`` divides by the number of elements, as in PyTorch.

    Shape: input and target of the same shape.
    """
    _check_reduction("kl_div", reduction, ("mean", "sum", "none", "batchmean"))
    target = _same_shape("kl_div", input, target)
    if log_target:
        loss = target.exp() * (target - input)
    else:  # y log y is 0 at y = 0 (its limit), where log y is -inf
        positive = target > 0
        y_log_y = where(positive, target * where(positive, target, 1.0).log(), 0.0)
        loss = y_log_y - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction)


def bce_with_logits_weighted(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None,
    pos_weight: Tensor | None,
) -> Tensor:
    r"""$\ell = w\,[(1 - y)\,x + (1 + (p - 1)\,y)\,\mathrm{softplus}(-x)]$ for logits $x$, with
    ``pos_weight`` $p$ scaling the positive term $-y \log\sigma(x)$ (each term, unreduced)."""
    log_weight = 1.0 if pos_weight is None else (pos_weight - 1) * target + 1
    loss = (1 - target) * input + log_weight * SoftplusFunction.apply(-input)
    return loss if weight is None else loss * weight


# --------------------------------------------------------------------------- class indices
def _check_class_target(
    fn_name: str,
    input: Tensor,  # noqa: A002
    target: Any,
    labels: np.ndarray | None = None,
) -> np.ndarray:
    """Check ``target`` holds one class index per row of the (N, C) ``input``; return the
    indices as a host array (the losses pick ``input[n, target[n]]`` with it). ``labels``: the
    target already copied to the host, if the caller has it."""
    if not isinstance(target, Tensor) or target.dtype.is_floating_point:
        got = target.dtype if isinstance(target, Tensor) else type(target).__name__
        raise TypeError(
            f"{fn_name}: target must be a tensor of integer class indices (int64), got {got}; "
            "convert with .long()"
        )
    if input.ndim != 2 or target.shape != (input.shape[0],):
        raise ValueError(
            f"{fn_name}: expected an input of shape (N, C) and a target of shape (N,), got "
            f"input {input.shape} and target {target.shape}"
        )
    return check_labels(fn_name, target, input.shape[1], labels)


@_legacy_reduction_keywords
def nll_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    r"""$\ell_n = -w_{y_n}\,\mathrm{input}_{n, y_n}$ (input: log-probabilities); the mean is
    $\sum_n \ell_n / \sum_n w_{y_n}$. Targets equal to ``ignore_index`` are skipped.

    Shape: input $(N, C)$ (or $(N, C, d_1, \ldots)$, or unbatched $(C)$), target $(N)$ (or
    $(N, d_1, \ldots)$, or $()$) of class indices in $[0, C)$; output scalar, or the target's
    shape with ``reduction="none"``.
    """
    _check_loss_options("nll_loss", weight, reduction)
    _check_class_indices("nll_loss", target)
    labels = _plain_class_labels(input, target, weight, ignore_index)
    if labels is None:
        return class_index_loss("nll_loss", input, target, weight, ignore_index, reduction)
    labels = _check_class_target("nll_loss", input, target, labels)
    return NLLLossFunction.apply(input, target, reduction, labels)


@_legacy_reduction_keywords
def cross_entropy(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    r"""$\ell_n = -\log \mathrm{softmax}(x_n)_{y_n} = \log\sum_j e^{x_{n,j}} - x_{n, y_n}$ from raw
    scores (logits), averaged over $n$ by default; equal to ``nll_loss(log_softmax(input), target)``.
    In the plain case it is one node in the graph, whose backward is
    $\mathrm{softmax}(x) - \mathrm{onehot}(y)$.

    As in PyTorch: targets equal to ``ignore_index`` (-100 by default) are skipped; ``weight``
    (one per class) weights each sample's term, and the mean divides by the weights' sum;
    ``label_smoothing`` $\varepsilon$ mixes in $\varepsilon/C$ of the uniform distribution; a
    floating-point ``target`` of the input's shape holds class probabilities.

    Shape: input $(N, C)$ of logits, target $(N)$ of class indices in $[0, C)$; also
    $(N, C, d_1, \ldots)$ with $(N, d_1, \ldots)$, and unbatched $(C)$ with $()$.

    Raises:
        IndexError: a target outside $[0, C)$ (other than ``ignore_index``), naming it and its
            position.
    """
    _check_loss_options("cross_entropy", weight, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if (
        isinstance(target, Tensor)
        and target.dtype.is_floating_point
        and target.shape == input.shape
    ):
        logp = log_softmax(input, 0 if input.ndim == 1 else 1)
        return probability_target_loss(logp, target, weight, reduction, label_smoothing)
    _check_class_indices("cross_entropy", target, " (or class probabilities of the input's shape)")
    labels = (
        None if label_smoothing > 0.0 else _plain_class_labels(input, target, weight, ignore_index)
    )
    if labels is None:
        logp = log_softmax(input, 0 if input.ndim == 1 else 1)
        return class_index_loss(
            "cross_entropy", logp, target, weight, ignore_index, reduction, label_smoothing
        )
    labels = _check_class_target("cross_entropy", input, target, labels)
    return CrossEntropy.apply(input, target, reduction, labels)


def _check_loss_options(fn_name: str, weight: Any, reduction: str) -> None:
    if isinstance(weight, str):  # an old call, loss(input, target, "sum")
        raise TypeError(
            f"{fn_name}: the third argument is weight (as in PyTorch), got {weight!r}; pass the "
            f"reduction by name: {fn_name}(input, target, reduction={weight!r})"
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fn_name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _check_class_indices(fn_name: str, target: Any, hint: str = "") -> None:
    if not isinstance(target, Tensor) or target.dtype.is_floating_point:
        got = target.dtype if isinstance(target, Tensor) else type(target).__name__
        raise TypeError(
            f"{fn_name}: target must be a tensor of integer class indices (int64), got {got}; "
            f"convert with .long(){hint}"
        )


def _plain_class_labels(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Any,
    ignore_index: int,
) -> np.ndarray | None:
    """The target's labels on the host if the one-node Functions apply (an (N, C) input, no
    weight, no ignored target), else None."""
    if input.ndim != 2 or weight is not None or target.ndim != 1:
        return None
    # The labels are few: look for ignore_index on the host, where _check_classes checks them
    # next (one numpy comparison, not three tensor ops and a device-to-host .item(); and one
    # copy from a GPU for both).
    labels = host_labels(target)
    return None if np.equal(labels, ignore_index).any() else labels


@_legacy_reduction_keywords
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    r"""$\frac{1}{n}\sum_i (x_i - y_i)^2$ (or the sum, or each term).

    Shape: input and target of the same shape.
    """
    return input.mse_loss(target, reduction)  # the one implementation, in tensor_methods.py


def _check_same_shape(fn_name: str, input: Tensor, target: Any) -> Tensor:  # noqa: A002
    target = input._lift(target)
    if target.shape != input.shape:
        raise ValueError(
            f"{fn_name}: input {input.shape} and target {target.shape} must have the same shape"
        )
    return target.to(input.dtype)


@_legacy_reduction_keywords
def binary_cross_entropy(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
) -> Tensor:
    r"""$\ell = -w\,[y \log p + (1-y) \log(1-p)]$ for probabilities $p$ (each log clamped at -100).

    Shape: input and target of the same shape, target in $[0, 1]$; ``weight`` broadcasts to it.
    """
    _check_loss_options("binary_cross_entropy", weight, reduction)
    target = _check_same_shape("binary_cross_entropy", input, target)
    loss = BinaryCrossEntropy.apply(input, target)
    return _reduce(loss if weight is None else loss * weight, reduction)


@_legacy_reduction_keywords
def binary_cross_entropy_with_logits(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    r"""``binary_cross_entropy(sigmoid(x), y)`` computed stably from logits $x$:
    $\max(x, 0) - x y + \log(1 + e^{-|x|})$. With ``pos_weight`` $p$ (one per class, broadcast
    along the last dimension) the positive term is weighted:
    $(1 - y)\,x + (1 + (p - 1) y)\,\mathrm{softplus}(-x)$.

    Shape: input and target of the same shape.
    """
    _check_loss_options("binary_cross_entropy_with_logits", weight, reduction)
    target = _check_same_shape("binary_cross_entropy_with_logits", input, target)
    if weight is None and pos_weight is None:
        loss = BinaryCrossEntropyWithLogits.apply(input, target)
    else:
        loss = bce_with_logits_weighted(input, target, weight, pos_weight)
    return _reduce(loss, reduction)


# --------------------------------------------------------------------------- modules
def _legacy_reduction(init: Any) -> Any:
    @functools.wraps(init)
    def wrapped(
        self: Any, *args: Any, size_average: Any = None, reduce: Any = None, **kwargs: Any
    ) -> None:
        if size_average is not None or reduce is not None:
            warnings.warn(
                "size_average and reduce args will be deprecated, please use reduction='"
                + ("none" if reduce is False else "mean" if size_average in (None, True) else "sum")
                + "' instead.",
                UserWarning,
                stacklevel=2,
            )
            kwargs["reduction"] = (
                "none" if reduce is False else "mean" if size_average in (None, True) else "sum"
            )
        init(self, *args, **kwargs)

    return wrapped


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    # PyTorch compatibility (issue 25): every loss takes the deprecated size_average= and
    # reduce= keywords, turned into reduction= with PyTorch's warning and rule.
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _legacy_reduction(cls.__dict__["__init__"])  # type: ignore[method-assign]

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


_Loss.__init__ = _legacy_reduction(_Loss.__init__)  # type: ignore[method-assign]


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    r"""$-\log \mathrm{softmax}(x)_y$ from logits $(N, C, \ldots)$ and class indices $(N, \ldots)$
    or class probabilities; see ``F.cross_entropy``."""

    def __init__(
        self,
        weight: Tensor | None = None,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(weight, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return cross_entropy(
            input, target, self.weight, ignore_index=self.ignore_index,
            reduction=self.reduction, label_smoothing=self.label_smoothing,
        )  # fmt: skip


class NLLLoss(_WeightedLoss):
    r"""$-w_{y_n}\,\mathrm{input}_{n, y_n}$ from log-probabilities; see ``F.nll_loss``."""

    def __init__(
        self, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean"
    ) -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return nll_loss(
            input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction
        )


class MSELoss(_Loss):
    r"""$\frac{1}{n}\sum_i (x_i - y_i)^2$; see ``F.mse_loss``."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    r"""$\frac{1}{n}\sum_i |x_i - y_i|$; see ``F.l1_loss``."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return l1_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    r"""Quadratic below ``beta``, linear above; see ``F.smooth_l1_loss``."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_Loss):
    r"""Quadratic below ``delta``, linear above; see ``F.huber_loss``."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return huber_loss(input, target, self.reduction, self.delta)


class KLDivLoss(_Loss):
    r"""$y (\log y - x)$ for log-probabilities $x$; see ``F.kl_div``."""

    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return kl_div(input, target, self.reduction, self.log_target)


class BCELoss(_WeightedLoss):
    r"""$-w\,[y \log p + (1-y)\log(1-p)]$ from probabilities; see ``F.binary_cross_entropy``."""

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    r"""Binary cross entropy from logits, computed stably, with optional ``pos_weight`` (one per
    class, > 1 counts positives more); see ``F.binary_cross_entropy_with_logits``."""

    def __init__(
        self,
        weight: Tensor | None = None,
        reduction: str = "mean",
        pos_weight: Tensor | None = None,
    ) -> None:
        super().__init__(weight, reduction)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )
