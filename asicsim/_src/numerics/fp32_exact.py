"""fp32-scaled quantization where float32 arithmetic on XLA:CPU is not exact.

A symmetric fp32 scale is defined as float32 arithmetic, as a fake-quant unit does it:
``s = amax / max``, ``y = x / s``, ``q = round(y)`` onto the element, ``q * s``, each operation
rounded to float32 -- subnormal results included (and a subnormal scale rounded up, see
``fp32_scale``). XLA:CPU flushes float32 subnormals (inputs and results), and XLA:GPU's float32
division is not correctly rounded, so the divisions are :func:`.exact_div.divide` (integer long
division, correctly rounded, subnormals kept), and the other float32 operations are done in
float64 on values built from the bits (every float32 number, subnormals too, is a normal
float64, which nothing flushes) and rounded once to float32 (``rounding.f64_to_f32``). Always:
a ``lax.cond`` to float32's own multiply where no product can be subnormal cost more than it
saved (XLA materialised the condition's operands, a pass over every GEMM operand of a training
step, and compiled both branches; ``benchmarks/RESULTS.md``).
For +, -, * that is the correctly rounded float32 result (53 >= 2 * 24 + 2: double rounding is
innocuous; a product of two float32 numbers is exact in float64).

The scale is at least 2**-149 (the smallest float32; a scale that rounds to 0 would divide by 0).

Asymmetric (zero-point) scaling always runs in float64: its float32 form, ``s = (hi - lo) /
span``, ``zp = clip(round(min - lo / s))``, ``q = round(clip(x / s + zp))``, ``(q - zp) * s``,
meets subnormals wherever the tensor is small; no shipped recipe scales asymmetrically, so one
exact path is worth more than a fast one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..._jax_compat import enable_x64
from .exact_div import divide
from .formats import element_qmin
from .rounding import F32, Rounding, f32_to_f64, f64_to_f32


def fp32_mul(a, b) -> jax.Array:
    """float32 ``a * b`` correctly rounded on every backend, subnormal operands and products
    kept (in float64: every float32 is a normal float64, and 53 >= 2 * 24 + 2 bits make the
    double rounding innocuous)."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    return _product(a, b)


def code_times_scale(q, s, element) -> jax.Array:
    """:func:`fp32_mul` of codes ``q`` (values of ``element``, NaN or inf) and scales ``s``: a code
    of a format whose nonzero values are all normal float32 numbers is converted to float64 as
    it is (XLA:CPU's conversion flushes only float32 subnormals), a few operations fewer per
    element than :func:`asicsim._src.numerics.rounding.f32_to_f64`."""
    if element_qmin(element) < -126:
        return fp32_mul(q, s)
    q, s = jnp.broadcast_arrays(jnp.asarray(q, jnp.float32), jnp.asarray(s, jnp.float32))
    with enable_x64(True):
        return f64_to_f32(q.astype(jnp.float64) * f32_to_f64(s))


def scale_up_if_subnormal(num, den: float) -> jax.Array:
    """float32 ``num / den`` (num >= 0 float32, den > 0 a float32 constant) rounded to nearest,
    or up to the next float32 where that is a subnormal below the quotient: a subnormal scale
    never lets ``num / scale`` exceed ``den`` (see ``fp32_scale``)."""
    s = divide(num, den)
    with enable_x64(True):
        below = f32_to_f64(s) * np.float64(np.float32(den)) < f32_to_f64(num)  # exact: 24 x 24 bits
    sb = jax.lax.bitcast_convert_type(s, jnp.uint32)
    up = below & (sb < np.uint32(F32.pow2_bits(-126)))
    return jax.lax.bitcast_convert_type(sb + up.astype(jnp.uint32), jnp.float32)


def _product(a, b) -> jax.Array:
    """float32 ``a * b`` correctly rounded, subnormal products kept (float64's product is exact)."""
    with enable_x64(True):
        return f64_to_f32(f32_to_f64(a) * f32_to_f64(b))


def _to_f32_grid(v):
    """float64 values rounded (rne) onto float32's grid, still float64 (under x64)."""
    return f32_to_f64(f64_to_f32(v))


def fp32_asymmetric_in_float64(x, axes, element, rnd: Rounding, saturate: bool, rand, round_bits):
    """(values, scale) of asymmetric fp32 scaling over ``axes`` (reduced, kept), every float32
    operation exact (see the module docstring); ``x / s + zp`` is clamped to the format's range
    (every element lies within [lo, hi]: only the scale's rounding can carry it out)."""
    with enable_x64(True):
        x64 = f32_to_f64(x)
        lo = jnp.minimum(jnp.min(x64, axis=axes, keepdims=True), 0.0)
        hi = jnp.maximum(jnp.max(x64, axis=axes, keepdims=True), 0.0)
        span = float(np.float32(element.kmax - element.kmin) * np.float32(element.eps))
        s = scale_up_if_subnormal(f64_to_f32(hi - lo), span)
        s = jnp.where(hi == lo, np.float32(1), s)
        zp = jnp.round(_to_f32_grid(float(np.float32(element.min)) - f32_to_f64(divide(f64_to_f32(lo), s))))
        zp = jnp.clip(zp, element.min, element.max)
        y = _to_f32_grid(f32_to_f64(divide(x, s)) + zp)
        y = f64_to_f32(jnp.clip(y, float(np.float32(element.min)), float(np.float32(element.max))))
        q = round_bits(jax.lax.bitcast_convert_type(y, jnp.uint32), element, rnd, saturate, rand)
        q64 = f32_to_f64(jax.lax.bitcast_convert_type(q, jnp.float32))
        return f64_to_f32(_to_f32_grid(q64 - zp) * f32_to_f64(s)), s
