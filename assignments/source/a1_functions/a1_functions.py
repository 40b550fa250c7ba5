# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 1: Autograd Functions on tensors
#
# Every differentiable operation in torchlight is a `Function`: a pair of static methods.
#
# - `forward(ctx, *inputs)` computes the result. Grad recording is off inside it, so tensor
#   operations compute directly. Stash what `backward` will need with
#   `ctx.save_for_backward(...)`.
# - `backward(ctx, grad_output)` receives $G = \partial L / \partial \text{out}$, a tensor of the
#   output's shape, and returns one gradient per tensor input, in order:
#   $\partial L / \partial x = G \cdot \partial \text{out} / \partial x$ (elementwise here).
#
# You call a Function with `MyFunction.apply(x, ...)`; the engine records it in the graph and
# calls your `backward` during `.backward()`.
#
# **How you are graded.** Each test cell shows *visible tests* you can run yourself. The grade
# comes from *hidden checks* run by the autograder outside your notebook: your Functions are
# called on random float64 inputs of several non-square shapes, and the outputs and gradients are
# compared with reference values at a tolerance of about $10^{-12}$, and with central
# differences. A gradient estimated numerically (by finite differences) cannot pass: every item
# also runs on inputs where finite differences carry no information (huge values, where $x + h$
# rounds back to $x$; values where $f(x + h)$ overflows), and so does one visible test of each
# cell. Derive each gradient with the chain rule. Write each answer in its own answer cell.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import hashlib
import os

import numpy as np

import torchlight as tl
from torchlight.autograd import Function, gradcheck
from torchlight.testing import assert_close, assert_exact, assert_gradient_scales

tl.manual_seed(0)

# Your variant: section 5 draws its constant c from your student id (the grader uses the id of
# the submission's owner). Outside a course (`make homework`) you are "learner".
STUDENT = os.environ.get("TORCHLIGHT_STUDENT") or os.environ.get("JUPYTERHUB_USER") or "learner"


def variant(item, choices):
    """Your variant of ``item``: one of ``choices``, drawn from the course and your student id."""
    key = f"torchlight-autograd/a1_functions/{item}/{STUDENT}".encode()
    return choices[int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % len(choices)]


print(f"your variant ({STUDENT}): in section 5, c = {variant('expression', (2, 3, 4, 5))}")

# %% [markdown] nbgrader={"grade": false, "grade_id": "mul_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. Mul
#
# $f(a, b) = a \cdot b$ (elementwise), so $\partial L/\partial a = G \cdot b$ and
# $\partial L/\partial b = G \cdot a$. `a._zip("mul", b)` is the backend primitive for the
# forward pass (private, with an underscore: it records nothing in the graph, which is right
# inside `forward` and wrong anywhere else); plain `a * b` works too.

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
        return grad_output * b, grad_output * a
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mul", "locked": true, "points": 1, "schema_version": 3, "solution": false}
a = tl.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
b = tl.tensor([[4.0, 5.0, 6.0]], requires_grad=True)
out = Mul.apply(a, b)
assert_close(out.detach().numpy(), [[4.0, 10.0, 18.0]])
out.sum().backward()
assert_close(a.grad.numpy(), [[4.0, 5.0, 6.0]])
assert_close(b.grad.numpy(), [[1.0, 2.0, 3.0]])
assert gradcheck(Mul.apply, tl.randn(3, 4, requires_grad=True), tl.randn(3, 4, requires_grad=True))
# Exact, not estimated: Mul is linear in each input, so its gradient must not change when an
# input is scaled by 2**50 (there, x + h rounds back to x and finite differences give 0).
for i in (0, 1):
    assert_gradient_scales(Mul.apply, [tl.randn(3, 4), tl.randn(3, 4)], i)
