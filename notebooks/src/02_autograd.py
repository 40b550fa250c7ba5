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
# # Tutorial 2: Autograd
#
# Torchlight uses reverse-mode automatic differentiation over a dynamic computation graph --
# the same system that powers training in every deep learning framework, built from scratch
# in ~200 lines.
#
# Every example below runs as you read it, and prints what the code really computes. Where
# the comment beside an example, or its explanation, says something else, a box marked
# **Erratum** gives the true value and explains why. Each example is also drawn by the
# **graph viewer**, `tl.viz.show(tensor)` (imported below as `viz`). After the basics, the
# tutorial goes further: stepping through `backward()` by hand, and writing (and checking)
# your own `Function`.
#
# The viewer is interactive when the notebook runs in JupyterLab: click a node to see its
# value, gradient and chain-rule step, and press play (or drag the slider) to run backward one
# node at a time. In a saved or exported copy you see a static picture of the same graph.

# %%
import numpy as np

import torchlight as tl
from torchlight import viz  # the graph viewer

tl.manual_seed(0)

# %% [markdown]
# ## How gradients work
#
# Ask for gradients by passing `requires_grad=True` to any factory:

# %%
import torchlight as tl

x = tl.tensor([2.0, 3.0], requires_grad=True)
y = (x ** 2).sum()   # y = x1^2 + x2^2
y.backward()          # seed gradient = 1.0
x.grad                # [4.0, 6.0]  (dy/dx = 2x)

# %% [markdown]
# The result matches the math: $y = x_1^2 + x_2^2$ so $\partial y / \partial x_i = 2 x_i$.

# %%
assert np.allclose(x.grad.numpy(), 2 * x.detach().numpy())

# %% [markdown]
# Here is the graph of that computation. backward frees the values the graph saved, so we
# build it again to look at it; `step=None` shows every gradient filled in (the viewer
# computes them on the side and leaves `x.grad` alone). Green is a leaf, orange the root,
# purple a Function; each tensor shows its value and its gradient.

# %%
x = tl.tensor([2.0, 3.0], requires_grad=True)
y = (x ** 2).sum()
viz.show(y, names={"x": x, "y": y}, step=None)

# %% [markdown]
# ## The computation graph
#
# Every intermediate tensor carries a `History` node recording which function produced it,
# and from what inputs:

# %%
a = tl.tensor([1.0, 2.0], requires_grad=True)
b = a + a          # History: Add, parents=(a, a)
c = b * a          # History: Mul, parents=(b, a)
c.backward()
a.grad             # [4.0, 8.0]  --  (d(b*a)/da = b + a*1 = 2a + a)

# %% [markdown]
# The History nodes are there to inspect, under the names used above:

# %%
print(b.history.last_fn.__name__, b.history.parents[0] is a, b.history.parents[1] is a)
print(c.history.last_fn.__name__, c.history.parents[0] is b, c.history.parents[1] is a)

# %% [markdown]
# > **Erratum.** The printed gradient `[4.0, 8.0]` is right, but the explanation next to it is
# > not. `b` depends on `a` too, so the product rule needs $\partial b / \partial a = 2$, not 1:
# >
# > $$\frac{\partial (b \cdot a)}{\partial a} = b + a \cdot \frac{\partial b}{\partial a} = 2a + 2a = 4a = [4, 8].$$
# >
# > The comment's "$2a + a$" would give $3a = [3, 6]$. (Also note: `c` has two elements.
# > torchlight seeds a non-scalar root with ones, which is the gradient of `c.sum()`;
# > PyTorch would ask for `c.sum().backward()` or an explicit gradient.)

# %%
assert np.allclose(a.grad.numpy(), 4 * a.detach().numpy())

# %% [markdown]
# In the graph, `a` has **three** edges out: two into `Add` (slots 0 and 1) and one into
# `Mul`. Its gradient is the sum over all three paths -- click `a` in JupyterLab and follow
# the highlighted path to the root.

