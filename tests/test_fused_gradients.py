"""GELU's, layer norm's and cross-entropy's gradients, by both of their paths: the readable
first derivative in tensor math in each Function's ``backward`` (``GELUFunction``,
``LayerNormFunction``, ``CrossEntropy``), what a backend without an override runs, and the
backend override (numpy's, and Numba's, which inherits it): a Function of its own
(``GELUBackward``, ``LayerNormBackward``, ``Normalized``, ``CrossEntropyBackward``) whose forward
is one fused kernel and whose backward is the second derivative in tensor math. Each path's
second derivatives against ones worked out by hand (or PyTorch's), third derivatives against
central differences, and the two paths equal to each other, first and second derivatives.

The ``path`` fixture runs a test twice on the numpy backend: ``"fused"`` as it is, and
``"readable"`` with numpy's three gradient kernels taken off its class for the test (as a
backend without them; the strided backend has none).

(``tests/test_backend_conformance.py`` checks the kernels themselves against formulas computed
in numpy; ``tests/test_autograd_higher_order.py`` runs ``gradgradcheck`` on the layers.)
"""

from __future__ import annotations

import numpy as np
import pytest

import torchlight as tl
from torchlight.autograd import grad, gradgradcheck
from torchlight.backends.numpy.backend import NumpyBackend
from torchlight.ops.activations import GELUBackward
from torchlight.ops.losses import CrossEntropyBackward
from torchlight.ops.normalization import LayerNormBackward

F = tl.nn.functional
C, A = np.sqrt(2 / np.pi), 0.044715
KERNELS = ("gelu_backward", "layer_norm_backward", "cross_entropy_backward")


