r"""Indexing ops: ``gather``, ``scatter``/``scatter_add``, ``index_select``, ``masked_fill``,
and the sorting family ``sort``, ``argsort``, ``topk``, ``median``.

``gather`` and ``index_select`` are integer-array indexing (``GetItem``, whose backward adds the
gradient back where each element came from); ``scatter_add`` is its mirror, :class:`IndexAdd`;
``masked_fill`` is ``where``. Sorting decides *which* elements go where on the host (numpy's
stable argsort: a documented shortcut, as ``argmax`` on the GPU backend) and then gathers them
on the tensor's backend, so the values stay in the graph and the gradient flows back to the
elements picked.

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([[1.0, 5.0, 3.0]], requires_grad=True)
    >>> values, indices = x.topk(2)
    >>> values.sum().backward(); indices, x.grad
    (tensor([[1, 2]]), tensor([[0., 1., 1.]]))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from torchlight import dtypes
from torchlight.autograd import Context, Function
from torchlight.ops import arithmetic as fn
from torchlight.return_types import Median, Sort, TopK
from torchlight.shape import broadcast_shape, normalize_dim

if TYPE_CHECKING:
    from torchlight.tensor import Tensor


class IndexAdd(Function):
    r"""Zeros of ``shape`` with ``src`` added at ``index`` (repeated positions add up).

    The mirror of ``GetItem`` (``x[index]``): each is the other's backward.
    """

    @staticmethod
    def forward(
        ctx: Context, src: Tensor, shape: tuple[int, ...], index: tuple[Any, ...]
    ) -> Tensor:
        ctx.index = index
        return src._index_add(shape, index)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output[ctx.index]


def _host_indices(index: Any, what: str) -> np.ndarray:
    """An integer index tensor's values as a numpy array (on the host)."""
    if (
        not hasattr(index, "backend")
        or index.dtype.is_floating_point
        or index.dtype is dtypes.bool_
    ):
        kind = index.dtype if hasattr(index, "dtype") else type(index).__name__
        raise TypeError(f"{what}: index must be an integer tensor (tl.int64), got {kind}")
    return np.asarray(index.detach().numpy())


def _positions(x: Tensor, dim: int, index: np.ndarray, what: str) -> tuple[np.ndarray, ...]:
    """The integer-array index that reads ``x[..., index[i, j, k], ...]`` with ``index`` along
    ``dim`` and each other dimension's own coordinate (``gather``'s rule)."""
    if index.ndim != x.ndim:
        raise ValueError(
            f"{what}: index has {index.ndim} dimensions but the tensor has {x.ndim}; they must "
            "have the same number"
        )
    for d, (n, size) in enumerate(zip(index.shape, x.shape, strict=True)):
        if d != dim and n > size:
            raise ValueError(
                f"{what}: index has shape {index.shape} but the tensor has shape {x.shape}; "
                f"index.size({d}) must be <= the tensor's for every dimension except dim {dim}"
            )
    if index.size and (index.min() < 0 or index.max() >= x.shape[dim]):
        raise IndexError(
            f"{what}: index values must be in [0, {x.shape[dim]}) along dimension {dim}, got "
            f"values from {index.min()} to {index.max()}"
        )
    grids: list[np.ndarray] = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


def _take(x: Tensor, dim: int, index: np.ndarray) -> Tensor:
    return x[_positions(x, dim, index, "gather")]


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    r"""$\mathrm{out}_{ijk} = x_{\mathrm{index}_{ijk},\,j,\,k}$ for ``dim`` = 0 (likewise for others).

    Shape: ``index`` has as many dims as ``x``; the output has ``index``'s shape.
    """
    if x.ndim == 0:
        return gather(x.reshape(1), 0, index.reshape(1)).reshape(())
    d = normalize_dim(dim, x.ndim)
    return x[_positions(x, d, _host_indices(index, "gather"), "gather")]


def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    r"""A copy of ``x`` with ``src[i, j, k]`` added at ``[index[i, j, k], j, k]`` (``dim`` = 0)."""
    d = normalize_dim(dim, x.ndim)
    positions = _positions(x, d, _host_indices(index, "scatter_add"), "scatter_add")
    part = src.to(x.dtype)[tuple(slice(0, n) for n in positions[d].shape)]
    return x + IndexAdd.apply(part, x.shape, positions)


