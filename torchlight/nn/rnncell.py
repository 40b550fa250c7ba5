r"""One step of a recurrent network: ``nn.RNNCell``, ``nn.LSTMCell``, ``nn.GRUCell`` (PyTorch's
parameter names, shapes, initialization $\mathcal{U}(-1/\sqrt{H}, 1/\sqrt{H})$ and gate order).

Each ``forward`` is the cell's formula in tensor ops, so autograd records it step by step (a
Python loop over time, as in pytorch/examples' time_sequence_prediction).

Example:
    >>> import torchlight as tl
    >>> cell = tl.nn.LSTMCell(3, 4)
    >>> h, c = cell(tl.randn(2, 3))
    >>> h.shape, c.shape
    ((2, 4), (2, 4))
"""

from __future__ import annotations

import math
from typing import Any

from torchlight.creation import empty, zeros
from torchlight.dtypes import check_same_dtype
from torchlight.nn import init
from torchlight.nn.module import Module, Parameter
from torchlight.tensor import Tensor

__all__ = ["GRUCell", "LSTMCell", "RNNCell"]


class _CellBase(Module):
    _gates = 1

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, dtype: Any = None
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
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity!r} (expected 'tanh' or 'relu')")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, dtype)

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
