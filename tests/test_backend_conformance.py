"""One conformance suite over every backend: numpy, strided, numba and cuda.

Every op of the op table (``tests/op_table.py``), on its listed shapes (broadcast, 0-d,
size-0) and on permuted (non-contiguous) inputs: the forward result must match numpy, and the
gradients must match those of the numpy backend (itself checked against central differences in
``test_core_ops.py``), both to 1e-12 in float64.

The ``cuda`` backend runs on a real GPU when ``TORCHLIGHT_TEST_CUDA=gpu``; otherwise in numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, set here just before the backend is first loaded).
The simulator runs one Python thread per GPU thread, so only the op table's small shapes run
there. ``test_backend_cuda.py`` compiles every kernel for a real GPU as well.
"""

from __future__ import annotations

import functools
import os
import warnings

import numpy as np
import pytest

import torchlight as tl
from tests.op_table import OPS, make_inputs
from torchlight.backends import Backend, get_backend
from torchlight.backends.numpy import kernels

BACKENDS = ("numpy", "strided", "numba", "cuda")
#: Whether a backend overrides the three readable first derivatives (``GradientOverrides``).
OVERRIDES = {"numpy": True, "strided": False, "numba": True, "cuda": False}
CASES = [
    (op, shapes, permuted)
    for op in OPS
    for shapes in op.shapes
    for permuted in (False, True)
    if not (permuted and "contiguous_only" in op.tags)  # view() of a transpose must fail
]


def cuda_mode() -> str:
    """``"gpu"`` when the tests are asked to use a real GPU, else ``"simulator"``."""
    return "gpu" if os.environ.get("TORCHLIGHT_TEST_CUDA") == "gpu" else "simulator"


@functools.cache
def backend(name: str) -> Backend:
    """The backend called ``name``; for ``cuda``, the simulator unless a GPU was asked for."""
    if name != "cuda" or cuda_mode() == "gpu":
        return get_backend(name)
    # Read when torchlight first imports numba.cuda. It stays set: numba re-reads its config
    # from the environment at every compilation.
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    try:
        loaded = get_backend("cuda")
    except RuntimeError as error:
        pytest.fail(f"could not start the CUDA simulator: {error}")
    if not loaded.simulator:  # type: ignore[attr-defined]
        pytest.fail(
            "numba.cuda was imported without the simulator before the CUDA tests ran; run them "
            "with NUMBA_ENABLE_CUDASIM=1, or with TORCHLIGHT_TEST_CUDA=gpu on a real GPU"
        )
    return loaded


def run_case(op, shapes, permuted: bool, on: Backend) -> tuple[np.ndarray, list[np.ndarray]]:
    """The op's output and the gradients of its inputs (for a fixed random grad_output)."""
    _, tensors = make_inputs(op, shapes, seed=3, permuted=permuted, backend=on)
    out = op.tl_fn(*tensors)
    result = out.detach().to("numpy").numpy()
    grads: list[np.ndarray] = []
    if op.grad and out.numel() > 0:
        grad_output = np.random.default_rng(4).normal(size=out.shape)
        out.backward(tl.tensor(grad_output, backend=on))
        for i, t in enumerate(tensors):
            assert t.grad is not None, f"{op.name}: input {i} got no gradient on {on.name}"
            assert t.grad.backend is on, f"{op.name}: the gradient of input {i} left {on.name}"
            grads.append(t.grad.to("numpy").numpy())
    return result, grads


@pytest.mark.parametrize(
    ("op", "shapes", "permuted"),
    CASES,
    ids=[f"{op.name}-{'-'.join(map(str, s))}{'-permuted' if p else ''}" for op, s, p in CASES],
)
@pytest.mark.parametrize("name", BACKENDS)
def test_op_matches_numpy(name: str, op, shapes, permuted: bool) -> None:
    arrays, _ = make_inputs(op, shapes, seed=3)
    expected = np.asarray(op.np_fn(*arrays))
    got, grads = run_case(op, shapes, permuted, backend(name))
    assert got.shape == expected.shape, (
        f"{op.name} on {name}: shape {got.shape}, numpy {expected.shape}"
    )
    assert got.dtype == expected.dtype or expected.dtype == np.float64, (
        f"{op.name}: dtype {got.dtype}"
    )
    np.testing.assert_allclose(
        got, expected, rtol=1e-12, atol=1e-12, err_msg=f"{op.name} on {name}"
    )
    if name == "numpy":
        return
    _, reference = run_case(op, shapes, permuted, get_backend("numpy"))
    assert len(grads) == len(reference)
    for i, (g, r) in enumerate(zip(grads, reference, strict=True)):
        np.testing.assert_allclose(
            g, r, rtol=1e-12, atol=1e-12, err_msg=f"{op.name}: gradient {i} on {name}"
        )


