"""The autograd engine: the docs page's examples with their true values, custom Functions,
every safety net with its message, and memory release."""

from __future__ import annotations

import gc
import re
import tracemalloc
import weakref

import numpy as np
import pytest

import torchlight as tl
from torchlight.autograd import (
    Context,
    Function,
    GradcheckError,
    History,
    backpropagate,
    central_difference,
    gradcheck,
    topological_sort,
)
from torchlight.ops.arithmetic import Add, Mul


def values(t):
    return np.asarray(t.detach().numpy()).tolist()


# ---------------------------------------------------------------- the docs page (with errata)
def test_how_gradients_work():
    x = tl.tensor([2.0, 3.0], requires_grad=True)
    y = (x**2).sum()
    y.backward()
    assert values(x.grad) == [4.0, 6.0]
    assert repr(x.grad) == "tensor([4., 6.])"
    assert repr(x) == "tensor([2., 3.], requires_grad=True)"


def test_the_computation_graph():
    a = tl.tensor([1.0, 2.0], requires_grad=True)
    b = a + a
    assert b.history.last_fn is Add
    assert b.history.parents == (a, a)
    assert b.history.parents[0] is a and b.history.parents[1] is a
    assert repr(b.history) == (
        "History(last_fn=Add, parents=(tensor([1., 2.], requires_grad=True), "
        "tensor([1., 2.], requires_grad=True)))"
    )
    c = b * a
    assert c.history.last_fn is Mul and c.history.parents[0] is b and c.history.parents[1] is a
    c.backward()
    # erratum 2: d(b*a)/da = b + a * db/da = 2a + 2a = 4a
    assert values(a.grad) == [4.0, 8.0]


def test_leaf_vs_intermediate():
    a = tl.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    b.backward()
    assert values(a.grad) == [2.0, 2.0]  # erratum 1: the page prints [2.0, 4.0]
    with pytest.raises(AttributeError, match="non-leaf.*only leaf tensors.*retain_grad"):
        _ = b.grad
    c = a.detach()
    assert c.storage is a.storage or np.shares_memory(c.numpy(), a.detach().numpy())
    assert not c.requires_grad and c.history is None


def test_detach_zero_grad_clone():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    grad = x.grad
    x.zero_grad_()
    assert x.grad is grad and values(grad) == [0.0, 0.0]  # in place
    detached = x.detach()
    with tl.no_grad():
        x.add_(1.0)
    assert values(detached) == [2.0, 3.0]  # same storage
    cloned = x.clone()
    assert cloned.history is not None and not np.shares_memory(
        cloned.detach().numpy(), x.detach().numpy()
    )
    (cloned * 3).sum().backward()
    assert values(x.grad) == [3.0, 3.0]


def test_central_difference_matches_docs_example():
    def f(x):
        return (x**2).sum()

    estimates = [
        central_difference(lambda *xs: f(tl.tensor(xs)), 3.0, 4.0, arg=i) for i in range(2)
    ]
    assert estimates == pytest.approx([6.0, 8.0], abs=1e-6)
    with pytest.raises(IndexError, match="arg=2"):
        central_difference(lambda x: x, 1.0, arg=2)


def test_backward_seeds_ones_or_takes_a_gradient():
    a = tl.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (a * a).backward()
    assert values(a.grad) == [[2.0, 4.0], [6.0, 8.0]]
    b = tl.tensor([1.0, 2.0], requires_grad=True)
    (b * 3).backward(tl.tensor([1.0, 10.0]))
    assert values(b.grad) == [3.0, 30.0]
    with pytest.raises(
        ValueError, match=r"gradient has shape \(3,\) but the tensor has shape \(2,\)"
    ):
        (b * 3).backward(tl.ones(3))


def test_leaves_accumulate_until_zeroed():
    x = tl.tensor([1.0], requires_grad=True)
    for _ in range(3):
        (x * 2).backward()
    assert values(x.grad) == [6.0]


