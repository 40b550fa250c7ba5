# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 1b: The autograd engine
#
# In assignment 1 you wrote Functions, and the engine chained their `backward` methods for
# you. Here you write that engine: the three functions of the Tutorial 2 page's contract,
# with its names and signatures.
#
# - `topological_sort(root)`: the tensors that lead to `root` and require grad, **leaves first,
#   root last**, each once, every tensor after all of its parents.
# - `backpropagate(root, deriv)`: sends $\partial L/\partial\,\text{root} = $ `deriv` back
#   through the graph and accumulates $\partial L/\partial\,\text{leaf}$ into each leaf's `.grad`.
# - `central_difference(f, *vals, arg=0, epsilon=1e-6)`: the numerical check of it all.
#
# Then you train a small classifier with your engine.
#
# What you build on (Tutorial 2, *Autograd internals* and *Stepping through backward*):
#
# - a tensor made by a Function has `t.history`, a `History(last_fn, ctx, parents)`; a leaf
#   has `t.history is None`; `t.requires_grad` says whether gradients flow to it;
# - `t.history.recorded_parents()` are its parents (as `t.history.parents`, but right even
#   after an in-place change);
# - `t.history.chain_rule(deriv)` runs the Function's `backward` on `deriv`
#   ($\partial L/\partial t$) and returns a list of `(parent, share)` pairs: one per parent
#   that requires grad, each share already of that parent's shape (broadcasting undone);
# - `leaf.accumulate_grad(g)` adds `g` into `leaf.grad`.
#
# **How you are graded.** Each test cell shows visible tests; the grade comes from hidden checks
# run outside your notebook, on fresh random graphs: diamonds, fan-out and fan-in, leaves used
# twice (`a + a`), constants, leaves that broadcast, non-scalar roots with a random seed
# gradient, and deep chains. Your gradients are compared with the library's engine and with
# central differences. Each item grades one thing: `backpropagate` is checked with a correct
# `topological_sort` put in place of yours (so call `topological_sort(root)` by that name from
# `backpropagate`), and a mistake costs only its own item. The hidden checks' torchlight has
# **no engine of its own**: `Tensor.backward()`, `torchlight.autograd.backpropagate`,
# `topological_sort`, `grad`, `gradcheck` and `central_difference` raise there, and an answer
# that calls them is flagged for review. Write the engine from `chain_rule` and
# `accumulate_grad`.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import numpy as np

import torchlight as tl
from torchlight.testing import assert_close

tl.manual_seed(0)


def assert_topological(order, root):
    """Every tensor after all its parents, each once, and exactly the tensors that require
    grad on the way to `root` (compared with the library's own sort)."""
    from torchlight.autograd import topological_sort as library_sort

    position = {id(t): p for p, t in enumerate(order)}
    assert len(position) == len(order), "a tensor appears twice in the order"
    assert set(position) == {id(t) for t in library_sort(root)}, "not the tensors that lead to root"
    for t in order:
        for parent in t.history.recorded_parents() if t.history else ():
            if parent.requires_grad:
                assert position[id(parent)] < position[id(t)], "a tensor comes before its parent"


# %% [markdown] nbgrader={"grade": false, "grade_id": "sort_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. `topological_sort(root)`
#
# Walk the graph depth first from `root`, and append a tensor to the order only **after all
# of its parents** are in it (post-order). Keep a set of the tensors already seen (by `id`:
# tensors compare elementwise, so `t in some_list` does not do what you want), so that a tensor
# used twice is visited once. Skip tensors that do not require grad: no gradient flows to them.
#
# Not recursion: a chain of 100,000 ops must work, and Python stops a recursion at about 1,000
# calls. Keep your own stack: of `(tensor, iterator over its parents)` pairs, say. Take the
# top pair, advance its iterator to the next parent not yet seen, and push that parent; when
# the iterator is exhausted, all the tensor's parents are in the order: pop it and append it.