print("Mul: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1_functions", "test_mul", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "div_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. Div
#
# $f(a, b) = a / b$: $\partial f/\partial a = 1/b$ and $\partial f/\partial b = -a/b^2$.

# %% nbgrader={"grade": false, "grade_id": "div", "locked": false, "schema_version": 3, "solution": true}
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a._zip("div", b)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        return grad_output / b, -grad_output * a / (b * b)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_div", "locked": true, "points": 1, "schema_version": 3, "solution": false} torchlight={"hints": ["Write the quotient rule for each input separately: hold b fixed for a, then a fixed for b.", "The gradient for b has a minus sign and b squared below: -a / b**2, times grad_output.", "backward returns two tensors, in the order forward took its inputs: (for a, for b)."]}
a = tl.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True)
b = tl.tensor([[2.0, 4.0], [-1.0, 0.5]], requires_grad=True)
out = Div.apply(a, b)
assert_close(out.detach().numpy(), [[0.5, -0.5], [-3.0, 8.0]])
out.sum().backward()
assert_close(a.grad.numpy(), [[0.5, 0.25], [-1.0, 2.0]])
assert_close(b.grad.numpy(), [[-0.25, 0.125], [-3.0, -16.0]])
assert gradcheck(Div.apply, tl.randn(2, 3, requires_grad=True), tl.rand(2, 3, requires_grad=True) + 1)
# Exact, not estimated: the gradients at inputs scaled by 2**50 (finite differences give 0 there).
assert_gradient_scales(Div.apply, [tl.randn(2, 3), tl.rand(2, 3) + 1], 0)
assert_gradient_scales(Div.apply, [tl.randn(2, 3), tl.rand(2, 3) + 1], 1, power=-2)
print("Div: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1_functions", "test_div", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "unary_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. Exp, Log, Sigmoid, ReLU, Tanh
#
# One input each. Save whatever makes `backward` cheapest: for $e^x$ and $\sigma(x)$ and
# $\tanh x$ the *output* is all the derivative needs:
#
# | $f(x)$ | $f'(x)$ | primitive |
# |---|---|---|
# | $e^x$ | $e^x$ | `x._map("exp")` |
# | $\ln x$ | $1/x$ | `x._map("log")` |
# | $\sigma(x) = 1/(1+e^{-x})$ | $\sigma(x)(1-\sigma(x))$ | `x._map("sigmoid")` |
# | $\max(x, 0)$ | $1$ if $x > 0$ else $0$ | `x._map("relu")` |
# | $\tanh x$ | $1 - \tanh^2 x$ | `x._map("tanh")` |
#
# A comparison such as `x > 0` gives a boolean tensor; multiplying by it keeps or zeroes entries.

# %% nbgrader={"grade": false, "grade_id": "exp", "locked": false, "schema_version": 3, "solution": true}
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        out = x._map("exp")
        ctx.save_for_backward(out)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (out,) = ctx.saved_tensors
        return grad_output * out
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_exp", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.tensor([0.0, 1.0, -1.0], requires_grad=True)
out = Exp.apply(x)
assert_close(out.detach().numpy(), np.exp([0.0, 1.0, -1.0]))
(out * tl.tensor([1.0, 2.0, 3.0])).sum().backward()
assert_close(x.grad.numpy(), [1.0, 2 * np.e, 3 / np.e])
assert gradcheck(Exp.apply, tl.randn(3, 4, requires_grad=True))
# Exact, not estimated: just below exp's overflow, exp(x + h) is inf for every step h >= 1e-5.
x = tl.tensor([709.782705, 709.78271], requires_grad=True)
g = np.array([0.5, -1.0])
Exp.apply(x).backward(tl.tensor(g))
assert_exact(x.grad, g * np.exp(x.detach().numpy()))
print("Exp: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1_functions", "test_exp", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "log", "locked": false, "schema_version": 3, "solution": true}
class Log(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        return x._map("log")
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return grad_output / x
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_log", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.tensor([1.0, 2.0, 4.0], requires_grad=True)
out = Log.apply(x)
assert_close(out.detach().numpy(), np.log([1.0, 2.0, 4.0]))
out.sum().backward()
assert_close(x.grad.numpy(), [1.0, 0.5, 0.25])
assert gradcheck(Log.apply, tl.rand(3, 4, requires_grad=True) + 0.5)
# Exact, not estimated: d log(cx)/dx = (1/c) d log(x)/dx, checked at c = 2**50.
assert_gradient_scales(Log.apply, [tl.rand(3, 4) + 0.5], 0, power=-1)
print("Log: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1_functions", "test_log", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "sigmoid", "locked": false, "schema_version": 3, "solution": true}
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        out = x._map("sigmoid")
        ctx.save_for_backward(out)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (out,) = ctx.saved_tensors
        return grad_output * out * (1 - out)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sigmoid", "locked": true, "points": 1, "schema_version": 3, "solution": false} torchlight={"hints": ["sigma'(x) = sigma(x) (1 - sigma(x)): save the output of forward, not its input.", "For large x, 1 - sigma(x) computed from exp(-x) loses every digit; the saved output gives it exactly enough."]}
x = tl.tensor([0.0, 2.0], requires_grad=True)
out = Sigmoid.apply(x)
assert_close(out.detach().numpy(), 1 / (1 + np.exp([-0.0, -2.0])))
out.sum().backward()
s = 1 / (1 + np.exp(-2.0))
assert_close(x.grad.numpy(), [0.25, s * (1 - s)])
assert gradcheck(Sigmoid.apply, tl.randn(3, 4, requires_grad=True))
# Exact, not estimated: near x = 34, sigmoid(x + h) - sigmoid(x - h) is less than one unit in
# the last place of a double, so finite differences give 0 or a multiple of 5.5e-15.
x = tl.tensor([33.2, 33.6, 34.0, 34.3], requires_grad=True)
g = np.array([1.0, -0.5, 2.0, 1.5])
Sigmoid.apply(x).backward(tl.tensor(g))
e = np.exp(-x.detach().numpy())
assert_exact(x.grad, g * e / (1 + e) ** 2, atol=4 * np.finfo(float).eps * np.abs(g))
print("Sigmoid: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1_functions", "test_sigmoid", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "relu", "locked": false, "schema_version": 3, "solution": true}
class ReLU(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        return x._map("relu")
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return grad_output * (x > 0)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_relu", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.tensor([-1.0, 0.5, 2.0], requires_grad=True)
out = ReLU.apply(x)
assert_close(out.detach().numpy(), [0.0, 0.5, 2.0])
(out * tl.tensor([5.0, 6.0, 7.0])).sum().backward()
assert_close(x.grad.numpy(), [0.0, 6.0, 7.0])
# Exact, not estimated: ReLU(cx) = c ReLU(x) for c > 0, so its gradient must not change at 2**50 x.
assert_gradient_scales(ReLU.apply, [tl.randn(3, 4)], 0)
print("ReLU: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1_functions", "test_relu", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "tanh", "locked": false, "schema_version": 3, "solution": true}
class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        out = x._map("tanh")
        ctx.save_for_backward(out)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (out,) = ctx.saved_tensors
        return grad_output * (1 - out * out)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_tanh", "locked": true, "points": 1, "schema_version": 3, "solution": false}
x = tl.tensor([0.0, 1.0], requires_grad=True)
out = Tanh.apply(x)
assert_close(out.detach().numpy(), np.tanh([0.0, 1.0]))
out.sum().backward()
assert_close(x.grad.numpy(), [1.0, 1 - np.tanh(1.0) ** 2])
assert gradcheck(Tanh.apply, tl.randn(3, 4, requires_grad=True))
# Exact, not estimated: near |x| = 17.5, tanh(x + h) - tanh(x - h) is less than one unit in the
# last place of a double, so finite differences give 0 or a multiple of 5.5e-15.
x = tl.tensor([17.4, -17.6, 17.9], requires_grad=True)
g = np.array([1.0, 2.0, -1.0])
Tanh.apply(x).backward(tl.tensor(g))
e = np.exp(x.detach().numpy())
assert_exact(x.grad, g * 4 / (e + 1 / e) ** 2, atol=4 * np.finfo(float).eps * np.abs(g))
print("Tanh: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1_functions", "test_tanh", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "pow_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. Pow
#
# $f(a, b) = a^b$ for $a > 0$, with gradients for *both* inputs:
# $\partial f/\partial a = b\,a^{b-1}$ and $\partial f/\partial b = a^b \ln a$.

# %% nbgrader={"grade": false, "grade_id": "pow", "locked": false, "schema_version": 3, "solution": true}
class Pow(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        out = a._zip("pow", b)
        ctx.save_for_backward(a, b, out)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b, out = ctx.saved_tensors
        return grad_output * b * a._zip("pow", b - 1), grad_output * out * a._map("log")
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_pow", "locked": true, "points": 2, "schema_version": 3, "solution": false} torchlight={"hints": ["Two inputs, two gradients: one for the base a and one for the exponent b.", "d(a**b)/da = b * a**(b - 1); d(a**b)/db = a**b * log(a).", "Save what forward computed (a, b and the output) and reuse it: a**b is the output itself."]}
a = tl.tensor([2.0, 3.0], requires_grad=True)
b = tl.tensor([3.0, 0.5], requires_grad=True)
out = Pow.apply(a, b)
assert_close(out.detach().numpy(), [8.0, np.sqrt(3.0)])
out.sum().backward()
assert_close(a.grad.numpy(), [12.0, 0.5 / np.sqrt(3.0)])
assert_close(b.grad.numpy(), [8 * np.log(2.0), np.sqrt(3.0) * np.log(3.0)])
assert gradcheck(Pow.apply, tl.rand(2, 3, requires_grad=True) + 0.5, tl.randn(2, 3, requires_grad=True))
# Exact, not estimated: a just above 1 and b near 2**50 give ordinary powers, but b + h rounds
# back to b, and a + h overflows a**b, for every step h up to 1e-2.
a = tl.tensor(1 + np.array([1.0, 3.0, 7.0]) * 2.0**-50, requires_grad=True)
b = tl.tensor(2.0**50 * np.array([1.5, -1.25, 1.75]), requires_grad=True)
Pow.apply(a, b).sum().backward()
av, bv = a.detach().numpy(), b.detach().numpy()
assert_exact(a.grad, bv * av ** (bv - 1), atol=1e-12 * np.abs(bv * av ** (bv - 1)).max())
assert_exact(b.grad, av**bv * np.log(av), atol=1e-12 * np.abs(av**bv * np.log(av)).max())
print("Pow: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1_functions", "test_pow", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "expression_md", "locked": true, "schema_version": 3, "solution": false}
# ## 5. A small expression graph
#
# Build
# $$f(x, y) = \log\!\left(e^x + e^y\right) \cdot \sigma(c\,x\,y)$$
# from *your* Functions (`Mul`, `Exp`, `Log`, `Sigmoid`; you may use `+` to add two tensors, and
# `tl.full_like(x, c)` for a tensor filled with $c$). **Your variant**: $c$ is the number the setup cell printed
# for you (it comes from your student id; your classmates have other values, and the hidden
# checks use yours). The engine chains your `backward` methods together: you write no gradient
# code here.

# %% nbgrader={"grade": false, "grade_id": "expression", "locked": false, "schema_version": 3, "solution": true}
def expression(x, y):
    ### BEGIN SOLUTION
    log_sum_exp = Log.apply(Exp.apply(x) + Exp.apply(y))
    scaled = Mul.apply(Mul.apply(x, y), tl.full_like(x, variant("expression", (2, 3, 4, 5))))
    return Mul.apply(log_sum_exp, Sigmoid.apply(scaled))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_expression", "locked": true, "points": 2, "schema_version": 3, "solution": false}
c = variant("expression", (2, 3, 4, 5))  # yours
x = tl.tensor([0.5, -1.0, 2.0], requires_grad=True)
y = tl.tensor([1.5, 0.25, -0.5], requires_grad=True)
out = expression(x, y)
out.sum().backward()
# the same expression with the library's built-in operations
x2, y2 = x.detach().requires_grad_(), y.detach().requires_grad_()
expected = (x2.exp() + y2.exp()).log() * (c * x2 * y2).sigmoid()
expected.sum().backward()
assert_close(out.detach().numpy(), expected.detach().numpy())
assert_close(x.grad.numpy(), x2.grad.numpy())
assert_close(y.grad.numpy(), y2.grad.numpy())
# Exact, not estimated: with x just below exp's overflow, exp(x + h) is inf and
# e^x + e^y + h rounds back to e^x + e^y for every step h, so finite differences cannot pass.
x = tl.tensor([709.7827, 709.782705], requires_grad=True)
y = tl.tensor([0.01, 0.015], requires_grad=True)
expression(x, y).sum().backward()
x2, y2 = x.detach().requires_grad_(), y.detach().requires_grad_()
((x2.exp() + y2.exp()).log() * (c * x2 * y2).sigmoid()).sum().backward()
assert_exact(x.grad, x2.grad, atol=1e-12 * np.abs(x2.grad.numpy()).max())
assert_exact(y.grad, y2.grad, atol=1e-12 * np.abs(y2.grad.numpy()).max())
print(f"expression (your variant, c = {c}): visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1_functions", "test_expression", globals())
### END HIDDEN TESTS
