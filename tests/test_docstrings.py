"""Every runnable example in the library's docstrings is a test (doctest): the one list of
modules with examples, core, backends, nn, optim, data, checkpoint and viz alike."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "torchlight",
    "torchlight.autograd.grad_mode",
    "torchlight.autograd.function",
    "torchlight.autograd.gradcheck",
    "torchlight.creation",
    "torchlight.dtypes",
    "torchlight.shape",
    "torchlight.tensor",
    # PyTorch's other ops, function forms and devices
    "torchlight.cuda",
    "torchlight.device",
    "torchlight.functional_forms",
    "torchlight.ops.einsum",
    "torchlight.ops.indexing",
    "torchlight.ops.elementwise",
    "torchlight.ops.reductions",
    "torchlight.ops.layout",
    "torchlight.return_types",
    "torchlight.serialization",
    "torchlight.tensor_methods",
    "torchlight.ops.activations",
    "torchlight.ops.linear",
    "torchlight.ops.losses",
    "torchlight.ops.normalization",
    "torchlight.ops.recurrent",
    # backends
    "torchlight.backends.scalar_ops",
    "torchlight.backends.strided.backend",
    "torchlight.backends.strided.layout",
    "torchlight.backends.strided.storage",
    "torchlight.backends.numba.backend",
    "torchlight.backends.numba.kernels",
    "torchlight.backends.numba.expf",
    # nn, optim, data, checkpoint
    "torchlight.nn",
    "torchlight.nn.module",
    "torchlight.nn.linear",
    "torchlight.nn.dropout",
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
    "torchlight.nn.utils",
    "torchlight.nn.utils.clip_grad",
    "torchlight.nn.utils.convert_parameters",
    "torchlight.nn.normalization",
    "torchlight.nn.attention",
    "torchlight.nn.recurrent",
    "torchlight.nn.transformer",
    "torchlight.optim",
    "torchlight.optim.sgd",
    "torchlight.optim.adam",
    "torchlight.optim.rmsprop",
    "torchlight.optim.adagrad",
    "torchlight.optim.lr_scheduler",
    "torchlight.data",
    "torchlight.utils.data.dataset",
    "torchlight.utils.data.dataloader",
    "torchlight.data.toy",
    "torchlight.data.digits",
    "torchlight.train.checkpoint",
    "torchlight.train.guards",
    # viz
    "torchlight.viz",
    "torchlight.viz.view",
    "torchlight.viz.graph",
    "torchlight.viz.layout",
    "torchlight.viz.svg",
    "torchlight.viz.widgets",
    "torchlight.viz.training",
    "torchlight.viz.modules",
    "torchlight.viz.plots",
    # PyTorch compatibility (issue 25)
    "torchlight.compat",
    "torchlight.random",
    "torchlight.pytorch_names",
    "torchlight.serialization",
    "torchlight.utils.data",
    "torchlight.utils.data.sampler",
    "torchlight.amp",
    "torchlight.optim.adadelta",
    "torchlight.optim.lbfgs",
    "torchlight.nn.pixelshuffle",
    # issue 37
    "torchlight.autograd.functional",
    "torchlight.autograd.anomaly_mode",
    "torchlight.nn.upsampling",
    "torchlight.onnx",
    "torchlight.optim.adamax",
    "torchlight.printing",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} lost its examples"
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