@pytest.fixture(params=["fused", "readable"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which first derivatives the numpy backend runs: its fused kernels, or (with them taken
    off its class for this test) the readable tensor math in the Functions' backward."""
    if request.param == "readable":
        for kernel in KERNELS:
            monkeypatch.delattr(NumpyBackend, kernel)
    return str(request.param)


def check_node(gradient: tl.Tensor, override: type, path: str) -> None:
    """The gradient is the override's node on the fused path, tensor math on the readable."""
    if path == "fused":
        assert gradient.grad_fn is override, gradient.grad_fn
    else:
        assert gradient.grad_fn is not override, f"{override.__name__} ran on the readable path"


def leaf(data, backend="numpy"):  # type: ignore[no-untyped-def]
    return tl.tensor(np.asarray(data, dtype=np.float64), requires_grad=True, backend=backend)


def gelu_first_derivative(x: np.ndarray) -> np.ndarray:
    """d/dx of x/2 (1 + tanh u), u = c (x + a x^3)."""
    t = np.tanh(C * (x + A * x**3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * C * (1 + 3 * A * x**2)


def gelu_second_derivative(x: np.ndarray) -> np.ndarray:
    """d^2/dx^2 of x/2 (1 + tanh u), u = c (x + a x^3), by the product and chain rules."""
    u, du, d2u = C * (x + A * x**3), C * (1 + 3 * A * x**2), 6 * A * C * x
    t = np.tanh(u)
    dt, d2t = (1 - t**2) * du, (1 - t**2) * d2u - 2 * t * (1 - t**2) * du**2
    return dt + 0.5 * x * d2t


@pytest.mark.parametrize("backend", ["numpy", "strided"])
def test_gelu_second_derivative_matches_the_one_by_hand(backend: str, path: str) -> None:
    xs = np.linspace(-4.0, 4.0, 17)
    x = leaf(xs, backend)
    (slope,) = grad(F.gelu(x, approximate="tanh").sum(), x, create_graph=True)
    check_node(slope, GELUBackward, "readable" if backend == "strided" else path)
    first = gelu_first_derivative(xs)
    np.testing.assert_allclose(slope.detach().numpy(), first, rtol=1e-10, atol=1e-14)
    (curvature,) = grad(slope.sum(), x)
    np.testing.assert_allclose(
        curvature.numpy(), gelu_second_derivative(xs), rtol=1e-10, atol=1e-14
    )


def test_layer_norm_hessian_vector_product_matches_one_by_hand(path: str) -> None:
    """Without weight: y = x_hat, and <v, d/dx (J^T w)> for the Jacobian J of x_hat, worked
    out in numpy from x_hat's (N, N) Jacobian as a function of x (by central differences of
    that closed form, which is itself independent of the Functions under test)."""
    rng = np.random.default_rng(0)
    xs, w, v = (rng.standard_normal(5) for _ in range(3))

    def jacobian_t_w(x: np.ndarray) -> np.ndarray:
        centred = x - x.mean()
        rstd = 1 / np.sqrt((centred**2).mean() + 1e-5)
        x_hat, n = centred * rstd, len(x)
        return (rstd * (np.eye(n) - 1 / n - np.outer(x_hat, x_hat) / n)).T @ w

    h = 1e-6
    want = np.array(
        [(jacobian_t_w(xs + h * e) - jacobian_t_w(xs - h * e)) @ v / (2 * h) for e in np.eye(5)]
    )
    x = leaf(xs)
    (g,) = grad((F.layer_norm(x, (5,)) * tl.tensor(w)).sum(), x, create_graph=True)
    check_node(g, LayerNormBackward, path)
    (hvp,) = grad((g * tl.tensor(v)).sum(), x)
    np.testing.assert_allclose(hvp.numpy(), want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "f",
    [
        lambda a: F.gelu(a, approximate="tanh"),
        lambda a: F.layer_norm(a, (3,), tl.tensor([1.0, 2.0, -1.0]), tl.tensor([0.5, 0, 0])),
        lambda a: F.layer_norm(a, (2, 3)),
        lambda a: F.cross_entropy(a, tl.tensor([2, 0]), reduction="none").unsqueeze(1),
    ],
    ids=["gelu_tanh", "layer_norm", "layer_norm_two_dims", "cross_entropy"],
)
def test_third_derivatives_through_the_gradient_functions(f, path: str) -> None:  # type: ignore[no-untyped-def]
    r"""The readable first derivatives, and the backward of ``GELUBackward``,
    ``LayerNormBackward`` and ``CrossEntropyBackward``, are differentiable again, and right:
    the gradient of a Hessian-vector product $\langle u, H v\rangle$ by autograd (third
    derivatives) equals central differences of that product (each computed by autograd)."""
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((2, 3))
    w, v, u = (tl.tensor(rng.standard_normal((2, 3))) for _ in range(3))

    def hvp_dot(x):  # type: ignore[no-untyped-def]
        (g,) = grad((f(x) * w).sum(), x, create_graph=True)
        (hv,) = grad((g * v).sum(), x, create_graph=True)
        return (hv * u).sum()

    x = leaf(xs)
    (third,) = grad(hvp_dot(x), x)
    h, want = 1e-5, np.zeros_like(xs)
    for i in np.ndindex(xs.shape):
        step = np.zeros_like(xs)
        step[i] = h
        want[i] = (hvp_dot(leaf(xs + step)).item() - hvp_dot(leaf(xs - step)).item()) / (2 * h)
    np.testing.assert_allclose(third.numpy(), want, rtol=1e-5, atol=1e-7)


def test_layer_norm_weight_and_bias_gradients_under_create_graph(path: str) -> None:
    """The weight's gradient G x_hat goes through ``Normalized`` (fused) or through the mean and
    the variance computed again from x (readable), so its derivative in x is there too:
    gradgradcheck in all three inputs."""
    rng = np.random.default_rng(6)
    x, weight, bias = leaf(rng.standard_normal((4, 3))), leaf([1.0, -2.0, 0.5]), leaf([0.1, 0, 0])
    assert gradgradcheck(lambda x, w, b: F.layer_norm(x, (3,), w, b), x, weight, bias)


@pytest.mark.parametrize("backend", ["numpy", "strided"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_second_derivatives_match_pytorch(
    backend: str, reduction: str, path: str
) -> None:
    """Double backward through ``F.cross_entropy``: the gradient is a ``CrossEntropyBackward``
    node on the fused path (tensor math on the readable one), and the derivative of
    <w, gradient> in the logits (a Hessian-vector product) and in the loss's gradient G are PyTorch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    xs, labels = rng.standard_normal((5, 4)) * 3, np.array([0, 3, 3, 1, 2])
    gs = rng.standard_normal(5) if reduction == "none" else np.asarray(rng.standard_normal())
    w = rng.standard_normal((5, 4))

    x, g = leaf(xs, backend), leaf(gs, backend)
    loss = F.cross_entropy(x, tl.tensor(labels, backend=backend), reduction=reduction)
    (gx,) = grad(loss, x, g, create_graph=True)
    check_node(gx, CrossEntropyBackward, "readable" if backend == "strided" else path)
    (gx * tl.tensor(w, backend=backend)).sum().backward()

    xt, gt = (torch.tensor(a, requires_grad=True) for a in (xs, gs))
    loss_t = torch.nn.functional.cross_entropy(xt, torch.tensor(labels), reduction=reduction)
    (gxt,) = torch.autograd.grad(loss_t, xt, gt, create_graph=True)
    (gxt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(gx.detach().numpy(), gxt.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(g.grad.numpy(), gt.grad.numpy(), rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    ("f", "shape"),
    [
        (lambda a, weight, t: F.gelu(a, approximate="tanh") * weight, (2, 3, 4)),
        (lambda a, weight, t: F.layer_norm(a, (4,), weight), (2, 3, 4)),
        (lambda a, weight, t: F.layer_norm(a, (3, 4)) * weight, (2, 3, 4)),
        (lambda a, weight, t: F.cross_entropy(a, t, reduction="none") * weight.sum(), (6, 4)),
        (lambda a, weight, t: F.cross_entropy(a, t) * weight.sum(), (6, 4)),
    ],
    ids=["gelu_tanh", "layer_norm_weight", "layer_norm_two_dims", "ce_none", "ce_mean"],
)
def test_the_fused_kernels_equal_the_readable_derivatives(
    f, shape: tuple[int, ...], dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """numpy's fused overrides give what the readable tensor math gives on the same backend:
    the first derivatives (in the input and in a weight), the Hessian-vector product (second
    derivatives), for large inputs too (GELU's tanh saturates, e^x overflows unless shifted)."""
    rng = np.random.default_rng(11)
    xs = (rng.standard_normal(shape) * 3).astype(dtype)
    xs.flat[:2] = [40.0, -40.0]
    ws = rng.standard_normal(4).astype(dtype)
    labels = tl.tensor(np.array([0, 3, 3, 1, 2, 0]))
    v = tl.tensor(rng.standard_normal(shape).astype(dtype))

    def derivatives() -> list:  # type: ignore[type-arg]
        x, weight = tl.tensor(xs, requires_grad=True), tl.tensor(ws, requires_grad=True)
        y = f(x, weight, labels)
        w = np.random.default_rng(12).standard_normal(y.shape).astype(dtype)
        g, g_weight = grad((y * tl.tensor(w)).sum(), [x, weight], create_graph=True)
        (hv,) = grad((g * v).sum(), x)
        return [g.detach().numpy(), g_weight.detach().numpy(), hv.numpy(), g.grad_fn]

    *fused, fused_node = derivatives()
    for kernel in KERNELS:
        monkeypatch.delattr(NumpyBackend, kernel)
    *readable, readable_node = derivatives()
    assert fused_node in (GELUBackward, LayerNormBackward, CrossEntropyBackward), fused_node
    assert readable_node is not fused_node, "the two runs took the same path"
    tol = 1e-12 if dtype == np.float64 else 2e-5
    names = ["gradient", "weight's gradient", "Hessian-vector product"]
    for got, want, name in zip(fused, readable, names, strict=True):
        assert got.dtype == want.dtype == dtype, name
        scale = max(1.0, np.abs(want).max())
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=name)
