"""Factories: every way to make a tensor, each taking ``dtype=``, ``requires_grad=`` and ``backend=``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from torchlight import dtypes
from torchlight.backends import Backend, get_backend
from torchlight.ops import arithmetic as fn
from torchlight.shape import normalize_dim
from torchlight.tensor import Tensor

__all__ = [
    "arange", "cat", "empty", "empty_like", "eye", "full", "full_like", "linspace", "manual_seed",
    "ones", "ones_like", "rand", "rand_like", "randn", "randn_like", "stack", "tensor",
    "where", "zeros", "zeros_like",
]  # fmt: skip


class _RandomState:
    # PyTorch starts from a fixed seed too, so a fresh process draws the same numbers.
    generator = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Seed the generator behind ``rand``, ``randn``, ``randint``, dropout and ``nn.init``."""
    _RandomState.generator = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    """The process-wide random generator (seeded by :func:`manual_seed`)."""
    return _RandomState.generator


def _make(
    array: np.ndarray,
    dtype: Any,
    requires_grad: bool,
    backend: str | Backend | None,
    device: Any = None,
) -> Tensor:
    if dtype is not None:
        array = array.astype(dtypes.from_any(dtype).numpy, copy=False)
    elif array.dtype.kind == "f" and array.dtype != np.float32:
        array = array.astype(dtypes.get_default_dtype().numpy, copy=False)
    elif array.dtype.kind in "iu" and array.dtype != np.uint8:  # (uint8 images stay uint8)
        array = array.astype(np.int64, copy=False)
    dtypes.from_any(array.dtype)  # rejects complex, strings, objects with a clear message
    chosen = _backend_or_device(backend, device)
    out = Tensor(chosen.from_numpy(np.asarray(array, order="C")), chosen)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _backend_or_device(backend: str | Backend | None, device: Any) -> Backend:
    """``device=`` (PyTorch's word: "cpu", "cuda", a backend name) or ``backend=``."""
    if device is None:
        return get_backend(backend)
    chosen = get_backend(str(device))
    if backend is not None and get_backend(backend) is not chosen:
        raise ValueError(
            f"device={str(device)!r} and backend={getattr(backend, 'name', backend)!r} disagree; "
            "give one of them"
        )
    return chosen


def _numpy_dtype(dtype: Any) -> Any:
    """Allocate in the requested dtype directly (no float64 temporary to convert)."""
    return None if dtype is None else dtypes.from_any(dtype).numpy


def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for i, s in enumerate(size):
        if not isinstance(s, (int, np.integer)) or s < 0:
            raise ValueError(f"sizes must be non-negative integers, got {s!r} at position {i}")
    return tuple(int(s) for s in size)


def tensor(
    data: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (nested lists, a number, a numpy array).

    Python floats become the default dtype (float64; float32 under :mod:`torchlight.compat`),
    ints int64, bools bool; a numpy array or a tensor of floats keeps its float32 or float64,
    as ``torch.tensor`` keeps it.

    Example:
        >>> import torchlight as tl
        >>> tl.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        tensor([[1., 2.],
                [3., 4.]], requires_grad=True)
    """
    if isinstance(data, Tensor):
        data = data.backend.to_numpy(data.storage)
    try:
        array = np.array(data)
    except ValueError as error:
        raise ValueError(f"tensor(): nested lists must be rectangular ({error})") from None
    if array.dtype == object:
        raise TypeError(f"tensor(): cannot make a tensor from {type(data).__name__} data")
    if dtype is None and isinstance(data, (np.ndarray, np.generic)) and array.dtype == np.float64:
        dtype = dtypes.float64  # numpy's float64 stays float64, whatever the default dtype
    return _make(array, dtype, requires_grad, backend, device)


def full(
    size: Sequence[int],
    fill_value: float,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """A tensor of shape ``size`` with every element ``fill_value``."""
    dtype = dtype or (
        dtypes.bool_
        if isinstance(fill_value, bool)
        else dtypes.int64
        if isinstance(fill_value, int)
        else None
    )
    array = np.full(_size(tuple(size)), fill_value, dtype=_numpy_dtype(dtype))
    return _make(array, dtype, requires_grad, backend, device)


def zeros(
    *size: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """A tensor of zeros of shape ``size`` (``tl.zeros(2, 3)`` or ``tl.zeros((2, 3))``)."""
    return _make(
        np.zeros(_size(size), dtype=_numpy_dtype(dtype)), dtype, requires_grad, backend, device
    )


def ones(
    *size: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """A tensor of ones of shape ``size`` (``tl.ones(2, 3)`` or ``tl.ones((2, 3))``)."""
    return _make(
        np.ones(_size(size), dtype=_numpy_dtype(dtype)), dtype, requires_grad, backend, device
    )


def empty(
    *size: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """Like :func:`zeros` (torchlight never hands out uninitialized memory)."""
    return zeros(*size, dtype=dtype, requires_grad=requires_grad, backend=backend, device=device)


def eye(
    n: int,
    m: int | None = None,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """The ``n`` x ``m`` identity matrix (square when ``m`` is None): ones on the diagonal."""
    return _make(np.eye(n, m), dtype, requires_grad, backend, device)


def arange(
    start: float,
    end: float | None = None,
    step: float = 1,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """``start, start + step, ...`` up to (not including) ``end``; ints give int64."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must be non-zero")
    return _make(np.arange(start, end, step), dtype, requires_grad, backend, device)


