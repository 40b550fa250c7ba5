r"""Recurrent layers: RNN, LSTM and GRU (multi-layer, bidirectional, ``batch_first``, initial
states), one step of each (RNNCell, LSTMCell, GRUCell), as in PyTorch, and a small LSTM
language model.

A recurrent layer reads a sequence one step at a time, carrying a hidden state $h_t$ from
step to step: $h_t = \text{cell}(x_t W_{ih}^T + b_{ih},\ h_{t-1} W_{hh}^T + b_{hh},\ h_{t-1})$.
Two things make it fast, both textbook (and what PyTorch does):

1. The input half of every gate does not depend on $h$, so it is one matmul for the whole
   sequence, ``F.linear(x, W_ih, b_ih)`` of shape $(L, N, \text{gates} \cdot H)$, before the
   loop; each step only multiplies $h_{t-1} W_{hh}^T$ (all gates at once) and applies the gates.
2. ``Recurrence`` runs the loop as one Function: backpropagation through time written out. Its
   backward walks the steps in reverse with each cell's own derivative (``LSTMStep.backward``
   and so on, derived on paper), collects the gate gradients $\partial L/\partial z_t$ of all
   steps, and then $\partial L/\partial W_{hh} = \sum_t (\partial L/\partial z_t)^T h_{t-1}$ is
   *one* matmul of the stacked steps, not $L$ thin ones; the gradient of the projected inputs
   is the same stack. (Recorded step by step, each $x_t$ = ``xp[t]`` would send back a
   zero-filled gradient of the whole sequence: $L^2$ work.) ``nn.LSTM`` runs the same loop
   with an ``LSTMStep`` (``ops.recurrent.lstm``), unless the backend overrides it with a fused
   kernel (``ops.recurrent.FusedLSTM``, the same math, checked equal).

Parameter names (``weight_ih_l0``, ``weight_hh_l1_reverse``, ...), shapes, gate order and
initialization ($\mathcal{U}(-1/\sqrt H, 1/\sqrt H)$) are PyTorch's, so a PyTorch
``state_dict`` loads as is.

Example:
    >>> import torchlight as tl
    >>> lstm = tl.nn.LSTM(input_size=4, hidden_size=8, num_layers=2, batch_first=True)
    >>> output, (h_n, c_n) = lstm(tl.randn(3, 5, 4))
    >>> output.shape, h_n.shape
    ((3, 5, 8), (2, 3, 8))
    >>> gru = tl.nn.GRU(4, 8, bidirectional=True)
    >>> output, h_n = gru(tl.randn(5, 3, 4))
    >>> output.shape, h_n.shape
    ((5, 3, 16), (2, 3, 8))
"""

from __future__ import annotations

import math
from typing import Any

from torchlight.creation import cat, empty, stack, zeros
from torchlight.dtypes import check_same_dtype
from torchlight.nn import init
from torchlight.nn.dropout import dropout
from torchlight.nn.linear import Linear
from torchlight.nn.module import Module, Parameter
from torchlight.nn.sparse import Embedding
from torchlight.ops.linear import linear
from torchlight.ops.recurrent import GRUStep, LSTMStep, Recurrence, RNNStep, State, Step, lstm
from torchlight.tensor import Tensor

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "LSTMLanguageModel", "RNN", "RNNCell"]


