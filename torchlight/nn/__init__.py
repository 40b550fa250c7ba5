"""Neural networks, in PyTorch's names: Module, Parameter, layers, ``functional`` and ``init``.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn
    >>> model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    >>> sum(p.numel() for p in model.parameters())
    9610
"""

# ---- PyTorch compatibility (issue 25): modules in files of their own
from torchlight.nn import (
    functional,
    init,
    parallel,
    utils,
)
from torchlight.nn.activation import ELU, GELU, LeakyReLU, SiLU, Softplus
from torchlight.nn.attention import MultiheadAttention  # sequence models (issue 14)
from torchlight.nn.container import (
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Unflatten,
)
from torchlight.nn.conv import AvgPool2d, Conv1d, Conv2d, ConvTranspose2d, MaxPool2d
from torchlight.nn.hooks import RemovableHandle
from torchlight.nn.layers import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    Linear,
    LogSoftmax,
    MSELoss,
    NLLLoss,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from torchlight.nn.loss import HuberLoss, KLDivLoss, L1Loss, SmoothL1Loss
from torchlight.nn.module import Module, Parameter
from torchlight.nn.normalization import (
    BatchNorm1d,
    BatchNorm2d,
    Dropout2d,
    GroupNorm,
    LayerNorm,
)
from torchlight.nn.parallel import DataParallel
from torchlight.nn.pixelshuffle import PixelShuffle, PixelUnshuffle
from torchlight.nn.pooling import AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, MaxPool1d
from torchlight.nn.recurrent import GRU, LSTM, RNN, LSTMLanguageModel
from torchlight.nn.rnncell import GRUCell, LSTMCell, RNNCell
from torchlight.nn.transformer import (
    GPT,
    GPTBlock,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TransformerEncoderLayer,
)
from torchlight.nn.transformer_full import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
)

# ---- end of the PyTorch compatibility block

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