FLOAT32_OPS = ("exp", "div", "sum_dim0", "matmul")  # few: each compiles new numba kernels


@pytest.mark.parametrize("op_name", FLOAT32_OPS)
@pytest.mark.parametrize("name", BACKENDS[1:])
def test_float32_stays_float32(name: str, op_name: str) -> None:
    op = next(o for o in OPS if o.name == op_name)
    shapes = op.shapes[0]
    arrays, tensors = make_inputs(op, shapes, seed=5, backend=backend(name))
    tensors = [t.detach().to(tl.float32) for t in tensors]
    out = op.tl_fn(*tensors)
    assert out.dtype is tl.float32, f"{op_name} on {name} returned {out.dtype}"
    expected = op.np_fn(*[a.astype(np.float32) for a in arrays])
    np.testing.assert_allclose(out.to("numpy").numpy(), expected, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", BACKENDS[1:])
def test_edge_values_follow_ieee_like_numpy(name: str) -> None:
    """Python raises where IEEE 754 gives inf/nan; every backend must answer like numpy."""
    on = backend(name)
    x = np.array([0.0, -0.0, -1.0, 1000.0, -1000.0, np.inf, -np.inf, np.nan, 2.5])
    y = np.array([0.0, 0.0, 0.5, 2.0, -3.0, 1.0, 2.0, 1.0, -0.0])
    tx, ty = tl.tensor(x, backend=on), tl.tensor(y, backend=on)
    with np.errstate(all="ignore"):
        checks = {
            "exp": (tx.exp(), np.exp(x)),
            "log": (tx.log(), np.log(x)),
            "sqrt": (tx.sqrt(), np.sqrt(x)),
            "sigmoid": (tx.sigmoid(), 1 / (1 + np.exp(-x))),
            "relu": (tx.relu(), np.maximum(x, 0)),
            "div": (tx / ty, x / y),
            "pow": (tx**ty, x**y),
            "maximum": (tx.maximum(ty), np.maximum(x, y)),
            "minimum": (tx.minimum(ty), np.minimum(x, y)),
            "reciprocal": (tx._map("reciprocal"), 1 / x),
            "sign": (tx.sign(), np.sign(x)),
            "max": (tx.max(), np.max(x)),
        }
    for what, (got, expected) in checks.items():
        np.testing.assert_array_equal(
            got.to("numpy").numpy(), expected, err_msg=f"{what} on {name}"
        )


@pytest.mark.parametrize("name", BACKENDS[1:])
def test_views_share_storage_and_writes_show_through(name: str) -> None:
    on = backend(name)
    x = tl.arange(12.0, backend=on).reshape(3, 4)
    row, col, t = x[1], x[:, 2], x.T
    with tl.no_grad():
        row.fill_(-1.0)
        col[...] = tl.tensor([7.0, 8.0, 9.0], backend=on)
        t[0, 2] = 100.0  # x[2, 0]
        x[np.array([0, 0]), np.array([1, 3])] = 5.0
    expected = np.arange(12.0).reshape(3, 4)
    expected[1] = -1.0
    expected[:, 2] = [7.0, 8.0, 9.0]
    expected[2, 0] = 100.0
    expected[0, [1, 3]] = 5.0
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x.T.stride() == tuple(reversed(x.stride()))
    with pytest.raises(RuntimeError, match="expanded view"), tl.no_grad():
        x[0:1].expand(4, 4)[0, 0] = 1.0


@pytest.mark.parametrize("name", BACKENDS)
def test_in_place_ops_write_into_storage_even_when_operands_overlap(name: str) -> None:
    # In-place ops hand the backend the tensor's own storage as zip's `out`. The operand may be
    # that storage, another view of it (shifted, transposed) or a broadcast row.
    on = backend(name)
    x = tl.arange(12.0, backend=on).reshape(3, 4)
    storage = x.storage
    expected = np.arange(12.0).reshape(3, 4)
    with tl.no_grad():
        x.add_(x, alpha=0.5)
        expected += expected * 0.5
        x.mul_(tl.tensor([1.0, -1.0, 2.0, 0.5], backend=on))
        expected *= [1.0, -1.0, 2.0, 0.5]
        x[1:].sub_(x[:-1])  # reads rows 0-1 while writing rows 1-2
        expected[1:] -= expected[:-1].copy()
        sq = x[:, :3]
        sq.div_(sq.T + 10.0)  # a transposed view of the same memory plus 10, computed first
        expected[:, :3] /= expected[:, :3].T + 10.0
        y = tl.arange(9.0, backend=on).reshape(3, 3)
        y.add_(y.T)  # the operand is the transpose of the output itself
    y_expected = np.arange(9.0).reshape(3, 3)
    np.testing.assert_allclose(x.to("numpy").numpy(), expected, rtol=1e-15)
    np.testing.assert_array_equal(y.to("numpy").numpy(), y_expected + y_expected.T)
    assert x.storage is storage  # in place: the same storage, not a new one
    i = tl.tensor([1, 2], backend=on)
    with pytest.raises(
        RuntimeError, match="has dtype torchlight.float64, which cannot be stored in place"
    ):
        i.div_(2)  # true division of integers gives floats, as in PyTorch
    assert i.tolist() == [1, 2]
    i.mul_(3)
    assert i.tolist() == [3, 6]
    with pytest.raises(RuntimeError, match="expanded view"), tl.no_grad():
        x[0:1].expand(4, 4).add_(1.0)


@pytest.mark.parametrize("name", BACKENDS[1:])
def test_index_add_accumulates_repeated_indices(name: str) -> None:
    on = backend(name)
    x = tl.tensor([1.0, 2.0, 3.0], requires_grad=True, backend=on)
    y = x[tl.tensor([0, 2, 0, 0])].sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.to("numpy").numpy(), [3.0, 0.0, 1.0])


