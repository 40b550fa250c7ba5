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
# # Tutorial 9: Inference and efficiency
#
# Training a model is half the work; serving it is the other half. Text comes out one token at
# a time, and each token should cost as little as possible, from a model that fits in memory.
# This tutorial measures five techniques that every large model relies on:
#
# 1. a **KV cache**: each new token costs one row of attention, not a pass over the prefix;
# 2. **sampling** with temperature, top-k and top-p from a seeded generator;
# 3. **int8 quantization** of a layer's weights, one scale per output channel;
# 4. **mixed precision**: float16 storage, loss scaling, float32 master weights;
# 5. **activation checkpointing**: recompute activations in backward instead of keeping them.
#
# Assignment 8 (`a8_inference`) asks you to write each of them; here we look at why they work
# and what they buy.

# %%
import time
import tracemalloc

import numpy as np

import torchlight as tl
from torchlight.utils.checkpoint import checkpoint
from torchlight.viz import Frames, Picture  # HTML and SVG that show before the cell runs

tl.manual_seed(0)
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Generating with a KV cache
#
# A causal self-attention layer turns each position $t$ into a query $q_t = x_t W_Q$, a key
# $k_t = x_t W_K$ and a value $v_t = x_t W_V$, and outputs
# $\mathrm{softmax}(q_t K_{\le t}^T / \sqrt{d})\, V_{\le t}$. When we generate, position $t$'s
# output needs the keys and values of positions $\le t$, and **those never change** once
# computed (the mask keeps every earlier position blind to later ones). Recomputing the whole
# prefix for every new token repeats all of that work: $O(T)$ rows of projections and $O(T^2)$
# scores per token. A cache keeps $K$ and $V$, and the new token adds one row to each and
# computes one row of attention: $O(T)$.
#
# One attention layer, both ways:

# %%
d = 16
w_q, w_k, w_v = (tl.tensor(rng.normal(size=(d, d)) / d**0.5) for _ in range(3))


def attend_all(x):
    """Every position's output, the prefix recomputed (what a model without a cache does)."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    t = x.shape[0]
    scores = q @ k.T / d**0.5 + tl.tensor(np.triu(np.full((t, t), -np.inf), 1))
    return scores.softmax(-1) @ v


def attend_next(x_new, cache):
    """The new position's output from its own row and the cached keys and values."""
    q = x_new @ w_q
    cache["k"] = tl.cat([cache["k"], x_new @ w_k]) if "k" in cache else x_new @ w_k
    cache["v"] = tl.cat([cache["v"], x_new @ w_v]) if "v" in cache else x_new @ w_v
    return (q @ cache["k"].T / d**0.5).softmax(-1) @ cache["v"]


x = tl.tensor(rng.normal(size=(12, d)))
cache = {}
rows = [attend_next(x[t : t + 1], cache) for t in range(12)]
print("largest difference, cache vs recomputation:",
      np.abs(tl.cat(rows).numpy() - attend_all(x).numpy()).max())  # fmt: skip

# %% [markdown]
# The same numbers, to the last few bits. Here is the cache growing token by token: at step
# $t$ the new token brings one key and one value (orange), and its single query (blue) is
# compared with every key in the cache (grey: computed at earlier steps, never again). Click
# the steps in turn to step through it (plain HTML: it works on the docs site too).

# %% jupyter={"source_hidden": true}
def cache_picture(steps, cell=16):
    """SVG: one row per step: the query, then the cached keys, the newest in orange."""
    parts = []
    for t in range(1, steps + 1):
        y = 8 + (t - 1) * (cell + 6)
        parts.append(f'<text x="0" y="{y + cell - 4}">step {t}</text>'
                     f'<rect x="52" y="{y}" width="{cell}" height="{cell}" fill="#1a73e8"/>'
                     f'<text x="{56 + cell}" y="{y + cell - 4}">q</text>')
        for j in range(t):
            colour = "#f29900" if j == t - 1 else "#bdbdbd"
            parts.append(f'<rect x="{90 + j * (cell + 2)}" y="{y}" width="{cell}" height="{cell}" '
                         f'fill="{colour}"/>')
        parts.append(f'<text x="{96 + t * (cell + 2)}" y="{y + cell - 4}">K, V: {t} rows</text>')
    height = 14 + steps * (cell + 6)
    width = 200 + steps * (cell + 2)
    return Picture(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                   f'font-family="sans-serif" font-size="11">{"".join(parts)}</svg>',
                   alt="the KV cache growing token by token")


