# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 7: The transformer and its training loop
#
# You write a GPT: multi-head causal self-attention, the pre-norm transformer block, and the
# loop that trains it (AdamW with decoupled weight decay, a warm-up and cosine learning-rate
# schedule, gradient clipping by the global norm). A locked cell assembles the GPT from your
# block, and your loop trains it on Shakespeare, one character per token.
#
# Here the library's autograd does the derivatives: build everything from tensor operations
# (`@`, `reshape`, `permute`, `softmax`, `tl.nn.functional.layer_norm` and `gelu`).
#
# **How you are graded.** Hidden checks on random float64 inputs, compared with reference values
# to about $10^{-12}$, the gradients with central differences; the training item trains your
# loop in the grader's sandbox and measures the validation loss itself, on held-out text. The
# grader's copy of the library has no attention, no transformer layers, no AdamW and no
# clipping of its own: an answer that calls them scores nothing for that item.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import numpy as np

import torchlight as tl
import torchlight.nn.functional as F
from torchlight import nn
from torchlight.data.text import load_text
from torchlight.testing import assert_close
from torchlight.train.tokenizers import CharTokenizer

tl.manual_seed(0)
text = load_text("shakespeare")
tokenizer = CharTokenizer(text)
data = np.array(tokenizer.encode(text))
split = int(0.9 * len(data))
train_ids = data[:split]  # the last 10% is held out: the grader measures the loss there
print(f"{len(data)} characters, {tokenizer.vocab_size} distinct; {split} for training")

# %% [markdown] nbgrader={"grade": false, "grade_id": "attention_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. Multi-head causal self-attention
#
# `causal_self_attention(x, w_qkv, b_qkv, w_out, b_out, nhead)`, with `x` of shape
# $(N, T, C)$, projects `x` to queries, keys and values at once,
# $[Q\;K\;V] = x W_{qkv}^\top + b_{qkv}$ ($W_{qkv}$ of shape $(3C, C)$: the first $C$ output
# columns are $Q$, the next $K$, the last $V$), splits each into `nhead` heads of $C/H$
# features (head $h$ has features $h C/H \ldots (h+1) C/H - 1$), and in each head computes
#
# $$\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{C/H}} + M\right) V, \qquad M_{ts} = -\infty \text{ for } s > t,\ 0 \text{ otherwise}:$$
#
# position $t$ sees positions $0..t$, itself included, and nothing after. The heads'
# outputs are put side by side again (shape $(N, T, C)$) and projected: $\cdot\, W_{out}^\top + b_{out}$.

# %% nbgrader={"grade": false, "grade_id": "attention", "locked": false, "schema_version": 3, "solution": true}
def causal_self_attention(x, w_qkv, b_qkv, w_out, b_out, nhead):
    ### BEGIN SOLUTION
    n, t, c = x.shape
    size = c // nhead
    qkv = x @ w_qkv.T + b_qkv

    def heads(part):
        return part.reshape(n, t, nhead, size).permute(0, 2, 1, 3)

    q, k, v = heads(qkv[..., :c]), heads(qkv[..., c : 2 * c]), heads(qkv[..., 2 * c :])
    future = np.triu(np.ones((t, t), dtype=bool), k=1)
    scores = q @ k.permute(0, 1, 3, 2) / math.sqrt(size) + tl.tensor(np.where(future, -np.inf, 0.0))
    out = scores.softmax(-1) @ v
    return out.permute(0, 2, 1, 3).reshape(n, t, c) @ w_out.T + b_out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_attention", "locked": true, "points": 2, "schema_version": 3, "solution": false}
