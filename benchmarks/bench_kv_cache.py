"""Time per generated token of the library's GPT: with a KV cache vs recomputing the prefix.

Run: ``.venv/bin/python benchmarks/bench_kv_cache.py`` (``--threads N`` for multi-threaded BLAS,
``--prefixes 16 32 ...``, ``--repeat N``).

For each prefix length $P$, one generation step of ``tl.nn.GPT`` (float64, no grad):

- **recompute**: the forward pass over the $P + 1$ tokens, whose last row are the next logits
  (what ``torchlight.train.generate`` does: $O(P)$ projections and MLPs, $O(P^2)$ scores);
- **cached**: one ``decode_step`` (assignment a8's: the new token's query, key and value, one
  row of attention over every layer's cached keys and values, $O(P)$ scores only), from a cache
  filled with the prefix beforehand.

Both give the same logits (the ``max |diff|`` column). Times are the best of ``--repeat`` runs,
the two interleaved so that a busy machine slows them alike; ``ratio`` is recompute / cached.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

if __name__ == "__main__":  # BLAS reads its thread count once, when numpy is first imported
    _threads = "1"
    if "--threads" in sys.argv:
        _threads = sys.argv[sys.argv.index("--threads") + 1]
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _threads)

import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import torchlight as tl  # noqa: E402
from torchlight.nn import functional as F  # noqa: E402

PREFIXES = (16, 32, 64, 128, 256, 512)


class KVCache:
    """Each layer's keys and values so far, ``(1, H, T, head_dim)``."""

    def __init__(self, num_layers: int) -> None:
        self.keys: list[Any] = [None] * num_layers
        self.values: list[Any] = [None] * num_layers

    @property
    def length(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[2]

    def append(self, layer: int, k: tl.Tensor, v: tl.Tensor) -> tuple[tl.Tensor, tl.Tensor]:
        if self.keys[layer] is None:
            self.keys[layer], self.values[layer] = k, v
        else:
            self.keys[layer] = tl.cat([self.keys[layer], k], dim=2)
            self.values[layer] = tl.cat([self.values[layer], v], dim=2)
        return self.keys[layer], self.values[layer]

    def copy(self) -> KVCache:
        other = KVCache(len(self.keys))
        other.keys, other.values = list(self.keys), list(self.values)
        return other


def decode_step(model: Any, token: int, cache: KVCache) -> tl.Tensor:
    """The logits after ``token``, from the cache of every earlier token (appended to)."""
    x = model.token_embedding.weight[token] + model.position.weight[cache.length]
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


def prefill(model: Any, tokens: list[int]) -> KVCache:
    cache = KVCache(model.num_layers)
    for t in tokens:
        decode_step(model, t, cache)
    return cache


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    parser.add_argument("--prefixes", type=int, nargs="+", default=list(PREFIXES))
    parser.add_argument("--repeat", type=int, default=5, help="runs per timing (best kept)")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args(argv)

    tl.manual_seed(0)
    model = tl.nn.GPT(vocab_size=65, block_size=max(args.prefixes) + 1, d_model=args.d_model,
                      nhead=4, num_layers=args.layers).eval()  # fmt: skip
    rng = np.random.default_rng(0)
    print(f"GPT: d_model {args.d_model}, {args.layers} layers, 4 heads, vocabulary 65, float64; "
          f"{args.threads} BLAS thread(s); best of {args.repeat}")  # fmt: skip
    print(f"{'prefix':>6} | {'recompute ms/token':>18} | {'cached ms/token':>15} | {'ratio':>6} | "
          f"{'max |diff|':>10}")  # fmt: skip
    with tl.no_grad():
        for prefix in args.prefixes:
            tokens = [int(t) for t in rng.integers(0, 65, size=prefix + 1)]
            idx = tl.tensor([tokens])
            cache = prefill(model, tokens[:-1])
            full = model(idx)[0, -1].numpy()
            step = decode_step(model, tokens[-1], cache.copy()).numpy()
            slow, fast = [], []
            for _ in range(args.repeat):  # interleaved: a busy machine slows both alike
                slow.append(timed(lambda: model(idx)))  # noqa: B023 - called at once
                fast.append(timed(lambda: decode_step(model, tokens[-1], cache.copy())))  # noqa: B023
            recompute, cached = min(slow), min(fast)
            print(f"{prefix:>6} | {recompute * 1e3:>18.2f} | {cached * 1e3:>15.2f} | "
                  f"{recompute / cached:>6.1f} | {np.abs(full - step).max():>10.1e}")  # fmt: skip


if __name__ == "__main__":
    main()