def test_numpy_index_add_of_whole_rows_equals_np_add_at() -> None:
    """The numpy backend sums repeated rows by sorting (an embedding's backward): the same
    sums as ``np.add.at``, for negative, repeated and broadcast indices of 1 or 2 arrays,
    and out-of-range indices still raise numpy's IndexError."""
    b, rng = backend("numpy"), np.random.default_rng(0)
    cases = [
        ((6, 3), (rng.integers(-6, 6, (4, 5)),), rng.standard_normal((4, 5, 3))),
        ((4, 5, 2), (rng.integers(0, 4, 7), rng.integers(-5, 5, 7)), rng.standard_normal((7, 2))),
        ((4, 5, 2), (rng.integers(0, 4, (3, 1)), rng.integers(0, 5, (1, 4))), np.ones(2)),
    ]
    sorted_cases = [  # large enough, and 4 picks a row or more: summed by sorting
        ((65, 96), (rng.integers(-65, 65, (32, 64)),), rng.standard_normal((32, 64, 96))),
        ((5, 7, 300), (rng.integers(0, 5, 200), rng.integers(-7, 7, 200)), rng.random((200, 300))),
        ((10, 9000), (rng.integers(0, 10, 50),), rng.standard_normal(9000)),  # broadcast rows
    ]
    for shape, index, values in cases + sorted_cases:
        want = np.zeros(shape)
        np.add.at(want, index, values)
        np.testing.assert_allclose(b.index_add(shape, index, values), want, rtol=1e-13, atol=1e-13)
    for shape, index, values in sorted_cases:
        assert kernels.add_rows(np.zeros(shape), index, values)
    for shape, index, values in cases:
        assert not kernels.add_rows(np.zeros(shape), index, values)  # np.add.at's
    with pytest.raises(IndexError):
        b.index_add((3, 2), (np.array([0, 3]),), np.ones((2, 2)))
    with pytest.raises(IndexError):
        b.index_add((3, 5000), (np.array([0, 3] * 10),), np.ones((20, 5000)))


