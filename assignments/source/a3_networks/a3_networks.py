# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment 3: Neural networks
#
# From Functions to a trained classifier: a linear layer, the softmax cross-entropy loss, two
# optimizer update rules, and a small network trained on a toy set and on handwritten digits.
#
# Conventions (PyTorch's): a batch of inputs `x` has shape $(N, \text{in})$; a linear layer has
# `weight` of shape $(\text{out}, \text{in})$ and `bias` of shape $(\text{out},)$ and computes
# $y = x W^\top + b$.
#
# **How you are graded.** Hidden checks call your Functions on random float64 inputs and compare
# outputs and gradients with reference values to about $10^{-12}$; your optimizer steps are
# compared with PyTorch's update rules; and your classifier is trained *by your own code* on
# data you have not seen and scored on held-out examples.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import hashlib
import math
import os

import numpy as np

import torchlight as tl
from torchlight import nn
from torchlight.autograd import Function, gradcheck
from torchlight.testing import assert_close, assert_exact, assert_gradient_scales

tl.manual_seed(0)

# Your variant: section 4 draws SGD's dampening from your student id (the grader uses the id of
# the submission's owner). Outside a course (`make homework`) you are "learner".
STUDENT = os.environ.get("TORCHLIGHT_STUDENT") or os.environ.get("JUPYTERHUB_USER") or "learner"


def variant(item, choices):
    """Your variant of ``item``: one of ``choices``, drawn from the course and your student id."""
    key = f"torchlight-autograd/a3_networks/{item}/{STUDENT}".encode()
    return choices[int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % len(choices)]


dampening = variant("sgd_step", (0.1, 0.2, 0.3, 0.5))
print(f"your variant ({STUDENT}): in section 4, sgd_step's dampening = {dampening}")

# %% [markdown] nbgrader={"grade": false, "grade_id": "linear_md", "locked": true, "schema_version": 3, "solution": false}
# ## 1. The linear map as a Function
#
# $y = x W^\top + b$. With $G = \partial L/\partial y$ of shape $(N, \text{out})$:
# $\partial L/\partial x = G W$, $\partial L/\partial W = G^\top x$,
# $\partial L/\partial b = \sum_n G_{n,:}$.

# %% nbgrader={"grade": false, "grade_id": "linear_function", "locked": false, "schema_version": 3, "solution": true}
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x, weight = ctx.saved_tensors
        return grad_output @ weight, grad_output.T @ x, grad_output.sum(0)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_linear_function", "locked": true, "points": 2, "schema_version": 3, "solution": false}
x = tl.tensor([[1.0, 2.0]])
w = tl.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
b = tl.tensor([0.5, 0.0, -1.0])
assert_close(LinearFunction.apply(x, w, b).numpy(), [[1.5, 2.0, 2.0]])
args = tl.randn(5, 3, requires_grad=True), tl.randn(4, 3, requires_grad=True), tl.randn(4, requires_grad=True)
assert gradcheck(LinearFunction.apply, *args)
# Exact, not estimated: x W^T + b is linear in each input, so the gradients must not change at
# inputs scaled by 2**50 (there, x + h rounds back to x and finite differences give 0).
for i in (0, 1, 2):
    assert_gradient_scales(LinearFunction.apply, [tl.randn(5, 3), tl.randn(4, 3), tl.randn(4)], i)
print("LinearFunction: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a3_networks", "test_linear_function", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "layer_md", "locked": true, "schema_version": 3, "solution": false}
# ## 2. A Linear layer
#
# A `Module` holds its `Parameter`s as attributes and calls your Function in `forward`.
# Initialize both parameters uniformly in $[-1/\sqrt{\text{in}}, 1/\sqrt{\text{in}}]$.

# %% nbgrader={"grade": false, "grade_id": "linear_layer", "locked": false, "schema_version": 3, "solution": true}
class Linear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        ### BEGIN SOLUTION
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(tl.rand(out_features, in_features) * (2 * bound) - bound)
        self.bias = nn.Parameter(tl.rand(out_features) * (2 * bound) - bound)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return LinearFunction.apply(x, self.weight, self.bias)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_linear_layer", "locked": true, "points": 1, "schema_version": 3, "solution": false}
layer = Linear(3, 2)
assert layer.weight.shape == (2, 3) and layer.bias.shape == (2,)
assert len(list(layer.parameters())) == 2
assert np.abs(layer.weight.detach().numpy()).max() <= 1 / math.sqrt(3)
layer(tl.randn(4, 3)).sum().backward()
assert layer.weight.grad.shape == (2, 3) and np.allclose(layer.bias.grad.numpy(), 4.0)
# Exact, not estimated: the layer is linear in its input.
assert_gradient_scales(layer, [tl.randn(4, 3)], 0)
print("Linear: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a3_networks", "test_linear_layer", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "ce_md", "locked": true, "schema_version": 3, "solution": false}
# ## 3. Softmax cross-entropy
#
# For logits $z$ of shape $(N, C)$ and integer targets $y$:
# $$L = \frac1N \sum_n \Big(\log \sum_c e^{z_{n,c}} - z_{n,y_n}\Big), \qquad
#   \frac{\partial L}{\partial z} = \frac1N\big(\mathrm{softmax}(z) - \mathrm{onehot}(y)\big).$$
# $e^{800}$ overflows float64: subtract each row's maximum before exponentiating (the result
# does not change). `targets` is a tensor too, so `backward` returns two values: the gradient
# for the logits and `None` for the targets.

