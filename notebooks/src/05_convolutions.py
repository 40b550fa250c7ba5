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
# # Tutorial 5: Convolutions
#
# A `Linear` layer connects every input to every output. For an image that is wasteful and
# blind to geometry: a pixel's neighbours matter more than pixels far away, and an edge means
# the same thing wherever it is. A **convolution** slides one small set of weights (a
# **kernel**) over the input, computing a weighted sum at every position:
#
# - the same weights everywhere (**weight sharing**): few parameters, and a pattern is
#   recognized wherever it appears;
# - each output depends on a small neighbourhood (**locality**).
#
# This tutorial computes convolutions and pooling by hand, checks torchlight's against them,
# looks at their gradients, and trains a small convolutional network (CNN) on the digits.

# %%
import numpy as np

import torchlight as tl
from torchlight import nn, optim, viz
from torchlight.autograd import gradcheck
from torchlight.nn import functional as F

tl.manual_seed(0)

# %% [markdown]
# ## 1. One dimension
#
# For a signal $x$ of length $L$ and a kernel $w$ of length $k$, the (1-D, single channel)
# convolution is
#
# $$\text{out}[t] = \sum_{j=0}^{k-1} w[j]\; x[t + j], \qquad t = 0, \ldots, L - k.$$
#
# (Mathematicians would flip $w$ and call this a cross-correlation; deep learning calls it a
# convolution, and so does PyTorch.) A loop over output positions, with tensor slicing, so
# autograd works through it:

# %%
def conv1d_by_hand(x, w):
    k = w.shape[0]
    return tl.stack([(x[t : t + k] * w).sum() for t in range(x.shape[0] - k + 1)])


signal = tl.tensor([0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0])
print(conv1d_by_hand(signal, tl.tensor([-1.0, 0.0, 1.0])))  # an edge detector
print(conv1d_by_hand(signal, tl.tensor([1.0, 1.0, 1.0]) / 3))  # a moving average

# %% [markdown]
# The edge detector is positive where the signal steps up and negative where it steps down.
#
# `F.conv1d` works on batches and channels: input `(N, C_in, L)`, weight `(C_out, C_in, k)`,
# output `(N, C_out, L_out)`. Each output channel sums over all input channels. One sample, one
# channel in, two kernels out:

# %%
kernels = tl.tensor([[[-1.0, 0.0, 1.0]], [[1 / 3, 1 / 3, 1 / 3]]])  # (2, 1, 3)
out = F.conv1d(signal.reshape(1, 1, 8), kernels)
print(out.shape)
print(out)
assert np.allclose(out[0, 0].numpy(), conv1d_by_hand(signal, kernels[0, 0]).numpy())
assert np.allclose(out[0, 1].numpy(), conv1d_by_hand(signal, kernels[1, 0]).numpy())

# %% [markdown]
# **Padding** adds $p$ zeros at each end; **stride** $s$ moves the kernel $s$ steps at a time.
# The output length is
#
# $$L_\text{out} = \left\lfloor \frac{L + 2p - k}{s} \right\rfloor + 1.$$

# %%
for padding, stride in [(0, 1), (1, 1), (1, 2), (0, 3)]:
    out = F.conv1d(signal.reshape(1, 1, 8), kernels, padding=padding, stride=stride)
    expected = (8 + 2 * padding - 3) // stride + 1
    print(f"padding={padding} stride={stride}: length {out.shape[-1]} (formula: {expected})")
    assert out.shape[-1] == expected

# %% [markdown]
# ## 2. Two dimensions
#
# On images the kernel is a small square, sliding in both directions:
#
# $$\text{out}[i, j] = \sum_{a, b} w[a, b]\; x[i + a, j + b].$$
#
# Let us take a digit from the data set and two classic kernels that respond to vertical and
# horizontal edges.

# %%
from torchlight.data import digits

train, test = digits(train=True, images=True), digits(train=False, images=True)
image = train.tensors[0][0, 0]  # one 8x8 image, values in [0, 1]
print(train.tensors[0].shape, "label:", train.tensors[1][0].item())


