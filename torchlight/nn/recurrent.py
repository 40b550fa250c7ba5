r"""Recurrent layers: RNN, LSTM and GRU (multi-layer, ``batch_first``, initial states), as in
PyTorch, and a small LSTM language model.

A recurrent layer reads a sequence one step at a time, carrying a hidden state $h_t$ from
step to step. Each step is a few matmuls and elementwise ops, so autograd differentiates the
unrolled loop ("backpropagation through time") with no new backward. The input projection
$x_t W_{ih}^T + b_{ih}$ does not depend on $h$, so it is computed for all steps in one matmul
before the loop; only $h_{t-1} W_{hh}^T$ has to wait for the previous step.

Parameter names, shapes, gate order and initialization ($\mathcal{U}(-1/\sqrt H, 1/\sqrt H)$)
are PyTorch's, so a PyTorch ``state_dict`` loads as is.

Example:
    >>> import torchlight as tl
    >>> lstm = tl.nn.LSTM(input_size=4, hidden_size=8, num_layers=2, batch_first=True)
    >>> output, (h_n, c_n) = lstm(tl.randn(3, 5, 4))
    >>> output.shape, h_n.shape
    ((3, 5, 8), (2, 3, 8))
"""

from __future__ import annotations

import math
from typing import Any

from torchlight.creation import empty, stack, zeros
from torchlight.nn import functional as F
from torchlight.nn import init
from torchlight.nn.layers import Embedding, Linear
from torchlight.nn.module import Module, Parameter
from torchlight.tensor import Tensor

__all__ = ["GRU", "LSTM", "RNN", "LSTMLanguageModel", "gru_cell", "lstm_cell", "rnn_cell"]

State = Tensor | tuple[Tensor, Tensor]


def rnn_cell(x_proj: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None, relu: bool) -> Tensor:
    r"""$h_t = \tanh(x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh})$ (or ReLU), given the
    input projection ``x_proj`` $= x_t W_{ih}^T + b_{ih}$."""
    pre = x_proj + F.linear(h, w_hh, b_hh)
    return pre.relu() if relu else pre.tanh()


def lstm_cell(
    x_proj: Tensor, state: tuple[Tensor, Tensor], w_hh: Tensor, b_hh: Tensor | None
) -> tuple[Tensor, Tensor]:
    r"""One LSTM step. The four gates, in PyTorch's order:
    $i = \sigma(\cdot)$ (input), $f = \sigma(\cdot)$ (forget), $g = \tanh(\cdot)$ (cell candidate),
    $o = \sigma(\cdot)$ (output); then $c_t = f \odot c_{t-1} + i \odot g$,
    $h_t = o \odot \tanh(c_t)$. The cell state $c$ is updated by addition, which is why its
    gradient survives many steps (the forget gate, not a matrix power, scales it).
    """
    h, c = state
    size = h.shape[-1]
    gates = x_proj + F.linear(h, w_hh, b_hh)
    i = gates[..., 0:size].sigmoid()
    f = gates[..., size : 2 * size].sigmoid()
    g = gates[..., 2 * size : 3 * size].tanh()
    o = gates[..., 3 * size : 4 * size].sigmoid()
    c = f * c + i * g
    return o * c.tanh(), c


