"""One tiny-GPT training step (bench_seq.py's model, float32, numpy backend) with 1 thread,
2 threads for every product, and torchlight's default (one per physical core, fewer for small
products: ``threads.for_matmul``), taking turns step by step.

Run it on an idle machine and again with the machine busy (``--busy K`` starts K spinning
processes beside it) to see why torchlight defaults to physical cores and why, on a shared
machine, ``TORCHLIGHT_NUM_THREADS=1`` can be much faster.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_seq import build_gpt, stepper  # noqa: E402

import torchlight as tl  # noqa: E402


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--busy", type=int, default=0, help="spinning processes beside it")
    args = parser.parse_args()
    default = tl.threads.physical_cores()
    rule = tl.threads.threads_for

    def every_product(work: int) -> int:  # the small-matrix rule off
        return tl.get_num_threads()

    # (label, threads, rule): the default is the physical cores with the small-matrix rule
    setups = [("1 thread", 1, rule), ("2 threads, every product", 2, every_product)]
    setups.append((f"default ({default}, fewer for small products)", default, rule))
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    try:
        step = stepper("torchlight", build_gpt)
        times: dict[str, list[float]] = {label: [] for label, _, _ in setups}
        for i in range(args.steps + 1):
            for label, n, threads_for in setups:
                tl.threads.threads_for = threads_for
                tl.set_num_threads(n)
                t0 = time.perf_counter()
                step()
                if i:  # the first round warms up
                    times[label].append(time.perf_counter() - t0)
    finally:
        tl.threads.threads_for = rule
        for p in spinners:
            p.terminate()
    base = statistics.median(times["1 thread"])
    print(
        f"GPT step, {args.busy} busy processes, load {os.getloadavg()[0]:.1f}, "
        f"physical cores {tl.threads.physical_cores()}"
    )
    for label, _, _ in setups:
        med = statistics.median(times[label])
        print(f"  {label:42s} {med * 1000:8.1f} ms  ({med / base:.2f}x of 1 thread)")


if __name__ == "__main__":
    main()
