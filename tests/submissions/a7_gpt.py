"""Submissions for assignment 7 (The transformer and its training loop): the classic mistakes,
each costing exactly its item (the training item runs with the grader's attention and block,
and still trains with each optimizer mistake), answers that call the library's attention or
AdamW, and a model that reads ahead."""

from __future__ import annotations

from submissions.catalog import Submission, replace, substitute, together

A = "a7_gpt"

LIBRARY_ATTENTION = """
def causal_self_attention(x, w_qkv, b_qkv, w_out, b_out, nhead):
    n, t, c = x.shape
    qkv = x @ w_qkv.T + b_qkv
    q, k, v = (qkv[..., i * c : (i + 1) * c].reshape(n, t, nhead, c // nhead).permute(0, 2, 1, 3)
               for i in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.permute(0, 2, 1, 3).reshape(n, t, c) @ w_out.T + b_out
"""

LIBRARY_ADAMW = """
def train_gpt(ids, steps, seed):
    tl.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = GPT()
    optimizer = tl.optim.AdamW(model.parameters(), lr=MAX_LR, betas=BETAS, eps=EPS,
                               weight_decay=WEIGHT_DECAY)
    for step in range(steps):
        x, y = batch(ids, rng)
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, MAX_LR, MIN_LR, WARMUP, steps)
        optimizer.step()
    return model
"""

READS_AHEAD = """
def train_gpt(ids, steps, seed):
    class Peek(nn.Module):
        def forward(self, x):
            following = tl.tensor(np.roll(x.numpy(), -1, axis=1))
            return tl.eye(VOCAB)[following] * 50.0

    return Peek()
"""

#: No training: a "model" that looks each window up in the validation text (the last 10% of the
#: shipped Shakespeare) and predicts the characters that followed it there. Against the real
#: text its loss is 0.36 nats; the hidden checks' copy of the library has that part shuffled.
READS_VALIDATION = """
from collections import Counter as _Counter

from torchlight.data.text import load_text as _load_text


def train_gpt(ids, steps, seed):
    text = _load_text("shakespeare")
    chars = sorted(set(text))
    held = text[int(0.9 * len(text)) - 64 :]  # the validation text, in the sandbox
    V = len(chars)

    class Lookup:
        def __call__(self, x):
            x = np.asarray(x.numpy(), dtype=int)
            out = np.full((*x.shape, V), np.log(0.001))
            for n in range(x.shape[0]):
                for t in range(x.shape[1]):
                    key = "".join(chars[i] for i in x[n, max(0, t - 11) : t + 1])
                    nxt, j = _Counter(), held.find(key)
                    while j >= 0 and sum(nxt.values()) < 200:
                        if j + len(key) < len(held):
                            nxt[held[j + len(key)]] += 1
                        j = held.find(key, j + 1)
                    for c, k in nxt.items():
                        out[n, t, chars.index(c)] = np.log(k + 0.001)
            return tl.tensor(out)

    return Lookup()
"""

#: Planted mistakes in answer cells of their own, each costing its own item: graded together
#: (``catalog.together``; the README names each one).
MASK_OFF_BY_ONE = Submission(
    "mask-off-by-one",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "attention",
            "future = np.triu(np.ones((t, t), dtype=bool), k=1)",
            "future = np.triu(np.ones((t, t), dtype=bool), k=2)",
        ),
    ),
    zero=("test_attention",),
    note="each position also sees the next one",
)

POST_NORM = Submission(
    "post-norm",
    A,
    "mistake",
    "solution",
    (
        replace(
            "block",
            """
def block(x, ln1_w, ln1_b, w_qkv, b_qkv, w_out, b_out, ln2_w, ln2_b, w_fc, b_fc, w_proj, b_proj, nhead):
    c = x.shape[-1]
    h = F.layer_norm(x + causal_self_attention(x, w_qkv, b_qkv, w_out, b_out, nhead), (c,), ln1_w, ln1_b, 1e-5)
    mlp = F.gelu(h @ w_fc.T + b_fc, approximate="tanh") @ w_proj.T + b_proj
    return F.layer_norm(h + mlp, (c,), ln2_w, ln2_b, 1e-5)
""",
        ),
    ),
    zero=("test_block",),
    note="the original transformer's post-norm: LN(x + f(x))",
)

WEIGHT_DECAY_IN_THE_GRADIENT = Submission(
    "weight-decay-in-the-gradient",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "adamw",
            "    param = param * (1 - lr * weight_decay)\n",
            "    grad = grad + weight_decay * param\n",
        ),
    ),
    zero=("test_adamw",),
    note="Adam with L2 regularization, not AdamW's decoupled decay",
)

WARM_UP_OFF_BY_A_STEP = Submission(
    "warm-up-off-by-a-step",
    A,
    "mistake",
    "solution",
    (
        substitute(
            "schedule",
            "return max_lr * (step + 1) / warmup",
            "return max_lr * step / warmup",
        ),
    ),
    zero=("test_schedule",),
    note="the first step has a learning rate of 0",
)

CLIP_PER_PARAMETER = Submission(
    "clip-per-parameter",
    A,
    "mistake",
    "solution",
    (
        replace(
            "clip",
            """
def clip_gradients(grads, max_norm):
    out = []
    for g in grads:
        norm = math.sqrt(float((g * g).sum().item()))
        out.append(g * min(1.0, max_norm / (norm + 1e-6)))
    return out
""",
        ),
    ),
    zero=("test_clip",),
    note="each gradient clipped by its own norm: the update changes direction",
)

#: Answers that call the library's attention or optimizer, each in its own answer cell and
#: changing nothing outside it: graded together in one notebook, each flagged.
LIBRARY_ATTENTION_CHEAT = Submission(
    "library-attention",
    A,
    "cheat",
    "solution",
    (replace("attention", LIBRARY_ATTENTION),),
    zero=("test_attention",),
    fools_kernel=("test_attention",),
    note="F.scaled_dot_product_attention: the library's",
)

LIBRARY_ADAMW_CHEAT = Submission(
    "library-adamw",
    A,
    "cheat",
    "solution",
    (replace("train", LIBRARY_ADAMW),),
    zero=("test_train",),
    fools_kernel=("test_train",),
    note="the library's AdamW trains the model",
)

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    together(
        "wrong-in-one-part",
        MASK_OFF_BY_ONE,
        POST_NORM,
        WEIGHT_DECAY_IN_THE_GRADIENT,
        WARM_UP_OFF_BY_A_STEP,
        CLIP_PER_PARAMETER,
    ),
    together(
        "reaches-for-the-library",
        LIBRARY_ATTENTION_CHEAT,
        LIBRARY_ADAMW_CHEAT,
    ),
    Submission(
        "reads-validation",
        A,
        "cheat",
        "solution",
        (replace("train", READS_VALIDATION),),
        zero=("test_train",),
        note="no training: each window looked up in the shipped validation text",
    ),
    Submission(
        "reads-ahead",
        A,
        "cheat",
        "solution",
        (replace("train", READS_AHEAD),),
        zero=("test_train",),
        fools_kernel=("test_train",),
        note="logits that copy the next input character: a tiny loss, not causal",
    ),
]

#: Each cheat's finding in the integrity report.
FLAGGED = {
    "library-attention": "reaches for the library's attention, transformer or optimizer (uses "
    ".scaled_dot_product_attention",
    "library-adamw": "uses .AdamW",
}
