"""16-bit floats in .npy files, for the scripts that compare outputs (dgsmith, bench/gpu.py,
scripts/gpu_check.sh): f16 is NumPy's float16, bf16 a 2-byte void array ('<V2', as
ml_dtypes saves it) that holds the bits."""
import numpy as np


def widened(a):
    """An array as float64; bf16 by its bits (the top half of an f32)."""
    if a.dtype.kind == "V":
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def rtol(dtype):
    """The tolerance between two computations of one output that round differently (kernels
    that sum in another order, CUDA's exp and tanh): a few ulps of bf16 (2^-6) or f16 (2^-9),
    1e-4 for the others."""
    return 2.0 ** -6 if dtype.kind == "V" else 2.0 ** -9 if dtype == np.float16 else 1e-4
