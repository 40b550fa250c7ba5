"""torchlight: a small, readable autodiff library for learning how deep-learning frameworks work.

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([2.0, 3.0], requires_grad=True)
    >>> y = (x ** 2).sum(); y.backward(); x.grad
    tensor([4., 6.])
"""

from torchlight import autograd, backends, shape
from torchlight.autograd import enable_grad, is_grad_enabled, no_grad
from torchlight.backends import get_default_backend, set_default_backend
from torchlight.creation import (
    arange,
    cat,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randn,
    randn_like,
    stack,
    tensor,
    where,
    zeros,
    zeros_like,
)

# PyTorch's function forms (tl.exp, tl.max, tl.einsum, tl.save...) and device names
from torchlight.device import device
from torchlight.dtypes import (
    DType,
    bool_,
    float32,
    float64,
    get_default_dtype,
    int32,
    int64,
    set_default_dtype,
    uint8,
)
from torchlight.functional_forms import *  # noqa: F403 - each name is listed in __all__ below
from torchlight.functional_forms import __all__ as _FUNCTION_FORMS
from torchlight.pytorch_names import *  # noqa: F403 - each name is listed in __all__ below
from torchlight.pytorch_names import __all__ as _PYTORCH_NAMES
from torchlight.random import Generator, multinomial, normal, randint, randperm
from torchlight.tensor import Tensor
from torchlight.tensor_methods import ExpandedViewWriteError
from torchlight.threads import (
    get_num_interop_threads,
    get_num_threads,
    set_num_interop_threads,
    set_num_threads,
)

bool = bool_  # noqa: A001 - PyTorch spells it tl.bool
float, double, long, int = float32, float64, int64, int32  # noqa: A001 - PyTorch's aliases
__version__ = "0.1.0"

# ---- PyTorch compatibility (issue 25): names PyTorch programs use


def autocast(*args: object, **kwargs: object) -> object:
    """``torch.autocast``: see :mod:`torchlight.amp`."""
    from torchlight.amp import autocast as _autocast

    return _autocast(*args, **kwargs)  # type: ignore[arg-type]


# ---- end of the PyTorch compatibility block

# The layers above the core load on first use (`tl.nn`, `tl.viz`...), so `import torchlight`
# stays fast and never needs the notebook packages.
#: ``tl.<name>`` loaded on first use (``tl.checkpoint`` is the app layer's checkpoint module).
_SUBMODULES = {
    "nn": "torchlight.nn",
    "optim": "torchlight.optim",
    "data": "torchlight.data",
    "viz": "torchlight.viz",
    "checkpoint": "torchlight.train.checkpoint",
    "train": "torchlight.train",
    "cuda": "torchlight.cuda",
    # PyTorch's (issue 25)
    "utils": "torchlight.utils",
    "amp": "torchlight.amp",
    "distributed": "torchlight.distributed",
    "onnx": "torchlight.onnx",
    "accelerator": "torchlight.accelerator",
    "compat": "torchlight.compat",
}


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(_SUBMODULES[name])
    raise AttributeError(f"module 'torchlight' has no attribute {name!r}")


__all__ = [
    "DType", "ExpandedViewWriteError", "Tensor", "arange", "autograd", "backends", "bool", "cat", "empty", "empty_like",
    "enable_grad", "eye", "float32", "float64", "full", "full_like",
    "get_default_backend", "get_default_dtype", "int32", "int64", "is_grad_enabled", "linspace",
    "manual_seed", "no_grad", "ones", "ones_like", "rand", "rand_like", "randint", "randn",
    "randn_like", "set_default_backend", "set_default_dtype", "shape", "stack", "tensor", "where",
    "zeros", "zeros_like",
]  # fmt: skip
__all__ += ["Generator", "autocast", "multinomial", "normal", "randperm", "uint8", *_PYTORCH_NAMES]
__all__ += [
    "get_num_interop_threads",
    "get_num_threads",
    "set_num_interop_threads",
    "set_num_threads",
]
__all__ += ["cuda", "device", "double", "float", "int", "long", *_FUNCTION_FORMS]  # noqa: F405

get_num_threads()  # PyTorch's default from the start: one BLAS thread per physical core