def test_topological_sort_and_backpropagate_by_hand():
    x = tl.tensor(2.0, requires_grad=True)
    y = x * x
    z = y + x
    order = topological_sort(z)
    assert order[-1] is z and order.index(x) < order.index(y) < order.index(z)
    backpropagate(z, tl.tensor(1.0))
    assert x.grad.item() == 5.0  # 2x + 1


def _random_graph(seed):
    """A random DAG of adds and products over three leaves that need grad and one that does not."""
    rng = np.random.default_rng(seed)
    nodes = [tl.tensor([float(v)], requires_grad=True) for v in rng.random(3)] + [tl.ones(1)]
    for _ in range(int(rng.integers(1, 30))):
        a, b = (nodes[int(i)] for i in rng.integers(0, len(nodes), 2))
        nodes.append(a * b if rng.random() < 0.5 else a + b)
    return nodes[-1]


def _reachable(root):
    found, stack = {}, [root]
    while stack:
        node = stack.pop()
        if node.requires_grad and id(node) not in found:
            found[id(node)] = node
            stack.extend(node.history.parents if node.history else ())
    return found


@pytest.mark.parametrize("seed", range(40))
def test_topological_sort_orders_every_input_before_its_users(seed):
    root = _random_graph(seed)
    order = topological_sort(root)
    position = {id(node): i for i, node in enumerate(order)}
    assert len(position) == len(order), "a node appears twice"
    assert position.keys() == _reachable(root).keys()
    for node in order:
        for parent in node.history.parents if node.history else ():
            if parent.requires_grad:
                assert position[id(parent)] < position[id(node)]


def test_topological_sort_of_a_deep_graph_needs_no_recursion():
    x = tl.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(5 * 1000):  # deeper than Python's default recursion limit (1000)
        y = y * 1.0
    order = topological_sort(y)
    assert order[0] is x and order[-1] is y and len(order) == 5001
    y.backward()
    assert x.grad.item() == 1.0


# ---------------------------------------------------------------- .grad is a leaf's own copy
class Handover(Function):
    """Identity whose backward returns a fresh gradient, remembered (weakly or not) by the test."""

    keep: str | bool = False
    kept: list = []

    @staticmethod
    def forward(ctx, x):
        return x._map("copy")

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output * 1.0
        if Handover.keep == "base":  # a view into a larger array the Function keeps
            base = np.concatenate([grad.storage, grad.storage])
            grad = grad._new(base[: grad.shape[0]])
            Handover.kept.append(base)
        elif Handover.keep:  # the tensor, or only its storage
            Handover.kept.append(grad if Handover.keep == "tensor" else grad.storage)
        return grad


@pytest.mark.parametrize("keep", ["tensor", "storage", "base"])
def test_a_gradient_someone_else_holds_is_copied(keep):
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    Handover.keep, Handover.kept = keep, []
    Handover.apply(x).sum().backward()
    kept = Handover.kept[0]
    storage = kept.storage if keep == "tensor" else kept
    assert x.grad is not kept and not np.shares_memory(x.grad.storage, storage)
    storage[:] = 7.0  # changing what the Function kept leaves .grad alone
    assert values(x.grad) == [1.0, 1.0]


class Transposed(Function):
    """Identity whose backward returns a fresh gradient laid out column-major."""

    @staticmethod
    def forward(ctx, x):
        return x._map("copy")

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output._new(np.asfortranarray(grad_output.storage * 1.0))


def test_a_leaf_gradient_is_laid_out_row_major():
    x = tl.ones(3, 2, requires_grad=True)
    Transposed.apply(x).sum().backward()
    assert x.grad.is_contiguous() and values(x.grad) == [[1.0, 1.0]] * 3


def test_leaves_given_the_same_gradient_get_their_own_copies():
    a = tl.tensor([1.0, 2.0], requires_grad=True)
    b = tl.tensor([3.0, 4.0], requires_grad=True)
    (a + b).backward(tl.tensor([1.0, 1.0]))  # Add passes grad_output to both inputs
    assert not np.shares_memory(a.grad.storage, b.grad.storage)
    a.grad.mul_(5.0)  # gradient clipping on one leaf, say
    assert values(b.grad) == [1.0, 1.0]


