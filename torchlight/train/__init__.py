"""The apps built on the library: ``python -m torchlight.train`` (:mod:`~torchlight.train.cli`),
text training (:mod:`~torchlight.train.text`), sampling (:mod:`~torchlight.train.generate`),
tokenizers (:mod:`~torchlight.train.tokenizers`), checkpoints (:mod:`~torchlight.train.checkpoint`)
and what guards a run (:mod:`~torchlight.train.guards`: a diverged loss, Ctrl-C while saving).
Each imports only the ones below it: guards, tokenizers, checkpoint < text < generate, cli."""
