r"""Stateless neural-network operations, as in ``torch.nn.functional`` (import it as ``F``).

Example:
    >>> import torchlight as tl
    >>> import torchlight.nn.functional as F
    >>> logits = tl.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> F.cross_entropy(logits, tl.tensor([0]))
    tensor(0.1698, grad_fn=<CrossEntropy>)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from torchlight import dtypes
from torchlight.creation import eye, rand
from torchlight.ops.convolution import Conv2dFunction, IntOrPair, as_pair, output_size
from torchlight.ops.linear import linear
from torchlight.ops.losses import (
    BinaryCrossEntropy,
    BinaryCrossEntropyWithLogits,
    CrossEntropy,
    NLLLossFunction,
    log_softmax,
    softmax,
)
from torchlight.tensor import Tensor

__all__ = [
    "avg_pool2d", "binary_cross_entropy", "binary_cross_entropy_with_logits", "conv1d", "conv2d",
    "cross_entropy", "dropout", "linear", "log_softmax", "max_pool2d", "mse_loss", "nll_loss",
    "one_hot", "relu", "sigmoid", "softmax", "tanh",
]  # fmt: skip

_REDUCTIONS = ("mean", "sum", "none")


def _reduce(loss: Tensor, reduction: str, fn_name: str) -> Tensor:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fn_name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


# --------------------------------------------------------------------------- activations
def relu(input: Tensor) -> Tensor:  # noqa: A002 - PyTorch's argument name
    r"""$\max(x, 0)$ elementwise."""
    return input.relu()


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    r"""$1 / (1 + e^{-x})$ elementwise."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:  # noqa: A002
    r"""$\tanh x$ elementwise."""
    return input.tanh()


# --------------------------------------------------------------------------- layers
def conv2d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair | str = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
) -> Tensor:
    r"""$\mathrm{out}[n, o] = b_o + \sum_c W[o, c] \star x[n, c]$ (cross-correlation, as in PyTorch).

    ``padding`` may also be ``"same"`` or ``"valid"``; ``dilation`` and ``groups`` as in PyTorch
    (those cases are composed in ``nn/conv_general.py``).

    Shape: input $(N, C, H, W)$, weight $(O, C, k_h, k_w)$, bias $(O)$, output $(N, O, H_o, W_o)$
    with $H_o = \lfloor (H + 2p_h - k_h) / s_h \rfloor + 1$ (likewise $W_o$).

    Example:
        >>> import torchlight as tl
        >>> x = tl.ones(1, 1, 3, 3)
        >>> tl.nn.functional.conv2d(x, tl.ones(1, 1, 2, 2)).shape
        (1, 1, 2, 2)
    """
    from torchlight.dtypes import check_same_dtype  # PyTorch compatibility (issue 25)

    check_same_dtype("conv2d", input, weight, bias)
    if isinstance(padding, str) or dilation != 1 or groups != 1:
        return conv_general.conv2d(input, weight, bias, stride, padding, dilation, groups)
    stride_, padding_ = as_pair(stride, "stride"), as_pair(padding, "padding")
    if input.ndim != 4 or weight.ndim != 4 or input.shape[1] != weight.shape[1]:
        raise ValueError(
            f"conv2d: expected an input of shape (N, {weight.shape[1] if weight.ndim == 4 else 'C'}, H, W) "
            f"for a weight of shape {weight.shape} (out_channels, in_channels, kH, kW); got an input "
            f"of shape {input.shape}"
        )
    if min(stride_) < 1 or min(padding_) < 0:
        raise ValueError(
            f"conv2d: stride must be >= 1 and padding >= 0, got stride={stride} padding={padding}"
        )
    for axis, name in ((0, "height"), (1, "width")):
        size, k = input.shape[2 + axis], weight.shape[2 + axis]
        if output_size(size, k, stride_[axis], padding_[axis]) < 1:
            raise ValueError(
                f"conv2d: the input {name} {size} (+ 2 * padding {padding_[axis]}) is smaller than "
                f"the kernel {name} {k}; pad the input or use a smaller kernel"
            )
    return Conv2dFunction.apply(input, weight, bias, stride_, padding_)


def conv1d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int = 1,
    padding: int | str = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Tensor:
    r"""$\mathrm{out}[n, o, t] = b_o + \sum_{c, k} W[o, c, k]\, x_{\text{pad}}[n, c, s t + k]$.

    A 1-D convolution is a 2-D one on an image of height 1. ``padding="same"``/``"valid"``,
    ``dilation`` and ``groups`` as in PyTorch.

    Shape: input $(N, C, L)$, weight $(O, C, k)$, output $(N, O, \lfloor (L + 2p - k)/s \rfloor + 1)$.
    """
    from torchlight.dtypes import check_same_dtype  # PyTorch compatibility (issue 25)

    check_same_dtype("conv1d", input, weight, bias)
    if input.ndim != 3 or weight.ndim != 3 or input.shape[1] != weight.shape[1] * groups:
        raise ValueError(
            f"conv1d: expected an input of shape (N, C, L) with C = weight.shape[1] * groups for a "
            f"weight of shape {weight.shape} (out_channels, in_channels / groups, kernel); got "
            f"{input.shape}"
        )
    padding_: IntOrPair | str = padding if isinstance(padding, str) else (0, int(padding))
    out = conv2d(
        input.unsqueeze(2),
        weight.unsqueeze(2),
        bias,
        (1, int(stride)),
        padding_,
        (1, int(dilation)),
        groups,
    )
    return out.squeeze(2)


