# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 2b: The strided tensor
#
# A tensor's elements live in one flat buffer. Three small tuples say where each element is:
# `shape`, `strides` and `offset`. The element at index $(i_0, \ldots, i_{n-1})$ sits at
#
# $$\mathrm{position} = \mathrm{offset} + \sum_d i_d \cdot \mathrm{strides}_d .$$
#
# Every view is a new `(shape, strides, offset)` over the *same* buffer: a transpose swaps
# strides, a slice `x[1::2]` adds to the offset and doubles a stride, `expand` gives a
# broadcast dimension the stride 0. Nothing is copied, so the elements of a view are **not** in
# its buffer in order. Tutorial 1 (*storage + strides + views*) and Tutorial 4 (*the strided
# reference backend*) show it.
#
# Here you write the index arithmetic of `torchlight.shape` and the three loops of the strided
# backend, over `StridedStorage` (`a.buffer`, `a.shape`, `a.strides`, `a.offset`, `a.size`):
#
# 1. `index_to_position(index, strides, offset=0)` and `to_index(ordinal, shape)`;
# 2. `shape_broadcast(a, b)` and `broadcast_index(big_index, big_shape, shape)`;
# 3. `strided_map(fn, a)`, `strided_zip(fn, a, b)`, `strided_reduce(fn, a, dim, start)`;
#
# and then a small model runs on a backend built from your code.
#
# **How you are graded.** The hidden checks call your index functions on fresh random
# arguments (0-d shapes, dimensions of size 1, zero strides, offsets) and your loops on
# storages with every kind of layout a view makes: contiguous, permuted, sliced (an offset and a
# step), broadcast (stride 0), mixtures. Results are compared with numpy. While your loops are
# checked, your index functions are replaced by correct answers for that trial (so call them
# by these names: a mistake in one costs only its own item). The hidden checks' torchlight
# leaves out the library's own versions (`torchlight.shape`'s functions and the strided
# backend's `map`, `zip` and `reduce`): an answer that calls them scores nothing and is
# flagged for review. One that hands the work to numpy's own (`np.unravel_index`,
# `np.broadcast_shapes`, `as_strided`) is flagged for review too.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import numpy as np

import torchlight as tl
from torchlight.backends import scalar_ops
from torchlight.backends.strided.storage import StridedStorage, empty

tl.manual_seed(0)


def storage_of(array):
    """A StridedStorage holding a copy of a numpy array, contiguous."""
    return tl.tensor(np.asarray(array, dtype=np.float64), backend="strided").storage


def numpy_of(a):
    """What a storage holds, read in numpy from its buffer, shape, strides and offset."""
    flat = np.frombuffer(a.buffer, dtype=a.dtype)
    strides = [s * flat.itemsize for s in a.strides]
    return np.lib.stride_tricks.as_strided(flat[a.offset :], a.shape, strides).copy()


# %% [markdown] nbgrader={"grade": false, "grade_id": "index_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. From an index to a position, and from a count to an index
#
# `index_to_position(index, strides, offset=0)` is the formula above. `to_index(ordinal,
# shape)` is the `ordinal`-th index when the indices of `shape` are counted in row-major order
# (the last dimension moves fastest, as `np.unravel_index`): in shape `(2, 3)`, ordinal 4 is
# `[1, 1]`. Return a list; the 0-d shape `()` has one element, at index `[]`. Do not mutate
# your arguments.

# %% nbgrader={"grade": false, "grade_id": "index_to_position", "locked": false, "schema_version": 3, "solution": true}
def index_to_position(index, strides, offset=0):
    ### BEGIN SOLUTION
    position = offset
    for i, s in zip(index, strides):
        position += i * s
    return position
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_index_to_position", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert index_to_position([1, 2], (3, 1)) == 5
assert index_to_position([1, 2], (1, 2), offset=7) == 12  # a transposed view, from an offset
assert index_to_position([3, 2], (0, 1)) == 2  # a broadcast dimension: stride 0
assert index_to_position([], ()) == 0
print("index_to_position: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2b_strided", "test_index_to_position", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "to_index", "locked": false, "schema_version": 3, "solution": true}
def to_index(ordinal, shape):
    ### BEGIN SOLUTION
    index = [0] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        index[d] = ordinal % shape[d]
        ordinal //= shape[d]
    return index
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_to_index", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert to_index(4, (2, 3)) == [1, 1]
assert to_index(0, ()) == []
assert [to_index(k, (2, 1, 3)) for k in (2, 3, 5)] == [[0, 0, 2], [1, 0, 0], [1, 0, 2]]
for shape in [(4,), (2, 3, 4), (3, 1, 2)]:
    for k in range(math.prod(shape)):
        assert to_index(k, shape) == list(np.unravel_index(k, shape)), (k, shape)
