"""Randomized Hadamard rotations of a GEMM operand along its contraction axis.

``R = D H / sqrt(n)`` per block of ``n`` (a power of two) consecutive elements along the axis:
``H`` the Sylvester Hadamard matrix, ``D`` a diagonal of random signs drawn from ``seed`` (one sign
per element of the axis). ``R`` is orthogonal, so ``(A R)(R^T B) = A B`` in exact arithmetic:
rounding the rotated operand ``A R`` and rotating back spreads an outlier's magnitude over its
block before the scale is chosen (QuaRot, Ashkboos et al. 2024, arXiv:2404.00456; Transformer
Engine's NVFP4 recipe applies a 16-point random Hadamard transform to the wgrad GEMM's inputs).
The transform runs as a fast Walsh-Hadamard butterfly in float32 (sums and differences, then one
multiplication by ``1 / sqrt(n)``): the rotated values carry float32 rounding, as a GPU kernel's.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .rotation_sizes import MAX_ROTATION, check_rotation_size, random_signs

__all__ = ["MAX_ROTATION", "check_rotation_size", "hadamard_rotate", "random_signs"]

def _walsh_hadamard(v):
    """``v @ H`` over the last axis (a power of two ``n``) by the butterfly, unnormalised."""
    n = v.shape[-1]
    lead = v.shape[:-1]
    h = 1
    while h < n:
        w = v.reshape(*lead, n // (2 * h), 2, h)
        a, b = w[..., 0, :], w[..., 1, :]
        v = jnp.stack([a + b, a - b], axis=-2).reshape(*lead, n)
        h *= 2
    return v


def hadamard_rotate(x, size: int, seed: int, *, axis: int = -1, inverse: bool = False):
    """``x`` times ``R`` (``inverse``: ``R^T``) along ``axis``, ``R`` block-diagonal with blocks
    ``D H / sqrt(size)`` (see the module). The axis length must be a multiple of ``size``."""
    check_rotation_size(size)
    x = jnp.asarray(x, jnp.float32)
    if x.ndim == 0:
        raise ValueError("a Hadamard rotation needs an axis: got a 0-d array")
    axis = axis % x.ndim
    n = x.shape[axis]
    if n % size:
        raise ValueError(f"a Hadamard rotation of size {size} needs the contraction axis (length {n}) to be "
                         f"a multiple of {size}; allowed: rotation = a power of two dividing {n}")
    return _rotate(x, int(size), int(seed), axis, bool(inverse))


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _rotate(x, size: int, seed: int, axis: int, inverse: bool):
    n = x.shape[axis]
    moved = jnp.moveaxis(x, axis, -1)
    d = jnp.asarray(random_signs(n, seed)).reshape((1,) * (moved.ndim - 1) + (n,))
    scale = np.float32(1 / np.sqrt(size))
    if not inverse:
        moved = moved * d
    blocks = _walsh_hadamard(moved.reshape(*moved.shape[:-1], n // size, size)) * scale
    out = blocks.reshape(moved.shape)
    if inverse:
        out = out * d
    return jnp.moveaxis(out, -1, axis)
