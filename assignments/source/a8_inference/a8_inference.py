# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 8: Inference and efficiency
#
# A trained model still has to be *served*: text generated one token at a time, fast, from a
# model that fits in memory. Five techniques do most of that work, and you write each one:
#
# 1. a **KV cache**, so that each new token costs one query row of attention instead of a
#    forward pass over the whole prefix;
# 2. **sampling** with temperature, top-k and top-p, from a seeded generator;
# 3. **int8 weight quantization** of a Linear layer, one scale per output channel;
# 4. **mixed precision**: float16 storage with dynamic loss scaling and float32 master weights;
# 5. **activation checkpointing**: a `Function` that recomputes its forward in backward.
#
# Tutorial 9 (*Inference and efficiency*) teaches each of them with pictures and measurements.
#
# **How you are graded.** Hidden checks on fresh random inputs: the KV cache against the full
# forward pass of the library's GPT to $10^{-12}$ (float64), the sampling distributions exactly
# as stated below, the same draws as a reference from the same seeded generator, the quantized
# codes exactly, the loss-scaling state step by step, the checkpoint's gradients against a
# reference checked with central differences. Use plain tensor and numpy math: the library has
# no cache, quantizer or checkpoint to call, and an answer that reaches for its sampler
# (`torchlight.train.generate`) scores nothing there and is flagged.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import numpy as np

import torchlight as tl
from torchlight.autograd import Function, gradcheck
from torchlight.nn import functional as F
from torchlight.testing import assert_close

tl.manual_seed(0)

# %% [markdown] nbgrader={"grade": false, "grade_id": "kv_cache_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. A KV cache for the library's GPT
#
# `tl.nn.GPT` computes, in every block, keys and values for *all* positions and then attends.
# When generating, the keys and values of the earlier tokens never change: keep them, and each
# new token needs only its own query, key and value, and one row of attention over the cache.
#
# Write `KVCache(num_layers)`: per layer, the keys and the values seen so far, each a tensor of
# shape $(1, H, T, d_h)$ ($H$ heads of $d_h = d/H$ features, $T$ tokens so far);
# `cache.append(layer, k, v)` appends one step's $(1, H, 1, d_h)$ key and value (or, the first
# time, any number of positions) along the token dimension and returns the layer's keys and
# values, and `cache.length` is the number of tokens the cache holds.
#
# Then `decode_step(model, token, cache)`: the logits, shape $(V,)$, that `model` gives at the
# position after the tokens in `cache` when the next token is `token` (an int); it appends the
# token's keys and values to the cache. What the GPT's forward does, for one new token:
#
# - $x$ = `model.token_embedding.weight[token]` + `model.position.weight[position]`, where the
#   new token's **position is the number of tokens already in the cache**, as a $(1, 1, d)$ tensor;
# - for each block `model._modules[f"block{i}"]`: $h$ = `block.ln1(x)`; the query, key and value
#   are the three $d$-row slices of `F.linear(h, attn.in_proj_weight, attn.in_proj_bias)`
#   (`attn = block.attn`; queries first, then keys, then values), each split into heads as
#   $(1, H, 1, d_h)$; append $k, v$ to the cache; attend with the one query over *all* cached
#   keys, `softmax(q @ K^T / sqrt(d_h)) @ V` (no mask: the cache holds only the past); merge the
#   heads back to $(1, 1, d)$, $x \leftarrow x + $ `attn.out_proj(...)`; then
#   $x \leftarrow x + $ `block.proj(F.gelu(block.fc(block.ln2(x)), approximate="tanh"))`;
# - the logits are `model.head(model.ln_f(x))`.
#
# The checks decode token by token and compare every step with the full forward pass; half of
# them start from a cache already filled with the keys and values of tokens that
# `decode_step` is never shown.

# %% nbgrader={"grade": false, "grade_id": "kv_cache", "locked": false, "schema_version": 3, "solution": true}
class KVCache:
    def __init__(self, num_layers):
        ### BEGIN SOLUTION
        self.keys = [None] * num_layers
        self.values = [None] * num_layers
        ### END SOLUTION

    @property
    def length(self):
        ### BEGIN SOLUTION
        return 0 if self.keys[0] is None else self.keys[0].shape[2]
        ### END SOLUTION

    def append(self, layer, k, v):
        ### BEGIN SOLUTION
        if self.keys[layer] is None:
            self.keys[layer], self.values[layer] = k, v
        else:
            self.keys[layer] = tl.cat([self.keys[layer], k], dim=2)
            self.values[layer] = tl.cat([self.values[layer], v], dim=2)
        return self.keys[layer], self.values[layer]
        ### END SOLUTION