def test_a_gradient_given_to_backward_is_not_taken_over():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    seed = tl.tensor([1.0, 1.0])
    (x * 1.0).backward(seed)
    assert not np.shares_memory(x.grad.storage, seed.storage)
    x.grad.zero_()
    assert values(seed) == [1.0, 1.0]


def test_a_retained_gradient_and_a_leaf_gradient_do_not_share_memory():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = (x + tl.zeros(2)).retain_grad()  # Add's backward passes y's gradient on to x as it is
    y.sum().backward()
    assert not np.shares_memory(x.grad.storage, y.grad.storage)


def test_a_broadcast_view_gradient_is_copied_into_writable_memory():
    x = tl.tensor(2.0, requires_grad=True)
    x.expand(3).sum().backward()
    assert x.grad.item() == 3.0
    x.grad.add_(1.0)  # writable: not the read-only broadcast view backward passed around
    assert x.grad.item() == 4.0


def test_no_grad_records_nothing():
    x = tl.ones(2, requires_grad=True)
    with tl.no_grad():
        y = x * 2
    assert y.history is None and not y.requires_grad
    assert tl.is_grad_enabled()

    @tl.no_grad()
    def double(t):
        return t * 2

    assert double(x).history is None


def test_broadcast_gradients_are_reduced_to_each_input_shape():
    a = tl.ones(3, 1, requires_grad=True)
    b = tl.ones(4, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and values(a.grad) == [[4.0]] * 3
    assert b.grad.shape == (4,) and values(b.grad) == [3.0] * 4


def test_retain_grad_keeps_a_non_leaf_gradient():
    a = tl.tensor([1.0, 2.0], requires_grad=True)
    b = (a * 3).retain_grad()
    (b * b).sum().backward()
    assert values(b.grad) == [6.0, 12.0]


# ---------------------------------------------------------------- user Functions
class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x * x


class ScaledAdd(Function):
    """A two-input user Function with a non-tensor argument (broadcasting left to the engine)."""

    @staticmethod
    def forward(ctx, a, b, alpha):
        ctx.alpha = alpha
        return a + b * alpha

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, grad_output * ctx.alpha


def test_custom_function_gradients_and_gradcheck():
    x = tl.tensor([1.0, -2.0, 0.5], requires_grad=True)
    Cube.apply(x).sum().backward()
    assert values(x.grad) == [3.0, 12.0, 0.75]
    assert Cube.apply(x).history.last_fn is Cube
    assert gradcheck(Cube.apply, tl.randn(2, 3, requires_grad=True))
    a, b = tl.randn(2, 3, requires_grad=True), tl.randn(3, requires_grad=True)
    assert gradcheck(lambda a, b: ScaledAdd.apply(a, b, 0.5), a, b)
    ScaledAdd.apply(a, b, 2.0).sum().backward()
    assert values(b.grad) == [4.0, 4.0, 4.0]  # summed over the broadcast dim by the engine


class WrongCube(Cube):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 2 * x * x  # planted mistake: 2 instead of 3


def test_gradcheck_catches_a_planted_wrong_backward_with_a_readable_report():
    x = tl.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    with pytest.raises(GradcheckError) as info:
        gradcheck(WrongCube.apply, x)
    report = str(info.value)
    assert "gradcheck of WrongCube" in report
    assert (
        "output (0, 1) w.r.t. input 0 (0, 1): backward gave 8, central difference gave 12" in report
    )
    assert not gradcheck(WrongCube.apply, x, raise_exception=False)


def test_gradcheck_insists_on_float64():
    with pytest.raises(TypeError, match="float64"):
        gradcheck(Cube.apply, tl.ones(2, dtype=tl.float32, requires_grad=True))


# ---------------------------------------------------------------- safety nets
def test_backward_twice_through_a_freed_graph():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(
        RuntimeError, match="backward through the graph a second time.*retain_graph=True"
    ):
        y.backward()
    z = (x * x).sum()
    z.backward(retain_graph=True)
    z.backward()
    assert values(x.grad) == [2.0 + 2.0 + 2.0, 4.0 + 4.0 + 4.0]


def test_in_place_change_to_a_saved_tensor():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1  # a non-leaf
    w = tl.tensor([3.0, 4.0])
    y = (h * w).sum()  # Mul saves w
    w.add_(1.0)
    with pytest.raises(
        RuntimeError, match=r"saved for Mul.backward.*version 0 when saved and is now at version 1"
    ):
        y.backward()


def test_in_place_on_a_leaf_that_requires_grad():
    x = tl.ones(2, requires_grad=True)
    with pytest.raises(
        RuntimeError, match=r"add_: in-place operation on a leaf tensor that requires grad.*no_grad"
    ):
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="__setitem__: in-place"):
        x[0] = 5.0
    # the operator as written, and the method it runs: `w -= lr * g` outside no_grad
    for update, names, instead in [
        (lambda w: w.__isub__(0.1), r"-= \(sub_\)", "x = x - y"),
        (lambda w: w.__iadd__(0.1), r"\+= \(add_\)", "x = x + y"),
        (lambda w: w.__imul__(0.1), r"\*= \(mul_\)", "x = x * y"),
        (lambda w: w.__itruediv__(2), r"/= \(div_\)", "x = x / y"),
        (lambda w: w.sub_(0.1), r"^sub_", "x = x - y"),
    ]:
        with pytest.raises(RuntimeError, match=rf"{names}: in-place .*\({re.escape(instead)}\)\.$"):
            update(x)
    with pytest.raises(RuntimeError, match=r"zero_: in-place .*\(as optimizers do\)\.$"):
        x.zero_()  # no out-of-place op to suggest
    with tl.no_grad():
        x[0] = 5.0
    assert values(x) == [5.0, 1.0]


