"""How values cross between the grader and the sandbox: plain JSON, never pickle.

The grader sends the sandbox the inputs of each trial; the sandbox sends back the student's raw
outputs. Everything coming back was produced next to student code, so the grader decodes it
defensively: bounded sizes, numbers only, shapes that match the data.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

#: The most elements one decoded array may hold (a digits test set is ~20 000 values).
MAX_ELEMENTS = 2_000_000


class WireError(ValueError):
    """A value that came back from the sandbox is not a well-formed array or scalar."""


def encode(value: Any) -> Any:
    """A JSON-ready form of ``value``: arrays, tuples, lists, dicts, numbers, strings, None."""
    if isinstance(value, np.ndarray):
        return {
            "__array__": value.dtype.str,
            "shape": list(value.shape),
            "data": value.reshape(-1).tolist(),
        }
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot send a {type(value).__name__} over the wire")


_DTYPES = {"<f8": np.float64, "<f4": np.float32, "<i8": np.int64, "<i4": np.int32, "|b1": np.bool_}


def decode(value: Any, depth: int = 0) -> Any:
    """Inverse of :func:`encode`, checking every array it rebuilds.

    Raises:
        WireError: when the value is malformed (wrong types, sizes that do not add up).
    """
    if depth > 20:
        raise WireError("value nested too deeply")
    if isinstance(value, dict) and "__array__" in value:
        return _decode_array(value)
    if isinstance(value, dict) and "__tuple__" in value:
        return tuple(decode(v, depth + 1) for v in _as_list(value["__tuple__"]))
    if isinstance(value, list):
        return [decode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): decode(v, depth + 1) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise WireError(f"unexpected {type(value).__name__} on the wire")


def _as_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise WireError("expected a list")
    return value


def _decode_array(value: dict[str, Any]) -> np.ndarray:
    dtype = _DTYPES.get(value.get("__array__"))  # type: ignore[arg-type]
    if dtype is None:
        raise WireError(f"unsupported array dtype {value.get('__array__')!r}")
    shape = _as_list(value.get("shape"))
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise WireError("array shape must be a list of non-negative ints")
    data = _as_list(value.get("data"))
    size = math.prod(shape)
    if size > MAX_ELEMENTS or len(data) != size:
        raise WireError(f"array of shape {tuple(shape)} came with {len(data)} values")
    if not all(isinstance(v, int | float) for v in data):
        raise WireError("array data must be numbers")
    try:
        return np.asarray(data, dtype=dtype).reshape(shape)
    except (OverflowError, ValueError) as exc:
        raise WireError(str(exc)) from exc


def dumps(value: Any) -> str:
    """JSON text of ``encode(value)`` (floats round-trip exactly; nan and inf are allowed)."""
    return json.dumps(encode(value))


def loads(text: str) -> Any:
    """Decode JSON text produced by :func:`dumps`; raises :class:`WireError` when malformed."""
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise WireError(f"not valid JSON: {exc}") from exc
    return decode(raw)
