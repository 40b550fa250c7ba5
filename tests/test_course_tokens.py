"""Assignment 6 (tokens and embeddings) outside nbgrader: its hidden texts, its references, its
grader-built library and its integrity findings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from torchlight_grader.checks import a6_tokens
from torchlight_grader.checks.grader import rng_for


def test_the_hidden_texts_have_every_kind_of_character_and_round_trip() -> None:
    """The texts mix ASCII words, other alphabets, emoji, numbers, tabs and newlines; the
    encode item's texts have characters its merges never saw; the library's tokenizer (the
    reference) gives them back exactly."""
    from torchlight.train.tokenizers import BPETokenizer

    rng = np.random.default_rng(0)
    text = "".join(a6_tokens.random_text(rng, 400, unseen=True) for _ in range(3))
    for kind in ("\t", "\n", "  ", "é", "中", "🙂", "ß", "7"):
        assert kind in text, kind
    for seed in range(3):
        case = a6_tokens.encode_case(rng_for(seed, "a6_tokens", "test_encode"), 0)
        text, merges = case.args
        tokenizer = BPETokenizer([(a, b) for a, b in merges])
        assert tokenizer.decode(case.hidden["expected"]) == text
        corpus_bytes = {b for a, c in merges for b in (a, c) if b < 256}
        unseen = [i for i in case.hidden["expected"] if i < 256 and i not in corpus_bytes]
        assert unseen, "the text has bytes no merge involves"


def test_ties_are_common_and_go_to_the_smallest_pair() -> None:
    """On the hidden training texts most merges after the first few are ties, so a tie broken
    another way fails: the library's merge is always the smallest of the most frequent pairs."""
    rng = rng_for(0, "a6_tokens", "test_train_merges")
    case = a6_tokens.train_case(rng, 0)
    text, merges = case.args[0], case.hidden["expected"]
    ties = 0
    for k, pair in enumerate(merges):
        counts = a6_tokens.pair_counts(text, merges[:k])
        top = max(counts.values())
        best = [p for p, c in counts.items() if c == top]
        assert tuple(pair) == min(best), k
        ties += len(best) > 1
    assert ties >= len(merges) // 3, (ties, len(merges))


def test_decode_trials_include_invalid_utf8() -> None:
    case = a6_tokens.decode_case(rng_for(0, "a6_tokens", "test_decode"), 1)
    assert "\ufffd" in case.hidden["expected"]


def test_a_wrong_tie_is_explained() -> None:
    check = a6_tokens.CHECKS["test_train_merges"]
    case = a6_tokens.train_case(rng_for(1, "a6_tokens", "test_train_merges"), 0)
    merges = [list(p) for p in case.hidden["expected"]]
    text = case.args[0]
    k = next(
        k
        for k in range(len(merges))
        if sum(c == max(a6_tokens.pair_counts(text, merges[:k]).values())
               for c in a6_tokens.pair_counts(text, merges[:k]).values()) > 1
    )  # fmt: skip
    counts = a6_tokens.pair_counts(text, merges[:k])
    top = max(counts.values())
    other = max(p for p, c in counts.items() if c == top)
    wrong = [*merges[:k], list(other)]
    message = check.judge(case, {"value": wrong}, check.expected(case))
    assert message and f"merge {k}" in message and "a tie" in message, message