def test_numpy_argmax_across_a_short_axis_equals_np_argmax() -> None:
    """The numpy backend's ``argreduce`` along a short axis that is not the contiguous one
    (``kernels.argmax_across``: max pooling's windows) gives ``np.argmax``'s/``np.argmin``'s
    indices, the first extreme on ties, a NaN as the extreme, for every dim and dtype; where
    the axis is the contiguous one, long, or the array small, it leaves the work to numpy."""
    from torchlight.backends.numpy import kernels

    b, rng, taken = backend("numpy"), np.random.default_rng(8), 0
    for shape in ((16, 4, 4, 4, 64), (64, 3, 32), (3, 2, 600)):
        for dtype in (np.float32, np.float64, np.int64):
            a = (rng.standard_normal(shape) * 2).round().astype(dtype)  # many ties
            if dtype != np.int64:
                a.flat[::7], a.flat[::11] = np.nan, -np.inf
            for dim in range(-len(shape), len(shape)):
                for op, fn in (("max", np.argmax), ("min", np.argmin)):
                    for keepdim in (True, False):
                        want = fn(a, axis=dim, keepdims=keepdim)
                        got = b.argreduce(op, a, dim, keepdim)
                        assert got.dtype == np.int64 and got.shape == want.shape
                        np.testing.assert_array_equal(got, want)
                        taken += kernels.argmax_across(op, a, dim, keepdim) is not None
    assert taken > 100  # the whole-array passes ran
    assert kernels.argmax_across("max", np.zeros((1000, 4)), 1, False) is None  # contiguous axis
    assert kernels.argmax_across("max", np.zeros((4, 1000)), 0, False) is not None
    assert kernels.argmax_across("max", np.zeros((4, 100)), 0, False) is None  # small
    assert kernels.argmax_across("max", np.zeros((40, 100)), 0, False) is None  # a long axis


@pytest.mark.parametrize("name", BACKENDS)
def test_a_lifted_number_keeps_its_type_sign_and_dtype(name: str) -> None:
    # numpy's backend keeps each lifted number in a table (a speed trick): 1, 1.0 and True are
    # equal and hash alike, as are 0.0 and -0.0, and NaN is not equal to itself; none may be
    # taken for another, asked in either order.
    b = backend(name)
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    for _ in range(2):
        for value, dtype, kind in [(1, None, "i"), (True, None, "b"), (1.0, f64, "f")]:
            got = b.to_numpy(b.scalar(value, dtype))
            assert got.shape == () and got.dtype.kind == kind and got == value, (value, got)
        for value in (0.0, -0.0):
            got = b.to_numpy(b.scalar(value, f64))
            assert got == 0 and np.signbit(got) == np.signbit(value), (value, got)
        assert b.to_numpy(b.scalar(0.1, f32)).dtype == f32
        assert b.to_numpy(b.scalar(0.1, f32)) == np.float32(0.1)
        assert np.isnan(b.to_numpy(b.scalar(float("nan"), f64)))
    x = tl.tensor([2.0], backend=b)
    assert (1 / (x * -0.0)).tolist() == [-np.inf] and (1 / (x * 0.0)).tolist() == [np.inf]
    assert (tl.tensor([2], backend=b) * True).dtype == tl.int64
    assert (tl.tensor([True], backend=b) & True).dtype == tl.bool


@pytest.mark.parametrize("name", BACKENDS)
def test_in_place_ops_cannot_change_a_lifted_number(name: str) -> None:
    # The numpy backend hands out one read-only array for every 2.0 lifted in float64 (a speed
    # trick): an in-place op next to it, or into it, must not change what the next 2.0 is.
    b = backend(name)
    x = tl.tensor([1.0, 2.0], backend=b)
    x.add_(2.0)
    x += 2.0
    y = x * 2.0
    y.mul_(10.0)
    tl.where(x > 4.0, 2.0, x).add_(1.0)
    assert x.tolist() == [5.0, 6.0] and y.tolist() == [100.0, 120.0]
    lifted = x._lift(2.0)  # (internal: the tensor an operator makes of the number)
    if name in ("numpy", "numba"):
        with pytest.raises(ValueError, match="read-only"):
            lifted.add_(1.0)
    else:  # fresh storage each time: a write changes that copy only
        lifted.add_(1.0)
    assert (tl.tensor([1.0], backend=b) * 2.0).tolist() == [2.0]
    assert x._lift(2.0).tolist() == 2.0


