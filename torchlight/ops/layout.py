r"""Layout ops PyTorch users reach for, as compositions of the layout Functions.

Splitting is slicing (``GetItem``), ``repeat`` is ``expand`` + ``reshape``, ``flip`` is a slice
with step -1, ``roll`` is two slices joined by ``cat``, ``tril``/``triu`` are ``where`` with a
constant mask. So none needs a backward of its own: each gradient comes from the Functions it
is made of. The Tensor methods (``x.chunk(2)``...) live in :mod:`torchlight.tensor_methods`.

Example:
    >>> import torchlight as tl
    >>> x = tl.arange(6.0).reshape(2, 3)
    >>> [p.shape for p in x.split([1, 2], dim=1)]
    [(2, 1), (2, 2)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from torchlight.ops import arithmetic as fn
from torchlight.shape import normalize_dim

if TYPE_CHECKING:
    from torchlight.tensor import Tensor


def _along(x: Tensor, dim: int, index: slice | int) -> tuple[slice | int, ...]:
    """An index that applies ``index`` to dimension ``dim`` and takes everything else."""
    return (slice(None),) * dim + (index,)


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """``length`` elements of dimension ``dim`` from ``start`` on (a view)."""
    d = normalize_dim(dim, x.ndim)
    size = x.shape[d]
    begin = start + size if start < 0 else start
    if not 0 <= begin <= size or length < 0 or begin + length > size:
        raise IndexError(
            f"narrow: start {start} and length {length} do not fit in dimension {d} of size "
            f"{size}; need 0 <= start and start + length <= {size}"
        )
    return x[_along(x, d, slice(begin, begin + length))]


def split(
    x: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0
) -> tuple[Tensor, ...]:
    """Pieces of ``split_size`` along ``dim`` (the last may be smaller), or of the listed sizes."""
    d = normalize_dim(dim, x.ndim)
    size = x.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split: split_size must be positive, got {step}")
        sizes = [min(step, size - start) for start in range(0, size, step)] or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != size or any(s < 0 for s in sizes):
            raise ValueError(
                f"split: the sizes {sizes} must be non-negative and add up to {size}, the size "
                f"of dimension {d}"
            )
    pieces, start = [], 0
    for length in sizes:
        pieces.append(narrow(x, d, start, length))
        start += length
    return tuple(pieces)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most ``chunks`` pieces of equal size along ``dim`` (the last may be smaller)."""
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    size = x.shape[normalize_dim(dim, x.ndim)]
    return split(x, max(-(-size // chunks), 1), dim)  # ceil(size / chunks)


def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """Every slice along ``dim``, with that dimension removed: ``x.unbind(0) == tuple(x)``."""
    d = normalize_dim(dim, x.ndim)
    return tuple(x[_along(x, d, i)] for i in range(x.shape[d]))


def movedim(x: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    """Move dimension(s) ``source`` to position(s) ``destination``; the others keep their order."""
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim: {len(src)} source dims but {len(dst)} destination dims")
    src = [normalize_dim(s, x.ndim) for s in src]
    dst = [normalize_dim(d, x.ndim) for d in dst]
    rest = iter(d for d in range(x.ndim) if d not in src)
    placed = dict(zip(dst, src, strict=True))
    return x.permute(*[placed[p] if p in placed else next(rest) for p in range(x.ndim)])


def flip(x: Tensor, dims: int | Sequence[int]) -> Tensor:
    """Reverse the order of the elements along ``dims``."""
    wanted = {normalize_dim(d, x.ndim) for d in ([dims] if isinstance(dims, int) else dims)}
    return x[tuple(slice(None, None, -1) if d in wanted else slice(None) for d in range(x.ndim))]


def roll(x: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
    """Shift elements along ``dims`` by ``shifts``, wrapping around (flattened when no ``dims``)."""
    if dims is None:
        return roll(x.flatten(), shifts, 0).reshape(x.shape)
    shift_list = [shifts] if isinstance(shifts, int) else list(shifts)
    dim_list = [dims] if isinstance(dims, int) else list(dims)
    if len(shift_list) != len(dim_list):
        raise ValueError(f"roll: {len(shift_list)} shifts but {len(dim_list)} dims")
    out = x
    for shift, dim in zip(shift_list, dim_list, strict=True):
        d = normalize_dim(dim, x.ndim)
        size = x.shape[d]
        if size == 0 or shift % size == 0:
            continue
        cut = size - shift % size  # the last (shift % size) elements move to the front
        out = fn.Cat.apply(narrow(out, d, cut, size - cut), narrow(out, d, 0, cut), d)
    return out


def repeat(x: Tensor, sizes: Sequence[int]) -> Tensor:
    """Tile ``x``: ``sizes[i]`` copies along dimension ``i`` (leading sizes add dimensions)."""
    if len(sizes) < x.ndim:
        raise ValueError(
            f"repeat: got {len(sizes)} sizes for a {x.ndim}-d tensor; give at least one per "
            "dimension"
        )
    shape = (1,) * (len(sizes) - x.ndim) + x.shape
    # (n,) -> (1, n) -> (r, n) -> (r * n,): a new size-1 dim before each, expanded, merged
    interleaved = x.reshape(tuple(s for n in shape for s in (1, n)))
    expanded = interleaved.expand(
        tuple(s for r, n in zip(sizes, shape, strict=True) for s in (r, n))
    )
    return expanded.reshape(tuple(r * n for r, n in zip(sizes, shape, strict=True)))


def _triangle(x: Tensor, diagonal: int, lower: bool, name: str) -> Tensor:
    if x.ndim < 2:
        raise ValueError(f"{name} needs a tensor of at least 2 dimensions, got shape {x.shape}")
    rows, cols = x.shape[-2:]
    below = np.tri(rows, cols, diagonal, dtype=bool)  # [j - i <= diagonal]
    keep = below if lower else ~np.tri(rows, cols, diagonal - 1, dtype=bool)
    # where, not a multiplication by the mask: inf * 0 would be nan, PyTorch gives 0.
    return fn.Where.apply(x.new_tensor(keep, dtype=bool), x, x.new_zeros(()))


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (``j - i <= diagonal``); zeros above it."""
    return _triangle(x, diagonal, True, "tril")


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (``j - i >= diagonal``); zeros below it."""
    return _triangle(x, diagonal, False, "triu")
