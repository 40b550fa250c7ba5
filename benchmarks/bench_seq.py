"""One training step of the same small GPT and LSTM language models, torchlight vs PyTorch CPU.

    .venv/bin/python benchmarks/bench_seq.py            # needs torch (pip install torch==2.13.0)
    .venv/bin/python benchmarks/bench_seq.py --profile  # and where torchlight's time goes
    .venv/bin/python benchmarks/bench_seq.py --model lstm --steps 20   # one model only
    .venv/bin/python benchmarks/bench_seq.py --backends numpy           # one backend only

float32, one BLAS/OpenMP thread for both (set before numpy and torch load). The models are the
CLI's defaults (``torchlight/train/text.py``): a GPT of 3 pre-norm blocks, d_model 96, 4 heads,
context 64, tied embeddings; an LSTM of hidden size 256 on 64-dim embeddings; batch 32, Adam.
Both frameworks run the *same* model code: torchlight's layers have PyTorch's names, so
``build_gpt(nn)`` builds either. Printed: the median time of forward, backward, optimizer step
and the whole step, side by side, and the ratio; then PyTorch again with oneDNN switched off
(``torch.backends.mkldnn.enabled = False``). On a CPU, PyTorch's ``nn.LSTM`` runs oneDNN's fused
LSTM kernel (the whole layer, gates and all, in C++); without it PyTorch runs the same
per-op algorithm as torchlight (one input matmul, then per step a matmul and the gates), so
the second ratio compares algorithms and the first compares with the fused kernel.

torchlight runs on each of ``--backends`` (default numpy and Numba). Its ``nn.LSTM`` runs a
fused kernel too (``ops.recurrent.FusedLSTM``, the backend's override of the recurrence): on
numpy, each step's gates updated in place; on Numba, one compiled pass per step and Numba's
own matmul kernel, which beats numpy's OpenBLAS on these thin (32-row) products.
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

# numpy's OpenBLAS picks its kernels for the CPU when it loads, unless OPENBLAS_CORETYPE names
# them. Our machines' environment pins OPENBLAS_CORETYPE=Haswell (AVX2 kernels) although their
# AMD EPYC CPUs run AVX-512, for which OpenBLAS itself picks its SkylakeX kernels: float32
# products of 2048 rows run at 120 GFLOP/s instead of 230 (PyTorch's MKL and oneDNN ignore the
# variable and use AVX-512). --blas-autodetect drops the variable, so numpy gets what a fresh
# install gets on this CPU; the header says which kernels run.
if "--blas-autodetect" in sys.argv:
    os.environ.pop("OPENBLAS_CORETYPE", None)

import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import torchlight as tl  # noqa: E402

VOCAB, BLOCK, BATCH = 65, 64, 32
D_MODEL, HEADS, LAYERS = 96, 4, 3
EMBED, HIDDEN = 64, 256


def build_gpt(nn: Any) -> Any:
    """The CLI's GPT, written once against PyTorch's nn API (torch.nn or torchlight.nn)."""

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
            self.attn = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
            self.fc, self.proj = nn.Linear(D_MODEL, 4 * D_MODEL), nn.Linear(4 * D_MODEL, D_MODEL)
            self.act = nn.GELU(approximate="tanh")

        def forward(self, x: Any, mask: Any) -> Any:
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.proj(self.act(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(BLOCK, D_MODEL)
            self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
            self.ln_f = nn.LayerNorm(D_MODEL)
            self.head = nn.Linear(D_MODEL, VOCAB, bias=False)
            self.head.weight = self.tok.weight  # tied

        def forward(self, idx: Any, mask: Any) -> Any:
            x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.ln_f(x))

    return GPT()


def build_lstm(nn: Any) -> Any:
    class LSTMModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(VOCAB, EMBED)
            self.lstm = nn.LSTM(EMBED, HIDDEN, batch_first=True)
            self.head = nn.Linear(HIDDEN, VOCAB)

        def forward(self, idx: Any, mask: Any) -> Any:
            return self.head(self.lstm(self.embedding(idx))[0])

    return LSTMModel()


def framework(name: str, onednn: bool = True, backend: str = "numpy") -> dict[str, Any]:
    """What a training step needs from torchlight (on ``backend``) or torch: nn, F, Adam,
    tensor factories."""
    causal = np.triu(np.full((BLOCK, BLOCK), -np.inf, dtype=np.float32), 1)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, VOCAB, (BATCH, BLOCK)), rng.integers(0, VOCAB, (BATCH, BLOCK))
    if name == "torch":
        import torch

        torch.set_num_threads(1)
        torch.backends.mkldnn.enabled = onednn
        torch.manual_seed(0)
        return {
            "nn": torch.nn,
            "F": torch.nn.functional,
            "Adam": torch.optim.Adam,
            "mask": torch.from_numpy(causal),
            "x": torch.from_numpy(x),
            "y": torch.from_numpy(y),
            "float": lambda m: m.float(),
        }
    tl.manual_seed(0)
    tl.set_default_backend(backend)  # the model's parameters and the batch are made there
    return {
        "nn": tl.nn,
        "F": tl.nn.functional,
        "Adam": tl.optim.Adam,
        "mask": tl.tensor(causal),
        "x": tl.tensor(x),
        "y": tl.tensor(y),
        "float": lambda m: m.to(tl.float32),
    }


PARTS = ("forward", "backward", "optimizer", "step")


def openblas_core() -> str:
    """The kernels numpy's OpenBLAS runs (``Haswell``, ``SkylakeX``, ...), or ``unknown``."""
    import ctypes
    import glob

    libs = glob.glob(
        os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*")
    )
    for path in libs:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename"):
            if hasattr(lib, name):
                getter = getattr(lib, name)
                getter.restype = ctypes.c_char_p
                return str(getter().decode())
    return "unknown"


