# ruff: noqa: A001, A002 - PyTorch's names (tl.sum, tl.max, input=...) shadow builtins here
r"""Function forms of the Tensor methods, as PyTorch has them: ``tl.exp(x)`` is ``x.exp()``.

Each is one line that calls the method, so it records the same graph and gives the same
gradient. ``import torchlight as tl`` exports every name below. (Inside this module ``sum``,
``max``, ``min``, ``abs`` and ``round`` are these functions, not Python's builtins.)

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([[1.0, -2.0], [3.0, 4.0]])
    >>> tl.sum(tl.relu(x), dim=1), tl.argmax(x, dim=1)
    (tensor([1., 7.]), tensor([0, 1]))
"""

from __future__ import annotations

import builtins
import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from torchlight import autograd
from torchlight.backends import get_default_backend
from torchlight.ops import indexing
from torchlight.ops.einsum import einsum
from torchlight.return_types import Sort, TopK
from torchlight.serialization import load, save
from torchlight.tensor import Tensor

Dims = int | Sequence[int] | None

__all__ = [
    "abs", "allclose", "amax", "amin", "argmax", "argmin", "argsort", "as_tensor", "bmm", "chunk",
    "clamp", "clip", "cos", "cumsum", "dot", "einsum", "equal", "erf", "exp", "expm1", "flatten",
    "flip", "floor", "from_numpy", "gather", "index_select", "inference_mode", "is_floating_point",
    "is_tensor", "load", "log", "log1p", "log_softmax", "logsumexp", "masked_fill", "matmul", "max",
    "maximum", "mean", "median", "min", "minimum", "mm", "movedim", "narrow", "norm", "numel",
    "outer", "permute", "prod", "reciprocal", "relu", "reshape", "roll", "round", "rsqrt", "save",
    "scatter", "scatter_add", "set_grad_enabled", "sigmoid", "sin", "softmax", "sort", "split",
    "sqrt", "square", "squeeze", "sum", "t", "tanh", "topk", "transpose", "tril", "triu", "unbind",
    "unsqueeze",
]  # fmt: skip


def _check(input: Any, fn: str) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(
            f"tl.{fn} expects a Tensor, got {type(input).__name__}; wrap it with tl.tensor(...)"
        )
    return input


# --------------------------------------------------------------------------- elementwise
def exp(input: Tensor) -> Tensor:
    return _check(input, "exp").exp()


def log(input: Tensor) -> Tensor:
    return _check(input, "log").log()


def sqrt(input: Tensor) -> Tensor:
    return _check(input, "sqrt").sqrt()


def rsqrt(input: Tensor) -> Tensor:
    return _check(input, "rsqrt").rsqrt()


def sigmoid(input: Tensor) -> Tensor:
    return _check(input, "sigmoid").sigmoid()


def tanh(input: Tensor) -> Tensor:
    return _check(input, "tanh").tanh()


def relu(input: Tensor) -> Tensor:
    return _check(input, "relu").relu()


def abs(input: Tensor) -> Tensor:
    return _check(input, "abs").abs()


def sin(input: Tensor) -> Tensor:
    return _check(input, "sin").sin()


def cos(input: Tensor) -> Tensor:
    return _check(input, "cos").cos()


def log1p(input: Tensor) -> Tensor:
    return _check(input, "log1p").log1p()


def expm1(input: Tensor) -> Tensor:
    return _check(input, "expm1").expm1()


def erf(input: Tensor) -> Tensor:
    return _check(input, "erf").erf()


def floor(input: Tensor) -> Tensor:
    return _check(input, "floor").floor()


def round(input: Tensor, decimals: int = 0) -> Tensor:
    return _check(input, "round").round(decimals)


def reciprocal(input: Tensor) -> Tensor:
    return _check(input, "reciprocal").reciprocal()


def square(input: Tensor) -> Tensor:
    return _check(input, "square").square()


