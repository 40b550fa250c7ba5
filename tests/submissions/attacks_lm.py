"""Attacks on the language-model assignments (a6 tokens, a7 the GPT, a8 inference), graded in
the attack batch of ``tests/test_course_attacks.py`` beside assignment 1's (issue 36).

Each attacker starts from the release (no answer of its own) and, from a cell after the setup
cell (which runs in the grading sandbox and in the feedback kernel), tries what applies to these
notebooks:

- reading the hidden checks and the instructor's notebook, writing the grader, and loading the
  validation text (a7's held-out Shakespeare, as a "model" that looks each window up in it);
- printing a fake score, loss and speed ratio;
- rewriting the grader's modules in its process: the sandbox's ``runners.run`` replaced by one
  that returns made-up results for every kind of item (a BPE speed measurement that burns the
  CPU time it reports, uniform logits for a trained GPT, ids and merges), and the grader's
  clocks replaced;
- calling the library's tokenizer, attention and sampler where the notebook asks for the
  student's own (the ``library-*`` answers of the catalogs, on the release).

Expected: zero everywhere (the release's grade), nothing of the grader printed, and honest
classmates graded after them keep their grades exactly.
"""

from __future__ import annotations

from submissions import a6_tokens, a7_gpt, a8_inference
from submissions.attacks import PRELUDE
from submissions.catalog import Submission, add_cell, replace

#: What each attacker tries first: the hidden checks, the solutions, the grader's files (the
#: library's own sources are no secret: students have the library).
READ = """

def show(path):
    def action():
        with open(path) as f:
            print(f.read()[:200])
    return action


def hidden_checks():
    import importlib
    print(importlib.import_module(f"torchlight_grader.checks.{NAME}").CHECKS)


attempt("print the hidden checks", show(f"{REPO}/torchlight_grader/checks/{NAME}.py"))
attempt("import the hidden checks", hidden_checks)
attempt("print the solutions", show(f"{COURSE}/source/{NAME}/{NAME}.ipynb"))
attempt("rewrite the grader", lambda: open(f"{REPO}/torchlight_grader/checks/{NAME}.py", "a").write("#"))
print("test_train_merges: 2/2 points, test_train_fast: 1/1 (ratio 0.9x)")
print("validation loss: 1.02 nats per character; Score: 13/13")
"""

#: The grader's sandbox code rewritten in the process (only there: in the feedback kernel the
#: module is not loaded). Every item gets made-up results; the grader's clocks stop.
FORGE = """

def forged_run(spec, namespace, case):
    import time
    runner = spec["runner"]
    if runner == "bpe_speed":  # a perfect measurement, with the CPU time it reports burnt
        start = time.process_time()
        while time.process_time() - start < 3.5:
            pass
        pair = {"student": 0.5, "reference": 0.5, "student_cpu": 0.5, "reference_cpu": 0.5,
                "agree": True, "order": "SR"}
        return {"pairs": [dict(pair) for _ in range(3)], "failed": None, "attempts": 1,
                "unfair": [], "cut": None, "limit": 25.0, "reported_cpu": 3.5,
                "calibration_cpu": 0.5, "first_merges": [[101, 32]]}
    if runner == "tokens":
        return {"value": [101, 32], "type": "list"}
    if runner == "lm_training":
        inputs = case["args"][2]
        return {"logits": np.zeros((*inputs.shape, 65)), "altered": np.zeros((*inputs.shape, 65))}
    return {"value": np.zeros(3), "type": "Tensor", "values": np.zeros(3)}


if "runners" in sys.modules:
    sys.modules["runners"].run = forged_run
    sys.modules["runners"].PROTECTED["wall"] = lambda: 0.0
    print("patched: the sandbox's runner and clock")
"""

#: a7 without training: each held-out window looked up in the shipped text.
LOOKUP = a7_gpt.READS_VALIDATION


def _attack(assignment: str, name: str, extra: str = "") -> Submission:
    code = PRELUDE + f'\nNAME = "{assignment}"\n' + READ + extra
    return Submission(name, assignment, "cheat", "release", (add_cell("setup", code),))


def _library(catalog: list[Submission], name: str, assignment: str) -> Submission:
    """A catalog's library answer put on the release: nothing else of the notebook answered."""
    sub = next(s for entry in catalog for s in (entry, *entry.members) if s.name == name)
    return Submission(f"attack-{name}", assignment, "cheat", "release", sub.edits)


LM_ATTACKS = [
    _attack("a6_tokens", "attack-lm-forge", FORGE),
    _attack("a7_gpt", "attack-lm-forge", FORGE),
    _attack("a8_inference", "attack-lm-forge", FORGE),
    Submission(
        "attack-lm-validation",
        "a7_gpt",
        "cheat",
        "release",
        (replace("train", LOOKUP),),
    ),
    _library(a6_tokens.CATALOG, "library-tokenizer", "a6_tokens"),
    _library(a7_gpt.CATALOG, "library-attention", "a7_gpt"),
]

#: Honest classmates graded after the attackers (a7's honest run trains a GPT for ~17 s: its
#: items are covered by the attackers' zeros and the course suite's honest grades).
LM_HONEST = [
    Submission("zz-honest-lm", "a6_tokens", "solution", "solution"),
    Submission("zz-honest-lm", "a8_inference", "solution", "solution"),
]

#: Each library answer's finding in the integrity report.
LM_FLAGGED = {
    "attack-library-tokenizer": a6_tokens.FLAGGED["library-tokenizer"],
    "attack-library-attention": a7_gpt.FLAGGED["library-attention"],
}

__all__ = ["LM_ATTACKS", "LM_FLAGGED", "LM_HONEST", "a8_inference"]
