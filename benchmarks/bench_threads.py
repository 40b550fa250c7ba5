"""One tiny-GPT training step (bench_seq.py's model, float32, numpy backend) and one digits-MLP
step (bench_nn.py's, batch 64, float32) with 1 thread, 2 threads for every product, the old
default (one per physical core, fewer for small products: ``threads.for_matmul``) and today's
default (the same, capped by the CPUs the load average leaves free: ``threads.free_cores``),
taking turns step by step.

Run it on an idle machine and again with the machine busy (``--busy K`` starts K spinning
processes beside it and waits ``--settle`` seconds for the one-minute load average to see
them; or start your own ``python -c 'while 1: pass'`` beforehand) to see why the default
caps itself by the load: OpenBLAS's threads spin while they wait for a core.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from bench_nn import step_torchlight  # noqa: E402
from bench_seq import build_gpt, stepper  # noqa: E402

import torchlight as tl  # noqa: E402


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--busy", type=int, default=0, help="spinning processes beside it")
    parser.add_argument("--settle", type=float, default=70.0, help="seconds to wait with --busy")
    args = parser.parse_args()
    cores = tl.threads.physical_cores()
    rule = tl.threads.threads_for

    def every_product(work: int) -> int:  # the small-matrix rule off
        return tl.get_num_threads()

    # (label, threads (None: the default), rule)
    setups: list[tuple[str, int | None, object]] = [
        ("1 thread", 1, rule),
        ("2 threads, every product", 2, every_product),
        (f"old default ({cores}, fewer for small)", cores, rule),
        ("default (capped by the free CPUs)", None, rule),
    ]
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    if spinners:
        time.sleep(args.settle)
    models = {
        "GPT step": stepper("torchlight", build_gpt),
        "MLP step": step_torchlight("mlp", np.float32),
    }
    times = {(m, label): [] for m in models for label, _, _ in setups}  # type: ignore[var-annotated]
    chosen: list[int] = []
    load0 = os.getloadavg()[0]
    try:
        for i in range(args.steps + 1):
            for model, step in models.items():
                # each round starts with the next setup: OpenBLAS's threads spin on for a
                # while after a product, which slows whatever runs right after many threads
                for label, n, threads_for in setups[i % 4 :] + setups[: i % 4]:
                    tl.threads.threads_for = threads_for  # type: ignore[assignment]
                    if n is None:
                        tl.threads._use_default()
                        chosen.append(tl.threads.max_matmul_threads())
                    else:
                        tl.set_num_threads(n)
                    reps = 50 if model == "MLP step" else 1
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        step()
                    if i:  # the first round warms up
                        times[model, label].append((time.perf_counter() - t0) / reps)
    finally:
        tl.threads.threads_for = rule
        for p in spinners:
            p.terminate()
    print(
        f"{args.busy} busy processes, load {load0:.1f} -> {os.getloadavg()[0]:.1f}, "
        f"{os.cpu_count()} CPUs, physical cores {cores}, "
        f"default chose {min(chosen)}-{max(chosen)} threads"
    )
    for model in models:
        base = statistics.median(times[model, "1 thread"])
        print(model)
        for label, _, _ in setups:
            med = statistics.median(times[model, label])
            print(f"  {label:38s} {med * 1000:8.2f} ms  ({med / base:.2f}x of 1 thread)")


if __name__ == "__main__":
    main()
