r"""Sample text from a language model the trainer saved: ``python -m torchlight.train.generate``.

Examples::

    python -m torchlight.train --dataset shakespeare --model gpt --save gpt.ckpt
    python -m torchlight.train.generate --checkpoint gpt.ckpt --prompt "ROMEO:" --tokens 300
    python -m torchlight.train.generate --checkpoint gpt.ckpt --temperature 0.8 --top-k 10

Each new token is drawn from $p_i \propto \exp(z_i / \tau)$, the softmax of the model's last
logits $z$ divided by the temperature $\tau$ (below 1: safer, more repetitive text; above 1:
wilder), optionally keeping only the ``top_k`` most likely tokens. The token is appended and the
model runs again on the last ``block_size`` tokens. The checkpoint's own tokenizer (characters,
or the BPE of ``train --tokenizer bpe``) encodes the prompt and decodes the result.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

import torchlight as tl
from torchlight import nn
from torchlight.autograd import no_grad
from torchlight.creation import generator
from torchlight.nn import functional as F
from torchlight.train.checkpoint import CheckpointError, checkpoint_extra, load_checkpoint
from torchlight.train.text import build_text_model
from torchlight.train.tokenizers import BPETokenizer, CharTokenizer, tokenizer_from_dict

__all__ = ["generate", "load_language_model", "main"]


def generate(
    model: nn.Module,
    ids: list[int],
    max_new_tokens: int,
    block_size: int,
    temperature: float = 1.0,
    top_k: int | None = None,
) -> list[int]:
    """``ids`` followed by ``max_new_tokens`` sampled tokens (random draws from ``tl.manual_seed``'s
    generator, so a seed reproduces the text).

    Example:
        >>> import torchlight as tl
        >>> tl.manual_seed(0)
        >>> model = tl.nn.GPT(vocab_size=5, block_size=4, d_model=8, nhead=2, num_layers=1)
        >>> len(generate(model, [1, 2], max_new_tokens=6, block_size=4, top_k=2))
        8
    """
    if not ids:
        raise ValueError("generate: the prompt must hold at least one token")
    if temperature <= 0 or (top_k is not None and top_k < 1):
        raise ValueError(
            f"generate: need temperature > 0 and top_k >= 1, got {temperature}, {top_k}"
        )
    model.eval()
    out = list(ids)
    with no_grad():
        for _ in range(max_new_tokens):
            context = tl.tensor([out[-block_size:]])
            logits = model(context)[0, -1].numpy().astype(np.float64) / temperature
            if top_k is not None and top_k < len(logits):
                kth = np.sort(logits)[-top_k]
                logits = np.where(logits < kth, -np.inf, logits)  # only the k best stay possible
            probs = F.softmax(tl.tensor(logits), dim=0).numpy()
            out.append(int(generator().choice(len(probs), p=probs / probs.sum())))
    return out


def load_language_model(path: str) -> tuple[nn.Module, CharTokenizer | BPETokenizer, int]:
    """(model, tokenizer, block_size) rebuilt from a checkpoint of ``python -m torchlight.train
    --dataset shakespeare``."""
    extra = checkpoint_extra(path)
    if "tokenizer" not in extra or "config" not in extra:
        raise CheckpointError(
            f"{path} holds no language model (no tokenizer in it): write one with "
            "python -m torchlight.train --dataset shakespeare --model gpt --save PATH"
        )
    tokenizer = tokenizer_from_dict(extra["tokenizer"])
    config = extra["config"]
    model = build_text_model(extra["model"], tokenizer.vocab_size, config)
    model.to(getattr(tl, extra.get("dtype", "float32")))
    load_checkpoint(path, model)
    return model, tokenizer, int(config["block_size"])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m torchlight.train.generate",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--checkpoint", required=True, metavar="PATH", help="written by train --save")
    p.add_argument("--prompt", default="\n", help="the text to continue (default: a new line)")
    p.add_argument("--tokens", type=int, default=500, help="how many tokens to add (default 500)")
    p.add_argument("--temperature", type=float, default=1.0, help="default 1.0")
    p.add_argument("--top-k", type=int, default=None, help="sample among the k likeliest only")
    p.add_argument("--seed", type=int, default=0, help="seeds the sampling (default 0)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The command line entry point; returns the exit status (0 ok, 1 bad checkpoint, 2 usage)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.tokens < 0 or args.temperature <= 0 or (args.top_k is not None and args.top_k < 1):
        parser.error("--tokens must be >= 0, --temperature > 0 and --top-k >= 1")
    try:
        model, tokenizer, block_size = load_language_model(args.checkpoint)
    except (CheckpointError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        prompt = tokenizer.encode(args.prompt)
    except ValueError as error:
        parser.error(f"--prompt: {error}")
    tl.manual_seed(args.seed)
    ids = generate(model, prompt, args.tokens, block_size, args.temperature, args.top_k)
    print(tokenizer.decode(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