# %%
a = tl.tensor([1.0, 2.0], requires_grad=True)
b = a + a
c = b * a
viz.show(c, names={"a": a, "b": b, "c": c}, step=None)

# %% [markdown]
# Nodes are cleaned up automatically when nothing references them, so no manual graph
# management is needed. A weak reference (which does not keep its target alive) shows it: the
# intermediate `b` lives exactly as long as something -- here `c`'s History -- refers to it.

# %%
import weakref

a = tl.tensor([1.0, 2.0], requires_grad=True)
c = (a + a) * a
b_ref = weakref.ref(c.history.parents[0])  # the intermediate a + a, which has no name
print("b alive while c exists:", b_ref() is not None)
del c
print("b alive after del c:   ", b_ref() is not None)

# %% [markdown]
# ## `backward()`
#
# The example uses a `model` and a `target`. A model is just a function of tensors
# that require grad; Tutorial 3 builds them from layers. Here is the smallest one, a linear
# map $x w + b$ with weights that require grad:

# %%
tl.manual_seed(0)
w = tl.randn(3, 1, requires_grad=True)
bias = tl.zeros(1, requires_grad=True)


def model(x):
    return x @ w + bias


x = tl.randn(4, 3)
target = tl.randn(4, 1)

# %%
loss = model(x).mse_loss(target)
loss.backward()          # populates .grad on every leaf with requires_grad=True
print(loss)
print(w.grad)
print(bias.grad)

# %% [markdown]
# For a mean squared error $L = \frac{1}{n}\sum_i (x_i w + b - t_i)^2$ the gradients have a
# closed form, $\partial L/\partial w = \frac{2}{n} X^\top (Xw + b - t)$ and
# $\partial L/\partial b = \frac{2}{n}\sum_i (x_i w + b - t_i)$. backward agrees:

# %%
X, W, T = x.numpy(), w.detach().numpy(), target.numpy()
residual = X @ W + bias.detach().numpy() - T
assert np.allclose(w.grad.numpy(), 2 / 4 * X.T @ residual)
assert np.allclose(bias.grad.numpy(), 2 / 4 * residual.sum(axis=0))
print("matches the closed form")

# %% [markdown]
# The model's graph: `x` and `target` are constants (grey; no gradient flows into them),
# `w` and `bias` are the leaves that receive gradients.

# %%
loss = model(x).mse_loss(target)
viz.show(loss, names={"x": x, "w": w, "bias": bias, "target": target, "loss": loss}, step=None)

# %% [markdown]
# The root tensor receives `deriv = 1.0` (or any explicit gradient you pass as the first
# argument). The explicit gradient is $\partial L / \partial\,\text{root}$ for some later
# loss $L$; for `y = x * x` and gradient `[1, 0]`, only the first element's path counts:

# %%
x = tl.tensor([2.0, 3.0], requires_grad=True)
y = x * x
y.backward(tl.tensor([1.0, 0.0]))
x.grad  # [2 * 2 * 1, 2 * 3 * 0]

# %% [markdown]
# backward frees the values each Function saved, so a second backward through the same graph
# is an error that says what to do; `retain_graph=True` keeps them:

# %%
y = (x * x).sum()
y.backward()
try:
    y.backward()
except RuntimeError as error:
    print("RuntimeError:", error)

# %% [markdown]
# ## Leaf vs. intermediate tensors
#
# Only leaf tensors (created by the user, not by a function) accumulate gradients:

# %%
a = tl.tensor([1.0, 2.0], requires_grad=True)  # leaf
b = a * 2                                       # intermediate
b.backward()
a.grad    # [2., 2.] (not [2.0, 4.0]: see the erratum below)

# %% [markdown]
# > **Erratum.** Not `[2.0, 4.0]`, as is often expected: the true gradient is `[2.0, 2.0]`, as
# > printed above. $b = 2a$, so $\partial b_i / \partial a_i = 2$ for every element -- the gradient of
# > a linear map does not depend on `a`. (`[2.0, 4.0]` is the value of `b`, not of `a.grad`.)

