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
# # Tutorial 8: Language models, from tokens to a trained GPT
#
# A language model predicts the next token of a text. This tutorial follows the text all the
# way in: bytes become **tokens** by byte-pair encoding, tokens become vectors by an
# **embedding** (whose gradient adds up over repeated tokens), **positions** are added,
# **causal self-attention** mixes each position with the ones before it, and a **training
# loop** (AdamW, a warm-up and cosine schedule, gradient clipping) fits a small GPT to
# Shakespeare. At the end we look at what its heads attend to, and sample from it.
#
# Assignments 6 (*Tokens and embeddings*) and 7 (*The transformer and its training loop*)
# ask you to write each of these pieces yourself.

# %%
import math

import numpy as np

import torchlight as tl
from torchlight import nn
from torchlight.data.text import load_text
from torchlight.nn import functional as F
from torchlight.train.generate import generate
from torchlight.train.tokenizers import WORD, BPETokenizer
from torchlight.viz.frames import Frames
from torchlight.viz.heatmap import attention_picture
from torchlight.viz.plots import line_chart_svg
from torchlight.viz.svg import Picture

tl.manual_seed(0)
text = load_text("shakespeare")
print(f"{len(text):,} characters; the first line: {text[:text.index(chr(10))]!r}")

# %% [markdown]
# ## 1. Bytes, then merges
#
# Every text is a sequence of UTF-8 bytes, so 256 tokens can encode anything, in any
# alphabet, with no "unknown" token. Byte-pair encoding (BPE) then *learns* bigger tokens:
# count every adjacent pair of tokens in the corpus, merge the most frequent pair into a new
# token, and repeat. Merges never cross the pieces of a simple pre-split (a word with its
# leading space, a number, punctuation, a run of spaces), so `" the"` can become one token
# but `"e t"` never does:

# %%
print(WORD.findall("Thou art,  thou art 2 wise 🙂\n"))

sample = text[:100_000]
bpe = BPETokenizer.train(sample, vocab_size=400)
for k, (a, b) in enumerate(bpe.merges[:8]):
    print(f"merge {k}: {bpe.vocab[a]!r} + {bpe.vocab[b]!r} -> token {256 + k} {bpe.vocab[256 + k]!r}")

# %% [markdown]
# **What training costs.** Each merge needs the count of every adjacent pair, and the counts
# change after every merge. Recounting the pairs of the whole corpus each time reads every token
# of it once per merge; but a corpus repeats its pieces, so counting over the *distinct* pieces,
# each weighted by how often it occurs, reads far fewer (the library does that). Fastest of all,
# count once and then, after each merge, update the counts only in the pieces that contain the
# merged pair. Assignment 6 grades that speed on a corpus of 1 MB: the whole-corpus recount
# takes over 100x the reference's time there, the recount over distinct pieces about 10x, the
# updated counts about 1x.

# %%
pieces = WORD.findall(sample)
print(f"{len(sample.encode()):,} bytes, {len(pieces):,} pieces, {len(set(pieces)):,} distinct pieces")

# %% [markdown]
# Ties matter: when two pairs are equally frequent, the library (and assignment 6) merges the
# smallest pair (compare the tuples of ids), so everyone trains the same merges. Encoding
# applies the merges to each piece in the order they were learned; decoding joins the bytes
# of the tokens and decodes UTF-8 once, at the end (one character can be split over two
# tokens). The round trip is exact, even for characters the merges never saw:

# %%
line = "ROMEO:\nBut soft, what light through yonder window breaks?"
ids = bpe.encode(line)
print(len(line), "characters ->", len(ids), "tokens:", [bpe.vocab[i].decode("utf-8", "replace") for i in ids])
for probe in (line, "naïve café, 東京 🙂"):
    print("round trip:", bpe.decode(bpe.encode(probe)) == probe)
held_out = text[1_300_000:1_320_000]
print(f"held-out text: {len(held_out.encode()) / len(bpe.encode(held_out)):.2f} bytes per token")

# %% [markdown]
# ## 2. Embeddings: a lookup, and a gradient that adds up
#
# An embedding is a table $W$ of shape $(V, D)$: token $v$ reads row $v$. As a matrix product,
# the lookup of ids with one-hot rows $H$ is $HW$, so $\partial L / \partial W = H^\top G$: a
# row read three times collects three gradients.

# %%
table = tl.randn(6, 3, requires_grad=True)
ids = tl.tensor([[2, 0, 2], [2, 5, 1]])
(table[ids] * tl.tensor([1.0, 10.0, 100.0])).sum().backward()
print("row 2 was read 3 times:", table.grad[2].tolist())
print("row 3 never:           ", table.grad[3].tolist())

