r"""The recurrent Functions: a whole sequence of RNN, LSTM or GRU steps as one Function.

A recurrent layer reads a sequence one step at a time, carrying a hidden state $h_t$ from
step to step. ``Recurrence`` runs the loop of one layer in one direction as one Function:
backpropagation through time written out, each cell's own derivative (``RNNStep``,
``LSTMStep``, ``GRUStep``, derived on paper) walked in reverse, and the weight gradient
$\partial L/\partial W_{hh} = \sum_t (\partial L/\partial z_t)^T h_{t-1}$ as *one* matmul of
the stacked steps. ``nn.LSTM`` runs :func:`lstm`: that loop with an ``LSTMStep``, or, where
the backend overrides it with a fused kernel, ``FusedLSTM`` (the same math, checked equal);
``LSTMCellFunction`` is one LSTM step. The layers that use
them (parameters, layers, directions, ``batch_first``) are in :mod:`torchlight.nn.recurrent`.
"""

from __future__ import annotations

from torchlight.autograd import Context, Function, once_differentiable
from torchlight.creation import cat, stack
from torchlight.ops.linear import linear
from torchlight.tensor import Tensor

__all__ = [
    "FusedLSTM", "GRUStep", "LSTMCellFunction", "LSTMStep", "RNNStep", "Recurrence", "State", "Step",
    "lstm",
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
        >>> from torchlight.ops.recurrent import LSTMStep, Recurrence
        >>> xp, w_hh = tl.randn(5, 3, 8), tl.randn(8, 2, requires_grad=True)  # 4 gates, H = 2
        >>> h0 = c0 = tl.zeros(3, 2)
        >>> out = Recurrence.apply(LSTMStep(), xp, w_hh, None, h0, c0)
        >>> out.shape  # (h, c) at each of the 5 steps
        (2, 5, 3, 2)
        >>> out[0, -1].sum().backward(); w_hh.grad.shape
        (8, 2)
    """

    @staticmethod
    def forward(
        ctx: Context, step: Step, xp: Tensor, w_hh: Tensor, b_hh: Tensor | None, *state: Tensor
    ) -> Tensor:
        h_0, states, saved = state[0], [], []
        for t in range(xp.shape[0]):
            state, kept = step.forward(xp[t], linear(state[0], w_hh, b_hh), state)
            states.append(stack(list(state)))
            saved.append(kept)
        out = stack(states, dim=1)
        ctx.step, ctx.has_bias = step, b_hh is not None
        ctx.save_for_backward(w_hh, h_0, out, saved)
        return out

    @staticmethod
    @once_differentiable  # it reads the gates saved at each step, which are not in the graph
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        # (for a double backward, loop over LSTMCellFunction or write the step in tensor ops)
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


def lstm(xp: Tensor, w_hh: Tensor, b_hh: Tensor | None, h_0: Tensor, c_0: Tensor) -> Tensor:
    r"""One LSTM layer in one direction, what ``nn.LSTM`` runs: the readable recurrence
    ``Recurrence.apply(LSTMStep(), xp, w_hh, b_hh, h_0, c_0)``, or :class:`FusedLSTM` where the
    backend overrides it (``lstm_forward``/``lstm_backward``, :mod:`torchlight.backends.fused`).

    Shape: as ``Recurrence`` with an ``LSTMStep``: returns $(2, L, N, H)$.
    """
    if hasattr(xp.backend, "lstm_forward") and xp.dtype == w_hh.dtype == h_0.dtype == c_0.dtype:
        return FusedLSTM.apply(xp, w_hh, b_hh, h_0, c_0)
    return Recurrence.apply(LSTMStep(), xp, w_hh, b_hh, h_0, c_0)


class FusedLSTM(Function):
    r"""The backend's override of ``Recurrence.apply(LSTMStep(), xp, w_hh, b_hh, h_0, c_0)``:
    the whole loop, forward and backward, in one fused kernel per direction
    (``backend.lstm_forward``, ``backend.lstm_backward``; numpy's in ``backends/numpy/kernels.py``,
    Numba's in ``backends/numba/lstm.py``, each saying what it buys). The same math and the same
    result (``tests/test_recurrent.py`` checks it against the recurrence), for speed only.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.ops.recurrent import FusedLSTM, LSTMStep, Recurrence
        >>> xp, w_hh = tl.randn(5, 3, 8), tl.randn(8, 2, requires_grad=True)
        >>> h0 = c0 = tl.zeros(3, 2)
        >>> out = FusedLSTM.apply(xp, w_hh, None, h0, c0)
        >>> reference = Recurrence.apply(LSTMStep(), xp, w_hh, None, h0, c0)
        >>> out.shape, bool(abs(out - reference).max() < 1e-12)
        ((2, 5, 3, 2), True)
    """

    @staticmethod
    def forward(
        ctx: Context, xp: Tensor, w_hh: Tensor, b_hh: Tensor | None, h_0: Tensor, c_0: Tensor
    ) -> Tensor:
        out, gates, tanh_c = xp._fused("lstm_forward", w_hh, b_hh, h_0, c_0)
        ctx.has_bias = b_hh is not None
        ctx.save_for_backward(w_hh, h_0, c_0, out, gates, tanh_c)
        return out

    @staticmethod
    @once_differentiable  # the kernel's backward is not recorded math
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
    ``LSTMStep`` (inside ``Recurrence``, what ``nn.LSTM`` runs) uses the same two helpers.
    """

    @staticmethod
    def forward(ctx: Context, z: Tensor, c_prev: Tensor) -> Tensor:
        _, _, _, o, c = _lstm_gates(z, c_prev)
        ctx.save_for_backward(z, c_prev)
        return stack([o * c.tanh(), c])

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor]:
        z, c_prev = ctx.saved_tensors
        # The gates again, from z and c_prev: a create_graph backward is differentiable as is.
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
