r"""Recurrent layers: RNN, LSTM and GRU (multi-layer, bidirectional, ``batch_first``, initial
states), as in PyTorch, and a small LSTM language model.

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
   zero-filled gradient of the whole sequence: $L^2$ work.) ``nn.LSTM`` runs ``LSTMLayer``:
   the same loop with an ``LSTMStep``, as one fused backend kernel, for speed.

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

from torchlight.autograd import Context, Function, is_grad_enabled
from torchlight.creation import cat, empty, stack, zeros
from torchlight.nn import functional as F
from torchlight.nn import init
from torchlight.nn.layers import Embedding, Linear
from torchlight.nn.module import Module, Parameter
from torchlight.tensor import Tensor

__all__ = [
    "GRU", "LSTM", "RNN", "GRUStep", "LSTMCellFunction", "LSTMLanguageModel", "LSTMLayer",
    "LSTMStep", "RNNStep", "Recurrence",
]  # fmt: skip

#: A cell's state: ``(h,)`` for RNN and GRU, ``(h, c)`` for LSTM; ``state[0]`` is always $h$.
State = tuple[Tensor, ...]


class RNNStep:
    r"""$h_t = \tanh(z_t)$ (or ReLU), $z_t = x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh}$.

    Backward: $\partial L/\partial z_t = G_h \odot (1 - h_t^2)$ (ReLU: $G_h$ where $h_t > 0$).
    """

    gates = 1

    def __init__(self, relu: bool = False) -> None:
        self.relu = relu

    def forward(self, xp: Tensor, hh: Tensor, state: State) -> tuple[State, tuple[Tensor, ...]]:
        z = xp + hh
        h = z.relu() if self.relu else z.tanh()
        return (h,), (h,)

    def backward(
        self, saved: tuple[Tensor, ...], grad_state: list[Tensor]
    ) -> tuple[Tensor, Tensor, list[Tensor | None]]:
        (h,), (grad_h,) = saved, grad_state
        grad_z = grad_h * (h > 0) if self.relu else grad_h * (1.0 - h * h)
        return grad_z, grad_z, [None]  # h_{t-1} enters only through hh


class LSTMStep:
    r"""PyTorch's LSTM step; see ``LSTMCellFunction`` for the gates and their backward."""

    gates = 4

    def forward(self, xp: Tensor, hh: Tensor, state: State) -> tuple[State, tuple[Tensor, ...]]:
        i, f, g, o, c = _lstm_gates(xp + hh, state[1])
        tanh_c = c.tanh()
        return (o * tanh_c, c), (i, f, g, o, state[1], tanh_c)

    def backward(
        self, saved: tuple[Tensor, ...], grad_state: list[Tensor]
    ) -> tuple[Tensor, Tensor, list[Tensor | None]]:
        grad_z, grad_c_prev = _lstm_backward(saved, grad_state[0], grad_state[1])
        return grad_z, grad_z, [None, grad_c_prev]


class GRUStep:
    r"""PyTorch's GRU step, gates in its order (reset, update, new), $a$ and $b$ the input and
    hidden halves ``xp`` and ``hh``:
    $r = \sigma(a_r + b_r)$, $u = \sigma(a_u + b_u)$, $n = \tanh(a_n + r \odot b_n)$,
    $h_t = (1 - u) \odot n + u \odot h_{t-1}$.

    Backward, from $G_h$: $\delta_n = G_h (1 - u)(1 - n^2)$, $\delta_u = G_h (h_{t-1} - n)\,
    u(1-u)$, $\delta_r = \delta_n b_n\, r(1-r)$; $\partial L/\partial a = [\delta_r, \delta_u,
    \delta_n]$, $\partial L/\partial b = [\delta_r, \delta_u, \delta_n r]$, and $h_{t-1}$ also
    gets $G_h u$ directly.
    """

    gates = 3

    def forward(self, xp: Tensor, hh: Tensor, state: State) -> tuple[State, tuple[Tensor, ...]]:
        size, h_prev = state[0].shape[-1], state[0]
        r = (xp[..., :size] + hh[..., :size]).sigmoid()
        u = (xp[..., size : 2 * size] + hh[..., size : 2 * size]).sigmoid()
        hh_n = hh[..., 2 * size :]
        n = (xp[..., 2 * size :] + r * hh_n).tanh()
        return (n + u * (h_prev - n),), (r, u, n, h_prev, hh_n)

    def backward(
        self, saved: tuple[Tensor, ...], grad_state: list[Tensor]
    ) -> tuple[Tensor, Tensor, list[Tensor | None]]:
        (r, u, n, h_prev, hh_n), (grad_h,) = saved, grad_state
        delta_n = grad_h * (1.0 - u) * (1.0 - n * n)
        delta_u = grad_h * (h_prev - n) * u * (1.0 - u)
        delta_r = delta_n * hh_n * r * (1.0 - r)
        grad_xp = cat([delta_r, delta_u, delta_n], dim=-1)
        grad_hh = cat([delta_r, delta_u, delta_n * r], dim=-1)
        return grad_xp, grad_hh, [grad_h * u]