prompt = "To be, or"
Frames([(f"step {t}: {prompt[t - 1]!r} arrives; the cache holds {t} keys and values, the query "
         f"is compared with {t}", cache_picture(t)) for t in range(1, len(prompt) + 1)],
       title="the KV cache, token by token")  # fmt: skip

# %% [markdown]
# What it buys, per generated token, as the prefix grows (one layer, $d = 16$; time of the
# recomputation of the whole prefix, then of one cached step). The recomputation grows with
# the prefix, the cached step barely does. `benchmarks/bench_kv_cache.py` measures the same for
# the library's GPT, prefixes 16 to 512.

# %% tags=["nbval-ignore-output"]
def per_token(fn, repeat=20):
    fn()  # warm up
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


print(f"{'prefix':>6} {'recompute ms':>13} {'cached ms':>10} {'ratio':>6}")
for prefix in (16, 64, 256, 1024):
    x = tl.tensor(rng.normal(size=(prefix + 1, d)))
    cache = {}
    for t in range(prefix):
        attend_next(x[t : t + 1], cache)
    full = {"k": cache["k"], "v": cache["v"]}

    def recompute(x=x):
        attend_all(x)  # every row again, to get the last one

    def cached(x=x, prefix=prefix, full=full):
        attend_next(x[prefix:], dict(full))  # one step from the cache of the prefix

    slow, fast = per_token(recompute), per_token(cached)
    print(f"{prefix:>6} {slow * 1e3:>13.3f} {fast * 1e3:>10.3f} {slow / fast:>6.1f}")

# %% [markdown]
# (Timings vary from machine to machine; what matters is the trend. The notebook's regression
# test ignores these numbers.)
#
# In a GPT every block has its own cache, and one more detail matters: the new token's
# **position** is the number of tokens already in the cache. Use position 0 for every new
# token, and each step still runs, but the logits are wrong from the second token on.
#
# ## 2. Sampling: temperature, top-k, top-p
#
# The model gives logits $z$; the next token is drawn from $p = \mathrm{softmax}(z/\tau)$.
# The **temperature** $\tau$ divides the logits *before* the softmax: below 1 it sharpens the
# distribution (safer text), above 1 it flattens it (wilder text). Dividing the probabilities
# afterwards would change nothing once they are renormalized.

# %%
words = np.array(["the", "a", "king", "queen", "sword", "night", "love", "ghost"])
z = np.array([3.0, 2.5, 1.6, 1.5, 0.4, 0.2, -0.5, -1.5])


def softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


print("token  " + " ".join(f"{w:>6}" for w in words))
for tau in (0.5, 1.0, 2.0):
    print(f"tau={tau:<3} " + " ".join(f"{p:6.3f}" for p in softmax(z / tau)))

# %% [markdown]
# **Top-k** keeps the $k$ most likely tokens. **Top-p** (nucleus sampling) keeps the smallest
# set of most likely tokens whose probabilities add up to at least $p$: sort, take the
# cumulative sum, and keep up to and including the token where it first reaches $p$. With a
# confident model that is a handful of tokens, with an unsure one many more; top-k keeps $k$
# either way.

# %%
p = softmax(z)
order = np.argsort(-p, kind="stable")
cumulative = np.cumsum(p[order])
for word, c in zip(words[order], cumulative, strict=True):
    print(f"{word:>6}: cumulative {c:.3f}")
kept = int(np.searchsorted(cumulative, 0.9)) + 1
print("top-p 0.9 keeps", [str(w) for w in words[order[:kept]]])

