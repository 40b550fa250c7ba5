"""Shapes and strides: how an n-dimensional index finds its element in flat storage.

A tensor's elements live in one flat buffer. ``strides[d]`` says how many elements to skip to
move one step along dimension ``d``; so the element at index ``(i, j)`` lives at
``offset + i * strides[0] + j * strides[1]``. Views (transpose, expand, slicing) only change
shape, strides and offset -- never the buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Shape = tuple[int, ...]
Strides = tuple[int, ...]


def strides_from_shape(shape: Sequence[int]) -> Strides:
    r"""Row-major (C-contiguous) strides: $s_{n-1} = 1,\ s_d = s_{d+1} \cdot n_{d+1}$.

    Example:
        >>> from torchlight.shape import strides_from_shape
        >>> strides_from_shape((2, 3, 4))
        (12, 4, 1)
    """
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def index_to_position(index: Sequence[int], strides: Sequence[int], offset: int = 0) -> int:
    r"""Position in flat storage: $\mathrm{offset} + \sum_d \mathrm{index}_d \cdot s_d$.

    Example:
        >>> from torchlight.shape import index_to_position
        >>> index_to_position((1, 2), (3, 1))
        5
    """
    position = offset
    for i, s in zip(index, strides, strict=True):
        position += i * s
    return position


def to_index(ordinal: int, shape: Sequence[int]) -> list[int]:
    """The multi-index of the ``ordinal``-th element in row-major order (inverse of counting).

    Example:
        >>> from torchlight.shape import to_index
        >>> to_index(5, (2, 3))
        [1, 2]
    """
    index = [0] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        index[d] = ordinal % shape[d]
        ordinal //= shape[d]
    return index


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> Shape:
    """The shape two broadcast operands produce (numpy/PyTorch rules, aligned on the right).

    Raises:
        ValueError: naming both shapes and the first dimension that does not match.

    Example:
        >>> from torchlight.shape import broadcast_shape
        >>> broadcast_shape((3, 1), (4,))
        (3, 4)
    """
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for d, (x, y) in enumerate(zip(pa, pb, strict=True)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError(
                f"shapes {tuple(a)} and {tuple(b)} cannot be broadcast together: dimension "
                f"{d - n} is {x} in the first and {y} in the second (each must match or be 1)"
            )
    return tuple(out)


def broadcast_index(
    big_index: Sequence[int], big_shape: Sequence[int], shape: Sequence[int]
) -> list[int]:
    """Map an index into the broadcast result back to an index into a smaller operand.

    Dimensions of size 1 in ``shape`` always read index 0; missing leading dimensions are dropped.

    Example:
        >>> from torchlight.shape import broadcast_index
        >>> broadcast_index((2, 3), (4, 5), (5,))
        [3]
        >>> broadcast_index((2, 3), (4, 5), (4, 1))
        [2, 0]
    """
    lead = len(big_shape) - len(shape)
    return [0 if size == 1 else big_index[lead + d] for d, size in enumerate(shape)]


def permute(
    shape: Sequence[int], strides: Sequence[int], dims: Sequence[int]
) -> tuple[Shape, Strides]:
    """Shape and strides of a permuted view: reorder both, the storage is untouched.

    Example:
        >>> from torchlight.shape import permute
        >>> permute((2, 3), (3, 1), (1, 0))
        ((3, 2), (1, 3))
    """
    if sorted(dims) != list(range(len(shape))):
        raise ValueError(
            f"permute needs each dimension 0..{len(shape) - 1} exactly once, got {tuple(dims)}"
        )
    return tuple(shape[d] for d in dims), tuple(strides[d] for d in dims)


def normalize_dim(dim: int, ndim: int, what: str = "dim") -> int:
    """``dim`` as a non-negative axis of an ``ndim``-dimensional tensor (negative counts back).

    Raises:
        IndexError: naming the valid range.
    """
    lo, hi = (-ndim, ndim - 1) if ndim > 0 else (-1, 0)
    if not lo <= dim <= hi:
        raise IndexError(
            f"{what} {dim} is out of range for a {ndim}-d tensor (expected {lo}..{hi})"
        )
    return dim % max(ndim, 1)


def broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    """Whether an operand of ``shape`` broadcasts to exactly ``target``.

    Example:
        >>> from torchlight.shape import broadcasts_to
        >>> broadcasts_to((3, 1), (2, 3, 4)), broadcasts_to((3,), (3, 4))
        (True, False)
    """
    try:
        return broadcast_shape(shape, target) == tuple(target)
    except ValueError:
        return False


def sum_to_shape_dims(
    big_shape: Sequence[int], shape: Sequence[int]
) -> tuple[tuple[int, ...], int]:
    """Which dims of a broadcast gradient to sum to get back to ``shape``.

    Returns ``(dims, lead)``: sum over ``dims`` with keepdim, then drop the ``lead`` leading dims.

    Example:
        >>> from torchlight.shape import sum_to_shape_dims
        >>> sum_to_shape_dims((2, 3, 4), (3, 1))
        ((0, 2), 1)
    """
    lead = len(big_shape) - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + d for d, size in enumerate(shape) if size == 1 and big_shape[lead + d] != 1
    )
    return dims, lead


def unbroadcast(grad: Any, shape: Sequence[int]) -> Any:
    r"""Sum a gradient of a broadcast result back to the ``shape`` of the operand.

    Broadcasting copied the operand along some dimensions, so each copy's gradient adds up
    ($\partial L/\partial x = \sum_{\text{copies}} \partial L/\partial x_{\text{copy}}$): sum over the
    dims broadcasting added or stretched from 1, then drop the added leading ones.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.shape import unbroadcast
        >>> unbroadcast(tl.ones(2, 3), (3,))
        tensor([2., 2., 2.])
    """
    dims, _ = sum_to_shape_dims(grad.shape, shape)
    return grad.sum(dims, keepdim=True).reshape(tuple(shape))


def reduced_shape(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> Shape:
    """The shape of a reduction of ``shape`` over ``dims``: those dims become 1 (``keepdim``)
    or disappear.

    Example:
        >>> from torchlight.shape import reduced_shape
        >>> reduced_shape((2, 3, 4), (1,), True), reduced_shape((2, 3, 4), (1,), False)
        ((2, 1, 4), (2, 4))
    """
    if keepdim:
        return tuple(1 if d in dims else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in dims)
