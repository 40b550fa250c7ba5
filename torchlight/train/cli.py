"""Train a small model from the command line: ``torchlight-train`` (or ``python -m torchlight.train``).

Examples::

    torchlight-train                                  # digits, MLP, its defaults
    torchlight-train --model cnn --save digits.ckpt   # a CNN, saved every epoch
    torchlight-train --epochs 12 --resume digits.ckpt # continue it (saved back to digits.ckpt)
    torchlight-train --dataset spiral --epochs 200
    torchlight-train --dataset shakespeare --model gpt --save gpt.ckpt   # a tiny GPT (or lstm)
    torchlight-train --dataset shakespeare --model gpt --tokenizer bpe --vocab-size 512

``--resume`` takes the data set and the model from the checkpoint (giving other ones is an
error) and saves every new epoch back into that checkpoint, unless ``--save PATH`` names
another file or ``--no-save`` keeps it unchanged. A ``--save`` path is checked before
training starts. Ctrl-C stops training with one line naming the last checkpoint saved.
``--epochs`` is the total: a resumed run that has already trained that many says so and
trains nothing, as ``--epochs 0`` does.

Each data set and model has defaults (epochs, optimizer, learning rate) that reach good
accuracy quickly; flags override them. The last line printed is the accuracy on the test set
(digits) or on the training set (the toy 2-D sets, which have no test set), or for a text
corpus the validation loss; then, with ``--save``, one line naming the file the model is in.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

import torchlight as tl
from torchlight import nn, optim
from torchlight.autograd import no_grad
from torchlight.creation import generator
from torchlight.data import TOY_DATASETS, DataLoader, TensorDataset, digits
from torchlight.data.text import CORPORA
from torchlight.nn import functional as F
from torchlight.train.checkpoint import (
    CheckpointError,
    checkpoint_extra,
    load_checkpoint,
    save_checkpoint,
)
from torchlight.train.guards import TrainingDivergedError, ctrl_c_deferred
from torchlight.train.text import run_text

__all__ = [
    "DEFAULTS",
    "build_model",
    "evaluate",
    "load_data",
    "main",
    "train_epoch",
]

DATASETS = ("digits", *TOY_DATASETS, *CORPORA)

#: (dataset kind, model) -> settings used when the flag is not given.
DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {
    ("digits", "mlp"): {"epochs": 10, "optimizer": "adam", "lr": 1e-2, "batch_size": 64},
    ("digits", "cnn"): {"epochs": 10, "optimizer": "adam", "lr": 1e-2, "batch_size": 64},
    ("toy", "mlp"): {"epochs": 100, "optimizer": "adam", "lr": 2e-2, "batch_size": 32},
    # language models on a text corpus (torchlight/train/text.py), float32 unless --dtype
    ("text", "gpt"): {"epochs": 5, "optimizer": "adam", "lr": 3e-3, "batch_size": 32},
    ("text", "lstm"): {"epochs": 5, "optimizer": "adam", "lr": 3e-3, "batch_size": 32},
}


def build_model(name: str, dataset: str) -> nn.Module:
    """The models the CLI trains: an MLP for every data set, a small CNN for the digits."""
    if dataset == "digits" and name == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    if dataset == "digits" and name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(16 * 4 * 4, 10),
        )
    if name == "mlp":
        return nn.Sequential(
            nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2)
        )
    raise ValueError(
        f"--model {name} is not available for --dataset {dataset}: the CNN is for the digits (images)"
    )


def load_data(
    dataset: str, model: str, args: argparse.Namespace
) -> tuple[TensorDataset, TensorDataset | None]:
    """The training set and (digits only) the test set; toy inputs are centred on 0."""
    dtype = getattr(tl, args.dtype)
    if dataset == "digits":
        images = model == "cnn"
        return digits(True, images=images, dtype=dtype), digits(False, images=images, dtype=dtype)
    train = TOY_DATASETS[dataset](n=args.points, noise=args.noise, seed=args.seed, dtype=dtype)
    x, y = train.tensors
    return TensorDataset((x - 0.5) * 2.0, y), None


def evaluate(model: nn.Module, dataset: TensorDataset) -> tuple[int, int]:
    """(correct, total) predictions of ``model`` on ``dataset``, in eval mode, without a graph."""
    model.eval()
    with no_grad():
        x, y = dataset.tensors
        correct = int((model(x).argmax(dim=1) == y).sum().item())
    model.train()
    return correct, len(dataset)


def train_epoch(
    model: nn.Module, optimizer: optim.Optimizer, loader: DataLoader, step: int, bar: Any = None
) -> tuple[float, float, int]:
    """One pass over ``loader``; returns (mean loss, accuracy, global step after the epoch).

    Raises:
        TrainingDivergedError: as soon as a loss is nan or infinite, naming the step.
    """
    total_loss, correct, seen = 0.0, 0, 0
    for batch, (x, y) in enumerate(loader, start=1):
        step += 1
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        value = loss.item()
        if not math.isfinite(value):
            raise TrainingDivergedError(
                f"the loss became {value} at step {step} (batch {batch} of this epoch); training "
                "stopped. Try a smaller --lr, or check the inputs for nan."
            )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += value * len(y)
        correct += int((logits.detach().argmax(dim=1) == y).sum().item())
        seen += len(y)
        if bar is not None:
            bar.set_postfix(
                loss=f"{total_loss / seen:.4f}", acc=f"{correct / seen:.1%}", refresh=False
            )
            bar.update()
    if bar is not None:
        bar.refresh()  # tqdm redraws at most every 0.1 s: show the epoch's final loss and accuracy
    return total_loss / max(seen, 1), correct / max(seen, 1), step


def _parser() -> argparse.ArgumentParser:
    lines = [
        f"  {kind} {model}: {d['epochs']} epochs, {d['optimizer']}, lr {d['lr']}, batch size {d['batch_size']}"
        for (kind, model), d in DEFAULTS.items()
    ]
    p = argparse.ArgumentParser(
        prog=_command_name(sys.argv[0]),
        description="Train a small model on the digits or a toy 2-D data set, or a language model "
        "(gpt, lstm) on Shakespeare.",
        epilog="defaults (flags override them):\n" + "\n".join(lines),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # No argparse defaults for these two: --resume takes them from the checkpoint when not given.
    p.add_argument(
        "--dataset", choices=DATASETS, help="default: digits (or the --resume checkpoint's)"
    )
    p.add_argument(
        "--model",
        choices=("mlp", "cnn", "gpt", "lstm"),
        help="default: mlp (or the --resume checkpoint's); gpt and lstm for --dataset shakespeare",
    )
    p.add_argument("--epochs", type=int, help="total epochs (a resumed run continues up to it)")
    p.add_argument("--lr", type=float, help="learning rate")
    p.add_argument("--optimizer", choices=("adam", "sgd"), help="sgd uses momentum 0.9")
    p.add_argument("--batch-size", type=int, help="samples per step")
    p.add_argument(
        "--seed", type=int, default=0, help="seeds the weights, the data and the shuffling"
    )
    p.add_argument(
        "--backend", default=None, help="torchlight backend (default: numpy or $TORCHLIGHT_BACKEND)"
    )
    p.add_argument(
        "--dtype", choices=("float64", "float32"), help="default: float32 for text, else float64"
    )
    p.add_argument(
        "--tokenizer",
        choices=("char", "bpe"),
        help="text corpus only: characters (default) or byte-pair encoding learned from the text",
    )
    p.add_argument(
        "--vocab-size",
        type=int,
        metavar="N",
        help="--tokenizer bpe only: the vocabulary, 256 bytes + N-256 merges (default 512)",
    )
    p.add_argument("--points", type=int, default=200, help="points in a toy data set")
    p.add_argument("--noise", type=float, default=0.0, help="noise of a toy data set")
    p.add_argument(
        "--save", metavar="PATH", help="save model + optimizer here after every epoch (atomically)"
    )
    p.add_argument(
        "--resume",
        metavar="PATH",
        help="continue from a checkpoint written by --save (its data set and model come with it); "
        "the new epochs are saved back into it unless --save or --no-save says otherwise",
    )
    p.add_argument(
        "--no-save",
        action="store_true",
        help="with --resume: do not write the new epochs into the resumed checkpoint",
    )
    return p


def _command_name(argv0: str) -> str:
    """How the user started us, for --help and error messages: the script name, or ``python -m``."""
    name = os.path.basename(argv0)
    if name in ("train.py", "__main__.py", "-c", ""):
        return "python -m torchlight.train"
    return name


def _from_checkpoint(args: argparse.Namespace) -> None:
    """Fill --dataset and --model from the --resume checkpoint (or the defaults without one),
    and ``args.resumed_epoch``: the epochs it has trained (0 without one)."""
    args.resumed_epoch = 0
    if args.resume:
        try:
            extra = checkpoint_extra(args.resume)
        except CheckpointError:
            extra = {}  # run() loads it again and reports what is wrong with it
        args.resumed_epoch = int(extra.get("epoch", 0))
        saved_tokenizer = extra.get("tokenizer")
        if args.tokenizer is None and isinstance(saved_tokenizer, dict):
            args.tokenizer = saved_tokenizer.get("kind")
        for key in ("dataset", "model"):
            saved = extra.get(key)
            if getattr(args, key) is None and saved is not None:
                setattr(args, key, saved)
    args.dataset = args.dataset or "digits"
    args.model = args.model or "mlp"


def _check_save_path(path: str) -> None:
    """Fail before training, not after the first epoch, when ``--save PATH`` cannot be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"--save {path} is a folder; give a file name, e.g. {path}/model.ckpt")
    if not os.path.isdir(folder):
        raise ValueError(
            f"--save {path}: the folder {folder} does not exist; create it (mkdir -p) or save elsewhere"
        )
    try:  # the checkpoint is written through a temporary file in the same folder
        fd, probe = tempfile.mkstemp(prefix=".torchlight-save-check.", dir=folder)
    except OSError as error:
        raise ValueError(
            f"--save {path}: cannot write in {folder} ({error.strerror}); choose another path"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _settings(args: argparse.Namespace) -> argparse.Namespace:
    _from_checkpoint(args)
    kind = "digits" if args.dataset == "digits" else "text" if args.dataset in CORPORA else "toy"
    defaults = DEFAULTS.get((kind, args.model))
    if defaults is None:
        raise ValueError(
            f"--model {args.model} is not available for --dataset {args.dataset}: the CNN is for the "
            f"digits (images), gpt and lstm for a text corpus ({', '.join(CORPORA)})"
        )
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.dtype is None:
        args.dtype = "float32" if kind == "text" else "float64"
    problems = []
    if args.epochs < 0:
        problems.append(
            f"--epochs must be 0 or more (the total number of epochs), got {args.epochs}"
        )
    if args.batch_size < 1:
        problems.append(
            f"--batch-size must be at least 1 (samples per step), got {args.batch_size}"
        )
    if not args.lr > 0:  # also catches nan
        problems.append(f"--lr must be a positive number such as 0.01, got {args.lr}")
    problems += _tokenizer_problems(args, kind)
    if problems:
        raise ValueError("\nerror: ".join(problems))  # one line for each bad flag
    if args.no_save and args.save:
        raise ValueError(f"--no-save and --save {args.save} contradict each other; give one")
    if args.resume and not args.save and not args.no_save:
        args.save = args.resume  # a resumed run goes on saving where it came from
    if args.save:
        _check_save_path(args.save)
    if args.backend:
        try:
            tl.backends.get_backend(args.backend)
        except ImportError as error:
            raise ValueError(f"--backend {args.backend}: {error}") from None
    return args


def _tokenizer_problems(args: argparse.Namespace, kind: str) -> list[str]:
    """What is wrong with --tokenizer / --vocab-size; fills in the default tokenizer (char)."""
    if kind != "text":
        given = [name for name in ("tokenizer", "vocab_size") if getattr(args, name) is not None]
        if not given:
            return []
        flags = " and ".join("--" + name.replace("_", "-") for name in given)
        return [f"{flags}: for a text corpus ({', '.join(CORPORA)}), not --dataset {args.dataset}"]
    args.tokenizer = args.tokenizer or "char"
    if args.vocab_size is not None and args.tokenizer != "bpe":
        return [
            f"--vocab-size is for --tokenizer bpe (a character tokenizer's vocabulary is the "
            f"characters of the text); add --tokenizer bpe or drop --vocab-size {args.vocab_size}"
        ]
    if args.vocab_size is not None and args.vocab_size < 256:
        return [
            f"--vocab-size must be at least 256 (the byte values BPE starts from), such as 512; "
            f"got {args.vocab_size}"
        ]
    return []


def run(args: argparse.Namespace, progress: dict[str, Any] | None = None) -> float:
    """Train as ``args`` say; returns the final accuracy (test for digits, train for toy sets),
    or for a text corpus the final validation loss.

    ``progress`` (when given) is kept up to date with ``epoch`` (the last one finished) and
    ``saved`` (the epoch of the last checkpoint written), for the message after a Ctrl-C.
    """
    progress = {} if progress is None else progress
    if args.dataset in CORPORA:  # a language model: torchlight/train/text.py
        return run_text(args, progress)
    if args.backend:
        tl.set_default_backend(args.backend)
    tl.manual_seed(args.seed)
    train_set, test_set = load_data(args.dataset, args.model, args)
    model = build_model(args.model, args.dataset).to(getattr(tl, args.dtype))
    if args.optimizer == "sgd":
        optimizer: optim.Optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    else:
        optimizer = optim.Adam(model.parameters(), lr=args.lr)
    order = np.random.default_rng(args.seed)  # the shuffling, saved in checkpoints
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, generator=order)
    start_epoch, step = 0, 0
    if args.resume:
        extra = checkpoint_extra(args.resume)  # which setup first, then the weights
        if (extra.get("dataset"), extra.get("model")) != (args.dataset, args.model):
            raise CheckpointError(
                f"{args.resume} was trained with --dataset {extra.get('dataset')} --model "
                f"{extra.get('model')}, not --dataset {args.dataset} --model {args.model}"
            )
        load_checkpoint(args.resume, model, optimizer)
        start_epoch, step = int(extra.get("epoch", 0)), int(extra.get("step", 0))
        if "loader_rng" in extra and "global_rng" in extra:  # continue the same random streams
            order.bit_generator.state = extra["loader_rng"]
            generator().bit_generator.state = extra["global_rng"]
        print(f"resumed from {args.resume} after epoch {start_epoch} (step {step})")
    progress["epoch"] = start_epoch
    report_every = max(1, args.epochs // 10)
    for epoch in range(start_epoch + 1, args.epochs + 1):
        with ctrl_c_deferred():  # a Ctrl-C inside tqdm's set-up leaves a half-made bar behind
            bar = tqdm(  # whose __del__ prints a traceback
                total=len(loader),
                desc=f"epoch {epoch}/{args.epochs}",
                unit="batch",
                file=sys.stderr,
                leave=False,
            )
        with bar:
            loss, accuracy, step = train_epoch(model, optimizer, loader, step, bar)
        if epoch % report_every == 0 or epoch == args.epochs:  # about ten summary lines
            line = f"epoch {epoch}/{args.epochs}: loss {loss:.4f}, train accuracy {accuracy:.2%}"
            if test_set is not None:
                correct, total = evaluate(model, test_set)
                line += f", test accuracy {correct / total:.2%}"
            print(line, flush=True)
        if args.save:
            state = {"epoch": epoch, "step": step, "dataset": args.dataset, "model": args.model}
            state["loader_rng"] = order.bit_generator.state
            state["global_rng"] = generator().bit_generator.state
            with ctrl_c_deferred():  # the file and the line Ctrl-C prints must agree
                save_checkpoint(args.save, model, optimizer, **state)
                progress["saved"] = epoch
        progress["epoch"] = epoch
    which, final_set = ("test", test_set) if test_set is not None else ("train", train_set)
    correct, total = evaluate(model, final_set)
    print(f"{which} accuracy: {correct / total:.2%} ({correct}/{total})")
    return correct / total


def main(argv: Sequence[str] | None = None) -> int:
    """The command line entry point; returns the exit status (0 ok, 1 training failed, 2 usage)."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        args = _settings(args)
    except ValueError as error:
        parser.error(str(error))
    progress: dict[str, Any] = {"epoch": args.resumed_epoch}  # (what a Ctrl-C line names)
    if args.epochs <= args.resumed_epoch:
        print(_nothing_to_train(args, parser.prog), flush=True)
    try:
        run(args, progress)
    except (TrainingDivergedError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # "\r": a progress bar cut short by Ctrl-C leaves its line open; write over it
        print("\r" + _interrupted_line(args, progress, parser.prog), file=sys.stderr)
        return 130  # the shell's code for "stopped by Ctrl-C"
    if args.save and "saved" in progress:
        print(_saved_line(args, progress["saved"], parser.prog))
    return 0


def _nothing_to_train(args: argparse.Namespace, prog: str) -> str:
    """The line that says no epoch will run: ``--epochs 0``, or a resumed run already done."""
    if not args.resume:
        return f"--epochs {args.epochs}: nothing to train; the untrained model is evaluated"
    done = args.resumed_epoch
    return (
        f"{args.resume} is already at epoch {done}, and --epochs {args.epochs} is the total: "
        f"nothing to train; continue it with {prog} --resume {args.resume} --epochs {done + 1} "
        "(or more)"
    )


def _saved_line(args: argparse.Namespace, epoch: int, prog: str) -> str:
    """The last line of a run that saved: the file the model is in, and what reads it."""
    if args.dataset in CORPORA:
        then = f"sample from it with python -m torchlight.train.generate --checkpoint {args.save}"
    else:
        then = f"continue it with {prog} --resume {args.save} --epochs {args.epochs + 1} (or more)"
    return f"the model (epoch {epoch}) is saved in {args.save}: {then}"


def _interrupted_line(args: argparse.Namespace, progress: dict[str, Any], prog: str) -> str:
    """The one line printed after Ctrl-C: where training stopped and where the last checkpoint is."""
    done = progress.get("epoch", 0)
    if args.save and "saved" in progress:
        return (
            f"interrupted after epoch {done}/{args.epochs}; the last checkpoint is {args.save} "
            f"(epoch {progress['saved']}): continue with {prog} --resume {args.save}"
        )
    if args.resume:
        return (
            f"interrupted after epoch {done}/{args.epochs}; nothing new was saved, the last "
            f"checkpoint is still {args.resume}"
        )
    return f"interrupted after epoch {done}/{args.epochs}; no checkpoint was saved (--save PATH saves one every epoch)"


if __name__ == "__main__":
    sys.exit(main())