def gru_cell(x_proj: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    r"""One GRU step, PyTorch's gate order: $r = \sigma(\cdot)$ (reset), $z = \sigma(\cdot)$
    (update), $n = \tanh(x W_{in}^T + b_{in} + r \odot (h W_{hn}^T + b_{hn}))$,
    $h_t = (1 - z) \odot n + z \odot h_{t-1}$."""
    size = h.shape[-1]
    hidden = F.linear(h, w_hh, b_hh)
    r = (x_proj[..., 0:size] + hidden[..., 0:size]).sigmoid()
    z = (x_proj[..., size : 2 * size] + hidden[..., size : 2 * size]).sigmoid()
    n = (x_proj[..., 2 * size :] + r * hidden[..., 2 * size :]).tanh()
    return (1.0 - z) * n + z * h


class _RNNBase(Module):
    _gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if bidirectional:
            raise NotImplementedError(
                f"{type(self).__name__}: bidirectional=True is not implemented; run a second "
                "layer on the reversed sequence (x.flip) and concatenate the outputs instead"
            )
        if num_layers < 1 or hidden_size < 1 or not 0.0 <= dropout <= 1.0:
            raise ValueError(
                f"{type(self).__name__}: expected num_layers >= 1, hidden_size >= 1 and dropout "
                f"in [0, 1]; got {num_layers}, {hidden_size}, {dropout}"
            )
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, dropout
        self.bidirectional = False
        rows = self._gates * hidden_size
        for layer in range(num_layers):
            inputs = input_size if layer == 0 else hidden_size
            setattr(self, f"weight_ih_l{layer}", Parameter(empty(rows, inputs, dtype=dtype)))
            setattr(self, f"weight_hh_l{layer}", Parameter(empty(rows, hidden_size, dtype=dtype)))
            if bias:
                setattr(self, f"bias_ih_l{layer}", Parameter(empty(rows, dtype=dtype)))
                setattr(self, f"bias_hh_l{layer}", Parameter(empty(rows, dtype=dtype)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialization: every weight and bias from U(-1/sqrt(H), 1/sqrt(H))."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for param in self.parameters():
            init.uniform_(param, -bound, bound)

    def _layer(self, layer: int) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        get = self._parameters.get
        return (
            self._parameters[f"weight_ih_l{layer}"],
            self._parameters[f"weight_hh_l{layer}"],
            get(f"bias_ih_l{layer}"),
            get(f"bias_hh_l{layer}"),
        )

    def _step(self, x_proj: Tensor, state: Any, w_hh: Tensor, b_hh: Tensor | None) -> Any:
        raise NotImplementedError

    def _zeros(self, batch: int, like: Tensor) -> Tensor:
        return zeros(
            self.num_layers, batch, self.hidden_size, dtype=like.dtype, backend=like.backend
        )

    def _check_state(self, h: Tensor, batch: int, name: str) -> None:
        expected = (self.num_layers, batch, self.hidden_size)
        if tuple(h.shape) != expected:
            raise ValueError(f"{self!r}: expected {name} of shape {expected}, got {h.shape}")

    def _run(self, x: Tensor, states: list[Any]) -> tuple[Tensor, list[Any]]:
        """x: (L, N, input_size); states: one per layer. Returns (L, N, H) and the last states."""
        finals = []
        for layer in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = self._layer(layer)
            x_proj = F.linear(x, w_ih, b_ih)  # every step's input projection in one matmul
            state, outputs = states[layer], []
            for t in range(x.shape[0]):
                state = self._step(x_proj[t], state, w_hh, b_hh)
                outputs.append(state[0] if isinstance(state, tuple) else state)
            finals.append(state)
            x = stack(outputs)
            if self.dropout > 0.0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout)
        return x, finals

    def _prepare(self, x: Tensor) -> tuple[Tensor, bool]:
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            order = "(N, L, H_in)" if self.batch_first else "(L, N, H_in)"
            raise ValueError(
                f"{self!r}: expected input of shape {order} or (L, H_in) with H_in = "
                f"{self.input_size}, got {x.shape}"
            )
        batched = x.ndim == 3
        if not batched:
            x = x.unsqueeze(1)
        elif self.batch_first:
            x = x.transpose(0, 1)
        return x, batched

    def _finish(self, out: Tensor, batched: bool) -> Tensor:
        if not batched:
            return out.squeeze(1)
        return out.transpose(0, 1) if self.batch_first else out

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        return text


def _unbatched_state(h: Tensor | None, batched: bool) -> Tensor | None:
    return h if h is None or batched else h.unsqueeze(1)


class RNN(_RNNBase):
    r"""$h_t = \tanh(x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh})$, per layer
    (``nonlinearity="relu"`` for ReLU).

    Shape: input $(L, N, H_{in})$ ($(N, L, H_{in})$ with ``batch_first``, or unbatched
    $(L, H_{in})$); ``hx`` $(\text{num\_layers}, N, H)$; returns output $(L, N, H)$ (every
    step of the last layer) and $h_n$ $(\text{num\_layers}, N, H)$ (the last step of each layer).
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype
        )
        self.nonlinearity = nonlinearity

    def _step(self, x_proj: Tensor, state: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
        return rnn_cell(x_proj, state, w_hh, b_hh, self.nonlinearity == "relu")

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:  # noqa: A002
        x, batched = self._prepare(input)
        hx = _unbatched_state(hx, batched)
        h0 = self._zeros(x.shape[1], x) if hx is None else hx
        self._check_state(h0, x.shape[1], "hx")
        out, finals = self._run(x, [h0[layer] for layer in range(self.num_layers)])
        h_n = stack(finals)
        return self._finish(out, batched), h_n if batched else h_n.squeeze(1)


class LSTM(_RNNBase):
    r"""Long short-term memory, per layer; see ``lstm_cell`` for the gates.

    Shape: input $(L, N, H_{in})$ ($(N, L, H_{in})$ with ``batch_first``, or $(L, H_{in})$);
    ``hx`` = $(h_0, c_0)$, each $(\text{num\_layers}, N, H)$; returns output $(L, N, H)$ and
    $(h_n, c_n)$.
    """

    _gates = 4

    def _step(
        self, x_proj: Tensor, state: tuple[Tensor, Tensor], w_hh: Tensor, b_hh: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        return lstm_cell(x_proj, state, w_hh, b_hh)

    def forward(
        self,
        input: Tensor,  # noqa: A002
        hx: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        x, batched = self._prepare(input)
        if hx is None:
            h0 = c0 = self._zeros(x.shape[1], x)
        else:
            if not isinstance(hx, tuple) or len(hx) != 2:
                raise TypeError(f"{self!r}: hx must be a pair (h_0, c_0), got {type(hx).__name__}")
            h0, c0 = (t if batched else t.unsqueeze(1) for t in hx)
        self._check_state(h0, x.shape[1], "h_0")
        self._check_state(c0, x.shape[1], "c_0")
        states = [(h0[layer], c0[layer]) for layer in range(self.num_layers)]
        out, finals = self._run(x, states)
        h_n, c_n = stack([h for h, _ in finals]), stack([c for _, c in finals])
        if not batched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish(out, batched), (h_n, c_n)


class GRU(RNN):
    r"""Gated recurrent unit, per layer; see ``gru_cell`` for the gates.

    Shape: as ``RNN``.
    """

    _gates = 3

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            "tanh",
            bias,
            batch_first,
            dropout,
            bidirectional,
            dtype,
        )

    def _step(self, x_proj: Tensor, state: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
        return gru_cell(x_proj, state, w_hh, b_hh)


class LSTMLanguageModel(Module):
    r"""Next-token logits from an LSTM: embedding $\to$ LSTM $\to$ linear.

    Shape: token indices $(N, L)$ $\to$ logits $(N, L, V)$.

    Example:
        >>> import torchlight as tl
        >>> model = tl.nn.LSTMLanguageModel(vocab_size=10, embedding_dim=8, hidden_size=16)
        >>> model(tl.tensor([[1, 2, 3]])).shape
        (1, 3, 10)
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 64,
        hidden_size: int = 256,
        num_layers: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.vocab_size, self.block_size = vocab_size, None
        self.embedding = Embedding(vocab_size, embedding_dim)
        self.lstm = LSTM(embedding_dim, hidden_size, num_layers, batch_first=True, dropout=dropout)
        self.head = Linear(hidden_size, vocab_size)

    def forward(self, idx: Tensor) -> Tensor:
        out, _ = self.lstm(self.embedding(idx))
        return self.head(out)