class _RNNBase(Module):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if num_layers < 1 or hidden_size < 1 or not 0.0 <= dropout <= 1.0:
            raise ValueError(
                f"{type(self).__name__}: expected num_layers >= 1, hidden_size >= 1 and dropout "
                f"in [0, 1]; got {num_layers}, {hidden_size}, {dropout}"
            )
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, dropout
        self.bidirectional = bool(bidirectional)
        self.num_directions = 2 if self.bidirectional else 1
        rows = self._step().gates * hidden_size
        for layer in range(num_layers):
            # layer k > 0 reads the outputs of both directions of layer k - 1, side by side
            inputs = input_size if layer == 0 else hidden_size * self.num_directions
            for sfx in self._suffixes(layer):
                setattr(self, f"weight_ih{sfx}", Parameter(empty(rows, inputs, dtype=dtype)))
                setattr(self, f"weight_hh{sfx}", Parameter(empty(rows, hidden_size, dtype=dtype)))
                if bias:
                    setattr(self, f"bias_ih{sfx}", Parameter(empty(rows, dtype=dtype)))
                    setattr(self, f"bias_hh{sfx}", Parameter(empty(rows, dtype=dtype)))
        self.reset_parameters()
        self._place(device)  # PyTorch's device= keyword

    def _suffixes(self, layer: int) -> list[str]:
        """PyTorch's parameter name endings: ``_l0``, and ``_l0_reverse`` when bidirectional."""
        return [f"_l{layer}", f"_l{layer}_reverse"][: self.num_directions]

    def reset_parameters(self) -> None:
        """PyTorch's initialization: every weight and bias from U(-1/sqrt(H), 1/sqrt(H))."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for param in self.parameters():
            init.uniform_(param, -bound, bound)

    def _step(self) -> Step:
        raise NotImplementedError

    def _zeros(self, batch: int, like: Tensor) -> Tensor:
        shape = (self.num_layers * self.num_directions, batch, self.hidden_size)
        return zeros(*shape, dtype=like.dtype, backend=like.backend)

    def _check_state(self, h: Tensor, x: Tensor, name: str) -> None:
        if h.dtype != x.dtype:  # PyTorch refuses too; promoting would change the layer's dtype
            raise TypeError(
                f"{self!r}: expected {name} of the input's dtype {x.dtype}, got {h.dtype}; "
                f"convert it with .to({x.dtype})"
            )
        batch = x.shape[1]
        expected = (self.num_layers * self.num_directions, batch, self.hidden_size)
        if tuple(h.shape) != expected:
            layers = "num_layers * 2" if self.bidirectional else "num_layers"
            raise ValueError(
                f"{self!r}: expected {name} of shape ({layers}, N, hidden_size) = {expected}, "
                f"got {h.shape}"
            )

    def _run(self, x: Tensor, states: list[State]) -> tuple[Tensor, list[State]]:
        """x: (L, N, input_size); states: one per layer and direction, PyTorch's order
        (layer k's forward direction is ``2k``, its reverse ``2k + 1``, when bidirectional).
        Returns the last layer's outputs (L, N, num_directions * H) and the final states."""
        finals: list[State] = []
        step, get = self._step(), self._parameters.get
        for layer in range(self.num_layers):
            outputs = []
            for direction, sfx in enumerate(self._suffixes(layer)):
                xp = linear(x, get(f"weight_ih{sfx}"), get(f"bias_ih{sfx}"))  # all steps at once
                if direction == 1:
                    xp = xp.flip(0)  # the reverse direction reads the sequence from its end
                initial = states[layer * self.num_directions + direction]
                out = self._recurrence(
                    step, xp, get(f"weight_hh{sfx}"), get(f"bias_hh{sfx}"), initial
                )
                finals.append(tuple(out[s, -1] for s in range(out.shape[0])))
                outputs.append(out[0].flip(0) if direction == 1 else out[0])
            x = outputs[0] if len(outputs) == 1 else cat(outputs, dim=-1)
            if self.dropout > 0.0 and self.training and layer < self.num_layers - 1:
                x = dropout(x, self.dropout)
        return x, finals

    def _recurrence(
        self, step: Step, xp: Tensor, w_hh: Tensor, b_hh: Tensor | None, initial: State
    ) -> Tensor:
        """Every step of one layer in one direction, stacked: ``Recurrence`` (LSTM:
        ``ops.recurrent.lstm``)."""
        return Recurrence.apply(step, xp, w_hh, b_hh, *initial)

    def _prepare(self, x: Tensor) -> tuple[Tensor, bool]:
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            order = "(N, L, H_in)" if self.batch_first else "(L, N, H_in)"
            raise ValueError(
                f"{self!r}: expected input of shape {order} or (L, H_in) with H_in = "
                f"{self.input_size}, got {x.shape}"
            )
        batched = x.ndim == 3
        check_same_dtype(f"{type(self).__name__}", x, self.weight_ih_l0)
        if x.shape[1 if batched and self.batch_first else 0] == 0:
            raise ValueError(f"{self!r}: expected a sequence of at least one step, got {x.shape}")
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
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


def _unbatched_state(h: Tensor | None, batched: bool) -> Tensor | None:
    return h if h is None or batched else h.unsqueeze(1)


class _HiddenStateRNN(_RNNBase):
    """What RNN and GRU share: the state is one tensor ``hx``, not LSTM's pair."""

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:  # noqa: A002
        x, batched = self._prepare(input)
        hx = _unbatched_state(hx, batched)
        h0 = self._zeros(x.shape[1], x) if hx is None else hx
        self._check_state(h0, x, "hx")
        out, finals = self._run(x, [(h0[k],) for k in range(h0.shape[0])])
        h_n = stack([h for (h,) in finals])
        return self._finish(out, batched), h_n if batched else h_n.squeeze(1)


class RNN(_HiddenStateRNN):
    r"""$h_t = \tanh(x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh})$, per layer
    (``nonlinearity="relu"`` for ReLU).

    With ``bidirectional=True`` each layer also runs from the last step to the first (its
    parameters end in ``_reverse``); the outputs of both directions are concatenated.

    Shape: input $(L, N, H_{in})$ ($(N, L, H_{in})$ with ``batch_first``, or unbatched
    $(L, H_{in})$); ``hx`` $(D \cdot \text{num\_layers}, N, H)$ with $D = 2$ if bidirectional
    else 1; returns output $(L, N, D \cdot H)$ (every step of the last layer) and $h_n$
    $(D \cdot \text{num\_layers}, N, H)$ (the last step of each layer and direction).
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
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            dtype=dtype,
        )
        self._place(device)  # PyTorch's device= keyword

    def _step(self) -> Step:
        return RNNStep(relu=self.nonlinearity == "relu")


class LSTM(_RNNBase):
    r"""Long short-term memory, per layer; see ``LSTMCellFunction`` for the gates.

    Shape: input $(L, N, H_{in})$ ($(N, L, H_{in})$ with ``batch_first``, or $(L, H_{in})$);
    ``hx`` = $(h_0, c_0)$, each $(D \cdot \text{num\_layers}, N, H)$ ($D = 2$ if
    ``bidirectional``); returns output $(L, N, D \cdot H)$ and $(h_n, c_n)$.
    """

    def _step(self) -> Step:
        return LSTMStep()

    def flatten_parameters(self) -> None:
        """Does nothing, as PyTorch's on the CPU (it packs cuDNN's weights on a GPU)."""

    def _recurrence(
        self, step: Step, xp: Tensor, w_hh: Tensor, b_hh: Tensor | None, initial: State
    ) -> Tensor:
        return lstm(xp, w_hh, b_hh, *initial)

    def forward(
        self,
        input: Tensor,  # noqa: A002
        hx: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        x, batched = self._prepare(input)
        if hx is None:
            h0 = c0 = self._zeros(x.shape[1], x)
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{self!r}: hx must be a pair (h_0, c_0), got {type(hx).__name__}")
            h0, c0 = (t if batched else t.unsqueeze(1) for t in hx)
        self._check_state(h0, x, "h_0")
        self._check_state(c0, x, "c_0")
        out, finals = self._run(x, [(h0[k], c0[k]) for k in range(h0.shape[0])])
        h_n, c_n = stack([h for h, _ in finals]), stack([c for _, c in finals])
        if not batched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish(out, batched), (h_n, c_n)


class GRU(_HiddenStateRNN):
    r"""Gated recurrent unit, per layer; see ``GRUStep`` for the gates.

    Shape: as ``RNN``.
    """

    def _step(self) -> Step:
        return GRUStep()


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


# --------------------------------------------------------------------------- one step: the cells
class _CellBase(Module):
    _gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        g = self._gates * hidden_size
        self.weight_ih = Parameter(empty(g, input_size, dtype=dtype))
        self.weight_hh = Parameter(empty(g, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(g, dtype=dtype))
            self.bias_hh = Parameter(empty(g, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()
        self._place(device)  # PyTorch's device= keyword

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _input(self, x: Tensor) -> tuple[Tensor, bool]:
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(
                f"{type(self).__name__}: expected input of shape (N, {self.input_size}) or "
                f"({self.input_size},), got {tuple(x.shape)}"
            )
        check_same_dtype(type(self).__name__, x, self.weight_ih)
        return (x, True) if x.ndim == 2 else (x.unsqueeze(0), False)

    def _state(self, h: Tensor | None, x: Tensor, batched: bool) -> Tensor:
        if h is None:
            return zeros(x.shape[0], self.hidden_size, dtype=x.dtype, backend=x.backend)
        h = h if batched else h.unsqueeze(0)
        if tuple(h.shape) != (x.shape[0], self.hidden_size):
            raise ValueError(
                f"{type(self).__name__}: expected a hidden state of shape {(x.shape[0], self.hidden_size)}, "
                f"got {tuple(h.shape)}"
            )
        return h

    def _gi_gh(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        gi, gh = x @ self.weight_ih.T, h @ self.weight_hh.T
        if self.bias_ih is not None and self.bias_hh is not None:
            gi, gh = gi + self.bias_ih, gh + self.bias_hh
        return gi, gh

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    r"""$h' = \tanh(x W_{ih}^T + b_{ih} + h W_{hh}^T + b_{hh})$ (``nonlinearity="relu"``: ReLU)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity!r} (expected 'tanh' or 'relu')")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, dtype=dtype)
        self._place(device)  # PyTorch's device= keyword

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        x, batched = self._input(input)
        gi, gh = self._gi_gh(x, self._state(hx, x, batched))
        h = (gi + gh).tanh() if self.nonlinearity == "tanh" else (gi + gh).relu()
        return h if batched else h.squeeze(0)