def test_the_tokens_notebooks_library_has_no_tokenizer_and_no_embedding() -> None:
    """a6: in the grader-built library the tokenizer's training, encoding and decoding, the
    embedding lookups and the position tables raise "write it yourself"; indexing and its
    backward still work."""
    from torchlight_grader.checks.graded_library import for_notebook

    ((copy, _target),) = for_notebook("a6_tokens")
    probe = (
        "import torchlight as tl\n"
        "from torchlight.train.tokenizers import BPETokenizer\n"
        "from torchlight.nn.functional import embedding\n"
        "w = tl.randn(4, 2, requires_grad=True); ids = tl.tensor([1, 1])\n"
        "for call in (lambda: BPETokenizer.train('ab ab', 260), lambda: BPETokenizer([]).encode('a'),\n"
        "             lambda: BPETokenizer([]).decode([97]), lambda: embedding(ids, w),\n"
        "             lambda: tl.nn.Embedding(4, 2)(ids),\n"
        "             lambda: tl.nn.SinusoidalPositionalEncoding(4, 2),\n"
        "             lambda: tl.nn.LearnedPositionalEmbedding(4, 2)(tl.zeros(1, 2, 2))):\n"
        "    try:\n"
        "        call()\n"
        "    except RuntimeError as exc:\n"
        "        print(str(exc).split(' is what')[0])\n"
        "w[ids].sum().backward()\n"
        "print(w.grad.tolist()[1])\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=Path(copy).parent, capture_output=True,
                         text=True, check=True)  # fmt: skip
    names = ["BPETokenizer.train", "BPETokenizer.encode", "BPETokenizer.decode", "embedding",
             "Embedding.forward", "SinusoidalPositionalEncoding.__init__",
             "LearnedPositionalEmbedding.forward"]  # fmt: skip
    assert run.stdout.splitlines() == [f"write it yourself: {n}" for n in names] + ["[2.0, 2.0]"], (
        run.stdout + run.stderr
    )


@pytest.mark.parametrize(
    "source",
    [
        "from torchlight.train.tokenizers import BPETokenizer",
        "tl.nn.functional.embedding(ids, w)",
        "import torchlight.train.tokenizers as t\nt.BPETokenizer.train(text, 300)",
        "getattr(tl.nn, 'SinusoidalPositionalEncoding')(4, 2)",
        "from torchlight.nn import *",
    ],
)
def test_the_tokens_findings_name_the_librarys_tokenizer_and_embedding(source: str) -> None:
    assert len(a6_tokens.library_tokens([source])) == 1, source


def test_the_tokens_findings_leave_the_students_own_embedding_alone() -> None:
    honest = (
        "class Embedding(Function):\n    pass\n"
        "def embed(ids, tokens, positions):\n"
        "    return Embedding.apply(tokens, ids) + Embedding.apply(positions, tl.arange(3))\n"
    )
    assert a6_tokens.library_tokens([honest]) == []


# ------------------------------------------------------------------------------ speed
EXPECTED = {"reference_cpu": 0.5, "first_merges": [[101, 32]]}


def _speed_verdicts(received: dict[str, object], expected: dict[str, object] = EXPECTED
                    ) -> dict[str, str | None]:  # fmt: skip
    checks = a6_tokens.CHECKS
    case = checks["test_train_speed"].cases(np.random.default_rng(0))[0]
    return {grade_id: checks[grade_id].judge(case, received, expected)
            for grade_id in ("test_train_speed", "test_train_fast")}  # fmt: skip


def _measurement(ratio: float, cpu_ratio: float | None = None) -> dict[str, object]:
    cpu_ratio = ratio if cpu_ratio is None else cpu_ratio
    pairs = [{"student": ratio * r, "reference": r, "student_cpu": cpu_ratio * r,
              "reference_cpu": r, "agree": True, "order": "SR"}
             for r in (0.50, 0.52, 0.49)]  # fmt: skip
    spent = 0.5 + sum(p["student_cpu"] + p["reference_cpu"] for p in pairs)  # type: ignore[operator]
    return {"pairs": pairs, "failed": None, "cut": None, "reported_cpu": spent,
            "counted_cpu": spent + 0.3, "first_merges": [[101, 32]]}  # fmt: skip


