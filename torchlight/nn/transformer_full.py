r"""PyTorch's whole encoder-decoder ``nn.Transformer`` (Vaswani et al.): ``TransformerEncoder``
(a stack of ``TransformerEncoderLayer`` copies), ``TransformerDecoderLayer`` (self-attention,
attention over the encoder's output ``memory``, feed-forward), ``TransformerDecoder`` and
``Transformer``, with PyTorch's parameter names, defaults and ``state_dict`` keys.

Example:
    >>> import torchlight as tl
    >>> model = tl.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
    ...                           dim_feedforward=16, dropout=0.0)
    >>> model(tl.randn(5, 3, 8), tl.randn(4, 3, 8)).shape
    (4, 3, 8)
"""

from __future__ import annotations

import copy
from typing import Any

from torchlight.creation import full
from torchlight.nn import init
from torchlight.nn.attention import MultiheadAttention
from torchlight.nn.container import ModuleList
from torchlight.nn.layers import Dropout, Linear
from torchlight.nn.module import Module
from torchlight.nn.normalization import LayerNorm
from torchlight.nn.transformer import TransformerEncoderLayer, _activation
from torchlight.tensor import Tensor

__all__ = ["Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder"]


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
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2, self.dropout3 = (
            Dropout(dropout),
            Dropout(dropout),
            Dropout(dropout),
        )
        self.norm_first, self.activation = norm_first, _activation(activation)

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