# %% nbgrader={"grade": false, "grade_id": "cross_entropy", "locked": false, "schema_version": 3, "solution": true}
class SoftmaxCrossEntropy(Function):
    @staticmethod
    def forward(ctx, logits, targets):
        ### BEGIN SOLUTION
        shifted = logits - logits.max(1, keepdim=True).values
        log_probs = shifted - shifted.exp().sum(1, keepdim=True).log()
        onehot = tl.tensor(np.eye(logits.shape[1])[targets.numpy()])
        ctx.save_for_backward(log_probs.exp(), onehot)
        return -(log_probs * onehot).sum() / logits.shape[0]
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        probs, onehot = ctx.saved_tensors
        return grad_output * (probs - onehot) / probs.shape[0], None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_cross_entropy", "locked": true, "points": 2, "schema_version": 3, "solution": false}
logits = tl.tensor([[2.0, 0.0], [0.0, 0.0]], requires_grad=True)
loss = SoftmaxCrossEntropy.apply(logits, tl.tensor([0, 1]))
assert np.isclose(loss.item(), (np.log(1 + np.exp(-2.0)) + np.log(2.0)) / 2), loss
huge = SoftmaxCrossEntropy.apply(tl.tensor([[1000.0, 0.0]]), tl.tensor([1]))
assert np.isclose(huge.item(), 1000.0), f"not stable for large logits: {huge}"
assert gradcheck(lambda z: SoftmaxCrossEntropy.apply(z, tl.tensor([2, 0, 1])), tl.randn(3, 4, requires_grad=True))
# Exact, not estimated: a confident mistake (the target's logit at -700) has a loss near 350, so
# every loss a finite difference subtracts is rounded by about 6e-14, far more than it measures.
logits = tl.tensor([[-700.0, 1.0, 2.0], [0.5, -700.0, -1.0]], requires_grad=True)
SoftmaxCrossEntropy.apply(logits, tl.tensor([0, 1])).backward(tl.tensor(1.5))
z = logits.detach().numpy()
p = np.exp(z - z.max(1, keepdims=True))
p /= p.sum(1, keepdims=True)
assert_exact(logits.grad, 1.5 * (p - np.eye(3)[[0, 1]]) / 2, atol=16 * np.finfo(float).eps)
print("SoftmaxCrossEntropy: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a3_networks", "test_cross_entropy", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "optim_md", "locked": true, "schema_version": 3, "solution": false}
# ## 4. Optimizer steps
#
# Both functions take tensors and return *new* tensors (no in-place updates), following
# PyTorch's rules.
#
# **SGD with momentum, dampening and weight decay:** $g \leftarrow g + \lambda p$;
# $v \leftarrow \mu v + (1 - \tau) g$; $p \leftarrow p - \eta v$. Return `(param, velocity)`.
# **Your variant**: the dampening $\tau$ is the number the setup cell printed for you (it comes
# from your student id; your classmates have other values, and the hidden checks use yours). It
# is not an argument: write it into `sgd_step` (PyTorch's `dampening`, applied here at every step,
# the first one included).
#
# **Adam** at step $t \ge 1$: $m \leftarrow \beta_1 m + (1-\beta_1) g$;
# $v \leftarrow \beta_2 v + (1-\beta_2) g^2$; $\hat m = m/(1-\beta_1^t)$,
# $\hat v = v/(1-\beta_2^t)$; $p \leftarrow p - \eta\, \hat m / (\sqrt{\hat v} + \epsilon)$.
# Return `(param, m, v)`.