# %% [markdown]
# Drawing from a seeded `np.random.Generator` makes generation reproducible: one uniform number
# per token and the inverse of the cumulative distribution, which is what
# `generator.choice(len(p), p=p)` does. The same seed gives the same text.

# %%
print([str(w) for w in np.random.default_rng(42).choice(words, size=8, p=p)])
print([str(w) for w in np.random.default_rng(42).choice(words, size=8, p=p)])

# %% [markdown]
# ## 3. int8 weights
#
# A float64 weight takes 8 bytes, a float32 one 4, an int8 one 1. **Symmetric quantization**
# stores $q = \mathrm{round}(w / s)$ in $[-127, 127]$ with a scale $s = \max|w| / 127$, and
# uses $q s$ in place of $w$; each weight moves by at most $s/2$. One scale for the whole
# matrix is simplest:

# %%
def quantize(w):
    """One scale for all of ``w``: codes in [-127, 127], rounded to the nearest."""
    scale = np.abs(w).max() / 127
    return np.clip(np.rint(w / scale), -127, 127).astype(np.int8), scale


# A trained layer's rows (output channels) often differ in size by orders of magnitude:
layer = tl.nn.Linear(64, 32)
weight = layer.weight.detach().numpy() * rng.choice([0.02, 0.2, 1.0, 4.0], size=(32, 1))
q, scale = quantize(weight)
per_tensor = np.abs(q * scale - weight).max(axis=1) / np.abs(weight).max(axis=1)
# One scale per output channel: quantize each row on its own.
rows = [quantize(row) for row in weight]
per_channel = np.array([np.abs(q_r * s_r - row).max() / np.abs(row).max()
                        for (q_r, s_r), row in zip(rows, weight, strict=True)])  # fmt: skip
print(f"worst relative error of a row: one scale {per_tensor.max():.3f}, "
      f"one per row {per_channel.max():.4f}")
print(f"bytes: float64 {weight.nbytes}, int8 {q.nbytes} + {len(rows) * 8} for the scales")

# %% [markdown]
# With one scale, the small rows use only a few of the 255 codes (the biggest row sets the
# step), so their relative error is large; with a scale per row, every row uses the whole
# range. The histograms show it for the smallest row: its float weights, then its codes with
# one scale for the matrix, then with its own scale, then the weights those codes give back.
# Click a label to switch between them.

# %% jupyter={"source_hidden": true}
def histogram(values, bins, colour, title, width=230, height=110):
    counts, edges = np.histogram(values, bins=bins)
    top = max(counts.max(), 1)
    bar = (width - 20) / len(counts)
    parts = [f'<text x="10" y="12">{title}</text>']
    for i, c in enumerate(counts):
        h = (height - 40) * c / top
        parts.append(f'<rect x="{10 + i * bar:.1f}" y="{height - 20 - h:.1f}" '
                     f'width="{max(bar - 1, 1):.1f}" height="{h:.1f}" fill="{colour}"/>')
    parts.append(f'<text x="10" y="{height - 6}">{edges[0]:.3g}</text>'
                 f'<text x="{width - 10}" y="{height - 6}" text-anchor="end">{edges[-1]:.3g}</text>')
    return f'<g>{"".join(parts)}</g>', width


def histogram_picture(panel):
    g, width = panel
    return Picture(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="110" '
                   f'font-family="sans-serif" font-size="10">{g}</svg>',
                   alt="a row's weights before or after int8 quantization")


small = int(np.argmin(np.abs(weight).max(axis=1)))
codes, scale = rows[small]
Frames([
    ("before: the float weights", histogram_picture(
        histogram(weight[small], 24, "#1a73e8", f"row {small}: float weights"))),
    ("after, one scale for the matrix: few of the 255 codes used", histogram_picture(
        histogram(q[small], np.arange(-128, 129, 8), "#d93025", "int8 codes, one scale"))),
    ("after, a scale per row: the whole range used", histogram_picture(
        histogram(codes, np.arange(-128, 129, 8), "#188038", "int8 codes, its own scale"))),
    ("after, decoded: codes x scale, next to the float weights", histogram_picture(
        histogram(codes * scale, 24, "#188038", f"row {small}: int8 x its scale"))),
], title=f"row {small}'s weights before and after int8 quantization")  # fmt: skip