c = 4
x = tl.randn(2, 5, c, requires_grad=True)
w_qkv, b_qkv = tl.randn(3 * c, c, requires_grad=True), tl.randn(3 * c, requires_grad=True)
w_out, b_out = tl.randn(c, c), tl.zeros(c)
y = causal_self_attention(x, w_qkv, b_qkv, w_out, b_out, 2)
assert y.shape == (2, 5, c)
# the first position sees only itself: its output is its own value, projected
v0 = (x[:, 0] @ w_qkv.T + b_qkv)[:, 2 * c :]
assert_close(y.detach().numpy()[:, 0], (v0 @ w_out.T + b_out).detach().numpy())
# changing the last token changes nothing before it
x2 = x.detach().clone()
x2[:, -1] = 10.0
assert_close(causal_self_attention(x2, w_qkv, b_qkv, w_out, b_out, 2).detach().numpy()[:, :-1], y.detach().numpy()[:, :-1])
print("causal_self_attention: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a7_gpt", "test_attention", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "block_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. The pre-norm transformer block
#
# GPT-2's block normalizes **before** each sublayer and adds the sublayer's output to the
# unnormalized stream (the residual path stays an identity, so deep stacks train):
#
# $$h = x + \mathrm{Attn}(\mathrm{LN}_1(x)), \qquad \mathrm{out} = h + \mathrm{MLP}(\mathrm{LN}_2(h)),
#   \qquad \mathrm{MLP}(z) = \mathrm{GELU}(z W_{fc}^\top + b_{fc}) W_{proj}^\top + b_{proj}.$$
#
# (The original transformer's *post*-norm, $\mathrm{LN}(x + \mathrm{Attn}(x))$, is another
# function.) Use `F.layer_norm(z, (C,), weight, bias, 1e-5)`, `F.gelu(z, approximate="tanh")`
# and your `causal_self_attention`. (While this item is graded, `causal_self_attention` is the
# grader's own: a mistake in section 1 costs only section 1.)

# %% nbgrader={"grade": false, "grade_id": "block", "locked": false, "schema_version": 3, "solution": true}
def block(x, ln1_w, ln1_b, w_qkv, b_qkv, w_out, b_out, ln2_w, ln2_b, w_fc, b_fc, w_proj, b_proj, nhead):
    ### BEGIN SOLUTION
    c = x.shape[-1]
    h = x + causal_self_attention(F.layer_norm(x, (c,), ln1_w, ln1_b, 1e-5), w_qkv, b_qkv, w_out, b_out, nhead)
    z = F.layer_norm(h, (c,), ln2_w, ln2_b, 1e-5)
    return h + F.gelu(z @ w_fc.T + b_fc, approximate="tanh") @ w_proj.T + b_proj
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_block", "locked": true, "points": 2, "schema_version": 3, "solution": false}
c = 4
args = [tl.randn(2, 3, c), tl.ones(c), tl.zeros(c), tl.randn(3 * c, c), tl.zeros(3 * c), tl.randn(c, c), tl.zeros(c),
        tl.ones(c), tl.zeros(c), tl.randn(4 * c, c), tl.zeros(4 * c), tl.zeros(c, 4 * c), tl.zeros(c)]
y = block(*args, 2)
assert y.shape == (2, 3, c)
# with a zero MLP output the block is x + attention(LN(x)): the stream itself is not normalized
expected = args[0] + causal_self_attention(F.layer_norm(args[0], (c,), args[1], args[2], 1e-5), *args[3:7], 2)
assert_close(y.numpy(), expected.numpy())
print("block: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a7_gpt", "test_block", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "adamw_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. AdamW
#
# `adamw_step(param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay)` returns the new
# `(param, m, v)` after Adam's step number `step` ($t = 1, 2, \ldots$) with **decoupled** weight
# decay (Loshchilov and Hutter): the parameter shrinks by $\eta\lambda$ directly, and the decay
# never enters the moments:
#
# $$p \leftarrow p\,(1 - \eta\lambda), \quad m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
#   v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
#   p \leftarrow p - \eta\,\frac{m / (1 - \beta_1^t)}{\sqrt{v / (1 - \beta_2^t)} + \epsilon}.$$
#
# (Adding $\lambda p$ to the gradient instead is Adam with L2 regularization: the decay is then
# divided by $\sqrt{v}$ like everything else, and is another optimizer.) All are tensors of one
# shape; return new tensors.

# %% nbgrader={"grade": false, "grade_id": "adamw", "locked": false, "schema_version": 3, "solution": true}
def adamw_step(param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay):
    ### BEGIN SOLUTION
    param = param * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat, v_hat = m / (1 - beta1**step), v / (1 - beta2**step)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_adamw", "locked": true, "points": 1, "schema_version": 3, "solution": false}
p, m, v = adamw_step(tl.tensor([1.0, -2.0]), tl.tensor([0.5, 0.5]), tl.zeros(2), tl.zeros(2), 1, 0.1, 0.9, 0.999, 0.0, 0.0)
assert_close(p.numpy(), [0.9, -2.1])  # the first step moves each parameter by lr * sign(g)
p, m, v = adamw_step(tl.tensor([1.0]), tl.tensor([0.0]), tl.zeros(1), tl.zeros(1), 1, 0.1, 0.9, 0.999, 1e-8, 0.5)
assert_close(p.numpy(), [0.95])  # no gradient: only the decay, lr * lambda
print("adamw_step: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a7_gpt", "test_adamw", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "schedule_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. Warm-up and cosine decay
#
# `lr_at(step, max_lr, min_lr, warmup, total)` for steps $s = 0, 1, \ldots$: a linear warm-up
# whose first step already moves, then a half cosine from `max_lr` down to `min_lr` at step
# `total`, and `min_lr` after it:
#
# $$\eta(s) = \begin{cases} \eta_{max}\,\frac{s + 1}{W} & s < W \\
#   \eta_{min} + \frac{1}{2}\left(1 + \cos\left(\pi\frac{s - W}{S - W}\right)\right)(\eta_{max} - \eta_{min}) & W \le s \le S \\
#   \eta_{min} & s > S \end{cases}$$

# %% nbgrader={"grade": false, "grade_id": "schedule", "locked": false, "schema_version": 3, "solution": true}
def lr_at(step, max_lr, min_lr, warmup, total):
    ### BEGIN SOLUTION
    if step < warmup:
        return max_lr * (step + 1) / warmup
    if step > total:
        return min_lr
    ratio = (step - warmup) / (total - warmup)
    return min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (max_lr - min_lr)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_schedule", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert_close(lr_at(0, 1.0, 0.1, 10, 100), 0.1)
assert_close(lr_at(10, 1.0, 0.1, 10, 100), 1.0)
assert_close(lr_at(55, 1.0, 0.1, 10, 100), 0.55)
assert_close(lr_at(100, 1.0, 0.1, 10, 100), 0.1)
assert_close(lr_at(500, 1.0, 0.1, 10, 100), 0.1)
print("lr_at: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a7_gpt", "test_schedule", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "clip_md", "locked": true, "schema_version": 3, "solution": false}
# ## 5. Gradient clipping by the global norm
#
# `clip_gradients(grads, max_norm)` takes the list of all parameters' gradients, computes their
# **global** norm $\|g\| = \sqrt{\sum_i \|g_i\|^2}$ (all of them together, as one vector) and,
# when it is larger than `max_norm`, scales **every** gradient by the same factor
# $\mathrm{max\_norm} / (\|g\| + 10^{-6})$ (PyTorch's `clip_grad_norm_`), so the update keeps
# its direction. It returns the list of (new) gradients. Clipping each gradient by its own
# norm changes the direction: that is another method.

# %% nbgrader={"grade": false, "grade_id": "clip", "locked": false, "schema_version": 3, "solution": true}
def clip_gradients(grads, max_norm):
    ### BEGIN SOLUTION
    total = math.sqrt(sum(float((g * g).sum().item()) for g in grads))
    scale = min(1.0, max_norm / (total + 1e-6))
    return [g * scale for g in grads]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_clip", "locked": true, "points": 1, "schema_version": 3, "solution": false}
clipped = clip_gradients([tl.tensor([3.0]), tl.tensor([4.0])], 1.0)  # global norm 5
assert_close([g.item() for g in clipped], [0.6, 0.8], atol=1e-6, rtol=0)
clipped = clip_gradients([tl.tensor([0.3]), tl.tensor([0.4])], 1.0)  # under the limit: unchanged
assert_close([g.item() for g in clipped], [0.3, 0.4])
print("clip_gradients: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a7_gpt", "test_clip", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "gpt_md", "locked": true, "schema_version": 3, "solution": false}
# ## 6. A GPT, and training it
#
# The locked cell below builds a GPT from your `block`: token and learned position embeddings,
# `LAYERS` blocks, a last LayerNorm, and logits from the token table itself (weight tying).
# `batch(ids, rng)` draws `BATCH` random windows of `BLOCK + 1` characters: inputs and their
# next characters.
#
# Write `train_gpt(ids, steps, seed)`: seed torchlight and a numpy generator with `seed`, build
# `GPT()`, and for each step draw a batch, compute the cross-entropy of the logits against the
# targets, backpropagate, clip the gradients to `MAX_NORM`, and update every parameter with your
# `adamw_step` at the learning rate `lr_at(step, MAX_LR, MIN_LR, WARMUP, steps)`. Return the
# model.
#
# **Graded:** the grader trains `train_gpt(train_ids, 200, seed)` with a seed of its own, then
# computes the loss of your model on windows of the held-out 10% it draws itself; it must be
# **below 3.0 nats per character** (a model that knows only how often each character occurs
# gets 3.32; the solution 2.6-2.8), and the logits at a position must not depend on later
# characters. This takes about 10-30 s in the grader's sandbox, within its budget.

# %% nbgrader={"grade": false, "grade_id": "gpt", "locked": true, "schema_version": 3, "solution": false}
VOCAB, BLOCK, D_MODEL, NHEAD, LAYERS = tokenizer.vocab_size, 32, 32, 2, 1
BATCH, MAX_LR, MIN_LR, WARMUP, MAX_NORM = 16, 1e-2, 1e-3, 20, 1.0
BETAS, EPS, WEIGHT_DECAY = (0.9, 0.99), 1e-8, 0.01


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.qkv, self.out = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)
        self.fc, self.proj = nn.Linear(D_MODEL, 4 * D_MODEL), nn.Linear(4 * D_MODEL, D_MODEL)

    def forward(self, x):
        return block(x, self.ln1.weight, self.ln1.bias, self.qkv.weight, self.qkv.bias, self.out.weight,
                     self.out.bias, self.ln2.weight, self.ln2.bias, self.fc.weight, self.fc.bias,
                     self.proj.weight, self.proj.bias, NHEAD)


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Parameter(tl.randn(VOCAB, D_MODEL) * 0.02)
        self.positions = nn.Parameter(tl.randn(BLOCK, D_MODEL) * 0.02)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(D_MODEL)

    def forward(self, ids):
        x = self.tokens[ids] + self.positions[: ids.shape[1]]
        for layer in self.blocks:
            x = layer(x)
        return self.ln_f(x) @ self.tokens.T


def batch(ids, rng):
    starts = rng.integers(0, len(ids) - BLOCK - 1, size=BATCH)
    windows = np.stack([ids[s : s + BLOCK + 1] for s in starts])
    return tl.tensor(windows[:, :-1]), tl.tensor(windows[:, 1:])


# %% nbgrader={"grade": false, "grade_id": "train", "locked": false, "schema_version": 3, "solution": true}
def train_gpt(ids, steps, seed):
    ### BEGIN SOLUTION
    tl.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = GPT()
    params = list(model.parameters())
    ms = [tl.zeros_like(p) for p in params]
    vs = [tl.zeros_like(p) for p in params]
    for step in range(steps):
        x, y = batch(ids, rng)
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        model.zero_grad()
        loss.backward()
        grads = clip_gradients([p.grad for p in params], MAX_NORM)
        lr = lr_at(step, MAX_LR, MIN_LR, WARMUP, steps)
        with tl.no_grad():
            for i, p in enumerate(params):
                new, ms[i], vs[i] = adamw_step(p, grads[i], ms[i], vs[i], step + 1, lr, *BETAS, EPS, WEIGHT_DECAY)
                p.copy_(new)
    return model
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_train", "locked": true, "points": 2, "schema_version": 3, "solution": false}
model = train_gpt(train_ids, 25, 0)
x, y = batch(data[split:], np.random.default_rng(1))
with tl.no_grad():
    held_out = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1)).item()
print(f"held-out loss after 25 steps: {held_out:.3f} (log {VOCAB} = {math.log(VOCAB):.3f} before training)")
assert held_out < math.log(VOCAB) - 0.3
print("train_gpt: visible tests passed (the grader trains 200 steps)")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a7_gpt", "test_train", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## What you built
#
# A GPT, written from its pieces, that learns which characters follow which in Shakespeare.
# Tutorial 8 (*Language models*) looks inside it: the attention pattern of a head, samples
# from the model as it trains. Assignment 8 serves it: a KV cache, sampling, quantization.
