"""Data types: float64 (the default), float32, and integer/bool tensors for indices and masks."""

from __future__ import annotations

from typing import Any

import numpy as np


class DType:
    """A tensor element type, named as PyTorch names it (``torchlight.float32``).

    Args:
        name: the numpy name of the type (``"float64"``, ``"int64"``, ``"bool"``).
    """

    __slots__ = ("name", "numpy")

    def __init__(self, name: str) -> None:
        self.name = name
        self.numpy = np.dtype(name)

    @property
    def is_floating_point(self) -> bool:
        """Whether tensors of this type can require gradients."""
        return self.numpy.kind == "f"

    def __repr__(self) -> str:
        return f"torchlight.{self.name}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (from_any, (self.name,))


float64 = DType("float64")
float32 = DType("float32")
int64 = DType("int64")
int32 = DType("int32")
uint8 = DType("uint8")  # images: what a real image pipeline reads (torchvision's PIL -> tensor)
bool_ = DType("bool")

_ALL = {d.name: d for d in (float64, float32, int64, int32, uint8, bool_)}
# Each numpy dtype by its class (Float64DType...), for from_any and Tensor.dtype (asked at every
# step of a backward pass): a class hashes by its address, where hashing a numpy dtype costs
# ~60 ns a call. A float64 of the other byte order has the same class: torchlight's float64.
_BY_CLASS = {type(d.numpy): d for d in _ALL.values()}
_default_dtype = float64


def from_any(dtype: Any) -> DType:
    """Turn a DType, a numpy dtype, a Python type or a name into one of torchlight's DTypes.

    Raises:
        TypeError: for a type torchlight does not support, naming the supported ones.
    """
    if isinstance(dtype, DType):
        return dtype
    found = _BY_CLASS.get(type(dtype))  # (a numpy dtype; anything else is not a key)
    if found is not None:
        return found
    if dtype is float:
        return _default_dtype
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    if name not in _ALL:
        raise TypeError(
            f"unsupported dtype {dtype!r}; torchlight supports {', '.join(sorted(_ALL))}"
        )
    return _ALL[name]


def get_default_dtype() -> DType:
    """The floating dtype that factories use when no ``dtype=`` is given (float64 at start)."""
    return _default_dtype


def set_default_dtype(dtype: Any) -> None:
    """Set the floating dtype of new tensors made from Python floats.

    Example:
        >>> import torchlight as tl
        >>> tl.set_default_dtype(tl.float32); tl.tensor([1.0]).dtype
        torchlight.float32
        >>> tl.set_default_dtype(tl.float64)
    """
    global _default_dtype
    new = from_any(dtype)
    if not new.is_floating_point:
        raise TypeError(f"the default dtype must be floating point (float32 or float64), got {new}")
    _default_dtype = new


# ---- PyTorch compatibility (issue 25): one dtype rule for every layer
def check_same_dtype(what: str, *tensors: Any) -> None:
    """Raise when the (non-None) tensors do not all have one dtype, as PyTorch does for matrix
    products, convolutions, recurrent and normalization layers (elementwise ops promote instead).

    Raises:
        RuntimeError: naming the op and both dtypes, and how to convert.
    """
    present = [t for t in tensors if t is not None]
    if not present:
        return
    first = present[0].dtype
    for t in present[1:]:
        if t.dtype is not first:
            raise RuntimeError(
                f"{what}: expected the input and the weights to have the same dtype, got {first} and "
                f"{t.dtype}. torchlight, like PyTorch, does not promote matrix products, convolutions, "
                f"recurrent and normalization layers: convert the input (x.to({t.dtype})) or the model "
                f"(model.to({first}), or build it after tl.set_default_dtype({first}))"
            )
