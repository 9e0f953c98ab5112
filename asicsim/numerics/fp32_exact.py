"""fp32-scaled quantization where float32 arithmetic on XLA:CPU is not exact: in float64.

A symmetric fp32 scale is defined as float32 arithmetic, as a fake-quant unit does it:
``s = amax / max``, ``y = x / s``, ``q = round(y)`` onto the element, ``q * s``, each operation
rounded to float32 -- subnormal results included. XLA:CPU flushes float32 subnormals (inputs and
results), so the float32 kernel is only used where none can occur (``float32_is_exact``);
elsewhere each float32 operation is done in float64 on values built from the bits (every
float32 number, subnormals too, is a normal float64, which nothing flushes) and rounded once to
float32 by the integer kernel. For +, -, *, / that is the correctly rounded float32 result
(53 >= 2 * 24 + 2: double rounding is innocuous). The element rounding itself runs on the float32
bits, so the random bits of stochastic rounding are the same on both paths.

The scale is at least 2**-149 (the smallest float32; a scale that rounds to 0 would divide by 0).

Asymmetric (zero-point) scaling always runs here: its float32 form, ``s = (hi - lo) / span``,
``zp = clip(round(min - lo / s))``, ``q = round(x / s + zp)``, ``(q - zp) * s``, meets subnormals
wherever the tensor is small, and its divisions by a broadcast ``s`` are ones XLA would otherwise
turn into multiplications by a reciprocal; no shipped recipe scales asymmetrically, so one exact
path is worth more than a fast one.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .._jax_compat import enable_x64
from .rounding import F32, F64, Rounding, RoundMode, f32_to_f64, f64_to_f32

_FLOAT32 = None


def _float32_spec():
    global _FLOAT32
    if _FLOAT32 is None:
        from .catalog import get_format

        _FLOAT32 = get_format("float32")
    return _FLOAT32


def float32_is_exact(x, amax, element, rnd: Rounding) -> jax.Array:
    """Whether the float32 path gives the float32-arithmetic result: every nonzero scale at least
    ``2**(-124 - qmin)`` (then every nonzero ``q * s`` is a normal float32 and a quotient below
    2**-126 is under a quarter of the element's smallest quantum, so flushing it to 0 changes
    nothing in rne/rna/rtz), and for directed and stochastic rounding no float32 subnormal input
    (which XLA:CPU reads as 0, where those modes may round it up)."""
    qmin = element.smallest_subnormal_exp if element.kind == "float" else -element.frac_bits
    if qmin < -124:
        return jnp.asarray(False)
    k = max(-126, -124 - qmin) + math.ceil(math.log2(element.max))  # amax >= 2**k => s >= bound
    if k > 127:
        return jnp.asarray(False)
    live = (amax != 0) & (amax < np.uint32(F32.inf))
    ok = jnp.all(~live | (amax >= np.uint32(F32.pow2_bits(k)) if k >= -149 else True))
    if rnd.mode in (RoundMode.RUP, RoundMode.RDN, RoundMode.SR):
        mag = jax.lax.bitcast_convert_type(x, jnp.uint32) & np.uint32(0x7FFFFFFF)
        ok = ok & ~jnp.any((mag != 0) & (mag < np.uint32(1 << 23)))
    return ok


def fp32_scaled_in_float64(x, amax, element, rnd: Rounding, saturate: bool, rand, round_bits):
    """(values, scale) of symmetric fp32 scaling, each float32 operation done in float64 and
    rounded once to float32. ``amax``: uint32 bits, broadcastable against ``x``; ``round_bits``:
    the element rounding on float32 bits (``scaling._round_bits``)."""
    with enable_x64(True):
        def divide(a, b):  # a / b, b broadcast: kept a true division (see scaling._divide)
            return a / (jnp.broadcast_to(b, a.shape) + a * 0.0)

        amax64 = f32_to_f64(jax.lax.bitcast_convert_type(amax, jnp.float32))
        s = _to_f32_grid(divide(amax64, np.float64(element.max)))
        s = jnp.where(amax == 0, 1.0, jnp.maximum(s, 2.0**-149))
        y = f64_to_f32(_to_f32_grid(divide(f32_to_f64(x), s)))
        q = round_bits(jax.lax.bitcast_convert_type(y, jnp.uint32), element, rnd, saturate, rand)
        q64 = f32_to_f64(jax.lax.bitcast_convert_type(q, jnp.float32))
        return f64_to_f32(_to_f32_grid(q64 * s)), f64_to_f32(s)


def _to_f32_grid(v):
    """float64 values rounded (rne) onto float32's grid, still float64 (under x64)."""
    from .quantize import round_to_grid

    bits = jax.lax.bitcast_convert_type(v, jnp.uint64)
    out = round_to_grid(jnp, F64, bits, _float32_spec(), Rounding(RoundMode.RNE), False)
    return jax.lax.bitcast_convert_type(out, jnp.float64)


def fp32_asymmetric_in_float64(x, axes, element, rnd: Rounding, saturate: bool, rand, round_bits):
    """(values, scale) of asymmetric fp32 scaling over ``axes`` (reduced, kept), each float32
    operation done in float64 and rounded once to float32 (see the module docstring)."""
    with enable_x64(True):
        def divide(a, b):  # a / b, b broadcast: kept a true division (see scaling._divide)
            return a / (jnp.broadcast_to(b, a.shape) + a * 0.0)

        x64 = f32_to_f64(x)
        lo = jnp.minimum(jnp.min(x64, axis=axes, keepdims=True), 0.0)
        hi = jnp.maximum(jnp.max(x64, axis=axes, keepdims=True), 0.0)
        span = float(np.float32(element.kmax - element.kmin) * np.float32(element.eps))
        s = _to_f32_grid(divide(_to_f32_grid(hi - lo), np.float64(span)))
        s = jnp.where(hi == lo, 1.0, jnp.maximum(s, 2.0**-149))
        zp = jnp.round(_to_f32_grid(float(np.float32(element.min)) - _to_f32_grid(divide(lo, s))))
        zp = jnp.clip(zp, element.min, element.max)
        y = f64_to_f32(_to_f32_grid(_to_f32_grid(divide(x64, s)) + zp))
        q = round_bits(jax.lax.bitcast_convert_type(y, jnp.uint32), element, rnd, saturate, rand)
        q64 = f32_to_f64(jax.lax.bitcast_convert_type(q, jnp.float32))
        return f64_to_f32(_to_f32_grid(_to_f32_grid(q64 - zp) * s)), f64_to_f32(s)
