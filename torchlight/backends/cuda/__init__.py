"""The CUDA backend: device memory, kernel sources, launches (numba.cuda; the simulator without a GPU)."""
