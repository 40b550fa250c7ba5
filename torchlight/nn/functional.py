r"""Stateless neural-network operations, as in ``torch.nn.functional`` (import it as ``F``).

A face only: every name is defined in its topic's file and re-exported here, so
``F.cross_entropy`` is :func:`torchlight.nn.loss.cross_entropy`, ``F.conv2d`` is
:func:`torchlight.nn.conv.conv2d`, ``F.softmax`` is :func:`torchlight.ops.losses.softmax`. No
topic file imports this one (each imports the files it uses), so there is no import circle.

Example:
    >>> import torchlight as tl
    >>> import torchlight.nn.functional as F
    >>> logits = tl.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> F.cross_entropy(logits, tl.tensor([0]))
    tensor(0.1698, grad_fn=<CrossEntropy>)
"""

from __future__ import annotations

from torchlight.nn.activation import (
    elu,
    gelu,
    hardtanh,
    leaky_relu,
    logsigmoid,
    relu,
    relu6,
    sigmoid,
    silu,
    softplus,
    tanh,
)
from torchlight.nn.attention import scaled_dot_product_attention
from torchlight.nn.conv import conv1d, conv2d, conv_transpose2d
from torchlight.nn.dropout import dropout, dropout2d
from torchlight.nn.linear import bilinear
from torchlight.nn.loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from torchlight.nn.normalization import batch_norm, group_norm, layer_norm, normalize
from torchlight.nn.padding import pad
from torchlight.nn.pixelshuffle import pixel_shuffle, pixel_unshuffle
from torchlight.nn.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
)
from torchlight.nn.sparse import embedding, one_hot
from torchlight.nn.upsampling import interpolate
from torchlight.ops.linear import linear
from torchlight.ops.losses import log_softmax, softmax

__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "avg_pool1d", "avg_pool2d", "batch_norm",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "conv1d", "conv2d",
    "conv_transpose2d", "cross_entropy", "dropout", "dropout2d", "elu", "embedding", "gelu",
    "group_norm", "huber_loss", "kl_div", "l1_loss", "layer_norm", "leaky_relu", "linear",
    "log_softmax", "max_pool1d", "max_pool2d", "mse_loss", "nll_loss", "one_hot", "pad",
    "pixel_shuffle", "pixel_unshuffle", "relu", "scaled_dot_product_attention", "sigmoid", "silu",
    "smooth_l1_loss", "softmax", "softplus", "tanh",
]  # fmt: skip
__all__ += [  # issue 37
    "adaptive_max_pool2d", "bilinear", "hardtanh", "interpolate", "logsigmoid", "normalize",
    "relu6",
]  # fmt: skip
