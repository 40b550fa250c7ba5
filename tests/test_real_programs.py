"""Real public PyTorch programs (tests/programs/, unchanged but for a header naming the upstream
commit and licence) run on torchlight through ``torchlight.compat`` and match PyTorch.

Each model program is imported twice, once on PyTorch and once with ``torch`` resolved to
torchlight; the torchlight copy gets the PyTorch copy's weights, and both compute the loss and
every gradient of the same tiny batch in float64. Whole scripts run in a subprocess with
``python -m torchlight.compat script.py``. ``benchmarks/bench_real_programs.py`` prints the
step times side by side.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the dev extra installs PyTorch CPU

import torchlight as tl  # noqa: E402
import torchlight.compat as compat  # noqa: E402

PROGRAMS = Path(__file__).parent / "programs"


@contextlib.contextmanager
def torchlight_as_torch() -> Iterator[None]:
    """Inside: ``import torch`` (and ``torch.*``) is torchlight; after: PyTorch again."""
    saved = {n: m for n, m in sys.modules.items() if n == "torch" or n.startswith("torch.")}
    for name in saved:
        del sys.modules[name]
    compat.install()
    try:
        yield
    finally:
        compat.uninstall()
        sys.modules.update(saved)


def load_program(relative: str, name: str, on_torchlight: bool) -> ModuleType:
    """Import tests/programs/<relative> as module ``name`` (its own imports resolved there)."""
    sys.path.insert(0, str(PROGRAMS))
    for cached in [n for n in sys.modules if n == name or n.startswith(name.split(".")[0] + ".")]:
        if cached.split(".")[0] in ("mingpt",) or cached == name:
            del sys.modules[cached]
    try:
        ctx = torchlight_as_torch() if on_torchlight else contextlib.nullcontext()
        with ctx:
            if "/" in relative:
                return importlib.import_module(name)
            spec = importlib.util.spec_from_file_location(name, PROGRAMS / relative)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    finally:
        sys.path.remove(str(PROGRAMS))


def copy_weights(torch_model: Any, tl_model: Any) -> None:
    state = {k: tl.tensor(v.detach().numpy()) for k, v in torch_model.state_dict().items()}
    tl_model.load_state_dict(state)


def assert_same_gradients(torch_model: Any, tl_model: Any, tol: float = 1e-10) -> int:
    theirs = dict(torch_model.named_parameters())
    ours = dict(tl_model.named_parameters())
    assert sorted(theirs) == sorted(ours)
    for name, p in theirs.items():
        g = ours[name].grad
        assert g is not None, f"{name}: no gradient on torchlight"
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=tol, atol=tol, err_msg=name)
    return len(theirs)


@pytest.fixture
def float64_torch() -> Iterator[None]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _gpt_batch(vocab: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.integers(0, vocab, (3, t)), rng.integers(0, vocab, (3, t))


def test_nanogpt_model_matches_pytorch(float64_torch: None) -> None:
    ours, theirs = (load_program("nanogpt_model.py", "nanogpt_model", on) for on in (True, False))
    kw = dict(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8, dropout=0.0, bias=True)
    torch.manual_seed(0)
    t_model = theirs.GPT(theirs.GPTConfig(**kw))
    l_model = ours.GPT(ours.GPTConfig(**kw))
    copy_weights(t_model, l_model)
    x, y = _gpt_batch(11, 8)
    t_logits, t_loss = t_model(torch.tensor(x), torch.tensor(y))
    l_logits, l_loss = l_model(tl.tensor(x), tl.tensor(y))
    t_loss.backward()
    l_loss.backward()
    assert abs(l_loss.item() - t_loss.item()) < 1e-12
    assert assert_same_gradients(t_model, l_model) > 10
    # the program's own optimizer set-up and sampling (torch.multinomial) run unchanged
    opt = l_model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")
    opt.step()
    out = l_model.generate(tl.tensor(x[:1, :2]), max_new_tokens=5, temperature=1.0, top_k=4)
    assert out.shape == (1, 7) and int(out.max().item()) < 11


def load_mingpt(on_torchlight: bool) -> tuple[ModuleType, ModuleType]:
    """minGPT's mingpt.model and mingpt.trainer, imported on PyTorch or on torchlight."""
    for cached in [n for n in sys.modules if n == "mingpt" or n.startswith("mingpt.")]:
        del sys.modules[cached]
    sys.path.insert(0, str(PROGRAMS))
    try:
        with torchlight_as_torch() if on_torchlight else contextlib.nullcontext():
            return importlib.import_module("mingpt.model"), importlib.import_module(
                "mingpt.trainer"
            )
    finally:
        sys.path.remove(str(PROGRAMS))
        for cached in [n for n in sys.modules if n == "mingpt" or n.startswith("mingpt.")]:
            del sys.modules[cached]