# %% nbgrader={"grade": false, "grade_id": "topological_sort", "locked": false, "schema_version": 3, "solution": true}
def topological_sort(root):
    """The tensors that lead to `root` and require grad, leaves first, `root` last."""
    ### BEGIN SOLUTION
    if not root.requires_grad:
        return []
    order, seen = [], {id(root)}
    stack = [(root, iter(root.history.recorded_parents() if root.history else ()))]
    while stack:
        node, parents = stack[-1]
        for parent in parents:
            if parent.requires_grad and id(parent) not in seen:
                seen.add(id(parent))
                h = parent.history
                stack.append((parent, iter(h.recorded_parents() if h else ())))
                break  # the parent's parents first; node's iterator resumes afterwards
        else:  # every parent of node is in the order
            stack.pop()
            order.append(node)
    return order
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_topological_sort", "locked": true, "points": 2, "schema_version": 3, "solution": false}
a = tl.tensor([1.0, 2.0], requires_grad=True)
b = a + a
c = b * a
order = topological_sort(c)
assert [t is x for t, x in zip(order, (a, b, c))] == [True] * 3 and len(order) == 3, order
# a diamond: d uses a twice, through b and c; the constant k requires no grad
k = tl.tensor([3.0, 4.0])
b, c = a.tanh(), a * k
d = b * c
assert_topological(topological_sort(d), d)
assert all(t is not k for t in topological_sort(d)), "a constant is not in the order"
# deep: far past Python's recursion limit
x = tl.tensor([0.5], requires_grad=True)
t = x
for _ in range(10_000):
    t = t * 0.999
