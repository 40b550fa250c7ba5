"""Record PyTorch's outputs and gradients for the sequence layers, for tests/test_nn_seq.py.

Run once, with PyTorch installed (only for this; torchlight never needs it):

    .venv/bin/pip install torch==2.13.0
    .venv/bin/python tools/record_seq_reference.py      # writes tests/seq_reference.json

Every case builds a layer in PyTorch, overwrites each of its parameters (in state_dict order)
with values from ``weights(seed, shapes)``, feeds inputs from the same generator, and records
the outputs, the gradients of the inputs and of every parameter for the loss
``sum(output * probe)`` (``probe`` also drawn from the generator). The test rebuilds the same
weights and inputs in torchlight, by name, and compares. float64 throughout.
"""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.seq_cases import CASES, Case, draw  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "seq_reference.json"


def run_torch(case: Case) -> dict[str, Any]:
    torch.manual_seed(0)
    module = case.torch_module(torch.nn)
    module = module.double()
    rng = np.random.default_rng(case.seed)
    names = [name for name, _ in module.named_parameters()]
    with torch.no_grad():
        for _, param in module.named_parameters():
            param.copy_(torch.from_numpy(draw(rng, tuple(param.shape))))
    inputs = {k: torch.from_numpy(draw(rng, shape)) for k, shape in case.inputs.items()}
    for t in inputs.values():
        t.requires_grad_(True)
    outputs = case.call(module, inputs, torch_masks(case))
    grads_of = list(inputs.values()) + [dict(module.named_parameters())[n] for n in names]
    loss = sum((o * torch.from_numpy(draw(rng, tuple(o.shape)))).sum() for o in outputs)
    grads = torch.autograd.grad(loss, grads_of, allow_unused=True)
    keys = list(inputs) + names
    return {
        "outputs": [o.detach().numpy().tolist() for o in outputs],
        "grads": {
            k: None if g is None else g.numpy().tolist() for k, g in zip(keys, grads, strict=True)
        },
    }


def torch_masks(case: Case) -> dict[str, Any]:
    return {k: torch.from_numpy(v) for k, v in case.masks.items()}


def main(record: Callable[[Case], dict[str, Any]] = run_torch) -> None:
    data = {case.name: record(case) for case in CASES}
    OUT.write_text(json.dumps(data, separators=(",", ":")))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(data)} cases)")


if __name__ == "__main__":
    main()
