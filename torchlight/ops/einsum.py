r"""``einsum``: Einstein summation, built from ``permute``, ``reshape``, ``sum`` and ``matmul``.

``tl.einsum("ij,jk->ik", a, b)`` multiplies matrices; each letter names a dimension. A letter
that appears in the inputs but not after ``->`` is summed over. Operands are combined two at a
time: the letters both share and keep become a batch dimension, the letters both share and drop
are contracted by one batched ``matmul``, and each operand's own letters ride along as its rows
or columns. A letter repeated within one operand (``"ii->i"``) takes the diagonal. Without
``->``, the output has every letter used once, in alphabetical order (as in numpy and PyTorch).

Example:
    >>> import torchlight as tl
    >>> a = tl.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> tl.einsum("ij,ij->", a, a), tl.einsum("ii", a)
    (tensor(30.), tensor(5.))
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from torchlight.tensor import Tensor


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """Sum products of ``operands`` as ``equation`` says (see the module docstring)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    spec = equation.replace(" ", "")
    if "." in spec:
        raise ValueError(f"einsum: '...' (ellipsis) is not supported, got {equation!r}")
    inputs, arrow, output = spec.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ValueError(
            f"einsum: the equation {equation!r} names {len(terms)} operand(s) but "
            f"{len(operands)} tensor(s) were given"
        )
    counts = Counter("".join(terms))
    if not arrow:
        output = "".join(sorted(c for c, n in counts.items() if n == 1))
    sizes: dict[str, int] = {}
    for term, x in zip(terms, operands, strict=True):
        if len(term) != x.ndim or not term.isalpha():
            raise ValueError(
                f"einsum: the term {term!r} needs one letter per dimension of its operand, "
                f"which has shape {x.shape}"
            )
        for letter, size in zip(term, x.shape, strict=True):
            if sizes.setdefault(letter, size) != size:
                raise ValueError(
                    f"einsum: letter {letter!r} has size {sizes[letter]} in one place and "
                    f"{size} in another (shape {x.shape}); the sizes must match"
                )
    unknown = set(output) - set(sizes)
    if unknown or len(set(output)) != len(output):
        raise ValueError(f"einsum: the output {output!r} must use distinct letters of the inputs")
    pairs = [_diagonal(x, term) for x, term in zip(operands, terms, strict=True)]
    x, labels = pairs[0]
    for i, (y, y_labels) in enumerate(pairs[1:], start=1):
        later = set(output).union(*[set(t) for t in terms[i + 1 :]])
        x, labels = _contract(x, labels, y, y_labels, later)
    x, labels = _sum_out(x, labels, set(output))
    return x.permute(*[labels.index(c) for c in output]) if x.ndim > 1 else x


def _diagonal(x: Tensor, labels: str) -> tuple[Tensor, str]:
    """Take the diagonal for each letter that appears twice in one operand."""
    while len(set(labels)) != len(labels):
        letter = next(c for c in labels if labels.count(c) > 1)
        first, second = labels.index(letter), labels.index(letter, labels.index(letter) + 1)
        rest = [d for d in range(x.ndim) if d not in (first, second)]
        moved = x.permute(*rest, first, second)
        steps = np.arange(x.shape[first])
        x = moved[(slice(None),) * len(rest) + (steps, steps)]  # the diagonal ends up last
        labels = "".join(labels[d] for d in rest) + letter
    return x, labels


def _sum_out(x: Tensor, labels: str, keep: set[str]) -> tuple[Tensor, str]:
    dims = tuple(d for d, c in enumerate(labels) if c not in keep)
    if not dims:
        return x, labels
    return x.sum(dims), "".join(c for c in labels if c in keep)


def _contract(x: Tensor, xl: str, y: Tensor, yl: str, later: set[str]) -> tuple[Tensor, str]:
    """``x`` and ``y`` combined, keeping the letters in ``later`` (needed afterwards)."""
    x, xl = _sum_out(x, xl, later | set(yl))  # letters nobody needs any more
    y, yl = _sum_out(y, yl, later | set(xl))
    batch = [c for c in xl if c in yl and c in later]
    summed = [c for c in xl if c in yl and c not in later]
    rows = [c for c in xl if c not in yl]
    cols = [c for c in yl if c not in xl]

    def size(x: Tensor, labels: str, letters: list[str]) -> int:
        return math.prod(x.shape[labels.index(c)] for c in letters)

    a = x.permute(*[xl.index(c) for c in batch + rows + summed])
    b = y.permute(*[yl.index(c) for c in batch + summed + cols])
    a = a.reshape(size(x, xl, batch), size(x, xl, rows), size(x, xl, summed))
    b = b.reshape(size(y, yl, batch), size(y, yl, summed), size(y, yl, cols))
    shape = tuple(x.shape[xl.index(c)] for c in batch + rows)
    shape += tuple(y.shape[yl.index(c)] for c in cols)
    return (a @ b).reshape(shape), "".join(batch + rows + cols)
