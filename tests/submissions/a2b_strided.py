"""Submissions for assignment 2b (the strided tensor): the classic mistakes, each costing exactly
its item, and answers that reach for the library's (or numpy's) index arithmetic."""

from __future__ import annotations

from submissions.catalog import Submission, grouped, replace, substitute

A = "a2b_strided"

LIBRARY_TO_INDEX = """
import torchlight.shape


def to_index(ordinal, shape):
    return torchlight.shape.to_index(ordinal, shape)
"""

LIBRARY_CONTIGUOUS = '''
from torchlight.backends.strided.backend import StridedBackend


def strided_map(fn, a):
    """The library makes a contiguous copy (its own map), then one pass over the buffer."""
    flat = StridedBackend().contiguous(a)
    out = empty(a.shape, np.float64)
    for ordinal in range(out.size):
        out.buffer[ordinal] = fn(flat.buffer[flat.offset + ordinal])
    return out
'''

NUMPY_TO_INDEX = """
def to_index(ordinal, shape):
    return [int(i) for i in np.unravel_index(ordinal, shape)] if shape else []
"""

CATALOG = [
    Submission("solution", A, "solution", "solution"),
    Submission("release", A, "release", "release"),
    Submission(
        "offset-ignored",
        A,
        "mistake",
        "solution",
        (substitute("index_to_position", "    position = offset\n", "    position = 0\n"),),
        zero=("test_index_to_position",),
        note="a sliced view starts at its offset",
    ),
    Submission(
        "column-major",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "to_index", "for d in range(len(shape) - 1, -1, -1):", "for d in range(len(shape)):"
            ),
        ),
        zero=("test_to_index",),
        note="counts with the first dimension fastest",
    ),
    Submission(
        "aligned-on-the-left",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "shape_broadcast",
                "    padded_a = (1,) * (n - len(a)) + tuple(a)\n"
                "    padded_b = (1,) * (n - len(b)) + tuple(b)",
                "    padded_a = tuple(a) + (1,) * (n - len(a))\n"
                "    padded_b = tuple(b) + (1,) * (n - len(b))",
            ),
        ),
        zero=("test_shape_broadcast",),
        note="pads the shorter shape on the right",
    ),
    Submission(
        "size-one-not-zeroed",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "broadcast_index",
                "[0 if size == 1 else big_index[lead + d]",
                "[big_index[lead + d]",
            ),
        ),  # fmt: skip
        zero=("test_broadcast_index",),
        note="reads past a dimension of size 1",
    ),
    Submission(
        "map-reads-the-buffer-in-order",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "strided_map",
                "fn(a.buffer[index_to_position(index, a.strides, a.offset)])",
                "fn(a.buffer[ordinal])",
            ),
        ),
        zero=("test_map",),
        note="right for a contiguous storage only",
    ),
    Submission(
        "zip-without-broadcast-index",
        A,
        "mistake",
        "solution",
        (
            substitute(
                "strided_zip",
                "i_a, i_b = broadcast_index(index, shape, a.shape), "
                "broadcast_index(index, shape, b.shape)",
                "i_a, i_b = index[len(index) - len(a.shape) :], index[len(index) - len(b.shape) :]",
            ),
        ),
        zero=("test_zip",),
        note="a broadcast operand of size 1 is read past its end",
    ),
    Submission(
        "reduce-from-zero",
        A,
        "mistake",
        "solution",
        (substitute("strided_reduce", "        acc = start\n", "        acc = 0.0\n"),),
        zero=("test_reduce",),
        note="a maximum of negative numbers comes out 0",
    ),
    Submission(
        "library-to-index",
        A,
        "cheat",
        "solution",
        (replace("to_index", LIBRARY_TO_INDEX),),
        zero=("test_to_index",),
        fools_kernel=("test_to_index",),
        note="torchlight.shape.to_index",
    ),
    Submission(
        "library-contiguous",
        A,
        "cheat",
        "solution",
        (replace("strided_map", LIBRARY_CONTIGUOUS),),
        zero=("test_map",),
        fools_kernel=("test_map",),
        note="the library's contiguous() copies a view with its own map",
    ),
    Submission(
        "numpy-to-index",
        A,
        "cheat",
        "solution",
        (replace("to_index", NUMPY_TO_INDEX),),
        note="np.unravel_index: numpy's, not the library's: full marks, flagged for review",
    ),
]

#: Planted mistakes in answer cells of their own, each costing items of its own: the course suite
#: grades each group as one notebook (``catalog.grouped``; the assignments' README names them).
CATALOG = grouped(
    CATALOG,
    {
        "wrong-in-the-index-arithmetic": (
            "offset-ignored",
            "column-major",
            "aligned-on-the-left",
            "size-one-not-zeroed",
        ),
        "wrong-in-one-loop": (
            "map-reads-the-buffer-in-order",
            "zip-without-broadcast-index",
            "reduce-from-zero",
        ),
    },
)

#: Each cheat's finding in the integrity report.
FLAGGED = {
    "library-to-index": "reaches for the library's index arithmetic or strided loops (uses .to_index",
    "library-contiguous": "imports StridedBackend from torchlight.backends.strided.backend",
    "numpy-to-index": "uses .unravel_index",
}
