# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python (torchlight)
#     language: python
#     name: torchlight
# ---

# %% [markdown]
# # Tutorial 7: Recurrent networks and vanishing gradients
#
# A **recurrent network** reads a sequence one step at a time and carries what it has seen in
# a hidden state $h_t$: the same small cell, with the same weights, applied at every step.
# Unrolled over $T$ steps it is just a very deep network whose layers share their weights, so
# autograd differentiates it with nothing new ("backpropagation through time"). But the
# gradient that reaches step 1 from a loss at step $T$ is a product of $T - 1$ matrices, and
# a product of many matrices either shrinks to nothing or blows up. That is why a plain RNN
# cannot learn to remember, and why the **LSTM** was invented.
#
# This tutorial writes an RNN cell from `@` and `tanh`, checks it against `nn.RNN`, measures
# the gradient at every step of the unrolled loop, explains its geometric decay with the
# Jacobians of the cell, shows the LSTM's additive path that keeps it, clips an exploding
# gradient, and ends with a memory task that an RNN cannot learn and an LSTM learns in a few
# seconds.

# %%
import numpy as np

import torchlight as tl
from torchlight import nn, optim
from torchlight.nn import functional as F

tl.manual_seed(1)

# %% [markdown]
# ## 1. An RNN cell from `@` and `tanh`
#
# One step reads the input $x_t$ and the previous state $h_{t-1}$ (row vectors, a batch of them
# stacked as rows, PyTorch's convention):
#
# $$h_t = \tanh(x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh}), \qquad h_0 = 0 .$$
#
# Unrolling is a Python loop over the steps. `nn.RNN` holds the four weights under PyTorch's
# names (`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`, the `l0` for layer 0), so
# we can run our loop with *its* weights and compare:

# %%
def rnn_step(x_t, h, W_ih, W_hh, b_ih, b_hh):
    return (x_t @ W_ih.T + b_ih + h @ W_hh.T + b_hh).tanh()


def unroll_rnn(x, rnn):
    """Every hidden state h_1 .. h_T of a one-layer `nn.RNN` on x of shape (T, N, D)."""
    h = tl.zeros(x.shape[1], rnn.hidden_size)
    states = []
    for t in range(x.shape[0]):
        h = rnn_step(x[t], h, rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0)
        states.append(h)
    return states


T, D, H = 50, 4, 32  # time steps, input features, hidden units
x = tl.randn(T, 1, D)  # one sequence (batch of 1)
rnn = nn.RNN(D, H)
states = unroll_rnn(x, rnn)
output, h_n = rnn(x)
print("output:", output.shape, " h_n:", h_n.shape)
print("same as nn.RNN at every step:", np.allclose(tl.stack(states).detach().numpy(), output.detach().numpy()))

# %% [markdown]
# ## 2. Backpropagation through time
#
# Take a loss that looks only at the **last** state, $L = h_T \cdot v$ with $v$ a fixed unit
# vector, so that $\lVert \partial L / \partial h_T \rVert = 1$. Every earlier state
# influences $L$ only through the states after it, and backward walks the unrolled loop from
# step $T$ back to step 1. The hidden states are intermediate tensors, whose `.grad` autograd
# normally throws away; `retain_grad()` asks it to keep them:

# %%
def gradient_norms(states, hidden_size):
    """||dL/dh_t|| for t = 1..T, where L = h_T . v and v is the unit vector (1, .., 1)/sqrt(H)."""
    for h in states:
        h.retain_grad()
    loss = states[-1].sum() / hidden_size**0.5
    loss.backward()
    return np.array([np.linalg.norm(h.grad.numpy()) for h in states])


rnn_norms = gradient_norms(states, H)
for t in (T, T - 1, T - 2, T - 10, T - 25, 1):
    print(f"t = {t:2d}: ||dL/dh_t|| = {rnn_norms[t - 1]:.1e}")

# %% [markdown]
# Each step back multiplies the gradient by the cell's Jacobian. With $a_t = 1 - h_t^2$ (the
# derivative of $\tanh$) the chain rule through one step reads
#
# $$\frac{\partial L}{\partial h_{t-1}} = \Big(\frac{\partial L}{\partial h_t} \odot a_t\Big) W_{hh}, \qquad \text{i.e.} \qquad \frac{\partial h_t}{\partial h_{t-1}} = \mathrm{diag}(1 - h_t^2)\, W_{hh} .$$
#
# That one line, applied by hand to the retained gradients, reproduces every one of them:

# %%
W_hh = rnn.weight_hh_l0.detach().numpy()
by_hand = []
for t in range(1, T):  # states[t] is h_{t+1}: one step back from it must give the grad of states[t - 1]
    slope = 1 - states[t].detach().numpy() ** 2
    by_hand.append(np.allclose((states[t].grad.numpy() * slope) @ W_hh, states[t - 1].grad.numpy()))
print(f"the one-step rule holds at {sum(by_hand)} of {T - 1} steps")

# %% [markdown]
# ## 3. Why the gradient vanishes: a product of Jacobians
#
# Chaining the steps from $t$ to $T$:
#
# $$\frac{\partial h_T}{\partial h_t} = \prod_{k=t+1}^{T} \mathrm{diag}(1 - h_k^2)\, W_{hh} .$$
#
# The same matrix $W_{hh}$ appears $T - t$ times. If it were alone, its $k$-th power would
# shrink like $\rho^k$, where $\rho$ is its **spectral radius** (the largest $|\lambda|$ of its
# eigenvalues; $\lVert W^k \rVert^{1/k} \to \rho$). The $\tanh$ derivatives $1 - h_k^2$ lie
# in $(0, 1]$, so the factors $\mathrm{diag}(1 - h_k^2)$ shrink it further, roughly by the mean
# slope per step. PyTorch's initialization,
# $\mathcal{U}(-1/\sqrt H, 1/\sqrt H)$, gives entries of variance $1/(3H)$ and, by the circular
# law of random matrices, $\rho \approx \sqrt{H \cdot 1/(3H)} = 1/\sqrt 3 \approx 0.58$ whatever
# the size (a small matrix scatters around that value):

# %%
rho = np.abs(np.linalg.eigvals(W_hh)).max()
sigma = np.linalg.norm(W_hh, 2)  # the largest singular value
per_step = (rnn_norms[0] / rnn_norms[-1]) ** (1 / (T - 1))  # geometric mean of the shrinkage
tanh_slope = np.mean([1 - h.detach().numpy() ** 2 for h in states])
print(f"spectral radius of W_hh     {rho:.2f}")
print(f"largest singular value      {sigma:.2f}")
print(f"||W_hh^49||^(1/49)          {np.linalg.norm(np.linalg.matrix_power(W_hh, T - 1), 2) ** (1 / (T - 1)):.2f}")
print(f"mean tanh slope 1 - h^2     {tanh_slope:.2f}")
print(f"rho x mean slope            {rho * tanh_slope:.2f}")
print(f"measured shrinkage per step {per_step:.2f}")

# %% [markdown]
# The gradient shrinks by a roughly constant factor per step, about $\rho$ times the mean
# $\tanh$ slope: a **geometric** decay, a straight line on a log scale. (The largest singular
# value is above 1, so a single step can make some gradient larger; over many steps the
# spectral radius wins.) After 50 steps what reaches $h_1$ is about $10^{-14}$ of the gradient
# at $h_T$: whatever the first inputs do to the loss, gradient descent cannot see it. Scale
# $W_{hh}$ up so that $\rho > 1$, and the same product can **explode** instead (section 5).
#
# ## 4. The LSTM: an additive path for the gradient
#
# The LSTM keeps a second state, the **cell** $c_t$, and four gates computed from $x_t$ and
# $h_{t-1}$ (PyTorch's order: input $i$, forget $f$, candidate $g$, output $o$):
#
# $$c_t = f_t \odot c_{t-1} + i_t \odot g_t, \qquad h_t = o_t \odot \tanh(c_t).$$
#
# The cell is updated by **addition**: $\partial c_t / \partial c_{t-1}$ is $\mathrm{diag}(f_t)$,
# no matrix, no $\tanh$ slope. Along the cell path, the gradient from step $T$ to step $t$ is
# scaled by $\prod_k f_k$, a product of numbers the network *controls*: a forget gate near 1
# keeps the gradient (and the memory) for many steps. Our LSTM step, from `@`, `sigmoid` and
# `tanh`, with the weights of an `nn.LSTM` (its four gates stacked in one $(4H, D)$ matrix):

# %%
def lstm_step(x_t, h, c, lstm):
    z = x_t @ lstm.weight_ih_l0.T + lstm.bias_ih_l0 + h @ lstm.weight_hh_l0.T + lstm.bias_hh_l0
    n = lstm.hidden_size
    i, f = z[:, :n].sigmoid(), z[:, n : 2 * n].sigmoid()
    g, o = z[:, 2 * n : 3 * n].tanh(), z[:, 3 * n :].sigmoid()
    c = f * c + i * g
    return o * c.tanh(), c