# %% [markdown]
# The layer's output moves by at most $\tfrac{s_i}{2}\sum_j |x_j|$ in output $i$; in practice
# far less, since the rounding errors have both signs:

# %%
x = rng.normal(size=(8, 64))
scales = np.array([s for _, s in rows])
codes = np.stack([q_r for q_r, _ in rows])
exact, approx = x @ weight.T, x @ (codes * scales[:, None]).T
bound = np.abs(x).sum(1, keepdims=True) * scales / 2
print(f"largest error {np.abs(exact - approx).max():.2e}, largest bound {bound.max():.2e}")

# %% [markdown]
# ## 4. Mixed precision
#
# float16 halves the memory of float32 (and modern accelerators compute with it many times
# faster), but its range is narrow:

# %%
info = np.finfo(np.float16)
print(f"float16: largest {info.max}, smallest normal {info.tiny}, epsilon {info.eps}")
print("a gradient of 1e-8 in float16:", np.float16(1e-8))
print("the same, scaled by 2**16 first:", np.float16(1e-8 * 2**16), "-> / 2**16 in float32:",
      np.float32(np.float16(1e-8 * 2**16)) / 2**16)  # fmt: skip
print("1.0 + 1e-4 in float16:", np.float16(1.0) + np.float16(1e-4))

# %% [markdown]
# Two fixes follow. **Loss scaling**: multiply the loss by $S$ before backward, so the small
# gradients land in float16's range, and divide by $S$ (in float32) before the update.
# **Master weights**: keep a float32 copy of the weights and apply the updates there, since a
# small update added to a float16 weight rounds away (last line above); cast it to float16 for
# the next forward. $S$ is **dynamic**: a gradient that overflows (inf or nan) means $S$ is
# too big, so the step is skipped and $S$ halved; after a run of good steps $S$ doubles.
#
# A least-squares fit with float16 weights and gradients, starting from a scale so large that
# the first gradients overflow:

# %%
features = rng.normal(size=(64, 4)).astype(np.float16)
target = features.astype(np.float32) @ np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32)
master = np.zeros(4, dtype=np.float32)
scale, good, history = 2.0**24, 0, []
for _ in range(60):
    w16 = master.astype(np.float16)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is what we test for
        residual = features @ w16 - target.astype(np.float16)  # forward in float16
        scaled_grad = (features.T @ (residual * np.float16(scale / 32))).astype(np.float16)
    if not np.all(np.isfinite(scaled_grad)):
        scale, good = scale / 2, 0  # overflow: skip this step, lower the scale
    else:
        master -= np.float32(0.1) * (scaled_grad.astype(np.float32) / np.float32(scale))
        good += 1
        if good == 10:
            scale, good = scale * 2, 0
    history.append(scale)
print("loss scale over the steps:", [int(np.log2(s)) for s in history[::4]], "(log2)")
print("weights:", master, "loss:", float(np.mean((features @ master - target) ** 2)))

# %% [markdown]
# The scale falls until nothing overflows, then doubles after every 10 good steps; at the next
# overflow it is halved again, so it stays near the largest scale float16 can take, and the
# weights reach the least-squares solution although no gradient was ever stored in float32.
#
# ## 5. Activation checkpointing
#
# Backward needs what forward computed: every op keeps its inputs or outputs until backward
# has used them, so training memory grows with depth and batch size.
# `torchlight.utils.checkpoint.checkpoint(fn, *inputs)` (PyTorch's name) runs `fn` without
# recording a graph and keeps only its inputs; its backward runs `fn` again, recording this
# time, and backpropagates through that. Memory for compute: one more forward pass.
#
# A stack of 16 tanh layers, checkpointed in segments of 4, measured with `tracemalloc` (which
# sees numpy's allocations): the peak memory of forward and backward, with and without.

