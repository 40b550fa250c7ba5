# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python (torchlight)
#     language: python
#     name: torchlight
# ---

# %% [markdown]
# # Tutorial 1: Tensors
#
# A **tensor** is an n-dimensional array of numbers. Everything in deep learning -- images,
# weights, gradients -- is a tensor, so this is where torchlight starts.
#
# In this tutorial you will learn:
#
# 1. how to **create** tensors, and which **dtype** they get;
# 2. what a **shape** is, and how to change it;
# 3. how a tensor finds its elements in memory: **storage, strides and views**;
# 4. how **broadcasting** combines tensors of different shapes without copying;
# 5. how to **index** a tensor.
#
# torchlight uses PyTorch's names, so everything here carries over to PyTorch unchanged.

# %%
import numpy as np

import torchlight as tl

tl.manual_seed(0)  # random tensors below are the same on every run

# %% [markdown]
# ## 1. Creating tensors
#
# `tl.tensor` copies data from (nested) Python lists, numbers or numpy arrays:

# %%
tl.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])

# %% [markdown]
# The factories make tensors of a given shape. Each takes `dtype=` and `requires_grad=`
# (Tutorial 2 is about the second one):

# %%
print(tl.zeros(2, 3))
print(tl.ones(2, 2))
print(tl.full((2, 2), 7.0))
print(tl.eye(3))

# %%
print(tl.arange(5))  # 0, 1, ..., 4 (the end is excluded, as in Python's range)
print(tl.arange(1.0, 2.0, 0.25))
print(tl.linspace(0, 1, 5))  # 5 points, both ends included

# %% [markdown]
# Random tensors come from one generator, seeded by `tl.manual_seed`. Seeding makes an
# experiment repeatable: the same seed always draws the same numbers.

# %%
tl.manual_seed(42)
a = tl.rand(2, 3)  # uniform on [0, 1)
tl.manual_seed(42)
b = tl.rand(2, 3)
print(a)
print("same numbers after re-seeding:", (a == b).all().item())

# %%
tl.randn(4)  # standard normal: mean 0, standard deviation 1

# %% [markdown]
# `*_like` factories copy the shape (and dtype) of another tensor:

# %%
x = tl.tensor([[1.0, 2.0], [3.0, 4.0]])
print(tl.zeros_like(x))
print(tl.full_like(x, 0.5))

# %% [markdown]
# ## 2. Data types
#
# Every tensor has one **dtype** for all of its elements. Python floats become **float64**
# (torchlight's default, unlike PyTorch's float32: it makes gradient checks clean), Python ints
# become **int64**, and bools **bool**:

# %%
print(tl.tensor([1.0, 2.0]).dtype)
print(tl.tensor([1, 2]).dtype)
print(tl.tensor([True, False]).dtype)
print(tl.tensor([1.0, 2.0], dtype=tl.float32).dtype)

# %% [markdown]
# Convert with `.to(dtype)` (or the shortcuts `.float()`, `.double()`, `.long()`).
# float32 keeps about 7 significant decimal digits, float64 about 16 -- so `0.1`, which no
# binary float holds exactly, is off much sooner in float32:

# %%
print(tl.tensor(0.1, dtype=tl.float32).item())
print(tl.tensor(0.1, dtype=tl.float64).item())

# %% [markdown]
# When an operation mixes dtypes, the floating operand decides (as in PyTorch):
# int64 + float32 gives float32. Comparisons give bool tensors.

# %%
i = tl.tensor([1, 2])
f = tl.tensor([0.5, 0.5], dtype=tl.float32)
print(i + f)
print(i > 1)

# %% [markdown]
# ## 3. Shapes
#
# The **shape** lists the size of each dimension; `ndim` is how many dimensions there are;
# `numel()` is the number of elements (the product of the shape).

# %%
x = tl.arange(12)
print(x.shape, x.ndim, x.numel())
m = x.reshape(3, 4)
print(m)
print(m.shape, m.ndim, m.numel())

# %% [markdown]
# `reshape` keeps the elements in the same order and lays them out in the new shape; one size
# may be `-1`, meaning "whatever makes the count right". `unsqueeze` adds a dimension of size 1,
# `squeeze` removes them, `flatten` joins dimensions:

# %%
print(x.reshape(2, -1).shape)
print(m.unsqueeze(0).shape, m.unsqueeze(-1).shape)
print(m.unsqueeze(0).squeeze().shape)
print(tl.zeros(2, 3, 4).flatten(1).shape)

# %% [markdown]
# ## 4. Storage, strides and views
#
# A tensor's elements live in one flat block of memory, its **storage**. The shape alone does
# not say where element `m[i, j]` is; the **strides** do: `stride[d]` is how many elements to
# skip in storage to move one step along dimension `d`.
#
# $$\text{position of } m[i_0, i_1, \ldots] = \text{offset} + \sum_d i_d \cdot \text{stride}_d$$
#
# For a freshly made 3 x 4 tensor, moving down one row skips 4 elements, moving right skips 1:

# %%
m.stride()

# %% [markdown]
# `torchlight.shape` has these rules as small functions (the strided backend of Tutorial 4 is
# built from them). Each `assert` below checks them against the math:

# %%
from torchlight.shape import index_to_position, strides_from_shape, to_index

assert strides_from_shape((3, 4)) == (4, 1)
assert strides_from_shape((2, 3, 4)) == (12, 4, 1)
assert index_to_position((2, 1), (4, 1)) == 2 * 4 + 1 * 1 == 9
assert to_index(9, (3, 4)) == [2, 1]  # the inverse: the 9th element in row-major order
assert m[2, 1].item() == 9
print("all stride checks passed")

# %% [markdown]
# The cell below (its code is folded; click to expand it) defines `show_storage(view, storage)`,
# a picture of a tensor next to its storage: every element of the view is joined to the storage
# cell it reads, using `index_to_position` with the view's strides.

# %% jupyter={"source_hidden": true}
from itertools import product

from torchlight.viz import Picture  # an SVG that JupyterLab shows before the cell runs


def show_storage(view, storage, title="view"):
    """Draw `view` (top) and the flat `storage` it reads (bottom), joined cell to cell."""
    cell, gap = 38, 80
    values = storage.detach().numpy().reshape(-1)
    mine, base = view.detach().numpy(), storage.detach().numpy()
    # where the view starts inside the storage, in elements
    offset = (mine.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // mine.itemsize
    grid = mine.reshape(1, -1) if view.ndim == 1 else mine
    strides = (0, *view.stride()) if view.ndim == 1 else view.stride()
    rows, cols = grid.shape
    reads = {(i, j): index_to_position((i, j), strides, offset) for i, j in product(range(rows), range(cols))}
    top, bottom = 26, 26 + rows * cell + gap
    caption = f"{title}: shape {tuple(view.shape)}, strides {tuple(view.stride())}, offset {offset}"
    width = max(max(cols, len(values)) * cell + 20, 8 * max(len(caption), 72) + 20)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{bottom + cell + 40}" '
           'font-family="monospace" font-size="13">', f'<text x="10" y="16">{caption}</text>']
    for (i, j), pos in reads.items():  # the lines first, so the cells sit on top of them
        shift = (i - (rows - 1) / 2) * 6  # rows apart, so lines into one cell stay visible
        out.append(f'<line x1="{10 + j * cell + cell / 2 - 2 + shift}" y1="{top + i * cell + cell / 2}" '
                   f'x2="{10 + pos * cell + cell / 2 - 2 + shift}" y2="{bottom}" stroke="#e67e22"/>')
    for (i, j), _ in reads.items():
        x, y = 10 + j * cell, top + i * cell
        out.append(f'<rect x="{x}" y="{y}" width="{cell - 4}" height="{cell - 4}" fill="#fdebd0" fill-opacity="0.8" stroke="#e67e22"/>'
                   f'<text x="{x + 5}" y="{y + 22}">{grid[i, j]:g}</text>')
    for pos, value in enumerate(values):
        x, fill = 10 + pos * cell, "#d6eaf8" if pos in reads.values() else "#f2f3f4"
        out.append(f'<rect x="{x}" y="{bottom}" width="{cell - 4}" height="{cell - 4}" fill="{fill}" stroke="#2e86c1"/>'
                   f'<text x="{x + 5}" y="{bottom + 22}">{value:g}</text>'
                   f'<text x="{x + 12}" y="{bottom + cell + 10}" fill="#888" font-size="10">{pos}</text>')
    out.append(f'<text x="10" y="{bottom + cell + 32}" fill="#2e86c1">storage: {len(values)} elements '
               "(position under each; grey = not read by this view)</text></svg>")
    return Picture("".join(out))