def test_mixing_backends_names_both() -> None:
    a = tl.ones(2, backend=backend("strided"))
    b = tl.ones(2, backend=backend("numba"))
    with pytest.raises(RuntimeError, match="'strided' and 'numba'"):
        a + b


def test_numpy_backend_returns_ieee_edge_values_without_warnings() -> None:
    # numpy warns on log(0), 1/0 and friends; PyTorch (and torchlight) return inf/nan silently.
    x = tl.tensor([0.0, -1.0, 1000.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [x.log(), x.sqrt(), x.exp(), 1 / x, x / 0.0, x**0.5]
    with np.errstate(all="ignore"):
        v = np.array([0.0, -1.0, 1000.0])
        expected = [np.log(v), np.sqrt(v), np.exp(v), 1 / v, v / 0.0, v**0.5]
    for t, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(t.numpy(), e)  # nan matches nan


def test_numpy_backend_stays_quiet_when_threads_share_its_ops() -> None:
    # The quiet ops run in one prepared context, which one thread can enter at a time; the others
    # must fall back to np.errstate, neither raising nor warning. numpy lets go of the GIL inside
    # a large ufunc, so with several threads the context is often busy.
    from concurrent.futures import ThreadPoolExecutor

    from torchlight.backends.numpy.backend import NumpyBackend

    be = NumpyBackend()
    zeros = np.zeros(1 << 18)

    def work(_: int) -> bool:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(20):
                if not (
                    np.isneginf(be.map("log", zeros)).all()
                    and np.isinf(be.zip("div", 1 / (zeros + 1), zeros)).all()
                ):
                    return False
        return True

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(8)))
    with warnings.catch_warnings():  # and the caller's own numpy settings are untouched
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            np.log(np.zeros(1))


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_kernels_equal_their_compositions(name: str, dtype: type) -> None:
    """``linear`` and ``log_softmax`` (numpy's one-kernel overrides, the others' inherited
    compositions) give what the composition of primitives in ``FusedKernels`` gives."""
    from torchlight.backends.fused import FusedKernels

    b = backend(name)
    rng = np.random.default_rng(0)
    x, w, bias = (rng.standard_normal(s).astype(dtype) for s in ((3, 4), (5, 4), (5,)))
    logits = np.array([[1.0, np.inf, 0.0], [-3.0, 2.0, 50.0]], dtype)  # an inf gives nan
    x_, w_, bias_, logits_ = (b.from_numpy(a) for a in (x, w, bias, logits))
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for bias_or_none in (bias_, None):
        got = b.to_numpy(b.linear(x_, w_, bias_or_none))
        want = b.to_numpy(FusedKernels.linear(b, x_, w_, bias_or_none))
        assert got.dtype == want.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        plain = x @ w.T + (0 if bias_or_none is None else bias)
        np.testing.assert_allclose(got, plain, rtol=tol, atol=tol)
    for dim in (0, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("error" if name == "numpy" else "ignore")  # numpy's: quiet
            got = b.to_numpy(b.log_softmax(logits_, dim))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # inf - inf in the composition
            want = b.to_numpy(FusedKernels.log_softmax(b, logits_, dim))
        assert got.dtype == want.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _gelu_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GELU (tanh form) and its derivative, in float64 from the formulas on paper."""
    c, a = np.sqrt(2 / np.pi), 0.044715
    t = np.tanh(c * (x + a * x**3))
    return 0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * c * (1 + 3 * a * x**2)


def _layer_norm_grad_reference(x, dims, weight, grad):  # type: ignore[no-untyped-def]
    """Layer norm's input gradient, in float64: the (N, N) Jacobian of each normalized group,
    written out from its definition and transposed onto the gradient."""
    moved = np.moveaxis(x, dims, range(x.ndim - len(dims), x.ndim))
    rows = moved.reshape(-1, int(np.prod([x.shape[d] for d in dims])))
    n = rows.shape[1]
    g = grad * (1 if weight is None else weight)
    g_rows = np.moveaxis(g, dims, range(x.ndim - len(dims), x.ndim)).reshape(rows.shape)
    out = np.empty_like(rows)
    for i, (row, g_row) in enumerate(zip(rows, g_rows, strict=True)):
        centred = row - row.mean()
        rstd = 1 / np.sqrt((centred**2).mean() + 1e-5)
        x_hat = centred * rstd
        jacobian = rstd * (np.eye(n) - 1 / n - np.outer(x_hat, x_hat) / n)  # d x_hat / d x
        out[i] = jacobian.T @ g_row
    return np.moveaxis(out.reshape(moved.shape), range(x.ndim - len(dims), x.ndim), dims)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu_and_layer_norm_kernels_equal_their_compositions(name: str, dtype: type) -> None:
    """``gelu`` (numpy's and Numba's in-place override, the others' inherited composition) gives
    what the composition of primitives in ``FusedKernels`` gives; it and the gradient overrides
    ``gelu_backward`` and ``layer_norm_backward``, where a backend has them (numpy and Numba;
    elsewhere the Functions' readable backward runs, ``tests/test_fused_gradients.py``), give
    the formulas computed here in float64 (on a transposed input too, and over one or two
    normalized dimensions, with and without a weight)."""
    from torchlight.backends.fused import FusedKernels

    b = backend(name)
    assert hasattr(b, "gelu_backward") == hasattr(b, "layer_norm_backward") == OVERRIDES[name]
    rng = np.random.default_rng(0)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    x64 = rng.standard_normal((3, 4, 5)) * 2
    grad64 = rng.standard_normal((3, 4, 5))

    def check(got: object, plain: np.ndarray, want: object = None) -> None:
        got_ = b.to_numpy(got[0])  # type: ignore[index]
        assert got_.dtype == dtype
        np.testing.assert_allclose(got_, plain, rtol=tol, atol=tol)
        if want is not None:
            want_ = b.to_numpy(want[0])  # type: ignore[index]
            assert want_.dtype == dtype
            np.testing.assert_allclose(got_, want_, rtol=tol, atol=tol)

    for x_np in (x64, x64.transpose(2, 1, 0).copy().transpose(2, 1, 0)):  # contiguous, permuted
        x, grad = b.from_numpy(x_np.astype(dtype)), b.from_numpy(grad64.astype(dtype))
        value, slope = _gelu_reference(x_np.astype(dtype).astype(np.float64))
        check(b.gelu(x), value, FusedKernels.gelu(b, x))
        if not OVERRIDES[name]:
            continue
        check(b.gelu_backward(x, grad), slope * grad64)
        for dims in ((2,), (1, 2)):
            xd = x_np.astype(dtype)
            mean = xd.mean(dims, keepdims=True)
            rstd = 1 / np.sqrt(((xd - mean) ** 2).mean(dims, keepdims=True) + 1e-5)
            shape = tuple(x_np.shape[d] for d in dims)
            for w in (None, rng.standard_normal(shape)):
                args = [x, b.from_numpy(mean), b.from_numpy(rstd.astype(dtype))]
                args += [None if w is None else b.from_numpy(w.astype(dtype)), grad]
                plain = _layer_norm_grad_reference(
                    xd.astype(np.float64), dims, None if w is None else w.astype(dtype), grad64
                )
                check(b.layer_norm_backward(*args), plain)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cross_entropy_backward_kernel_equals_its_formula(name: str, dtype: type) -> None:
    """``cross_entropy_backward`` (numpy's and Numba's one-array override; the other backends
    have none and run ``CrossEntropy``'s readable backward) gives (softmax(x) - onehot(y))
    times the loss's gradient per row, computed here in float64 from the logits, for each
    reduction and for logits large enough that e^x overflows unless shifted (the kernel is
    given log softmax(x), as forward computed it)."""
    b = backend(name)
    assert hasattr(b, "cross_entropy_backward") == OVERRIDES[name]
    if not OVERRIDES[name]:
        return
    rng = np.random.default_rng(3)
    tol = 1e-12 if dtype == np.float64 else 2e-6
    x_np = (rng.standard_normal((6, 5)) * 3).astype(dtype)
    x_np[0, :2] = [800.0, -800.0] if dtype == np.float64 else [80.0, -80.0]
    labels = np.array([0, 4, 4, 1, 2, 0])
    shifted = x_np.astype(np.float64) - x_np.max(1, keepdims=True)
    softmax = np.exp(shifted) / np.exp(shifted).sum(1, keepdims=True)
    truth = np.eye(5)[labels]
    for reduction in ("mean", "sum", "none"):
        g_np = rng.standard_normal(6 if reduction == "none" else ()).astype(dtype)
        scale = (
            g_np.reshape(6, 1) if reduction == "none" else g_np / (6 if reduction == "mean" else 1)
        )
        logp = (shifted - np.log(np.exp(shifted).sum(1, keepdims=True))).astype(dtype)
        x, g = b.from_numpy(logp), b.from_numpy(np.asarray(g_np))
        got = b.to_numpy(b.cross_entropy_backward(x, g, labels, reduction)[0])
        assert got.dtype == dtype
        np.testing.assert_allclose(got, (softmax - truth) * scale, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lstm_override_equals_the_readable_recurrence(name: str, dtype: type) -> None:
    """Where a backend overrides the LSTM recurrence (numpy's in-place loop, Numba's compiled
    gates in float32), ``FusedLSTM`` gives what ``Recurrence`` with an ``LSTMStep`` gives on
    that backend, outputs and every gradient, with and without ``b_hh``, for gate inputs from
    -200 to 200 (sigmoid's e^-x and tanh's e^2x overflow there) and tiny ones (tanh x = x).
    Where it does not, ``lstm`` (what nn.LSTM runs) is the readable recurrence itself."""
    from torchlight.ops.recurrent import FusedLSTM, LSTMStep, Recurrence, lstm

    b = backend(name)
    rng = np.random.default_rng(5)
    steps, batch, size = 4, 3, 5
    xp = rng.standard_normal((steps, batch, 4 * size)) * 3
    xp[0, 0, :6] = [-200.0, 200.0, 1e-6, -1e-30, 0.0, 40.0]  # gates i, f of step 1
    xp[1, 1, 2 * size : 2 * size + 3] = [-100.0, 1e-7, 100.0]  # the cell candidate g
    arrays = [xp, rng.standard_normal((4 * size, size)), rng.standard_normal(4 * size)]
    arrays += [rng.standard_normal((batch, size)), rng.standard_normal((batch, size))]
    weights = tl.tensor(rng.standard_normal((2, steps, batch, size)).astype(dtype), backend=b)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    for with_bias in (True, False):
        ins = [tl.tensor(a.astype(dtype), requires_grad=True, backend=b) for a in arrays]
        if not with_bias:
            ins[2] = None
        if not hasattr(b, "lstm_forward"):
            assert lstm(*ins).grad_fn is Recurrence
            continue
        assert lstm(*ins).grad_fn is FusedLSTM
        results = []
        for run in (FusedLSTM.apply, lambda *a: Recurrence.apply(LSTMStep(), *a)):
            out = run(*ins)
            (out * weights).sum().backward()
            results.append([out] + [t.grad for t in ins if t is not None])
            for t in ins:
                if t is not None:
                    t.grad = None
        for i, (got, want) in enumerate(zip(*results, strict=True)):
            got, want = got.detach().numpy(), want.detach().numpy()
            assert got.dtype == want.dtype == dtype, i
            scale = max(1.0, np.abs(want).max())
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=str(i))
        f64 = [a.astype(dtype).astype(np.float64) for a in arrays]
        plain = _np_lstm(f64[0], f64[1], f64[2] if with_bias else None, f64[3], f64[4])
        np.testing.assert_allclose(
            results[0][0].detach().numpy(), plain, rtol=10 * tol, atol=10 * tol
        )


def _np_lstm(
    xp: np.ndarray, w_hh: np.ndarray, b_hh: np.ndarray | None, h: np.ndarray, c: np.ndarray
) -> np.ndarray:
    """Every step's (h, c) of an LSTM layer, plain numpy in float64."""

    def sigmoid(x: np.ndarray) -> np.ndarray:
        return 0.5 * (1 + np.tanh(x / 2))  # no overflow at |x| = 200

    out = []
    for x in xp:
        i, f, g, o = np.split(x + h @ w_hh.T + (0.0 if b_hh is None else b_hh), 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        out.append((h, c))
    return np.stack([np.stack([h for h, _ in out]), np.stack([c for _, c in out])])