print("to_index: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2b_strided", "test_to_index", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "broadcast_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. Broadcasting
#
# `shape_broadcast(a, b)` is the shape two operands broadcast to: align the shapes **on the
# right**, count a missing dimension as 1; each pair of sizes must match or one be 1. Return a
# tuple; raise a `ValueError` naming both shapes when they do not broadcast.
#
# `broadcast_index(big_index, big_shape, shape)` maps an index of the broadcast result back to
# an index of an operand of `shape`: drop the leading dimensions the operand does not have,
# and read index 0 along each dimension where the operand has size 1. Return a list.

# %% nbgrader={"grade": false, "grade_id": "shape_broadcast", "locked": false, "schema_version": 3, "solution": true}
def shape_broadcast(a, b):
    ### BEGIN SOLUTION
    n = max(len(a), len(b))
    padded_a = (1,) * (n - len(a)) + tuple(a)
    padded_b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(padded_a, padded_b):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"shapes {tuple(a)} and {tuple(b)} cannot be broadcast together")
        out.append(y if x == 1 else x)
    return tuple(out)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_shape_broadcast", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert shape_broadcast((3, 1), (4,)) == (3, 4)
assert shape_broadcast((2, 1, 5), (3, 1)) == (2, 3, 5)
assert shape_broadcast((), (2, 3)) == (2, 3)
try:
    shape_broadcast((2, 3), (4,))
except ValueError as error:
    print("as expected:", error)
else:
    raise AssertionError("(2, 3) and (4,) do not broadcast: raise a ValueError")
print("shape_broadcast: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2b_strided", "test_shape_broadcast", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "broadcast_index", "locked": false, "schema_version": 3, "solution": true}
def broadcast_index(big_index, big_shape, shape):
    ### BEGIN SOLUTION
    lead = len(big_shape) - len(shape)
    return [0 if size == 1 else big_index[lead + d] for d, size in enumerate(shape)]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_broadcast_index", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert broadcast_index([2, 3], (4, 5), (5,)) == [3]
