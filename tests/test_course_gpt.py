"""Assignment 7 (the transformer and its training loop) outside nbgrader: its references
against the library, its judge of a trained model, its grader-built library, its findings."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from torchlight_grader.checks import a7_gpt
from torchlight_grader.checks.grader import rng_for


def test_the_adamw_reference_is_the_librarys_adamw() -> None:
    import torchlight as tl

    case = a7_gpt.adamw_case(rng_for(0, "a7_gpt", "test_adamw"), 0)
    p, g, m, v, step, lr, b1, b2, eps, wd = case.args
    param = tl.tensor(p.copy(), requires_grad=True)
    optimizer = tl.optim.AdamW([param], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    state = optimizer.state[param] = {}
    state.update(step=step - 1, exp_avg=tl.tensor(m.copy()), exp_avg_sq=tl.tensor(v.copy()))
    param.grad = tl.tensor(g.copy())
    optimizer.step()
    want, want_m, want_v = a7_gpt.adamw(*case.args)
    np.testing.assert_allclose(param.detach().numpy(), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(state["exp_avg"].numpy(), want_m, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(state["exp_avg_sq"].numpy(), want_v, rtol=1e-12, atol=1e-15)


def test_the_schedule_reference_warms_up_then_follows_the_librarys_cosine() -> None:
    import torchlight as tl

    warmup, total, top, low = 5, 40, 0.5, 0.05
    param = tl.tensor([0.0], requires_grad=True)
    optimizer = tl.optim.SGD([param], lr=top)
    cosine = tl.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total - warmup, eta_min=low)
    for step in range(warmup, total + 1):
        got = a7_gpt.lr_at(step, top, low, warmup, total)
        assert got == pytest.approx(optimizer.param_groups[0]["lr"], rel=1e-12), step
        optimizer.step()
        cosine.step()
    assert a7_gpt.lr_at(0, top, low, warmup, total) == top / warmup
    assert a7_gpt.lr_at(total + 3, top, low, warmup, total) == low


def test_the_clipping_reference_is_the_librarys_clip_grad_norm() -> None:
    import torchlight as tl

    for trial in range(3):
        case = a7_gpt.clip_case(rng_for(0, "a7_gpt", "test_clip"), trial)
        grads, max_norm = case.args
        params = [tl.tensor(np.zeros_like(g), requires_grad=True) for g in grads]
        for p, g in zip(params, grads, strict=True):
            p.grad = tl.tensor(g.copy())
        tl.nn.utils.clip_grad_norm_(params, max_norm)
        for p, want in zip(params, a7_gpt.clip(grads, max_norm), strict=True):
            np.testing.assert_allclose(p.grad.numpy(), want, rtol=1e-12, atol=1e-15)


def _received(case: object, peek: bool, level: float) -> dict:
    """Logits of a model that predicts the true next character with confidence ``level``
    (``peek``: read from the next input, as a mask off by one would)."""
    inputs, altered = case.args[2], case.args[3]  # type: ignore[attr-defined]
    targets = case.hidden["targets"]  # type: ignore[attr-defined]

    def logits(x: np.ndarray) -> np.ndarray:
        out = np.zeros((*x.shape, 65))
        following = np.roll(x, -1, axis=1) if peek else targets
        np.put_along_axis(out, following[..., None], level, axis=-1)
        return out

    return {"logits": logits(inputs), "altered": logits(altered)}


def test_the_training_judge_computes_the_loss_and_catches_a_model_that_reads_ahead() -> None:
    check = a7_gpt.CHECKS["test_train"]
    (case,) = check.cases(rng_for(0, "a7_gpt", "test_train"))
    assert "targets" not in str(case.args) and case.args[2].shape == (a7_gpt.WINDOWS, 32)
    held = a7_gpt.shakespeare_held_out()
    text = "".join(map(chr, held[:10]))  # the windows come from the held-out part only
    assert text
    expected = check.expected(case)
    # an oracle that knows the targets (and does not read ahead) passes; a uniform guess fails
    assert check.judge(case, _received(case, peek=False, level=20.0), expected) is None
    flat = check.judge(case, _received(case, peek=False, level=0.0), expected)
    assert flat and f"{math.log(65):.3f} nats" in flat, flat
    peeking = check.judge(case, _received(case, peek=True, level=20.0), expected)
    assert peeking and "reads ahead" in peeking, peeking


def test_the_gpt_notebooks_library_has_no_attention_no_adamw_and_no_clipping() -> None:
    """a7: in the grader-built library the attention, the transformer layers, Adam's update,
    the cosine schedule and clip_grad_norm_ raise "write it yourself"; layer_norm, softmax and
    cross_entropy (which the notebook builds on) still work."""
    from torchlight_grader.checks.graded_library import for_notebook

    ((copy, _target),) = for_notebook("a7_gpt")
    probe = (
        "import torchlight as tl, torchlight.nn.functional as F\n"
        "x = tl.randn(1, 3, 4, requires_grad=True)\n"
        "p = tl.tensor([1.0], requires_grad=True); p.grad = tl.tensor([1.0])\n"
        "opt = tl.optim.SGD([p], lr=0.1)\n"
        "for call in (lambda: F.scaled_dot_product_attention(x, x, x, is_causal=True),\n"
        "             lambda: tl.nn.MultiheadAttention(4, 2, batch_first=True)(x, x, x),\n"
        "             lambda: tl.nn.GPTBlock(4, 2)(x),\n"
        "             lambda: tl.optim.AdamW([p]).step(),\n"
        "             lambda: tl.optim.lr_scheduler.CosineAnnealingLR(opt, 10).step(),\n"
        "             lambda: tl.nn.utils.clip_grad_norm_([p], 1.0)):\n"
        "    try:\n"
        "        call()\n"
        "    except RuntimeError as exc:\n"
        "        print(str(exc).split(' is what')[0])\n"
        "y = F.layer_norm(x, (4,), tl.ones(4), tl.zeros(4), 1e-5).softmax(-1)\n"
        "F.cross_entropy(y.reshape(3, 4), tl.tensor([0, 1, 2])).backward()\n"
        "print(x.grad.shape)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=Path(copy).parent, capture_output=True,
                         text=True, check=True)  # fmt: skip
    names = ["scaled_dot_product_attention", "MultiheadAttention.forward", "GPTBlock.forward",
             "Adam._update", "CosineAnnealingLR.get_lr", "clip_grad_norm_"]  # fmt: skip
    assert run.stdout.splitlines() == [f"write it yourself: {n}" for n in names] + ["(1, 3, 4)"], (
        run.stdout + run.stderr
    )


@pytest.mark.parametrize(
    "source",
    [
        "out = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
        "optimizer = tl.optim.AdamW(model.parameters())",
        "from torchlight.nn.utils import clip_grad_norm_",
        "getattr(tl.nn, 'MultiheadAttention')(4, 2)",
    ],
)
def test_the_gpt_findings_name_the_librarys_attention_and_optimizers(source: str) -> None:
    assert len(a7_gpt.library_transformer([source])) == 1, source


def test_the_gpt_findings_leave_an_honest_loop_alone() -> None:
    honest = (
        "def adamw_step(param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay):\n"
        "    return param * (1 - lr * weight_decay), m, v\n"
        "scores = (q @ k.permute(0, 1, 3, 2)).softmax(-1)\n"
    )
    assert a7_gpt.library_transformer([honest]) == []


def test_the_gpt_sandboxs_shakespeare_has_its_validation_part_shuffled() -> None:
    """The hidden checks' copy of the library keeps Shakespeare's first 90% (the training
    data) and its characters, and has the last 10% (where the grader's held-out windows come
    from) in a random order: a notebook cannot look the windows up (the catalog's
    reads-validation reaches 0.36 nats on the real text)."""
    import gzip

    from torchlight.data.text import load_text
    from torchlight_grader.checks.graded_library import for_notebook

    ((copy, _target),) = for_notebook("a7_gpt")
    text = load_text("shakespeare")
    shipped = gzip.decompress((Path(copy) / "data" / "shakespeare.txt.gz").read_bytes()).decode()
    head = int(0.9 * len(text))
    assert len(shipped) == len(text) and shipped[:head] == text[:head]
    assert sorted(shipped[head:]) == sorted(text[head:])
    windows = [text[s : s + 12] for s in range(head, len(text) - 12, 503)]
    found = sum(window in shipped[head:] for window in windows)  # all 280 in the real tail
    assert found < len(windows) // 10, (found, len(windows))
