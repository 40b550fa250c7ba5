"""The Shakespeare corpus, the tokenizers, the text windows, and training/generating from the CLI."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import torchlight as tl
from torchlight.data import DataLoader
from torchlight.data.text import TextWindows, load_text
from torchlight.train import cli as train
from torchlight.train import generate
from torchlight.train import text as train_text
from torchlight.train.checkpoint import checkpoint_extra
from torchlight.train.tokenizers import BPETokenizer, CharTokenizer, tokenizer_from_dict

TEXT = load_text("shakespeare")


def test_the_corpus_is_shipped_with_its_license() -> None:
    assert len(TEXT) == 1_405_487
    assert TEXT.startswith("BERNARDO:\nWho's there?")
    assert len(set(TEXT)) == 65
    license_file = pathlib.Path(tl.__file__).parent / "data" / "SHAKESPEARE_LICENSE.txt"
    assert "public domain" in license_file.read_text()


def test_char_tokenizer_round_trip_and_unknown_characters() -> None:
    tok = CharTokenizer(TEXT)
    sample = TEXT[5000:5400]
    assert tok.decode(tok.encode(sample)) == sample
    assert tokenizer_from_dict(tok.to_dict()).encode(sample) == tok.encode(sample)
    with pytest.raises(ValueError, match="'~' is not in the vocabulary"):
        tok.encode("a~b")


def test_bpe_learns_frequent_pairs_and_round_trips() -> None:
    tok = BPETokenizer.train(TEXT[:20000], vocab_size=300)
    assert tok.vocab_size == 300
    assert tok.decode([tok.merges.index((32, 116)) + 256]) == " t", "the most frequent pair"
    sample = TEXT[30000:31000] + " naïve ünïcode"
    ids = tok.encode(sample)
    assert tok.decode(ids) == sample
    assert len(ids) < len(sample.encode("utf-8")) * 0.75, "merges shorten the text"
    again = tokenizer_from_dict(tok.to_dict())
    assert again.encode(sample) == ids
    with pytest.raises(ValueError, match=">= 256"):
        BPETokenizer.train("abc", vocab_size=10)


def test_windows_are_context_and_next_token() -> None:
    ids = np.arange(100) % 7
    windows = TextWindows(ids, block_size=5, stride=3)
    assert len(windows) == (100 - 6) // 3 + 1
    x, y = windows[2]
    assert x.tolist() == list(ids[6:11]) and y.tolist() == list(ids[7:12])
    bx, by = windows.__getitems__([2, 0, len(windows) - 1])
    assert bx.shape == (3, 5) and bx[0].tolist() == x.tolist() and by[0].tolist() == y.tolist()
    last_x, last_y = windows[len(windows) - 1]
    assert bx[2].tolist() == last_x.tolist() and by[2].tolist() == last_y.tolist()
    batches = list(DataLoader(windows, batch_size=8, shuffle=True, seed=0))
    assert sum(len(b[0]) for b in batches) == len(windows)
    assert all(b[0].dtype == tl.int64 for b in batches)
    with pytest.raises(ValueError, match="at least block_size"):
        TextWindows([1, 2], block_size=5)


@pytest.fixture
def small_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI on the first 6,000 characters and a tiny model: about 10 steps an epoch."""
    monkeypatch.setattr(train_text, "load_text", lambda name: TEXT[:6000])
    monkeypatch.setitem(
        train_text.MODEL_CONFIGS,
        "gpt",
        {"block_size": 16, "d_model": 16, "nhead": 2, "num_layers": 1},
    )
    monkeypatch.setitem(
        train_text.MODEL_CONFIGS,
        "lstm",
        {"block_size": 16, "embedding_dim": 8, "hidden_size": 16, "num_layers": 1},
    )


