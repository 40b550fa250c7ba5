"""Tensors themselves: factories, dtypes, layout and views, interop, printing, indexing."""

from __future__ import annotations

import numpy as np
import pytest

import torchlight as tl


def test_factories_take_dtype_and_requires_grad():
    tl.manual_seed(0)
    made = [
        tl.tensor([1.0, 2.0]), tl.zeros(2, 3), tl.ones((2, 3)), tl.full((2,), 7.0), tl.empty(3),
        tl.arange(0.0, 1.0, 0.25), tl.linspace(0, 1, 5), tl.eye(3), tl.rand(2, 2), tl.randn(4),
    ]  # fmt: skip
    assert all(t.dtype is tl.float64 for t in made)
    assert [t.shape for t in made] == [
        (2,),
        (2, 3),
        (2, 3),
        (2,),
        (3,),
        (4,),
        (5,),
        (3, 3),
        (2, 2),
        (4,),
    ]
    for factory in (tl.zeros, tl.ones, tl.rand, tl.randn, tl.empty):
        t = factory(2, 2, dtype=tl.float32, requires_grad=True)
        assert t.dtype is tl.float32 and t.requires_grad and t.is_leaf
    like = tl.ones(2, 3, dtype=tl.float32)
    for factory in (tl.zeros_like, tl.ones_like, tl.rand_like, tl.randn_like, tl.empty_like):
        assert factory(like).shape == (2, 3) and factory(like).dtype is tl.float32
    assert tl.full_like(like, 2.0).tolist() == [[2.0] * 3] * 2
    assert tl.arange(4).dtype is tl.int64 and tl.arange(4).tolist() == [0, 1, 2, 3]
    assert tl.tensor(np.arange(3, dtype=np.float32)).dtype is tl.float32
    assert tl.tensor(True).dtype is tl.bool and tl.tensor(3).dtype is tl.int64


def test_manual_seed_makes_draws_repeatable():
    tl.manual_seed(42)
    a = tl.randn(5).tolist()
    tl.manual_seed(42)
    assert tl.randn(5).tolist() == a
    assert tl.randn(5).tolist() != a


def test_set_default_dtype():
    try:
        tl.set_default_dtype(tl.float32)
        assert tl.tensor([1.0]).dtype is tl.float32 and tl.zeros(2).dtype is tl.float32
        assert repr(tl.tensor([1.0])) == "tensor([1.])"
    finally:
        tl.set_default_dtype(tl.float64)
    with pytest.raises(TypeError, match="must be floating point"):
        tl.set_default_dtype(tl.int64)
    with pytest.raises(TypeError, match="unsupported dtype"):
        tl.zeros(2, dtype="complex128")


def test_float32_runs_every_op_and_keeps_its_dtype():
    x = tl.randn(3, 4, dtype=tl.float32, requires_grad=True)
    w = tl.randn(4, 2, dtype=tl.float32, requires_grad=True)
    y = ((x @ w).sigmoid() * 2.0 + 1).log().sum()
    assert y.dtype is tl.float32
    y.backward()
    assert x.grad.dtype is tl.float32 and w.grad.dtype is tl.float32
    xd, wd = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ((xd @ wd).sigmoid() * 2.0 + 1).log().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xd.grad.numpy(), rtol=1e-5)


def test_mixed_dtypes_promote_like_pytorch():
    f32, f64, i64 = tl.ones(2, dtype=tl.float32), tl.ones(2), tl.arange(2)
    assert (f32 + f64).dtype is tl.float64
    assert (f32 * i64).dtype is tl.float32
    assert (i64 * 2).dtype is tl.int64 and (i64 * 2.5).dtype is tl.float64
    assert (f32 * 2.5).dtype is tl.float32  # a Python number never widens a float32 tensor


def test_views_share_storage_and_report_strides():
    x = tl.arange(12.0).reshape(3, 4)
    assert x.stride() == (4, 1) and x.is_contiguous()
    t = x.T
    assert t.shape == (4, 3) and t.stride() == (1, 4) and not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous() and c.tolist() == t.tolist() and x.contiguous() is x
    v = x.view(2, 6)
    s = x[1:, ::2]
    assert s.stride() == (4, 2)
    e = tl.tensor([1.0, 2.0]).expand(3, 2)
    assert e.stride() == (0, 1)
    with tl.no_grad():
        x[0, 0] = 100.0
    assert v[0, 0].item() == 100.0 and t[0, 0].item() == 100.0
    with tl.no_grad():
        x[1, 2] = -1.0
    assert s[0, 1].item() == -1.0
    with pytest.raises(RuntimeError, match="do not allow a view; use .reshape"):
        t.view(12)
    assert t.reshape(12).tolist() == t.contiguous().view(12).tolist()
    with pytest.raises(RuntimeError, match="expanded view"):
        e.add_(1.0)