# %%
assert a.grad.tolist() == [2.0, 2.0]

# %%
a = tl.tensor([1.0, 2.0], requires_grad=True)
b = a * 2
viz.show(b, names={"a": a, "b": b}, step=None)  # the constant 2 becomes a grey node

# %%
try:
    b.grad    # AttributeError -- not a leaf
except AttributeError as error:
    print("AttributeError:", error)

# %% [markdown]
# Detach a leaf from the graph:

# %%
c = a.detach()    # shares storage, no grad
print(c, c.requires_grad, c.is_leaf)
print("shares storage with a:", np.shares_memory(c.numpy(), a.detach().numpy()))

# %% [markdown]
# ## Detach, zero_grad, cloning
#
# Gradients **accumulate**: each backward adds to `.grad`. That is what you want when a tensor
# is used in several places, but between training steps the old gradient must be cleared:

# %%
x = tl.tensor([1.0, 2.0], requires_grad=True)
(x * 3).sum().backward()
(x * 3).sum().backward()
print(x.grad)  # 3 + 3

# %%
x.zero_grad_()                          # in-place: sets grad to zeros
detached = x.detach()                   # new tensor, same data, no graph
cloned = x.clone()                      # fresh copy in the graph
print(x.grad)
print(detached)
print(cloned)

# %% [markdown]
# `clone()` copies the values into new storage but stays in the graph, so gradients flow back
# through it; `detach()` shares the storage and cuts the graph:

# %%
(cloned * 5).sum().backward()
print(x.grad)  # d(5 * x)/dx through the clone
print("clone shares storage:", np.shares_memory(cloned.detach().numpy(), x.detach().numpy()))

# %%
x = tl.tensor([1.0, 2.0], requires_grad=True)
cloned = x.clone()
out = (cloned * 5).sum()
viz.show(out, names={"x": x, "cloned": cloned, "out": out}, step=None)  # Copy is in the graph

# %% [markdown]
# ## Checking gradients manually
#
# Use `central_difference()` from `torchlight.autograd` to validate any gradient analytically
# computed by `backward()`:

# %%
from torchlight.autograd import central_difference

def f(x): return (x ** 2).sum()
x_val = [3.0, 4.0]
for i in range(len(x_val)):
    print(central_difference(lambda *xs: f(tl.tensor(xs)), *x_val, arg=i))
# 5.999998...  7.999998...   (true grad = [6.0, 8.0])

# %% [markdown]
# > **Erratum.** The comment's `5.999998...  7.999998...` are not what this code prints: the
# > digits after the 6th depend on the dtype and the step `epsilon`. In float64 with the
# > default `epsilon=1e-6`, torchlight prints the values above, off from $[6, 8]$ by about
# > $10^{-9}$. Those few wrong digits are rounding error, not a bug. The estimate is
# >
# > $$\frac{f(x + \epsilon) - f(x - \epsilon)}{2\epsilon},$$
# >
# > whose error has two parts: a **truncation** part $\approx \epsilon^2 f'''/6$ (zero for a
# > quadratic like this $f$), and a **rounding** part $\approx u\,|f| / \epsilon$, where
# > $u \approx 10^{-16}$ is float64's precision: subtracting two nearly equal numbers loses
# > digits, and dividing by a small $\epsilon$ magnifies what is lost.

# %% [markdown]
# A cubic shows both parts. For $g(x) = x^3$ at $x = 2$ the exact central difference is
# $3x^2 + \epsilon^2 = 12 + \epsilon^2$: large steps are off by $\epsilon^2$, tiny steps by
# rounding. The best step for float64 is near $10^{-5}$ (multiplications are exact IEEE
# operations, so these digits are the same on every machine):

# %%
def g(v):
    return v * v * v


for eps in [1e-1, 1e-3, 1e-5, 1e-7, 1e-9, 1e-11]:
    estimate = central_difference(g, 2.0, epsilon=eps)
    print(f"epsilon={eps:.0e}   estimate={estimate:.12f}   error={estimate - 12:+.1e}")

