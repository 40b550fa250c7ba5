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
# # Tutorial 6: Attention and transformers
#
# A recurrent network reads a sentence one word at a time and squeezes everything it has seen
# into one hidden vector. **Attention** lets every position look directly at every other one
# and take what it needs: each token asks a question (a *query*), every token offers a *key*
# to be matched against and a *value* to hand over. Stack attention with small per-token MLPs,
# residual connections and LayerNorm, and you have a **transformer**; make the attention
# causal (no peeking at the future) and train it to predict the next character, and you have
# a tiny **GPT**.
#
# This tutorial builds attention from `@` and `softmax`, checks its gradient, draws attention
# weights, assembles a transformer block, trains a tiny GPT on Shakespeare for a few hundred
# steps, and generates text with it.

# %%
import numpy as np

import torchlight as tl
from torchlight import nn, optim, viz
from torchlight.autograd import gradcheck
from torchlight.data import DataLoader
from torchlight.data.text import TextWindows, load_text
from torchlight.train.generate import generate
from torchlight.nn import functional as F
from torchlight.train.tokenizers import CharTokenizer

tl.manual_seed(0)

# %% [markdown]
# ## 1. Attention is a weighted average
#
# For queries $Q$ $(L, d)$, keys $K$ $(S, d)$ and values $V$ $(S, d_v)$:
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^T}{\sqrt{d}}\right) V .$$
#
# Row $i$ of $QK^T$ holds the dot products of query $i$ with every key: how well they match.
# The softmax turns each row into weights that are positive and sum to 1, and the output row
# $i$ is the weighted average of the value rows. The $1/\sqrt{d}$ keeps the dot products of
# random $d$-dimensional vectors near unit size, so the softmax does not saturate.

# %%
def attention(q, k, v, causal=False):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if causal:  # hide the future: -inf above the diagonal, BEFORE the softmax
        L, S = scores.shape[-2], scores.shape[-1]
        scores = scores + tl.tensor(np.triu(np.full((L, S), -np.inf), 1))
    return F.softmax(scores, dim=-1) @ v


q, k, v = tl.randn(4, 8), tl.randn(4, 8), tl.randn(4, 8)
mine = attention(q, k, v, causal=True)
library = F.scaled_dot_product_attention(q, k, v, is_causal=True)
print("same as F.scaled_dot_product_attention:", np.allclose(mine.numpy(), library.numpy()))
print("each row of weights sums to", F.softmax(q @ k.T / 8**0.5, dim=-1).sum(-1).numpy().round(6))

# %% [markdown]
# Why the mask goes *before* the softmax: $e^{-\infty} = 0$, so a hidden position gets weight
# exactly 0 and the remaining weights still sum to 1. Masking after the softmax (setting
# weights to 0) would leave rows that no longer sum to 1.
#
# ## 2. Its gradient, checked
#
# Attention is only matmuls, a softmax and elementwise ops, so autograd differentiates it with
# no new backward to write. `gradcheck` compares every gradient with central differences:

# %%
q64, k64, v64 = (tl.randn(3, 4, dtype=tl.float64, requires_grad=True) for _ in range(3))
print("gradcheck:", gradcheck(lambda a, b, c: attention(a, b, c, causal=True), q64, k64, v64))

# %% [markdown]
# And the graph of one attention head on three tokens (click a node to see its value, its
# gradient and the chain-rule step; step through backward):

# %%
x3 = tl.randn(3, 2, requires_grad=True)
head = attention(x3, x3, x3).sum()
head.backward()
viz.show(head)

# %% [markdown]
# ## 3. LayerNorm and residual connections
#
# A transformer keeps one vector per token flowing through a **residual stream**: each
# sublayer reads it and *adds* its result, $x \leftarrow x + f(\mathrm{LN}(x))$. The identity
# path carries the gradient straight back through every block. **LayerNorm** rescales each
# token's features to mean 0 and variance 1 (then a learned scale $\gamma$ and shift
# $\beta$), so the sublayers see inputs of a steady size:

# %%
tokens = tl.randn(2, 5, 16) * 3 + 7
normed = nn.LayerNorm(16)(tokens).detach()
print("per token mean:", float(normed.mean(-1).abs().max().item()) < 1e-6,
      " variance:", normed.var(-1, correction=0).numpy().round(4)[0])

# %% [markdown]
# ## 4. A transformer block
#
# `nn.GPTBlock` is the decoder block of GPT-2: causal multi-head self-attention, then an MLP
# ($d \to 4d \to d$ with GELU), each inside $x + f(\mathrm{LN}(x))$. With $h$ heads, each head
# attends with its own $d/h$-dimensional queries, keys and values. Causality is easy to test:
# changing the last token must not change any earlier output.

