"""Every runnable example in the docstrings of nn, optim, data, checkpoint and train is a test."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "torchlight.nn",
    "torchlight.nn.module",
    "torchlight.nn.layers",
    "torchlight.nn.conv",
    "torchlight.nn.functional",
    "torchlight.nn.init",
    "torchlight.nn.activation",
    "torchlight.nn.container",
    "torchlight.nn.hooks",
    "torchlight.nn.loss",
    "torchlight.nn.sparse",
    "torchlight.nn.padding",
    "torchlight.nn.pooling",
    "torchlight.nn.conv_general",
    "torchlight.nn.utils",
    "torchlight.nn.utils.clip_grad",
    "torchlight.nn.utils.convert_parameters",
    "torchlight.optim",
    "torchlight.optim.sgd",
    "torchlight.optim.adam",
    "torchlight.optim.rmsprop",
    "torchlight.optim.adagrad",
    "torchlight.optim.lr_scheduler",
    "torchlight.data",
    "torchlight.data.loader",
    "torchlight.data.toy",
    "torchlight.data.digits",
    "torchlight.checkpoint",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} lost its examples"
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
