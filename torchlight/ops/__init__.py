r"""Every forward/backward pair of the library, by family: one hop from a Tensor method.

Each file is a page of homework-shaped :class:`~torchlight.autograd.Function` subclasses
(``forward`` computes and saves what ``backward`` needs; ``backward`` returns one gradient per
input): :mod:`~torchlight.ops.arithmetic` (the primitives the Tensor's operators use),
:mod:`~torchlight.ops.elementwise`, :mod:`~torchlight.ops.reductions`,
:mod:`~torchlight.ops.layout` (views and reshapes), :mod:`~torchlight.ops.indexing`,
:mod:`~torchlight.ops.einsum`, :mod:`~torchlight.ops.losses` (softmax, linear and the losses),
:mod:`~torchlight.ops.convolution`.
"""
