r"""Recurrent layers: RNN, LSTM and GRU (multi-layer, ``batch_first``, initial states), as in
PyTorch, and a small LSTM language model.

A recurrent layer reads a sequence one step at a time, carrying a hidden state $h_t$ from
step to step. Each step is a few matmuls and elementwise ops, so autograd differentiates the
unrolled loop ("backpropagation through time"); the LSTM's gate arithmetic is one Function
(``LSTMCellFunction``, the formulas of its backward derived on paper) since it runs at every
step. The GRU's gates are each their own pair of matmuls, $x_t W_{ih,k}^T + h_{t-1}
W_{hh,k}^T$, with the weights cut into gate blocks once per call: slicing one big $(N, 3H)$
product at every step would cost, in backward, a zero-filled gradient per slice.

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
from typing import Any, NamedTuple

from torchlight.autograd import Context, Function, is_grad_enabled
from torchlight.creation import cat, empty, stack, zeros
from torchlight.nn import functional as F
from torchlight.nn import init
from torchlight.nn.layers import Embedding, Linear
from torchlight.nn.module import Module, Parameter
from torchlight.tensor import Tensor

__all__ = [
    "GRU", "LSTM", "RNN", "GateWeights", "LSTMCellFunction", "LSTMLanguageModel", "gru_cell", "lstm_cell", "rnn_cell",
]  # fmt: skip

State = Tensor | tuple[Tensor, Tensor]


class GateWeights(NamedTuple):
    """One layer's weights cut into one block per gate: ``w_ih[k]`` is rows
    ``k*H : (k+1)*H`` of ``weight_ih_l*`` (gate k's $W_{ih}$), and so on; biases may be None."""

    w_ih: list[Tensor]
    w_hh: list[Tensor]
    b_ih: list[Tensor | None]
    b_hh: list[Tensor | None]

    def input_part(self, x: Tensor, k: int) -> Tensor:
        r"""$x W_{ih,k}^T + b_{ih,k}$."""
        return F.linear(x, self.w_ih[k], self.b_ih[k])

    def hidden_part(self, h: Tensor, k: int) -> Tensor:
        r"""$h W_{hh,k}^T + b_{hh,k}$."""
        return F.linear(h, self.w_hh[k], self.b_hh[k])

    def gate(self, x: Tensor, h: Tensor, k: int) -> Tensor:
        r"""Gate k's pre-activation $x W_{ih,k}^T + b_{ih,k} + h W_{hh,k}^T + b_{hh,k}$."""
        return self.input_part(x, k) + self.hidden_part(h, k)


def rnn_cell(x: Tensor, h: Tensor, weights: GateWeights, relu: bool = False) -> Tensor:
    r"""$h_t = \tanh(x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh})$ (or ReLU)."""
    pre = weights.gate(x, h, 0)
    return pre.relu() if relu else pre.tanh()


class LSTMCellFunction(Function):
    r"""One LSTM step after the matmuls: from the gate pre-activations $z$ $(N, 4H)$ and
    $c_{t-1}$, the gates in PyTorch's order $i = \sigma(z_i)$ (input), $f = \sigma(z_f)$
    (forget), $g = \tanh(z_g)$ (cell candidate), $o = \sigma(z_o)$ (output), then
    $c_t = f \odot c_{t-1} + i \odot g$ and $h_t = o \odot \tanh(c_t)$; returns
    $(h_t, c_t)$ stacked, shape $(2, N, H)$.

    Backward, with $G_h, G_c$ the two halves of ``grad_output``:
    $\delta_c = G_c + G_h\, o\,(1 - \tanh^2 c_t)$;
    $\partial L/\partial z = [\delta_c g\, i(1-i),\ \delta_c c_{t-1} f(1-f),\
    \delta_c i\,(1-g^2),\ G_h \tanh(c_t)\, o(1-o)]$;
    $\partial L/\partial c_{t-1} = \delta_c f$. The cell state is carried by addition, which
    is why its gradient survives many steps: the forget gate, not a matrix power, scales it.
    One node instead of about fifteen: the LSTM runs it at every time step.
    """

    @staticmethod
    def forward(ctx: Context, z: Tensor, c_prev: Tensor) -> Tensor:
        i, f, g, o, c = _lstm_gates(z, c_prev)
        tanh_c = c.tanh()
        ctx.save_for_backward(i, f, g, o, c_prev, tanh_c, z)
        return stack([o * tanh_c, c])

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor]:
        i, f, g, o, c_prev, tanh_c, z = ctx.saved_tensors
        if is_grad_enabled():  # create_graph: the gates again, as recorded math in z and c_prev
            i, f, g, o, c = _lstm_gates(z, c_prev)
            tanh_c = c.tanh()
        grad_h, grad_c = grad_output[0], grad_output[1]
        delta_c = grad_c + grad_h * o * (1.0 - tanh_c * tanh_c)
        grad_z = cat(
            [
                delta_c * g * i * (1.0 - i),
                delta_c * c_prev * f * (1.0 - f),
                delta_c * i * (1.0 - g * g),
                grad_h * tanh_c * o * (1.0 - o),
            ],
            dim=-1,
        )
        return grad_z, delta_c * f


