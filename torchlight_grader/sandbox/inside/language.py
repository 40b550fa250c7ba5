r"""Tokens and embeddings, for the language-model assignments' checks.

This file runs *inside* the sandbox, next to student code, like :mod:`runners`: no reference
values. The grader sends plain data (text, ids, merges); this calls the student's function and
sends back what came, as plain data.

- ``tokens``: ``entry(*args)`` with the arguments as sent (a text, a vocabulary size, a list of
  ids, merges as pairs); the result comes back as a string, or a list of ints (a tensor or an
  array of ids is read as its list), or the name of its type.
- ``graph_with``: the ``graph`` runner with some of the notebook's answers replaced, while the
  item runs, by the grader's stand-ins (:func:`stand_ins`: the embedding lookup and its sum
  over repeated ids; causal self-attention; the pre-norm block), written from the library's
  tensor operations, so that a mistake in one answer costs only its own item;
- ``calls``: ``entry(*args)`` for each argument list of a batch, the floats that came back;
- ``list_value``: ``entry(tensors, *rest)`` with a list of tensors first, the list returned;
- ``lm_training``: ``train_gpt(train_ids, steps, seed)`` on the shipped Shakespeare's first
  90% (rebuilt here, not taken from the notebook), with the stand-ins of the transformer in
  place, then the model's logits (no gradient) for the inputs the grader sent. The targets
  and the loss stay in the grader.
- ``bpe_speed``: the student's ``train_merges`` against the reference trainer below (pair
  counts over the distinct pieces, updated per merge) in the paired protocol of
  ``torchlight_grader/checks/timing.py`` (its source comes with the spec), on a fresh corpus of
  about 1 MB per pair: lines of the shipped Shakespeare drawn at random, its letters relabelled
  by a fresh permutation (so every pair learns other merges). Every call of the student's is
  cut after ``cut`` times the reference's CPU time on a first corpus: a naive trainer stops
  there (``"cut"`` comes back), it does not run for minutes. The whole measurement stops at
  ``held_after`` seconds of wall time, before the item's timeout: a call that by then had
  spent ``partial`` times the reference's CPU time is cut as slow (its CPU time comes back as
  ``"cut"``); otherwise the machine was too busy to time it (``"held"`` comes back).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The most ids (or merges) one answer may send back (the hidden texts are a few kB).
MAX_ITEMS = 200_000


def plain(value: Any, depth: int = 0) -> Any:
    """A student's return value as plain data: str, int, or lists of them; else its type name."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return f"<{type(value).__name__}>"
    if isinstance(value, int | np.integer):
        return int(value)
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # a tensor or an array of ids
        value = value.tolist()
    if isinstance(value, list | tuple) and depth < 2:
        if len(value) > MAX_ITEMS:
            return f"<{type(value).__name__} of {len(value)} items>"
        return [plain(v, depth + 1) for v in value]
    return f"<{type(value).__name__}>"


