"""Top-level names PyTorch programs use: ``tl.pow``, the legacy ``tl.LongTensor(...)``-style
constructors, and the half-precision dtype names.

``tl.float16``/``tl.half``/``tl.bfloat16`` exist so that a script naming them imports, but
torchlight has no half-precision storage yet: a tensor asked for in one raises a TypeError
that names the dtype (see :mod:`torchlight.amp` for what mixed precision does).

Example:
    >>> import torchlight as tl
    >>> tl.pow(tl.tensor([2.0, 3.0]), 2), tl.LongTensor([1, 2]).dtype
    (tensor([4., 9.]), torchlight.int64)
"""

from __future__ import annotations

from typing import Any

from torchlight import dtypes
from torchlight.tensor import Tensor

__all__ = [
    "BoolTensor", "DoubleTensor", "FloatTensor", "HalfDType", "IntTensor", "LongTensor", "bfloat16", "float16",
    "half", "pow",
]  # fmt: skip


class HalfDType:
    """The type of ``tl.float16``, ``tl.half`` and ``tl.bfloat16``: a dtype name torchlight
    knows but cannot store yet (a tensor asked for in one raises, naming it)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.is_floating_point = True

    def __repr__(self) -> str:
        return f"torchlight.{self.name}"


float16 = half = HalfDType("float16")
bfloat16 = HalfDType("bfloat16")


def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001 - PyTorch's name
    """``input ** exponent`` (either may be a number, as ``torch.pow``)."""
    if isinstance(input, Tensor):
        return input**exponent
    if isinstance(exponent, Tensor):
        return exponent.__rpow__(input)
    raise TypeError(
        f"pow: expected a tensor as input or exponent, got {type(input).__name__} and {type(exponent).__name__}"
    )


def _legacy(dtype: dtypes.DType, name: str) -> Any:
    def make(*data: Any, device: Any = None) -> Tensor:
        from torchlight.creation import empty, tensor

        if len(data) == 1 and not isinstance(data[0], int):
            source = data[0]
            if isinstance(source, Tensor):
                return source.to(dtype)
            return tensor(source, dtype=dtype, device=device)
        if all(isinstance(d, int) for d in data):
            return empty(*data, dtype=dtype, device=device) if data else tensor([], dtype=dtype)
        raise TypeError(f"{name}(): expected a list of numbers or sizes (ints), got {data!r}")

    make.__name__ = make.__qualname__ = name
    make.__doc__ = (
        f"``torch.{name}``: ``{name}([1, 2])`` makes a {dtype.name} tensor, "
        f"``{name}(2, 3)`` an uninitialized one of that shape."
    )
    return make


LongTensor = _legacy(dtypes.int64, "LongTensor")
IntTensor = _legacy(dtypes.int32, "IntTensor")
FloatTensor = _legacy(dtypes.float32, "FloatTensor")
DoubleTensor = _legacy(dtypes.float64, "DoubleTensor")
BoolTensor = _legacy(dtypes.bool_, "BoolTensor")