def _lstm_gates(z: Tensor, c_prev: Tensor) -> tuple[Tensor, ...]:
    """The gates $i, f, g, o$ from the pre-activations $z$, and $c_t = f c_{t-1} + i g$."""
    size = c_prev.shape[-1]
    i, f = z[..., :size].sigmoid(), z[..., size : 2 * size].sigmoid()
    g, o = z[..., 2 * size : 3 * size].tanh(), z[..., 3 * size :].sigmoid()
    return i, f, g, o, f * c_prev + i * g


def lstm_cell(
    x: Tensor, state: tuple[Tensor, Tensor], weights: GateWeights
) -> tuple[Tensor, Tensor]:
    r"""One LSTM step: $z = x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh}$ (all four gates
    in one matmul pair), then ``LSTMCellFunction``. Returns $(h_t, c_t)$."""
    h, c = state
    hc = LSTMCellFunction.apply(weights.gate(x, h, 0), c)
    return hc[0], hc[1]


def gru_cell(x: Tensor, h: Tensor, weights: GateWeights) -> Tensor:
    r"""One GRU step, PyTorch's gate order: $r = \sigma(\cdot)$ (reset), $z = \sigma(\cdot)$
    (update), $n = \tanh(x W_{in}^T + b_{in} + r \odot (h W_{hn}^T + b_{hn}))$,
    $h_t = (1 - z) \odot n + z \odot h_{t-1}$."""
    r = weights.gate(x, h, 0).sigmoid()
    z = weights.gate(x, h, 1).sigmoid()
    n = (weights.input_part(x, 2) + r * weights.hidden_part(h, 2)).tanh()
    return (1.0 - z) * n + z * h


class _RNNBase(Module):
    _gates = 1  # gate blocks in each weight
    _split_gates = False  # whether each gate gets its own matmul (GRU: its n gate needs it)

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

    def _layer(self, layer: int) -> GateWeights:
        """The layer's weights cut per gate, once per forward: inside the time loop each gate
        is its own matmul, so no step slices (and, in backward, re-assembles) a gate block."""
        size, get = self.hidden_size, self._parameters.get

        def parts(name: str) -> list[Any]:
            whole = get(f"{name}_l{layer}")
            if whole is None or not self._split_gates:
                return [whole]
            return [whole[k * size : (k + 1) * size] for k in range(self._gates)]

        return GateWeights(
            parts("weight_ih"), parts("weight_hh"), parts("bias_ih"), parts("bias_hh")
        )

    def _step(self, x: Tensor, state: Any, weights: GateWeights) -> Any:
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
            weights = self._layer(layer)
            state, outputs = states[layer], []
            for t in range(x.shape[0]):
                state = self._step(x[t], state, weights)
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


class _HiddenStateRNN(_RNNBase):
    """What RNN and GRU share: the state is one tensor ``hx``, not LSTM's pair."""

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:  # noqa: A002
        x, batched = self._prepare(input)
        hx = _unbatched_state(hx, batched)
        h0 = self._zeros(x.shape[1], x) if hx is None else hx
        self._check_state(h0, x.shape[1], "hx")
        out, finals = self._run(x, [h0[layer] for layer in range(self.num_layers)])
        h_n = stack(finals)
        return self._finish(out, batched), h_n if batched else h_n.squeeze(1)


class RNN(_HiddenStateRNN):
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

    def _step(self, x: Tensor, state: Tensor, weights: GateWeights) -> Tensor:
        return rnn_cell(x, state, weights, self.nonlinearity == "relu")


class LSTM(_RNNBase):
    r"""Long short-term memory, per layer; see ``lstm_cell`` for the gates.

    Shape: input $(L, N, H_{in})$ ($(N, L, H_{in})$ with ``batch_first``, or $(L, H_{in})$);
    ``hx`` = $(h_0, c_0)$, each $(\text{num\_layers}, N, H)$; returns output $(L, N, H)$ and
    $(h_n, c_n)$.
    """

    _gates = 4

    def _step(
        self, x: Tensor, state: tuple[Tensor, Tensor], weights: GateWeights
    ) -> tuple[Tensor, Tensor]:
        return lstm_cell(x, state, weights)

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


class GRU(_HiddenStateRNN):
    r"""Gated recurrent unit, per layer; see ``gru_cell`` for the gates.

    Shape: as ``RNN``.
    """

    _gates = 3
    _split_gates = True

    def _step(self, x: Tensor, state: Tensor, weights: GateWeights) -> Tensor:
        return gru_cell(x, state, weights)


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