def stepper(
    name: str, build: Callable[[Any], Any], onednn: bool = True, backend: str = "numpy"
) -> Callable[[], tuple[float, ...]]:
    """One training step of ``build``'s model in torchlight or torch, as a function that runs
    a step and returns its milliseconds: forward (+ loss), backward, optimizer, the whole."""
    fw = framework(name, onednn, backend)
    model = fw["float"](build(fw["nn"]))
    optimizer = fw["Adam"](model.parameters(), lr=1e-3)
    tl.set_default_backend("numpy")

    def step() -> tuple[float, ...]:
        if name == "torch":
            import torch

            torch.backends.mkldnn.enabled = onednn  # a global switch: set it for each step
        t0 = time.perf_counter()
        logits = model(fw["x"], fw["mask"])
        loss = fw["F"].cross_entropy(logits.reshape(-1, VOCAB), fw["y"].reshape(-1))
        t1 = time.perf_counter()
        optimizer.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        return tuple(dt * 1000 for dt in (t1 - t0, t2 - t1, t3 - t2, t3 - t0))

    return step


def timed_steps(
    steppers: dict[str, Callable[[], tuple[float, ...]]], steps: int
) -> dict[str, dict[str, float]]:
    """The median of each part, per stepper. The steppers take turns step by step, so a load
    that comes and goes on a shared machine slows all of them alike."""
    times: dict[str, list[tuple[float, ...]]] = {key: [] for key in steppers}
    for i in range(steps + 3):  # 3 warm-up steps
        for key, step in steppers.items():
            took = step()
            if i >= 3:
                times[key].append(took)
    return {
        key: {part: statistics.median(t[k] for t in runs) for k, part in enumerate(PARTS)}
        for key, runs in times.items()
    }


def profile(build: Callable[[Any], Any], backend: str, steps: int = 5) -> None:
    fw = framework("torchlight", backend=backend)
    model = fw["float"](build(fw["nn"]))
    optimizer = fw["Adam"](model.parameters(), lr=1e-3)
    tl.set_default_backend("numpy")

    def run() -> None:
        for _ in range(steps):
            logits = model(fw["x"], fw["mask"])
            loss = fw["F"].cross_entropy(logits.reshape(-1, VOCAB), fw["y"].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    run()  # warm up
    logits = model(fw["x"], fw["mask"])
    loss = fw["F"].cross_entropy(logits.reshape(-1, VOCAB), fw["y"].reshape(-1))
    nodes = sum(t.history is not None for t in tl.autograd.topological_sort(loss))
    profiler = cProfile.Profile()
    profiler.runcall(run)
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    applies = sum(
        calls
        for (path, _, fn), (_, calls, *_rest) in stats.stats.items()  # type: ignore[attr-defined]
        if fn == "apply" and path.endswith("autograd/function.py")
    )
    print(
        f"  {nodes} graph nodes (recorded Functions) a step; {applies // steps} Function calls "
        "a step, forward and backward, recorded or not"
    )
    print(f"  where torchlight's step goes ({total / steps * 1000:.1f} ms per step, by own time):")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:10]  # type: ignore[attr-defined]
    for (path, line, fn), (_, calls, own, _cum, _) in rows:
        where = f"{os.path.basename(path)}:{line}({fn})" if line else fn
        print(f"    {own / total:6.1%}  {calls // steps:6d} calls/step  {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--model", choices=("gpt", "lstm"), help="only this model (default both)")
    parser.add_argument(
        "--blas-autodetect",
        action="store_true",
        help="let OpenBLAS pick its kernels for the CPU, ignoring OPENBLAS_CORETYPE",
    )
    parser.add_argument(
        "--backends",
        default="numpy,numba",
        help="torchlight backends to time, comma-separated (default numpy,numba; numba needs "
        "the numba extra)",
    )
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("bench_seq.py compares with PyTorch: pip install torch==2.13.0") from None
    print(f"one training step, float32, 1 thread, batch {BATCH} x {BLOCK} tokens (median ms)")
    chosen = os.environ.get("OPENBLAS_CORETYPE")
    how = f"OPENBLAS_CORETYPE={chosen}" if chosen else "its own pick for this CPU"
    print(f"numpy's OpenBLAS runs its {openblas_core()} kernels ({how})")
    header = f"{'model':<11} {'part':<10} {'torchlight':>11} {'pytorch':>9} {'ratio':>7}"
    print(f"{header} {'no oneDNN':>10} {'ratio':>7}")
    for label, build in (("gpt", build_gpt), ("lstm", build_lstm)):
        if args.model not in (None, label):
            continue
        steppers = {f"ours/{b}": stepper("torchlight", build, backend=b) for b in backends}
        steppers["theirs"] = stepper("torch", build)
        steppers["plain"] = stepper("torch", build, onednn=False)
        medians = timed_steps(steppers, args.steps)
        for backend in backends:
            for part in PARTS:
                a, b, c = (medians[key][part] for key in (f"ours/{backend}", "theirs", "plain"))
                row = f"{label + '/' + backend:<11} {part:<10} {a:11.1f} {b:9.1f} {a / b:6.2f}x"
                print(f"{row} {c:10.1f} {a / c:6.2f}x")
            if args.profile:
                profile(build, backend)


if __name__ == "__main__":
    main()
