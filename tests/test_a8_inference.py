"""Assignment a8 (inference and efficiency) without nbgrader: its references, its grader-built
library, its findings, and every catalog entry's items checked in this process on several
seeds (``tests/test_course.py`` grades the same catalog through the real nbgrader pipeline and
the sandbox, once)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import jupytext
import numpy as np
import pytest
from submissions import a8_inference as catalog
from submissions.catalog import build

from torchlight_grader import self_check
from torchlight_grader.checks import a8_inference as checks
from torchlight_grader.checks import registry

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments" / "source" / "a8_inference" / "a8_inference.py"


def _namespace(sub: Any) -> dict[str, Any]:
    """The answer cells (and the locked ones) of ``sub``'s notebook, run in one namespace."""
    source = jupytext.read(SOURCE)
    namespace: dict[str, Any] = {}
    for cell in build(sub, source, source).cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if cell.cell_type == "code" and not grade_id.startswith("test"):
            exec(compile(cell.source, f"<{grade_id}>", "exec"), namespace)
    return namespace


def _failing(namespace: dict[str, Any], seed: int) -> set[str]:
    failed = set()
    for grade_id in registry.checks_for("a8_inference"):
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                self_check("a8_inference", grade_id, namespace, seed=seed)
        except Exception:  # noqa: BLE001 - any failure costs the item
            failed.add(grade_id)
    return failed


@pytest.mark.parametrize(
    "sub",
    [m for s in catalog.CATALOG if s.base == "solution" for m in (s, *s.members)],
    ids=lambda s: s.name,
)
def test_each_catalog_entry_costs_exactly_its_items(sub: Any) -> None:
    """Every entry, and every member of a notebook of several (the course suite grades those
    together), on its own: exactly its items fail, on three seeds."""
    namespace = _namespace(sub)
    for seed in (0, 1, 2):
        assert _failing(namespace, seed) == set(sub.zero), (sub.name, seed)


def test_the_draws_are_numpys_choice() -> None:
    rng = np.random.default_rng(5)
    p = rng.uniform(size=11) ** 3
    p[[2, 7]] = 0.0
    p /= p.sum()
    generator = np.random.default_rng(123)
    assert checks.draws(p, 123, 500) == [int(generator.choice(11, p=p)) for _ in range(500)]


def test_top_p_keeps_the_token_that_crosses_it() -> None:
    z = np.log(np.array([0.1, 0.5, 0.3, 0.1]))
    kept = checks.sampling_probs(z, 1.0, None, 0.7) > 0
    assert kept.tolist() == [False, True, True, False]  # 0.5 < 0.7 <= 0.5 + 0.3
    kept = checks.sampling_probs(z, 1.0, None, 0.5) > 0
    assert kept.tolist() == [False, True, False, False]  # 0.5 reaches 0.5 by itself
    assert checks.sampling_probs(z, 1.0, 2, None).tolist() == pytest.approx([0, 0.625, 0.375, 0])


def test_the_quantizer_reference_is_within_half_a_step() -> None:
    w = np.random.default_rng(0).normal(size=(7, 9)) * np.array(
        [[0.01], [1], [5], [0.1], [2], [0.5], [3]]
    )
    q, scale = checks.quantize_int8(w)
    assert q.dtype == np.int8 and np.abs(q).max(axis=1).tolist() == [127] * 7
    assert np.all(np.abs(q * scale[:, None] - w) <= scale[:, None] / 2 + 1e-15)


def test_the_kv_reference_cache_is_what_the_gpt_attends_over() -> None:
    """The prefix keys and values the grader hands the sandbox, with the solution's step on
    top, give the full forward pass's logits (so a cache trial is fair)."""
    import torchlight as tl

    rng = np.random.default_rng(3)
    config = checks.gpt_config(9, 8, 2, 2)
    model = checks.gpt_model(config, checks.gpt_state(rng, config))
    tokens = [1, 5, 2, 8, 0, 3]
    namespace = _namespace(catalog.CATALOG[0])
    cache = namespace["KVCache"](2)
    prefix = checks.prefix_cache(model, tokens[:4])
    with tl.no_grad():
        for layer in range(2):
            cache.append(
                layer, tl.tensor(prefix["keys"][layer]), tl.tensor(prefix["values"][layer])
            )
        steps = [namespace["decode_step"](model, t, cache).numpy() for t in tokens[4:]]
        full = model(tl.tensor([tokens])).numpy()[0, 4:]
    np.testing.assert_allclose(np.stack(steps), full, rtol=1e-12, atol=1e-12)


def test_the_inference_notebooks_library_has_no_sampler_and_no_checkpoint() -> None:
    """In the grader-built library of a8, generate() and CheckpointFunction.backward raise
    "write it yourself"; the GPT, the rest of autograd and numpy still work."""
    from torchlight_grader.checks.graded_library import for_notebook

    ((copy, _target),) = for_notebook("a8_inference")
    probe = (
        "import torchlight as tl\n"
        "from torchlight.train.generate import generate\n"
        "from torchlight.utils.checkpoint import checkpoint\n"
        "model = tl.nn.GPT(vocab_size=5, block_size=4, d_model=8, nhead=2, num_layers=1)\n"
        "x = tl.randn(2, 3, requires_grad=True)\n"
        "for call in (lambda: generate(model, [1], 1, 4),\n"
        "             lambda: checkpoint(lambda t: t.tanh(), x).sum().backward(),\n"
        "             lambda: tl.amp.GradScaler().update()):\n"
        "    try:\n"
        "        call()\n"
        "    except RuntimeError as exc:\n"
        "        print(str(exc).split(' is what')[0].split(\"'s backward\")[0])\n"
        "print(model(tl.tensor([[1, 2]])).shape)\n"
        "x.tanh().sum().backward(); print(x.grad.shape)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=Path(copy).parent, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert run.stdout.splitlines() == [
        "write it yourself: generate",
        "write it yourself: CheckpointFunction",
        "write it yourself: GradScaler.update",
        "(1, 2, 5)",
        "(2, 3)",
    ], run.stdout + run.stderr


def test_the_checkpoints_backward_may_drive_autograd_in_a8_only() -> None:
    """A checkpoint recomputes with a graph by design: the structure check that flags a
    backward driving autograd leaves a8's Checkpoint alone, and flags the same class elsewhere."""
    from torchlight_grader.checks.structure import library_autograd

    source = jupytext.read(SOURCE)
    answer = next(
        c.source
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "checkpoint"
    )
    assert library_autograd([answer], registry.autograd_backwards("a8_inference")) == []
    assert registry.autograd_backwards("a5_attention") == frozenset()
    (line,) = library_autograd([answer], registry.autograd_backwards("a5_attention"))
    assert "Checkpoint.backward drives torchlight's own autograd" in line


def test_the_findings_name_the_librarys_sampler_and_checkpoint() -> None:
    for source, words in {
        "from torchlight.train.generate import generate": "imports generate",
        "from torchlight.utils.checkpoint import checkpoint": "imports checkpoint",
        "import torchlight.utils.checkpoint": "imports torchlight.utils.checkpoint",
        "tl.utils.checkpoint.checkpoint(f, x)": "uses .checkpoint",
        "getattr(module, 'generate')": "names 'generate' through getattr",
        "from torchlight.amp import GradScaler": "imports GradScaler",
        "scaler = tl.amp.GradScaler()": "uses .GradScaler",
    }.items():
        lines = checks.library_sampler([source])
        assert len(lines) == 1 and words in lines[0], (source, lines)
    honest = [cell.source for cell in jupytext.read(SOURCE).cells if cell.cell_type == "code"]
    assert checks.library_sampler(honest) == []
