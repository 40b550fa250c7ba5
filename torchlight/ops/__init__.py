r"""Every forward/backward pair of the library, by family: one hop from a Tensor method.

Each file is a page of homework-shaped :class:`~torchlight.autograd.Function` subclasses
(``forward`` computes and saves what ``backward`` needs; ``backward`` returns one gradient per
input): :mod:`~torchlight.ops.arithmetic` (the primitives the Tensor's operators use),
:mod:`~torchlight.ops.elementwise`, :mod:`~torchlight.ops.reductions`,
:mod:`~torchlight.ops.layout` (views and reshapes), :mod:`~torchlight.ops.indexing`,
:mod:`~torchlight.ops.einsum`, :mod:`~torchlight.ops.losses` (softmax, log-softmax and the losses),
:mod:`~torchlight.ops.linear`, :mod:`~torchlight.ops.convolution` (and pooling),
:mod:`~torchlight.ops.normalization`, :mod:`~torchlight.ops.activations`,
:mod:`~torchlight.ops.recurrent`. Nothing here imports :mod:`torchlight.nn`: the layers are built
on these, not the other way round.
"""