# %% [markdown]
# ## 3. Positions
#
# Attention treats its inputs as a set: shuffle the tokens and each output shuffles with them.
# So the model adds a vector for each position: a learned one (GPT-2), or the fixed sines and
# cosines of "Attention is all you need", $P[t, 2i] = \sin(t / 10000^{2i/D})$,
# $P[t, 2i+1] = \cos(t / 10000^{2i/D})$: fast waves in the first columns, slow ones in the last,
# so nearby positions get similar vectors (grey is 0, black +1, white -1, shown as $(P + 1)/2$):

# %%
P = nn.SinusoidalPositionalEncoding(24, 24)(tl.zeros(1, 24, 24)).numpy()
attention_picture([(P + 1) / 2], [str(t % 10) for t in range(24)], titles=["P[t, :] for t = 0..23 (rows)"], cell=9)

# %%
similarity = P @ P.T
print("P[5] is closest to positions", np.argsort(-similarity[5])[:3].tolist())

# %% [markdown]
# ## 4. Causal self-attention, by hand
#
# Each position projects to a query, a key and a value; with $H$ heads each gets $D/H$
# features. Scores $QK^\top/\sqrt{D/H}$ get $-\infty$ above the diagonal (position $t$ sees
# positions $0..t$), a softmax makes each row a distribution, and the values are averaged.
# The library's `F.scaled_dot_product_attention(..., is_causal=True)` is the same few ops:

