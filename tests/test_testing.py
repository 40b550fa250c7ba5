"""torchlight.testing: assert_close with PyTorch's defaults and messages, and the
finite-difference-proof gradient checks the homework's visible tests use."""

from __future__ import annotations

import re

import numpy as np
import pytest

import torchlight as tl
from torchlight.testing import assert_close, assert_exact, assert_gradient_scales


def test_assert_close_uses_the_dtype_tolerances_of_pytorch() -> None:
    assert_close(tl.tensor([1.0]), [1.0 + 5e-8])  # float64: rtol = atol = 1e-7
    with pytest.raises(AssertionError):
        assert_close(tl.tensor([1.0]), [1.0 + 5e-7])
    assert_close(tl.tensor([1.0], dtype=tl.float32), np.array([1.000001], dtype=np.float32))
    with pytest.raises(AssertionError):  # integers are compared exactly
        assert_close(np.array([1, 2]), np.array([1, 3]))
    with pytest.raises(ValueError, match="both rtol and atol"):
        assert_close(1.0, 1.0, rtol=1e-3)


def test_the_message_names_counts_differences_index_expected_and_received() -> None:
    with pytest.raises(AssertionError) as info:
        assert_close(tl.tensor([[1.0, 2.0], [3.0, 4.5]]), [[1.0, 2.0], [3.0, 4.0]])
    message = str(info.value)
    assert "Mismatched elements: 1 / 4 (25.0%)" in message, message
    assert "Greatest absolute difference: 0.5 at index (1, 1)" in message, message
    assert "At index (1, 1): expected 4, received 4.5" in message, message
    with pytest.raises(AssertionError, match=r"'shape' do not match: \(2,\) != \(3,\)"):
        assert_close(tl.zeros(2), [0.0, 0.0, 0.0])
    with pytest.raises(AssertionError, match="^custom$"):
        assert_close(1.0, 2.0, msg="custom")
    with pytest.raises(AssertionError, match="expected 2, received 1 plus a hint"):
        assert_close(1.0, 2.0, msg=lambda m: m + " plus a hint")


def test_nan_and_inf() -> None:
    assert_close([np.inf, -np.inf], [np.inf, -np.inf])
    with pytest.raises(AssertionError, match="received nan"):
        assert_close([np.nan], [1.0])
    with pytest.raises(AssertionError):
        assert_close([np.nan], [np.nan])
    assert_close([np.nan], [np.nan], equal_nan=True)


def test_assert_gradient_scales_passes_exact_gradients_and_fails_estimated_ones() -> None:
    a, b = tl.randn(3, 4), tl.randn(3, 4)
    assert_gradient_scales(lambda x, y: x * y, [a, b], 0)
    assert_gradient_scales(lambda x, y: x / y, [a, b + 3], 1, power=-2)

    def estimated(x: tl.Tensor, y: tl.Tensor) -> tl.Tensor:
        class Mul(tl.autograd.Function):
            @staticmethod
            def forward(ctx, u, v):  # type: ignore[no-untyped-def]
                ctx.save_for_backward(u, v)
                return u * v

            @staticmethod
            def backward(ctx, g):  # type: ignore[no-untyped-def]
                u, v = ctx.saved_tensors
                h = 1e-3
                return g * ((u + h) * v - (u - h) * v) / (2 * h), g * u

        return Mul.apply(x, y)

    with pytest.raises(AssertionError, match="chosen against finite differences"):
        assert_gradient_scales(estimated, [a, b], 0)
    with pytest.raises(TypeError, match="float64 Tensor"):
        assert_gradient_scales(lambda x: x * 2, [tl.randn(2, dtype=tl.float32)], 0)


def test_assert_exact_is_tight_and_explains() -> None:
    assert_exact([1.0], [1.0 + 1e-13])
    with pytest.raises(AssertionError, match="chosen against finite differences"):
        assert_exact([1.0], [1.0 + 1e-10])


def test_the_message_names_the_value_that_was_wrong() -> None:
    """Issue 26.9: a visible test cell with three checks said "Tensor-likes are not close!"
    without saying which; the message starts with the call's arguments as written."""
    a = tl.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    (a * a).sum().backward()
    with pytest.raises(AssertionError) as caught:
        assert_close(a.grad.numpy(), [[2.0, 4.0, 6.5]])
    assert str(caught.value).startswith(
        "a.grad.numpy() is not close to [[2.0, 4.0, 6.5]]: Tensor-likes are not close!"
    )
    with pytest.raises(AssertionError, match=r"^a\.grad is not close to \[\[2\.0, 4\.0, 7\.0\]\]"):
        assert_exact(
            a.grad,
            [[2.0, 4.0, 7.0]],
        )  # over several lines, as a formatter leaves a long call
    with pytest.raises(AssertionError, match=r"^the gradient of square for input 0"):
        square = lambda x: x * x  # noqa: E731 - a name, as in a homework cell
        assert_gradient_scales(square, [tl.randn(3)], 0)


def test_the_message_names_the_value_in_a_notebook_cell() -> None:
    """In a kernel the source of a cell is IPython's (registered in linecache), as in JupyterLab
    and under nbgrader; a console has no source, and the message is PyTorch's alone."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    result = shell.run_cell(
        "import torchlight as tl\nfrom torchlight.testing import assert_close\n"
        "out = tl.tensor([1.0, 2.0])\nassert_close(out * 2, [2.0, 5.0])",
        silent=True,
    )
    assert isinstance(result.error_in_exec, AssertionError)
    assert str(result.error_in_exec).startswith("out * 2 is not close to [2.0, 5.0]: ")
    console: dict = {"assert_close": assert_close}  # what a console runs: no source anywhere
    with pytest.raises(AssertionError, match="^Tensor-likes are not close!"):
        exec(compile("assert_close([1.0], [2.0])", "<stdin>", "exec"), console)


@pytest.mark.parametrize(
    "check",
    [
        lambda a: assert_close(a, [1.0, 2.0]),
        lambda a: assert_exact(a, [1.0, 2.0]),
        lambda a: assert_gradient_scales(lambda x: x * x, [a], 0),
    ],
    ids=["assert_close", "assert_exact", "assert_gradient_scales"],
)
def test_a_failed_check_shows_one_frame_of_the_helpers_in_a_notebook(check) -> None:  # type: ignore[no-untyped-def]
    """A visible test in a notebook: IPython's traceback (what a cell shows) goes from the
    test's line to the one ``raise`` of the check it called, then the message; none of the
    helpers that built the message."""
    ultratb = pytest.importorskip("IPython.core.ultratb")
    import torchlight.testing

    with pytest.raises(AssertionError) as info:
        check(tl.tensor([1.0, 2.5]))
    shown = "\n".join(
        ultratb.AutoFormattedTB(mode="Context", theme_name="nocolor").structured_traceback(
            info.type, info.value, info.tb
        )
    )
    frames = re.findall(r"^File (\S+):\d+, in (\w+)", shown, flags=re.M)
    ours = [name for path, name in frames if path == torchlight.testing.__file__]
    assert ours == [info.traceback[-1].name], shown  # the raise of the check itself
    assert "raise AssertionError" in shown and "not close!" in shown, shown