# %%
width, depth = 256, 16
layers = [tl.nn.Linear(width, width) for _ in range(depth)]
batch = tl.tensor(rng.normal(size=(256, width)), requires_grad=True)


def segment(x, part):
    for layer in part:
        x = layer(x).tanh()
    return x


def train_step(checkpointed):
    x = batch
    for start in range(0, depth, 4):
        part = layers[start : start + 4]
        x = checkpoint(lambda t, part=part: segment(t, part), x) if checkpointed else segment(x, part)
    x.sum().backward()
    return [layer.weight.grad.numpy().copy() for layer in layers]


results = {}
for checkpointed in (False, True):
    for layer in layers:
        layer.zero_grad()
    tracemalloc.start()
    start = time.perf_counter()
    grads = train_step(checkpointed)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    results[checkpointed] = (peak, seconds, grads)
    print(f"checkpointed={checkpointed!s:5}: peak {peak / 2**20:5.1f} MiB, {seconds:.2f} s")
same = max(np.abs(a - b).max() for a, b in zip(results[False][2], results[True][2], strict=True))
print(f"largest gradient difference: {same}")
print(f"memory saved: {1 - results[True][0] / results[False][0]:.0%}")

# %% [markdown]
# The gradients are the same to the last bit (the same ops run in the same order); the peak
# memory falls by the activations inside the segments, and the time grows by about one more
# forward pass (plus `tracemalloc`'s own overhead here).
#
# ## Summary
#
# - A **KV cache** keeps every layer's keys and values; a new token adds one row to each and
#   computes one row of attention, at the position after the cached tokens. Same logits,
#   per-token cost that barely grows with the prefix.
# - **Temperature** divides the logits before the softmax; **top-k** keeps the $k$ likeliest
#   tokens; **top-p** keeps the fewest likeliest tokens whose probabilities reach $p$ (the one
#   that crosses $p$ included). A seeded generator and the inverse CDF reproduce the draws.
# - **int8 quantization** stores $\mathrm{round}(w/s)$ with $s = \max|w|/127$; one scale per
#   output channel keeps small rows precise; each weight moves by at most $s/2$.
# - **Mixed precision** stores float16, scales the loss so that small gradients survive,
#   unscales and updates float32 master weights, and halves the scale (skipping the step) on
#   overflow.
# - **Activation checkpointing** keeps a segment's inputs only and recomputes its activations
#   in backward: the same gradients for less memory and one more forward pass.
#
# ## Exercises
#
# 1. Give `attend_next` several heads (split $d$ into $H$ parts) and check it against
#    `tl.nn.MultiheadAttention` with `is_causal=True`, row by row.
# 2. How does the KV cache's memory grow with the prefix, the number of layers and heads? Work
#    it out for a GPT-2-sized model (12 layers, $d = 768$, 1024 tokens, float16).
# 3. Quantize with a scale per *group* of 16 weights in each row: how does the error compare
#    with one scale per row, and how many bytes do the scales cost?
# 4. Replace float16 with bfloat16 (8 exponent bits: emulate it by zeroing the low 16 bits of
#    a float32). Is loss scaling still needed for the least-squares fit?
# 5. Checkpoint every layer instead of every 4: what happens to the peak memory and the time?
#    Where is the optimum for $n$ layers (hint: $\sqrt n$ segments)?
#
# ## Next
#
# - The `assignments/` folder has assignment 8 (`a8_inference`): a KV cache for the library's
#   GPT (`decode_step`), the sampling distribution and the seeded draw, per-channel int8
#   quantization, the loss-scaling step and a checkpointing `Function` of your own, graded
#   against the full forward pass, a reference sampler, exact codes, a step-by-step reference
#   and central differences.
# - `benchmarks/bench_kv_cache.py` times generation with and without the cache on the
#   library's GPT.