def mingpt_config(model: ModuleType) -> Any:
    c = model.GPT.get_default_config()
    c.model_type, c.vocab_size, c.block_size = None, 7, 6
    c.n_layer, c.n_head, c.n_embd = 2, 2, 8
    c.embd_pdrop = c.resid_pdrop = c.attn_pdrop = 0.0
    return c


def test_mingpt_model_matches_pytorch(float64_torch: None) -> None:
    (ours, _), (theirs, _) = load_mingpt(True), load_mingpt(False)
    torch.manual_seed(0)
    t_model, l_model = theirs.GPT(mingpt_config(theirs)), ours.GPT(mingpt_config(ours))
    copy_weights(t_model, l_model)
    x, y = _gpt_batch(7, 6)
    _, t_loss = t_model(torch.tensor(x), torch.tensor(y))
    _, l_loss = l_model(tl.tensor(x), tl.tensor(y))
    t_loss.backward()
    l_loss.backward()
    assert abs(l_loss.item() - t_loss.item()) < 1e-12
    assert assert_same_gradients(t_model, l_model) > 10
    sample = l_model.generate(tl.tensor(x[:1, :2]), 4, do_sample=True, top_k=3)
    assert sample.shape == (1, 6)


class Copy:
    """A tiny data set of the kind minGPT's demos train on: learn to copy a sequence."""

    def __init__(self, framework: Any) -> None:
        self.framework = framework

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        seq = [(i * 3 + k) % 7 for k in range(7)]
        return self.framework.tensor(seq[:-1]), self.framework.tensor(seq[1:])


def test_mingpt_trainer_runs_unchanged_with_worker_processes(float64_torch: None) -> None:
    """minGPT's Trainer: DataLoader(sampler=RandomSampler(replacement=True, num_samples=1e10),
    pin_memory=True, num_workers=2), clip_grad_norm_, AdamW from configure_optimizers."""
    model, trainer = load_mingpt(True)
    tl.manual_seed(0)
    gpt = model.GPT(mingpt_config(model))
    config = trainer.Trainer.get_default_config()
    config.max_iters, config.batch_size, config.num_workers, config.learning_rate = 30, 16, 2, 1e-2
    run = trainer.Trainer(config, gpt, Copy(tl))
    losses: list[float] = []
    run.add_callback("on_batch_end", lambda t: losses.append(t.loss.item()))
    with pytest.warns(UserWarning, match="pin_memory"):
        run.run()
    assert len(losses) == 30 and losses[-1] < 0.5 * losses[0], losses