# %% [markdown]
# Here is `m` itself: a contiguous tensor reads its storage in order.

# %%
m = tl.arange(12).reshape(3, 4)
show_storage(m, m)

# %% [markdown]
# ### Views share storage
#
# A **view** is a new tensor (new shape, strides, offset) over the **same** storage. Transposing
# only swaps the strides -- no element moves:

# %%
t = m.T
print(t.shape, t.stride(), "contiguous:", t.is_contiguous())
show_storage(t, m, "m.T")

# %% [markdown]
# Slicing is a view too. `m[1:, 1:3]` starts at offset 5 and keeps m's strides:

# %%
show_storage(m[1:, 1:3], m, "m[1:, 1:3]")

# %% [markdown]
# Because views share storage, writing through one changes the other:

# %%
row = m[1]  # a view of the second row
row[0] = 100
print(m)
m[1, 0] = 4  # put it back

# %% [markdown]
# `view(shape)` never copies, so it refuses when the strides cannot describe the new shape
# (the error says what to do); `reshape` copies in that case; `contiguous()` makes a fresh,
# row-major copy when needed:

# %%
try:
    m.T.view(12)
except RuntimeError as error:
    print("RuntimeError:", error)

# %%
flat = m.T.reshape(12)  # a copy, in the transposed order
print(flat)
print(m.T.contiguous().stride())

# %% [markdown]
# ## 5. Broadcasting
#
# Operations between tensors of different shapes **broadcast**: the shapes are lined up on the
# right, and each pair of sizes must be equal or one of them 1. A size-1 (or missing) dimension
# is repeated to match the other.
#
# | `a.shape` | `b.shape` | result |
# |---|---|---|
# | (3, 1) | (4,) | (3, 4) |
# | (2, 3) | (3,) | (2, 3) |
# | (2, 3) | (4,) | error: 3 vs 4 |

# %%
from torchlight.shape import broadcast_shape

col = tl.tensor([[1.0], [2.0], [3.0]])  # shape (3, 1)
row = tl.tensor([10.0, 20.0, 30.0, 40.0])  # shape (4,)
print(broadcast_shape(col.shape, row.shape))
col + row

# %% [markdown]
# Every entry is `col[i] + row[j]`; a check against numpy's broadcasting:

# %%
expected = np.array([[1.0], [2.0], [3.0]]) + np.array([10.0, 20.0, 30.0, 40.0])
assert np.array_equal((col + row).numpy(), expected)

# %% [markdown]
# The repetition costs no memory: `expand` makes a view whose stride is **0** along the repeated
# dimension, so every row reads the same storage cells. This is what broadcasting does to each
# operand before an elementwise op:

# %%
wide = row.expand(3, 4)
print(wide.stride())
show_storage(wide, row, "row.expand(3, 4)")

# %% [markdown]
# When the sizes do not match and neither is 1, the error names both shapes and the dimension:

# %%
try:
    tl.ones(2, 3) + tl.ones(4)
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# ## 6. Indexing
#
# Integers pick an element (dropping that dimension), slices pick ranges, `None` inserts a
# size-1 dimension, `...` stands for "all remaining dimensions":

# %%
m = tl.arange(12).reshape(3, 4)
print(m[0])  # first row
print(m[:, 1])  # second column
print(m[0, -1].item())  # last element of the first row
print(m[None].shape, m[..., 0])

# %% [markdown]
# A bool tensor of the same shape is a **mask**; integer tensors (or lists) pick elements by
# position. These "advanced" indices **copy** (the picked elements are not evenly spaced, so no
# strides can describe them):