# %% [markdown]
# And the check this section is about -- backward against central differences:

# %%
x = tl.tensor(x_val, requires_grad=True)
f(x).backward()
numerical = [central_difference(lambda *xs: f(tl.tensor(xs)), *x_val, arg=i) for i in range(2)]
print(x.grad, numerical)
assert np.allclose(x.grad.numpy(), numerical, atol=1e-6)

# %% [markdown]
# ## Autograd internals (under the hood)
#
# | Class | Role |
# |---|---|
# | `Context` | Scratchpad a `Function` uses to stash values for `backward()`. |
# | `History` | Records which function built a tensor, with its context and parent tensors. |
# | `Function` | The `forward`/`backward` pair (e.g. `Add`, `Mul`, `MatMul`). |
# | `backpropagate(root, deriv)` | Walks the graph in reverse, accumulating `.grad` into leaves. |
#
# The engine is a standard stack: `topological_sort` orders the graph from leaves to root,
# then `backpropagate` walks it backwards calling each function's `chain_rule`.
#
# Each piece is importable. Here they are on the graph of the computation-graph example:

# %%
from torchlight.autograd import backpropagate, topological_sort

a = tl.tensor([1.0, 2.0], requires_grad=True)
b = a + a
c = b * a
order = topological_sort(c)
print([("leaf a" if t is a else t.history.last_fn.__name__) for t in order])

# %% [markdown]
# `a` is used twice but appears once: the sort visits each tensor once, leaves first.
# `c.history.ctx` is the `Context` of the `Mul` that made `c`; it saved both inputs, because
# $\partial (b a)/\partial b = a$ and $\partial (b a)/\partial a = b$:

# %%
print(c.history)
print([t.tolist() for t in c.history.ctx.saved_tensors])

# %% [markdown]
# `c.backward()` is `backpropagate(c, ones)`:

# %%
backpropagate(c, tl.ones(2))
a.grad

# %% [markdown]
# See the docs site's Autograd API page for full signatures (`make docs-serve`, then
# <http://127.0.0.1:8000/autograd.html>), or `help(tl.autograd)` here.

# %% [markdown]
# ---
# ## Going further
#
# The basics end here. The rest of this tutorial opens the engine up.
#
# ## Stepping through backward
#
# `backpropagate` visits the tensors in reverse topological order. When a tensor's turn comes,
# every tensor that used it has already sent its share, so its gradient is complete; it then
# calls `history.chain_rule(grad)`, which runs its Function's `backward` and returns one
# `(input, gradient)` pair per input. The loop below is that engine, printing as it goes
# (the real one is `backpropagate` in `torchlight/autograd/engine.py`):

# %%
def step_through(root, names):
    """Run backward on `root` one tensor at a time, printing every chain-rule step."""
    name = {id(t): n for n, t in names.items()}
    grads = {id(root): tl.ones_like(root)}
    with tl.no_grad():  # the gradient computations themselves are not recorded
        for step, node in enumerate(reversed(topological_sort(root)), start=1):
            grad = grads.pop(id(node))
            if node.history is None:
                print(f"step {step}: {name[id(node)]} is a leaf; its .grad becomes {grad.tolist()}")
                continue
            fn = node.history.last_fn.__name__
            print(f"step {step}: {name[id(node)]} = {fn}(...) has gradient {grad.tolist()}")
            for parent, share in node.history.chain_rule(grad):
                print(f"          {fn}.backward sends {share.tolist()} to {name[id(parent)]}")
                grads[id(parent)] = grads[id(parent)] + share if id(parent) in grads else share


a = tl.tensor([1.0, 2.0], requires_grad=True)
b = a + a
c = b * a
step_through(c, {"a": a, "b": b, "c": c})

# %% [markdown]
# Read it against the erratum above. `Mul` sends $\text{grad} \cdot a = [1, 2]$ to `b` and
# $\text{grad} \cdot b = [2, 4]$ straight to `a`; then `Add` passes `b`'s gradient `[1, 2]` on to
# `a` **twice**, once per use in `a + a`. `a` is visited last, when all three shares have
# arrived: $[2, 4] + [1, 2] + [1, 2] = [4, 8] = 4a$.

