"""Higher-order gradients: ``tl.autograd.grad``, ``create_graph=True``, ``gradgradcheck`` and
``ctx.mark_non_differentiable``, checked against derivatives worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import torchlight as tl
from torchlight.autograd import Function, GradcheckError, grad, gradgradcheck
from torchlight.ops.recurrent import LSTMCellFunction

F = tl.nn.functional


def values(t):
    return np.asarray(t.detach().numpy())


def leaf(data):
    return tl.tensor(np.asarray(data, dtype=np.float64), requires_grad=True)


X = [0.5, -1.2, 0.3]


# ---------------------------------------------------------------- second derivatives by hand
@pytest.mark.parametrize(
    ("f", "d2"),
    [
        (lambda x: x**3, lambda x: 6 * x),
        (lambda x: x.exp(), np.exp),
        (lambda x: x.sin(), lambda x: -np.sin(x)),
        (lambda x: x.tanh(), lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
        (lambda x: x.sigmoid(), lambda x: (s := 1 / (1 + np.exp(-x))) * (1 - s) * (1 - 2 * s)),
        (lambda x: x * x * x, lambda x: 6 * x),
        (lambda x: x.log(), lambda x: -1 / x**2),
    ],
    ids=["pow", "exp", "sin", "tanh", "sigmoid", "mul", "log"],
)
def test_second_derivative_matches_hand_formula(f, d2):
    x = leaf([0.5, 1.2, 0.3])  # (positive: log)
    (g,) = grad(f(x).sum(), x, create_graph=True)
    assert g.requires_grad
    (h,) = grad(g.sum(), x)
    np.testing.assert_allclose(values(h), d2(np.array([0.5, 1.2, 0.3])), rtol=1e-12)


def test_third_derivative_of_cube_is_six():
    x = leaf([2.0, -1.0])
    (g1,) = grad((x**3).sum(), x, create_graph=True)
    (g2,) = grad(g1.sum(), x, create_graph=True)
    (g3,) = grad(g2.sum(), x)
    assert values(g3).tolist() == [6.0, 6.0]


def test_backward_create_graph_gives_a_grad_with_history():
    x = leaf([1.0, 2.0])
    (x**3).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    first = x.grad
    x.grad = None
    first.sum().backward()  # d/dx 3x^2 = 6x
    assert values(x.grad).tolist() == [6.0, 12.0]


def test_create_graph_keeps_the_graph_by_default():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(create_graph=True)  # retain_graph defaults to create_graph
    x.grad = None
    y.backward()  # a second backward through the same graph works: e^x (x + 1)
    np.testing.assert_allclose(values(x.grad), np.exp([1.0, 2.0]) * [2.0, 3.0], rtol=1e-12)


def test_hessian_vector_product_of_a_quadratic_form():
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    x = leaf([0.5, -1.0])
    v = tl.tensor([1.0, 2.0])
    f = 0.5 * (x @ tl.tensor(a) @ x)
    (g,) = grad(f, x, create_graph=True)
    np.testing.assert_allclose(values(g), a @ [0.5, -1.0], rtol=1e-12)
    (hv,) = grad(g, x, grad_outputs=v)  # H v with H = A
    np.testing.assert_allclose(values(hv), a @ [1.0, 2.0], rtol=1e-12)


# ---------------------------------------------------------------- gradgradcheck on built-in ops
@pytest.mark.parametrize(
    "f",
    [
        lambda a, b: a * b,
        lambda a, b: a @ b.T,
        lambda a, b: a / (b * b + 1),
        lambda a, b: a.abs() ** 2.5 + b.relu() * a,
        lambda a, b: F.softmax(a * b, dim=1),
        lambda a, b: F.log_softmax(a, dim=0) * b,
        lambda a, b: tl.where(a > 0, a * b, b.exp()),
        lambda a, b: a[:, 1:] * b[0, :2] + b[:, [1, 1]],
        lambda a, b: (a.max(dim=1).values * b.sum(1)).norm(),
    ],
    ids=["mul", "matmul", "div", "pow_relu", "softmax", "log_softmax", "where", "getitem", "norm"],
)
def test_gradgradcheck_on_built_in_ops(f):
    rng = np.random.default_rng(1)
    a = leaf(rng.uniform(0.3, 1.5, (2, 3)) * [[1, -1, 1], [-1, 1, 1]])
    b = leaf(rng.uniform(-1.0, 1.0, (2, 3)))
    assert gradgradcheck(f, a, b)


@pytest.mark.parametrize(
    "f",
    [
        lambda a: F.cross_entropy(a, tl.tensor([0, 2, 1])),
        lambda a: F.cross_entropy(a, tl.tensor([1, 1, 0]), reduction="none"),
        lambda a: F.gelu(a, approximate="tanh"),
        lambda a: F.layer_norm(a, (3,), tl.tensor([1.0, 2.0, -1.0]), tl.tensor([0.5, 0, 0])),
        lambda a: LSTMCellFunction.apply(tl.cat([a, a[:, :1] * 2], 1), a[:, 1:2]),
    ],
    ids=["cross_entropy", "cross_entropy_none", "gelu_tanh", "layer_norm", "lstm_cell"],
)
def test_gradgradcheck_on_fused_nn_functions_that_recompute_under_create_graph(f):
    a = leaf(np.random.default_rng(4).standard_normal((3, 3)))
    assert gradgradcheck(f, a)


def test_gradgradcheck_catches_a_wrong_second_derivative():
    class ExpSavingAConstant(Function):  # saves e^x as a new tensor: not differentiable in x
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x.exp() * 1.0)
            return x.exp()

        @staticmethod
        def backward(ctx, grad_output):
            (e,) = ctx.saved_tensors
            return grad_output * e

    x = leaf(X)
    assert tl.autograd.gradcheck(ExpSavingAConstant.apply, x)  # first derivative right
    with pytest.raises(GradcheckError, match="differ"):
        gradgradcheck(ExpSavingAConstant.apply, x)


def test_double_backward_through_a_fused_op_raises_clearly():
    x = leaf(np.arange(16.0).reshape(1, 1, 4, 4) / 8)
    w = leaf(np.ones((1, 1, 3, 3)))
    y = F.conv2d(x, w, padding=1)
    (g,) = grad((y * y).sum() + (x * x).sum(), x, create_graph=True)  # first derivatives: fine
    np.testing.assert_allclose(
        values(g), values(grad((y * y).sum(), x, retain_graph=True)[0] + 2 * x)
    )
    with pytest.raises(RuntimeError, match="double backward through Conv2dFunction"):
        g.sum().backward()


# ---------------------------------------------------------------- grad()
def test_grad_agrees_with_backward_and_leaves_dot_grad_alone():
    rng = np.random.default_rng(2)
    w, x = leaf(rng.standard_normal((3, 2))), leaf(rng.standard_normal((4, 3)))
    loss = (x @ w).tanh().sum()
    gw, gx = grad(loss, [w, x], retain_graph=True)
    assert w.grad is None and x.grad is None
    loss.backward()
    np.testing.assert_allclose(values(gw), values(w.grad), rtol=1e-14)
    np.testing.assert_allclose(values(gx), values(x.grad), rtol=1e-14)


def test_grad_of_a_non_leaf_and_of_several_outputs():
    x = leaf([1.0, 2.0])
    h = x * x
    y1, y2 = h.sum(), (3 * h).sum()
    gh, gx, gx_again = grad([y1, y2], [h, x, x])  # sums over the outputs: d(y1 + y2)
    assert values(gh).tolist() == [4.0, 4.0]
    assert values(gx).tolist() == values(gx_again).tolist() == [8.0, 16.0]


def test_grad_outputs_weight_the_outputs():
    x = leaf([1.0, 2.0, 3.0])
    (g,) = grad(x * x, x, grad_outputs=tl.tensor([1.0, 0.0, -1.0]))
    assert values(g).tolist() == [2.0, 0.0, -6.0]
    with pytest.raises(ValueError, match="grad_outputs\\[0\\] has shape"):
        grad(x * x, x, grad_outputs=tl.tensor([1.0]))


def test_allow_unused():
    x, z = leaf([1.0]), leaf([5.0])
    with pytest.raises(RuntimeError, match="input 1 .* was not used.*allow_unused=True"):
        grad((x * 2).sum(), [x, z])
    gx, gz = grad((x * 2).sum(), [x, z], allow_unused=True)
    assert values(gx).tolist() == [2.0] and gz is None


def test_grad_errors_name_the_problem():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="input 0 does not require grad"):
        grad((x * 2).sum(), tl.tensor([1.0]))
    with pytest.raises(RuntimeError, match="output 0 does not require grad"):
        grad(tl.tensor([1.0]).sum(), x)
    y = (x.exp()).sum()
    grad(y, x)  # retain_graph defaults to create_graph (False): the graph is freed
    with pytest.raises(RuntimeError, match="second time"):
        grad(y, x)


# ---------------------------------------------------------------- a gradient penalty
def test_gradient_penalty_double_backward_on_a_small_mlp():
    """L = |d out/d x|^2 for out = w2 . tanh(W1 x): dL/dW1 by create_graph vs central differences."""
    rng = np.random.default_rng(3)
    w1, w2 = rng.standard_normal((4, 3)), rng.standard_normal(4)
    x0 = rng.standard_normal(3)

    def penalty(w1_t):
        x = tl.tensor(x0, requires_grad=True)
        out = (tl.tensor(w2) * (x @ w1_t.T).tanh()).sum()
        (gx,) = grad(out, x, create_graph=True)
        return (gx * gx).sum()

    w1_t = leaf(w1)
    penalty(w1_t).backward()
    eps, numerical = 1e-6, np.zeros_like(w1)
    for idx in np.ndindex(w1.shape):
        up, down = w1.copy(), w1.copy()
        up[idx] += eps
        down[idx] -= eps
        numerical[idx] = (values(penalty(tl.tensor(up))) - values(penalty(tl.tensor(down)))) / (
            2 * eps
        )
    np.testing.assert_allclose(values(w1_t.grad), numerical, rtol=1e-6, atol=1e-8)


def test_gradient_penalty_through_nn_layers_trains():
    tl.manual_seed(0)
    model = tl.nn.Sequential(tl.nn.Linear(2, 8), tl.nn.Tanh(), tl.nn.Linear(8, 1))
    x = tl.randn(16, 2, requires_grad=True)
    before = None
    for _ in range(2):
        (gx,) = grad(model(x).sum(), x, create_graph=True)
        penalty = ((gx * gx).sum(1) - 1).pow(2).mean()
        before = before if before is not None else float(penalty.item())
        for p in model.parameters():
            p.grad = None
        penalty.backward()
        *used, last_bias = model.parameters()
        assert last_bias.grad is None  # d out/d x does not depend on the last bias
        assert all(p.grad is not None and not p.grad.requires_grad for p in used)
        with tl.no_grad():
            for p in used:
                p -= 0.05 * p.grad
    assert float(penalty.item()) < before


# ---------------------------------------------------------------- mark_non_differentiable
def test_mark_non_differentiable():
    class Argmax(Function):
        @staticmethod
        def forward(ctx, x):
            out = x.argmax(dim=0).double()
            ctx.mark_non_differentiable(out)
            return out

        @staticmethod
        def backward(ctx, grad_output):
            raise AssertionError("never called")

    x = leaf([1.0, 3.0, 2.0])
    out = Argmax.apply(x)
    assert not out.requires_grad and out.grad_fn is None
    assert values(out).tolist() == 1.0

    class MarksItsInput(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_non_differentiable(x)  # not an output: ignored, as PyTorch ignores it
            return x * 2

    assert MarksItsInput.apply(x).requires_grad