def unroll_lstm(x, lstm):
    """Every (h_t, c_t) of a one-layer `nn.LSTM` on x of shape (T, N, D)."""
    h = c = tl.zeros(x.shape[1], lstm.hidden_size)
    states = []
    for t in range(x.shape[0]):
        h, c = lstm_step(x[t], h, c, lstm)
        states.append((h, c))
    return states


lstm = nn.LSTM(D, H)
pairs = unroll_lstm(x, lstm)
output, (h_n, c_n) = lstm(x)
print("same as nn.LSTM:", np.allclose(tl.stack([h for h, _ in pairs]).detach().numpy(), output.detach().numpy()),
      np.allclose(pairs[-1][1].detach().numpy(), c_n[0].detach().numpy()))

# %% [markdown]
# With PyTorch's initialization every weight and bias is small, so $f = \sigma(\approx 0) \approx 0.5$:
# the cell forgets half of itself at every step and the gradient along it halves too. The
# remedy, in use since Gers, Schmidhuber and Cummins (2000) and recommended by Jozefowicz et
# al. (2015), is to start the **forget-gate bias** high. With a bias of 4,
# $f \approx \sigma(4) \approx 0.98$: the cell keeps 98% of itself per step. The forget gate's
# bias is rows $H$ to $2H$ of `bias_ih_l0` (the layer adds `bias_hh_l0` to it; one of the two
# is enough to set). Here are the gradient norms, on the same input,
# for the RNN of section 2, the LSTM as initialized, and the LSTM with forget bias 4:

# %%
lstm_remembers = nn.LSTM(D, H)
with tl.no_grad():
    lstm_remembers.bias_ih_l0[H : 2 * H] = 4.0

lstm_norms = gradient_norms([h for h, _ in unroll_lstm(x, lstm)], H)
remember_norms = gradient_norms([h for h, _ in unroll_lstm(x, lstm_remembers)], H)

# %% jupyter={"source_hidden": true}
from torchlight.viz import Picture  # an SVG that JupyterLab shows before the cell runs


