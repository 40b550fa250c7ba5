r"""Attention: ``scaled_dot_product_attention`` and ``MultiheadAttention``, as in PyTorch.

$$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^T}{\sqrt{d}} + M\right) V$$

Each query row is compared with every key row (a dot product, scaled by $1/\sqrt d$ so the
scores do not grow with the dimension $d$ and saturate the softmax); the softmax turns one row
of scores into weights that sum to 1; the output is that weighted average of the value rows.
The mask $M$ is $-\infty$ where a query may not look (a causal mask hides the future), added
*before* the softmax so those weights are exactly 0. It is all composed of matmul, softmax and
elementwise ops, so autograd differentiates it with no new backward to write.

Example:
    >>> import torchlight as tl
    >>> F = tl.nn.functional
    >>> q = k = v = tl.randn(2, 5, 8)          # (batch, sequence, features)
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
    (2, 5, 8)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from torchlight.creation import empty, tensor, zeros
from torchlight.nn import init
from torchlight.nn.dropout import dropout
from torchlight.nn.linear import Linear
from torchlight.nn.module import Module, Parameter
from torchlight.ops.linear import linear
from torchlight.ops.losses import softmax
from torchlight.tensor import Tensor

__all__ = ["MultiheadAttention", "causal_mask", "scaled_dot_product_attention"]


def causal_mask(length: int, like: Tensor, source_length: int | None = None) -> Tensor:
    r"""The additive causal mask $(L, S)$: 0 on and below the diagonal, $-\infty$ above it, so
    query $i$ attends to keys $j \le i$ only (aligned at the top left, as in PyTorch). Built on
    the host, in ``like``'s dtype and backend (it is a constant: no gradient)."""
    columns = length if source_length is None else source_length
    upper = np.triu(np.ones((length, columns), dtype=bool), k=1)
    values = np.where(upper, -np.inf, 0.0).astype(like.dtype.numpy)
    return tensor(values, backend=like.backend)


def _additive(mask: Tensor, like: Tensor) -> Tensor:
    """A boolean mask (True: may attend, PyTorch's meaning) as 0 / -inf; a float mask as is."""
    if mask.dtype.is_floating_point:
        return mask
    hidden = np.where(np.asarray(mask.numpy(), dtype=bool), 0.0, -np.inf)
    return tensor(hidden.astype(like.dtype.numpy), backend=like.backend)


def attention_weights(
    query: Tensor,
    key: Tensor,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    r"""$\mathrm{softmax}(Q K^T s + M)$: the weights of each query over the keys.

    Shape: query $(*, L, E)$, key $(*, S, E)$, output $(*, L, S)$.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query * scale) @ key.transpose(-2, -1)  # scaling Q is cheaper than the (L, S) scores
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
        scores = scores + causal_mask(scores.shape[-2], scores, scores.shape[-1])
    elif attn_mask is not None:
        scores = scores + _additive(attn_mask, scores)
    return softmax(scores, dim=-1)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    r"""$\mathrm{softmax}(Q K^T / \sqrt{E} + M)\, V$, with dropout on the weights.

    Args:
        attn_mask: boolean (True where a query may attend, as in PyTorch) or float (added to
            the scores); broadcasts to $(*, L, S)$.
        dropout_p: drop each weight with this probability (always, as in PyTorch: pass 0.0 in
            evaluation).
        is_causal: hide the future: query $i$ sees keys $j \le i$.
        scale: instead of $1/\sqrt{E}$.

    Shape: query $(*, L, E)$, key $(*, S, E)$, value $(*, S, E_v)$, output $(*, L, E_v)$.

    Example:
        >>> import torchlight as tl
        >>> q = tl.tensor([[[1.0, 0.0], [0.0, 1.0]]])
        >>> out = tl.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        >>> out[0, 0].tolist()                  # the first position only sees itself
        [1.0, 0.0]
    """
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ValueError(
            "scaled_dot_product_attention: query, key and value need at least 2 dimensions "
            f"(*, L, E); got {query.shape}, {key.shape}, {value.shape}"
        )
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(
            "scaled_dot_product_attention: expected query (*, L, E), key (*, S, E), value "
            f"(*, S, Ev); got query {query.shape}, key {key.shape}, value {value.shape}"
        )
    weights = attention_weights(query, key, attn_mask, is_causal, scale)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return weights @ value


class MultiheadAttention(Module):
    r"""$\mathrm{MultiHead}(Q, K, V) = [\mathrm{head}_1, \ldots, \mathrm{head}_h] W^O$ with
    $\mathrm{head}_i = \mathrm{Attention}(Q W^Q_i, K W^K_i, V W^V_i)$.

    The three input projections live in one ``in_proj_weight`` $(3E, E)$ (queries, keys, values
    stacked, as in PyTorch, so PyTorch's state dicts load); ``out_proj`` is a Linear $(E, E)$.
    Each of the ``num_heads`` heads works on $E/h$ of the features.

    Shape: query $(L, N, E)$, key and value $(S, N, E)$ ($(N, L, E)$ with ``batch_first``);
    returns the output $(L, N, E)$ and, with ``need_weights``, the attention weights $(N, L, S)$
    (averaged over heads) or $(N, h, L, S)$.

    Example:
        >>> import torchlight as tl
        >>> mha = tl.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> x = tl.randn(3, 5, 8)
        >>> out, weights = mha(x, x, x)
        >>> out.shape, weights.shape
        ((3, 5, 8), (3, 5, 5))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(
                f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                f"({num_heads})"
            )
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim, self.batch_first = embed_dim // num_heads, batch_first
        self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, dtype=dtype))
        if bias:
            self.in_proj_bias = Parameter(zeros(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        init.xavier_uniform_(self.in_proj_weight)  # PyTorch's initialization
        if bias:
            init.zeros_(self.out_proj.bias)
        self._place(device)  # PyTorch's device= keyword

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if query.ndim != 3 or key.ndim != 3 or value.ndim != 3 or query.shape[-1] != self.embed_dim:
            order = "(N, L, E)" if self.batch_first else "(L, N, E)"
            raise ValueError(
                f"{self!r}: expected query, key and value of shape {order} with E = "
                f"{self.embed_dim}; got {query.shape}, {key.shape}, {value.shape}"
            )
        if not self.batch_first:  # work in (N, L, E)
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        n, length, e = query.shape
        h, d = self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        q, k, v = (
            linear(x, w[i * e : (i + 1) * e], None if b is None else b[i * e : (i + 1) * e])
            for i, x in enumerate((query, key, value))
        )
        # (N, L, E) -> (N, h, L, d): each head a separate batch of attention
        q, k, v = (t.reshape(n, t.shape[1], h, d).transpose(1, 2) for t in (q, k, v))
        mask = None if attn_mask is None else _additive(attn_mask, q)
        if key_padding_mask is not None:  # (N, S), True: padding (PyTorch's meaning here)
            padding = np.where(np.asarray(key_padding_mask.numpy(), dtype=bool), -np.inf, 0.0)
            padding_mask = tensor(
                padding.reshape(n, 1, 1, -1).astype(q.dtype.numpy), backend=q.backend
            )
            mask = padding_mask if mask is None else mask + padding_mask
        weights = attention_weights(q, k, mask, is_causal and mask is None)
        if self.training and self.dropout > 0.0:
            weights = dropout(weights, self.dropout)
        out = (weights @ v).transpose(1, 2).reshape(n, length, e)
        out = self.out_proj(out)
        if not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, weights.mean(1) if average_attn_weights else weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"