def test_one_training_timing_two_levels_a_cut_and_a_held_measurement() -> None:
    """test_train_fast is judged from test_train_speed's run; the thresholds the notebook
    states (3x, 25x); a trainer cut at 50x the reference's time earns nothing at either level
    and is told why; a measurement too noisy to grade from is held, never a silent zero."""
    from torchlight_grader.checks import timing

    assert a6_tokens.CHECKS["test_train_fast"].same_run_as == "test_train_speed"  # type: ignore[attr-defined]
    assert _speed_verdicts(_measurement(1.1)) == {"test_train_speed": None, "test_train_fast": None}
    middle = _speed_verdicts(_measurement(10.0))
    assert middle["test_train_speed"] is None
    assert "10.00x" in (middle["test_train_fast"] or "")
    assert "needs a ratio of at most 3" in (middle["test_train_fast"] or "")
    slow = _speed_verdicts(_measurement(30.0))
    assert all("needs a ratio" in (v or "") for v in slow.values()), slow
    counted = {"reported_cpu": 25.0, "counted_cpu": 25.4}  # (a cut's clock is checked too)
    cut = _speed_verdicts({"pairs": [], "failed": None, "cut": 24.5, "cut_times": 50.0, **counted})
    assert all("stopped after 24.5 s of CPU time, 50x" in (v or "") for v in cut.values()), cut
    late = _speed_verdicts({"pairs": [], "failed": None, "cut": 14.0, "cut_times": 28.2, **counted})
    assert all("stopped after 14.0 s of CPU time, 28x" in (v or "") for v in late.values()), late
    forged = _speed_verdicts({"pairs": [], "failed": None, "cut": 1.0, "cut_times": 1000.0,
                              "reported_cpu": 0.004, "counted_cpu": 1.9})  # fmt: skip
    assert all("clocks were changed" in (v or "") for v in forged.values()), forged
    busy = _speed_verdicts({"pairs": [], "failed": None, "cut": None, "held": "too busy"})
    assert all((v or "").startswith(f"{timing.HELD} too busy. ") for v in busy.values()), busy
    noisy = _measurement(1.0)
    noisy["pairs"] = [dict(p, reference=r) for p, r in  # type: ignore[call-overload]
                      zip(noisy["pairs"], [0.2, 1.0, 3.0], strict=True)]  # fmt: skip
    held = _speed_verdicts(noisy)
    assert all((v or "").startswith(timing.HELD) for v in held.values()), held
    # what the sandbox reports is checked against what the student's code cannot reach
    faked_wall = _speed_verdicts(_measurement(1.0, cpu_ratio=10.0))  # graded on CPU time too
    assert faked_wall["test_train_speed"] is None
    assert "in CPU time 10.00x" in (faked_wall["test_train_fast"] or ""), faked_wall
    hidden_work = _speed_verdicts({**_measurement(1.0), "counted_cpu": 40.0})
    assert all("the grader's clocks were changed" in (v or "") for v in hidden_work.values())
    drifted = _speed_verdicts(_measurement(1.0), {**EXPECTED, "reference_cpu": 0.2})
    assert all((v or "").startswith(timing.HELD) for v in drifted.values()), drifted
    forged = _speed_verdicts({**_measurement(1.0), "first_merges": [[32, 101]]})
    assert all("not the reference's" in (v or "") for v in forged.values()), forged
    source = Path(a6_tokens.__file__).parents[2] / "assignments/source/a6_tokens/a6_tokens.py"
    stated = source.read_text(encoding="utf-8")
    assert "| `test_train_speed` | ratio <= 25 |" in stated
    assert "| `test_train_fast` | ratio <= 3 |" in stated
    assert "stopped at 50x" in stated
    assert (a6_tokens.SPEED.full, a6_tokens.SPEED.partial, a6_tokens.SPEED_CUT) == (3, 25, 50)


