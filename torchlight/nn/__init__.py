"""Neural networks, in PyTorch's names: Module, Parameter, layers, ``functional`` and ``init``.

One file per topic, named as PyTorch names its own: ``module``, ``init``, ``hooks``,
``container``, ``linear``, ``activation``, ``dropout``, ``loss``, ``conv``, ``pooling``,
``normalization``, ``sparse``, ``padding``, ``pixelshuffle``, ``attention``, ``recurrent``,
``transformer``, ``parallel``; each holds its Modules and their functional forms, and
``functional`` only re-exports those. The autograd Functions they use are in
:mod:`torchlight.ops`.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn
    >>> model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    >>> sum(p.numel() for p in model.parameters())
    9610
"""

from torchlight.nn import functional, init, parallel, utils
from torchlight.nn.activation import (
    ELU,
    GELU,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from torchlight.nn.attention import MultiheadAttention
from torchlight.nn.container import (
    Flatten,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
    Unflatten,
)
from torchlight.nn.conv import Conv1d, Conv2d, ConvTranspose2d
from torchlight.nn.dropout import Dropout, Dropout2d
from torchlight.nn.hooks import RemovableHandle
from torchlight.nn.linear import Bilinear, Identity, Linear
from torchlight.nn.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from torchlight.nn.module import Module, Parameter
from torchlight.nn.normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from torchlight.nn.parallel import DataParallel
from torchlight.nn.pixelshuffle import PixelShuffle, PixelUnshuffle
from torchlight.nn.pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
)
from torchlight.nn.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, LSTMLanguageModel, RNNCell
from torchlight.nn.sparse import Embedding
from torchlight.nn.transformer import (
    GPT,
    GPTBlock,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from torchlight.nn.upsampling import Upsample

__all__ = [
    "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "Conv1d", "Conv2d", "CrossEntropyLoss", "Dropout",
    "Embedding", "Flatten", "Identity", "Linear", "LogSoftmax", "MSELoss", "MaxPool2d", "Module",
    "NLLLoss", "Parameter", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh", "functional", "init",
]  # fmt: skip
__all__ += [
    "ELU", "GELU", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d", "ConvTranspose2d",
    "HuberLoss", "KLDivLoss", "L1Loss", "LeakyReLU", "MaxPool1d", "ModuleDict", "ModuleList",
    "ParameterDict", "ParameterList", "RemovableHandle", "SiLU", "SmoothL1Loss", "Softplus",
    "Unflatten", "utils",
]  # fmt: skip

__all__ += [
    "GPT", "GRU", "LSTM", "RNN", "BatchNorm1d", "BatchNorm2d", "Dropout2d", "GPTBlock",
    "GroupNorm", "LSTMLanguageModel", "LayerNorm", "LearnedPositionalEmbedding",
    "MultiheadAttention", "SinusoidalPositionalEncoding", "TransformerEncoderLayer",
]  # fmt: skip
__all__ += [
    "DataParallel", "GRUCell", "LSTMCell", "PixelShuffle", "PixelUnshuffle", "RNNCell", "Transformer",
    "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder", "parallel",
]  # fmt: skip
# issue 37
__all__ += ["AdaptiveMaxPool2d", "Bilinear", "Hardtanh", "LogSigmoid", "ReLU6", "Upsample"]
