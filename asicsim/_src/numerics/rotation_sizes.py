"""The sizes and signs of the Hadamard rotations (:mod:`asicsim._src.numerics.rotation`), without JAX:
recipe checks read them when ``asicsim recipes`` lists the catalog, which loads no JAX."""

from __future__ import annotations

import numpy as np

#: largest Hadamard block: the butterfly unrolls log2(n) stages
MAX_ROTATION = 2**16


def check_rotation_size(n) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2 or n > MAX_ROTATION or n & (n - 1):
        raise ValueError(f"rotation size {n!r}; allowed: a power of two in 2 .. {MAX_ROTATION}")


def random_signs(length: int, seed: int) -> np.ndarray:
    """The diagonal ``D``: ``length`` float32 signs, +-1, drawn from ``seed`` (numpy's PCG64)."""
    return np.where(np.random.default_rng(seed).integers(0, 2, length) == 1, 1, -1).astype(np.float32)