class TooManyGrads(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2, grad_output


class WrongShapeGrad(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, tl.ones(5)


def test_user_backward_with_the_wrong_number_of_gradients():
    x = tl.ones(2, requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=r"TooManyGrads.backward returned 2 gradient\(s\), but TooManyGrads.forward took 1 tensor input",
    ):
        TooManyGrads.apply(x).sum().backward()


def test_user_backward_with_a_gradient_of_the_wrong_shape():
    a, b = tl.ones(2, 3, requires_grad=True), tl.ones(3, requires_grad=True)
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "WrongShapeGrad.backward returned a gradient of shape (5,) for input 1, which has shape (3,)"
        ),
    ):
        WrongShapeGrad.apply(a, b).sum().backward()


def test_broadcast_and_matmul_shape_mismatches_name_both_shapes():
    with pytest.raises(
        ValueError, match=re.escape("shapes (2, 3) and (4,) cannot be broadcast together")
    ):
        tl.ones(2, 3) + tl.ones(4)
    with pytest.raises(
        ValueError, match=re.escape("matmul: shapes (2, 3) and (4, 5) are not aligned")
    ):
        tl.ones(2, 3) @ tl.ones(4, 5)
    with pytest.raises(
        ValueError, match=re.escape("batch dimensions of shapes (2, 1, 3) and (3, 3, 4)")
    ):
        tl.ones(2, 1, 3) @ tl.ones(3, 3, 4)


def test_requires_grad_on_integer_tensors_is_an_error():
    with pytest.raises(
        TypeError, match="only floating point tensors can require gradients, got torchlight.int64"
    ):
        tl.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="only floating point"):
        tl.arange(3).requires_grad_()


def test_backward_on_a_tensor_without_grad():
    with pytest.raises(RuntimeError, match="does not require grad"):
        tl.ones(2).sum().backward()


# ---------------------------------------------------------------- memory
def test_graph_is_freed_when_nothing_references_it():
    x = tl.ones(3, requires_grad=True)
    y = (x * 2).exp()
    node = weakref.ref(y.history.parents[0])  # the intermediate x * 2
    ctx = weakref.ref(y.history.ctx)
    del y
    gc.disable()
    try:
        assert node() is None and ctx() is None  # freed by reference counting alone (no cycles)
    finally:
        gc.enable()


