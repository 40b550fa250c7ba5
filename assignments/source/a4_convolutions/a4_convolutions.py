# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 4: Convolutions
#
# A 1-D convolution layer slides each of its $O$ filters (shape $C \times K$) along the input
# (shape $N \times C \times L$) and takes a dot product at every position $t$:
#
# $$y_{n,o,t} = \sum_{c=1}^{C}\sum_{k=0}^{K-1} x_{n,c,t+k}\; w_{o,c,k}, \qquad t = 0, \ldots, L-K.$$
#
# (Deep-learning libraries call this cross-correlation "convolution"; no padding, stride 1.)
# Every weight is used at every position and every input element by several filter taps, so
# the backward pass *sums* over those uses:
#
# $$\frac{\partial L}{\partial w_{o,c,k}} = \sum_{n,t} G_{n,o,t}\, x_{n,c,t+k}, \qquad
#   \frac{\partial L}{\partial x_{n,c,s}} = \sum_{o,k:\ t = s-k} G_{n,o,t}\, w_{o,c,k}.$$
#
# A loop over the kernel taps $k$ keeps this readable: for each $k$, the slice
# `x[:, :, k:k + T]` lines up with the output. Indexing with `None` adds a size-1 dimension, so
# `x[:, None, :, k:k + T] * w[None, :, :, k:k + 1]` has shape $(N, O, C, T)$; summing over the
# $C$ axis gives one tap's contribution. Under `tl.no_grad()` (inside forward and backward) you
# may also write into slices: `grad_x[:, :, k:k + T] += ...`.
#
# **How you are graded.** Hidden checks on random float64 inputs and kernels of several
# non-square shapes, compared with reference values to about $10^{-12}$ and with central
# differences.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import numpy as np

import torchlight as tl
from torchlight.autograd import Function, gradcheck
from torchlight.testing import assert_close, assert_exact, assert_gradient_scales

tl.manual_seed(0)

# %% [markdown] nbgrader={"grade": false, "grade_id": "conv1d_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. Conv1d
#
# `Conv1d.apply(x, weight)` with `x` of shape $(N, C, L)$ and `weight` of shape $(O, C, K)$
# returns shape $(N, O, L - K + 1)$; backward returns the gradients for `x` and `weight`.

# %% nbgrader={"grade": false, "grade_id": "conv1d", "locked": false, "schema_version": 3, "solution": true}
class Conv1d(Function):
    @staticmethod
    def forward(ctx, x, weight):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x, weight)
        steps = x.shape[2] - weight.shape[2] + 1
        out = 0
        for k in range(weight.shape[2]):
            out = out + (x[:, None, :, k : k + steps] * weight[None, :, :, k : k + 1]).sum(2)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x, weight = ctx.saved_tensors
        steps = grad_output.shape[2]
        grad_x = tl.zeros(*x.shape)
        grad_w = tl.zeros(*weight.shape)
        g = grad_output[:, :, None, :]  # (N, O, 1, T)
        for k in range(weight.shape[2]):
            grad_x[:, :, k : k + steps] += (g * weight[None, :, :, k : k + 1]).sum(1)
            grad_w[:, :, k] = (g * x[:, None, :, k : k + steps]).sum((0, 3))
        return grad_x, grad_w
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_conv1d", "locked": true, "points": 2, "schema_version": 3, "solution": false}
x = tl.tensor([[[1.0, 2.0, 3.0, 4.0]]])  # N=1, C=1, L=4
w = tl.tensor([[[1.0, -1.0]]])  # O=1, C=1, K=2: a difference filter
assert_close(Conv1d.apply(x, w).numpy(), [[[-1.0, -1.0, -1.0]]])
assert gradcheck(Conv1d.apply, tl.randn(2, 3, 7, requires_grad=True), tl.randn(4, 3, 3, requires_grad=True))
# Exact, not estimated: a convolution is linear in its input and in its weight, so the gradients
# must not change at inputs scaled by 2**50 (there, x + h rounds back to x).
for i in (0, 1):
    assert_gradient_scales(Conv1d.apply, [tl.randn(2, 3, 7), tl.randn(4, 3, 3)], i)
