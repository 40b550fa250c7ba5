"""PyTorch's everyday habits that used to be silently wrong (issue 13, items 1-9).

Each test shows the line a PyTorch user types and the value PyTorch gives for it.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import torchlight as tl
from torchlight.autograd import Function


def values(t):
    return np.asarray(t.detach().numpy()).tolist()


# ---------------------------------------------------------------- 1. in-place operators
def test_in_place_operators_keep_the_tensor():
    x = tl.tensor([1.0, 2.0])
    same = x
    x += 1
    x -= tl.tensor([0.5, 0.5])
    x *= 2
    x /= 4
    assert x is same
    assert values(x) == [0.75, 1.25]


def test_manual_sgd_under_no_grad_trains():
    tl.manual_seed(0)
    model = tl.nn.Linear(3, 1)
    x, y = tl.randn(16, 3), tl.randn(16, 1)
    first = None
    for _ in range(30):
        loss = model(x).mse_loss(y)
        first = loss.item() if first is None else first
        model.zero_grad()
        loss.backward()
        with tl.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
    assert all(p.requires_grad and p.is_leaf for p in model.parameters())
    assert model(x).mse_loss(y).item() < 0.8 * first


def test_a_minus_equals_on_a_leaf_keeps_it_a_leaf_that_requires_grad():
    a = tl.tensor([1.0, 2.0], requires_grad=True)
    (a * a).sum().backward()
    with tl.no_grad():
        a -= 0.5 * a.grad
    assert a.requires_grad and a.is_leaf
    (a * a).sum().backward()  # the next backward works
    assert values(a) == [0.0, 0.0]


def test_in_place_operator_on_a_leaf_that_requires_grad_outside_no_grad_raises():
    a = tl.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"leaf tensor that requires grad.*no_grad"):
        a += 1


# ---------------------------------------------------------------- 2. max/min along a dim
def test_max_along_a_dim_returns_values_and_indices():
    x = tl.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 7.0]], requires_grad=True)
    values_, indices = x.max(dim=1)
    assert values(values_) == [5.0, 7.0]
    assert values(indices) == [1, 0]
    result = x.min(1, keepdim=True)
    assert values(result.values) == [[1.0], [2.0]] and values(result.indices) == [[0], [1]]
    x.max(dim=1).values.sum().backward()
    # as in PyTorch, the gradient goes to the returned index only (not split at the tie)
    assert values(x.grad) == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    assert values(x.max()) == 7.0  # no dim: just the value


def test_max_of_two_tensors_is_elementwise():
    a, b = tl.tensor([1.0, 5.0]), tl.tensor([3.0, 2.0])
    assert values(a.max(b)) == [3.0, 5.0]
    assert values(a.min(b)) == [1.0, 2.0]


# ---------------------------------------------------------------- 3. custom Function arguments
class Scale(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.k, None  # PyTorch's convention: one per forward argument


class ScaleWrong(Scale):
    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.k, None, None


def test_custom_function_backward_returns_one_value_per_forward_argument():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    Scale.apply(x, 3.0).sum().backward()
    assert values(x.grad) == [3.0, 3.0]
    with pytest.raises(RuntimeError, match=r"ScaleWrong.backward returned 3 gradient\(s\)"):
        ScaleWrong.apply(x, 3.0).sum().backward()


class GradForANumber(Scale):
    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.k, grad_output


def test_a_gradient_for_a_non_tensor_argument_is_an_error():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"argument 1, which is not a tensor.*None"):
        GradForANumber.apply(x, 3.0).sum().backward()


# ---------------------------------------------------------------- 4. requires_grad_ on a non-leaf
def test_requires_grad_true_on_a_non_leaf_is_a_no_op():
    y = tl.ones(2, requires_grad=True) * 2
    assert y.requires_grad_(True) is y and y.requires_grad_() is y
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


# ---------------------------------------------------------------- 5. in place in the graph
def test_in_place_add_on_a_non_leaf_is_recorded():
    x = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.add_(1)
    assert values(y) == [3.0, 5.0, 7.0]
    y.sum().backward()
    assert values(x.grad) == [2.0, 2.0, 2.0]


def test_setitem_on_a_non_leaf_is_recorded():
    x = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = tl.tensor(5.0, requires_grad=True)
    y = x * 2
    y[0] = 0
    y[1] = w
    (y * y).sum().backward()  # y = [0, w, 2 x2]
    assert values(x.grad) == [0.0, 0.0, 24.0]
    assert values(w.grad) == 10.0


def test_chained_in_place_ops_and_an_earlier_use():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    z = y + 1  # uses y before the in-place ops (Add saves nothing)
    y.mul_(2)
    y.sub_(x)  # y = 6x - x = 5x
    (z.sum() + (y * y).sum()).backward()
    # dz/dx = 3 (through the old y, as in PyTorch), d(25 x^2)/dx = 50 x
    assert values(x.grad) == [53.0, 103.0]


def test_in_place_on_a_tensor_without_grad_with_an_input_that_needs_it():
    w = tl.tensor([1.0, 2.0], requires_grad=True)
    acc = tl.zeros(2)
    acc += w * w
    assert acc.requires_grad and not acc.is_leaf
    acc.sum().backward()
    assert values(w.grad) == [2.0, 4.0]


def test_in_place_change_of_a_value_saved_for_backward_is_still_caught():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y * y  # Mul saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.sum().backward()


def test_in_place_relu_like_mask_on_a_non_leaf():
    x = tl.tensor([-1.0, 2.0, -3.0], requires_grad=True)
    h = x * 1
    h[h < 0] = 0
    h.sum().backward()
    assert values(x.grad) == [0.0, 1.0, 0.0]


# ---------------------------------------------------------------- 6. reductions of 0-d tensors
@pytest.mark.parametrize("dim", [0, -1])
def test_reductions_along_dim_of_a_0d_tensor(dim):
    x = tl.tensor(3.0, requires_grad=True)
    assert values(x.sum(dim)) == 3.0
    assert values(x.mean(dim=dim)) == 3.0
    assert values(x.max(dim).values) == 3.0 and values(x.max(dim).indices) == 0
    assert values(x.argmax(dim)) == 0
    x.sum(dim).backward()
    assert values(x.grad) == 1.0
    with pytest.raises(IndexError, match="out of range"):
        x.sum(1)


# ---------------------------------------------------------------- 7. dtype promotion
def test_a_0d_tensor_does_not_promote_a_dimensioned_one_of_the_same_kind():
    a = tl.ones(2, dtype=tl.float32)
    assert (a * tl.tensor(2.0, dtype=tl.float64)).dtype is tl.float32
    assert (tl.tensor(2.0, dtype=tl.float64) + a).dtype is tl.float32
    assert (a * tl.ones(2, dtype=tl.float64)).dtype is tl.float64  # both dimensioned
    i = tl.tensor([1, 2], dtype=tl.int32)
    assert (i * tl.tensor(2, dtype=tl.int64)).dtype is tl.int32
    assert (i * tl.tensor(2.5, dtype=tl.float64)).dtype is tl.float64  # a higher kind wins


# ---------------------------------------------------------------- 8. pow at a zero base
def test_pow_gradients_at_a_zero_base_are_zero():
    e = tl.tensor([0.0, 1.0, 2.0], requires_grad=True)
    (tl.tensor(0.0) ** e).sum().backward()
    assert values(e.grad) == [0.0, 0.0, 0.0]
    x = tl.tensor([0.0, 1.0], requires_grad=True)
    (x**0).sum().backward()
    assert values(x.grad) == [0.0, 0.0]
    x2 = tl.tensor([0.0, 3.0], requires_grad=True)
    (x2**2).sum().backward()
    assert values(x2.grad) == [0.0, 6.0]


# ---------------------------------------------------------------- 9. grad mode per thread
def test_grad_mode_is_thread_local():
    # PyTorch's autograd-mechanics example: every thread trains on its own
    x = tl.ones(5, 5, requires_grad=True)
    barrier = threading.Barrier(4)
    results = []

    def train(no_grad):
        if no_grad:
            with tl.no_grad():
                barrier.wait()
                barrier.wait()
        else:
            barrier.wait()
            y = (x + 3) * (x + 4) * 0.5
            barrier.wait()
            results.append(y.requires_grad)

    threads = [threading.Thread(target=train, args=(i % 2 == 0,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True, True]
    assert tl.autograd.is_grad_enabled()


def test_in_place_on_a_view_in_the_graph_or_after_a_view_is_a_clear_error():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match=r"add_: in-place operation on a view \(GetItem\)"):
        y[0:1].add_(1)
    v = y.view(2)
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"a view \(View\) was taken of a tensor that was then"):
        v.sum().backward()


# ---------------------------------------------------------------- Tensor.data as in PyTorch (issue 12)
def test_data_is_a_detached_tensor_sharing_storage():
    p = tl.nn.Parameter(tl.tensor([1.0, 2.0]))
    p.grad = tl.tensor([10.0, 10.0])
    d = p.data
    assert isinstance(d, tl.Tensor) and not d.requires_grad and d.storage is p.storage
    p.data -= 0.1 * p.grad  # micrograd's and old PyTorch tutorials' update line
    assert values(p) == [0.0, 1.0] and p.requires_grad
    p.data.sub_(tl.tensor([1.0, 1.0]))
    assert values(p) == [-1.0, 0.0]
    (p * p).sum().backward()  # the next backward works
    p.data = tl.tensor([5.0, 6.0, 7.0])  # assigning a tensor swaps the storage, as in PyTorch
    assert p.shape == (3,) and values(p) == [5.0, 6.0, 7.0]
    with pytest.raises(TypeError, match="needs a Tensor, got list"):
        p.data = [1.0]


def test_the_gradient_skipping_backend_primitives_are_not_public():
    # x.zip("mul", x) used to return a tensor with requires_grad=False and no error: the
    # primitives that skip autograd are private now (x._zip, for a Function's forward).
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    for name in ("map", "zip", "reduce"):
        assert not hasattr(x, name), f"Tensor.{name} skips autograd and must not be public"
    with pytest.raises(AttributeError, match="zip"):
        x.zip("mul", x)  # type: ignore[attr-defined]
    assert values(x * x) == [1.0, 4.0] and (x * x).requires_grad  # the public way records


def test_a_write_to_an_expanded_view_raises_its_own_error_class():
    e = tl.tensor([1.0, 2.0]).expand(3, 2)
    for write in (lambda: e.add_(1.0), lambda: e.fill_(0.0), lambda: e.__setitem__(0, 5.0)):
        with pytest.raises(tl.ExpandedViewWriteError, match=r"expanded view.*\.clone\(\)"):
            write()
    with tl.no_grad(), pytest.raises(tl.ExpandedViewWriteError, match="mul_: this tensor"):
        e.mul_(2.0)


# ---------------------------------------------------------------- autograd features (issue 13)
def test_register_hook_sees_and_may_replace_a_gradient():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    seen = []
    y.register_hook(lambda g: seen.append(values(g)))
    handle = y.register_hook(lambda g: g * 2)  # doubles what flows back through y
    (y * y).sum().backward(retain_graph=True)
    assert seen == [[6.0, 12.0]]
    assert values(x.grad) == [36.0, 72.0]  # 2 * (2 y) * 3
    handle.remove()
    x.grad = None
    (y * y).sum().backward()
    assert values(x.grad) == [18.0, 36.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        tl.ones(2).register_hook(print)
