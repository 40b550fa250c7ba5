"""Every runnable example in the core's docstrings is a test (doctest)."""

from __future__ import annotations

import doctest
import importlib

import pytest

CORE_MODULES = [
    "torchlight",
    "torchlight.autograd",
    "torchlight.creation",
    "torchlight.dtypes",
    "torchlight.shape",
    "torchlight.tensor",
    # PyTorch's other ops, function forms and devices
    "torchlight.cuda",
    "torchlight.device",
    "torchlight.functional_forms",
    "torchlight.ops_einsum",
    "torchlight.ops_index",
    "torchlight.ops_math",
    "torchlight.ops_reduce",
    "torchlight.ops_shape",
    "torchlight.return_types",
    "torchlight.serialization",
    "torchlight.tensor_extras",
]


@pytest.mark.parametrize("name", CORE_MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} lost its examples"
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