def clamp(input: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    return _check(input, "clamp").clamp(min, max)


clip = clamp


def maximum(input: Tensor, other: Tensor) -> Tensor:
    return _check(input, "maximum").maximum(other)


def minimum(input: Tensor, other: Tensor) -> Tensor:
    return _check(input, "minimum").minimum(other)


def softmax(input: Tensor, dim: int) -> Tensor:
    return _check(input, "softmax").softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    return _check(input, "log_softmax").log_softmax(dim)


# --------------------------------------------------------------------------- reductions
def sum(input: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return _check(input, "sum").sum(dim, keepdim)


def mean(input: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return _check(input, "mean").mean(dim, keepdim)


def prod(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _check(input, "prod").prod(dim, keepdim)


def max(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """``tl.max(x)``, ``tl.max(x, dim)`` (as ``x.max(dim)``), or ``tl.max(x, other)``, which is
    :func:`maximum` (PyTorch's overload)."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    x = _check(input, "max")
    return x.max() if dim is None else x.max(dim, keepdim)


def min(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """``tl.min(x)``, ``tl.min(x, dim)``, or ``tl.min(x, other)`` (:func:`minimum`)."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    x = _check(input, "min")
    return x.min() if dim is None else x.min(dim, keepdim)


def amax(input: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    return _check(input, "amax").amax(dim, keepdim)


def amin(input: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    return _check(input, "amin").amin(dim, keepdim)


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _check(input, "argmax").argmax(dim, keepdim)


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _check(input, "argmin").argmin(dim, keepdim)


def logsumexp(input: Tensor, dim: Dims, keepdim: bool = False) -> Tensor:
    return _check(input, "logsumexp").logsumexp(dim, keepdim)


def norm(input: Tensor, p: float | str = "fro", dim: Dims = None, keepdim: bool = False) -> Tensor:
    return _check(input, "norm").norm(p, dim, keepdim)


def cumsum(input: Tensor, dim: int) -> Tensor:
    return _check(input, "cumsum").cumsum(dim)


def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    return _check(input, "median").median(dim, keepdim)


# --------------------------------------------------------------------------- products
def matmul(input: Tensor, other: Tensor) -> Tensor:
    return _check(input, "matmul") @ other


def _need_ndim(fn: str, ndim: int, *tensors: Tensor) -> None:
    for i, x in enumerate(tensors):
        if _check(x, fn).ndim != ndim:
            raise ValueError(
                f"tl.{fn} expects {ndim}-d tensors, got shape {x.shape} for argument {i}; use "
                "tl.matmul for other shapes"
            )


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """The product of two matrices (2-d only, unlike :func:`matmul`)."""
    _need_ndim("mm", 2, input, mat2)
    return input @ mat2


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix products of ``(b, n, m)`` and ``(b, m, p)`` tensors."""
    _need_ndim("bmm", 3, input, mat2)
    return input @ mat2


def dot(input: Tensor, other: Tensor) -> Tensor:
    r"""$\sum_i a_i b_i$ of two 1-d tensors."""
    _need_ndim("dot", 1, input, other)
    return input @ other


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    r"""$\mathrm{out}_{ij} = a_i b_j$ of two 1-d tensors."""
    _need_ndim("outer", 1, input, vec2)
    return input.unsqueeze(1) * vec2.unsqueeze(0)


# --------------------------------------------------------------------------- layout
def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    return _check(input, "flatten").flatten(start_dim, end_dim)


def reshape(input: Tensor, shape: Sequence[int]) -> Tensor:
    return _check(input, "reshape").reshape(tuple(shape))


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    return _check(input, "transpose").transpose(dim0, dim1)


def permute(input: Tensor, dims: Sequence[int]) -> Tensor:
    return _check(input, "permute").permute(*dims)


def squeeze(input: Tensor, dim: Dims = None) -> Tensor:
    return _check(input, "squeeze").squeeze(dim)


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    return _check(input, "unsqueeze").unsqueeze(dim)


def t(input: Tensor) -> Tensor:
    return _check(input, "t").t()


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    return _check(input, "chunk").chunk(chunks, dim)


def split(
    tensor: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0
) -> tuple[Tensor, ...]:
    return _check(tensor, "split").split(split_size_or_sections, dim)


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    return _check(input, "unbind").unbind(dim)


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    return _check(input, "narrow").narrow(dim, start, length)


def flip(input: Tensor, dims: Sequence[int]) -> Tensor:
    return _check(input, "flip").flip(dims)


def roll(input: Tensor, shifts: int | Sequence[int], dims: Dims = None) -> Tensor:
    return _check(input, "roll").roll(shifts, dims)


def movedim(input: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    return _check(input, "movedim").movedim(source, destination)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    return _check(input, "tril").tril(diagonal)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    return _check(input, "triu").triu(diagonal)


# --------------------------------------------------------------------------- indexing, sorting
def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    return indexing.gather(_check(input, "gather"), dim, index)


def scatter(input: Tensor, dim: int, index: Tensor, src: Any) -> Tensor:
    return indexing.scatter(_check(input, "scatter"), dim, index, src)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    return indexing.scatter_add(_check(input, "scatter_add"), dim, index, src)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    return indexing.index_select(_check(input, "index_select"), dim, index)


def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    return indexing.masked_fill(_check(input, "masked_fill"), mask, value)


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> TopK:
    return indexing.topk(_check(input, "topk"), k, dim, largest)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Sort:
    return indexing.sort(_check(input, "sort"), dim, descending)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return indexing.argsort(_check(input, "argsort"), dim, descending)


# --------------------------------------------------------------------------- questions
def _host(x: Tensor) -> np.ndarray:
    return np.asarray(x.detach().numpy())


def allclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    r"""Whether $|a - b| \le \mathrm{atol} + \mathrm{rtol} \cdot |b|$ everywhere (broadcasting)."""
    a, b = _host(_check(input, "allclose")), _host(_check(other, "allclose"))
    return builtins.bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input: Tensor, other: Tensor) -> bool:
    """Whether both have the same shape and the same elements."""
    a, b = _host(_check(input, "equal")), _host(_check(other, "equal"))
    return a.shape == b.shape and builtins.bool(np.array_equal(a, b))


def numel(input: Tensor) -> int:
    """The number of elements of ``input`` (the product of its shape)."""
    return _check(input, "numel").numel()


def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a torchlight :class:`~torchlight.Tensor` (as ``torch.is_tensor``)."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> bool:
    """Whether ``input``'s dtype is a floating-point one (float32 or float64)."""
    return _check(input, "is_floating_point").dtype.is_floating_point


# --------------------------------------------------------------------------- making tensors
def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor on the numpy backend sharing ``ndarray``'s memory (writes show in both), with
    its dtype (float32 stays float32, int32 stays int32)."""
    from torchlight import dtypes
    from torchlight.backends import get_backend

    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(ndarray).__name__}")
    dtypes.from_any(ndarray.dtype)  # an unsupported dtype gets the list of supported ones
    backend = get_backend("numpy")
    return Tensor(backend.from_numpy(ndarray), backend)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` as a tensor, sharing memory where it can: a tensor that already has the dtype
    and device comes back as it is, a numpy array on the numpy backend is not copied."""
    from torchlight import creation, dtypes
    from torchlight.backends import get_backend

    wanted = get_default_backend() if device is None else get_backend(str(device))
    if isinstance(data, Tensor):
        out = data if device is None else data.to(str(device))
        return out if dtype is None else out.to(dtype)
    if (
        isinstance(data, np.ndarray)
        and wanted.name == "numpy"
        and (dtype is None or dtypes.from_any(dtype).numpy == data.dtype)
    ):
        return from_numpy(data)
    return creation.tensor(data, dtype=dtype, backend=wanted)


# --------------------------------------------------------------------------- grad mode
class set_grad_enabled:  # noqa: N801 - PyTorch's name
    """Turn recording on or off: as a call (``tl.set_grad_enabled(False)``) it stays so; as a
    context manager (``with tl.set_grad_enabled(is_train):``) the old mode comes back after."""

    def __init__(self, mode: bool) -> None:
        self._enabled = mode
        self._mode = autograd.enable_grad() if mode else autograd.no_grad()
        self._mode.__enter__()  # takes effect now, like PyTorch's

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)

    def __call__(self, fn: Any) -> Any:
        """As a decorator (``@tl.set_grad_enabled(False)``): the mode applies inside ``fn`` only."""
        self._mode.__exit__(None, None, None)  # undo what __init__ did at decoration time
        mode = self._enabled

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper


class inference_mode(autograd.no_grad):  # noqa: N801 - PyTorch's name
    """``no_grad`` under PyTorch's other name (PyTorch's also forbids later autograd use of
    the results; here they are ordinary tensors without history)."""

    def __init__(self, mode: bool = True) -> None:
        self._value = not mode

    def __call__(self, fn: Any) -> Any:
        mode = not self._value

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper


def _document_method_forms() -> None:
    """Give each one-line form without a docstring of its own PyTorch's sentence for it:
    ``tl.exp(x)`` is ``x.exp()``, with the method's first line (the formula) after it."""
    for name in __all__:
        form = globals()[name]
        if not callable(form) or isinstance(form, type) or form.__doc__:
            continue
        method = getattr(Tensor, name, None)
        summary = (method.__doc__ or "").strip().split("\n")[0] if method is not None else ""
        summary = re.sub(r":meth:`(\w+)`", r"``Tensor.\1``", summary)  # no role outside the class
        call = f"``tl.{name}(input, ...)`` is ``input.{name}(...)``" if method else f"``tl.{name}``"
        form.__doc__ = f"{call}: the function form of the Tensor method. {summary}".strip()


_document_method_forms()