def test_a_call_is_cut_on_cpu_time_and_the_whole_timing_bounded_on_the_wall_clock() -> None:
    """In the sandbox's runner (run here, on a small corpus): a trainer that computes forever is
    cut at 50x the reference's CPU time; one that sleeps runs into the wall-clock bound and is
    held, not cut (it spent no CPU); at that bound, a call past the partial threshold in CPU
    time is cut as slow, and one under it is held (the machine was too busy to tell); a cut
    whose CPU clock was forged is named a forgery by the grader, not slowness."""
    import itertools
    import time

    from torchlight_grader.checks import timing
    from torchlight_grader.sandbox.inside import language, runners

    case = a6_tokens.speed_case(np.random.default_rng(0), 0)

    def bpe_speed(trainer: object, **changed: float) -> dict[str, object]:
        args = dict(zip(case.names or (), case.args, strict=True), chars=5_000, **changed)
        return language.bpe_speed(trainer, {"args": list(args.values())})

    def computes(text: str, vocab_size: int) -> None:
        while True:
            pass

    def sleeps(text: str, vocab_size: int) -> None:
        time.sleep(60)

    def counted(trainer: object, **changed: float) -> dict[str, object]:
        start = time.process_time()  # (the sandbox counts the CPU time around the whole run)
        received = bpe_speed(trainer, **changed)
        return {**received, "counted_cpu": time.process_time() - start}

    cut = counted(computes)
    # (at 50x the reference's CPU time, or 1 s where that is less: then more than 50x)
    assert cut["cut_times"] >= 50.0 - 1e-6 and cut["cut"] >= 1.0, cut  # type: ignore[operator]
    assert "held" not in cut
    verdicts = _speed_verdicts(cut)
    assert all(
        "x the reference trainer's on the same corpus" in (v or "") for v in verdicts.values()
    )
    # a forged CPU clock (a6's faked-clocks: a millisecond a call) makes the reference seem
    # 1,000x faster, so a call is cut at the 1 s floor: the grader names the forgery, not speed
    protected = runners.PROTECTED
    ticks, real = itertools.count(1), protected["cpu"]
    protected["cpu"] = lambda: next(ticks) / 1000
    try:
        forged = counted(computes)
    finally:
        protected["cpu"] = real
    assert forged["cut"] == 1.0, forged
    verdicts = _speed_verdicts(forged)
    assert all("the grader's clocks were changed" in (v or "") for v in verdicts.values()), forged
    napped = bpe_speed(sleeps, held_after=1.5)
    assert napped["cut"] is None and "0.0 s of CPU time" in str(napped["held"]), napped
    past = bpe_speed(computes, cut=10_000.0, partial=2.0, held_after=1.5)
    assert past["cut_times"] > 2.0 and "held" not in past, past  # type: ignore[operator]
    under = bpe_speed(computes, cut=10_000.0, partial=10_000.0, held_after=1.5)
    assert under["cut"] is None and "the grading machine was too busy" in str(under["held"])
    verdicts = _speed_verdicts(under)
    assert all((v or "").startswith(timing.HELD) for v in verdicts.values()), verdicts


def test_the_speed_corpora_are_fresh_and_the_reference_trainer_is_the_librarys() -> None:
    """Every pair's corpus has exactly 1,000,000 characters (so a cache keyed on the length is
    fooled into a stale answer) and other merges; the sandbox's reference trainer learns the
    library's merges."""
    from torchlight.train.tokenizers import BPETokenizer
    from torchlight_grader.sandbox.inside import language

    corpora = [language.fresh_corpus(7, k, a6_tokens.SPEED_CHARS) for k in (0, 1)]
    assert [len(c) for c in corpora] == [a6_tokens.SPEED_CHARS] * 2
    small = [c[:60_000] for c in corpora]
    merges = [language.reference_merges(c, 300) for c in small]
    assert merges[0] != merges[1]
    assert merges[0] == BPETokenizer.train(small[0], 300).merges
    assert language.reference_merges("aaab aaab ab", 259)[0] == (97, 97)


# The speed items' verdicts on the solution, the naive, recounting and cached trainers and the
# two clock forgeries (graded for real in the sandbox) are checked on the course suite's shared
# fixture, which grades every catalog entry through nbgrader: tests/test_course.py,
# test_a6_speed_messages_name_the_cause (grading them a second time here cost 135 s of CI).


def test_the_speed_items_self_check_in_the_students_kernel() -> None:
    """``self_check`` (the student's kernel, ``make homework-check``) times the solution in its
    own process, the CPU time counted around the run: full credit, the ratio shown."""
    import contextlib
    import io

    import jupytext

    from torchlight_grader import self_check

    source = jupytext.read(Path(a6_tokens.__file__).parents[2]
                           / "assignments/source/a6_tokens/a6_tokens.py")  # fmt: skip
    namespace: dict[str, object] = {}
    for cell in source.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if cell.cell_type == "code" and not grade_id.startswith("test"):
            exec(compile(cell.source, f"<{grade_id}>", "exec"), namespace)
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        self_check("a6_tokens", "test_train_fast", namespace)
    assert "in CPU time" in shown.getvalue(), shown.getvalue()