def conv2d_by_hand(x, w):
    kh, kw = w.shape
    rows = x.shape[0] - kh + 1
    cols = x.shape[1] - kw + 1
    out = [[(x[i : i + kh, j : j + kw] * w).sum() for j in range(cols)] for i in range(rows)]
    return tl.stack([tl.stack(row) for row in out])


vertical = tl.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])  # Sobel
horizontal = vertical.T
edges_v = conv2d_by_hand(image, vertical)
print(edges_v.shape)

# %% [markdown]
# The folded cell defines `show_images`, which draws small images side by side: grey from
# white (0) to black (the largest value) when all values are positive; red for positive and
# blue for negative values otherwise (kernels and edge maps have both signs).

# %% jupyter={"source_hidden": true}
from torchlight.viz import Picture  # an SVG that JupyterLab shows before the cell runs


def _colour(v, signed):
    if not signed:  # 0 -> white, 1 -> black
        level = int(round(255 * (1 - v)))
        return f"#{level:02x}{level:02x}{level:02x}"
    fade = int(round(255 * (1 - abs(v))))  # -1 -> blue, 0 -> white, 1 -> red
    return f"#ff{fade:02x}{fade:02x}" if v > 0 else f"#{fade:02x}{fade:02x}ff"


def show_images(images, titles, scale=12):
    """An SVG of 2-D tensors side by side, each scaled to its own range."""
    x0, parts, height = 0, [], 0
    for img, title in zip(images, titles):
        a = img.detach().numpy()
        signed = a.min() < 0
        top = np.abs(a).max()
        a = a / top if top > 0 else a
        h, w = a.shape
        for i, j in zip(*a.nonzero()):  # zeros are white, the background
            parts.append(f'<rect x="{x0 + j * scale}" y="{i * scale}" width="{scale}" height="{scale}" '
                         f'fill="{_colour(a[i, j], signed)}"/>')
        parts.append(f'<rect x="{x0}" y="0" width="{w * scale}" height="{h * scale}" fill="none" stroke="#bbb"/>')
        parts.append(f'<text x="{x0}" y="{h * scale + 14}">{title}</text>')
        height = max(height, h * scale + 20)
        x0 += max(w * scale, 8 * len(title)) + 16
    return Picture(f'<svg xmlns="http://www.w3.org/2000/svg" width="{x0}" height="{height}" shape-rendering="crispEdges" '
               f'font-family="sans-serif" font-size="12">{"".join(parts)}</svg>')


# %%
show_images([image, vertical, conv2d_by_hand(image, vertical), horizontal, conv2d_by_hand(image, horizontal)],
            ["digit", "kernel", "vertical edges", "kernel", "horizontal edges"])

# %% [markdown]
# `F.conv2d` takes input `(N, C_in, H, W)` and weight `(C_out, C_in, k_h, k_w)`; it agrees with
# the loops:

# %%
weight = tl.stack([vertical, horizontal]).unsqueeze(1)  # (2, 1, 3, 3)
out = F.conv2d(image.reshape(1, 1, 8, 8), weight)
print(out.shape)
assert np.allclose(out[0, 0].numpy(), conv2d_by_hand(image, vertical).numpy())
assert np.allclose(out[0, 1].numpy(), conv2d_by_hand(image, horizontal).numpy())
print("F.conv2d matches the loops")

# %% [markdown]
# ### Convolution as one matrix product
#
# Loops over positions are slow. Fast implementations rearrange the input so that the whole
# convolution becomes **one matrix product** ("im2col"): each column holds the $C_\text{in}
# k_h k_w$ input values one output position sees, and the kernels, flattened to a
# $(C_\text{out}, C_\text{in} k_h k_w)$ matrix, multiply all columns at once:

# %%
def conv2d_as_matmul(x, w):
    n, c, h, width = x.shape
    o, _, kh, kw = w.shape
    rows, cols = h - kh + 1, width - kw + 1
    patches = tl.stack([x[:, :, a : a + rows, b : b + cols] for a in range(kh) for b in range(kw)], dim=2)
    # patches: (N, C, kh * kw, rows, cols) -> columns (N, C * kh * kw, rows * cols)
    columns = patches.reshape(n, c * kh * kw, rows * cols)
    return (w.reshape(o, c * kh * kw) @ columns).reshape(n, o, rows, cols)


