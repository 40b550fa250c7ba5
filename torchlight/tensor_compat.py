"""Tensor methods PyTorch programs use that torchlight spells otherwise, attached to ``Tensor``.

``f"{loss:.4f}"`` (``__format__`` with a spec, on a 0-d tensor, as PyTorch), ``mm``,
``type_as``, ``type(dtype)``, ``nelement``, ``is_cuda``. :func:`attach` is called once by
``torchlight/__init__.py``.

Example:
    >>> import torchlight as tl
    >>> f"{tl.tensor(2.0) / 3:.3f}", tl.ones(2, 3).nelement(), tl.ones(2).is_cuda
    ('0.667', 6, False)
"""

from __future__ import annotations

from typing import Any

from torchlight import dtypes
from torchlight.tensor import Tensor

__all__ = ["attach"]

# PyTorch's legacy type names, as Tensor.type() prints them
_TYPE_NAMES = {
    "float64": "torch.DoubleTensor",
    "float32": "torch.FloatTensor",
    "float16": "torch.HalfTensor",
    "bfloat16": "torch.BFloat16Tensor",
    "int64": "torch.LongTensor",
    "int32": "torch.IntTensor",
    "uint8": "torch.ByteTensor",
    "bool": "torch.BoolTensor",
}
_BY_TYPE_NAME = {v: k for k, v in _TYPE_NAMES.items()}


def _format(self: Tensor, spec: str) -> str:
    if self.ndim == 0:
        return format(self.item(), spec)
    if spec:
        raise TypeError(
            f"unsupported format string {spec!r} passed to Tensor.__format__: only a 0-d tensor "
            f"takes a format spec (this one has shape {tuple(self.shape)}; format x.item() or x.tolist())"
        )
    return str(self)


def _mm(self: Tensor, other: Tensor) -> Tensor:
    if self.ndim != 2 or other.ndim != 2:
        raise RuntimeError(
            f"mm: both arguments must be 2-d matrices, got shapes {tuple(self.shape)} and {tuple(other.shape)}"
        )
    return self @ other


def _type_as(self: Tensor, other: Tensor) -> Tensor:
    return self.to(other.dtype) if self.dtype is not other.dtype else self


def _type(self: Tensor, dtype: Any = None, non_blocking: bool = False) -> Any:
    if dtype is None:
        return _TYPE_NAMES.get(self.dtype.name, f"torchlight.{self.dtype.name}")
    if isinstance(dtype, str) and dtype in _BY_TYPE_NAME:
        dtype = _BY_TYPE_NAME[dtype]
    dtype = getattr(dtype, "dtype", dtype)  # the legacy constructors: x.type(tl.FloatTensor)
    target = dtypes.from_any(dtype)
    return self.to(target) if target is not self.dtype else self


def _nelement(self: Tensor) -> int:
    return int(self.numel())


def _is_cuda(self: Tensor) -> bool:
    return (
        self.device.type == "cuda" if hasattr(self.device, "type") else str(self.device) == "cuda"
    )


def _rebuild(cls: type, array: Any, backend: str, requires_grad: bool, grad: Any) -> Tensor:
    from torchlight.backends import get_backend

    chosen = get_backend(backend)
    out = Tensor(chosen.from_numpy(array), chosen)
    if cls is not Tensor:  # nn.Parameter
        return cls(out, requires_grad=requires_grad)
    if requires_grad:
        out.requires_grad_(True)
    if grad is not None:
        out.grad = grad
    return out


def _reduce_ex(self: Tensor, protocol: Any) -> tuple[Any, ...]:
    # pickle and copy.deepcopy: the elements, the backend by name (backends are one per
    # process, so a copy must not make a second one) and requires_grad, as PyTorch keeps them
    grad = self.grad if self.is_leaf else None
    return (
        _rebuild,
        (type(self), self.detach().numpy().copy(), self.backend.name, self.requires_grad, grad),
    )


def attach() -> None:
    """Put the methods on :class:`Tensor` (idempotent)."""
    Tensor.__format__ = _format  # type: ignore[method-assign,assignment]
    Tensor.mm = _mm  # type: ignore[attr-defined]
    Tensor.type_as = _type_as  # type: ignore[attr-defined]
    Tensor.type = _type  # type: ignore[attr-defined]
    Tensor.nelement = _nelement  # type: ignore[attr-defined]
    Tensor.is_cuda = property(_is_cuda)  # type: ignore[attr-defined]
    Tensor.__reduce_ex__ = _reduce_ex  # type: ignore[method-assign,assignment]
