"""Exact float arithmetic of the MAC kernels, in float64 built from float32 bits.

How one rounded addition ``round(acc + p)`` is made bit-exact in JAX (XLA:CPU flushes float32
subnormals, so float32 arithmetic cannot be trusted near the bottom of the range):

* Every value lives in float64, built from the float32 *bits* (integer ops plus an exact scaling
  for float32 subnormals, never an f32->f64 convert). Format values and exact products of two
  of them (at most 48 significant bits, magnitude >= 2**-298) are all normal float64 numbers.
* ``s = acc + p`` in float64 with TwoSum gives ``s + err`` exactly; if ``err != 0`` and ``s``
  is even, ``s`` steps to its odd neighbour on the side of ``err``: round-to-odd at 53 bits.
* One rounding of that onto the accumulator grid with ``round_to_grid`` (the integer kernel of
  ``quantize``) is correct in every mode, as 53 >= 24 + 2 (Boldo & Melquiond, round-to-odd).

Callers run these under ``jax.enable_x64(True)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .grid_rounding import round_to_grid
from .mac import MacSpec
from .rounding import F64, RoundMode, parse_rounding

_U64 = np.uint64


# --- one rounding ------------------------------------------------------------------------------


def round64(x: jax.Array, spec, rnd: str, sat: bool | None) -> jax.Array:
    """Round float64 values once onto a float format (result still float64)."""
    r = parse_rounding(rnd)
    sat = spec.saturate if sat is None else sat
    bits = jax.lax.bitcast_convert_type(x, jnp.uint64)
    out = round_to_grid(jnp, F64, bits, spec, r, sat)
    return jax.lax.bitcast_convert_type(out, jnp.float64)


def add_round(acc: jax.Array, p: jax.Array, spec, rnd: str, sat: bool | None) -> jax.Array:
    """``round(acc + p)`` onto ``spec``, correctly rounded, IEEE signs of zero."""
    s = acc + p
    bb = s - acc
    err = (acc - (s - bb)) + (p - bb)  # TwoSum: s + err == acc + p exactly
    bits = jax.lax.bitcast_convert_type(s, jnp.uint64)
    inexact = (err != 0.0) & jnp.isfinite(s)
    step = inexact & ((bits & _U64(1)) == _U64(0))
    up = (err > 0.0) == (s > 0.0)  # the exact sum lies farther from zero than s
    bits = jnp.where(step, jnp.where(up, bits + _U64(1), bits - _U64(1)), bits)
    neg = jnp.signbit(acc) & jnp.signbit(p)
    if parse_rounding(rnd).mode is RoundMode.RDN:
        neg = jnp.signbit(acc) | jnp.signbit(p)
    zero = jnp.where(neg, _U64(1 << 63), _U64(0))
    bits = jnp.where(s == 0.0, zero, bits)
    return round64(jax.lax.bitcast_convert_type(bits, jnp.float64), spec, rnd, sat)


class Float64Arith:
    """Float MAC arithmetic in float64: exact products, one correct rounding per addition."""

    def __init__(self, mac: MacSpec):
        self.mac, self.acc = mac, mac.spec("acc")
        self.prod_spec = mac.spec("product")

    def zeros(self, shape):
        return jnp.zeros(shape, jnp.float64)

    def product(self, a, b):
        p = a * b  # exact in float64
        if self.prod_spec is not None:
            p = round64(p, self.prod_spec, self.mac.product_rnd, self.mac.saturate)
        return p

    def add(self, x, y):
        return add_round(x, y, self.acc, self.mac.acc_rounding, self.mac.saturate)

    def to_acc(self, p):
        return round64(p, self.acc, self.mac.acc_rounding, self.mac.saturate)
