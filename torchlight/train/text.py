"""Train a language model (a small GPT or an LSTM) on the shipped Shakespeare.

Called by ``python -m torchlight.train --dataset shakespeare --model gpt`` (or ``--model lstm``);
``python -m torchlight.train.generate --checkpoint PATH`` then samples text from what was saved.

Tokens are characters (``--tokenizer char``, the default: 65 of them) or byte-pair-encoding
tokens (``--tokenizer bpe --vocab-size 512``: learned from the training part of the text when
training starts, about 2 characters a token). The checkpoint stores the tokenizer, so
``generate`` and ``--resume`` use the same one.

The token ids are split 90% / 10% into training and validation parts. One epoch is one pass
over the training part in non-overlapping windows of ``block_size`` tokens (with characters,
about 620 batches of 32); after each epoch the validation loss (mean cross-entropy per token, in
nats; with characters the bigram baseline is about 2.5) is printed, for BPE also converted to
nats per character so both tokenizers compare.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

import numpy as np
from tqdm import tqdm

import torchlight as tl
from torchlight import nn, optim
from torchlight.autograd import no_grad
from torchlight.creation import generator
from torchlight.data import DataLoader
from torchlight.data.text import TextWindows, load_text
from torchlight.nn import functional as F
from torchlight.train.checkpoint import (
    CheckpointError,
    checkpoint_extra,
    load_checkpoint,
    save_checkpoint,
)
from torchlight.train.guards import TrainingDivergedError, ctrl_c_deferred
from torchlight.train.tokenizers import BPETokenizer, CharTokenizer, tokenizer_from_dict

__all__ = [
    "BPE_VOCAB_SIZE",
    "MODEL_CONFIGS",
    "build_text_model",
    "build_tokenizer",
    "evaluate_text",
    "language_model_loss",
    "run_text",
    "text_splits",
]

#: The default architectures: small enough to train in minutes on two CPU cores.
MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "gpt": {"block_size": 64, "d_model": 96, "nhead": 4, "num_layers": 3},
    "lstm": {"block_size": 64, "embedding_dim": 64, "hidden_size": 256, "num_layers": 1},
}


def build_text_model(name: str, vocab_size: int, config: dict[str, Any]) -> nn.Module:
    """A ``GPT`` or an ``LSTMLanguageModel`` from a ``MODEL_CONFIGS``-style dict."""
    settings = {k: v for k, v in config.items() if k != "block_size"}
    if name == "gpt":
        return nn.GPT(vocab_size, config["block_size"], **settings)
    if name == "lstm":
        return nn.LSTMLanguageModel(vocab_size, **settings)
    raise ValueError(f"no language model called {name!r}: expected 'gpt' or 'lstm'")


#: ``--tokenizer bpe``'s vocabulary when ``--vocab-size`` is not given: the 256 bytes + 256 merges.
BPE_VOCAB_SIZE = 512

Tokenizer = CharTokenizer | BPETokenizer


def build_tokenizer(kind: str, text: str, vocab_size: int | None = None) -> Tokenizer:
    """``"char"``: one token per character of ``text``; ``"bpe"``: ``vocab_size`` byte-pair
    tokens learned from the first 90% of ``text`` (the training part: the validation text
    plays no part in choosing the merges; bytes encode whatever it holds)."""
    if kind == "char":
        return CharTokenizer(text)
    if kind == "bpe":
        return BPETokenizer.train(text[: int(0.9 * len(text))], vocab_size or BPE_VOCAB_SIZE)
    raise ValueError(f"no tokenizer called {kind!r}: expected 'char' or 'bpe'")


def text_splits(
    name: str, block_size: int, tokenizer: Tokenizer | None = None
) -> tuple[TextWindows, TextWindows, Tokenizer]:
    """(training windows, validation windows, tokenizer) for a corpus: the first 90% of the
    token ids train, the last 10% validate; windows do not overlap. Without ``tokenizer``, a
    ``CharTokenizer`` of the text."""
    text = load_text(name)
    tokenizer = tokenizer or CharTokenizer(text)
    ids = np.asarray(tokenizer.encode(text), dtype=np.int64)
    cut = int(0.9 * len(ids))
    train = TextWindows(ids[:cut], block_size, stride=block_size)
    valid = TextWindows(ids[cut:], block_size, stride=block_size)
    return train, valid, tokenizer


def _saved_tokenizer(args: argparse.Namespace, kind: str, vocab_size: int | None) -> Tokenizer:
    """The tokenizer stored in the ``--resume`` checkpoint, checked against the flags."""
    extra = checkpoint_extra(args.resume)
    if (extra.get("dataset"), extra.get("model")) != (args.dataset, args.model):
        raise CheckpointError(
            f"{args.resume} was trained with --dataset {extra.get('dataset')} --model "
            f"{extra.get('model')}, not --dataset {args.dataset} --model {args.model}"
        )
    if "tokenizer" not in extra:
        raise CheckpointError(f"{args.resume} holds no tokenizer: it is not a language model")
    tokenizer = tokenizer_from_dict(extra["tokenizer"])
    saved = extra["tokenizer"]["kind"]
    if kind != saved or vocab_size not in (None, tokenizer.vocab_size):
        raise CheckpointError(
            f"{args.resume} was trained with --tokenizer {saved} (vocabulary "
            f"{tokenizer.vocab_size}), not --tokenizer {kind}"
            + (f" --vocab-size {vocab_size}" if vocab_size else "")
            + ": leave the tokenizer flags out to continue with its own"
        )
    return tokenizer


def language_model_loss(model: nn.Module, x: tl.Tensor, y: tl.Tensor) -> tl.Tensor:
    r"""Mean next-token cross-entropy over every position: logits $(N, T, V)$ against $(N, T)$."""
    logits = model(x)
    vocab = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))


def evaluate_text(model: nn.Module, windows: TextWindows, batch_size: int = 64) -> float:
    """The mean loss per token over all ``windows``, in eval mode, without a graph."""
    model.eval()
    total, count = 0.0, 0
    with no_grad():
        for x, y in DataLoader(windows, batch_size=batch_size):
            total += float(language_model_loss(model, x, y).item()) * y.numel()
            count += y.numel()
    model.train()
    return total / max(count, 1)


def run_text(args: argparse.Namespace, progress: dict[str, Any] | None = None) -> float:
    """Train as ``args`` say (see ``torchlight.train``); returns the final validation loss.

    ``progress`` (when given) is kept up to date with ``epoch`` (the last one finished) and
    ``saved`` (the epoch of the last checkpoint written), for the CLI's message after Ctrl-C.
    """
    progress = {} if progress is None else progress
    if args.backend:
        tl.set_default_backend(args.backend)
    tl.manual_seed(args.seed)
    config = dict(MODEL_CONFIGS[args.model])
    kind = getattr(args, "tokenizer", None) or "char"
    vocab_size = getattr(args, "vocab_size", None)
    if args.resume:
        tokenizer = _saved_tokenizer(args, kind, vocab_size)
    elif kind == "bpe":
        size = vocab_size or BPE_VOCAB_SIZE
        print(f"learning {size - 256} byte-pair merges from the training text ...", flush=True)
        tokenizer = build_tokenizer(kind, load_text(args.dataset), size)
    else:
        tokenizer = build_tokenizer(kind, load_text(args.dataset))
    train_set, valid_set, tokenizer = text_splits(args.dataset, config["block_size"], tokenizer)
    # BPE's loss is per token; times tokens per character it compares with the char model's
    tokens_per_char = len(valid_set.ids) / len(tokenizer.decode(valid_set.ids.tolist()))
    unit = "nats/char" if kind == "char" else "nats/token"
    dtype = getattr(tl, args.dtype)
    model = build_text_model(args.model, tokenizer.vocab_size, config).to(dtype)
    if args.optimizer == "sgd":
        optimizer: optim.Optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    else:
        optimizer = optim.Adam(model.parameters(), lr=args.lr)
    order = np.random.default_rng(args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, generator=order)
    start_epoch, step = 0, 0
    if args.resume:
        extra = load_checkpoint(args.resume, model, optimizer)
        start_epoch, step = int(extra.get("epoch", 0)), int(extra.get("step", 0))
        order.bit_generator.state = extra["loader_rng"]
        generator().bit_generator.state = extra["global_rng"]
        print(f"resumed from {args.resume} after epoch {start_epoch} (step {step})")
    progress["epoch"] = start_epoch
    params = sum(p.numel() for p in model.parameters())
    print(
        f"{args.model}: {params:,} parameters, {len(train_set):,} training windows of "
        f"{config['block_size']} tokens, vocabulary {tokenizer.vocab_size} ({kind})",
        flush=True,
    )
    started = time.perf_counter()
    valid_loss = math.nan
    for epoch in range(start_epoch + 1, args.epochs + 1):
        total = 0.0
        with ctrl_c_deferred():  # a Ctrl-C inside tqdm's set-up leaves a half-made bar behind
            bar = tqdm(  # whose __del__ prints a traceback
                total=len(loader), desc=f"epoch {epoch}/{args.epochs}", unit="batch",
                file=sys.stderr, leave=False,
            )  # fmt: skip
        with bar:
            for batch, (x, y) in enumerate(loader, start=1):
                step += 1
                loss = language_model_loss(model, x, y)
                value = float(loss.item())
                if not math.isfinite(value):
                    raise TrainingDivergedError(
                        f"the loss became {value} at step {step} (batch {batch} of epoch {epoch}); "
                        "training stopped. Try a smaller --lr."
                    )
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += value
                bar.set_postfix(loss=f"{total / batch:.4f}", refresh=False)
                bar.update()
        valid_loss = evaluate_text(model, valid_set)
        progress["epoch"] = epoch
        minutes = (time.perf_counter() - started) / 60
        also = "" if kind == "char" else f" = {valid_loss * tokens_per_char:.4f} nats/char"
        print(
            f"epoch {epoch}/{args.epochs}: train loss {total / max(len(loader), 1):.4f}, "
            f"validation loss {valid_loss:.4f} {unit}{also} ({minutes:.1f} min)",
            flush=True,
        )
        if args.save:
            with ctrl_c_deferred():  # the file and the line Ctrl-C prints must agree
                save_checkpoint(
                    args.save,
                    model,
                    optimizer,
                    epoch=epoch,
                    step=step,
                    dataset=args.dataset,
                    model=args.model,
                    dtype=args.dtype,
                    config=config,
                    tokenizer=tokenizer.to_dict(),
                    validation_loss=valid_loss,
                    loader_rng=order.bit_generator.state,
                    global_rng=generator().bit_generator.state,
                )
                progress["saved"] = epoch
    if math.isnan(valid_loss):  # no epoch ran (a resumed run that was already complete)
        valid_loss = evaluate_text(model, valid_set)
    if kind == "char":
        print(f"validation loss: {valid_loss:.4f} nats per character")
    else:
        print(
            f"validation loss: {valid_loss:.4f} nats per token = {valid_loss * tokens_per_char:.4f} per character"
        )
    return valid_loss