x = tl.randn(2, 3, 6, 6)
w = tl.randn(4, 3, 3, 3)
assert np.allclose(conv2d_as_matmul(x, w).numpy(), F.conv2d(x, w).numpy())
print("im2col + matmul matches F.conv2d:", tuple(F.conv2d(x, w).shape))

# %% [markdown]
# ## 3. Gradients of a convolution
#
# Because the same weight is used at every position, its gradient is a **sum over positions**:
# $\partial L/\partial w[a, b] = \sum_{i, j} g[i, j]\, x[i + a, j + b]$ with
# $g = \partial L / \partial\, \text{out}$ -- itself a convolution, of the input with $g$.
# Checked here with `L = out.sum()` (so $g$ = ones):

# %%
x = tl.randn(1, 1, 5, 5)
w = tl.randn(1, 1, 3, 3, requires_grad=True)
F.conv2d(x, w).sum().backward()
by_formula = conv2d_by_hand(x[0, 0], tl.ones(3, 3))  # the input convolved with g = ones(3, 3)
assert np.allclose(w.grad[0, 0].numpy(), by_formula.numpy())
print(w.grad[0, 0])

# %% [markdown]
# And `gradcheck` compares every entry of the Jacobians of `conv1d` and `conv2d` (with
# stride, padding and a bias) with central differences:

# %%
x1 = tl.randn(2, 2, 7, requires_grad=True)
w1 = tl.randn(3, 2, 3, requires_grad=True)
b1 = tl.randn(3, requires_grad=True)
print(gradcheck(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), x1, w1, b1))
x2 = tl.randn(1, 2, 5, 5, requires_grad=True)
w2 = tl.randn(2, 2, 3, 3, requires_grad=True)
print(gradcheck(lambda x, w: F.conv2d(x, w, stride=2, padding=1), x2, w2))

# %% [markdown]
# ## 4. Pooling
#
# **Pooling** shrinks a feature map by summarizing each window: `max_pool2d` keeps the largest
# value of each $k \times k$ window, `avg_pool2d` the mean. With non-overlapping $2 \times 2$
# windows, a reshape does it by hand: split each spatial dimension into (blocks, 2) and reduce
# over the two "2" axes.

# %%
x = tl.arange(16.0).reshape(1, 1, 4, 4)
print(x[0, 0])
blocks = x.reshape(1, 1, 2, 2, 2, 2)  # (N, C, H/2, 2, W/2, 2)
print(F.max_pool2d(x, 2)[0, 0])
assert np.array_equal(F.max_pool2d(x, 2).numpy(), blocks.max(dim=(3, 5)).numpy())
assert np.array_equal(F.avg_pool2d(x, 2).numpy(), blocks.mean(dim=(3, 5)).numpy())

# %% [markdown]
# The gradient of a max goes entirely to the element that was the maximum (it alone changed
# the output); the others get 0. Average pooling spreads it evenly:

# %%
x = tl.tensor([[[[1.0, 5.0], [3.0, 2.0]]]], requires_grad=True)
F.max_pool2d(x, 2).sum().backward()
print(x.grad[0, 0])
x.grad = None
F.avg_pool2d(x, 2).sum().backward()
print(x.grad[0, 0])

# %% [markdown]
# ## 5. As layers
#
# `nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0)` holds the weight
# `(out, in, k, k)` and a bias `(out,)` as Parameters; `nn.MaxPool2d(k)` has no parameters;
# `nn.Flatten()` turns `(N, C, H, W)` into `(N, C * H * W)` for a final `Linear`. A small CNN
# for 8x8 digits, with the shape after each layer:

# %%
tl.manual_seed(0)
cnn = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1),  # (N, 8, 8, 8)
    nn.ReLU(),
    nn.MaxPool2d(2),  # (N, 8, 4, 4)
    nn.Conv2d(8, 16, 3, padding=1),  # (N, 16, 4, 4)
    nn.ReLU(),
    nn.MaxPool2d(2),  # (N, 16, 2, 2)
    nn.Flatten(),  # (N, 64)
    nn.Linear(16 * 2 * 2, 10),
)
h = train.tensors[0][:5]
for layer in cnn:
    h = layer(h)
    print(f"{type(layer).__name__:10s} -> {h.shape}")

# %% [markdown]
# Weight sharing keeps the network small: a `Conv2d(8, 16, 3)` has $16 \cdot 8 \cdot 9 + 16$
# parameters, whatever the image size.

# %%
for name, p in cnn.named_parameters():
    print(f"{name:9s} {str(p.shape):14s} {p.numel():5d}")
n_params = sum(p.numel() for p in cnn.parameters())
assert n_params == (8 * 1 * 9 + 8) + (16 * 8 * 9 + 16) + (64 * 10 + 10)
print(f"total {n_params} (the MLP of Tutorial 3 had {64 * 128 + 128 + 128 * 10 + 10})")

# %%
viz.ModuleViewer(cnn)

# %% [markdown]
# ## 6. A CNN on the digits
#
# The same training loop as in Tutorial 3, with images of shape `(N, 1, 8, 8)`:

# %%
from torchlight.data import DataLoader


def accuracy(model, x, y):
    with tl.no_grad():
        return (model(x).argmax(dim=1) == y).double().mean().item()


test_x, test_y = test.tensors
opt = optim.Adam(cnn.parameters(), lr=0.01)
loader = DataLoader(train, batch_size=64, shuffle=True, seed=0)
for epoch in range(10):
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.cross_entropy(cnn(xb), yb)
        loss.backward()
        opt.step()
    print(f"epoch {epoch}   last batch loss {loss.item():.4f}   test accuracy {accuracy(cnn, test_x, test_y):.3f}")

# %%
final = accuracy(cnn, test_x, test_y)
assert final >= 0.95, final
print(f"test accuracy {final:.3f} with {n_params} parameters")

# %% [markdown]
# What did the first layer learn? Its 8 kernels, and what each one makes of a test digit
# (after the ReLU):

# %%
kernels = cnn[0].weight[:, 0]
show_images(list(kernels), [f"k{i}" for i in range(8)], scale=10)

# %%
with tl.no_grad():
    maps = cnn[1](cnn[0](test_x[:1]))[0]
show_images([test_x[0, 0], *list(maps)], ["input", *[f"k{i}" for i in range(8)]], scale=6)

# %% [markdown]
# ## Summary
#
# - A convolution slides one small kernel over the input: shared weights, local connections.
#   `F.conv1d` / `F.conv2d` match the loops; output size $\lfloor (L + 2p - k)/s \rfloor + 1$.
# - It can be computed as one matrix product over rearranged patches (im2col).
# - The gradient for the weights sums over positions: it is a convolution of the input with
#   the output gradient. `gradcheck` confirms torchlight's.
# - Max pooling keeps the largest value of each window and sends the whole gradient there;
#   average pooling spreads it.
# - `nn.Conv2d`, `nn.MaxPool2d` and `nn.Flatten` make a CNN that reads digits well with
#   fewer parameters than an MLP.
#
# ## Exercises
#
# 1. Write `conv1d_by_hand` with `stride` and `padding` arguments and check it against
#    `F.conv1d` for all the cases of section 1.
# 2. Show that a 3x3 convolution followed by another 3x3 convolution sees a 5x5 window of the
#    input (hint: the gradient of one output with respect to the input).
# 3. Extend `conv2d_as_matmul` to `padding` (use `tl.cat` with zeros, or write into a bigger
#    `tl.zeros`), and check it with `gradcheck`.
# 4. Replace the `MaxPool2d` layers of the CNN with `AvgPool2d`, and with a `stride=2`
#    convolution. Which trains best?
# 5. Find test digits the CNN gets wrong. Would you have got them right?
#
# That is the end of the tutorials: you have built, from tensors up, everything a small deep
# learning framework does. The `assignments/` folder has exercises that are graded.