def stand_ins(names: list[str]) -> dict[str, Any]:
    """The grader's own versions of the named answers (plain tensor math on the library)."""
    import math

    import torchlight as tl
    import torchlight.nn.functional as F
    from torchlight.autograd import Function

    class StandInEmbedding(Function):
        """``weight[ids]``; backward: the one-hot rows' transpose times the gradient."""

        @staticmethod
        def forward(ctx: Any, weight: Any, ids: Any) -> Any:
            ctx.save_for_backward(ids)
            ctx.rows = weight.shape[0]
            return weight[ids]

        @staticmethod
        def backward(ctx: Any, grad_output: Any) -> Any:
            (ids,) = ctx.saved_tensors
            one_hot = tl.eye(ctx.rows, dtype=grad_output.dtype)[ids.reshape(-1)]
            return one_hot.T @ grad_output.reshape(-1, grad_output.shape[-1]), None

    def attention(x: Any, w_qkv: Any, b_qkv: Any, w_out: Any, b_out: Any, nhead: int) -> Any:
        n, t, c = x.shape
        size = c // nhead
        qkv = x @ w_qkv.T + b_qkv
        q, k, v = (qkv[..., i * c : (i + 1) * c].reshape(n, t, nhead, size).permute(0, 2, 1, 3)
                   for i in range(3))  # fmt: skip
        future = np.triu(np.ones((t, t), dtype=bool), k=1)
        mask = tl.tensor(np.where(future, -np.inf, 0.0), dtype=x.dtype)
        scores = q @ k.permute(0, 1, 3, 2) / math.sqrt(size) + mask
        return (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(n, t, c) @ w_out.T + b_out

    def block(x: Any, ln1_w: Any, ln1_b: Any, w_qkv: Any, b_qkv: Any, w_out: Any, b_out: Any,
              ln2_w: Any, ln2_b: Any, w_fc: Any, b_fc: Any, w_proj: Any, b_proj: Any,
              nhead: int) -> Any:  # fmt: skip
        c = x.shape[-1]
        normed = F.layer_norm(x, (c,), ln1_w, ln1_b, 1e-5)
        h = x + attention(normed, w_qkv, b_qkv, w_out, b_out, nhead)
        z = F.layer_norm(h, (c,), ln2_w, ln2_b, 1e-5)
        return h + F.gelu(z @ w_fc.T + b_fc, approximate="tanh") @ w_proj.T + b_proj

    known = {"Embedding": StandInEmbedding, "causal_self_attention": attention, "block": block}
    return {name: known[name] for name in names}


def _swapped(namespace: dict[str, Any], names: list[str], call: Any) -> Any:
    saved = {name: namespace.get(name) for name in names}
    namespace.update(stand_ins(names))
    try:
        return call()
    finally:
        namespace.update(saved)


def shakespeare_train_ids() -> np.ndarray:
    """The first 90% of the shipped Shakespeare, one id per character (the notebook's split)."""
    from torchlight.data.text import load_text
    from torchlight.train.tokenizers import CharTokenizer

    text = load_text("shakespeare")
    data = np.array(CharTokenizer(text).encode(text))
    return data[: int(0.9 * len(data))]


# ------------------------------------------------------------------------------ BPE speed
def _merge_pair(word: tuple[int, ...], pair: tuple[int, int], new: int) -> tuple[int, ...]:
    """The library's ``tokenizers._merge``, which a6's graded library leaves out (students write
    it), so the reference trainer in that sandbox carries its own."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def reference_merges(text: str, vocab_size: int) -> list[tuple[int, int]]:
    """The reference trainer, written as a student would: the pair counts over the distinct
    pieces (weighted by how often each occurs), built once, then updated per merge in the
    pieces that contain the merged pair only (``where``: which pieces hold each pair)."""
    from collections import Counter, defaultdict

    from torchlight.train.tokenizers import WORD  # GPT-2's pre-split, simplified

    pieces = Counter(WORD.findall(text))
    words = [tuple(p.encode("utf-8")) for p in pieces]
    freq = list(pieces.values())
    pairs: Counter[tuple[int, int]] = Counter()
    where: defaultdict[tuple[int, int], set[int]] = defaultdict(set)
    for i, word in enumerate(words):
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += freq[i]
            where[pair].add(i)
    merges: list[tuple[int, int]] = []
    for new in range(256, vocab_size):
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        for i in where.pop(best):
            old, count = words[i], freq[i]
            for pair in zip(old, old[1:], strict=False):
                pairs[pair] -= count
                if pairs[pair] == 0:
                    del pairs[pair]
            words[i] = _merge_pair(old, best, new)
            for pair in zip(words[i], words[i][1:], strict=False):
                pairs[pair] += count
                where[pair].add(i)
    return merges


_LINES: list[str] = []


def fresh_corpus(seed: int, k: int, chars: int) -> str:
    """Exactly ``chars`` characters: random lines of the shipped Shakespeare (drawn with
    replacement), every letter relabelled by a random permutation of the alphabet."""
    if not _LINES:
        from torchlight.data.text import load_text

        _LINES.extend(load_text("shakespeare").splitlines(keepends=True))
    rng = np.random.default_rng([int(seed), k + 1000])
    drawn = rng.integers(0, len(_LINES), size=2 * chars // 40 + 100)
    out, total = [], 0
    for i in drawn:
        out.append(_LINES[i])
        total += len(_LINES[i])
        if total >= chars:
            break
    lower = "abcdefghijklmnopqrstuvwxyz"
    shuffled = "".join(rng.permutation(list(lower)))
    table = str.maketrans(lower + lower.upper(), shuffled + shuffled.upper())
    return "".join(out)[:chars].translate(table)


class _Cut(BaseException):
    """Raised in a student's call that ran past its cut (a BaseException: ``except Exception``
    in the student's code does not swallow it)."""


class _Late(BaseException):
    """Raised when the whole measurement ran past its wall-clock deadline (as :class:`_Cut`)."""


def _as_merges(value: Any) -> list[tuple[int, int]] | None:
    """The student's merges as a new list of pairs of ints (nothing of theirs is compared)."""
    try:
        out = [(int(a), int(b)) for a, b in value]
    except (TypeError, ValueError):
        return None
    return out if len(out) <= MAX_ITEMS else None


def bpe_speed(obj: Any, case: dict[str, Any]) -> dict[str, Any]:
    """The paired protocol on the student's ``train_merges`` and :func:`reference_merges`."""
    import importlib
    import signal
    import sys
    import types

    seed, chars, vocab_size, pairs, attempts, cut, partial, held_after, (spread, share), source = (
        case["args"])  # fmt: skip
    runners = importlib.import_module(f"{__package__}.runners" if __package__ else "runners")
    protected = runners.PROTECTED  # bound before any cell of the notebook ran
    timing = types.ModuleType("torchlight_speed_protocol")
    sys.modules[timing.__name__] = timing  # its dataclasses look their module up there
    protected["exec"](protected["compile"](source, "timing.py", "exec"), timing.__dict__)
    wall, cpu = protected["wall"], protected["cpu"]
    first = fresh_corpus(seed, -1, int(chars))
    start, start_cpu = wall(), cpu()
    reference_merges(first, int(vocab_size))
    spent = [cpu() - start_cpu]  # CPU seconds of every timed call: the grader checks the sum
    # The cut counts CPU time (ITIMER_PROF: this process's, every thread's), as the reference's
    # here: a busy machine slows both clocks' wall time, not what the cut compares.
    limit = max(float(cut) * spent[0], 1.0)

    def on_cut(signum: int, frame: Any) -> None:
        raise _Cut

    calling: list[float] = []  # the CPU clock when the student's current call began
    late_call: list[float] = []  # the CPU time of the student's call the deadline stopped

    def on_late(signum: int, frame: Any) -> None:
        late_call.append(cpu() - calling[-1] if calling else 0.0)
        raise _Late

    def student(text: str) -> Any:
        previous = signal.signal(signal.SIGPROF, on_cut)
        signal.setitimer(signal.ITIMER_PROF, limit)
        calling.append(cpu())
        try:
            return _as_merges(obj(text, int(vocab_size)))
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)
            calling.pop()

    first_merges: list[Any] = []  # the student's merges on pair 0's corpus: checked in the grader

    def fresh(k: int) -> tuple[Any, Any]:
        text = fresh_corpus(seed, k, int(chars))

        def call() -> Any:
            out = student(text)
            if k == 0 and not first_merges:
                first_merges.append(out)
            return out

        return call, (lambda: reference_merges(text, int(vocab_size)))

    def agree(mine: Any, theirs: Any) -> bool:
        return mine is not None and mine == theirs

    def measure() -> dict[str, Any]:
        measured = timing.time_pairs(fresh, agree, pairs=int(pairs), warmup=0,
                                     clocks=(wall, cpu))  # fmt: skip
        spent.append(sum(p["student_cpu"] + p["reference_cpu"] for p in measured["pairs"]))
        return measured

    fairness = timing.Fairness(max_spread=float(spread), min_share=float(share))
    # The wall clock bounds the whole measurement, below the item's timeout: a loaded machine
    # stretches a call's wall time, not its CPU time, so the cut above may come too late.
    late = max(float(held_after) - (wall() - start), 1.0)
    reference = max(spent[0], 1e-6)  # the reference's CPU seconds on the first corpus

    def cut_at(used: float) -> dict[str, Any]:
        # The cut's ratio rests on the reference's time by this runner's CPU clock, which the
        # student's code can change (a forged clock makes the cut come early): what the clock
        # saw since the calibration began goes to the grader, checked against the sandbox's.
        return {"pairs": [], "failed": None, "cut": used, "cut_times": used / reference,
                "reported_cpu": cpu() - start_cpu}  # fmt: skip

    previous = signal.signal(signal.SIGALRM, on_late)
    signal.setitimer(signal.ITIMER_REAL, late)
    try:
        measured = timing.time_fairly(measure, threads=1, attempts=int(attempts),
                                      fairness=fairness)  # fmt: skip
    except _Cut:
        return cut_at(limit)
    except _Late:
        used = late_call[0] if late_call else 0.0
        if used >= float(partial) * reference:  # already past partial credit, in CPU time
            return cut_at(used)
        return {"pairs": [], "failed": None, "cut": None, "held": (
            f"the timing ran past {float(held_after):g} s of wall time with your call at "
            f"{used:.1f} s of CPU time ({used / reference:.1f}x the reference's): "
            "the grading machine was too busy (or your code waited without computing)")}  # fmt: skip
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return {**measured, "cut": None, "limit": limit, "reported_cpu": sum(spent),
            "calibration_cpu": spent[0],
            "first_merges": [list(p) for p in (first_merges[0] or [])] if first_merges else None}  # fmt: skip