# %%
print(m[m > 6])  # the elements greater than 6
print(m[[0, 2], [1, 3]])  # elements (0, 1) and (2, 3)

# %% [markdown]
# `tl.where(condition, a, b)` picks from `a` where the condition holds, else from `b`:

# %%
tl.where(m > 5, m, tl.zeros_like(m))

# %% [markdown]
# ## 7. Reductions
#
# `sum`, `mean`, `max`, `min`, `var` reduce all elements, or along `dim` (with `keepdim=True`
# keeping it as size 1, handy for broadcasting back):

# %%
x = tl.arange(6.0).reshape(2, 3)
print(x.sum(), x.sum(dim=0), x.sum(dim=1, keepdim=True).shape)
print(x.mean(dim=1), x.max(), x.argmax(dim=1))

# %% [markdown]
# Normalizing each row to sum to 1 uses `keepdim` and broadcasting together:

# %%
p = x / x.sum(dim=1, keepdim=True)
print(p)
assert np.allclose(p.sum(dim=1).numpy(), 1.0)

# %% [markdown]
# ## 8. The loops underneath (assignment 2b)
#
# Assignment 2b (`a2b_strided`) asks you to write `index_to_position`, `to_index`,
# `shape_broadcast`, `broadcast_index` and the strided backend's three loops. A loop over a
# storage counts the output's elements (`ordinal`), turns each count into an index
# (`to_index`), and reads the input where its **own** strides and offset say
# (`index_to_position`). The trap is to read the buffer in order, which is right only for a
# contiguous storage. On the strided backend, `.storage` shows the layout:

# %%
from torchlight.shape import broadcast_index

t = tl.tensor(np.arange(6.0).reshape(2, 3), backend="strided").T  # a transposed view
a = t.storage
print(a)


def negate(a):
    """map(neg) over any layout: count the output, read each input element through a's strides."""
    return [-a.buffer[index_to_position(to_index(k, a.shape), a.strides, a.offset)] for k in range(a.size)]


print("through the strides:", negate(a))
print("buffer in order:    ", [-a.buffer[k] for k in range(a.size)], "(wrong: that is t before the .T)")
assert negate(a) == (-t.numpy()).reshape(-1).tolist()

# %% [markdown]
# A broadcast operand reads index 0 along its dimensions of size 1 (`broadcast_index`): one
# element of a `(2, 1)` column serves a whole row of the `(2, 3)` result. `expand` writes the
# same thing as a stride of 0:

# %%
column = tl.tensor([[10.0], [20.0]], backend="strided")
print([broadcast_index(to_index(k, (2, 3)), (2, 3), (2, 1)) for k in range(6)])
print(column.expand(2, 3).storage)

# %% [markdown]
# ## Summary
#
# - Factories (`tensor`, `zeros`, `ones`, `full`, `arange`, `linspace`, `eye`, `rand`, `randn`,
#   `*_like`) make tensors; `tl.manual_seed` makes random ones repeatable.
# - The default dtype is float64; ints are int64; mixing promotes to the floating type.
# - A tensor is **storage + shape + strides + offset**. Transpose, slicing and `expand` are
#   views: they change the strides, never the storage.
# - Broadcasting lines shapes up on the right and repeats size-1 dimensions with stride 0.
# - Basic indexing gives views; masks and integer-array indexing give copies.
#
# ## Exercises
#
# 1. Predict `tl.zeros(2, 3, 4).permute(2, 0, 1).stride()`, then check it.
# 2. Which of these broadcast, and to what shape? `(5, 1, 3)` with `(4, 1)`; `(2, 3)` with
#    `(3, 2)`; `(1,)` with `()`. Check with `broadcast_shape`.
# 3. Use `show_storage` on `m[:, ::2]`. What are its strides and offset?
# 4. Write `to_index` yourself (the inverse of `index_to_position` for contiguous strides) and
#    check it against `torchlight.shape.to_index` for every position of a (2, 3, 4) tensor.
# 5. Why can `m.T.view(12)` not work, while `m.view(12)` can? State it in terms of strides.
#
# Next: [Tutorial 2: Autograd](02_autograd.ipynb) -- tensors that remember how they were made.
