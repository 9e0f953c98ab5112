"""Steering XLA:CPU's fusion where it costs time.

XLA:CPU fuses a cheap elementwise producer into every consumer, even one that reads each
element many times (the taps of a transposed im2col, or every element of a rounding kernel
reading a few derived scalars), and recomputes it there. ``optimization_barrier`` does not stop
this on CPU (it is removed before fusion); a reduction is never duplicated into its consumers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def computed_once(x: jax.Array) -> jax.Array:
    """``x`` unchanged (same bits), as a buffer of its own: passed through a bitwise OR with zeros
    over a new axis of 2, a reduction XLA does not copy into consumers. Floats go through their
    unsigned integer bits; dtypes of other widths are returned as they are."""
    if jnp.issubdtype(x.dtype, jnp.unsignedinteger):
        uint = x.dtype
    else:
        uint = {4: jnp.uint32, 2: jnp.uint16}.get(x.dtype.itemsize)
        if uint is None:
            return x
    bits = jax.lax.bitcast_convert_type(x, uint) if x.dtype != uint else x
    both = jnp.stack([bits, jnp.zeros_like(bits)])
    once = jax.lax.reduce(both, np.zeros((), bits.dtype), jax.lax.bitwise_or, (0,))
    return jax.lax.bitcast_convert_type(once, x.dtype) if x.dtype != uint else once
