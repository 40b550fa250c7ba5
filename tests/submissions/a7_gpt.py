"""Submissions for assignment 7 (The transformer and its training loop): the classic mistakes,
each costing exactly its item (the training item runs with the grader's attention and block,
and still trains with each optimizer mistake), answers that call the library's attention or
AdamW, and a model that reads ahead."""

from __future__ import annotations

from submissions.catalog import Submission, replace, substitute

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

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    Submission(
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
    ),
    Submission(
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
    ),
    Submission(
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
    ),
    Submission(
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
    ),
    Submission(
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
    ),
    Submission(
        "library-attention",
        A,
        "cheat",
        "solution",
        (replace("attention", LIBRARY_ATTENTION),),
        zero=("test_attention",),
        fools_kernel=("test_attention",),
        note="F.scaled_dot_product_attention: the library's",
    ),
    Submission(
        "library-adamw",
        A,
        "cheat",
        "solution",
        (replace("train", LIBRARY_ADAMW),),
        zero=("test_train",),
        fools_kernel=("test_train",),
        note="the library's AdamW trains the model",
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
