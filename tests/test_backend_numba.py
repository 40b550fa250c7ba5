"""The Numba backend beyond the op table: planning, large and ragged shapes, float32 exp, the disk cache."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import torchlight as tl
from torchlight.backends import get_backend
from torchlight.backends.numba.backend import CHUNK, flat, plan
from torchlight.backends.numba.expf import exp_float32_kernel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def nb():
    return get_backend("numba")


def test_plan_merges_contiguous_dimensions_and_cuts_long_runs() -> None:
    p = plan((4, 5, 6), [(30, 6, 1), (30, 6, 1)])  # both contiguous: one run of 120
    assert p.outer.tolist() == [] and p.inner == 120
    p = plan((4, 5), [(5, 1), (0, 1)])  # a matrix plus a broadcast row: rows stay rows
    assert p.outer.tolist() == [4] and p.inner == 5
    assert [s.tolist() for s in p.strides] == [[5, 1], [0, 1]]
    p = plan((3, 1, 4), [(1, 7, 3)])  # size-1 dimensions drop out; a transpose stays 2-d
    assert p.outer.tolist() == [3] and p.inner == 4 and p.strides[0].tolist() == [1, 3]
    n = 3 * CHUNK + 5
    p = plan((n,), [(1,), (0,)])  # a long run is cut into rows the cores share
    assert p.outer.tolist() == [4] and p.inner == CHUNK
    assert [s.tolist() for s in p.strides] == [[CHUNK, 1], [0, 0]]


def test_flat_spans_the_memory_of_a_view() -> None:
    base = np.arange(24.0).reshape(4, 6)
    view = base[1:3, ::2]
    buffer, strides = flat(view)
    assert strides == [6, 2] and not buffer.flags.writeable
    assert buffer[1 * 6 + 2 * 2] == view[1, 2]
    buffer, strides = flat(base[::-1])  # negative strides: copied first
    assert strides == [6, 1] and buffer[0] == 18.0


@pytest.mark.parametrize(
    ("shape", "dims"),
    [
        ((700, 300), (0,)),
        ((700, 300), (1,)),
        ((3, 200, 150), (0, 2)),
        ((250_000,), (0,)),
        ((5, 4), ()),
    ],
)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_reductions_on_large_and_strided_inputs(nb, shape, dims, op) -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=shape)
    for view in (a, a.T if a.ndim > 1 else a[::2]):  # contiguous, then strided
        got = nb.reduce(op, view, dims, False)
        expected = getattr(np, op)(view, axis=dims)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((67, 45), (45, 71)), ((2, 1, 9, 13), (3, 13, 6)), ((130,), (130, 5)), ((33, 7), (7,))],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.bool_])
def test_matmul_ragged_batched_and_typed(nb, a_shape, b_shape, dtype) -> None:
    rng = np.random.default_rng(1)
    a = (rng.normal(size=a_shape) * 3).astype(dtype)
    b = (rng.normal(size=b_shape) * 3).astype(dtype)
    got = nb.matmul(a, b)
    expected = np.matmul(a, b)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    atol = tol * np.abs(expected).max(initial=1.0)  # float32 sums of ~50 terms of size ~10
    np.testing.assert_allclose(got, expected, rtol=tol, atol=atol)
    if a.ndim > 1:  # the same matrix stored column-major
        a_t = a.swapaxes(-1, -2).copy().swapaxes(-1, -2)
        np.testing.assert_allclose(nb.matmul(a_t, b), expected, rtol=tol, atol=atol)


def test_in_place_zip_with_a_broadcast_operand(nb) -> None:
    """``out`` is ``a`` and ``b`` broadcasts (``p.mul_(0.9)``, a bias added in place): the
    strided kernel's in-place loops give numpy's values, also where a row is cut into CHUNKs."""
    rng = np.random.default_rng(1)
    for shape, b_shape in (((7, 5), ()), ((7, 5), (5,)), ((3, CHUNK + 3), (CHUNK + 3,))):
        for op, ufunc in (("sub", np.subtract), ("div", np.divide), ("pow", np.power)):
            a, b = rng.uniform(0.5, 2.0, shape), rng.uniform(0.5, 2.0, b_shape)
            want = ufunc(a, b)
            got = nb.zip(op, a, b, out=a)
            assert got is a
            np.testing.assert_allclose(a, want, rtol=1e-14, err_msg=f"{op} {shape} {b_shape}")
    p = tl.tensor(rng.uniform(size=(4, 3)), backend="numba")
    before = p.numpy().copy()
    p.mul_(0.9).add_(tl.tensor([1.0, 2.0, 3.0], backend="numba"))
    np.testing.assert_allclose(p.numpy(), before * 0.9 + [1.0, 2.0, 3.0], rtol=1e-14)


def test_matmul_of_large_transposed_operands(nb) -> None:
    """A transposed operand at least CHUNK long: copied by ``transpose_kernel`` (a plain B or a
    batch of them, which the kernel reads as B^T), or, for G^T X, sent to BLAS."""
    rng = np.random.default_rng(0)
    g, x = rng.standard_normal((300, 70)), rng.standard_normal((300, 90))
    np.testing.assert_allclose(nb.matmul(g.T, x), g.T @ x, rtol=1e-12, atol=1e-12)  # BLAS
    a, w = rng.standard_normal((5, 200)), rng.standard_normal((200, 100))
    np.testing.assert_allclose(nb.matmul(a, w), a @ w, rtol=1e-12, atol=1e-12)  # w^T copied
    batch = rng.standard_normal((3, 200, 100))
    np.testing.assert_allclose(nb.matmul(a, batch), a @ batch, rtol=1e-12, atol=1e-12)
    ints = rng.integers(-5, 5, (300, 70))
    np.testing.assert_array_equal(nb.matmul(ints.T, ints), ints.T @ ints)  # int: our kernel


def test_elementwise_on_long_strided_and_broadcast_inputs(nb) -> None:
    rng = np.random.default_rng(2)
    a = rng.normal(size=(3 * CHUNK + 7,))
    np.testing.assert_allclose(nb.map("exp", a), np.exp(a), rtol=1e-15)
    np.testing.assert_allclose(nb.map("tanh", a[::3]), np.tanh(a[::3]), rtol=1e-15)
    m = rng.normal(size=(300, 200))
    np.testing.assert_allclose(nb.zip("mul", m.T, m[:, 0]), m.T * m[:, 0], rtol=1e-15)
    np.testing.assert_array_equal(nb.zip("gt", m, np.float64(0.0)), m > 0)
    np.testing.assert_array_equal(nb.zip("maximum", m > 0, m < 0.5), (m > 0) | (m < 0.5))
    x = tl.tensor(m, backend="numba")
    assert bool((x > -10).all()) and not bool((x > 10).any())


def _ulps_apart(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """How many float32 numbers lie between ``got`` and ``expected`` (both >= 0, or nan)."""
    apart = np.abs(got.view(np.int32).astype(np.int64) - expected.view(np.int32))
    return np.where(np.isnan(got) & np.isnan(expected), 0, apart)


def test_float32_exp_is_within_one_ulp_over_the_float32_range(nb) -> None:
    """The vectorized float32 exp (numba_expf) against float64 exp rounded to float32."""
    every_bit_pattern = np.arange(0, 2**32, 1021, dtype=np.uint32).view(np.float32)
    near_overflow = np.linspace(88.5, 89.5, 100_001, dtype=np.float32)
    subnormal_results = np.linspace(-104.5, -87.0, 2_000_001, dtype=np.float32)
    edges = np.array(
        [0.0, -0.0, 1.0, -1.0, 1e-30, -1e-45, 88.72283, 88.722839, 88.72284, -103.972084]
        + [-103.97209, -104.0, 1000.0, -1000.0, np.inf, -np.inf, np.nan, 3e38, -3e38],
        dtype=np.float32,
    )
    x = np.concatenate([every_bit_pattern, near_overflow, subnormal_results, edges])
    with np.errstate(all="ignore"):
        expected = np.exp(x.astype(np.float64)).astype(np.float32)
    got = nb.map("exp", x)
    assert got.dtype == np.float32
    apart = _ulps_apart(got, expected)
    assert apart.max() <= 1, f"exp({x[apart.argmax()]!r}) = {got[apart.argmax()]!r}"
    n = edges.size  # the IEEE edges exactly: inf, 0, nan, the last float before overflow
    np.testing.assert_array_equal(got[-n:], expected[-n:])
    strided = nb.map("exp", x[::-7])  # the strided path: the scalar expf of the C library
    assert _ulps_apart(strided, expected[::-7]).max() <= 1


def test_float32_lstm_gates_are_within_two_ulps_over_the_float32_range() -> None:
    """The LSTM kernel's sigmoid and tanh (numba_lstm) against float64 rounded to float32, on
    every 1021st bit pattern: gate z = xp when h W_hh^T and b_hh are 0. Below -87.33, where
    the exact sigmoid is under 2^-126 (and e^-x overflows float32 from -88.73), any value
    from 0 to 2^-125 is accepted."""
    from torchlight.backends.numba.lstm import lstm_cell_forward

    x = np.arange(0, 2**32, 1021, dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, np.array([np.inf, -np.inf, np.nan, 0.625, -0.625], np.float32)])
    x = np.concatenate([x, np.nextafter(x[-2:], np.float32(0))])  # either side of the switch
    size = x.size
    xp = np.tile(x, 4)[None]  # every x into each of the four gates
    zeros = np.zeros_like(xp)
    gates, c, tanh_c, h = np.empty_like(xp), *(np.empty((1, size), np.float32) for _ in "cth")
    lstm_cell_forward(zeros, xp, zeros[0], np.zeros((1, size), np.float32), gates, c, tanh_c, h)
    with np.errstate(all="ignore"):
        sigmoid = (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)
        tanh = np.tanh(x.astype(np.float64)).astype(np.float32)
    i, f, g, o = gates.reshape(4, size)
    ordinary = x >= -87.33  # sigmoid(x) >= 2^-126, a normal float32
    for name, got, want in (("i", i, sigmoid), ("f", f, sigmoid), ("o", o, sigmoid)):
        apart = _ulps_apart(got[ordinary], want[ordinary])
        assert apart.max() <= 2, f"sigmoid({x[ordinary][apart.argmax()]!r}) in gate {name}"
        assert np.all((got[~ordinary] >= 0) & (got[~ordinary] < 2.0**-125) | np.isnan(x[~ordinary]))
    nonzero = x != 0  # xp + 0 + 0 makes -0.0 into +0.0 before the gate
    apart = _ulps_apart(g[nonzero], tanh[nonzero])
    assert apart.max() <= 2, (
        f"tanh({x[nonzero][apart.argmax()]!r}) = {g[nonzero][apart.argmax()]!r}"
    )
    assert np.isnan(g[x != x]).all() and np.isnan(i[x != x]).all()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_float32_exp_loop_is_vectorized() -> None:
    """LLVM turns the loop into packed instructions (``mulps``), not one number at a time."""
    from numba import njit

    kernel = njit(exp_float32_kernel.py_func)  # not from the disk cache: that has no assembly
    x = np.linspace(-5, 5, 64, dtype=np.float32)
    out = np.empty_like(x)
    kernel(out, x)
    assembly = "\n".join(kernel.inspect_asm().values())
    assert re.search(r"\bv?mulps\b", assembly), "no packed float32 multiply: not vectorized"
    assert not re.search(r"[\s$*]expf\b", assembly), "calls the C library's scalar expf"


CACHE_SCRIPT = textwrap.dedent(
    """
    import json, time
    start = time.perf_counter()
    import torchlight as tl
    from torchlight.backends.numba import backend as nbk
    from torchlight.backends.numba.expf import exp_float32_kernel
    x = tl.randn(64, 64, backend="numba")
    y = ((x + 1.0).exp().sum(0) @ x).sum().item()
    z = x.to(tl.float32).exp()
    seconds = time.perf_counter() - start
    kernels = [nbk.map_kernels("exp")[0], nbk.zip_kernels("add")[1], nbk.reduce_kernels("sum")[0]]
    kernels += [nbk.matmul_kernel, exp_float32_kernel]
    print(json.dumps({
        "seconds": seconds,
        "hits": sum(sum(k.stats.cache_hits.values()) for k in kernels),
        "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels),
    }))
    """
)


def test_kernels_are_loaded_from_the_disk_cache_in_a_second_process(tmp_path) -> None:
    """Numba's cache=True must work for our closure-built kernels (see numba_backend's docstring)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", CACHE_SCRIPT],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["misses"] == 5 and cold["hits"] == 0, cold
    assert warm["hits"] == 5 and warm["misses"] == 0, f"the second process compiled again: {warm}"
    assert len(list(tmp_path.rglob("*.nbi"))) >= 5, "no cache index files were written"
    assert warm["seconds"] < cold["seconds"], (cold, warm)


def test_without_numba_the_core_imports_and_the_error_says_what_to_install() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["numba"] = None  # as if numba were not installed
        import torchlight as tl
        print(tl.ones(2).sum().item())
        for name in ("numba", "cuda"):
            try:
                tl.zeros(2, backend=name)
            except ImportError as error:
                print(error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "2.0"
    assert "pip install 'torchlight-edu[numba]'" in lines[1]
    assert "pip install 'torchlight-edu[cuda]'" in lines[2] and "NUMBA_ENABLE_CUDASIM=1" in lines[2]