def run_script(script: str, *args: str, cwd: Path | None = None) -> str:
    """``python -m torchlight.compat tests/programs/<script> args...``; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "torchlight.compat", str(PROGRAMS / script), *args],
        capture_output=True, text=True, timeout=120, cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_pytorch_examples_regression_runs_unchanged() -> None:
    """pytorch/examples regression/main.py: fits a degree-4 polynomial until the smooth L1 loss
    is under 1e-3 (Tensor.mm, '{:+.2f}'.format(tensor), param.data.add_)."""
    out = run_script("regression_main.py")
    loss = float(out.split("Loss: ")[1].split()[0])
    assert loss < 1e-3
    learned = out.split("Learned function:")[1].split("\n")[0].split()
    actual = out.split("Actual function:")[1].split("\n")[0].split()
    coefficients = (
        [float(w) for w in learned if w[0] in "+-"],
        [float(w) for w in actual if w[0] in "+-"],
    )
    assert np.allclose(*coefficients, atol=0.2), out


@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU", "RNN_TANH", "Transformer"])
def test_word_language_model_matches_pytorch(float64_torch: None, rnn_type: str) -> None:
    """pytorch/examples word_language_model/model.py: RNNModel (Embedding, LSTM/GRU/RNN with
    dropout between layers, Linear decoder) and TransformerModel (a subclass of nn.Transformer
    with PositionalEncoding and a log(tril) float mask), trained with NLL as main.py does."""
    ours, theirs = (
        load_program("word_language_model_model.py", "wlm_model", on) for on in (True, False)
    )

    def build(mod: ModuleType) -> Any:
        if rnn_type == "Transformer":
            return mod.TransformerModel(13, 8, 2, 16, 2, dropout=0.0)
        return mod.RNNModel(rnn_type, 13, 8, 8, 2, dropout=0.0)

    torch.manual_seed(0)
    t_model, l_model = build(theirs), build(ours)
    copy_weights(t_model, l_model)
    if rnn_type == "Transformer":  # nn.Transformer's own layers keep its dropout=0.1: switch it off
        t_model.eval(), l_model.eval()
    rng = np.random.default_rng(1)
    data, target = rng.integers(0, 13, (5, 3)), rng.integers(0, 13, 15)
    if rnn_type == "Transformer":
        t_out, l_out = t_model(torch.tensor(data)), l_model(tl.tensor(data))
    else:
        t_out, _ = t_model(torch.tensor(data), t_model.init_hidden(3))
        l_out, _ = l_model(tl.tensor(data), l_model.init_hidden(3))
    t_loss = torch.nn.NLLLoss()(t_out.view(-1, 13), torch.tensor(target))
    l_loss = tl.nn.NLLLoss()(l_out.view(-1, 13), tl.tensor(target))
    t_loss.backward()
    l_loss.backward()
    assert abs(l_loss.item() - t_loss.item()) < 1e-12
    assert assert_same_gradients(t_model, l_model, tol=1e-9) >= 5


def test_super_resolution_model_matches_pytorch(float64_torch: None) -> None:
    """pytorch/examples super_resolution/model.py: Conv2d with tuple arguments, ReLU,
    nn.PixelShuffle, init.orthogonal_ with calculate_gain; MSE as its main.py trains."""
    ours, theirs = (
        load_program("super_resolution_model.py", "sr_model", on) for on in (True, False)
    )
    torch.manual_seed(0)
    t_model, l_model = theirs.Net(upscale_factor=2), ours.Net(upscale_factor=2)
    w = l_model.conv2.weight.detach().numpy().reshape(64, -1)
    np.testing.assert_allclose(
        w @ w.T, 2.0 * np.eye(64), atol=1e-10
    )  # orthogonal, gain(relu)^2 = 2
    copy_weights(t_model, l_model)
    rng = np.random.default_rng(0)
    x, target = rng.normal(size=(2, 1, 5, 5)), rng.normal(size=(2, 1, 10, 10))
    t_loss = torch.nn.MSELoss()(t_model(torch.tensor(x)), torch.tensor(target))
    l_loss = tl.nn.MSELoss()(l_model(tl.tensor(x)), tl.tensor(target))
    t_loss.backward()
    l_loss.backward()
    assert abs(l_loss.item() - t_loss.item()) < 1e-12
    assert assert_same_gradients(t_model, l_model, tol=1e-9) == 8


# ---------------------------------------------------------------- issue 37: more public programs
# Robert Guthrie's NLP tutorials and the 60-minute blitz (pytorch/tutorials, BSD 3-Clause), run
# whole through `python -m torchlight.compat` (so in PyTorch's float32), then their models checked
# against PyTorch's: float64 loss and every gradient, and a float32 run under pytorch_defaults().
def _nlp_model(mod: ModuleType, program: str) -> Any:
    """A fresh model of ``program``, built by its own module (on PyTorch or on torchlight)."""
    if program == "nlp_bow_classifier":
        return mod.BoWClassifier(mod.NUM_LABELS, mod.VOCAB_SIZE)
    if program == "nlp_ngram_embeddings":
        return mod.NGramLanguageModeler(len(set(mod.test_sentence)), mod.EMBEDDING_DIM, 2)
    return mod.LSTMTagger(mod.EMBEDDING_DIM, mod.HIDDEN_DIM, len(mod.word_to_ix), 3)


def _nlp_loss(mod: ModuleType, fw: Any, program: str, model: Any) -> Any:
    """The loss of one training example, as the program's own loop computes it."""
    if program == "nlp_bow_classifier":
        vec = mod.make_bow_vector(mod.data[1][0], mod.word_to_ix)
        return fw.nn.NLLLoss()(model(vec), mod.make_target("ENGLISH", mod.label_to_ix))
    if program == "nlp_ngram_embeddings":
        ix = {w: i for i, w in enumerate(sorted(set(mod.test_sentence)))}
        context = fw.tensor([ix["forty"], ix["When"]], dtype=fw.long)
        return fw.nn.NLLLoss()(model(context), fw.tensor([ix["winters"]], dtype=fw.long))
    sentence, tags = mod.training_data[0]
    scores = model(mod.prepare_sequence(sentence, mod.word_to_ix))
    return fw.nn.NLLLoss()(scores, mod.prepare_sequence(tags, mod.tag_to_ix))


