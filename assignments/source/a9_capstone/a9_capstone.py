# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Capstone: a training recipe for a tiny GPT, on a leaderboard that checks itself
#
# You hand in a **recipe**: the size of a small GPT (`CONFIG`) and the code that trains it
# (`train(model, tokens, rng)`): the optimizer, the learning-rate schedule, the batches, how
# many steps. The grader, not your notebook, does everything that makes a score:
#
# - it builds `tl.nn.GPT` from your `CONFIG` with **its own seed** and calls your `train` in the
#   grading sandbox on the first 300,000 characters of the shipped Shakespeare, as token ids;
# - the ids are **relabelled by a secret permutation** of the 65 characters, new for every run
#   (your recipe learns the text whatever the labels; weights trained elsewhere do not fit);
# - the run has **6 s of CPU time** (building the model included), counted by the sandbox over
#   every process and thread: past it, the run scores nothing. `train` may not start processes;
# - the grader then measures the **validation loss** itself (cross-entropy, nats per
#   character) on text from the end of the corpus that your recipe never receives. What your
#   notebook prints about its own loss is not read.
#
# **Rules.** `CONFIG` has exactly the keys `d_model` (8-64), `nhead` (1-8, dividing
# `d_model`), `num_layers` (1-3) and `block_size` (8-64). Your code (answer and added cells) is
# at most 24 KiB. The model is float32; `train` returns nothing: the weights it leaves in
# `model` are what count.
#
# **Points.** The item passes at a validation loss of at most **3.0** (the characters'
# frequencies alone give about 3.3). **The leaderboard** ranks every recipe by its loss:
# `make course-leaderboard` re-runs each one in the sandbox from the course's seed, and the top
# entries a second time, before the board is published.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import time

import numpy as np

import torchlight as tl
from torchlight.data.text import load_text

tl.manual_seed(0)

# %% [markdown] nbgrader={"grade": false, "grade_id": "recipe_md", "locked": true, "schema_version": 3, "solution": false}
# ## Your recipe
#
# `tokens` is a 1-D int64 tensor of character ids; `rng` is a `numpy.random.Generator` seeded
# by the grader (draw your batches from it, so a re-run gives the same board). A window of
# `block_size + 1` consecutive ids gives an input `x = tokens[s : s + T]` and its targets
# `y = tokens[s + 1 : s + T + 1]`. `model(x)` with `x` of shape `(B, T)` gives logits
# `(B, T, 65)`. AdamW with a warm-up, gradient clipping and a batch size that fits the budget
# are the usual ingredients; measure with the cell below, within 6 s.

# %% nbgrader={"grade": false, "grade_id": "recipe", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
CONFIG = {"d_model": 32, "nhead": 4, "num_layers": 1, "block_size": 32}


def train(model, tokens, rng):
    steps, batch, block = 160, 16, CONFIG["block_size"]
    opt = tl.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    schedule = tl.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=steps)
    offsets = tl.arange(block)[None, :]
    for _ in range(steps):
        starts = tl.tensor(rng.integers(0, len(tokens) - block - 1, batch))[:, None]
        x, y = tokens[starts + offsets], tokens[starts + offsets + 1]
        logits = model(x)
        loss = tl.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        tl.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
### END SOLUTION

# %% [markdown] nbgrader={"grade": false, "grade_id": "local_md", "locked": true, "schema_version": 3, "solution": false}
# ## Try it here
#
# The cell below runs your recipe as the grader will, on the same 300,000 characters (with
# their own labels) from a seed of its own, and measures the loss on a local validation slice
# (not the grader's). It prints the CPU time your run used: stay well inside 6 s, since the
# grading machine may be slower than yours.

# %% nbgrader={"grade": true, "grade_id": "test_recipe", "locked": true, "points": 5, "schema_version": 3, "solution": false}
text = load_text("shakespeare")
chars = sorted(set(text))
ids = np.array([chars.index(c) for c in text[:400_000]], dtype=np.int64)
tl.set_default_dtype(tl.float32)
try:
    tl.manual_seed(1)
    model = tl.nn.GPT(len(chars), block_size=CONFIG["block_size"], d_model=CONFIG["d_model"],
                      nhead=CONFIG["nhead"], num_layers=CONFIG["num_layers"])
    start = time.process_time()
    train(model, tl.tensor(ids[:300_000]), np.random.default_rng(1))
    used = time.process_time() - start
    val = ids[300_000:]
    block = CONFIG["block_size"]
    starts = np.random.default_rng(2).integers(0, len(val) - block - 1, 48)
    x = tl.tensor(np.stack([val[s : s + block] for s in starts]))
    y = tl.tensor(np.stack([val[s + 1 : s + block + 1] for s in starts]))
    with tl.no_grad():
        loss = tl.nn.functional.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
finally:
    tl.set_default_dtype(tl.float64)
print(f"CPU time {used:.1f} s (budget 6 s), local validation loss {loss.item():.3f} (target 3.0)")
assert used < 6.0, "over the CPU budget: fewer steps, a smaller batch or a smaller model"
assert loss.item() <= 3.0, "above the target: train longer within the budget, or a larger model"
### BEGIN HIDDEN TESTS
assert CONFIG["d_model"] % CONFIG["nhead"] == 0, "nhead must divide d_model"
### END HIDDEN TESTS
