"""The pure-Python strided backend: storage, layout (shape, strides, offset) and the primitives as loops."""