# %% [markdown]
# The viewer replays the same steps. Below it starts at step 0 (no gradient computed yet:
# dashed boxes); in JupyterLab press play or drag the slider, and watch each gradient fill in.
# "Not computed yet" is drawn differently from a gradient of zero.

# %%
viewer = viz.show(c, names={"a": a, "b": b, "c": c}, step=0)
viewer

# %% [markdown]
# The viewer is an ordinary object: setting `viewer.step` moves it, `viewer.select(a)`
# opens `a`'s info panel. For a saved copy of this notebook, here are steps 1 and 2 as
# static pictures (`viz.draw` makes a picture without any widget):

# %%
print(viewer.view.step_text(1))
viz.draw(c, names={"a": a, "b": b, "c": c}, step=1)

# %%
print(viewer.view.step_text(2))
viz.draw(c, names={"a": a, "b": b, "c": c}, step=2)

# %% [markdown]
# ## Writing your own Function
#
# A `Function` is a pair of static methods. `forward(ctx, *inputs)` computes the result (with
# recording switched off, so plain tensor ops just compute) and saves what backward needs;
# `backward(ctx, grad_output)` returns
# $\text{grad\_output} \cdot \partial f/\partial \text{input}$, one per input. Call it with
# `.apply`.
#
# Softplus, $f(x) = \log(1 + e^x)$, a smooth ReLU, has derivative
# $f'(x) = e^x / (1 + e^x) = \sigma(x)$, the sigmoid:

# %%
from torchlight.autograd import Function


class Softplus(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x.exp() + 1).log()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * x.sigmoid()


x = tl.tensor([-2.0, 0.0, 3.0], requires_grad=True)
y = Softplus.apply(x)
print(y)
y.sum().backward()
print(x.grad)

# %% [markdown]
# At $x = 0$ softplus is $\log 2 \approx 0.6931$ and its slope is $\sigma(0) = 0.5$:

# %%
assert abs(y[1].item() - np.log(2)) < 1e-12
assert abs(x.grad[1].item() - 0.5) < 1e-12

# %% [markdown]
# Functions with several inputs return one gradient per input. The engine handles
# broadcasting: if an input was broadcast in forward, the gradient backward returns has the
# broadcast shape, and the engine sums it back to the input's shape. So $h(a, b) =
# \sqrt{a^2 + b^2}$ can be written with its math only, and still works for a vector `a` and a
# one-element `b`:

