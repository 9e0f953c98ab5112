"""Comparisons of float32 values on their bit patterns.

XLA on CPU runs with denormals-are-zero: its float compare reads a subnormal as 0, so
``x > 0`` is false for the smallest positive float32 values and a mask built from it (a
straight-through gradient, a "has a scale" test) differs from every other backend. These
compare on the int32 bit patterns instead, exactly and alike everywhere.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

_MAG = np.int32(0x7FFFFFFF)
_INF_BITS = np.int32(0x7F800000)


def order_key(x) -> jax.Array:
    """An int32 that orders float32 ``x`` as its values order (``-0`` and ``+0`` alike).

    ``order_key(a) < order_key(b)`` exactly where ``a < b`` for non-NaN ``a``, ``b``, subnormals
    included. A NaN's key is not meaningful: mask NaNs separately.
    """
    bits = lax.bitcast_convert_type(jnp.asarray(x, jnp.float32), jnp.int32)
    return jnp.where(bits < 0, -(bits & _MAG), bits)


def positive(x) -> jax.Array:
    """``x > 0`` for float32 ``x``, subnormals included (false for NaN)."""
    bits = lax.bitcast_convert_type(jnp.asarray(x, jnp.float32), jnp.int32)
    return (bits > 0) & (bits <= _INF_BITS)
