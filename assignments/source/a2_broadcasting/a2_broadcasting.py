# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 2: Broadcasting and reductions
#
# When shapes differ, numpy-style *broadcasting* stretches size-1 dimensions and adds missing
# leading ones: `(2, 1, 5) + (3, 1)` gives shape `(2, 3, 5)`. Each input element is then used
# several times, and the chain rule *adds up* the gradient of every use. So a gradient computed
# at the output's shape must be **summed back to the input's shape**.
#
# torchlight's engine does that final sum for you when a Function forgets, but in this
# assignment the grader calls your `forward` and `backward` directly: return gradients of
# exactly the input shapes.
#
# Useful tensor methods: `x.sum(dims, keepdim=True)`, `x.unsqueeze(d)`, `x.expand(*shape)`,
# `x.reshape(*shape)`, `x.permute(*dims)`, `x.transpose(-1, -2)`, `a @ b`.
#
# **How you are graded.** As in assignment 1: visible tests here, hidden checks by the
# autograder on random float64 inputs of several non-square shapes, compared with reference
# values to about $10^{-12}$ and with central differences.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import numpy as np

import torchlight as tl
from torchlight.autograd import Context, Function, gradcheck
from torchlight.testing import assert_close, assert_exact, assert_gradient_scales

tl.manual_seed(0)


def call_directly(fn, *args):
    """Run fn.forward and fn.backward (with a gradient of ones) without the engine."""
    ctx = Context(fn.__name__)
    with tl.no_grad():
        out = fn.forward(ctx, *args)
        grads = fn.backward(ctx, tl.ones(*out.shape))
    return out, grads if isinstance(grads, tuple) else (grads,)


# %% [markdown] nbgrader={"grade": false, "grade_id": "unbroadcast_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. Summing a gradient back to a shape
#
# Write `unbroadcast(grad, shape)`: sum `grad` over the leading dimensions broadcasting added,
# then (keeping dims) over every dimension where `shape` has size 1 but `grad` does not. The
# result has exactly `shape`.