def dropout(input: Tensor, p: float = 0.5, training: bool = True) -> Tensor:  # noqa: A002
    r"""Zero each element with probability $p$ and scale the rest by $1/(1-p)$ (identity when not
    ``training``), so the expected value is unchanged. Seeded by ``tl.manual_seed``.

    Shape: any; the output has the input's shape.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = rand(*input.shape, dtype=input.dtype, backend=input.backend) >= p
    return input * (keep.to(input.dtype) * (1.0 / (1.0 - p)))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    r"""$\mathrm{out}[\ldots, k] = [\mathrm{tensor}[\ldots] = k]$, as int64.

    Shape: $(*)$ of class indices -> $(*, \text{num\_classes})$.

    Example:
        >>> import torchlight as tl
        >>> tl.nn.functional.one_hot(tl.tensor([0, 2]), 3)
        tensor([[1, 0, 0],
                [0, 0, 1]])
    """
    if tensor.dtype.is_floating_point:
        raise TypeError(f"one_hot needs integer class indices, got {tensor.dtype}; use .long()")
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    _check_classes("one_hot", tensor, num_classes)
    return eye(num_classes, dtype=dtypes.int64, backend=tensor.backend)[tensor]


# --------------------------------------------------------------------------- losses
def _host_labels(target: Tensor) -> np.ndarray:
    """The target's class indices as a host numpy array (a view on numpy, a copy from a GPU)."""
    return np.asarray(target.backend.to_numpy(target.storage))


def _check_classes(
    fn_name: str, target: Tensor, num_classes: int, labels: np.ndarray | None = None
) -> np.ndarray:
    """The labels as a host numpy array (``labels``, if the caller has them already), after
    checking each is a class index in [0, C)."""
    # The labels are few: check them on the host (a view on numpy, a small copy from a GPU).
    # Out-of-range labels must not reach the indexing, where -1 would silently mean the last class.
    labels = _host_labels(target) if labels is None else labels
    if labels.size == 0:
        return labels
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= num_classes:
        bad = low if low < 0 else high
        where = tuple(int(i) for i in np.argwhere(labels == bad)[0])
        position = where[0] if len(where) == 1 else where
        raise IndexError(
            f"{fn_name}: target {bad} (at position {position}) is out of bounds: with "
            f"{num_classes} classes, class indices must be in 0..{num_classes - 1}"
        )
    return labels


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
    return _check_classes(fn_name, target, input.shape[1], labels)


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
    labels = _host_labels(target)
    return None if np.equal(labels, ignore_index).any() else labels


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    r"""$\frac{1}{n}\sum_i (x_i - y_i)^2$ (or the sum, or each term).

    Shape: input and target of the same shape.
    """
    return input.mse_loss(target, reduction)  # the one implementation, in tensor_ops.py


def _check_same_shape(fn_name: str, input: Tensor, target: Any) -> Tensor:  # noqa: A002
    target = input._lift(target)
    if target.shape != input.shape:
        raise ValueError(
            f"{fn_name}: input {input.shape} and target {target.shape} must have the same shape"
        )
    return target.to(input.dtype)


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
    return _reduce(loss if weight is None else loss * weight, reduction, "binary_cross_entropy")


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
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


# --------------------------------------------------------------------------- more of PyTorch's
# functional names, defined in nn/activation.py, loss.py, conv_general.py, padding.py, pooling.py
# and sparse.py (imported last: those modules use this one)
from torchlight.nn import conv_general  # noqa: E402
from torchlight.nn.activation import elu, gelu, leaky_relu, silu, softplus  # noqa: E402
from torchlight.nn.conv_general import conv_transpose2d  # noqa: E402
from torchlight.nn.loss import (  # noqa: E402
    bce_with_logits_weighted,
    class_index_loss,
    huber_loss,
    kl_div,
    l1_loss,
    probability_target_loss,
    smooth_l1_loss,
)
from torchlight.nn.padding import pad  # noqa: E402
from torchlight.nn.pooling import (  # noqa: E402
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
)
from torchlight.nn.sparse import embedding  # noqa: E402

__all__ += [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "avg_pool1d", "conv_transpose2d", "elu",
    "embedding", "gelu", "huber_loss", "kl_div", "l1_loss", "leaky_relu", "max_pool1d", "pad",
    "silu", "smooth_l1_loss", "softplus",
]  # fmt: skip

# --------------------------------------------------------------------------- sequence models
# Normalization and attention live in their own files (nn/normalization.py,
# nn/attention.py); imported last, since those files use this module.
from torchlight.nn.attention import scaled_dot_product_attention  # noqa: E402
from torchlight.nn.normalization import batch_norm, dropout2d, group_norm, layer_norm  # noqa: E402

__all__ += [
    "batch_norm", "dropout2d", "group_norm", "layer_norm", "scaled_dot_product_attention",
]  # fmt: skip

# ---- PyTorch compatibility (issue 25)
from torchlight.nn.pixelshuffle import pixel_shuffle, pixel_unshuffle  # noqa: E402

__all__ += ["pixel_shuffle", "pixel_unshuffle"]