def decode_step(model, token, cache):
    ### BEGIN SOLUTION
    position = cache.length
    x = model.token_embedding.weight[token] + model.position.weight[position]
    x = x.reshape(1, 1, -1)
    for i in range(model.num_layers):
        block = model._modules[f"block{i}"]
        attn = block.attn
        d, heads, head_dim = attn.embed_dim, attn.num_heads, attn.head_dim
        qkv = F.linear(block.ln1(x), attn.in_proj_weight, attn.in_proj_bias)
        q, k, v = (
            qkv[:, :, j * d : (j + 1) * d].reshape(1, 1, heads, head_dim).transpose(1, 2)
            for j in range(3)
        )
        keys, values = cache.append(i, k, v)
        weights = (q @ keys.transpose(-1, -2) / math.sqrt(head_dim)).softmax(-1)
        x = x + attn.out_proj((weights @ values).transpose(1, 2).reshape(1, 1, d))
        x = x + block.proj(F.gelu(block.fc(block.ln2(x)), approximate="tanh"))
    return model.head(model.ln_f(x)).reshape(-1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_kv_cache", "locked": true, "points": 3, "schema_version": 3, "solution": false}
model = tl.nn.GPT(vocab_size=7, block_size=8, d_model=8, nhead=2, num_layers=2).eval()
tokens = [3, 1, 4, 1, 5]
with tl.no_grad():
    full = model(tl.tensor([tokens])).numpy()[0]
    cache = KVCache(2)
    steps = np.stack([decode_step(model, t, cache).numpy() for t in tokens])
assert cache.length == 5 and cache.keys[0].shape == (1, 2, 5, 4)
assert_close(steps, full, rtol=1e-12, atol=1e-12)
print("KV cache: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a8_inference", "test_kv_cache", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "sampling_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. Temperature, top-k and top-p
#
# `sampling_probs(logits, temperature, top_k, top_p)` takes the logits $z$ (a float64 numpy
# array of shape $(V,)$) and returns the distribution the next token is drawn from (float64,
# shape $(V,)$, summing to 1), in this order:
#
# 1. **temperature** $\tau$: $p = \mathrm{softmax}(z / \tau)$ (divide the *logits*, before the
#    softmax);
# 2. **top-k** (unless `top_k` is None): keep the `top_k` most likely tokens, set the others to
#    0 and renormalize;
# 3. **top-p** (unless `top_p` is None), on the distribution after top-k: sort the tokens from
#    the most to the least likely and keep the **smallest** number of them whose probabilities
#    sum to at least `top_p`, that is, up to and **including** the token whose cumulative sum
#    first reaches `top_p`; set the others to 0 and renormalize.
#
# Ties never matter in the checks. `np.argsort(-p, kind="stable")` sorts, `np.cumsum` sums.

# %% nbgrader={"grade": false, "grade_id": "sampling", "locked": false, "schema_version": 3, "solution": true}
def sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    ### BEGIN SOLUTION
    z = logits / temperature
    p = np.exp(z - z.max())
    p = p / p.sum()
    order = np.argsort(-p, kind="stable")
    if top_k is not None and top_k < len(p):
        p[order[top_k:]] = 0.0
        p = p / p.sum()
    if top_p is not None:
        cumulative = np.cumsum(p[order])
        kept = int(np.searchsorted(cumulative, top_p)) + 1
        p[order[kept:]] = 0.0
        p = p / p.sum()
    return p
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sampling_probs", "locked": true, "points": 2, "schema_version": 3, "solution": false}
z = np.array([2.0, 1.0, 0.0, -1.0])
assert_close(sampling_probs(z), np.exp(z) / np.exp(z).sum())
assert_close(sampling_probs(z, temperature=2.0), np.exp(z / 2) / np.exp(z / 2).sum())
assert (sampling_probs(z, top_k=2) > 0).sum() == 2
p = np.exp(z) / np.exp(z).sum()  # [0.64, 0.24, 0.09, 0.03]: 0.64 < 0.7 <= 0.64 + 0.24
assert (sampling_probs(z, top_p=0.7) > 0).sum() == 2
print("sampling_probs: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a8_inference", "test_sampling_probs", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "sample_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. Drawing a token from a seeded generator
#
# `sample(probs, generator)` returns one token (an int) drawn from `probs` with `generator`, a
# `np.random.Generator`, by the **inverse CDF**: draw one uniform number
# $u$ = `generator.random()` and return the first token whose cumulative probability (the
# cumulative sum divided by its last entry) is **greater than** $u$. That is exactly what
# `generator.choice(len(probs), p=probs)` does, so the same seed gives the same text. A token
# of probability 0 is never drawn.

# %% nbgrader={"grade": false, "grade_id": "sample", "locked": false, "schema_version": 3, "solution": true}
def sample(probs, generator):
    ### BEGIN SOLUTION
    cdf = np.cumsum(probs)
    cdf = cdf / cdf[-1]
    return int(np.searchsorted(cdf, generator.random(), side="right"))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sample", "locked": true, "points": 1, "schema_version": 3, "solution": false}
probs = np.array([0.5, 0.0, 0.3, 0.2])
g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
mine = [sample(probs, g1) for _ in range(100)]
assert mine == [int(g2.choice(4, p=probs)) for _ in range(100)]
assert 1 not in mine
print("sample: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a8_inference", "test_sample", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "quantize_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. int8 weights, one scale per output channel
#
# `quantize_int8(weight)` takes a Linear layer's float64 weight $W$, shape (out, in), and returns
# `(q, scale)`: `q` of dtype `np.int8`, shape (out, in), and `scale` float64 of shape (out,),
# with $W_{ij} \approx q_{ij} s_i$:
#
# - **symmetric, per output channel** (per row): $s_i = \max_j |W_{ij}| / 127$ (a row of zeros
#   gets $s_i = 1$), so every row uses the whole range $[-127, 127]$, whatever its size;
# - $q_{ij} = \mathrm{round}(W_{ij} / s_i)$, **rounded to the nearest** integer (`np.rint`; not
#   toward zero, which `astype` alone does), kept in $[-127, 127]$.
#
# Then `int8_linear(x, q, scale, bias)` = $x (q \cdot s)^T + b$ (float64): the layer with its
# weights dequantized. Rounding to nearest moves each weight by at most half a step, so each
# output is within $\tfrac{s_i}{2} \sum_j |x_j|$ of the float layer's.

# %% nbgrader={"grade": false, "grade_id": "quantize", "locked": false, "schema_version": 3, "solution": true}
def quantize_int8(weight):
    ### BEGIN SOLUTION
    scale = np.abs(weight).max(axis=1) / 127.0
    scale = np.where(scale == 0.0, 1.0, scale)
    q = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_quantize", "locked": true, "points": 2, "schema_version": 3, "solution": false}
w = np.array([[0.5, -1.0, 0.25], [0.001, 0.002, -0.004]])
q, scale = quantize_int8(w)
assert q.dtype == np.int8 and q.shape == (2, 3) and scale.shape == (2,)
assert q[0].tolist() == [64, -127, 32] and q[1].tolist() == [32, 64, -127]
assert_close(scale, [1.0 / 127, 0.004 / 127])
print("quantize_int8: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a8_inference", "test_quantize", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "int8_linear", "locked": false, "schema_version": 3, "solution": true}
def int8_linear(x, q, scale, bias):
    ### BEGIN SOLUTION
    return x @ (q.astype(np.float64) * scale[:, None]).T + bias
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_int8_linear", "locked": true, "points": 1, "schema_version": 3, "solution": false}
layer = tl.nn.Linear(6, 4)
x = np.random.default_rng(0).normal(size=(3, 6))
w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
scale = np.abs(w).max(axis=1) / 127.0  # (quantized here, so that this test checks int8_linear alone)
q = np.rint(w / scale[:, None]).astype(np.int8)
y = int8_linear(x, q, scale, b)
assert np.all(np.abs(y - (x @ w.T + b)) <= np.abs(x).sum(1, keepdims=True) * scale / 2 + 1e-12)
print("int8_linear: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a8_inference", "test_int8_linear", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "amp_md", "locked": true, "schema_version": 3, "solution": false}
# ## 5. Mixed precision: loss scaling and float32 master weights
#
# Training in float16 halves the memory of weights and activations, but float16's smallest
# normal number is $6 \times 10^{-5}$: small gradients underflow to 0. So the loss is multiplied
# by a **scale** $S$ (say $2^{12}$) before backward, every gradient comes out $S$ times larger,
# and is divided by $S$ again, in float32, before the update. The update goes into a **float32
# master copy** of the weights (a small step added to a float16 weight would round away); the
# float16 working copy is cast from it for the next forward.
#
# The scale is **dynamic**: too large, and a gradient overflows to inf (or nan). Write
# `amp_step(master, scaled_grad, scale, good_steps, lr, growth_interval)`; `master` is float32,
# `scaled_grad` the float16 gradient of the scaled loss. It returns
# `(master, weights, scale, good_steps)`:
#
# - if `scaled_grad` holds an inf or a nan: **skip** the step (master unchanged), **halve** the
#   scale, and reset `good_steps` to 0;
# - otherwise: `master - lr * (scaled_grad / scale)`, computed in float32, and `good_steps + 1`;
#   when that reaches `growth_interval`, double the scale and reset `good_steps` to 0;
# - `weights` is always the new master cast to float16; `master` stays float32.

# %% nbgrader={"grade": false, "grade_id": "amp", "locked": false, "schema_version": 3, "solution": true}
def amp_step(master, scaled_grad, scale, good_steps, lr, growth_interval):
    ### BEGIN SOLUTION
    if not np.all(np.isfinite(scaled_grad)):
        return master, master.astype(np.float16), scale / 2, 0
    grad = scaled_grad.astype(np.float32) / np.float32(scale)
    master = master - np.float32(lr) * grad
    good_steps = good_steps + 1
    if good_steps == growth_interval:
        scale, good_steps = scale * 2, 0
    return master, master.astype(np.float16), scale, good_steps
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_amp_step", "locked": true, "points": 2, "schema_version": 3, "solution": false}
master = np.ones(3, dtype=np.float32)
m, w, s, good = amp_step(master, np.array([4.0, np.inf, 0.0], dtype=np.float16), 8.0, 1, 0.5, 2)
assert s == 4.0 and good == 0 and np.array_equal(m, master) and w.dtype == np.float16
m, w, s, good = amp_step(master, np.array([4.0, -8.0, 0.0], dtype=np.float16), 8.0, 1, 0.5, 2)
assert m.dtype == np.float32 and m.tolist() == [0.75, 1.5, 1.0] and s == 16.0 and good == 0
print("amp_step: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a8_inference", "test_amp_step", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "checkpoint_md", "locked": true, "schema_version": 3, "solution": false}
# ## 6. Activation checkpointing
#
# Backward needs the activations of forward, so training memory grows with depth. A
# **checkpoint** trades compute for memory: `Checkpoint.apply(fn, *inputs)` runs `fn` in forward
# *without* recording a graph (a `Function`'s forward already runs under no-grad) and saves
# **only its inputs**; its backward runs `fn` again, this time with a graph (inputs detached,
# requiring grad, under `tl.enable_grad()`), and backpropagates `grad_output` through that graph
# (`tl.autograd.grad(outputs, inputs, grad_output)`). Return one gradient per forward argument:
# `None` for `fn`, then one per input. Store `fn` as `ctx.fn` (a plain attribute), never a
# tensor of forward's besides the inputs.

# %% nbgrader={"grade": false, "grade_id": "checkpoint", "locked": false, "schema_version": 3, "solution": true}
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, fn, *inputs):
        ### BEGIN SOLUTION
        ctx.fn = fn
        ctx.save_for_backward(*inputs)
        return fn(*inputs)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        inputs = tuple(x.detach().requires_grad_() for x in ctx.saved_tensors)
        with tl.enable_grad():
            out = ctx.fn(*inputs)
        return (None, *tl.autograd.grad(out, inputs, grad_output))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_checkpoint", "locked": true, "points": 2, "schema_version": 3, "solution": false}
def block(x, w1, w2):
    return (x @ w1).tanh() @ w2


args = [tl.randn(4, 3, requires_grad=True), tl.randn(3, 5, requires_grad=True), tl.randn(5, 2, requires_grad=True)]
assert gradcheck(lambda *a: Checkpoint.apply(block, *a), *args)
assert_close(Checkpoint.apply(block, *args).detach().numpy(), block(*args).detach().numpy())
print("Checkpoint: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a8_inference", "test_checkpoint", globals())
### END HIDDEN TESTS