# %% nbgrader={"grade": false, "grade_id": "unbroadcast", "locked": false, "schema_version": 3, "solution": true}
def unbroadcast(grad, shape):
    ### BEGIN SOLUTION
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(tuple(range(extra)))
    stretched = tuple(d for d, n in enumerate(shape) if n == 1 and grad.shape[d] != 1)
    if stretched:
        grad = grad.sum(stretched, keepdim=True)
    return grad
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_unbroadcast", "locked": true, "points": 1, "schema_version": 3, "solution": false}
g = tl.ones(2, 3, 4)
assert unbroadcast(g, (3, 1)).shape == (3, 1)
assert np.allclose(unbroadcast(g, (3, 1)).numpy(), 8.0)
assert unbroadcast(g, (4,)).shape == (4,)
assert np.allclose(unbroadcast(g, (2, 3, 4)).numpy(), 1.0)
print("unbroadcast: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2_broadcasting", "test_unbroadcast", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "add_mul_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. Add and Mul with broadcasting
#
# Forward broadcasts (the backend's `a._zip("add", b)` and `a._zip("mul", b)` do). Backward
# computes each gradient at the output's shape, then `unbroadcast`s it to its input's shape.

# %% nbgrader={"grade": false, "grade_id": "add", "locked": false, "schema_version": 3, "solution": true}
class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.a_shape, ctx.b_shape = a.shape, b.shape
        return a._zip("add", b)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        return unbroadcast(grad_output, ctx.a_shape), unbroadcast(grad_output, ctx.b_shape)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_add", "locked": true, "points": 1, "schema_version": 3, "solution": false}
a, b = tl.randn(2, 1, 3), tl.randn(4, 1)
out, (grad_a, grad_b) = call_directly(Add, a, b)
assert out.shape == (2, 4, 3), out.shape
assert grad_a.shape == a.shape and grad_b.shape == b.shape, (grad_a.shape, grad_b.shape)
assert np.allclose(grad_a.numpy(), 4.0) and np.allclose(grad_b.numpy(), 6.0)
assert gradcheck(Add.apply, tl.randn(2, 1, 3, requires_grad=True), tl.randn(4, 1, requires_grad=True))
# Exact, not estimated: a linear op's gradient must not change at inputs scaled by 2**50
# (there, x + h rounds back to x and finite differences give 0).
for i in (0, 1):
    assert_gradient_scales(Add.apply, [tl.randn(2, 1, 3), tl.randn(4, 1)], i)
print("Add: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2_broadcasting", "test_add", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "mul", "locked": false, "schema_version": 3, "solution": true}
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a._zip("mul", b)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        return unbroadcast(grad_output * b, a.shape), unbroadcast(grad_output * a, b.shape)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mul", "locked": true, "points": 1, "schema_version": 3, "solution": false}
a = tl.tensor([[1.0], [2.0]])
b = tl.tensor([10.0, 20.0, 30.0])
out, (grad_a, grad_b) = call_directly(Mul, a, b)
assert_close(out.numpy(), [[10.0, 20.0, 30.0], [20.0, 40.0, 60.0]])
assert_close(grad_a.numpy(), [[60.0], [60.0]])
assert_close(grad_b.numpy(), [3.0, 3.0, 3.0])
assert gradcheck(Mul.apply, tl.randn(3, 1, requires_grad=True), tl.randn(2, 1, 4, requires_grad=True))
# Exact, not estimated: Mul's gradient must not change at inputs scaled by 2**50.
for i in (0, 1):
    assert_gradient_scales(Mul.apply, [tl.randn(3, 1), tl.randn(2, 1, 4)], i)
print("Mul: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2_broadcasting", "test_mul", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "reduce_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. Sum and Mean over a dimension
#
# `Sum.apply(x, dim)` removes dimension `dim`. Every element summed gets the same gradient:
# put the dimension back (`unsqueeze`) and `expand` to the input's shape. `Mean` divides by the
# size of that dimension, so its gradient does too.

# %% nbgrader={"grade": false, "grade_id": "sum", "locked": false, "schema_version": 3, "solution": true}
class Sum(Function):
    @staticmethod
    def forward(ctx, x, dim):
        ### BEGIN SOLUTION
        ctx.shape, ctx.dim = x.shape, dim
        return x.sum(dim)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        return grad_output.unsqueeze(ctx.dim).expand(*ctx.shape)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sum", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.arange(6.0).reshape(2, 3)
out, (grad,) = call_directly(Sum, x, 1)
assert_close(out.numpy(), [3.0, 12.0])
assert grad.shape == (2, 3) and np.allclose(grad.numpy(), 1.0), grad
assert gradcheck(lambda t: Sum.apply(t, 0), tl.randn(3, 4, requires_grad=True))
# Exact, not estimated: the gradient must not change at inputs scaled by 2**50.
assert_gradient_scales(lambda t: Sum.apply(t, 0), [tl.randn(3, 4)], 0)
print("Sum: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2_broadcasting", "test_sum", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "mean", "locked": false, "schema_version": 3, "solution": true}
class Mean(Function):
    @staticmethod
    def forward(ctx, x, dim):
        ### BEGIN SOLUTION
        ctx.shape, ctx.dim = x.shape, dim
        return x.mean(dim)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        return grad_output.unsqueeze(ctx.dim).expand(*ctx.shape) / ctx.shape[ctx.dim]
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mean", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.arange(6.0).reshape(2, 3)
out, (grad,) = call_directly(Mean, x, 0)
assert_close(out.numpy(), [1.5, 2.5, 3.5])
assert grad.shape == (2, 3) and np.allclose(grad.numpy(), 0.5), grad
assert gradcheck(lambda t: Mean.apply(t, 1), tl.randn(3, 4, requires_grad=True))
# Exact, not estimated: the gradient must not change at inputs scaled by 2**50.
assert_gradient_scales(lambda t: Mean.apply(t, 1), [tl.randn(3, 4)], 0)
print("Mean: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2_broadcasting", "test_mean", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "matmul_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. Batched MatMul
#
# For $C = AB$ with $A$ of shape $(\ldots, n, k)$ and $B$ of shape $(\ldots, k, m)$:
# $\partial L/\partial A = G B^\top$ and $\partial L/\partial B = A^\top G$, transposing the last
# two dimensions. Batch dimensions broadcast like any other, so `unbroadcast` both results.
# Check the shapes: on non-square matrices a misplaced transpose cannot go unnoticed.

# %% nbgrader={"grade": false, "grade_id": "matmul", "locked": false, "schema_version": 3, "solution": true}
class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a @ b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        grad_a = grad_output @ b.transpose(-1, -2)
        grad_b = a.transpose(-1, -2) @ grad_output
        return unbroadcast(grad_a, a.shape), unbroadcast(grad_b, b.shape)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_matmul", "locked": true, "points": 2, "schema_version": 3, "solution": false}
a, b = tl.randn(2, 3, 4), tl.randn(4, 5)
out, (grad_a, grad_b) = call_directly(MatMul, a, b)
assert out.shape == (2, 3, 5), out.shape
assert grad_a.shape == (2, 3, 4) and grad_b.shape == (4, 5), (grad_a.shape, grad_b.shape)
assert_close(grad_b.numpy(), a.numpy().sum(axis=(0, 1))[:, None] * np.ones((1, 5)))
assert gradcheck(MatMul.apply, tl.randn(2, 3, 4, requires_grad=True), tl.randn(4, 5, requires_grad=True))
# Exact, not estimated: MatMul's gradients must not change at inputs scaled by 2**50.
for i in (0, 1):
    assert_gradient_scales(MatMul.apply, [tl.randn(2, 3, 4), tl.randn(4, 5)], i)
print("MatMul: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2_broadcasting", "test_matmul", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "layout_md", "locked": true, "schema_version": 3, "solution": false}
# ## 5. Permute and View
#
# Layout operations move elements without changing them, so the gradient moves them back:
# `Permute` by the inverse permutation (`np.argsort(dims)` gives it), `View` by reshaping to the
# input's shape.

# %% nbgrader={"grade": false, "grade_id": "permute", "locked": false, "schema_version": 3, "solution": true}
class Permute(Function):
    @staticmethod
    def forward(ctx, x, dims):
        ### BEGIN SOLUTION
        ctx.inverse = tuple(int(d) for d in np.argsort(dims))
        return x.permute(*dims)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        return grad_output.permute(*ctx.inverse)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_permute", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.randn(2, 3, 4)
out, (grad,) = call_directly(Permute, x, (2, 0, 1))
assert out.shape == (4, 2, 3) and grad.shape == (2, 3, 4), (out.shape, grad.shape)
assert gradcheck(lambda t: Permute.apply(t, (1, 2, 0)), tl.randn(2, 3, 4, requires_grad=True))
# Exact, not estimated: the gradient must not change at inputs scaled by 2**50.
assert_gradient_scales(lambda t: Permute.apply(t, (1, 2, 0)), [tl.randn(2, 3, 4)], 0)
print("Permute: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2_broadcasting", "test_permute", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "view", "locked": false, "schema_version": 3, "solution": true}
class View(Function):
    @staticmethod
    def forward(ctx, x, shape):
        ### BEGIN SOLUTION
        ctx.shape = x.shape
        return x.reshape(*shape)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        return grad_output.reshape(*ctx.shape)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_view", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.randn(3, 4)
out, (grad,) = call_directly(View, x, (2, 6))
assert out.shape == (2, 6) and grad.shape == (3, 4), (out.shape, grad.shape)
assert gradcheck(lambda t: View.apply(t, (6, 2)), tl.randn(3, 4, requires_grad=True))
# Exact, not estimated: the gradient must not change at inputs scaled by 2**50.
assert_gradient_scales(lambda t: View.apply(t, (6, 2)), [tl.randn(3, 4)], 0)
print("View: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a2_broadcasting", "test_view", globals())
### END HIDDEN TESTS