print("Conv1d: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a4_convolutions", "test_conv1d", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "conv2d_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. Conv2d
#
# The same in two dimensions: `x` of shape $(N, C, H, W)$, `weight` of shape $(O, C, K_H, K_W)$,
# output $(N, O, H - K_H + 1, W - K_W + 1)$. Loop over both kernel taps $(i, j)$.

# %% nbgrader={"grade": false, "grade_id": "conv2d", "locked": false, "schema_version": 3, "solution": true}
class Conv2d(Function):
    @staticmethod
    def forward(ctx, x, weight):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x, weight)
        out_h, out_w = x.shape[2] - weight.shape[2] + 1, x.shape[3] - weight.shape[3] + 1
        out = 0
        for i in range(weight.shape[2]):
            for j in range(weight.shape[3]):
                patch = x[:, None, :, i : i + out_h, j : j + out_w]
                out = out + (patch * weight[None, :, :, i : i + 1, j : j + 1]).sum(2)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x, weight = ctx.saved_tensors
        out_h, out_w = grad_output.shape[2], grad_output.shape[3]
        grad_x = tl.zeros(*x.shape)
        grad_w = tl.zeros(*weight.shape)
        g = grad_output[:, :, None]  # (N, O, 1, H', W')
        for i in range(weight.shape[2]):
            for j in range(weight.shape[3]):
                tap = weight[None, :, :, i : i + 1, j : j + 1]
                grad_x[:, :, i : i + out_h, j : j + out_w] += (g * tap).sum(1)
                patch = x[:, None, :, i : i + out_h, j : j + out_w]
                grad_w[:, :, i, j] = (g * patch).sum((0, 3, 4))
        return grad_x, grad_w
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_conv2d", "locked": true, "points": 3, "schema_version": 3, "solution": false}
x = tl.arange(12.0).reshape(1, 1, 3, 4)
w = tl.ones(1, 1, 2, 2)
assert_close(Conv2d.apply(x, w).numpy(), [[[[10.0, 14.0, 18.0], [26.0, 30.0, 34.0]]]])
assert gradcheck(Conv2d.apply, tl.randn(2, 2, 4, 5, requires_grad=True), tl.randn(3, 2, 2, 3, requires_grad=True))
# Exact, not estimated: the gradients must not change at inputs scaled by 2**50.
for i in (0, 1):
    assert_gradient_scales(Conv2d.apply, [tl.randn(2, 2, 4, 5), tl.randn(3, 2, 2, 3)], i)
print("Conv2d: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a4_convolutions", "test_conv2d", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "pool_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. AvgPool2d
#
# `AvgPool2d.apply(x, k)` averages non-overlapping $k \times k$ blocks ($H$ and $W$ are
# multiples of $k$). A reshape to $(N, C, H/k, k, W/k, k)$ puts each block on its own two
# axes. Each input element contributes $1/k^2$ of one output.

# %% nbgrader={"grade": false, "grade_id": "avg_pool2d", "locked": false, "schema_version": 3, "solution": true}
class AvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, k):
        ### BEGIN SOLUTION
        n, c, h, w = x.shape
        ctx.shape, ctx.k = x.shape, k
        return x.reshape(n, c, h // k, k, w // k, k).mean((3, 5))
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        n, c, h, w = ctx.shape
        k = ctx.k
        spread = grad_output[:, :, :, None, :, None].expand(n, c, h // k, k, w // k, k)
        return spread.reshape(n, c, h, w) / (k * k)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_avg_pool2d", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.arange(16.0).reshape(1, 1, 4, 4)
assert_close(AvgPool2d.apply(x, 2).numpy(), [[[[2.5, 4.5], [10.5, 12.5]]]])
assert gradcheck(lambda t: AvgPool2d.apply(t, 2), tl.randn(2, 3, 4, 6, requires_grad=True))
# Exact, not estimated: the gradient must not change at inputs scaled by 2**50.
assert_gradient_scales(lambda t: AvgPool2d.apply(t, 2), [tl.randn(2, 3, 4, 6)], 0)
print("AvgPool2d: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a4_convolutions", "test_avg_pool2d", globals())
### END HIDDEN TESTS