@pytest.mark.parametrize("model", ["gpt", "lstm"])
def test_train_resume_and_generate_from_the_shell(
    small_corpus: None, model: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = str(tmp_path / f"{model}.ckpt")
    args = ["--dataset", "shakespeare", "--model", model, "--save", ckpt]
    assert train.main([*args, "--epochs", "1"]) == 0
    first = capsys.readouterr().out
    assert "epoch 1/1: train loss" in first and "validation loss" in first
    assert train.main([*args, "--epochs", "2", "--resume", ckpt]) == 0
    resumed = capsys.readouterr().out
    assert "resumed from" in resumed and "epoch 2/2" in resumed and "epoch 1/2" not in resumed
    argv = ["--checkpoint", ckpt, "--prompt", "ROMEO:", "--tokens", "30", "--top-k", "5"]
    assert generate.main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("ROMEO:") and len(text.rstrip("\n")) >= len("ROMEO:") + 20
    assert generate.main(argv) == 0
    assert capsys.readouterr().out == text, "the same seed gives the same text"


def test_generate_refuses_a_checkpoint_without_a_language_model(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = str(tmp_path / "mlp.ckpt")
    assert train.main(["--dataset", "xor", "--epochs", "1", "--save", ckpt]) == 0
    assert generate.main(["--checkpoint", ckpt]) == 1
    assert "holds no language model" in capsys.readouterr().err


def test_a_text_model_needs_a_text_corpus() -> None:
    with pytest.raises(SystemExit):
        train.main(["--dataset", "digits", "--model", "gpt"])


def test_bpe_from_the_shell_is_saved_resumed_and_decoded(
    small_corpus: None, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = str(tmp_path / "bpe.ckpt")
    args = ["--dataset", "shakespeare", "--model", "gpt", "--save", ckpt]
    assert train.main([*args, "--epochs", "1", "--tokenizer", "bpe", "--vocab-size", "300"]) == 0
    first = capsys.readouterr().out
    assert "learning 44 byte-pair merges" in first and "vocabulary 300 (bpe)" in first
    assert "nats/token =" in first and "nats/char" in first
    saved = checkpoint_extra(ckpt)["tokenizer"]
    assert saved["kind"] == "bpe" and len(saved["merges"]) == 44
    assert saved == BPETokenizer.train(TEXT[:5400], vocab_size=300).to_dict(), "the training 90%"
    assert train.main([*args, "--epochs", "2", "--resume", ckpt]) == 0  # no tokenizer flags
    resumed = capsys.readouterr().out
    assert "resumed from" in resumed and "vocabulary 300 (bpe)" in resumed
    assert "learning" not in resumed, "a resumed run keeps the checkpoint's tokenizer"
    assert checkpoint_extra(ckpt)["tokenizer"] == saved
    prompt = "ROMEO: naïve"  # BPE is byte-level: even characters Shakespeare never used
    assert generate.main(["--checkpoint", ckpt, "--prompt", prompt, "--tokens", "20"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(prompt) and len(text) > len(prompt) + 10
    assert train.main([*args, "--epochs", "3", "--resume", ckpt, "--tokenizer", "char"]) == 1
    assert "was trained with --tokenizer bpe (vocabulary 300)" in capsys.readouterr().err
    assert train.main([*args, "--epochs", "3", "--resume", ckpt, "--vocab-size", "400"]) == 1
    assert "not --tokenizer bpe --vocab-size 400" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--vocab-size", "300"], "--vocab-size is for --tokenizer bpe"),
        (["--tokenizer", "bpe", "--vocab-size", "100"], "at least 256 (the byte values"),
        (["--tokenizer", "words"], "invalid choice: 'words'"),
    ],
)
def test_bad_tokenizer_flags_are_usage_errors(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        train.main(["--dataset", "shakespeare", "--model", "gpt", *flags])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_tokenizer_flags_need_a_text_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        train.main(["--dataset", "xor", "--tokenizer", "bpe", "--vocab-size", "300"])
    assert "--tokenizer and --vocab-size: for a text corpus" in capsys.readouterr().err
