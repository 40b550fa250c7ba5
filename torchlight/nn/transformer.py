r"""Transformers: PyTorch's ``TransformerEncoderLayer``, ``TransformerEncoder``,
``TransformerDecoderLayer``, ``TransformerDecoder`` and the whole encoder-decoder
``Transformer`` (Vaswani et al.; PyTorch's parameter names, defaults and ``state_dict`` keys),
a decoder-only ``GPTBlock``, positional embeddings (learned and sinusoidal) and a small ``GPT``
with tied weights.

A transformer block alternates two sublayers, each wrapped in a residual connection and a
LayerNorm: self-attention (tokens exchange information) and a two-layer MLP (each token on its
own). The residual $x + f(x)$ gives the gradient a path around every sublayer, so deep stacks
still train. GPT uses "pre-norm" blocks, $x + f(\mathrm{LN}(x))$, and a causal mask, so that
position $t$ predicts token $t+1$ from tokens $\le t$ only.

Example:
    >>> import torchlight as tl
    >>> gpt = tl.nn.GPT(vocab_size=65, block_size=16, d_model=32, nhead=4, num_layers=2)
    >>> gpt(tl.tensor([[1, 2, 3]])).shape      # (batch, time, vocabulary) logits
    (1, 3, 65)
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from torchlight import dtypes
from torchlight.autograd import no_grad
from torchlight.creation import empty, full, tensor
from torchlight.nn import init
from torchlight.nn.activation import gelu, relu
from torchlight.nn.attention import MultiheadAttention
from torchlight.nn.container import ModuleList
from torchlight.nn.dropout import Dropout
from torchlight.nn.linear import Linear
from torchlight.nn.module import Module, Parameter
from torchlight.nn.normalization import LayerNorm
from torchlight.nn.sparse import Embedding
from torchlight.tensor import Tensor

__all__ = [
    "GPT", "GPTBlock", "LearnedPositionalEmbedding", "SinusoidalPositionalEncoding", "Transformer",
    "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
    "TransformerEncoderLayer",
]  # fmt: skip


def _gelu_tanh(x: Tensor) -> Tensor:
    """GELU in its tanh form, as GPT-2 uses it (:func:`torchlight.nn.activation.gelu`)."""
    return gelu(x, approximate="tanh")


def _activation(name: str) -> Any:
    if name == "relu":
        return relu
    if name == "gelu":
        return _gelu_tanh
    raise ValueError(f"activation must be 'relu' or 'gelu' (tanh form), got {name!r}")


class TransformerEncoderLayer(Module):
    r"""Self-attention and a feed-forward network, each with a residual connection and LayerNorm
    (PyTorch's names, defaults and parameter names):

    post-norm (default): $x \leftarrow \mathrm{LN}_1(x + \mathrm{SA}(x))$,
    $x \leftarrow \mathrm{LN}_2(x + \mathrm{FF}(x))$; with ``norm_first``:
    $x \leftarrow x + \mathrm{SA}(\mathrm{LN}_1(x))$, $x \leftarrow x + \mathrm{FF}(\mathrm{LN}_2(x))$;
    $\mathrm{FF}(x) = W_2\,\mathrm{act}(W_1 x + b_1) + b_2$.

    Shape: src $(S, N, E)$ ($(N, S, E)$ with ``batch_first``), output the same.

    Example:
        >>> import torchlight as tl
        >>> layer = tl.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        >>> layer(tl.randn(3, 5, 8)).shape
        (3, 5, 8)
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype=dtype)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.norm_first, self.activation_name = norm_first, activation
        self.activation = _activation(activation)
        self._place(device)  # PyTorch's device= keyword

    def _sa(self, x: Tensor, mask: Tensor | None, padding: Tensor | None, causal: bool) -> Tensor:
        out, _ = self.self_attn(
            x, x, x, padding, need_weights=False, attn_mask=mask, is_causal=causal
        )
        return self.dropout1(out)

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff(self.norm2(x))
        x = self.norm1(x + self._sa(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff(x))


def _refuse(kwargs: dict[str, Any], where: str) -> None:
    if kwargs:
        raise TypeError(
            f"{where} got keyword argument(s) torchlight does not support: {', '.join(sorted(kwargs))}"
        )


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer``, then ``norm`` (if given)."""

    def __init__(
        self, encoder_layer: Module, num_layers: int, norm: Module | None = None, enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self, src: Tensor, mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:  # fmt: skip
        x = src
        for layer in self.layers:
            x = layer(
                x,
                src_mask=mask,
                src_key_padding_mask=src_key_padding_mask,
                is_causal=bool(is_causal),
            )
        return self.norm(x) if self.norm is not None else x


class TransformerDecoderLayer(Module):
    """Self-attention over ``tgt``, attention over ``memory``, feed-forward; each with a residual
    and LayerNorm (after it, or before it with ``norm_first``), as PyTorch's."""

    def __init__(
        self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
        activation: str = "relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
        norm_first: bool = False, bias: bool = True, device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first, dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype=dtype)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2, self.dropout3 = (
            Dropout(dropout),
            Dropout(dropout),
            Dropout(dropout),
        )
        self.norm_first, self.activation = norm_first, _activation(activation)
        self._place(device)  # PyTorch's device= keyword

    def _sa(self, x: Tensor, mask: Any, padding: Any, causal: bool) -> Tensor:
        out, _ = self.self_attn(
            x, x, x, padding, need_weights=False, attn_mask=mask, is_causal=causal
        )
        return self.dropout1(out)

    def _mha(self, x: Tensor, mem: Tensor, mask: Any, padding: Any, causal: bool) -> Tensor:
        out, _ = self.multihead_attn(
            x, mem, mem, padding, need_weights=False, attn_mask=mask, is_causal=causal
        )
        return self.dropout2(out)

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(
        self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False, memory_is_causal: bool = False,
    ) -> Tensor:  # fmt: skip
        x = tgt
        if self.norm_first:
            x = x + self._sa(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha(
                self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
            )
            return x + self._ff(self.norm3(x))
        x = self.norm1(x + self._sa(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(
            x + self._mha(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal)
        )
        return self.norm3(x + self._ff(x))


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer``, then ``norm`` (if given)."""

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None, memory_is_causal: bool = False,
    ) -> Tensor:  # fmt: skip
        x = tgt
        for layer in self.layers:
            x = layer(
                x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                bool(tgt_is_causal), memory_is_causal,
            )  # fmt: skip
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """The encoder-decoder of "Attention Is All You Need", as ``torch.nn.Transformer`` (its
    matrices Xavier-uniform initialized, as PyTorch's ``_reset_parameters``)."""

    def __init__(
        self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
        dim_feedforward: int = 2048, dropout: float = 0.1, activation: str = "relu",
        custom_encoder: Module | None = None, custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5, batch_first: bool = False, norm_first: bool = False,
        bias: bool = True, device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        common = dict(
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            bias=bias,
            dtype=dtype,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(
                d_model, nhead, dim_feedforward, dropout, activation, **common
            )
            norm = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            dlayer = TransformerDecoderLayer(
                d_model, nhead, dim_feedforward, dropout, activation, **common
            )
            self.decoder = TransformerDecoder(
                dlayer,
                num_decoder_layers,
                LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype),
            )
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        self._place(device)  # PyTorch's device= keyword

    def forward(
        self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None, tgt_is_causal: bool | None = None, memory_is_causal: bool = False,
    ) -> Tensor:  # fmt: skip
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )  # fmt: skip

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """A float mask: ``-inf`` above the diagonal, 0 on and below it."""
        return full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(diagonal=1)


class GPTBlock(Module):
    r"""A decoder-only (GPT-2 style) block: $x \leftarrow x + \mathrm{MHA}(\mathrm{LN}_1(x))$
    with a causal mask, then $x \leftarrow x + \mathrm{MLP}(\mathrm{LN}_2(x))$, the MLP
    $d \to 4d \to d$ with GELU.

    Shape: $(N, T, d)$ (batch first) $\to$ the same.
    """

    def __init__(self, d_model: int, nhead: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiheadAttention(d_model, nhead, dropout, batch_first=True)
        self.ln2 = LayerNorm(d_model)
        self.fc = Linear(d_model, 4 * d_model)
        self.proj = Linear(4 * d_model, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        h = self.ln1(x)
        attended, _ = self.attn(h, h, h, need_weights=False, is_causal=True)
        x = x + self.dropout(attended)
        return x + self.dropout(self.proj(_gelu_tanh(self.fc(self.ln2(x)))))


class LearnedPositionalEmbedding(Module):
    r"""One learned vector per position: $\mathrm{out}[t] = P[t]$, $P$ of shape
    (max_len, d), $P \sim \mathcal{N}(0, 0.02^2)$ (GPT-2's scale).

    Shape: $(N, T, d)$ input $\to$ the $(T, d)$ position vectors, which broadcast when added.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = max_len, d_model
        self.weight = Parameter(empty(max_len, d_model))
        init.normal_(self.weight, std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        length = x.shape[1]
        if length > self.num_embeddings:
            raise ValueError(
                f"{self!r}: a sequence of {length} positions is longer than max_len "
                f"{self.num_embeddings}; crop it to the last {self.num_embeddings} tokens"
            )
        return self.weight[:length]

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class SinusoidalPositionalEncoding(Module):
    r"""Fixed positions ("Attention is all you need"): $P[t, 2i] = \sin(t / 10000^{2i/d})$,
    $P[t, 2i+1] = \cos(t / 10000^{2i/d})$. Nothing to learn; kept as a buffer.

    Shape: $(N, T, d)$ input $\to$ the $(T, d)$ position vectors.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        position = np.arange(max_len)[:, None]
        frequency = np.exp(np.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = np.zeros((max_len, d_model))
        table[:, 0::2] = np.sin(position * frequency)
        table[:, 1::2] = np.cos(position * frequency)[:, : d_model // 2]
        self.register_buffer("pe", tensor(table, dtype=dtypes.float64))
        self.max_len = max_len

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[1] > self.max_len:
            raise ValueError(
                f"{self!r}: a sequence of {x.shape[1]} positions is longer than max_len "
                f"{self.max_len}"
            )
        return self._buffers["pe"][: x.shape[1]].to(x.dtype)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}"


class GPT(Module):
    r"""A decoder-only transformer language model: token embedding + position embedding,
    ``num_layers`` GPTBlocks, a final LayerNorm and a linear head whose weight *is* the token
    embedding's (weight tying: one $(V, d)$ matrix reads tokens in and scores them out).

    Shape: token indices $(N, T)$ with $T \le$ ``block_size`` $\to$ logits $(N, T, V)$.

    Example:
        >>> import torchlight as tl
        >>> gpt = tl.nn.GPT(vocab_size=10, block_size=8, d_model=16, nhead=2, num_layers=1)
        >>> gpt.head.weight is gpt.token_embedding.weight
        True
    """

    def __init__(
        self,
        vocab_size: int,
        block_size: int = 64,
        d_model: int = 128,
        nhead: int = 4,
        num_layers: int = 4,
        dropout: float = 0.0,
        positional: str = "learned",
        tie_weights: bool = True,
    ) -> None:
        super().__init__()
        self.vocab_size, self.block_size = vocab_size, block_size
        self.token_embedding = Embedding(vocab_size, d_model)
        init.normal_(self.token_embedding.weight, std=0.02)
        if positional == "learned":
            self.position: Module = LearnedPositionalEmbedding(block_size, d_model)
        elif positional == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(block_size, d_model)
        else:
            raise ValueError(f"positional must be 'learned' or 'sinusoidal', got {positional!r}")
        self.dropout = Dropout(dropout)
        for i in range(num_layers):
            self.add_module(f"block{i}", GPTBlock(d_model, nhead, dropout))
        self.num_layers = num_layers
        self.ln_f = LayerNorm(d_model)
        self.head = Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.token_embedding.weight
        with no_grad():  # GPT-2: residual projections scaled down by sqrt(2 * layers)
            for i in range(num_layers):
                block = self._modules[f"block{i}"]
                for layer in (block.attn.out_proj, block.proj):
                    init.normal_(layer.weight, std=0.02 / math.sqrt(2 * num_layers))

    def forward(self, idx: Tensor) -> Tensor:
        if idx.ndim != 2 or idx.shape[1] > self.block_size:
            raise ValueError(
                f"{self!r}: expected token indices of shape (N, T) with T <= block_size "
                f"{self.block_size}, got {idx.shape}"
            )
        x = self.dropout(self.token_embedding(idx) + self.position(idx))
        for i in range(self.num_layers):
            x = self._modules[f"block{i}"](x)
        return self.head(self.ln_f(x))

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, block_size={self.block_size}"