NLP_PROGRAMS = ["nlp_bow_classifier", "nlp_ngram_embeddings", "nlp_lstm_tagger"]


@pytest.mark.parametrize("program", NLP_PROGRAMS)
def test_tutorial_programs_run_unchanged_and_learn(program: str) -> None:
    out = run_script(f"{program}.py")
    rows = [line for line in out.splitlines() if line.strip().startswith("tensor([[")]
    if program == "nlp_bow_classifier":  # after training: SPANISH first, ENGLISH second
        first, second = (
            [float(v) for v in r.split("[[")[1].split("]]")[0].split(",")] for r in rows[-2:]
        )
        assert first[0] > first[1] and second[1] > second[0], out
    elif program == "nlp_ngram_embeddings":  # the printed losses fall every epoch
        printed = next(line for line in out.splitlines() if re.match(r"\[\d", line))
        losses = [float(v) for v in printed.strip("[]").split(",")]
        assert len(losses) == 10 and all(
            b < a for a, b in zip(losses[:-1], losses[1:], strict=True)
        )
    else:  # the tagger learns DET NN V DET NN: row i's largest score is that tag
        block = out.split("tensor([[")[-1]
        scores = [[float(v) for v in r.strip(" []),\n").split(",")] for r in block.split("],")[:5]]
        assert [int(np.argmax(r)) for r in scores] == [0, 1, 2, 0, 1], out


@pytest.mark.parametrize("program", NLP_PROGRAMS)
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-12), ("float32", 2e-6)])
def test_tutorial_models_match_pytorch(program: str, dtype: str, tol: float) -> None:
    """The program's model and loss on PyTorch and on torchlight, the same weights: the loss and
    every gradient agree (float64; and float32, PyTorch's default, under pytorch_defaults)."""
    ours, theirs = (load_program(f"{program}.py", f"{program}_mod", on) for on in (True, False))
    before = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        with compat.pytorch_defaults() if dtype == "float32" else contextlib.nullcontext():
            torch.manual_seed(0)
            t_model, l_model = _nlp_model(theirs, program), _nlp_model(ours, program)
            copy_weights(t_model, l_model)
            t_loss = _nlp_loss(theirs, torch, program, t_model)
            l_loss = _nlp_loss(ours, tl, program, l_model)
            t_loss.backward()
            l_loss.backward()
    finally:
        torch.set_default_dtype(before)
    assert str(l_loss.dtype).endswith(dtype) and str(t_loss.dtype).endswith(dtype)
    assert abs(l_loss.item() - t_loss.item()) < tol * max(1.0, abs(t_loss.item()))
    assert assert_same_gradients(t_model, l_model, tol=tol) >= 2


def test_the_blitz_stops_only_at_next_functions_with_an_error_that_names_it() -> None:
    """The 60-minute blitz's neural-network page prints loss.grad_fn.next_functions[0][0]:
    torchlight's grad_fn is the Function class, so that line stops the script with an error that
    says where a node's inputs are; everything before it (Conv2d, max_pool2d, flatten, a backward
    from a given gradient) ran."""
    done = subprocess.run(
        [sys.executable, "-m", "torchlight.compat", str(PROGRAMS / "blitz_neural_networks.py")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )  # fmt: skip
    assert done.returncode == 1 and "next_functions" in done.stderr
    assert "x.history.parents" in done.stderr and "torch.Size" not in done.stdout
    assert "Net(" in done.stdout and "(6, 1, 5, 5)" in done.stdout
