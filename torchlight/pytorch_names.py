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
    "BoolTensor", "ByteTensor", "DoubleTensor", "FloatTensor", "HalfDType", "IntTensor", "LongTensor", "bfloat16",
    "cumprod", "diag", "float16", "half", "isclose", "nansum", "pow", "set_printoptions", "unique",
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
    make.dtype = dtype  # type: ignore[attr-defined]  # (what x.type(tl.FloatTensor) converts to)
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
ByteTensor = _legacy(dtypes.uint8, "ByteTensor")


def diag(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002 - PyTorch's names
    """``torch.diag``: see :meth:`Tensor.diag`."""
    return input.diag(diagonal)


def isclose(
    input: Tensor,  # noqa: A002
    other: Any,
    rtol: float = 1e-5,
    atol: float = 1e-8,
    equal_nan: bool = False,
) -> Tensor:
    """``torch.isclose``: see :meth:`Tensor.isclose`."""
    return input.isclose(other, rtol, atol, equal_nan)


def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:  # noqa: A002
    """``torch.unique``: see :meth:`Tensor.unique`."""
    return input.unique(sorted, return_inverse, return_counts, dim)


def cumprod(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    """``torch.cumprod``: see :meth:`Tensor.cumprod`."""
    return input.cumprod(dim)


def nansum(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """``torch.nansum``: see :meth:`Tensor.nansum`."""
    return input.nansum(dim, keepdim)


def set_printoptions(
    precision: int | None = None,
    threshold: int | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """``torch.set_printoptions``: how tensors print (see :mod:`torchlight.printing`)."""
    from torchlight import printing

    printing.set_printoptions(precision, threshold, edgeitems, linewidth, profile, sci_mode)