# %%
block = nn.GPTBlock(d_model=16, nhead=4)
x = tl.randn(1, 5, 16)
changed = tl.cat([x[:, :4], tl.randn(1, 1, 16)], dim=1)
same = np.allclose(block(x)[0, :4].detach().numpy(), block(changed)[0, :4].detach().numpy())
print("earlier positions unchanged:", same)
print(sum(p.numel() for p in block.parameters()), "parameters in one block")

# %% [markdown]
# ## 5. A tiny GPT on Shakespeare
#
# Characters in, next-character logits out: `nn.GPT` adds a token embedding and a learned
# position embedding, runs the blocks, and scores the 65 characters with a head whose weight
# *is* the token embedding (weight tying). Each training window of $T$ characters gives $T$
# predictions at once. A few hundred steps of a small model already learn words and the
# speaker-colon-newline layout (the full-size run is `python -m torchlight.train --dataset
# shakespeare --model gpt`, about 10 minutes).

# %%
text = load_text("shakespeare")
chars = CharTokenizer(text)
ids = chars.encode(text[:200_000])
windows = TextWindows(ids, block_size=32, stride=32)
print(len(text), "characters;", chars.vocab_size, "distinct;", len(windows), "training windows")

tl.manual_seed(0)
gpt = nn.GPT(chars.vocab_size, block_size=32, d_model=48, nhead=4, num_layers=2)
optimizer = optim.Adam(gpt.parameters(), lr=3e-3)
loader = DataLoader(windows, batch_size=32, shuffle=True, seed=0)
step = 0
for epoch in range(2):
    for xb, yb in loader:
        logits = gpt(xb)
        loss = F.cross_entropy(logits.reshape(-1, chars.vocab_size), yb.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.2f} nats/char")

# %% [markdown]
# (A model that knew nothing would score $\ln 65 \approx 4.17$; one that only knew how often
# each character follows the previous one, about 2.5.)
#
# ## 6. What the heads look at
#
# The weights of each head of the first block for one line of text: row $i$ shows where
# position $i$ looked (darker: more weight). The upper triangle is empty: the causal mask.
# Some heads look at the previous character or two; others spread over the word so far.

# %% jupyter={"source_hidden": true}
from torchlight.viz import Picture  # an SVG that JupyterLab shows before the cell runs


def heatmaps(maps, labels, scale=11):
    """SVG: each (L, L) map of weights in [0, 1] as grey squares, labelled by characters."""
    parts, x0, n = [], 0, len(labels)
    for m in maps:
        for i in range(n):
            for j in range(n):
                level = int(round(255 * (1 - m[i, j])))
                parts.append(f'<rect x="{x0 + j * scale}" y="{i * scale + 12}" width="{scale}" '
                             f'height="{scale}" fill="#{level:02x}{level:02x}{level:02x}"/>')
        for j, c in enumerate(labels):
            parts.append(f'<text x="{x0 + j * scale + 2}" y="10">{"_" if c == " " else c}</text>')
        x0 += n * scale + 14
    return Picture(f'<svg xmlns="http://www.w3.org/2000/svg" width="{x0}" height="{n * scale + 14}" '
               f'shape-rendering="crispEdges" font-family="monospace" font-size="9">{"".join(parts)}</svg>')


# %%
line = "ROMEO:\nBut soft, what light"
idx = tl.tensor([chars.encode(line)])
gpt.eval()
with tl.no_grad():
    h = gpt.token_embedding(idx) + gpt.position(idx)
    first = gpt.block0
    normed = first.ln1(h)
    _, weights = first.attn(normed, normed, normed, is_causal=True, average_attn_weights=False)
heatmaps([weights[0, i].numpy() for i in range(4)], line)

# %% [markdown]
# ## 7. Generating text
#
# To generate, feed a prompt, take the logits at the last position, divide by a
# *temperature* (below 1: safer choices), keep the `top_k` likeliest characters, sample one,
# append it, and repeat (`torchlight.train.generate.generate`, also `python -m torchlight.train.generate`):

# %%
tl.manual_seed(1)
sample = generate(gpt, chars.encode("ROMEO:\n"), max_new_tokens=200, block_size=32,
                  temperature=0.8, top_k=10)
print(chars.decode(sample))

# %% [markdown]
# ## 8. Before attention: why recurrent nets forget
#
# An RNN carries information forward only through its hidden state, $h_t = \tanh(W_{hh} h_{t-1}
# + W_{ih} x_t + b)$, so the gradient of the last state with respect to an early input is a
# product of one Jacobian per step, $\prod_t \mathrm{diag}(1 - h_t^2) W_{hh}$, which shrinks
# geometrically. The LSTM's cell state is updated by *addition*, $c_t = f \odot c_{t-1} + i
# \odot g$: its gradient is scaled by the forget gate $f$ only, so with $f$ near 1 (a positive
# forget-gate bias) it survives many steps. Attention sidesteps the problem: every position
# reaches every other in one step. Here is $\lVert \partial h_{T} / \partial x_t \rVert$ for
# $T = 60$:

# %% jupyter={"source_hidden": true}
def log_plot(series, width=420, height=180):
    """SVG: lines of log10(values) over the step t, one per (label, values, colour)."""
    lo, hi = -17, 1
    left, top, plot_w, plot_h = 44, 10, width - 150, height - 40
    def xy(t, v, n):
        y = (hi - np.log10(max(v, 10.0**lo))) / (hi - lo)
        return f"{left + plot_w * t / (n - 1):.1f},{top + plot_h * y:.1f}"
    parts = []
    for e in range(lo + 1, hi + 1, 4):
        y = top + plot_h * (hi - e) / (hi - lo)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end">1e{e}</text>')
    for k, (label, values, colour) in enumerate(series):
        points = " ".join(xy(t, v, len(values)) for t, v in enumerate(values))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>'
                     f'<text x="{left + plot_w + 8}" y="{top + 14 + 16 * k}" fill="{colour}">{label}</text>')
    parts.append(f'<text x="{left}" y="{height - 8}">input step t (0 = first) of {len(values)}</text>')
    return Picture(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
               f'font-family="sans-serif" font-size="10">{"".join(parts)}</svg>')


# %%
def gradient_over_time(layer, steps=60):
    x = tl.randn(steps, 1, 8, dtype=tl.float64, requires_grad=True)
    out, _ = layer(x)
    out[-1].sum().backward()  # d h_T / d x_t for every t
    return (x.grad**2).sum((1, 2)).sqrt().numpy()


tl.manual_seed(0)
rnn, lstm, lstm_remembers = (layer.double() for layer in (nn.RNN(8, 32), nn.LSTM(8, 32), nn.LSTM(8, 32)))
with tl.no_grad():
    lstm_remembers.bias_ih_l0[32:64] = 2.0  # the forget gate's bias: f = sigmoid(2 + ...) ~ 0.9
curves = [("RNN (tanh)", gradient_over_time(rnn), "#d93025"),
          ("LSTM", gradient_over_time(lstm), "#1a73e8"),
          ("LSTM, forget bias 2", gradient_over_time(lstm_remembers), "#188038")]
for label, values, _ in curves:
    print(f"{label:20s} first step {values[0]:.1e}, last step {values[-1]:.1e}")
log_plot(curves)

# %% [markdown]
# ## Summary
#
# - Attention is $\mathrm{softmax}(QK^T/\sqrt d)\,V$: a weighted average of the values, the
#   weights from how well each query matches each key. `F.scaled_dot_product_attention` is
#   the same few ops; autograd differentiates them and `gradcheck` agrees.
# - A causal mask adds $-\infty$ above the diagonal *before* the softmax, so no position sees
#   the future and every row of weights still sums to 1.
# - LayerNorm gives each token's features mean 0 and variance 1; residual connections
#   $x + f(\mathrm{LN}(x))$ carry the signal and the gradient around every sublayer.
# - A GPT is embeddings, a stack of such blocks and a (tied) linear head, trained to predict
#   the next token; sampling with a temperature and top-k turns it into a text generator.
# - Through a recurrent net, gradients shrink geometrically with distance; the LSTM's additive
#   cell state (with its forget gate near 1) keeps them, and attention needs no long path.
#
# ## Exercises
#
# 1. Drop the $1/\sqrt d$ from `attention` and compare the softmax rows for $d = 4$ and
#    $d = 256$ on random inputs. What happens to the gradient of the scores?
# 2. Apply the causal mask *after* the softmax (zero the weights instead) and show that
#    `gradcheck` still passes but the rows no longer sum to 1.
# 3. Train the tiny GPT with `positional="sinusoidal"`, and without any position embedding
#    (hint: a zero `LearnedPositionalEmbedding`, frozen). What does the model lose?
# 4. Train an `nn.LSTMLanguageModel` on the same windows and compare the loss after the same
#    number of steps and the time per step.
# 5. Train `BPETokenizer` with 512 tokens on the corpus: how many tokens per character, and
#    what are the first ten merges?
#
# ## Next
#
# - Train the full-size model from the shell and sample from it:
#   `python -m torchlight.train --dataset shakespeare --model gpt --save gpt.ckpt`, then
#   `python -m torchlight.train.generate --checkpoint gpt.ckpt --prompt "JULIET:"`.
# - `nn.LSTM`, `nn.GRU` and `nn.RNN` are the recurrent alternative (`--model lstm`; Tutorial 7,
#   *Recurrent networks and vanishing gradients*, builds them up);
#   `nn.TransformerEncoderLayer` and `nn.MultiheadAttention` have PyTorch's signatures.
