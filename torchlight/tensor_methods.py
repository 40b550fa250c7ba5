r"""The Tensor's operations, one section per family, in this order: arithmetic operators,
comparisons, elementwise math, reductions, layout, indexing and sorting, in place, factories.

Each differentiable method is a one-line call into :mod:`torchlight.ops`: a Function of
:mod:`~torchlight.ops.arithmetic` (the primitives behind the operators), or a function of
:mod:`~torchlight.ops.elementwise`, :mod:`~torchlight.ops.reductions`,
:mod:`~torchlight.ops.layout`, :mod:`~torchlight.ops.indexing` or :mod:`~torchlight.ops.losses`
(softmax); a few (``mean``, ``var``, ``squeeze``...) are compositions of those, so their
gradients come for free. ``Tensor`` inherits these methods (and nothing adds any at import);
this file exists so that ``tensor.py`` (storage, history, gradient, conversion and the backend
primitives) stays readable. Every name, argument and default is PyTorch's.

The in-place variants (``clamp_``, ``exp_``, ``masked_fill_``...) compute the out-of-place
result and write it with ``copy_``, so they follow exactly the rules ``copy_`` follows (under
``tl.no_grad()`` on parameters; recorded on a non-leaf in the graph; refused on a leaf that
requires grad).

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([[1.0, -2.0], [3.0, 0.5]])
    >>> x.sort(dim=1).values
    tensor([[-2.0000,  1.0000],
            [ 0.5000,  3.0000]])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from torchlight import dtypes
from torchlight.autograd.grad_mode import _GradMode, is_grad_enabled
from torchlight.ops import arithmetic as fn
from torchlight.ops import elementwise, indexing, layout, losses, reductions
from torchlight.return_types import Sort, TopK
from torchlight.shape import broadcast_shape, normalize_dim

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

Dim = int | Sequence[int] | None

_EXPANDED = (
    "{what}: this tensor is an expanded view (several elements share one memory location); "
    "call .clone() before writing to it"
)


def _dims(self: Tensor, dim: Dim) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(self.ndim))
    dims = (dim,) if isinstance(dim, int) else dim
    normalized = {normalize_dim(d, self.ndim) for d in dims}  # (raises for a bad dim)
    # A 0-d tensor accepts dim 0 and -1, as in PyTorch, and has no dimension to reduce.
    return tuple(sorted(normalized)) if self.ndim else ()


class ValuesIndices(NamedTuple):
    """What ``x.max(dim)`` and ``x.min(dim)`` return, as in PyTorch: ``values, indices = ...``."""

    values: Tensor
    indices: Tensor


def _shape_arg(shape: tuple[Any, ...]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple([int(s) for s in shape])


class TensorOps:
    """Mixin with every user-facing operation of :class:`~torchlight.tensor.Tensor`."""

    __slots__ = ()

    # ---------------------------------------------------------------- arithmetic operators
    def __add__(self: Tensor, other: Any) -> Tensor:
        return fn.Add.apply(self, self._lift(other))

    def __radd__(self: Tensor, other: Any) -> Tensor:
        return fn.Add.apply(self._lift(other), self)

    def __sub__(self: Tensor, other: Any) -> Tensor:
        return fn.Sub.apply(*_no_bool_subtraction(self, self._lift(other)))

    def __rsub__(self: Tensor, other: Any) -> Tensor:
        return fn.Sub.apply(*_no_bool_subtraction(self._lift(other), self))

    def __mul__(self: Tensor, other: Any) -> Tensor:
        return fn.Mul.apply(self, self._lift(other))

    def __rmul__(self: Tensor, other: Any) -> Tensor:
        return fn.Mul.apply(self._lift(other), self)

    def __truediv__(self: Tensor, other: Any) -> Tensor:
        return fn.Div.apply(*_true_division(self, self._lift(other)))

    def __rtruediv__(self: Tensor, other: Any) -> Tensor:
        return fn.Div.apply(*_true_division(self._lift(other), self))

    def __pow__(self: Tensor, other: Any) -> Tensor:
        return fn.Pow.apply(self, self._lift(other))

    def __rpow__(self: Tensor, other: Any) -> Tensor:
        return fn.Pow.apply(self._lift(other), self)

    def __matmul__(self: Tensor, other: Any) -> Tensor:
        return fn.MatMul.apply(self, self._lift(other))

    def __rmatmul__(self: Tensor, other: Any) -> Tensor:
        return fn.MatMul.apply(self._lift(other), self)

    def __neg__(self: Tensor) -> Tensor:
        if self.dtype is dtypes.bool_:
            raise RuntimeError(
                "Negation, the `-` operator, on a bool tensor is not supported (as in PyTorch). "
                "If you are trying to invert a mask, use the `~` or `logical_not()` operator."
            )
        return fn.Neg.apply(self)

    def __mod__(self: Tensor, other: Any) -> Tensor:
        r"""$x \bmod n = x - n \lfloor x / n \rfloor$ (the sign of ``n``, as Python's ``%`` and
        ``torch.remainder``); for floats the gradient is 1 for $x$ and $-\lfloor x/n \rfloor$ for $n$."""
        other = self._lift(other)
        if self.dtype.is_floating_point or other.dtype.is_floating_point:
            return self - (self / other).floor() * other
        return _integer_op(self, other, np.mod, "remainder")

    def __rmod__(self: Tensor, other: Any) -> Tensor:
        return self._lift(other).__mod__(self)

    def __floordiv__(self: Tensor, other: Any) -> Tensor:
        r"""$\lfloor x / n \rfloor$ (``torch.floor_divide``; no gradient, as PyTorch's)."""
        other = self._lift(other)
        if self.dtype.is_floating_point or other.dtype.is_floating_point:
            return (self.detach() / other.detach()).floor()
        return _integer_op(self, other, np.floor_divide, "floor_divide")

    def __rfloordiv__(self: Tensor, other: Any) -> Tensor:
        return self._lift(other).__floordiv__(self)

    remainder = __mod__
    floor_divide = __floordiv__

    def mv(self: Tensor, vec: Tensor) -> Tensor:
        r"""The matrix-vector product $A v$ (``self`` 2-d, ``vec`` 1-d)."""
        if self.ndim != 2 or vec.ndim != 1:
            raise RuntimeError(
                f"mv: expected a 2-d matrix and a 1-d vector, got shapes {self.shape} and {vec.shape}"
            )
        return self @ vec

    def mm(self: Tensor, other: Tensor) -> Tensor:
        r"""The matrix product $A B$ of two 2-d tensors (``@`` broadcasts; ``mm`` refuses)."""
        if self.ndim != 2 or other.ndim != 2:
            raise RuntimeError(
                f"mm: both arguments must be 2-d matrices, got shapes {tuple(self.shape)} and "
                f"{tuple(other.shape)}"
            )
        return self @ other

    def __pos__(self: Tensor) -> Tensor:
        return self

    def __abs__(self: Tensor) -> Tensor:
        return fn.Abs.apply(self)

    mul = __mul__
    div = __truediv__
    pow = __pow__
    matmul = __matmul__
    neg = __neg__
    abs = __abs__

    def add(self: Tensor, other: Any, *, alpha: float = 1) -> Tensor:
        r"""$x + \alpha \cdot \mathrm{other}$."""
        return self + (other if alpha == 1 else other * alpha)

    def sub(self: Tensor, other: Any, *, alpha: float = 1) -> Tensor:
        r"""$x - \alpha \cdot \mathrm{other}$."""
        return self - (other if alpha == 1 else other * alpha)

    # ---------------------------------------------------------------- comparisons (no gradient)
    def __eq__(self: Tensor, other: Any) -> Tensor:  # type: ignore[override]
        return self._zip("eq", self._lift(other))

    def __ne__(self: Tensor, other: Any) -> Tensor:  # type: ignore[override]
        return self._zip("ne", self._lift(other))

    def __lt__(self: Tensor, other: Any) -> Tensor:
        return self._zip("lt", self._lift(other))

    def __le__(self: Tensor, other: Any) -> Tensor:
        return self._zip("le", self._lift(other))

    def __gt__(self: Tensor, other: Any) -> Tensor:
        return self._zip("gt", self._lift(other))

    def __ge__(self: Tensor, other: Any) -> Tensor:
        return self._zip("ge", self._lift(other))

    def __invert__(self: Tensor) -> Tensor:
        return self._zip("eq", self._lift(False))

    def __and__(self: Tensor, other: Any) -> Tensor:
        return self._zip("minimum", self._lift(other))  # for bools, min is "and"

    def __or__(self: Tensor, other: Any) -> Tensor:
        return self._zip("maximum", self._lift(other))  # for bools, max is "or"

    eq, ne, lt, le, gt, ge = __eq__, __ne__, __lt__, __le__, __gt__, __ge__

    def argmax(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the largest element (along ``dim``), an int64 tensor without gradient."""
        return _argreduce(self, "max", dim, keepdim)

    def argmin(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _argreduce(self, "min", dim, keepdim)

    def any(self: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
        """Whether any element is nonzero (along ``dim``), a bool tensor."""
        return (self != 0)._reduce("max", _dims(self, dim), keepdim)

    def all(self: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
        """Whether every element is nonzero (along ``dim``), a bool tensor."""
        return (self != 0)._reduce("min", _dims(self, dim), keepdim)

    def isclose(
        self: Tensor, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
    ) -> Tensor:
        r"""Elementwise $|x - y| \le \text{atol} + \text{rtol} \cdot |y|$ (infinities equal when
        they match), a bool tensor, decided on the host as ``torch.isclose``."""
        other = self._lift(other)
        close = np.isclose(_host(self), _host(other), rtol=rtol, atol=atol, equal_nan=equal_nan)
        return self._lift(np.asarray(close))

    def equal(self: Tensor, other: Tensor) -> bool:
        """Whether both have the same shape and the same elements (``torch.equal``)."""
        return self.shape == other.shape and bool(np.array_equal(_host(self), _host(other)))

    # ---------------------------------------------------------------- elementwise math
    def exp(self: Tensor) -> Tensor:
        return fn.Exp.apply(self)

    def log(self: Tensor) -> Tensor:
        return fn.Log.apply(self)

    def sqrt(self: Tensor) -> Tensor:
        return fn.Sqrt.apply(self)

    def sigmoid(self: Tensor) -> Tensor:
        return fn.Sigmoid.apply(self)

    def relu(self: Tensor) -> Tensor:
        return fn.ReLU.apply(self)

    def tanh(self: Tensor) -> Tensor:
        return fn.Tanh.apply(self)

    def sign(self: Tensor) -> Tensor:
        """-1, 0 or 1 for each element (no gradient: its derivative is 0 almost everywhere)."""
        return self._map("sign")

    def clamp(self: Tensor, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
        """Limit every element to ``[min, max]``; the gradient is 1 inside, 0 outside."""
        if min is None and max is None:
            raise ValueError("clamp needs at least one of min= or max=")
        return fn.Clamp.apply(self, min, max)

    clip = clamp

    def maximum(self: Tensor, other: Any) -> Tensor:
        return fn.Maximum.apply(self, self._lift(other))

    def minimum(self: Tensor, other: Any) -> Tensor:
        return fn.Minimum.apply(self, self._lift(other))

    def sin(self: Tensor) -> Tensor:
        r"""$\sin x$ elementwise."""
        return elementwise.Sin.apply(self)

    def cos(self: Tensor) -> Tensor:
        r"""$\cos x$ elementwise."""
        return elementwise.Cos.apply(self)

    def log1p(self: Tensor) -> Tensor:
        r"""$\ln(1 + x)$, accurate for tiny $x$."""
        return elementwise.Log1p.apply(self)

    def expm1(self: Tensor) -> Tensor:
        r"""$e^x - 1$, accurate for tiny $x$."""
        return elementwise.Expm1.apply(self)

    def erf(self: Tensor) -> Tensor:
        r"""The error function $\frac{2}{\sqrt\pi}\int_0^x e^{-t^2}\,dt$."""
        return elementwise.Erf.apply(self)

    def floor(self: Tensor) -> Tensor:
        r"""$\lfloor x \rfloor$ (gradient 0)."""
        return elementwise.Floor.apply(self)

    def round(self: Tensor, decimals: int = 0) -> Tensor:
        """To the nearest integer (or multiple of ``10**-decimals``), halves to even; gradient 0."""
        if decimals == 0:
            return elementwise.Round.apply(self)
        scale = 10.0**decimals
        return elementwise.Round.apply(self * scale) / scale

    def rsqrt(self: Tensor) -> Tensor:
        r"""$1 / \sqrt{x}$."""
        return 1 / self.sqrt()

    def reciprocal(self: Tensor) -> Tensor:
        r"""$1 / x$."""
        return 1 / self

    def square(self: Tensor) -> Tensor:
        r"""$x^2$."""
        return self * self

    def softmax(self: Tensor, dim: int) -> Tensor:
        """:func:`torchlight.ops.losses.softmax` along ``dim`` (what ``F.softmax`` is)."""
        return losses.softmax(self, dim)

    def log_softmax(self: Tensor, dim: int) -> Tensor:
        """:func:`torchlight.ops.losses.log_softmax` along ``dim`` (what ``F.log_softmax`` is)."""
        return losses.log_softmax(self, dim)

    # ---------------------------------------------------------------- reductions
    def sum(self: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
        r"""$\sum_i x_i$ over ``dim`` (all dimensions when None)."""
        return fn.Sum.apply(self, _dims(self, dim), keepdim)

    def mean(self: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
        r"""$\frac{1}{n}\sum_i x_i$ over ``dim`` (floating tensors only, as in PyTorch)."""
        if not self.dtype.is_floating_point:
            raise RuntimeError(
                f"mean(): could not infer output dtype. Input dtype must be a floating point "
                f"dtype, got {self.dtype} (as in PyTorch); call x.float().mean() or x.double().mean()"
            )
        dims = _dims(self, dim)
        count = math.prod([self.shape[d] for d in dims])
        return fn.Sum.apply(self, dims, keepdim) / count

    def var(self: Tensor, dim: Dim = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        r"""$\frac{1}{n - c}\sum_i (x_i - \bar x)^2$ (``correction`` $c$ = 1: unbiased, as in PyTorch)."""
        dims = _dims(self, dim)
        count = math.prod(self.shape[d] for d in dims)
        centered = self - self.mean(dims, keepdim=True)
        return (centered * centered).sum(dims, keepdim) / max(count - correction, 0)

    def std(self: Tensor, dim: Dim = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        return self.var(dim, keepdim, correction).sqrt()

    def max(self: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
        """The largest element, as PyTorch overloads it.

        - ``x.max()``: the largest element; the gradient goes to it (split evenly at ties).
        - ``x.max(dim)``: ``(values, indices)`` along ``dim`` (a :class:`ValuesIndices`); the
          gradient goes to the element at each index.
        - ``x.max(other)``: the elementwise maximum of two tensors (``maximum``).
        """
        return _max_or_min(self, "max", dim, keepdim)

    def min(self: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
        """The smallest element: ``x.min()``, ``(values, indices) = x.min(dim)``, ``x.min(other)``."""
        return _max_or_min(self, "min", dim, keepdim)

    def mse_loss(self: Tensor, target: Any, reduction: str = "mean") -> Tensor:
        r"""Mean squared error $\frac{1}{n}\sum_i (x_i - t_i)^2$ against ``target`` (or the
        sum, or each term: ``reduction="sum"``/``"none"``); ``F.mse_loss`` is this."""
        target = self._lift(target)
        if target.shape != self.shape:
            raise ValueError(
                f"mse_loss: input {self.shape} and target {target.shape} must have the same shape"
            )
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(
                f"mse_loss: reduction must be one of ('mean', 'sum', 'none'), got {reduction!r}"
            )
        diff = self - target
        if reduction == "none":
            return diff * diff
        return (diff * diff).mean() if reduction == "mean" else (diff * diff).sum()

    def prod(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
        r"""$\prod_i x_i$ along ``dim`` (all elements when None)."""
        return reductions.prod(self, dim, keepdim)

    def logsumexp(self: Tensor, dim: Dim, keepdim: bool = False) -> Tensor:
        r"""$\log\sum_i e^{x_i}$ along ``dim``, without overflow."""
        return reductions.logsumexp(self, dim, keepdim)

    def norm(
        self: Tensor, p: float | str = "fro", dim: Dim = None, keepdim: bool = False
    ) -> Tensor:
        r"""The $p$-norm over ``dim`` (all elements when None); 2 by default."""
        return reductions.norm(self, p, dim, keepdim)

    def cumsum(self: Tensor, dim: int) -> Tensor:
        r"""Running sums $y_i = \sum_{j \le i} x_j$ along ``dim``."""
        return reductions.cumsum(self, dim)

    def cumprod(self: Tensor, dim: int) -> Tensor:
        r"""Running products $y_i = \prod_{j \le i} x_j$ along ``dim``: one product per step, so
        the gradient is exact where an element is 0."""
        if self.ndim == 0:
            return self.clone()
        steps = self.unbind(dim)
        running = [steps[0]] if steps else []
        for step in steps[1:]:
            running.append(running[-1] * step)
        from torchlight.creation import stack

        return stack(running, dim) if running else self.clone()

    def nansum(self: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
        r"""$\sum_i x_i$ over ``dim`` with NaNs counted as 0 (they get no gradient)."""
        return fn.Where.apply(self != self, self._lift(0.0), self).sum(dim, keepdim)

    def amax(self: Tensor, dim: Dim = (), keepdim: bool = False) -> Tensor:
        """The largest values along ``dim`` (a tensor, never ``(values, indices)``)."""
        return reductions.amax(self, dim, keepdim)

    def amin(self: Tensor, dim: Dim = (), keepdim: bool = False) -> Tensor:
        """The smallest values along ``dim``."""
        return reductions.amin(self, dim, keepdim)

    def median(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower median; with ``dim``, ``(values, indices)`` along it."""
        return indexing.median(self, dim, keepdim)

    # ---------------------------------------------------------------- layout
    def view(self: Tensor, *shape: Any) -> Tensor:
        """The same storage seen with a new shape (one size may be -1); never copies."""
        return fn.View.apply(self, _infer_shape(self, _shape_arg(shape)), False)

    def reshape(self: Tensor, *shape: Any) -> Tensor:
        """Like :meth:`view`, but copies when the strides do not allow a view."""
        new = _infer_shape(self, _shape_arg(shape))
        return self if new == self.shape else fn.View.apply(self, new, True)

    def permute(self: Tensor, *dims: Any) -> Tensor:
        """Reorder dimensions without copying: ``x.permute(1, 0)`` is a transpose."""
        order = tuple(normalize_dim(d, self.ndim) for d in _shape_arg(dims))
        if sorted(order) != list(range(self.ndim)):
            raise ValueError(
                f"permute needs each of the {self.ndim} dims once, got {_shape_arg(dims)}"
            )
        return fn.Permute.apply(self, order)

    def transpose(self: Tensor, dim0: int, dim1: int) -> Tensor:
        order = list(range(self.ndim))
        d0, d1 = normalize_dim(dim0, self.ndim), normalize_dim(dim1, self.ndim)
        order[d0], order[d1] = order[d1], order[d0]
        return self.permute(*order)

    def expand(self: Tensor, *shape: Any) -> Tensor:
        """Repeat size-1 dimensions to ``shape`` without copying (-1 keeps a size)."""
        target = _shape_arg(shape)
        lead = len(target) - self.ndim
        if lead < 0:
            raise ValueError(f"expand: cannot expand shape {self.shape} to fewer dims {target}")
        full = tuple(self.shape[d - lead] if size == -1 else size for d, size in enumerate(target))
        for d, size in enumerate(self.shape):
            if size != 1 and size != full[lead + d]:
                raise ValueError(
                    f"expand: shape {self.shape} cannot be expanded to {target}: dimension "
                    f"{d} has size {size} (only size-1 dimensions can be expanded)"
                )
        return self if full == self.shape else fn.Expand.apply(self, full)

    def squeeze(self: Tensor, dim: Dim = None) -> Tensor:
        dims = _dims(self, dim)
        return self.reshape(
            tuple(n for d, n in enumerate(self.shape) if not (d in dims and n == 1))
        )

    def unsqueeze(self: Tensor, dim: int) -> Tensor:
        d = normalize_dim(dim, self.ndim + 1)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        s, e = normalize_dim(start_dim, self.ndim), normalize_dim(end_dim, self.ndim)
        return self.reshape(self.shape[:s] + (-1,) + self.shape[e + 1 :])

    def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """At most ``chunks`` equal pieces along ``dim`` (views)."""
        return layout.chunk(self, chunks, dim)

    def split(self: Tensor, split_size: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Pieces of ``split_size`` (or of the listed sizes) along ``dim``."""
        return layout.split(self, split_size, dim)

    def unbind(self: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
        """Every slice along ``dim``, that dimension removed."""
        return layout.unbind(self, dim)

    def narrow(self: Tensor, dim: int, start: int, length: int) -> Tensor:
        """``length`` elements of ``dim`` from ``start`` on (a view)."""
        return layout.narrow(self, dim, start, length)

    def repeat(self: Tensor, *sizes: Any) -> Tensor:
        """Tile the tensor ``sizes[i]`` times along dimension ``i``."""
        flat = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], Sequence) else sizes
        return layout.repeat(self, tuple(int(s) for s in flat))

    def flip(self: Tensor, *dims: Any) -> Tensor:
        """Reverse the order of elements along ``dims``."""
        flat = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], Sequence) else dims
        return layout.flip(self, flat)

    def roll(self: Tensor, shifts: int | Sequence[int], dims: Dim = None) -> Tensor:
        """Shift elements along ``dims``, wrapping around."""
        return layout.roll(self, shifts, dims)

    def movedim(
        self: Tensor, source: int | Sequence[int], destination: int | Sequence[int]
    ) -> Tensor:
        """Move dimension(s) ``source`` to ``destination``."""
        return layout.movedim(self, source, destination)

    moveaxis = movedim

    def tril(self: Tensor, diagonal: int = 0) -> Tensor:
        """The lower triangle of the last two dimensions; zeros above."""
        return layout.tril(self, diagonal)

    def triu(self: Tensor, diagonal: int = 0) -> Tensor:
        """The upper triangle of the last two dimensions; zeros below."""
        return layout.triu(self, diagonal)

    @property
    def mT(self: Tensor) -> Tensor:  # noqa: N802 - PyTorch's name
        """The last two dimensions swapped (a batch of matrices transposed)."""
        if self.ndim < 2:
            raise ValueError(f"mT needs at least 2 dimensions, got shape {self.shape}")
        return self.transpose(-2, -1)

    def diag(self: Tensor, diagonal: int = 0) -> Tensor:
        """1-d: the square matrix with this vector on diagonal ``diagonal`` (above the main one
        when > 0); 2-d: that diagonal as a vector (``torch.diag``)."""
        first_row, first_col = max(-diagonal, 0), max(diagonal, 0)
        if self.ndim == 1:
            n = self.shape[0]
            size = n + abs(diagonal)
            where = _normalize_index((np.arange(n) + first_row, np.arange(n) + first_col))
            return fn.SetItem.apply(self.new_zeros(size, size), self, where)
        if self.ndim == 2:
            n = max(min(self.shape[0] - first_row, self.shape[1] - first_col), 0)
            return self[np.arange(n) + first_row, np.arange(n) + first_col]
        raise RuntimeError(f"diag(): expected a 1-d or 2-d tensor, got shape {self.shape}")

    def t(self: Tensor) -> Tensor:
        """The transpose of a matrix (a 0-d or 1-d tensor is returned as it is)."""
        if self.ndim > 2:
            raise ValueError(
                f"t() expects a tensor of at most 2 dimensions, got shape {self.shape}; use "
                ".transpose(dim0, dim1) or .mT"
            )
        return self if self.ndim < 2 else self.transpose(0, 1)

    def view_as(self: Tensor, other: Tensor) -> Tensor:
        return self.view(other.shape)

    def reshape_as(self: Tensor, other: Tensor) -> Tensor:
        return self.reshape(other.shape)

    def expand_as(self: Tensor, other: Tensor) -> Tensor:
        return self.expand(other.shape)

    # ---------------------------------------------------------------- indexing and sorting
    def __getitem__(self: Tensor, index: Any) -> Tensor:
        return fn.GetItem.apply(self, _normalize_index(index))

    def gather(self: Tensor, dim: int, index: Tensor) -> Tensor:
        """The elements at ``index`` along ``dim`` (see :func:`torchlight.ops.indexing.gather`)."""
        return indexing.gather(self, dim, index)

    def scatter(self: Tensor, dim: int, index: Tensor, src: Any) -> Tensor:
        """A copy with ``src`` written at ``index`` along ``dim``."""
        return indexing.scatter(self, dim, index, src)

    def scatter_add(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """A copy with ``src`` added at ``index`` along ``dim`` (repeats add up)."""
        return indexing.scatter_add(self, dim, index, src)

    def index_select(self: Tensor, dim: int, index: Tensor) -> Tensor:
        """The slices along ``dim`` at the positions in the 1-D ``index``."""
        return indexing.index_select(self, dim, index)

    def masked_fill(self: Tensor, mask: Tensor, value: Any) -> Tensor:
        """A copy with ``value`` where ``mask`` is true."""
        return indexing.masked_fill(self, mask, value)

    def sort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Sort:
        """``(values, indices)`` sorted along ``dim`` (always stable here)."""
        return indexing.sort(self, dim, descending)

    def unique(
        self: Tensor,
        sorted: bool = True,  # noqa: A002
        return_inverse: bool = False,
        return_counts: bool = False,
        dim: int | None = None,
    ) -> Any:
        """The distinct elements, sorted (``torch.unique``; no gradient), with the index of each
        element among them (``return_inverse``) and how often each occurs (``return_counts``)."""
        if dim is not None:
            raise NotImplementedError("unique(dim=...): torchlight finds unique elements only")
        values, inverse, counts = np.unique(_host(self), return_inverse=True, return_counts=True)
        out = [self._lift(values).to(self.dtype)]
        if return_inverse:
            out.append(self._lift(inverse.reshape(self.shape).astype(np.int64)))
        if return_counts:
            out.append(self._lift(counts.astype(np.int64)))
        return out[0] if len(out) == 1 else tuple(out)

    def argsort(
        self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False
    ) -> Tensor:
        """The indices that sort along ``dim`` (always stable here)."""
        return indexing.argsort(self, dim, descending)

    def topk(
        self: Tensor,
        k: int,
        dim: int = -1,
        largest: bool = True,
        sorted: bool = True,  # noqa: A002
    ) -> TopK:
        """``(values, indices)`` of the ``k`` largest along ``dim`` (always sorted here)."""
        return indexing.topk(self, k, dim, largest)

    # ---------------------------------------------------------------- in place
    # Outside the graph (inside ``no_grad``, as optimizers update, or on tensors nobody records)
    # an in-place op just writes into the storage. In the graph it is recorded as PyTorch does:
    # ``y.add_(1)`` computes ``Add(y_before, 1)`` and ``y`` takes that node as its history, with
    # ``y_before`` (a copy of the old values) as its first input. Earlier users of ``y`` still
    # send their gradients to ``y_before`` (see ``History.recorded_parents``), and a Function that
    # saved ``y`` itself finds its version changed and raises.
    def _records_in_place(self: Tensor, other: Any, what: str) -> bool:
        """Whether an in-place op on ``self`` (with tensor ``other``) goes into the graph."""
        if not _GradMode.enabled:
            return False
        if self.requires_grad and self.history is None:
            symbol = _SYMBOLS.get(what.split("(")[-1].rstrip(")"))  # "-= (sub_)": "-"
            instead = f", or use an out-of-place op (x = x {symbol} y)" if symbol else ""
            raise RuntimeError(
                f"{what}: in-place operation on a leaf tensor that requires grad. Autograd "
                "would lose track of the old values; wrap the update in `with tl.no_grad():` "
                f"(as optimizers do){instead}."
            )
        return self.requires_grad or bool(getattr(other, "requires_grad", False))

    def _rebase(self: Tensor, function: Any, *args: Any, what: str) -> Tensor:
        """Record ``self = function(self, *args)`` in the graph and write the result in place."""
        if self.history is not None and getattr(self.history.last_fn, "makes_view", False):
            raise RuntimeError(
                f"{what}: in-place operation on a view ({self.history.last_fn.__name__}) of a "
                "tensor in the graph is not supported; change a .clone() of it instead"
            )
        before = self._new(self.backend.map("copy", self.storage))  # the old values
        before.history = self.history
        before.requires_grad = self.requires_grad
        result = function.apply(before, *args)
        if result.dtype.is_floating_point and not self.dtype.is_floating_point:
            raise _cannot_store(what, result, self)
        _setitem(self, (...,), result, what)
        self.history = result.history
        self.requires_grad = True
        return self

    def _write(self: Tensor, index: Any, value: Any, what: str) -> Tensor:
        """``self[index] = value`` (a number or a tensor), recorded when it must be."""
        if self._records_in_place(value, what):
            value = value if hasattr(value, "backend") else self._lift(value)
            return self._rebase(fn.SetItem, value.to(self.dtype), index, what=what)
        return _setitem(self, index, value, what)

    def _zip_(self: Tensor, op: str, other: Any, what: str) -> Tensor:
        """``self = self <op> other`` in place: the backend writes the result into this storage."""
        other = self._lift(other)
        if self._records_in_place(other, what):
            return self._rebase(_RECORDED[op], other, what=what)
        backend = self.backend
        a, b = self.storage, other.storage
        dtype = a.dtype
        if (
            dtype.kind != "f"
            or dtype != b.dtype
            or (
                other.shape != self.shape and broadcast_shape(self.shape, other.shape) != self.shape
            )
        ):
            result = self._zip(op, other)
            if result.dtype.is_floating_point and not self.dtype.is_floating_point:
                raise _cannot_store(what, result, self)
            return _setitem(self, (...,), result, what)  # casts and checks the shape
        self._check_backend(other, what)
        _check_writable(self, what)
        backend.zip(op, a, b, a)
        self._counter.value += 1
        return self

    def __setitem__(self: Tensor, index: Any, value: Any) -> None:
        self._write(_normalize_index(index), self._lift(value).to(self.dtype), "__setitem__")

    def copy_(self: Tensor, src: Any) -> Tensor:
        """Overwrite every element with ``src`` (broadcast to this shape)."""
        return self._write((...,), self._lift(src).to(self.dtype), "copy_")

    def fill_(self: Tensor, value: float) -> Tensor:
        return self._write((...,), value, "fill_")

    def zero_(self: Tensor) -> Tensor:
        return self._write((...,), 0, "zero_")

    def add_(self: Tensor, other: Any, alpha: float = 1.0) -> Tensor:
        r"""$x \leftarrow x + \alpha \cdot \mathrm{other}$, in place."""
        return self._add_(other, alpha, "add_")

    def _add_(self: Tensor, other: Any, alpha: float, what: str) -> Tensor:
        other = self._lift(other)
        if alpha != 1:
            other = other * alpha if other.requires_grad else other._zip("mul", self._lift(alpha))
        return self._zip_("add", other, what)

    def sub_(self: Tensor, other: Any, alpha: float = 1.0) -> Tensor:
        return self._add_(other, -alpha, "sub_")

    def mul_(self: Tensor, other: Any) -> Tensor:
        return self._zip_("mul", other, "mul_")

    def div_(self: Tensor, other: Any) -> Tensor:
        return self._zip_("div", other, "div_")

    # ``x += y`` is ``x.add_(y)``: the same tensor, changed in place (not a new one named x);
    # an error names both the operator and the method
    def __iadd__(self: Tensor, other: Any) -> Tensor:
        return self._add_(other, 1.0, "+= (add_)")

    def __isub__(self: Tensor, other: Any) -> Tensor:
        return self._add_(other, -1.0, "-= (sub_)")

    def __imul__(self: Tensor, other: Any) -> Tensor:
        return self._zip_("mul", other, "*= (mul_)")

    def __itruediv__(self: Tensor, other: Any) -> Tensor:
        return self._zip_("div", other, "/= (div_)")

    # The rest compute the out-of-place result and write it with ``copy_`` (``_in_place``),
    # so they follow the rules above.

    def clamp_(self: Tensor, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
        """:meth:`clamp` in place; returns ``self``."""
        return _in_place(self, lambda x: x.clamp(min, max))

    clip_ = clamp_

    def pow_(self: Tensor, exponent: Any) -> Tensor:
        r"""$x \leftarrow x^{\mathrm{exponent}}$ in place."""
        return _in_place(self, lambda x: x**exponent)

    def neg_(self: Tensor) -> Tensor:
        r"""$x \leftarrow -x$ in place."""
        return _in_place(self, lambda x: -x)

    def exp_(self: Tensor) -> Tensor:
        r"""$x \leftarrow e^x$ in place."""
        return _in_place(self, lambda x: x.exp())

    def masked_fill_(self: Tensor, mask: Tensor, value: Any) -> Tensor:
        """:meth:`masked_fill` in place."""
        return _in_place(self, lambda x: indexing.masked_fill(x, mask, value))

    def scatter_(self: Tensor, dim: int, index: Tensor, src: Any) -> Tensor:
        """:meth:`scatter` in place."""
        return _in_place(self, lambda x: indexing.scatter(x, dim, index, src))

    def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """:meth:`scatter_add` in place."""
        return _in_place(self, lambda x: indexing.scatter_add(x, dim, index, src))

    # ---------------------------------------------------------------- factories
    def new_tensor(
        self: Tensor, data: Any, dtype: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """A new leaf from ``data`` with this tensor's dtype (unless given) and backend."""
        from torchlight.creation import tensor

        return tensor(
            data, dtype=dtype or self.dtype, requires_grad=requires_grad, backend=self.backend
        )

    def new_zeros(
        self: Tensor, *size: Any, dtype: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """Zeros of ``size`` with this tensor's dtype (unless given) and backend."""
        return self.new_full(_size(size), 0, dtype=dtype, requires_grad=requires_grad)

    def new_ones(
        self: Tensor, *size: Any, dtype: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """Ones of ``size`` with this tensor's dtype (unless given) and backend."""
        return self.new_full(_size(size), 1, dtype=dtype, requires_grad=requires_grad)

    def new_full(
        self: Tensor,
        size: Sequence[int],
        fill_value: Any,
        dtype: Any = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """``fill_value`` everywhere in ``size``, with this tensor's dtype and backend."""
        from torchlight.creation import full

        return full(
            tuple(size), fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad,
            backend=self.backend,
        )  # fmt: skip


#: The Function that records each in-place arithmetic op in the graph.
_RECORDED = {"add": fn.Add, "sub": fn.Sub, "mul": fn.Mul, "div": fn.Div}
#: The operator of each in-place method, for the out-of-place form an error suggests.
_SYMBOLS = {"add_": "+", "sub_": "-", "mul_": "*", "div_": "/"}


def _setitem(self: Tensor, index: Any, value: Any, what: str) -> Tensor:
    """Write ``value`` into ``self[index]`` in the storage and count the change (no graph)."""
    if hasattr(value, "backend"):
        self._check_backend(value, what)
        value = value.storage
    _check_writable(self, what)
    self.backend.setitem(self.storage, index, value)
    self._counter.value += 1
    return self


class ExpandedViewWriteError(RuntimeError):
    """A write into an expanded view (``x.expand(...)``), where several elements share one
    memory location, so no value could be written to one of them alone."""


def _check_writable(self: Tensor, what: str) -> None:
    strides = self.stride()
    if 0 not in strides:  # the common case, told at once: no dimension repeats an element
        return
    if any(step == 0 and n > 1 for n, step in zip(self.shape, strides, strict=True)):
        raise ExpandedViewWriteError(_EXPANDED.format(what=what))


def _cannot_store(what: str, result: Tensor, self: Tensor) -> RuntimeError:
    return RuntimeError(
        f"{what}: the result has dtype {result.dtype}, which cannot be stored in place in this "
        f"{self.dtype} tensor; use an out-of-place op (x = x / 2) or convert first (x = x.double())"
    )


def _argreduce(self: Tensor, op: str, dim: int | None, keepdim: bool) -> Tensor:
    if dim is not None and self.ndim == 0:
        normalize_dim(dim, 0)  # (raises for a dim other than 0 or -1)
        return self._new(self.backend.from_numpy(np.zeros((), np.int64)))
    d = None if dim is None else normalize_dim(dim, self.ndim)
    return self._new(self.backend.argreduce(op, self.storage, d, keepdim))


def _max_or_min(self: Tensor, op: str, dim: Any, keepdim: bool) -> Any:
    if hasattr(dim, "backend"):  # x.max(other): elementwise
        return fn.Maximum.apply(self, dim) if op == "max" else fn.Minimum.apply(self, dim)
    if dim is None or not isinstance(dim, int):  # all dims, or a tuple of dims: the values
        return (fn.Max if op == "max" else fn.Min).apply(self, _dims(self, dim), keepdim)
    indices = _argreduce(self, op, dim, keepdim=True)
    if self.ndim == 0:
        return ValuesIndices(self[()], indices)
    d = normalize_dim(dim, self.ndim)
    if _GradMode.enabled and self.requires_grad:
        # Pick each index's element (an open grid over the other dims, the indices along d),
        # so the gradient goes to that element only, as in PyTorch.
        grid = list(np.ix_(*(np.arange(n) for n in indices.shape)))
        grid[d] = indices.backend.to_numpy(indices.storage)
        values = self[tuple(grid)]
    else:  # no gradient to route: the reduction gives the same values
        values = (fn.Max if op == "max" else fn.Min).apply(self, (d,), True)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return ValuesIndices(values, indices)


def _infer_shape(self: Tensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    numel = self.numel()
    if -1 in shape:
        if shape.count(-1) > 1:
            raise ValueError(f"only one dimension can be -1, got {shape}")
        rest = math.prod([s for s in shape if s != -1])
        if rest == 0 or numel % rest:
            raise ValueError(
                f"shape {shape} is invalid for a tensor of {numel} elements {self.shape}"
            )
        shape = tuple([numel // rest if s == -1 else s for s in shape])
    if math.prod(shape) != numel:
        raise ValueError(
            f"shape {shape} is invalid for a tensor of {numel} elements (shape {self.shape})"
        )
    return shape


def _normalize_index(index: Any) -> tuple[Any, ...]:
    """Turn any index into a tuple numpy understands: tensors and lists become arrays."""
    if not isinstance(index, tuple):
        index = (index,)
    out: list[Any] = []
    for item in index:
        if hasattr(item, "backend"):  # a Tensor of indices or a mask
            if item.dtype.is_floating_point:
                raise IndexError(
                    f"tensors used as indices must be integer or bool, got {item.dtype}"
                )
            item = item.backend.to_numpy(item.storage)
        elif isinstance(item, list):
            item = np.asarray(item)
        elif isinstance(item, np.ndarray) and item.dtype.kind == "f":
            raise IndexError("arrays used as indices must be integer or bool, got floats")
        out.append(item)
    return tuple(out)


def _in_place(self: Tensor, compute: Callable[[Tensor], Tensor]) -> Tensor:
    """Write ``compute(self)`` into ``self`` with ``copy_``.

    In the graph, ``compute`` runs on a copy of ``self``: its Function may save its input for
    backward (``clamp`` does), and the write must not change what was saved (PyTorch keeps the
    original values of an in-place op's input the same way). Under ``no_grad`` nothing is saved,
    so nothing is copied.
    """
    source = self.clone() if self.requires_grad and is_grad_enabled() else self
    return self.copy_(compute(source))


def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], Sequence):
        return tuple(size[0])
    return tuple(size)


def _host(x: Tensor) -> np.ndarray:
    return np.asarray(x.backend.to_numpy(x.storage))


def _no_bool_subtraction(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    if a.dtype is dtypes.bool_ and b.dtype is dtypes.bool_:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported (as in "
            "PyTorch). Use the `^` or `logical_xor()` operator instead."
        )
    return a, b


def _true_division(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """``/`` of two integer (or bool) tensors gives the default dtype, as PyTorch's (numpy's
    would be float64 whatever the default)."""
    if a.dtype.is_floating_point or b.dtype.is_floating_point:
        return a, b
    return a.to(dtypes.get_default_dtype()), b


def _integer_op(a: Tensor, b: Tensor, op: Callable[..., Any], name: str) -> Tensor:
    """``%`` and ``//`` of integer tensors, computed on the host (integers carry no gradient)."""
    divisor = _host(b)
    if (divisor == 0).any():
        raise RuntimeError(f"ZeroDivisionError: {name} of integer tensors by zero (as in PyTorch)")
    return a._lift(op(_host(a), divisor))
