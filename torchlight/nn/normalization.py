r"""Normalization layers: BatchNorm1d/2d, LayerNorm, GroupNorm, as in PyTorch.

Each normalizes with a mean and a variance, $\hat x = (x - \mu) / \sqrt{\sigma^2 + \epsilon}$,
then scales and shifts, $y = \gamma \hat x + \beta$; they differ only in *which* elements share
$\mu$ and $\sigma^2$:

- BatchNorm: every sample and position of one channel (so the batch matters; in ``eval()``
  running averages seen in training are used instead),
- LayerNorm: all features of one sample (one token, in a transformer),
- GroupNorm: the channels of one group in one sample.

LayerNorm is one Function (:class:`~torchlight.ops.normalization.LayerNormFunction`: it runs
twice per transformer block, so one graph node instead of ten pays off, and its backward is the
formula derived on paper); BatchNorm is a composition of tensor ops that autograd
differentiates, GroupNorm a layer norm of each group.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn
    >>> nn.LayerNorm(4)(tl.tensor([[1.0, 2.0, 3.0, 4.0]])).sum().item() < 1e-6
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torchlight.autograd import no_grad
from torchlight.creation import ones, zeros
from torchlight.dtypes import check_same_dtype
from torchlight.nn.module import Module, Parameter
from torchlight.ops.normalization import LayerNormFunction
from torchlight.tensor import Tensor

__all__ = [
    "BatchNorm1d", "BatchNorm2d", "GroupNorm", "LayerNorm", "batch_norm", "group_norm",
    "layer_norm", "normalize",
]  # fmt: skip


def layer_norm(
    input: Tensor,  # noqa: A002 - PyTorch's argument name
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    r"""$y = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}\gamma + \beta$ over the last dimensions.

    Shape: input $(*, \text{normalized\_shape})$; weight and bias ``normalized_shape``; output
    the input's shape.

    Example:
        >>> import torchlight as tl
        >>> F = tl.nn.functional
        >>> F.layer_norm(tl.tensor([[0.0, 2.0]]), 2)
        tensor([[-1.0000,  1.0000]])
    """
    check_same_dtype("layer_norm", input, weight, bias)
    shape = _as_shape(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape) :]) != shape or input.ndim < len(shape):
        raise ValueError(
            f"layer_norm: normalized_shape is {shape}, so the input must end in those dimensions; "
            f"got an input of shape {input.shape}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise ValueError(f"layer_norm: {name} must have shape {shape}, got {t.shape}")
    return LayerNormFunction.apply(input, len(shape), eps, weight, bias)


def _as_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, int) else tuple(int(n) for n in shape)


def _per_channel(t: Tensor, ndim: int) -> Tensor:
    """A (C,) tensor shaped (1, C, 1, ...) to broadcast against an (N, C, ...) input."""
    return t.reshape(1, t.shape[0], *([1] * (ndim - 2)))


def batch_norm(
    input: Tensor,  # noqa: A002
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    r"""$y = \frac{x - \mu_c}{\sqrt{\sigma_c^2 + \epsilon}}\gamma_c + \beta_c$ per channel $c$.

    In training, $\mu_c, \sigma_c^2$ are the batch's (over every dimension but the channel; the
    biased variance), and the running statistics move towards them:
    $\hat\mu \leftarrow (1 - m)\hat\mu + m\mu$, $\hat\sigma^2 \leftarrow (1 - m)\hat\sigma^2 +
    m\frac{n}{n-1}\sigma^2$ (the unbiased variance, as in PyTorch). Otherwise the running
    statistics are used, so one sample's output does not depend on the rest of its batch.

    Shape: input $(N, C)$ or $(N, C, *)$; the statistics, weight and bias $(C)$.
    """
    check_same_dtype("batch_norm", input, weight, bias, running_mean, running_var)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of shape (N, C, *), got {input.shape}")
    dims = (0, *range(2, input.ndim))
    if training:
        count = input.numel() // input.shape[1]
        if count < 2:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, got an input "
                f"of shape {input.shape}; use a larger batch, or call .eval()"
            )
        mean = input.mean(dims, keepdim=True)
        var = ((input - mean) ** 2).mean(dims, keepdim=True)
        if running_mean is not None and running_var is not None:
            with no_grad():  # the running statistics are buffers, not part of the graph
                running_mean.mul_(1.0 - momentum).add_(mean.reshape(-1).detach() * momentum)
                unbiased = var.reshape(-1).detach() * (count / (count - 1))
                running_var.mul_(1.0 - momentum).add_(unbiased * momentum)
    elif running_mean is None or running_var is None:
        raise ValueError("batch_norm: in eval mode it needs running_mean and running_var")
    else:
        mean, var = _per_channel(running_mean, input.ndim), _per_channel(running_var, input.ndim)
    out = (input - mean) / (var + eps).sqrt()
    if weight is not None:
        out = out * _per_channel(weight, input.ndim)
    if bias is not None:
        out = out + _per_channel(bias, input.ndim)
    return out


def group_norm(
    input: Tensor,  # noqa: A002
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    r"""Layer norm over each group of $C/G$ channels (and all positions) of each sample, then a
    per-channel $\gamma_c, \beta_c$.

    Shape: input $(N, C, *)$ with $C$ divisible by ``num_groups``; weight and bias $(C)$.
    """
    check_same_dtype("group_norm", input, weight, bias)
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise ValueError(
            f"group_norm: expected an input of shape (N, C, *) with C divisible by num_groups="
            f"{num_groups}, got {input.shape}"
        )
    n = input.shape[0]
    grouped = input.reshape(n, num_groups, -1)  # each row: one group of one sample
    out = LayerNormFunction.apply(grouped, 1, eps).reshape(input.shape)
    if weight is not None:
        out = out * _per_channel(weight, input.ndim)
    if bias is not None:
        out = out + _per_channel(bias, input.ndim)
    return out


class _BatchNorm(Module):
    _expected = "(N, C)"

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype))
            self.bias = Parameter(zeros(num_features, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", zeros((), dtype="int64"))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self._place(device)  # PyTorch's device= keyword

    def _check(self, x: Tensor) -> None:
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        if x.ndim < 2 or x.shape[1] != self.num_features:
            raise ValueError(
                f"{self!r}: expected input of shape {self._expected} with C = "
                f"{self.num_features}, got input of shape {tuple(x.shape)}"
            )
        use_batch = self.training or self.running_mean is None
        momentum = self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative moving average, as PyTorch's momentum=None
                momentum = 1.0 / float(self.num_batches_tracked.item())
        return batch_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            use_batch,
            momentum,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    r"""Batch normalization per feature: $y = \frac{x - \mu}{\sqrt{\sigma^2+\epsilon}}\gamma + \beta$;
    see ``batch_norm``. ``eval()`` switches to the running statistics.

    Shape: input $(N, C)$ or $(N, C, L)$, output the same.

    Example:
        >>> import torchlight as tl
        >>> bn = tl.nn.BatchNorm1d(2)
        >>> y = bn(tl.tensor([[1.0, 10.0], [3.0, 30.0]]))
        >>> bn.running_mean
        tensor([0.2000, 2.0000])
    """

    _expected = "(N, C) or (N, C, L)"

    def _check(self, x: Tensor) -> None:
        if x.ndim not in (2, 3):
            raise ValueError(
                f"{self!r}: expected a 2-D or 3-D input {self._expected}, got {x.shape}"
            )


class BatchNorm2d(_BatchNorm):
    r"""Batch normalization per channel of images; see ``batch_norm``.

    Shape: input $(N, C, H, W)$, output the same.
    """

    _expected = "(N, C, H, W)"

    def _check(self, x: Tensor) -> None:
        if x.ndim != 4:
            raise ValueError(f"{self!r}: expected a 4-D input {self._expected}, got {x.shape}")


class LayerNorm(Module):
    r"""$y = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}\gamma + \beta$ over the last dimensions
    (``normalized_shape``), $\gamma = 1$, $\beta = 0$ at first.

    Shape: input $(*, \text{normalized\_shape})$, output the same.

    Example:
        >>> import torchlight as tl
        >>> tl.nn.LayerNorm(8)(tl.randn(2, 5, 8)).shape
        (2, 5, 8)
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.normalized_shape, self.eps = _as_shape(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(zeros(*self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self._place(device)  # PyTorch's device= keyword

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class GroupNorm(Module):
    r"""Normalize each group of ``num_channels / num_groups`` channels of each sample; see
    ``group_norm``.

    Shape: input $(N, C, *)$, output the same.
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(
                f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                f"({num_groups})"
            )
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups,
            num_channels,
            eps,
            affine,
        )
        if affine:
            self.weight = Parameter(ones(num_channels, dtype=dtype))
            self.bias = Parameter(zeros(num_channels, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self._place(device)  # PyTorch's device= keyword

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(
                f"{self!r}: expected input of shape (N, {self.num_channels}, *), got {x.shape}"
            )
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:  # noqa: A002
    r"""$x / \max(\lVert x \rVert_p, \epsilon)$ along ``dim`` (``F.normalize``): unit vectors,
    with $\epsilon$ keeping a zero vector from dividing by zero.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.nn.functional import normalize
        >>> normalize(tl.tensor([[3.0, 4.0]]))
        tensor([[0.6000, 0.8000]])
    """
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)
