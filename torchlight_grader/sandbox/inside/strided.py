r"""Strided storages from a description, for the strided tensor assignment's checks.

This file runs *inside* the sandbox, next to student code, like :mod:`runners`: no reference
values. The grader sends plain data; this calls the student's function and sends back what came.

- ``index_to_position``, ``to_index``, ``shape_broadcast``, ``broadcast_index``: a batch of
  calls per trial, each argument list sent as data; each result (or the type of the exception
  it raised) comes back.
- ``strided_map``, ``strided_zip``, ``strided_reduce``: storages described as ``{"buffer",
  "shape", "strides", "offset"}`` (a flat float64 buffer and any layout over it: permuted,
  broadcast with stride 0, sliced with an offset). The result comes back as its layout and its
  buffer. While the student's kernel runs, the notebook's four index functions are replaced by
  *tables* the grader computed for this trial's shapes and layouts, so that a mistake in them
  costs only their own items (a table answers this trial's questions only: it is no use to
  another item).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import numpy as np

INDEX_FUNCTIONS = ("index_to_position", "to_index", "shape_broadcast", "broadcast_index")


def storage(description: dict[str, Any]) -> Any:
    """A float64 ``StridedStorage`` over the described buffer and layout."""
    from torchlight.backends.strided.storage import StridedStorage

    buffer = array("d", np.asarray(description["buffer"], dtype=np.float64).tobytes())
    shape, strides = tuple(description["shape"]), tuple(description["strides"])
    return StridedStorage(buffer, shape, strides, int(description["offset"]), np.float64)


def key(*parts: Any) -> str:
    """A table's key: the arguments as text (``"1,2|3,1|0"``)."""
    return "|".join(",".join(str(int(v)) for v in np.atleast_1d(p)) if np.ndim(p) else str(int(p))
                    for p in parts)  # fmt: skip


def stand_ins(tables: dict[str, dict[str, Any]]) -> dict[str, Callable[..., Any]]:
    """The four index functions, answered from this trial's tables only."""

    def look(name: str, *args: Any) -> Any:
        try:
            return tables[name][key(*args)]
        except KeyError:
            raise LookupError(
                f"the grader's stand-in for {name} knows this trial's shapes and layouts only, "
                f"not {name}{tuple(args)}: call it on the storages' own shapes, strides and "
                "offsets"
            ) from None

    return {
        "index_to_position": lambda index, strides, offset=0: int(
            look("index_to_position", list(index), list(strides), offset)
        ),
        "to_index": lambda ordinal, shape: list(look("to_index", ordinal, list(shape))),
        "shape_broadcast": lambda a, b: tuple(look("shape_broadcast", list(a), list(b))),
        "broadcast_index": lambda big_index, big_shape, shape: list(
            look("broadcast_index", list(big_index), list(big_shape), list(shape))
        ),
    }


def _layout(result: Any) -> dict[str, Any]:
    """What comes back of a storage: its layout and buffer, as data (read in the grader)."""
    for name in ("buffer", "shape", "strides", "offset"):
        if not hasattr(result, name):
            return {"type": type(result).__name__}
    return {
        "type": type(result).__name__,
        "shape": [int(n) for n in result.shape],
        "strides": [int(s) for s in result.strides],
        "offset": int(result.offset),
        "buffer": np.array(result.buffer, dtype=np.float64),
    }


def run(runner: str, obj: Any, namespace: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """One trial of a strided item: call the student's ``obj`` and return raw data."""
    from torchlight.backends import scalar_ops

    if runner in INDEX_FUNCTIONS:
        results: list[Any] = []
        for args in case["args"][0]:
            call: tuple[Any, ...]
            if runner == "index_to_position":
                call = (list(args[0]), tuple(args[1]), int(args[2]))
            elif runner == "to_index":
                call = (int(args[0]), tuple(args[1]))
            elif runner == "shape_broadcast":
                call = (tuple(args[0]), tuple(args[1]))
            else:
                call = (list(args[0]), tuple(args[1]), tuple(args[2]))
            try:
                value = obj(*call)
            except (ValueError, IndexError, TypeError, LookupError) as exc:
                results.append(f"raised {type(exc).__name__}")
                continue
            if isinstance(value, list | tuple):
                results.append(np.array([int(v) for v in value], dtype=np.int64))
            else:
                results.append(np.array(value))
        return {"values": results}
    *storages_and_more, tables = case["args"]
    saved = {name: namespace.get(name) for name in INDEX_FUNCTIONS}
    namespace.update(stand_ins(tables))
    try:
        if runner == "strided_map":
            description, op = storages_and_more
            result = obj(scalar_ops.MAP[op], storage(description))
        elif runner == "strided_zip":
            a, b, op = storages_and_more
            result = obj(scalar_ops.ZIP[op], storage(a), storage(b))
        elif runner == "strided_reduce":
            description, dim, op, start = storages_and_more
            result = obj(scalar_ops.ZIP[op], storage(description), int(dim), float(start))
        else:
            raise ValueError(f"unknown strided runner {runner!r}")
    finally:
        namespace.update(saved)
    return _layout(result)