def scatter(x: Tensor, dim: int, index: Tensor, src: Any) -> Tensor:
    r"""A copy of ``x`` with ``src[i, j, k]`` written at ``[index[i, j, k], j, k]`` (``dim`` = 0).

    ``src`` may be a number. Where several elements go to one position, the last one wins
    (PyTorch leaves that case unspecified).
    """
    d = normalize_dim(dim, x.ndim)
    host = _host_indices(index, "scatter")
    positions = _positions(x, d, host, "scatter")
    if hasattr(src, "backend"):
        part = src.to(x.dtype)[tuple(slice(0, n) for n in host.shape)]
    else:
        part = x.new_full(host.shape, src)
    flat = np.ravel_multi_index(np.broadcast_arrays(*positions), x.shape).ravel()
    _, last_from_end = np.unique(flat[::-1], return_index=True)
    wins = np.zeros(flat.size, dtype=bool)
    wins[flat.size - 1 - last_from_end] = True  # the last element sent to each position
    hit = np.zeros(x.shape, dtype=bool)
    hit[positions] = True
    losers = part.new_tensor(~wins.reshape(host.shape), dtype=dtypes.bool_)
    placed = IndexAdd.apply(masked_fill(part, losers, 0.0), x.shape, positions)
    return fn.Where.apply(x.new_tensor(hit, dtype=dtypes.bool_), placed, x)


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of ``x`` along ``dim`` at the positions in the 1-D ``index`` (repeats allowed)."""
    d = normalize_dim(dim, x.ndim)
    host = _host_indices(index, "index_select")
    if host.ndim > 1:
        raise ValueError(f"index_select: index must be 1-D, got shape {host.shape}")
    return x[(slice(None),) * d + (host.reshape(-1),)]


def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """A copy of ``x`` with ``value`` where the bool ``mask`` (broadcast to ``x``) is true."""
    if not hasattr(mask, "backend") or mask.dtype is not dtypes.bool_:
        got = mask.dtype if hasattr(mask, "dtype") else type(mask).__name__
        raise TypeError(f"masked_fill: mask must be a bool tensor (e.g. x > 0), got {got}")
    if broadcast_shape(mask.shape, x.shape) != x.shape:
        raise ValueError(
            f"masked_fill: the mask of shape {mask.shape} must broadcast to the tensor's shape "
            f"{x.shape}"
        )
    fill = value if hasattr(value, "backend") else x.new_tensor(value)
    if fill.ndim != 0:
        raise ValueError(f"masked_fill: value must be a number or a 0-d tensor, got {fill.shape}")
    return fn.Where.apply(mask, fill.to(x.dtype), x)


def _argsort(values: np.ndarray, dim: int, descending: bool) -> np.ndarray:
    """Stable argsort along ``dim``; ``nan`` counts as the largest value, as in PyTorch."""
    if not descending:
        return np.argsort(values, axis=dim, kind="stable")
    # Sort the reversed array ascending and reverse the result: descending, nan first, and
    # equal values keep their original order.
    size = values.shape[dim]
    return size - 1 - np.flip(np.argsort(np.flip(values, dim), axis=dim, kind="stable"), dim)


def _host_values(x: Tensor) -> np.ndarray:
    return np.asarray(x.detach().numpy())


def argsort(x: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
    """The indices that sort ``x`` along ``dim`` (a stable sort; an int64 tensor, no gradient)."""
    if x.ndim == 0:
        return x.new_zeros((), dtype=dtypes.int64)
    d = normalize_dim(dim, x.ndim)
    return x.new_tensor(_argsort(_host_values(x), d, descending), dtype=dtypes.int64)


def sort(x: Tensor, dim: int = -1, descending: bool = False) -> Sort:
    """``(values, indices)``: ``x`` sorted along ``dim``, and where each value came from."""
    if x.ndim == 0:
        return Sort(x.clone(), x.new_zeros((), dtype=dtypes.int64))
    d = normalize_dim(dim, x.ndim)
    order = _argsort(_host_values(x), d, descending)
    return Sort(_take(x, d, order), x.new_tensor(order, dtype=dtypes.int64))


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True) -> TopK:
    """``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) along ``dim``,
    in order."""
    d = normalize_dim(dim, max(x.ndim, 1))
    size = x.shape[d] if x.ndim else 1
    if not 0 <= k <= size:
        raise ValueError(f"topk: k must be in [0, {size}] (the size of dimension {d}), got {k}")
    if x.ndim == 0:
        return TopK(x.clone(), x.new_zeros((), dtype=dtypes.int64))
    order = _argsort(_host_values(x), d, descending=largest)
    order = np.take(order, np.arange(k), axis=d)
    return TopK(_take(x, d, order), x.new_tensor(order, dtype=dtypes.int64))


def median(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower median (for an even count, the smaller of the two middle values, as PyTorch).

    Without ``dim``: of all elements, a 0-d tensor. With ``dim``: ``(values, indices)`` along
    it. A ``nan`` in a row makes that row's median ``nan``. The gradient goes to the median.
    """
    if dim is None:
        return median(x.reshape(-1), 0).values
    d = normalize_dim(dim, max(x.ndim, 1))
    if x.ndim == 0:
        return Median(x.clone(), x.new_zeros((), dtype=dtypes.int64))
    size = x.shape[d]
    if size == 0:
        raise IndexError(f"median: dimension {d} is empty (shape {x.shape}); there is no median")
    host = _host_values(x)
    has_nan = (host != host).any(axis=d, keepdims=True)
    middle = np.where(has_nan, size - 1, (size - 1) // 2)  # nan sorts last
    picked = np.take_along_axis(_argsort(host, d, False), middle, axis=d)
    values, indices = _take(x, d, picked), x.new_tensor(picked, dtype=dtypes.int64)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return Median(values, indices)
