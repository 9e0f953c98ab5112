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


#: butterfly stages done in one pass (a tree of this many inputs per output; :func:`_walsh_hadamard`)
RADIX = 16


def _walsh_hadamard(v, axis: int, signs=None):
    """``v @ H`` over ``axis`` (a power of two ``n``) by the butterfly, unnormalised: stage ``s``
    turns the pair ``(a, b)`` at ``2**s`` apart in each run of ``2**(s + 1)`` into ``(a + b,
    a - b)``. Stages go in groups of ``log2(RADIX)``, one pass each (:func:`_butterfly_pass`): the
    stages of bits ``4g .. 4g + 3`` of the position are a 16-point butterfly along that digit.
    ``signs`` (shaped like ``v``, or broadcastable): multiplied into the inputs in the first pass."""
    n, low = v.shape[axis], 1
    while low < n:
        digit = min(RADIX, n // low)
        split = (*v.shape[:axis], n // (low * digit), digit, low, *v.shape[axis + 1:])
        pre = None if signs is None or low > 1 else signs.reshape(*signs.shape[:axis], n // digit, digit, 1,
                                                                   *signs.shape[axis + 1:])
        v = _butterfly_pass(v.reshape(split), axis + 1, pre).reshape(v.shape)
        low *= digit
    return v


def _butterfly_pass(v, axis: int, signs=None):
    """The butterfly along ``axis`` (``n`` a power of two, at most :data:`RADIX`), stage ``s``
    pairing bit ``s``: output ``j`` is a tree over the ``n`` inputs whose stage ``s`` takes the
    difference where bit ``s`` of ``j`` is set, computed per output from the axis' slices (the
    same sums in the same order) in one pass. Stage by stage on the whole axis each stage read
    its input at two positions, and XLA wrote every stage out (4 passes for ``n = 16``)."""
    n = v.shape[axis]
    j = np.arange(n).reshape((n,) + (1,) * (v.ndim - axis - 1))
    level = [jax.lax.slice_in_dim(v, i, i + 1, axis=axis) for i in range(n)]
    if signs is not None:
        level = [x * jax.lax.slice_in_dim(signs, i, i + 1, axis=axis) for i, x in enumerate(level)]
    stage = 0
    while len(level) > 1:
        minus = (j >> stage) & 1 == 1
        level = [jnp.where(minus, a - b, a + b) for a, b in zip(level[::2], level[1::2], strict=True)]
        stage += 1
    return jnp.broadcast_to(level[0], v.shape)


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
    split = (*x.shape[:axis], n // size, size, *x.shape[axis + 1:])  # blocks in place: no transpose
    d = jnp.asarray(random_signs(n, seed)).reshape((1,) * axis + (n // size, size) + (1,) * (x.ndim - axis - 1))
    scale = np.float32(1 / np.sqrt(size))
    out = _walsh_hadamard(x.reshape(split), axis + 1, None if inverse else d) * scale
    return (out * d if inverse else out).reshape(x.shape)
