"""PyTorch's other ops beyond the op table: what they return (named tuples, dtypes), their edge
values, their errors, the in-place variants, the function forms, save/load and devices.

Forward values and gradients of every differentiable one are in ``tests/op_table.py``.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import torchlight as tl
from torchlight import functional_forms
from torchlight.tensor import Tensor
from torchlight.tensor_methods import TensorOps

# --------------------------------------------------------------------------- sorting family


def test_sort_and_topk_return_named_values_and_int64_indices():
    x = tl.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    values, indices = x.sort(dim=1)
    assert values.tolist() == [[1.0, 2.0, 3.0], [0.0, 4.0, 5.0]]
    assert indices.tolist() == [[1, 2, 0], [0, 2, 1]] and indices.dtype is tl.int64
    top = x.topk(2, dim=1)
    assert top.values.tolist() == [[3.0, 2.0], [5.0, 4.0]] and top.indices.tolist() == [
        [0, 2],
        [1, 2],
    ]
    low = tl.topk(x, 1, dim=0, largest=False)
    assert low.values.tolist() == [[0.0, 1.0, 2.0]] and low.indices.tolist() == [[1, 0, 0]]
    assert x.argsort(dim=1, descending=True).tolist() == [[0, 2, 1], [1, 2, 0]]


def test_sort_is_stable_and_puts_nan_where_pytorch_does():
    x = tl.tensor([2.0, 1.0, 2.0, math.nan, 1.0])
    assert x.sort().indices.tolist() == [1, 4, 0, 2, 3]  # nan last, ties in order
    assert x.sort(descending=True).indices.tolist() == [3, 0, 2, 1, 4]  # nan first, ties in order
    assert x.topk(1).indices.tolist() == [3]


def test_median_is_the_lower_median_with_its_index_and_gradient():
    x = tl.tensor([[4.0, 1.0, 3.0, 2.0], [1.0, math.nan, 0.0, 5.0]], requires_grad=True)
    values, indices = x.median(dim=1)
    assert values[0].item() == 2.0 and math.isnan(values[1].item())
    assert indices.tolist() == [3, 1]
    values[0].backward()
    assert x.grad.tolist() == [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]]
    assert tl.tensor([3.0, 1.0, 2.0, 4.0]).median().item() == 2.0
    with pytest.raises(IndexError, match="empty"):
        tl.zeros(2, 0).median(1)


def test_topk_rejects_k_beyond_the_dimension():
    with pytest.raises(ValueError, match=r"k must be in \[0, 3\]"):
        tl.ones(3).topk(4)


# --------------------------------------------------------------------------- indexing


def test_scatter_writes_the_last_of_repeated_indices_and_takes_a_number():
    x = tl.zeros(3, requires_grad=True)
    src = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = x.scatter(0, tl.tensor([2, 0, 2]), src)
    assert out.tolist() == [2.0, 0.0, 3.0]
    out.backward(tl.tensor([10.0, 20.0, 30.0]))
    assert x.grad.tolist() == [0.0, 20.0, 0.0]  # overwritten positions pass no gradient to x
    assert src.grad.tolist() == [0.0, 10.0, 30.0]  # the overwritten element gets none
    assert tl.zeros(2, 2).scatter(1, tl.tensor([[1], [0]]), 7.0).tolist() == [[0, 7], [7, 0]]


def test_scatter_add_adds_repeated_indices():
    out = tl.zeros(3).scatter_add(0, tl.tensor([0, 0, 2]), tl.tensor([1.0, 2.0, 3.0]))
    assert out.tolist() == [3.0, 0.0, 3.0]


def test_index_errors_name_what_was_expected():
    x = tl.ones(2, 3)
    with pytest.raises(TypeError, match="integer tensor"):
        x.gather(1, tl.tensor([[0.0]]))
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        x.gather(1, tl.tensor([[3]]))
    with pytest.raises(ValueError, match="same number"):
        x.gather(1, tl.tensor([0]))
    with pytest.raises(TypeError, match="bool tensor"):
        x.masked_fill(tl.ones(2, 3), 0.0)
    with pytest.raises(ValueError, match="must broadcast"):
        x.masked_fill(tl.ones(4, 2, 3) > 0, 0.0)
    with pytest.raises(ValueError, match="1-D"):
        x.index_select(0, tl.tensor([[0]]))


def test_masked_fill_keeps_the_dtype_and_passes_gradient_to_a_tensor_value():
    x = tl.ones(3, dtype=tl.float32)
    assert x.masked_fill(x > 0, 2.5).dtype is tl.float32
    value = tl.tensor(2.0, requires_grad=True)
    tl.masked_fill(tl.zeros(3), tl.tensor([True, False, True]), value).sum().backward()
    assert value.grad.item() == 2.0


# --------------------------------------------------------------------------- edge values


@pytest.mark.parametrize("backend", ["numpy", "strided"])
def test_rounding_halves_to_even_and_keeps_inf_and_nan(backend):
    x = tl.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, math.inf, -math.inf, 1e300], backend=backend)
    assert x.round().tolist() == [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, math.inf, -math.inf, 1e300]
    assert x.floor().tolist() == [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, math.inf, -math.inf, 1e300]
    assert math.isnan(tl.tensor([math.nan], backend=backend).round().item())
    assert tl.tensor([1.2345], backend=backend).round(decimals=2).item() == pytest.approx(1.23)


def test_sin_cos_of_inf_is_nan_on_the_reference_backend():
    x = tl.tensor([math.inf], backend="strided")
    assert math.isnan(x.sin().item()) and math.isnan(x.cos().item())


def test_log1p_and_expm1_stay_accurate_for_tiny_values():
    x = tl.tensor([1e-12])
    assert x.log1p().item() == pytest.approx(1e-12, rel=1e-12, abs=0)
    assert x.expm1().item() == pytest.approx(1e-12, rel=1e-12, abs=0)
    assert (1 + x).log().item() != pytest.approx(1e-12, rel=1e-6, abs=0)  # why log1p exists


def test_logsumexp_neither_overflows_nor_turns_minus_inf_into_nan():
    assert tl.tensor([1000.0, 1000.0]).logsumexp(0).item() == pytest.approx(1000 + math.log(2))
    assert tl.tensor([[-math.inf, -math.inf]]).logsumexp(1).tolist() == [-math.inf]


def test_norm_gradient_at_zero_is_zero_and_prod_gradient_at_zero_is_exact():
    x = tl.zeros(3, requires_grad=True)
    x.norm().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    y = tl.tensor([0.0, 2.0, 3.0], requires_grad=True)
    y.prod().backward()
    assert y.grad.tolist() == [6.0, 0.0, 0.0]
    assert tl.ones(2, 0).prod(1).tolist() == [1.0, 1.0]


def test_cumsum_of_bools_and_ints_is_int64_and_tril_of_inf_is_zero():
    assert tl.tensor([True, True, False]).cumsum(0).tolist() == [1, 2, 2]
    assert tl.tensor([1, 2], dtype=tl.int32).cumsum(0).dtype is tl.int64
    assert tl.full((2, 2), math.inf).tril().tolist() == [[math.inf, 0.0], [math.inf, math.inf]]


def test_layout_errors():
    with pytest.raises(ValueError, match="at most 2 dimensions"):
        tl.ones(2, 2, 2).t()
    with pytest.raises(ValueError, match="at least 2"):
        _ = tl.ones(2).mT
    with pytest.raises(ValueError, match="add up to 3"):
        tl.ones(3).split([1, 1])
    with pytest.raises(IndexError, match="do not fit"):
        tl.ones(3).narrow(0, 2, 2)
    with pytest.raises(ValueError, match="at least one per"):
        tl.ones(2, 2).repeat(2)
    assert [p.shape for p in tl.ones(5).chunk(3)] == [(2,), (2,), (1,)]


# --------------------------------------------------------------------------- in place


def test_in_place_variants_write_into_the_same_storage_under_no_grad():
    w = tl.tensor([-2.0, 0.5, 3.0], requires_grad=True)
    with tl.no_grad():
        assert w.clamp_(-1.0, 1.0) is w
        assert w.tolist() == [-1.0, 0.5, 1.0]
        w.pow_(2).neg_().exp_()
        w.masked_fill_(w < 0.5, 0.0)
        w.scatter_(0, tl.tensor([2]), tl.tensor([7.0]))
        w.scatter_add_(0, tl.tensor([2]), tl.tensor([1.0]))
    expected = np.exp(-np.array([1.0, 0.25, 1.0]))
    expected[expected < 0.5] = 0.0
    expected[2] = 8.0
    np.testing.assert_allclose(w.detach().numpy(), expected)
    assert w.requires_grad and w.is_leaf


def test_in_place_variants_on_a_non_leaf_are_recorded_with_the_right_gradient():
    x = tl.tensor([0.1, 0.3, 0.8], requires_grad=True)
    y = x * 2
    y.clamp_(0.0, 1.0)  # clamp saves its input: the write must not change what it saved
    y.pow_(2)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.8, 2.4, 0.0])  # d(2x)^2/dx = 8x inside
    x.grad = None
    y = x * 1
    y.exp_().neg_()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), -np.exp([0.1, 0.3, 0.8]))


def test_in_place_variants_on_a_leaf_that_requires_grad_are_refused_outside_no_grad():
    w = tl.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="in-place"):
        w.clamp_(0.0, 0.5)
    assert w.tolist() == [1.0, 1.0]


# --------------------------------------------------------------------------- method sugar


def test_every_method_has_one_home():
    """The Tensor is tensor.py plus one methods file: a method of the same name defined in
    Tensor itself would hide the one in tensor_methods.py silently."""
    public = [n for n in vars(TensorOps) if not n.startswith("_")]
    assert len(public) > 100
    for name in public:
        assert Tensor.__dict__.get(name) is None, f"Tensor defines {name} itself"
        assert getattr(Tensor, name) is getattr(TensorOps, name), name
    assert Tensor.__mro__[1:] == (TensorOps, object)


def test_add_and_sub_take_alpha():
    a, b = tl.tensor([1.0, 2.0]), tl.tensor([10.0, 20.0])
    assert a.add(b, alpha=2).tolist() == [21.0, 42.0] and a.sub(b, alpha=0.5).tolist() == [-4, -8]
    assert a.add(1).tolist() == [2.0, 3.0]


def test_new_factories_keep_dtype_and_backend():
    x = tl.ones(2, dtype=tl.float32, backend="strided")
    for made in (x.new_zeros(3), x.new_ones((3,)), x.new_full((3,), 2.0), x.new_tensor([1, 2])):
        assert made.dtype is tl.float32 and made.backend is x.backend and made.shape in [(3,), (2,)]


# --------------------------------------------------------------------------- function forms


def test_every_function_form_is_exported():
    for name in functional_forms.__all__:
        assert getattr(tl, name) is getattr(functional_forms, name), name
        assert name in tl.__all__, name
    for name in ("device", "cuda", "float", "double", "long", "int"):
        assert name in tl.__all__ and hasattr(tl, name)


def test_function_forms_match_the_methods():
    x = tl.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]])
    assert tl.sum(tl.abs(x), dim=1).tolist() == [6.0, 15.0]
    assert tl.max(x).item() == 5.0 and tl.min(x).item() == -6.0
    assert tl.max(x, tl.zeros(2, 3)).tolist() == [[1.0, 0.0, 3.0], [0.0, 5.0, 0.0]]
    values, indices = tl.max(x, dim=1)
    assert values.tolist() == [3.0, 5.0] and indices.tolist() == [2, 1]
    assert tl.min(x, 0, keepdim=True).values.tolist() == [[-4.0, -2.0, -6.0]]
    assert tl.argmax(x, dim=1).tolist() == [2, 1]
    assert tl.mm(x, x.T).shape == (2, 2) and tl.bmm(x[None], x.T[None]).shape == (1, 2, 2)
    assert tl.dot(x[0], x[1]).item() == -4 - 10 - 18
    assert tl.outer(x[0], x[1][:2]).tolist() == [[-4.0, 5.0], [8.0, -10.0], [-12.0, 15.0]]
    assert tl.allclose(tl.softmax(x, 1).sum(1), tl.ones(2))
    assert tl.numel(x) == 6 and tl.is_tensor(x) and not tl.is_tensor(x.tolist())
    assert tl.allclose(x, x + 1e-9) and not tl.allclose(x, x + 1e-3)
    assert tl.equal(x, x.clone()) and not tl.equal(x, x[:1])


def test_function_forms_reject_non_tensors_and_wrong_ranks():
    with pytest.raises(TypeError, match="tl.exp expects a Tensor, got float"):
        tl.exp(1.0)
    with pytest.raises(ValueError, match="tl.mm expects 2-d"):
        tl.mm(tl.ones(2), tl.ones(2, 2))


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ij,jk->ik", [(2, 3), (3, 4)]),
        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
        ("ii->i", [(3, 3)]),
        ("ii", [(3, 3)]),
        ("ij->", [(2, 3)]),
        ("ij,kj", [(2, 3), (4, 3)]),
        ("i,i->", [(3,), (3,)]),
        ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 2)]),
        ("ij,jk,kl->li", [(2, 3), (3, 4), (4, 2)]),
    ],
)
def test_einsum_matches_numpy(equation, shapes):
    arrays = [np.random.default_rng(0).normal(size=s) for s in shapes]
    got = tl.einsum(equation, *[tl.tensor(a) for a in arrays]).numpy()
    np.testing.assert_allclose(got, np.einsum(equation, *arrays), rtol=1e-12)


def test_einsum_errors():
    with pytest.raises(ValueError, match="2 operand"):
        tl.einsum("ij,jk", tl.ones(2, 2))
    with pytest.raises(ValueError, match="'j' has size 3 in one place and 2"):
        tl.einsum("ij,jk", tl.ones(2, 3), tl.ones(2, 2))
    with pytest.raises(ValueError, match="ellipsis"):
        tl.einsum("...i->i", tl.ones(2, 2))


def test_from_numpy_and_as_tensor_share_memory_and_keep_the_dtype():
    array = np.arange(3, dtype=np.int32)
    shared = tl.from_numpy(array)
    array[0] = 7
    assert shared.tolist() == [7, 1, 2] and shared.dtype is tl.int32
    floats = np.zeros(2, dtype=np.float32)
    as_t = tl.as_tensor(floats)
    floats[1] = 1.0
    assert as_t.tolist() == [0.0, 1.0] and as_t.dtype is tl.float32
    assert tl.as_tensor(shared) is shared and tl.as_tensor([1.0]).dtype is tl.float64


def test_save_and_load_round_trip_a_state_dict(tmp_path):
    path = tmp_path / "state.tl"
    saved = {
        "w": tl.ones(2, dtype=tl.int32),
        3: [1.5, None, "a", (tl.zeros(1, requires_grad=True),)],
    }
    tl.save(saved, path)
    loaded = tl.load(path)
    assert loaded["w"].dtype is tl.int32 and loaded["w"].tolist() == [1, 1]
    assert loaded[3][:3] == [1.5, None, "a"] and isinstance(loaded[3][3], tuple)
    assert loaded[3][3][0].requires_grad and loaded[3][3][0].tolist() == [0.0]
    model = tl.nn.Linear(3, 2)
    tl.save(model.state_dict(), tmp_path / "model.tl")
    other = tl.nn.Linear(3, 2)
    other.load_state_dict(tl.load(tmp_path / "model.tl"))
    assert tl.equal(other.weight.detach(), model.weight.detach())


def test_save_pickles_objects_that_load_only_with_weights_only_false(tmp_path):
    # as torch.save / torch.load (PyTorch >= 2.6): a whole module is pickled, and loading a
    # pickle (which can run code) needs weights_only=False
    import pickle

    model = tl.nn.Linear(1, 1)
    tl.save({"m": model}, tmp_path / "x.tl")
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        tl.load(tmp_path / "x.tl")
    back = tl.load(tmp_path / "x.tl", weights_only=False)["m"]
    assert tl.equal(back.weight.detach(), model.weight.detach())
    with pytest.raises(TypeError, match="_use_new_zipfile_serialization"):
        tl.save({}, tmp_path / "y.tl", _use_new_zipfile_serialization=True)
    (tmp_path / "junk.tl").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a file written by tl.save"):
        tl.load(tmp_path / "junk.tl")


def test_set_grad_enabled_and_inference_mode():
    with tl.set_grad_enabled(False):
        assert not tl.is_grad_enabled()
    assert tl.is_grad_enabled()
    tl.set_grad_enabled(False)
    try:
        assert not tl.is_grad_enabled()
    finally:
        tl.set_grad_enabled(True)
    assert tl.is_grad_enabled()

    @tl.set_grad_enabled(False)
    def frozen(x):
        return x * 2

    assert tl.is_grad_enabled() and not frozen(tl.ones(2, requires_grad=True)).requires_grad

    @tl.inference_mode()
    def predict(x):
        return x * 2

    out = predict(tl.ones(2, requires_grad=True))
    assert not out.requires_grad and tl.is_grad_enabled()
    with tl.inference_mode(False):
        assert tl.is_grad_enabled()


# --------------------------------------------------------------------------- devices


def test_devices_map_onto_backends():
    x = tl.ones(2, device="cpu")
    assert (
        x.device == "numpy"
        and x.device.type == "cpu"
        and repr(x.device) == "device(type='cpu', backend='numpy')"
    )
    assert x.to("cpu") is x and x.cpu() is x and x.to(tl.device("cpu")) is x
    assert tl.zeros_like(x, device="strided").device == "strided"
    assert tl.zeros(2, device=x.device).device == "numpy"
    cuda0 = tl.device("cuda", 0)
    assert cuda0 == "cuda:0" and cuda0.type == "cuda" and cuda0.index == 0
    with pytest.raises(ValueError, match="unknown device 'cuda:1'"):
        tl.ones(1, device="cuda:1")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        tl.device("tpu")
    with pytest.raises(ValueError, match="disagree"):
        tl.ones(1, device="cpu", backend="strided")


def test_to_takes_every_pytorch_form():
    x = tl.ones(2, requires_grad=True)
    both = x.to("strided", tl.float32)
    assert both.device == "strided" and both.dtype is tl.float32
    assert x.to(dtype=tl.float32, device="cpu").dtype is tl.float32
    like = x.to(tl.zeros(1, dtype=tl.float32, backend="strided"))
    assert like.device == "strided" and like.dtype is tl.float32
    assert x.to("cpu", non_blocking=True) is x and x.to(tl.float64) is x
    both.sum().backward()  # the gradient comes back through both conversions
    assert x.grad.tolist() == [1.0, 1.0] and x.grad.dtype is tl.float64


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    # A fresh process: loading the cuda backend fixes numba.cuda's mode for the whole process.
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )


def test_cuda_device_works_or_says_how_to_fix_it():
    code = (
        "import torchlight as tl\n"
        "if tl.cuda.is_available():\n"
        "    print(tl.ones(2, device='cuda').device.type)\n"
        "else:\n"
        "    try:\n"
        "        tl.ones(2, device='cuda')\n"
        "    except RuntimeError as error:\n"
        "        print(error)\n"
    )
    out = _run(code, NUMBA_ENABLE_CUDASIM="0").stdout
    assert out.strip() == "cuda" or ("found no CUDA GPU" in out and "NUMBA_ENABLE_CUDASIM=1" in out)


def test_the_cuda_simulator_is_no_gpu():
    result = _run(
        "import torchlight as tl; print(tl.cuda.is_available())", NUMBA_ENABLE_CUDASIM="1"
    )
    assert result.stdout.strip() == "False", result.stderr
