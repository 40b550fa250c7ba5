"""The numba backend: the numpy backend with its hot primitives compiled to parallel loops."""