Step = RNNStep | LSTMStep | GRUStep


class Recurrence(Function):
    r"""All $L$ steps of one layer in one direction:
    $h_t, \ldots = \text{step}(xp_t,\ h_{t-1} W_{hh}^T + b_{hh},\ \text{state}_{t-1})$, from the
    projected inputs $xp = x W_{ih}^T + b_{ih}$ $(L, N, \text{gates} \cdot H)$ and the initial
    state (``h_0``, and ``c_0`` for the LSTM). Returns every step's state, stacked: shape
    $(S, L, N, H)$, ``out[0]`` the hidden states $h_1 \ldots h_L$ (``out[1]`` the LSTM's cells).

    Backward is backpropagation through time: from the last step to the first, the state's
    gradient is what the output sends at step $t$ plus what step $t+1$ sent back; the step's
    ``backward`` turns it into the gate gradients $\partial L/\partial xp_t$ and
    $\partial L/\partial hh_t$, and $h_{t-1}$ gets $(\partial L/\partial hh_t) W_{hh}$. Then the
    weight gradient is one matmul over all steps: $\partial L/\partial W_{hh} = \sum_t
    (\partial L/\partial hh_t)^T h_{t-1}$, and $\partial L/\partial b_{hh} = \sum_t
    \partial L/\partial hh_t$.

    Shape: ``xp`` $(L, N, \text{gates} \cdot H)$, ``w_hh`` $(\text{gates} \cdot H, H)$,
    ``b_hh`` $(\text{gates} \cdot H)$ or None, each state $(N, H)$; returns $(S, L, N, H)$ with
    $S$ = ``len(state)``.

    Example:
        >>> import torchlight as tl
        >>> xp, w_hh = tl.randn(5, 3, 8), tl.randn(8, 2, requires_grad=True)  # 4 gates, H = 2
        >>> h0 = c0 = tl.zeros(3, 2)
        >>> out = Recurrence.apply(LSTMStep(), xp, w_hh, None, h0, c0)
        >>> out.shape  # (h, c) at each of the 5 steps
        (2, 5, 3, 2)
        >>> out[0, -1].sum().backward(); w_hh.grad.shape
        (8, 2)
    """

    # backward reads the gates saved at each step, not recorded math: no double backward
    # (for that, loop over LSTMCellFunction or write the step with tensor ops)
    once_differentiable = True

    @staticmethod
    def forward(
        ctx: Context, step: Step, xp: Tensor, w_hh: Tensor, b_hh: Tensor | None, *state: Tensor
    ) -> Tensor:
        h_0, states, saved = state[0], [], []
        for t in range(xp.shape[0]):
            state, kept = step.forward(xp[t], F.linear(state[0], w_hh, b_hh), state)
            states.append(stack(list(state)))
            saved.append(kept)
        out = stack(states, dim=1)
        ctx.step, ctx.has_bias = step, b_hh is not None
        ctx.save_for_backward(w_hh, h_0, out, saved)
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        w_hh, h_0, out, saved = ctx.saved_tensors
        size, steps = h_0.shape[-1], out.shape[1]
        grad_state = [grad_output[s, -1] for s in range(out.shape[0])]
        grad_xp, grad_hh = [], []
        for t in reversed(range(steps)):
            g_xp, g_hh, grad_prev = ctx.step.backward(saved[t], grad_state)
            grad_h = g_hh @ w_hh  # h_{t-1} made hh_t = h_{t-1} W_hh^T + b_hh
            grad_prev[0] = grad_h if grad_prev[0] is None else grad_prev[0] + grad_h
            grad_state = [
                g if t == 0 else g + grad_output[s, t - 1] for s, g in enumerate(grad_prev)
            ]
            grad_xp.append(g_xp)
            grad_hh.append(g_hh)
        grad_xp.reverse()
        grad_hh.reverse()
        all_xp = stack(grad_xp)
        all_hh = all_xp if grad_hh[0] is grad_xp[0] else stack(grad_hh)  # RNN, LSTM: the same
        h_prev = cat([h_0.unsqueeze(0), out[0, :-1]])  # h_0 ... h_{L-1}, shape (L, N, H)
        rows = all_hh.reshape(-1, all_hh.shape[-1])
        grad_w_hh = rows.T @ h_prev.reshape(-1, size)  # all steps in one matmul
        grad_b_hh = rows.sum(0) if ctx.has_bias else None
        return None, all_xp, grad_w_hh, grad_b_hh, *grad_state


