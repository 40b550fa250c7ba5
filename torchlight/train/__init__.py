"""The apps built on the library: ``python -m torchlight.train`` (:mod:`~torchlight.train.cli`),
text training (:mod:`~torchlight.train.text`), sampling (:mod:`~torchlight.train.generate`),
tokenizers and checkpoints (:mod:`~torchlight.train.checkpoint`)."""