def run(
    spec: dict[str, Any], obj: Any, namespace: dict[str, Any], case: dict[str, Any]
) -> dict[str, Any]:
    """One trial of a language-model item: call the student's ``obj``, return raw data."""
    runner = spec["runner"]
    if runner == "bpe_speed":
        return bpe_speed(obj, case)
    if runner == "tokens":
        args = [
            [tuple(int(v) for v in a) if isinstance(a, list | tuple) else int(a) for a in arg]
            if isinstance(arg, list)
            else arg
            for arg in case["args"]
        ]
        out = obj(*args)
        return {"value": plain(out), "type": type(out).__name__}
    import importlib  # the sandbox runs this file as `language`, the grader as a submodule

    runners = importlib.import_module(f"{__package__}.runners" if __package__ else "runners")
    if runner == "graph_with":
        graph = {"runner": "graph", "entry": spec["entry"]}
        return _swapped(namespace, spec["stand_ins"],
                        lambda: runners.run(graph, namespace, case))  # fmt: skip
    if runner == "calls":
        return {"values": np.array([float(obj(*args)) for args in case["args"][0]])}
    if runner == "list_value":
        import torchlight as tl

        tensors = [tl.tensor(np.array(a)) for a in case["args"][0]]
        out = obj(tensors, *case["args"][1:])
        return {"value": runners.raw(out), "type": type(out).__name__}
    if runner == "lm_training":
        import torchlight as tl

        seed, steps, inputs, altered = case["args"]
        model = _swapped(namespace, ["causal_self_attention", "block"],
                         lambda: obj(shakespeare_train_ids(), int(steps), int(seed)))  # fmt: skip
        with tl.no_grad():
            logits = _swapped(namespace, ["causal_self_attention", "block"],
                              lambda: (model(tl.tensor(inputs)), model(tl.tensor(altered))))  # fmt: skip
        return {"logits": runners.raw(logits[0]), "altered": runners.raw(logits[1])}
    raise ValueError(f"unknown language runner {runner!r}")