order = topological_sort(t)
assert len(order) == 10_001 and order[0] is x and order[-1] is t
print("topological_sort: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1b_engine", "test_topological_sort", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "backpropagate_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. `backpropagate(root, deriv)`
#
# `deriv` is $\partial L/\partial\,\text{root}$, a tensor of the root's shape (for a scalar
# loss, `tl.ones(())`; for a non-scalar root, any gradient the caller chooses). Keep a
# dictionary of the gradients received so far, by `id` of the tensor, starting with
# `{id(root): deriv}`. Then visit the tensors in **reverse** topological order (root first):
#
# 1. a tensor's turn comes only after every tensor that uses it, so its gradient is complete:
#    take it out of the dictionary;
# 2. a leaf (`history is None`) adds it into its `.grad` (`accumulate_grad`). Only leaves do: a
#    tensor made by a Function keeps no `.grad` (as in PyTorch);
# 3. any other tensor passes it on: for each `(parent, share)` of
#    `node.history.chain_rule(d)`, **add** `share` to the parent's entry (a parent used twice,
#    by two tensors or twice by one as in `a + a`, receives several shares: their sum is its
#    gradient; overwriting keeps only the last).
#
# Do it under `with tl.no_grad():`, so that the backward math is not recorded as a new graph.
# Call the sort as `topological_sort(root)`: the hidden checks grade `backpropagate` with a
# correct sort put in that name's place.

# %% nbgrader={"grade": false, "grade_id": "backpropagate", "locked": false, "schema_version": 3, "solution": true}
def backpropagate(root, deriv):
    """Accumulate d(root)/d(leaf), seeded with `deriv`, into every leaf's .grad."""
    ### BEGIN SOLUTION
    derivs = {id(root): deriv}
    with tl.no_grad():
        for node in reversed(topological_sort(root)):
            d = derivs.pop(id(node))
            if node.history is None:
                node.accumulate_grad(d)
                continue
            for parent, share in node.history.chain_rule(d):
                derivs[id(parent)] = derivs[id(parent)] + share if id(parent) in derivs else share
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_backpropagate", "locked": true, "points": 3, "schema_version": 3, "solution": false}
def library_grads(build, *leaves, seed=None):
    """The same graph with the library's engine: the gradients it gives the leaves."""
    copies = [t.detach().requires_grad_() for t in leaves]
    build(*copies).backward(seed)
    return [t.grad.numpy() for t in copies]


# the Tutorial 2 example: a used three times
a = tl.tensor([1.0, 2.0], requires_grad=True)
backpropagate((a + a) * a, tl.ones(2))
assert_close(a.grad.numpy(), [4.0, 8.0])
# a diamond with a broadcast row, a non-scalar root and an explicit seed
def diamond(a, b):
    return (a.tanh() * (a * b)).sigmoid() + a


a = tl.randn(3, 4, requires_grad=True)
b = tl.randn(4, requires_grad=True)
seed = tl.randn(3, 4)
backpropagate(diamond(a, b), seed)
expected = library_grads(diamond, a, b, seed=seed)
assert_close(a.grad.numpy(), expected[0])
assert_close(b.grad.numpy(), expected[1])
# a second backward accumulates into .grad (as PyTorch's does)
backpropagate(diamond(a, b), seed)
assert_close(b.grad.numpy(), 2 * expected[1])
print("backpropagate: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1b_engine", "test_backpropagate", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_leaves_only", "locked": true, "points": 1, "schema_version": 3, "solution": false}
a = tl.tensor([1.0, 2.0], requires_grad=True)
k = tl.tensor([5.0, 6.0])  # a constant
b = a * k
c = (b * b).sum()
backpropagate(c, tl.ones(()))
assert a.grad is not None and k.grad is None
# b.grad raises on a non-leaf (by design); the field behind it must stay empty
assert b._grad is None and c._grad is None, "only leaves keep a .grad"
print("leaves only: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1b_engine", "test_leaves_only", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "central_difference_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. `central_difference(f, *vals, arg=0, epsilon=1e-6)`
#
# $$\frac{\partial f}{\partial x_{arg}} \approx
#   \frac{f(\ldots, x_{arg} + \epsilon, \ldots) - f(\ldots, x_{arg} - \epsilon, \ldots)}{2\epsilon}$$
#
# `f` takes floats and returns a float; only argument `arg` moves. Its error is
# $O(\epsilon^2)$; a one-sided difference $(f(x + \epsilon) - f(x))/\epsilon$ is only
# $O(\epsilon)$ accurate. Return a `float`.

# %% nbgrader={"grade": false, "grade_id": "central_difference", "locked": false, "schema_version": 3, "solution": true}
def central_difference(f, *vals, arg=0, epsilon=1e-6):
    """The central difference of f in its argument `arg`, at vals."""
    ### BEGIN SOLUTION
    up = [float(v) for v in vals]
    down = list(up)
    up[arg] += epsilon
    down[arg] -= epsilon
    return (float(f(*up)) - float(f(*down))) / (2.0 * epsilon)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_central_difference", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert abs(central_difference(lambda x, y: x * y, 3.0, 4.0, arg=0) - 4.0) < 1e-8
assert abs(central_difference(lambda x, y: x * y, 3.0, 4.0, arg=1) - 3.0) < 1e-8
# x**3 at 1: the central difference is exactly 3 + eps**2 (a one-sided one: 3 + 3 eps + eps**2)
assert abs(central_difference(lambda x: x**3, 1.0, epsilon=0.1) - 3.01) < 1e-12
assert isinstance(central_difference(lambda x: x * x, 2.0), float)
print("central_difference: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1b_engine", "test_central_difference", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "classifier_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. Train a classifier with your engine
#
# Write `train_classifier(X, y, num_classes)`, which returns a trained model, and
# `predict(model, X)`, which returns one class label per row of `X`. Use the library's layers,
# loss and optimizer (`tl.nn.Linear`, `tl.nn.functional.cross_entropy`, `tl.optim.Adam`), but
# **your** `backpropagate` for the gradients: not `loss.backward()` (it does not exist in the
# hidden checks). Remember to zero the gradients between steps (the optimizer's `zero_grad`):
# your engine accumulates. The hidden check trains it on 300 points of four blobs (the XOR problem:
# no straight line separates the classes) and needs 90% accuracy on 200 new ones.

# %% nbgrader={"grade": false, "grade_id": "classifier", "locked": false, "schema_version": 3, "solution": true}
def train_classifier(X, y, num_classes):
    """A small network trained on (X, y) with your own backpropagate."""
    ### BEGIN SOLUTION
    tl.manual_seed(0)
    model = tl.nn.Sequential(
        tl.nn.Linear(X.shape[1], 16), tl.nn.Tanh(), tl.nn.Linear(16, num_classes)
    )
    optimizer = tl.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(150):
        loss = tl.nn.functional.cross_entropy(model(X), y)
        optimizer.zero_grad()
        backpropagate(loss, tl.ones(()))
        optimizer.step()
    return model
    ### END SOLUTION


def predict(model, X):
    """One class label per row of X."""
    ### BEGIN SOLUTION
    with tl.no_grad():
        return model(X).argmax(dim=1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_train", "locked": true, "points": 2, "schema_version": 3, "solution": false}
rng = np.random.default_rng(0)


def four_blobs(n):
    centers = rng.choice([-1.0, 1.0], size=(n, 2))
    return centers + rng.normal(0, 0.3, size=(n, 2)), (centers[:, 0] * centers[:, 1] > 0) * 1


X_train, y_train = four_blobs(300)
X_test, y_test = four_blobs(200)
model = train_classifier(tl.tensor(X_train), tl.tensor(y_train), 2)
accuracy = np.mean(predict(model, tl.tensor(X_test)).numpy() == y_test)
print(f"held-out accuracy: {accuracy:.3f}")
assert accuracy >= 0.9
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a1b_engine", "test_train", globals())
### END HIDDEN TESTS