class LSTMCell(_CellBase):
    r"""$i, f, g, o$ = chunks of $x W_{ih}^T + b_{ih} + h W_{hh}^T + b_{hh}$;
    $c' = \sigma(f) c + \sigma(i)\tanh(g)$, $h' = \sigma(o)\tanh(c')$. Returns $(h', c')$."""

    _gates = 4

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Tensor]:  # noqa: A002
        x, batched = self._input(input)
        if hx is None:
            h = c = self._state(None, x, batched)
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"LSTMCell: hx must be a pair (h_0, c_0), got {type(hx).__name__}")
            h, c = self._state(hx[0], x, batched), self._state(hx[1], x, batched)
        gi, gh = self._gi_gh(x, h)
        i, f, g, o = (gi + gh).chunk(4, dim=1)
        c_new = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h_new = o.sigmoid() * c_new.tanh()
        return (h_new, c_new) if batched else (h_new.squeeze(0), c_new.squeeze(0))


class GRUCell(_CellBase):
    r"""$r, z$ = $\sigma$ of the first two chunks, $n = \tanh(x W_{in}^T + b_{in} + r \odot
    (h W_{hn}^T + b_{hn}))$, $h' = (1 - z) \odot n + z \odot h$."""

    _gates = 3

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        x, batched = self._input(input)
        h = self._state(hx, x, batched)
        gi, gh = self._gi_gh(x, h)
        i_r, i_z, i_n = gi.chunk(3, dim=1)
        h_r, h_z, h_n = gh.chunk(3, dim=1)
        r, z = (i_r + h_r).sigmoid(), (i_z + h_z).sigmoid()
        n = (i_n + r * h_n).tanh()
        out = (1 - z) * n + z * h
        return out if batched else out.squeeze(0)
