"""A newcomer's run from a fresh clone, timed (issue 26, "Show").

Clones this repository (its committed HEAD) into a temporary folder and, there, as a learner
following the README would:

1. **set-up**: ``make .venv/.torchlight-lab``, the install half of ``make lab`` (a fresh
   ``.venv`` with the ``lab`` extra and the torchlight kernel; the other half only starts
   JupyterLab, which step 4 starts and stops);
2. **tutorials**: ``benchmarks/bench_tutorials.py`` in the clone's ``.venv`` (each tutorial top
   to bottom on a fresh kernel, torchlight's default threads; numba's cache starts cold, as
   for a newcomer; the benchmark needs ``jupytext``, installed into the clone after the set-up
   is timed);
3. **the GPT command**: the README's ``python -m torchlight.train --dataset shakespeare --model
   gpt --save gpt.ckpt`` for ``--gpt-seconds`` (then Ctrl-C), its time per epoch *projected*
   from tqdm's steps done so far (a full epoch runs for minutes);
4. **every README shell command as written**: ``tests/test_readme.py``'s harness (each block
   pasted into a fresh bash, long commands stopped once started), on the clone, with one change
   from the test: ``make homework`` installs what it needs, as for the newcomer (the test
   marks the installs done); ``make test`` still does not reinstall (``.[all]``, 2.2 GB), so
   it is expected to fail here for want of ruff (the lab extra has no developer tools).

Prints each step's time and the load average beside it; ``--json PATH`` writes them too.
Pip's download cache (``~/.cache/pip``) is this machine's: a first install ever downloads too.

Usage::

    .venv/bin/python benchmarks/bench_newcomer.py               # all four steps
    .venv/bin/python benchmarks/bench_newcomer.py --skip readme --gpt-seconds 60

Measured 2026-12-02 on the 2-core machine as it was (other helpers' test runs at nice 10 beside
it; not idle: the lead re-runs it idle), from commits b66a2e4 and 7be5d1c, pip's cache warm:

    git clone                          0.6-2.3 s
    set-up (the lab extra, 539 MB)     39-55 s          load 2.1-6.7
    tutorials 1-7 (default threads)    2.0, 2.2, 4.3, 15.5, 5.0, 27.0, 16.9 s   load 2.4-3.1
    GPT command, time per epoch        1.7 min, projected from 136/618 steps of epoch 1
                                       (8 min for its 5 epochs)                 load 3.5
    README shell commands (9)          all rc 0 in the second run; in the first, `make lab`
                                       failed: JupyterLab lost the harness's SIGTERM (its
                                       handler logs, and a signal landing while it writes the
                                       probe's 404 line raises a reentrant-write RuntimeError);
                                       the harness now waits 1 s after its probe (397130a)
      make lab 5-25 s, make homework 34-54 s (installs the course extra), make test stopped
      once started 1 s, make homework-check A=a1 11-19 s, torchlight.compat 0.5 s, the
      shakespeare GPT (stopped at epoch 1) 1.6 s, generate 0.7-1.2 s, the BPE GPT 13-22 s

Re-run idle (load 1.0-1.3, nothing else running), from 9d18aae, ``--skip readme --gpt-seconds 45``:

    git clone 2.9 s; set-up 43.2 s (539 MB)
    tutorials 1-7: 1.2, 1.5, 2.7, 9.3, 2.1, 17.9, 8.0 s (Tutorial 6's slowest cell is loading
    and tokenizing the text, 16.2 s; 4's is numba compiling, 4.2 s)
    GPT command: 1.5 min per epoch, projected from 301/618 steps in 44 s (8 min for 5 epochs)

Re-run idle on a fresh machine (load 0.7-1.3), from ac1fdf6 (the fused gradient kernels and the
allocator setting in), all four steps, ``--gpt-seconds 60``:

    git clone 0.2 s; set-up 25.8 s (539 MB)
    tutorials 1-7: 1.1, 1.3, 2.0, 7.6, 1.5, 10.7, 4.5 s (Tutorial 6's slowest cell is loading
    the text, 9.4 s; 4's is numba compiling, 3.6 s)
    GPT command: 0.8 min per epoch, measured (epoch 1 finished in 46 s, loading included)
    README shell commands: 9 of 9 rc 0 (make lab 4.0 s, make homework 23.2 s, make
    homework-check A=a1 8.3 s, the BPE GPT 10.2 s)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GPT = "python -m torchlight.train --dataset shakespeare --model gpt --save gpt.ckpt"
PROGRESS = re.compile(r"epoch (\d+)/(\d+):.*?(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<")


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def timed(label: str, cmd: list[str], cwd: Path, results: dict[str, Any], **kw: Any) -> str:
    before = load()
    t0 = time.perf_counter()
    run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, **kw)
    seconds = time.perf_counter() - t0
    results[label] = {"seconds": round(seconds, 1), "rc": run.returncode, "load": before}
    print(f"{label}: {seconds:.1f} s, rc {run.returncode} ({before})", flush=True)
    if run.returncode:
        print((run.stdout + run.stderr)[-3000:])
    return run.stdout + run.stderr


def gpt_epoch(clone: Path, seconds: float, results: dict[str, Any]) -> None:
    """The README's GPT command for ``seconds``, then Ctrl-C; the epoch time projected from the
    last progress line (steps done / steps per epoch, tqdm's elapsed time)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    before = load()
    proc = subprocess.Popen(
        ["bash", "-c", f"source .venv/bin/activate && exec {GPT}"],
        cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    time.sleep(seconds)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    text = out.decode(errors="replace").replace("\r", "\n")
    found = PROGRESS.findall(text)
    if not found:
        results["gpt"] = {"error": text[-2000:]}
        print("GPT: no progress line\n" + text[-2000:])
        return

    def seconds_of(match: tuple[str, ...]) -> int:
        h, m, s = match[4:]
        return int(h or 0) * 3600 + int(m) * 60 + int(s)

    epochs = int(found[-1][1])
    whole = [seconds_of(f) for f in found if f[2] == f[3]]  # an epoch's last progress line
    epoch, _, done, total = found[-1][:4]
    elapsed = seconds_of(found[-1])
    per_epoch = whole[0] if whole else elapsed * int(total) / max(1, int(done))
    results["gpt"] = {
        "epochs": epochs, "steps_per_epoch": int(total), "first_epoch_s": whole[0] if whole
        else None, "projected_epoch_s": round(elapsed * int(total) / max(1, int(done))),
        "load": before,
    }  # fmt: skip
    how = (
        "measured (epoch 1 finished)"
        if whole
        else f"projected from {done}/{total} steps of epoch {epoch} in {elapsed} s"
    )
    print(
        f"GPT ({GPT}): {per_epoch / 60:.1f} min per epoch, {how}, {per_epoch * epochs / 60:.0f}"
        f" min for its {epochs} epochs ({before})",
        flush=True,
    )


def readme(clone: Path, results: dict[str, Any]) -> None:
    """Every README shell command as pasted, through tests/test_readme.py's harness."""
    spec = importlib.util.spec_from_file_location("clone_readme", clone / "tests/test_readme.py")
    assert spec and spec.loader
    harness = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = harness  # its dataclass looks its module up there
    spec.loader.exec_module(harness)
    harness.NO_INSTALL = "-o .venv/.torchlight-installed"  # lab and homework install as needed

    class Temp:  # what the harness's fixture asks of pytest's tmp_path_factory
        def mktemp(self, name: str) -> Path:
            return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=clone.parent))

    before = load()
    t0 = time.perf_counter()
    pasted = harness._paste_all(harness._make_workdir(Temp()))
    results["readme"] = {
        "seconds": round(time.perf_counter() - t0, 1), "load": before,
        "commands": {c: {"rc": r.rc, "seconds": round(r.seconds, 1)} for c, r in pasted.items()},
        "failed": {c: r.text[:4000] + "\n[...]\n" + r.text[-1500:] for c, r in pasted.items() if r.rc},
    }  # fmt: skip
    failed = results["readme"]["failed"]
    print(f"README commands: {len(pasted)} run, {len(failed)} failed ({before})")
    for command, text in failed.items():
        print(f"--- {command}\n{text}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip", nargs="*", default=[], choices=["tutorials", "gpt", "readme"])
    parser.add_argument("--gpt-seconds", type=float, default=120.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the clone (printed)")
    args = parser.parse_args()
    results: dict[str, Any] = {"cpus": os.cpu_count()}
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True).stdout.strip()  # fmt: skip
    results["commit"] = head
    where = Path(tempfile.mkdtemp(prefix="torchlight-newcomer-"))
    clone = where / "torchlight"
    print(f"fresh clone of {ROOT} at {head} in {clone}")
    timed("git clone", ["git", "clone", "-q", str(ROOT), str(clone)], where, results)
    # the clone's `make` sees no venv of the caller's
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    timed("set-up (make .venv/.torchlight-lab)", ["make", ".venv/.torchlight-lab"], clone,
          results, env=env)  # fmt: skip
    du = subprocess.run(["du", "-sm", str(clone / ".venv")], capture_output=True, text=True)
    results["venv_mb"] = int(du.stdout.split()[0]) if du.stdout else None
    print(f".venv: {results['venv_mb']} MB")
    if "tutorials" not in args.skip:
        # bench_tutorials.py starts kernels the way tools/build_notebooks.py does, which imports
        # jupytext (a notebook-building tool, not in the lab extra): added after the set-up
        timed("pip install jupytext (for the benchmark only)",
              [".venv/bin/python", "-m", "pip", "install", "-q", "jupytext", "nbclient"], clone, results,
              env=env)  # fmt: skip
        text = timed("tutorials", [".venv/bin/python", "benchmarks/bench_tutorials.py"], clone,
                     results, env=env)  # fmt: skip
        print(text)
        results["tutorials_table"] = text
    if "gpt" not in args.skip:
        gpt_epoch(clone, args.gpt_seconds, results)
    if "readme" not in args.skip:
        readme(clone, results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.keep:
        print(f"kept {where}")
    else:
        subprocess.run(["rm", "-rf", str(where)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