# %%
def causal_self_attention(x, qkv, out, nhead):
    n, t, c = x.shape
    q, k, v = (part.reshape(n, t, nhead, c // nhead).permute(0, 2, 1, 3)
               for part in qkv(x).split(c, dim=-1))
    future = np.triu(np.ones((t, t), dtype=bool), k=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(c // nhead) + tl.tensor(np.where(future, -np.inf, 0.0))
    weights = scores.softmax(-1)
    return out((weights @ v).permute(0, 2, 1, 3).reshape(n, t, c)), weights


qkv, out = nn.Linear(16, 48), nn.Linear(16, 16)
x = tl.randn(2, 5, 16)
mine, weights = causal_self_attention(x, qkv, out, nhead=4)
q, k, v = (part.reshape(2, 5, 4, 4).permute(0, 2, 1, 3) for part in qkv(x).split(16, dim=-1))
library = out(F.scaled_dot_product_attention(q, k, v, is_causal=True).permute(0, 2, 1, 3).reshape(2, 5, 16))
print("same as the library's:", np.allclose(mine.detach().numpy(), library.detach().numpy()))
print("row 0 looks only at itself:", weights[0, 0, 0].detach().numpy().round(3))

# %% [markdown]
# ## 5. The training loop
#
# The GPT of `nn.GPT` stacks pre-norm blocks, $x + \mathrm{Attn}(\mathrm{LN}(x))$ then
# $x + \mathrm{MLP}(\mathrm{LN}(x))$, between the embeddings and a head tied to the token table.
# Three things make it train well:
#
# - **AdamW**: Adam's step, and a weight decay *decoupled* from it: $p \leftarrow p(1 - \eta\lambda)$
#   directly, instead of adding $\lambda p$ to the gradient (where Adam would divide it by
#   $\sqrt{v}$ like the rest);
# - **warm-up and cosine decay**: a learning rate that climbs linearly for the first steps
#   (Adam's second moments are still poor estimates), then follows half a cosine down;
# - **clipping by the global norm**: when all gradients together are longer than a limit, all
#   are scaled by the same factor, so the step keeps its direction.
#
# We train on the characters of the first 90% of the text (65 tokens: the model stays small
# and quick here), with a block of 32 characters.

# %%
chars = sorted(set(text))
lookup = {c: i for i, c in enumerate(chars)}
data = np.array([lookup[c] for c in text])
split = int(0.9 * len(data))
VOCAB, BLOCK, STEPS, WARMUP, MAX_LR, MIN_LR = len(chars), 32, 300, 20, 1e-2, 1e-3


def lr_at(step):
    if step < WARMUP:
        return MAX_LR * (step + 1) / WARMUP
    ratio = (step - WARMUP) / (STEPS - WARMUP)
    return MIN_LR + 0.5 * (1 + math.cos(math.pi * ratio)) * (MAX_LR - MIN_LR)


def batch(ids, rng, size=16):
    starts = rng.integers(0, len(ids) - BLOCK - 1, size=size)
    windows = np.stack([ids[s : s + BLOCK + 1] for s in starts])
    return tl.tensor(windows[:, :-1]), tl.tensor(windows[:, 1:])


tl.manual_seed(0)
rng = np.random.default_rng(0)
gpt = nn.GPT(VOCAB, block_size=BLOCK, d_model=48, nhead=4, num_layers=2)
optimizer = tl.optim.AdamW(gpt.parameters(), lr=MAX_LR, betas=(0.9, 0.99), weight_decay=0.01)
losses, norms = [], []
for step in range(STEPS):
    x, y = batch(data[:split], rng)
    loss = F.cross_entropy(gpt(x).reshape(-1, VOCAB), y.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    norms.append(float(nn.utils.clip_grad_norm_(gpt.parameters(), 1.0)))
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step)
    optimizer.step()
    losses.append(loss.item())
    if step % 100 == 0 or step == STEPS - 1:
        print(f"step {step}: loss {loss.item():.3f}, lr {lr_at(step):.4f}, gradient norm {norms[-1]:.2f}")

# %%
Picture(line_chart_svg([("training loss", losses, "#1a73e8")], width=420, title="loss (nats per character)"))

# %% [markdown]
# The loss starts at $\ln 65 \approx 4.17$ (a uniform guess). Knowing only how often each
# character occurs would give 3.32; the held-out loss below says the model already knows which
# characters follow which:

# %%
gpt.eval()
x, y = batch(data[split:], np.random.default_rng(1), size=64)
with tl.no_grad():
    held = F.cross_entropy(gpt(x).reshape(-1, VOCAB), y.reshape(-1)).item()
print(f"held-out loss: {held:.3f} nats per character")

# %% [markdown]
# ## 6. What the heads look at
#
# The attention weights of every head of both blocks for one line: row $t$ shows where
# position $t$ looked (darker: more weight). The upper triangle is empty: the causal mask.
# Click a head's label to see its pattern (the viewer is plain HTML: it works in a stored
# notebook and on the docs site too). Some heads look mostly at the character itself or the
# one before; others spread over the word so far; the second block reads the first one's
# output, mixed already.

# %%
line = "JULIET:\nO Romeo, Romeo!"
idx = tl.tensor([[lookup[c] for c in line]])
heads = []  # (layer, head, its weights)
with tl.no_grad():
    h = gpt.token_embedding(idx) + gpt.position(idx)
    for layer in range(2):
        block = getattr(gpt, f"block{layer}")
        normed = block.ln1(h)
        _, weights = block.attn(normed, normed, normed, is_causal=True, average_attn_weights=False)
        heads += [(layer, i, weights[0, i].numpy()) for i in range(4)]
        h = block(h)  # what the next block reads
Frames([(f"layer {layer}, head {i}: {np.mean(np.diag(w, k=-1)):.0%} of its weight on the previous character",
         attention_picture([w], list(line), titles=[f"layer {layer}, head {i}"], cell=10))
        for layer, i, w in heads], title="attention weights, head by head")  # fmt: skip

# %%
previous = [float(np.mean(np.diag(w, k=-1))) for layer, i, w in heads if layer == 0]
print("mean weight on the previous character, per head of block 0:", np.round(previous, 2).tolist())

# %% [markdown]
# ## 7. Sampling
#
# Feed a prompt, take the logits at the last position, divide by a temperature, keep the
# likeliest few, sample one, append it, repeat:

# %%
tl.manual_seed(2)
ids = generate(gpt, [lookup[c] for c in "ROMEO:\n"], max_new_tokens=160, block_size=BLOCK, temperature=0.8, top_k=8)
print("".join(chars[i] for i in ids))

# %% [markdown]
# ## Summary
#
# - Byte-level BPE encodes any text exactly: 256 byte tokens, then merges of the most frequent
#   pair (ties to the smallest pair), applied in the order they were learned; decode the
#   joined bytes once.
# - An embedding is a lookup, $HW$ with one-hot rows $H$; its gradient $H^\top G$ adds up the
#   gradients of every position that read a row.
# - Positions are added, learned or sinusoidal: attention alone does not know the order.
# - Causal self-attention adds $-\infty$ above the diagonal before the softmax; heads split the
#   features; a pre-norm block keeps the residual stream an identity.
# - AdamW decays the weights outside Adam's step; a warm-up and cosine schedule and clipping
#   by the global norm keep training steady.
#
# ## Exercises
#
# 1. Train the tokenizer with ties going to the *largest* pair instead: from which merge on do
#    the merges differ on this corpus?
# 2. Train the GPT without the warm-up (`WARMUP = 0`, the first step at `MAX_LR`): compare the
#    first 50 losses.
# 3. Move the weight decay into the gradient (Adam with L2) with $\lambda = 0.1$ and compare
#    the norms of the trained weights with AdamW's.
# 4. Clip each gradient by its own norm and compare the direction of the step with the global
#    clipping (the cosine between the two).
# 5. Train on BPE tokens (`bpe.encode`) instead of characters: the loss is per token now; divide
#    by the bytes per token to compare with the character model.
#
# ## Next
#
# Tutorial 9 (*Inference and efficiency*) serves this model: a KV cache, sampling, quantization.
