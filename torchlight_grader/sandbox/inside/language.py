r"""Tokens and embeddings, for the language-model assignments' checks.

This file runs *inside* the sandbox, next to student code, like :mod:`runners`: no reference
values. The grader sends plain data (text, ids, merges); this calls the student's function and
sends back what came, as plain data.

- ``tokens``: ``entry(*args)`` with the arguments as sent (a text, a vocabulary size, a list of
  ids, merges as pairs); the result comes back as a string, or a list of ints (a tensor or an
  array of ids is read as its list), or the name of its type.
- ``graph_with_embedding``: the ``graph`` runner with the notebook's ``Embedding`` replaced,
  while the item runs, by :class:`StandInEmbedding` (the lookup and its sum over repeated ids,
  which any correct answer computes), so that a mistake in the student's ``Embedding`` costs
  only its own item.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The most ids (or merges) one answer may send back (the hidden texts are a few kB).
MAX_ITEMS = 200_000


def plain(value: Any, depth: int = 0) -> Any:
    """A student's return value as plain data: str, int, or lists of them; else its type name."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return f"<{type(value).__name__}>"
    if isinstance(value, int | np.integer):
        return int(value)
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # a tensor or an array of ids
        value = value.tolist()
    if isinstance(value, list | tuple) and depth < 2:
        if len(value) > MAX_ITEMS:
            return f"<{type(value).__name__} of {len(value)} items>"
        return [plain(v, depth + 1) for v in value]
    return f"<{type(value).__name__}>"


def _stand_in() -> Any:
    import torchlight as tl
    from torchlight.autograd import Function

    class StandInEmbedding(Function):
        """``weight[ids]``; backward: the one-hot rows' transpose times the gradient."""

        @staticmethod
        def forward(ctx: Any, weight: Any, ids: Any) -> Any:
            ctx.save_for_backward(ids)
            ctx.rows = weight.shape[0]
            return weight[ids]

        @staticmethod
        def backward(ctx: Any, grad_output: Any) -> Any:
            (ids,) = ctx.saved_tensors
            one_hot = tl.eye(ctx.rows, dtype=grad_output.dtype)[ids.reshape(-1)]
            return one_hot.T @ grad_output.reshape(-1, grad_output.shape[-1]), None

    return StandInEmbedding


def run(runner: str, obj: Any, namespace: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """One trial of a tokens item: call the student's ``obj`` and return raw data."""
    if runner == "tokens":
        args = [
            [tuple(int(v) for v in a) if isinstance(a, list | tuple) else int(a) for a in arg]
            if isinstance(arg, list)
            else arg
            for arg in case["args"]
        ]
        out = obj(*args)
        return {"value": plain(out), "type": type(out).__name__}
    if runner == "graph_with_embedding":
        import importlib  # the sandbox runs this file as `language`, the grader as a submodule

        runners = importlib.import_module(f"{__package__}.runners" if __package__ else "runners")
        saved = namespace.get("Embedding")
        namespace["Embedding"] = _stand_in()
        try:
            return runners.run({"runner": "graph", "entry": "embed"}, namespace, case)
        finally:
            namespace["Embedding"] = saved
    raise ValueError(f"unknown language runner {runner!r}")