class LSTMLayer(Function):
    r"""``Recurrence.apply(LSTMStep(), xp, w_hh, b_hh, h_0, c_0)`` with the whole loop, forward
    and backward, in one fused backend kernel (``backend.lstm_forward`` and
    ``backend.lstm_backward``, see :class:`~torchlight.backends.base.FusedKernels`): the same
    math (``LSTMStep``, ``LSTMCellFunction``) and the same result, for speed only. ``nn.LSTM``
    runs it.

    Why a kernel: a layer is $2L$ thin matmuls and $2L$ gate updates of $(N, H)$ arrays. Written
    with tensor ops, each update is about fifteen backend calls and as many new arrays, and for
    PyTorch-sized layers those cost more than the matmuls; the numpy backend's kernel updates
    preallocated arrays in place, the Numba backend's computes each step's gates in one
    compiled loop. Backends without their own kernel run the composition of primitives in
    ``FusedKernels``.

    Shape: as ``Recurrence`` with an ``LSTMStep``: returns $(2, L, N, H)$.

    Example:
        >>> import torchlight as tl
        >>> xp, w_hh = tl.randn(5, 3, 8), tl.randn(8, 2, requires_grad=True)
        >>> h0 = c0 = tl.zeros(3, 2)
        >>> out = LSTMLayer.apply(xp, w_hh, None, h0, c0)
        >>> reference = Recurrence.apply(LSTMStep(), xp, w_hh, None, h0, c0)
        >>> out.shape, bool(abs(out - reference).max() < 1e-12)
        ((2, 5, 3, 2), True)
    """

    once_differentiable = True  # the kernel's backward is not recorded math

    @staticmethod
    def forward(
        ctx: Context, xp: Tensor, w_hh: Tensor, b_hh: Tensor | None, h_0: Tensor, c_0: Tensor
    ) -> Tensor:
        out, gates, tanh_c = xp._fused("lstm_forward", w_hh, b_hh, h_0, c_0)
        ctx.has_bias = b_hh is not None
        ctx.save_for_backward(w_hh, h_0, c_0, out, gates, tanh_c)
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        w_hh, h_0, c_0, out, gates, tanh_c = ctx.saved_tensors
        grads = w_hh._fused("lstm_backward", h_0, c_0, out, gates, tanh_c, grad_output)
        grad_xp, grad_w_hh, grad_b_hh, grad_h_0, grad_c_0 = grads
        return grad_xp, grad_w_hh, grad_b_hh if ctx.has_bias else None, grad_h_0, grad_c_0


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
    ``LSTMStep`` (inside ``Recurrence``) uses the same two helpers; ``nn.LSTM`` runs
    ``LSTMLayer``, the same math in one backend kernel.
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
        return _lstm_backward((i, f, g, o, c_prev, tanh_c), grad_output[0], grad_output[1])


def _lstm_gates(z: Tensor, c_prev: Tensor) -> tuple[Tensor, ...]:
    """The gates $i, f, g, o$ from the pre-activations $z$, and $c_t = f c_{t-1} + i g$."""
    size = c_prev.shape[-1]
    i, f = z[..., :size].sigmoid(), z[..., size : 2 * size].sigmoid()
    g, o = z[..., 2 * size : 3 * size].tanh(), z[..., 3 * size :].sigmoid()
    return i, f, g, o, f * c_prev + i * g


def _lstm_backward(
    saved: tuple[Tensor, ...], grad_h: Tensor, grad_c: Tensor
) -> tuple[Tensor, Tensor]:
    """$(\\partial L/\\partial z, \\partial L/\\partial c_{t-1})$; see ``LSTMCellFunction``."""
    i, f, g, o, c_prev, tanh_c = saved
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
                xp = F.linear(x, get(f"weight_ih{sfx}"), get(f"bias_ih{sfx}"))  # all steps at once
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
                x = F.dropout(x, self.dropout)
        return x, finals

    def _recurrence(
        self, step: Step, xp: Tensor, w_hh: Tensor, b_hh: Tensor | None, initial: State
    ) -> Tensor:
        """Every step of one layer in one direction, stacked: ``Recurrence`` (LSTM: the fused
        ``LSTMLayer``)."""
        return Recurrence.apply(step, xp, w_hh, b_hh, *initial)

    def _prepare(self, x: Tensor) -> tuple[Tensor, bool]:
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            order = "(N, L, H_in)" if self.batch_first else "(L, N, H_in)"
            raise ValueError(
                f"{self!r}: expected input of shape {order} or (L, H_in) with H_in = "
                f"{self.input_size}, got {x.shape}"
            )
        batched = x.ndim == 3
        from torchlight.dtypes import check_same_dtype  # PyTorch compatibility (issue 25)

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
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype
        )

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
        return LSTMLayer.apply(xp, w_hh, b_hh, *initial)

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