# %% nbgrader={"grade": false, "grade_id": "sgd_step", "locked": false, "schema_version": 3, "solution": true}
def sgd_step(param, grad, velocity, lr, momentum=0.0, weight_decay=0.0):
    ### BEGIN SOLUTION
    grad = grad + weight_decay * param
    velocity = momentum * velocity + (1 - variant("sgd_step", (0.1, 0.2, 0.3, 0.5))) * grad
    return param - lr * velocity, velocity
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sgd_step", "locked": true, "points": 1, "schema_version": 3, "solution": false}
tau = variant("sgd_step", (0.1, 0.2, 0.3, 0.5))  # yours
p, v = sgd_step(tl.tensor([1.0]), tl.tensor([2.0]), tl.tensor([0.5]), lr=0.1, momentum=0.9)
want = 0.9 * 0.5 + (1 - tau) * 2.0
assert np.allclose(v.numpy(), [want]) and np.allclose(p.numpy(), [1.0 - 0.1 * want]), (p, v)
p, v = sgd_step(tl.tensor([1.0]), tl.tensor([2.0]), tl.tensor([0.0]), lr=0.1, weight_decay=0.5)
assert np.allclose(v.numpy(), [(1 - tau) * 2.5]), v  # the decay joins the gradient first
print(f"sgd_step (your variant, dampening = {tau}): visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a3_networks", "test_sgd_step", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "adam_step", "locked": false, "schema_version": 3, "solution": true}
def adam_step(param, grad, m, v, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    ### BEGIN SOLUTION
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    return param - lr * m_hat / (v_hat.sqrt() + eps), m, v
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_adam_step", "locked": true, "points": 2, "schema_version": 3, "solution": false}
p, m, v = adam_step(tl.tensor([1.0]), tl.tensor([0.5]), tl.zeros(1), tl.zeros(1), t=1, lr=0.1)
assert np.allclose(p.numpy(), [0.9]), p  # the first step moves by lr, whatever the gradient's size
assert np.allclose(m.numpy(), [0.05]) and np.allclose(v.numpy(), [0.00025]), (m, v)
print("adam_step: visible tests passed")
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a3_networks", "test_adam_step", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "adam_why_md", "locked": true, "schema_version": 3, "solution": false}
# **A written answer (1 point, graded by a person, not by the hidden checks).** The visible test
# above says that Adam's first step moves the parameter by `lr`, whatever the gradient's size.
# Explain in two sentences why (look at $\hat m$ and $\hat v$ at $t = 1$), and what that means
# when you choose `lr`. Write in the cell below.

# %% [markdown] nbgrader={"grade": true, "grade_id": "adam_why", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# At $t = 1$ the bias corrections give $\hat m = g$ and $\hat v = g^2$, so the step is
# $\eta\, g / (|g| + \epsilon)$: $\pm\eta$ for every gradient that is not tiny next to
# $\epsilon$, because the gradient's size cancels. So `lr` is about how far each parameter moves
# per step (in the parameter's own units), not a factor on the gradient: a layer with large
# gradients does not take larger steps.

# %% [markdown] nbgrader={"grade": false, "grade_id": "classifier_md", "locked": true, "schema_version": 3, "solution": false}
# ## 5. Train a classifier
#
# Write `train_classifier(X, y, num_classes)`, which builds a small network from your `Linear`
# layers (a hidden layer with a `tanh` or `relu` between them), trains it with your
# `SoftmaxCrossEntropy` and `adam_step` on mini-batches, and returns the model; and
# `predict(model, X)`, which returns the predicted class of each row of `X` as a tensor of
# integers. The same code must reach **90% accuracy** on held-out data for both data sets
# below, within two minutes (a few seconds is plenty). Seed your randomness.

# %% nbgrader={"grade": false, "grade_id": "classifier", "locked": false, "schema_version": 3, "solution": true}
class MLP(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        ### BEGIN SOLUTION
        self.hidden = Linear(sizes[0], sizes[1])
        self.out = Linear(sizes[1], sizes[2])
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return self.out(self.hidden(x).tanh())
        ### END SOLUTION


def train_classifier(X, y, num_classes, steps=300, batch_size=64, lr=0.02):
    ### BEGIN SOLUTION
    tl.manual_seed(0)
    rng = np.random.default_rng(0)
    model = MLP([X.shape[1], 64, num_classes])
    params = list(model.parameters())
    moments = [(tl.zeros(*p.shape), tl.zeros(*p.shape)) for p in params]
    for t in range(1, steps + 1):
        batch = tl.tensor(rng.integers(0, X.shape[0], size=batch_size))
        model.zero_grad()
        SoftmaxCrossEntropy.apply(model(X[batch]), y[batch]).backward()
        with tl.no_grad():
            for i, p in enumerate(params):
                new, m, v = adam_step(p.detach(), p.grad, *moments[i], t=t, lr=lr)
                p.copy_(new)
                moments[i] = (m, v)
    return model
    ### END SOLUTION


def predict(model, X):
    ### BEGIN SOLUTION
    with tl.no_grad():
        return model(X).argmax(1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_train_toy", "locked": true, "points": 1, "schema_version": 3, "solution": false}
def two_circles(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    angle = rng.uniform(0, 2 * np.pi, size=n)
    radius = 1.0 + labels + rng.normal(0, 0.15, size=n)
    return tl.tensor(np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1)), tl.tensor(labels)


X_train, y_train = two_circles(400, seed=1)
X_test, y_test = two_circles(200, seed=2)
model = train_classifier(X_train, y_train, 2)
accuracy = (predict(model, X_test) == y_test).float().mean().item()
print(f"two circles: test accuracy {accuracy:.3f}")
assert accuracy >= 0.9
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a3_networks", "test_train_toy", globals())
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_train_digits", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from torchlight.data import digits

train_set, test_set = digits(train=True), digits(train=False)
model = train_classifier(*train_set.tensors, 10)
accuracy = (predict(model, test_set.tensors[0]) == test_set.tensors[1]).float().mean().item()
print(f"digits: test accuracy {accuracy:.3f}")
assert accuracy >= 0.9
### BEGIN HIDDEN TESTS
from torchlight_grader import self_check

self_check("a3_networks", "test_train_digits", globals())
### END HIDDEN TESTS