def linspace(
    start: float,
    end: float,
    steps: int,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    return _make(np.linspace(start, end, steps), dtype, requires_grad, backend, device)


def rand(
    *size: Any,
    generator: Any = None,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """Uniform samples from [0, 1), drawn from ``generator`` (a :class:`torchlight.Generator`) or
    the process-wide generator seeded by :func:`manual_seed`."""
    return _make(_rng(generator).random(_size(size)), dtype, requires_grad, backend, device)


def randn(
    *size: Any,
    generator: Any = None,
    dtype: Any = None,
    requires_grad: bool = False,
    backend: str | Backend | None = None,
    device: Any = None,
) -> Tensor:
    """Standard normal samples, drawn from ``generator`` (a :class:`torchlight.Generator`) or the
    process-wide generator seeded by :func:`manual_seed`."""
    rng = _rng(generator)
    return _make(rng.standard_normal(_size(size)), dtype, requires_grad, backend, device)


def _rng(source: Any) -> np.random.Generator:
    """The numpy generator behind ``generator=``: a :class:`torchlight.Generator`'s own, or the
    process-wide one (see :func:`torchlight.random.rng_of`, which also names wrong types)."""
    if source is None:
        return generator()
    from torchlight.random import rng_of  # (random builds on this module)

    return rng_of(source)


def _like(t: Tensor, dtype: Any, device: Any) -> dict[str, Any]:
    return {
        "dtype": dtype or t.dtype,
        "backend": t.backend if device is None else None,
        "device": device,
    }


def zeros_like(
    t: Tensor, *, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """Zeros with the shape, dtype and backend of ``t`` (``dtype=`` overrides the dtype)."""
    return zeros(t.shape, requires_grad=requires_grad, **_like(t, dtype, device))


def ones_like(
    t: Tensor, *, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """Ones with the shape, dtype and backend of ``t`` (``dtype=`` overrides the dtype)."""
    return ones(t.shape, requires_grad=requires_grad, **_like(t, dtype, device))


def empty_like(
    t: Tensor, *, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """An uninitialized tensor with the shape, dtype and backend of ``t``."""
    return empty(t.shape, requires_grad=requires_grad, **_like(t, dtype, device))


def full_like(
    t: Tensor,
    fill_value: float,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """``fill_value`` everywhere, with the shape, dtype and backend of ``t``."""
    return full(t.shape, fill_value, requires_grad=requires_grad, **_like(t, dtype, device))


def rand_like(
    t: Tensor, *, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """Uniform samples in [0, 1) with the shape, dtype and backend of ``t``."""
    return rand(t.shape, requires_grad=requires_grad, **_like(t, dtype, device))


def randn_like(
    t: Tensor, *, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """Standard normal samples with the shape, dtype and backend of ``t``."""
    return randn(t.shape, requires_grad=requires_grad, **_like(t, dtype, device))


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join tensors along an existing dimension ``dim``; other dimensions must match."""
    parts = list(tensors)
    if not parts:
        raise ValueError("cat needs at least one tensor")
    ndim = parts[0].ndim
    d = normalize_dim(dim, ndim)
    for i, p in enumerate(parts):
        if p.ndim != ndim or any(
            a != b for k, (a, b) in enumerate(zip(p.shape, parts[0].shape, strict=True)) if k != d
        ):
            raise ValueError(
                f"cat: tensor {i} has shape {p.shape} but tensor 0 has shape {parts[0].shape}; "
                f"all sizes except dimension {d} must match"
            )
    dtype = parts[0].dtype
    return fn.Cat.apply(*[p.to(dtype) for p in parts], d)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join same-shape tensors along a new dimension ``dim``."""
    parts = list(tensors)
    if not parts:
        raise ValueError("stack needs at least one tensor")
    for i, p in enumerate(parts):
        if p.shape != parts[0].shape:
            raise ValueError(
                f"stack: tensor {i} has shape {p.shape} but tensor 0 has shape {parts[0].shape}"
            )
    d = normalize_dim(dim, parts[0].ndim + 1)
    return cat([p.unsqueeze(d) for p in parts], d)


def where(condition: Tensor, input: Any, other: Any) -> Tensor:  # noqa: A002 - PyTorch's name
    """``input`` where ``condition`` is true, else ``other`` (broadcasting all three)."""
    if condition.dtype is not dtypes.bool_:
        condition = condition != 0
    a = (
        input
        if isinstance(input, Tensor)
        else condition._lift(input).to(dtypes.get_default_dtype())
    )
    b = other if isinstance(other, Tensor) else a._lift(other)
    return fn.Where.apply(condition, a, b.to(a.dtype))