# %%
class Hypot(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = (a * a + b * b).sqrt()
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        a, b, out = ctx.saved_tensors
        return grad_output * a / out, grad_output * b / out


a = tl.tensor([3.0, 6.0, 0.0], requires_grad=True)
b = tl.tensor([4.0], requires_grad=True)
h = Hypot.apply(a, b)
h.sum().backward()
print(h, a.grad, b.grad, sep="\n")

# %% [markdown]
# `b.grad` has `b`'s shape (1,): the three contributions $4/5 + 4/\sqrt{52} + 4/4$ were summed.

# %%
assert np.isclose(b.grad.item(), 4 / 5 + 4 / np.sqrt(52) + 1)

# %% [markdown]
# A custom Function is a node like any other in the graph:

# %%
a = tl.tensor([3.0, 6.0, 0.0], requires_grad=True)
b = tl.tensor([4.0], requires_grad=True)
h = Hypot.apply(a, b)
total = h.sum()
viz.show(total, names={"a": a, "b": b, "h": h, "total": total}, step=None)

# %% [markdown]
# ## Checking it with `central_difference` and `gradcheck`
#
# A hand-written backward is easy to get wrong, so check it. `central_difference` checks one
# partial derivative of a function of numbers:

# %%
def softplus_of(v):
    return Softplus.apply(tl.tensor(v)).item()


estimate = central_difference(softplus_of, 0.7)
exact = 1 / (1 + np.exp(-0.7))
print(f"central difference {estimate:.8f}, sigmoid(0.7) {exact:.8f}")
assert abs(estimate - exact) < 1e-8

# %% [markdown]
# `gradcheck` does this for every element of every input at once: it builds the whole Jacobian
# twice, once from backward (one backward per output element) and once from central
# differences (two forwards per input element), and compares them entry by entry. Inputs must
# be float64. It returns `True`, or raises `GradcheckError` naming what differs:

# %%
from torchlight.autograd import GradcheckError, gradcheck

x = tl.tensor([-2.0, 0.0, 3.0], requires_grad=True)
print(gradcheck(Softplus.apply, x))
a = tl.tensor([3.0, 6.0, 1.0], requires_grad=True)
b = tl.tensor([4.0], requires_grad=True)
print(gradcheck(Hypot.apply, a, b))

# %% [markdown]
# Now a plausible mistake: a backward that uses $1/(1 + e^{x})$ -- which is $\sigma(-x)$, not
# $\sigma(x)$. Both give 0.5 at $x = 0$, so a test only at zero would pass. gradcheck does not:

# %%
class BuggySoftplus(Softplus):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output / (x.exp() + 1)


try:
    gradcheck(BuggySoftplus.apply, x)
except GradcheckError as error:
    print(error)

# %% [markdown]
# ## Writing the engine yourself
#
# Assignment 1b (`a1b_engine`) asks you to write the engine: `topological_sort(root)`,
# `backpropagate(root, deriv)` and `central_difference`, with the names and signatures above,
# from `history.chain_rule` and `accumulate_grad` alone. Four traps, each shown here on the
# library's own pieces.
#
# **1. The order.** A tensor's gradient is complete only once every tensor that uses it has
# sent its share. In this diamond `a` feeds `b` and `c`, and both feed `d`. A depth-first walk
# that appends a tensor when it first *reaches* it (pre-order) and reverses the list puts `b`
# before its parent `a`, so walking the list backwards visits `a` before `b` has sent its
# share. Appending a tensor only once all its parents are in the list (post-order, as
# `topological_sort` does) cannot:

# %%
def pre_order(root):
    """A wrong sort: each tensor appended when first reached, the list reversed."""
    order, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen and node.requires_grad:
            seen.add(id(node))
            order.append(node)
            stack.extend(node.history.recorded_parents() if node.history else ())
    return order[::-1]


def walk(root, order):
    """backpropagate's loop, on a given order: returns each leaf's gradient."""
    grads, leaves = {id(root): tl.ones_like(root)}, {}
    with tl.no_grad():
        for node in reversed(order):
            grad = grads.pop(id(node), None)
            if grad is None:  # visited before any user sent its share: the bug
                continue
            if node.history is None:
                leaves[id(node)] = grad
                continue
            for parent, share in node.history.chain_rule(grad):
                grads[id(parent)] = grads[id(parent)] + share if id(parent) in grads else share
    return leaves


a = tl.tensor([0.5, -1.0], requires_grad=True)
b, c = a.tanh(), a * 3.0
d = b * c
names = {id(a): "a", id(b): "b", id(c): "c", id(d): "d"}
for sort in (pre_order, topological_sort):
    order = sort(d)
    grad = walk(d, order)[id(a)].numpy().round(6)
    print(f"{sort.__name__:16s} {[names[id(t)] for t in order]}  a.grad = {grad.tolist()}")
d.backward(tl.ones(2))
print(f"{'d.backward()':16s} {'':20s}  a.grad = {a.grad.numpy().round(6).tolist()}")

# %% [markdown]
# **2. Recursion.** The natural way to write post-order is a recursive `visit`, and it is
# right until the graph is deep: Python stops a recursion at `sys.getrecursionlimit()` calls.
# A recurrent network unrolled over a long sequence is such a graph. The assignment's sort must
# handle a chain of 100,000 ops; here is one of 5,000:

# %%
import sys


def recursive_sort(root):
    order, seen = [], set()

    def visit(node):
        if id(node) in seen or not node.requires_grad:
            return
        seen.add(id(node))
        for parent in node.history.recorded_parents() if node.history else ():
            visit(parent)
        order.append(node)

    visit(root)
    return order


x = tl.tensor([1.0], requires_grad=True)
t = x
for _ in range(5_000):
    t = t * 0.999
print("recursion limit:", sys.getrecursionlimit())
try:
    recursive_sort(t)
except RecursionError as error:
    print("recursive_sort:", type(error).__name__)
print("topological_sort:", len(topological_sort(t)), "tensors")

# %% [markdown]
# The library's sort keeps its own stack of `(tensor, iterator over its parents)` pairs instead
# of Python's call stack (`torchlight/autograd/engine.py`).
#
# **3. Accumulate, never overwrite.** `a + a` uses `a` twice, and `chain_rule` sends it two
# shares; its gradient is their sum. Keeping only the last one gives half:

# %%
a = tl.tensor([1.0, 2.0], requires_grad=True)
b = a + a
print([(parent is a, share.tolist()) for parent, share in b.history.chain_rule(tl.ones(2))])

# %% [markdown]
# Only leaves keep what they receive (`accumulate_grad`); every other tensor passes its
# gradient on and keeps none (`b.grad` raises, as in PyTorch).
#
# **4. Central, not one-sided.** A one-sided difference $(f(x + \epsilon) - f(x))/\epsilon$ is
# off by about $\epsilon f''(x)/2$, the central one by $\epsilon^2 f'''(x)/6$. For $x^3$ at 1
# (derivative 3, $f'' = 6$, $f''' = 6$):

# %%
for eps in (1e-1, 1e-2, 1e-3):
    one_sided = ((1 + eps) ** 3 - 1) / eps
    central = central_difference(lambda v: v**3, 1.0, epsilon=eps)
    print(f"eps={eps:g}: one-sided error {one_sided - 3:.2e}, central error {central - 3:.2e}")

# %% [markdown]
# ## Summary
#
# - `requires_grad=True` makes a leaf; every op on it records a `History(last_fn, ctx, inputs)`.
# - `backward()` sorts the graph topologically and applies the chain rule from the root back,
#   summing the contributions of every path; leaves accumulate into `.grad`.
# - Intermediate tensors keep no `.grad`; `detach()` cuts the graph, `clone()` copies within it,
#   `zero_grad_()` clears accumulated gradients.
# - A custom `Function` is a `forward(ctx, ...)`/`backward(ctx, grad_output)` pair; the engine
#   takes care of broadcasting and bookkeeping.
# - Check every backward with `central_difference` and `gradcheck` in float64; the error of a
#   central difference is truncation ($\epsilon^2$) plus rounding ($u/\epsilon$).
# - Three statements of the examples' comments were corrected by errata: the explanation of
#   `d(b*a)/da` ($4a$), the gradient of `a * 2` (`[2.0, 2.0]`), and the printed central
#   differences (they depend on dtype and step).
#
# ## Exercises
#
# 1. Compute by hand the gradient of `((a * a).sum() + a.sum()) ** 2` for `a = [1.0, 2.0]`,
#    then check with backward and with `step_through`.
# 2. Write `Exp` as a Function that saves its **output** instead of its input. Why is that
#    enough? Check it with `gradcheck`.
# 3. Our `Softplus.forward` overflows for large `x` (try `x = 1000.0`). Rewrite it as
#    $\max(x, 0) + \log(1 + e^{-|x|})$ and check the gradient again.
# 4. Make `Hypot.backward` forget the broadcasting (return `b`'s gradient summed by hand to a
#    number) -- what does the engine say? What if it returns one gradient instead of two?
# 5. Find the step `epsilon` that minimizes the central-difference error for $g(x) = x^3$ at
#    $x = 2$ in float64. Why is it near $u^{1/3}$?
#
# ## Next
#
# Learn to compose gradient-tracked ops into neural networks: [Tutorial 3: Neural networks](03_neural_networks.ipynb).