def test_interop():
    x = tl.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert isinstance(x.numpy(), np.ndarray) and np.shares_memory(x.numpy(), x.numpy())
    assert np.asarray(x).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert x.shape == (2, 2) and x.ndim == 2 and len(x) == 2 and x.numel() == 4 and x.size(1) == 2
    assert [row.tolist() for row in x] == [[1.0, 2.0], [3.0, 4.0]]
    assert x[1, 0].item() == 3.0 and float(x[0, 1]) == 2.0
    with pytest.raises(ValueError, match="one element"):
        x.item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(x > 0)
    with pytest.raises(RuntimeError, match="detach"):
        tl.ones(2, requires_grad=True).numpy()
    assert "shape (2, 2)" in x._repr_html_()


def test_repr_matches_pytorch():
    assert repr(tl.tensor([4.0, 6.0], requires_grad=True)) == "tensor([4., 6.], requires_grad=True)"
    assert repr(tl.tensor([0.5, 1.25])) == "tensor([0.5000, 1.2500])"
    assert repr(tl.tensor(3.0)) == "tensor(3.)"
    assert repr(tl.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(tl.tensor([True, False])) == "tensor([True, False])"
    assert repr(tl.tensor([1.0], dtype=tl.float32)) == "tensor([1.], dtype=torchlight.float32)"
    assert repr(tl.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(tl.tensor([1.0, 2.0], requires_grad=True) * 2) == "tensor([2., 4.], grad_fn=<Mul>)"
    assert repr(tl.tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]])"
    assert repr(tl.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00])"


def test_indexing_forms():
    x = tl.arange(12.0).reshape(3, 4)
    assert x[1].tolist() == [4.0, 5.0, 6.0, 7.0]
    assert x[-1, 1:3].tolist() == [9.0, 10.0]
    assert x[None].shape == (1, 3, 4) and x[..., 0].tolist() == [0.0, 4.0, 8.0]
    assert x[x > 9].tolist() == [10.0, 11.0]
    assert x[[0, 2], [1, 3]].tolist() == [1.0, 11.0]
    assert x[tl.tensor([2, 0])][:, 0].tolist() == [8.0, 0.0]
    with pytest.raises(IndexError, match="integer or bool"):
        x[tl.tensor([0.0])]
    with pytest.raises(IndexError):
        x[5]


def test_repeated_indices_accumulate_gradients():
    x = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[tl.tensor([0, 0, 2])].sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 1.0]


def test_comparisons_and_argmax_carry_no_gradient():
    x = tl.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], requires_grad=True)
    for result in (x > 1, x == 2.0, x <= 3, x.argmax(), x.argmax(1)):
        assert not result.requires_grad and result.history is None
    assert (x > 1).dtype is tl.bool and x.argmax().item() == 3 and x.argmax(1).tolist() == [1, 0]
    assert x.argmin(0, keepdim=True).tolist() == [[0, 1, 0]]


def test_where_cat_stack_and_reductions():
    a = tl.tensor([1.0, -2.0, 3.0], requires_grad=True)
    w = tl.where(a > 0, a, 0.0)
    assert w.tolist() == [1.0, 0.0, 3.0]
    w.sum().backward()
    assert a.grad.tolist() == [1.0, 0.0, 1.0]
    assert tl.cat([tl.ones(2), tl.zeros(1)]).tolist() == [1.0, 1.0, 0.0]
    assert tl.stack([tl.ones(2), tl.zeros(2)], 1).shape == (2, 2)
    with pytest.raises(
        ValueError, match=r"cat: tensor 1 has shape \(2, 3\) but tensor 0 has shape \(2, 2\)"
    ):
        tl.cat([tl.ones(2, 2), tl.ones(2, 3)], 0)
    x = tl.tensor([[1.0, 2.0], [3.0, 5.0]])
    assert x.max().item() == 5.0 and x.min(1).values.tolist() == [1.0, 3.0]
    assert x.var().item() == pytest.approx(np.var([1, 2, 3, 5], ddof=1))
    assert x.mean(0, keepdim=True).shape == (1, 2)
    assert x.squeeze().shape == (2, 2) and x.unsqueeze(0).flatten().shape == (4,)
    with pytest.raises(
        IndexError, match=r"dim 2 is out of range for a 2-d tensor \(expected -2..1\)"
    ):
        x.sum(2)


def test_max_splits_the_gradient_between_ties():
    x = tl.tensor([3.0, 1.0, 3.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.5, 0.0, 0.5]


def test_clamp_and_relu_at_their_kinks_follow_pytorch():
    x = tl.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    x.relu().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]
    y = tl.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    y.clamp(-1.0, 0.5).sum().backward()
    assert y.grad.tolist() == [1.0, 1.0, 0.0]


def test_numerically_stable_sigmoid_and_log_of_zero():
    x = tl.tensor([-1000.0, 0.0, 1000.0])
    assert x.sigmoid().tolist() == [0.0, 0.5, 1.0]
    assert tl.tensor([0.0]).log().tolist() == [-np.inf]