assert broadcast_index([2, 3], (4, 5), (4, 1)) == [2, 0]
assert broadcast_index([1, 2, 3], (2, 3, 4), ()) == []
print("broadcast_index: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2b_strided", "test_broadcast_index", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "kernels_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. The loops: map, zip, reduce
#
# Each returns a **new contiguous** storage: `empty(shape, np.float64)` allocates one (zeros,
# row-major), whose element number `ordinal` is `out.buffer[ordinal]`. Read the inputs through
# their layouts: element `index` of `a` is `a.buffer[index_to_position(index, a.strides,
# a.offset)]`. Call `to_index`, `index_to_position`, `shape_broadcast` and `broadcast_index` by
# these names.
#
# - `strided_map(fn, a)`: `out[i] = fn(a[i])` for every index `i` of `a`;
# - `strided_zip(fn, a, b)`: `out[i] = fn(a[i'], b[i''])` over the broadcast shape, where `i'`
#   and `i''` are `i` broadcast back to each operand;
# - `strided_reduce(fn, a, dim, start)`: the output has `a`'s shape with `dim` of size 1;
#   element `j` starts from `start` and combines `acc = fn(acc, a[j with index[dim] = r])` for
#   `r = 0, 1, ...` along `dim` (`fn` is `+` with `start = 0`, `max` with `-inf`, ...).

# %% nbgrader={"grade": false, "grade_id": "strided_map", "locked": false, "schema_version": 3, "solution": true}
def strided_map(fn, a):
    ### BEGIN SOLUTION
    out = empty(a.shape, np.float64)
    for ordinal in range(out.size):
        index = to_index(ordinal, a.shape)
        out.buffer[ordinal] = fn(a.buffer[index_to_position(index, a.strides, a.offset)])
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_map", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = np.arange(24.0).reshape(2, 3, 4)
a = storage_of(x)
assert np.array_equal(numpy_of(strided_map(scalar_ops.neg, a)), -x)
t = tl.tensor(x, backend="strided").permute(2, 0, 1)[1:, :, ::2]  # a permuted, sliced view
assert t.storage.offset != 0 and t.storage.strides != (6, 3, 1)
assert np.array_equal(numpy_of(strided_map(scalar_ops.square, t.storage)), t.numpy() ** 2)
print("strided_map: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2b_strided", "test_map", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "strided_zip", "locked": false, "schema_version": 3, "solution": true}
def strided_zip(fn, a, b):
    ### BEGIN SOLUTION
    shape = shape_broadcast(a.shape, b.shape)
    out = empty(shape, np.float64)
    for ordinal in range(out.size):
        index = to_index(ordinal, shape)
        i_a, i_b = broadcast_index(index, shape, a.shape), broadcast_index(index, shape, b.shape)
        x = a.buffer[index_to_position(i_a, a.strides, a.offset)]
        y = b.buffer[index_to_position(i_b, b.strides, b.offset)]
        out.buffer[ordinal] = fn(x, y)
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_zip", "locked": true, "points": 2, "schema_version": 3, "solution": false}
x, y = np.arange(6.0).reshape(2, 3), np.array([10.0, 20.0, 30.0])
assert np.array_equal(numpy_of(strided_zip(scalar_ops.add, storage_of(x), storage_of(y))), x + y)
column = tl.tensor(np.arange(4.0).reshape(4, 1), backend="strided")
row = tl.tensor(np.arange(12.0).reshape(3, 4), backend="strided").T[::2]  # (2, 3), strided
out = strided_zip(scalar_ops.mul, column.storage, row.storage.restrided((2, 1, 3), (2, 0, 4), 0))
assert numpy_of(out).shape == (2, 4, 3)
assert np.array_equal(numpy_of(out), column.numpy() * row.numpy()[:, None, :])
print("strided_zip: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2b_strided", "test_zip", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "strided_reduce", "locked": false, "schema_version": 3, "solution": true}
def strided_reduce(fn, a, dim, start):
    ### BEGIN SOLUTION
    shape = tuple(1 if d == dim else n for d, n in enumerate(a.shape))
    out = empty(shape, np.float64)
    for ordinal in range(out.size):
        index = to_index(ordinal, shape)
        acc = start
        for r in range(a.shape[dim]):
            index[dim] = r
            acc = fn(acc, a.buffer[index_to_position(index, a.strides, a.offset)])
        out.buffer[ordinal] = acc
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_reduce", "locked": true, "points": 2, "schema_version": 3, "solution": false}
x = np.arange(24.0).reshape(2, 3, 4) - 30.0  # all negative
a = tl.tensor(x, backend="strided").permute(1, 2, 0).storage  # (3, 4, 2), not contiguous
for dim in range(3):
    got = numpy_of(strided_reduce(scalar_ops.add, a, dim, 0.0))
    assert np.array_equal(got, x.transpose(1, 2, 0).sum(axis=dim, keepdims=True)), dim
    got = numpy_of(strided_reduce(scalar_ops.maximum, a, dim, -math.inf))
    assert np.array_equal(got, x.transpose(1, 2, 0).max(axis=dim, keepdims=True)), dim
print("strided_reduce: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2b_strided", "test_reduce", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "backend_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. A backend built from your code
#
# The cell below makes a backend whose `map`, `zip` and `reduce` are your loops, and puts your
# index functions where the library's strided backend looks for them (so its `matmul`, its
# in-place writes and everything else run on your arithmetic too). Then it trains a logistic
# regression on two blobs, every operation of it on your code. It is not graded: it is what
# your functions are for.

# %% nbgrader={"grade": false, "grade_id": "your_backend", "locked": true, "schema_version": 3, "solution": false}
import torchlight.backends.strided.backend as strided_backend
import torchlight.backends.strided.storage as strided_storage
import torchlight.shape
from torchlight.backends.strided.backend import StridedBackend

START = {"sum": 0.0, "max": -math.inf, "min": math.inf}
REDUCE_FN = {"sum": "add", "max": "maximum", "min": "minimum"}


class YourStrided(StridedBackend):
    """The strided backend with your loops (the rest of it runs on your index functions)."""

    name = "your-strided"

    def map(self, op, a):
        return strided_map(scalar_ops.MAP[op], a)

    def zip(self, op, a, b, out=None):
        result = strided_zip(scalar_ops.ZIP[op], a, b)
        if out is None:
            return result
        self.setitem(out, (...,), result)
        return out

    def reduce(self, op, a, dims, keepdim):
        for dim in dims:
            a = strided_reduce(scalar_ops.ZIP[REDUCE_FN[op]], a, dim, START[op])
        if keepdim:
            return a
        shape = tuple(n for d, n in enumerate(a.shape) if d not in dims)
        return StridedStorage(a.buffer, shape, torchlight.shape.strides_from_shape(shape), 0, a.dtype)


def use_your_index_functions():
    yours = {"index_to_position": index_to_position, "to_index": to_index,
             "broadcast_index": broadcast_index, "broadcast_shape": shape_broadcast}  # fmt: skip
    for module in (torchlight.shape, strided_backend, strided_storage):
        for name, fn in yours.items():
            if hasattr(module, name):
                setattr(module, name, fn)


use_your_index_functions()
backend = YourStrided()
rng = np.random.default_rng(0)
X = rng.normal(0, 0.7, size=(24, 2)) + np.repeat([[1.0, 1.0], [-1.0, -1.0]], 12, axis=0)
y = np.repeat([1.0, 0.0], 12)
inputs, targets = tl.tensor(X, backend=backend), tl.tensor(y, backend=backend)
w = tl.tensor(np.zeros(2), backend=backend, requires_grad=True)
b = tl.tensor(0.0, backend=backend, requires_grad=True)
for step in range(15):
    probability = (inputs @ w + b).sigmoid()
    loss = ((probability - targets) ** 2).mean()
    w.grad = b.grad = None
    loss.backward()
    with tl.no_grad():
        w -= 2.0 * w.grad
        b -= 2.0 * b.grad
accuracy = np.mean((probability.detach().numpy() > 0.5) == (y > 0.5))
print(f"loss {loss.item():.4f}, training accuracy {accuracy:.2f}, on {type(w.storage).__name__}")