def log_plot(series, width=460, height=210):
    """SVG: log10 of each series over the step t = 1..T, one line per (label, values, colour)."""
    logs = [np.log10(np.maximum(values, 1e-300)) for _, values, _ in series]
    lo, hi = int(np.floor(min(v.min() for v in logs))), int(np.ceil(max(v.max() for v in logs)))
    every = max(1, int(np.ceil((hi - lo) / 6)))
    left, top, plot_w, plot_h = 44, 10, width - 190, height - 44
    def y_of(v):
        return top + plot_h * (hi - v) / max(hi - lo, 1)
    parts = []
    for e in range(hi, lo - 1, -every):
        y = y_of(e)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end">1e{e}</text>')
    for k, ((label, _, colour), v) in enumerate(zip(series, logs, strict=True)):
        n = len(v)
        points = " ".join(f"{left + plot_w * t / (n - 1):.1f},{y_of(v[t]):.1f}" for t in range(n))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>'
                     f'<text x="{left + plot_w + 8}" y="{top + 14 + 16 * k}" fill="{colour}">{label}</text>')
    parts.append(f'<text x="{left + plot_w + 8}" y="{top + 22 + 16 * len(series)}" fill="#5f6368">'
                 '||dL/dh_t||, log scale</text>')
    parts.append(f'<text x="{left}" y="{height - 20}">1</text>'
                 f'<text x="{left + plot_w}" y="{height - 20}" text-anchor="end">{n}</text>'
                 f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">step t</text>')
    return Picture(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                   f'font-family="sans-serif" font-size="10">{"".join(parts)}</svg>')


# %%
curves = [
    ("RNN (tanh)", rnn_norms, "#d93025"),
    ("LSTM, as initialized", lstm_norms, "#f9ab00"),
    ("LSTM, forget bias 4", remember_norms, "#1a73e8"),
]
for label, values, _ in curves:
    print(f"{label:22s} ||dL/dh_1|| = {values[0]:.1e}   ||dL/dh_T|| = {values[-1]:.1e}")
log_plot(curves)

# %% [markdown]
# On a log scale the RNN's curve is a straight line: geometric decay. The LSTM as initialized
# decays too (each step back passes a forget gate near 0.5, and whatever leaves the cell path
# meets $\tanh$ slopes and $W_{hh}$ as in the RNN). With its forget gates near 1 the LSTM's
# curve drops over the last few steps (the way from $h_T$ into the cell goes through the output
# gate and $\tanh'$) and then stays **flat**: the cell carries the gradient back with almost
# no loss, however far.
#
# ## 5. Exploding gradients and clipping
#
# The same product with $\rho > 1$ can grow geometrically instead. Multiply $W_{hh}$ by 4 (so
# $\rho$ becomes about 2.3) and run the same input:

# %%
rnn_big = nn.RNN(D, H)
rnn_big.load_state_dict(rnn.state_dict())
with tl.no_grad():
    rnn_big.weight_hh_l0.mul_(4.0)
big_norms = gradient_norms(unroll_rnn(x, rnn_big), H)
rho_big = np.abs(np.linalg.eigvals(rnn_big.weight_hh_l0.detach().numpy())).max()
print(f"spectral radius {rho_big:.2f}: ||dL/dh_1|| = {big_norms[0]:.1e}, ||dL/dh_T|| = {big_norms[-1]:.1e}")
log_plot([("RNN, W_hh x 4", big_norms, "#188038"), ("RNN", rnn_norms, "#d93025")])

# %% [markdown]
# (Saturation limits it: once $|h| \to 1$ the slopes $1 - h^2$ go to 0, which is why the
# explosion is milder than $\rho^{49}$ and happens for most weights and inputs, not all. But
# when it happens, one step of gradient descent with such a gradient throws the weights far
# away: the weights' gradient sums these contributions over all the steps.) The standard guard is to **clip** the
# gradient: `nn.utils.clip_grad_norm_(parameters, max_norm)` joins all the gradients into one
# vector and, if its norm exceeds `max_norm`, scales them all down together, keeping the
# direction. Call it between `backward()` and `optimizer.step()`:

# %%
def joined(grads):
    """All gradients as one vector (a copy)."""
    return np.concatenate([g.ravel() for g in grads])


before = joined(p.grad.numpy() for p in rnn_big.parameters())
total = nn.utils.clip_grad_norm_(rnn_big.parameters(), max_norm=1.0)
after = joined(p.grad.numpy() for p in rnn_big.parameters())
print(f"norm before clipping {total.item():.1e} (by numpy: {np.linalg.norm(before):.1e}), after {np.linalg.norm(after):.2f}")
print(f"same direction: cosine {before @ after / (np.linalg.norm(before) * np.linalg.norm(after)):.6f}")

# %% [markdown]
# Clipping tames the explosion; it can do nothing for a vanishing gradient, which carries no
# information to rescale. For that the architecture has to change: the LSTM's cell, or
# attention (Tutorial 6), which reaches every earlier step in one hop.
#
# ## 6. A memory task: the RNN fails, the LSTM learns
#
# Each sequence starts with one of 4 symbols (0-3) and continues with 59 distractors drawn from
# 4 other symbols (4-7), one-hot coded. The model reads all 60 steps and must say, from $h_T$
# alone, which symbol came **first**. Guessing gives 25%. The gradient that tells the model
# what to keep from step 1 has to travel back 59 steps.

# %%
def memory_batch(rng, n, steps=60, symbols=4):
    """n one-hot sequences (n, steps, 2 * symbols): a symbol below `symbols` first, then
    distractors from the others; the label is the first symbol."""
    seq = rng.integers(symbols, 2 * symbols, size=(n, steps))
    seq[:, 0] = rng.integers(0, symbols, size=n)
    return tl.tensor(np.eye(2 * symbols)[seq]), tl.tensor(seq[:, 0])


class Remember(nn.Module):
    """A recurrent layer reads the sequence; a linear head names the first symbol from h_T."""

    def __init__(self, recurrent, symbols=4):
        super().__init__()
        self.recurrent = recurrent
        self.head = nn.Linear(recurrent.hidden_size, symbols)

    def forward(self, x):
        out, _ = self.recurrent(x)
        return self.head(out[:, -1])


def train(model, steps=250, seed=0):
    rng = np.random.default_rng(seed)
    test_x, test_y = memory_batch(rng, 500)
    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    for step in range(1, steps + 1):
        xb, yb = memory_batch(rng, 32)
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        if step % 50 == 0:
            with tl.no_grad():
                accuracy = (model(test_x).argmax(-1).numpy() == test_y.numpy()).mean()
            print(f"step {step}: loss {loss.item():.2f}, test accuracy {accuracy:.0%}")


tl.manual_seed(0)
train(Remember(nn.RNN(8, 32, batch_first=True)))

# %% [markdown]
# The RNN stays at chance. The LSTM, same hidden size, same data, same optimizer, gets two
# initial biases: the forget gate's at $+4$ ($f \approx 0.98$, a memory of about
# $1/(1 - f) \approx 55$ steps) and the input gate's at $-4$ ($i \approx 0.02$), so that the
# 59 distractors do not pour into the cell; training opens the input gate for the symbols worth
# keeping. (This is Tallec and Ollivier's "chrono" initialization, 2018, for a time scale of
# about 55 steps.)

# %%
tl.manual_seed(0)
lstm_layer = nn.LSTM(8, 32, batch_first=True)
with tl.no_grad():
    lstm_layer.bias_ih_l0[:32] = -4.0  # input gate
    lstm_layer.bias_ih_l0[32:64] = 4.0  # forget gate
train(Remember(lstm_layer))

# %% [markdown]
# On other seeds the picture is the same. On shorter sequences the RNN often learns the task
# too (set `steps=20` in `memory_batch`): over 19 steps its gradient at initialization shrinks
# by about $0.5^{19} \approx 10^{-6}$, and Adam, which divides each gradient by its own running
# size, can still follow it. Over 59 steps it is about $10^{-18}$ of the gradients from the
# last steps, and lost among them.
#
# ## Summary
#
# - An RNN is one cell, $h_t = \tanh(x_t W_{ih}^T + b_{ih} + h_{t-1} W_{hh}^T + b_{hh})$,
#   applied at every step with the same weights; unrolled, autograd differentiates it
#   (backpropagation through time). `retain_grad()` keeps the gradient of each hidden state.
# - One step back multiplies the gradient by the Jacobian $\mathrm{diag}(1 - h_t^2) W_{hh}$;
#   from step $T$ to step $t$ that is a product of $T - t$ of them, which shrinks roughly like
#   $\rho(W_{hh})^{T-t}$ when the spectral radius $\rho < 1$ (the $\tanh$ slopes shrink it
#   more), and can grow geometrically when $\rho > 1$.
# - `nn.utils.clip_grad_norm_` rescales an exploding gradient, keeping its direction; nothing
#   rescales a vanished one.
# - The LSTM's cell is updated by addition, $c_t = f_t \odot c_{t-1} + i_t \odot g_t$: along it
#   the gradient is scaled by the forget gates only. Started near 1 (forget-gate bias $+4$;
#   an input-gate bias of $-4$ keeps distractors out), it carries gradient and memory over
#   many steps, and learns a 60-step memory task a plain RNN cannot.
#
# ## Exercises
#
# 1. Scale $W_{hh}$ by factors from 0.5 to 5 and plot $\lVert \partial L / \partial h_1 \rVert$
#    against $\rho(W_{hh})$. Where is the boundary between vanishing and exploding, and how does
#    it move when the inputs $x$ are 10 times larger (more saturation)?
# 2. Retain the gradients of the LSTM's cells $c_t$ and compare
#    $\lVert \partial L / \partial c_t \rVert$ with the product of the forget gates
#    $\prod_{k>t} f_k$ (return the gates from `lstm_step`).
# 3. Train the memory-task LSTM with PyTorch's default biases, and with only the forget bias
#    set. Which of the two biases matters, and how long a sequence can each learn in 250 steps?
# 4. Write a GRU step by hand ($h_t = (1 - z) \odot n + z \odot h_{t-1}$, see
#    `torchlight.nn.recurrent.gru_cell`), check it against `nn.GRU`, and plot its gradient
#    norms. Which term is its additive path?
# 5. An "IRNN" (Le, Jaitly and Hinton, 2015) uses ReLU and starts with $W_{hh} = I$:
#    build one with `nn.RNN(..., nonlinearity="relu")`, set `weight_hh_l0` to the identity
#    under `tl.no_grad()`, and measure its gradient norms. Does it learn the memory task?
#
# ## Next
#
# - [Tutorial 6: Attention and transformers](06_attention_and_transformers.ipynb) ends with the
#   same picture for gradients with respect to the *inputs*, and builds attention, which needs no
#   long path at all.
# - `python -m torchlight.train --dataset shakespeare --model lstm` trains a character LSTM
#   (`nn.LSTMLanguageModel`) from the shell; `python -m torchlight.train.generate` samples from it.
# - The `assignments/` folder has graded exercises, among them an LSTM cell's backward.