def test_saved_tensors_are_released_after_backward():
    class SavesATemporary(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x.exp())  # a tensor only the context holds
            return x * 2

        @staticmethod
        def backward(ctx, grad_output):
            (e,) = ctx.saved_tensors
            return grad_output * 2 + e * 0

    x = tl.ones(3, requires_grad=True)
    y = SavesATemporary.apply(x)
    ctx = y.history.ctx
    saved = weakref.ref(ctx.saved_tensors[0])
    assert saved() is not None
    y.sum().backward()
    assert saved() is None and ctx._saved == ()
    with pytest.raises(RuntimeError, match="second time"):
        ctx.saved_tensors


def test_a_saved_output_is_the_output_node_itself():
    """As in PyTorch: Exp saves its result, and what backward reads is the output tensor in the
    graph (so a create_graph backward differentiates through it), held without a cycle."""
    x = tl.ones(3, requires_grad=True)
    y = x.exp()
    assert y.history.ctx.saved_tensors[0] is y
    node = weakref.ref(y)
    del y
    gc.disable()
    try:
        assert node() is None  # freed by reference counting alone
    finally:
        gc.enable()


def test_thousands_of_steps_do_not_grow_memory():
    w = tl.randn(8, 8, requires_grad=True)
    x = tl.randn(4, 8)

    def step():
        loss = ((x @ w).tanh() ** 2).mean()
        loss.backward()
        with tl.no_grad():
            w.sub_(w.grad * 0.01)
        w.zero_grad_()

    for _ in range(200):
        step()
    gc.collect()  # a full collection also empties Python's free lists, so both points compare
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(3_000):  # (a list slot kept per step, 8 bytes, passes the bound; tracemalloc
        step()  # slows every allocation, and 10,000 steps took 17 s alone, 47 s in make test)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert after - before < 20_000, f"memory grew by {after - before} bytes over 3,000 steps"
    # and a step makes no reference cycles: everything is freed by reference counting alone
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        step()
        gc.collect()
        assert gc.garbage == [], f"a training step left cycles: {gc.garbage[:5]}"
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_context_and_history_are_public():
    ctx = Context()
    t = tl.ones(2)
    ctx.save_for_backward(t)
    assert ctx.saved_tensors == (t,)
    h = History(Add, ctx, (t, t))
    assert h.last_fn is Add and h.ctx is ctx and h.parents == (t, t)


# ---------------------------------------------------------------- which tensor apply returns
class Identity(Function):
    @staticmethod
    def forward(ctx, x):
        return x  # its own input: the result must not turn the input into a graph node

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class KeepsOutput(Function):
    made: list = []

    @staticmethod
    def forward(ctx, x):
        out = x._map("copy")
        ctx.out = out  # kept on the context, not through save_for_backward
        KeepsOutput.made.append(weakref.ref(out))
        return out

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


def test_apply_makes_forwards_new_tensor_the_node_and_never_turns_an_input_into_one():
    # PyTorch's rule: the tensor forward made is the one returned, now a graph node; an input
    # returned as it came is not changed (the node is a new tensor on its storage).
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    KeepsOutput.made, Handover.keep = [], False
    y = Identity.apply(x)
    assert y is not x and x.history is None and x.is_leaf and y.grad_fn is Identity
    z = KeepsOutput.apply(x)
    assert z is KeepsOutput.made[0]() and z.grad_fn is KeepsOutput
    w = Handover.apply(x)
    assert w.grad_fn is Handover and w.requires_grad
    (y + z + w).sum().backward()
    assert values(x.grad) == [3.0, 3.0]


def test_a_result_saved_for_backward_is_still_checked_for_in_place_changes():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # Exp saves its output
    with tl.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_the_freed_graph_error_names_a_function_that_saved_tensors():
    x = tl.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()  # Sum saves no tensor, Mul saves both inputs
    y.backward()
    with pytest.raises(RuntimeError, match="saved for backward by Mul were freed"):
        y.backward()
    z = (x + 1).sum()  # nothing saved: a second backward works, as in PyTorch
    z.backward()
    z.backward()
    assert values(x.grad) == [2.0 + 2.0, 4.0 + 2.0]
