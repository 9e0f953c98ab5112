"""Power-of-two scales on the bits: the exact amax of a group or axis, the shared exponent by a
plan's rule (OCP MX ``floor``, ``up``, ``nearest``), and the fast path that scales, rounds and
scales back in the tensor's own layout with no float multiply (:func:`pow2_scaled_flat`).

XLA:CPU vectorises poorly over a (groups, 32) view and over a per-element grid shift, so for
the common layouts (one scale per tensor, per channel, or per block along a last axis that the
block size divides) the values stay in their own layout: the exponent is reduced with keepdims
(blocks: over a (..., n/b, b) view), repeated back to element shape, the values are divided by
their scale on the bits, rounded by the unshifted kernel, and multiplied back on the bits.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from . import random as _random
from .exact_div import divide
from .formats import element_qmin as element_qmin
from .formats import emax_of
from .fp32_scale import round_bits as _round_bits
from .fp32_scale import saturate_to_float32
from .rounding import Rounding
from .scaling_plan import Scaling


def group_amax_bits(groups: jax.Array) -> jax.Array:
    """Largest magnitude of each group, as uint32 bits (NaN/inf compare above every finite)."""
    a = jax.lax.bitcast_convert_type(groups, jnp.uint32) & np.uint32(0x7FFFFFFF)
    return jnp.max(a, axis=-1, keepdims=True)


def pow2_scale_exponent(amax_bits: jax.Array, element, plan: Scaling) -> jax.Array:
    """Shared exponent per group, by the plan's rule, clamped to the scale format's range."""
    e_field = (amax_bits >> np.uint32(23)).astype(jnp.int32)
    sub_lead = 31 - jax.lax.clz(amax_bits).astype(jnp.int32)  # subnormal amax
    log2_floor = jnp.where(e_field > 0, e_field - 127, sub_lead - 149)
    norm_man = jnp.where(
        e_field > 0,
        amax_bits & np.uint32(0x7FFFFF),
        (amax_bits << jnp.clip(23 - sub_lead, 0, 31).astype(jnp.uint32)) & np.uint32(0x7FFFFF),
    )
    emax = emax_of(element)
    elem_man = np.uint32(np.array(math.ldexp(element.max, -emax), np.float32).view(np.uint32) & 0x7FFFFF)
    e = log2_floor - emax
    if plan.rule == "up":
        e = e + (norm_man > elem_man).astype(jnp.int32)
    elif plan.rule == "nearest":
        ratio = divide(
            jax.lax.bitcast_convert_type(norm_man | np.uint32(0x3F800000), jnp.float32),
            math.ldexp(element.max, -emax),
        )
        e = e + (ratio >= np.float32(math.sqrt(2))).astype(jnp.int32)
        e = e - (ratio < np.float32(math.sqrt(0.5))).astype(jnp.int32)
    lo, hi = plan.exponent_range
    return jnp.clip(jnp.where(amax_bits == 0, lo, e), lo, hi)


def fast_layout(shape: tuple[int, ...], plan: Scaling) -> bool:
    if plan.granularity in ("tensor", "channel"):
        return len(shape) >= 1
    return len(shape) >= 1 and plan.axis % len(shape) == len(shape) - 1 and shape[-1] % plan.block_size == 0


def pow2_scaled_flat(x, words, element, plan: Scaling, rnd: Rounding, saturate: bool):
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    if plan.granularity == "block":
        b = plan.block_size
        amax = amax_bits(x.reshape(*x.shape[:-1], -1, b), axes=(-1,), keepdims=False)
        # The barrier keeps XLA from recomputing the per-block exponent for every element.
        shift_groups, finite_groups = jax.lax.optimization_barrier(
            (pow2_scale_exponent(amax, element, plan), amax < np.uint32(0x7F800000))
        )
        shift = jnp.repeat(shift_groups, b, axis=-1)
        finite = jnp.repeat(finite_groups, b, axis=-1)
    else:
        keep = plan.axis % x.ndim if plan.granularity == "channel" else None
        axes = tuple(i for i in range(x.ndim) if i != keep)
        amax = amax_bits(x, axes=axes, keepdims=True)
        shift_groups, finite_groups = jax.lax.optimization_barrier(
            (pow2_scale_exponent(amax, element, plan), amax < np.uint32(0x7F800000))
        )
        shift, finite = shift_groups, finite_groups
    rand = _random.hash_bits(words, x.shape) if rnd.stochastic else None
    scaled = _divide_pow2_bits(bits, shift)
    out = _round_bits(scaled, element, rnd, saturate, rand)
    # a scale the ``up`` or ``nearest`` rule rounded up from an amax near 2**128 can put the
    # product past float32's range: its max where saturating, IEEE's +-inf where not
    values = saturate_to_float32(jax.lax.bitcast_convert_type(_multiply_pow2_bits(out, shift), jnp.float32), saturate)
    values = jnp.where(finite, values, np.float32(np.nan))  # a NaN/inf anywhere: the scale is NaN
    scale_exp = jnp.where(finite_groups, shift_groups, jnp.iinfo(jnp.int32).min)
    return values, scale_exp.reshape(-1)


def amax_bits(x: jax.Array, axes: tuple[int, ...], keepdims: bool) -> jax.Array:
    """Largest magnitude over ``axes`` as uint32 bits, NaN/inf above every finite value: an
    integer max of the magnitude bits, exact where float compares are not (XLA:CPU flushes
    subnormals, and its vectorised float max/min did not always propagate NaN). Measured
    (jax 0.10, 2 cores) no slower than a float max/min pair for per-tensor, per-channel and
    per-row reductions, and 2-5x faster than that pair with the ``lax.cond`` to an exact
    reduction it needed."""
    axes = tuple(sorted(a % x.ndim for a in axes))
    last = x.shape[-1] if x.ndim else 0
    if axes and axes[-1] == x.ndim - 1 and last > REDUCE_LANE and last % REDUCE_LANE == 0:
        # the last axis in lanes first: a reduce over a short axis fuses the masking (XLA:CPU
        # split a long one into reduce-windows fed by a masked copy of the whole tensor). The
        # masking must follow the reshape: masked before it, XLA kept the masked copy.
        lanes = x.reshape(*x.shape[:-1], last // REDUCE_LANE, REDUCE_LANE)
        x = jax.lax.bitcast_convert_type(amax_bits(lanes, (-1,), keepdims=False), jnp.float32)
    mag = jax.lax.bitcast_convert_type(x, jnp.uint32) & np.uint32(0x7FFFFFFF)
    if axes and axes[-1] != x.ndim - 1:
        # short axes before the last (blocks along another axis): halved by maxima of their two
        # halves while even, elementwise along the last axis. XLA:CPU fed a reduce over such an
        # axis from a masked copy of the whole tensor; this fuses the masking (a long axis, a
        # channel's 4096 rows, gained nothing: XLA materialises the tree's levels)
        for a in (a for a in axes if x.shape[a] <= SHORT_AXIS):
            while mag.shape[a] % 2 == 0 and mag.shape[a] > 1:
                h = mag.shape[a] // 2
                mag = jnp.maximum(jax.lax.slice_in_dim(mag, 0, h, axis=a), jax.lax.slice_in_dim(mag, h, 2 * h, axis=a))
    return jnp.max(mag.astype(jnp.int32), axis=axes, keepdims=keepdims).astype(jnp.uint32)


#: a long last axis is reduced in pieces this long first: XLA:CPU fuses the producer into a
#: reduce over a short axis (:func:`amax_bits`, ``emulate.loss_scaling.norm_and_finite``)
REDUCE_LANE = 32
#: an axis before the last at most this long is reduced by a tree of maxima (:func:`amax_bits`)
SHORT_AXIS = 256


def _divide_pow2_bits(bits: jax.Array, shift: jax.Array) -> jax.Array:
    """Bits of ``value * 2**-shift`` that round onto an element grid exactly as the true quotient.

    Normal results are exact. A quotient below 2**-126 is replaced by +-2**-126: on a grid whose
    smallest quantum is >= 2**-124 both lie below a quarter quantum, so every deterministic mode
    rounds them alike (stochastic rounding: both round up with probability < 2**-98). A float32
    subnormal input scaled up stays exact. No leading-zero count: AVX2 cannot vectorise it.
    """
    u = np.uint32
    a = bits & u(0x7FFFFFFF)
    exp = (a >> u(23)).astype(jnp.int32)
    out = jnp.where(
        exp - shift >= 1,
        bits - (shift << 23).astype(jnp.uint32),
        (bits & u(0x80000000)) | u(0x00800000),
    )
    # A subnormal input times 2**k: while below 2**-125 its bits are simply a << k (the carrier's
    # bit space is continuous across the subnormal/normal boundary); above, the integer a is
    # converted exactly and re-exponented.
    k = -shift
    up_small = a << jnp.clip(k, 0, 31).astype(jnp.uint32)
    fits = (k <= 24) & (a < (u(1 << 24) >> jnp.clip(k, 0, 24).astype(jnp.uint32)))
    as_float = jax.lax.bitcast_convert_type(a.astype(jnp.int32).astype(jnp.float32), jnp.uint32)
    up_big = as_float + ((k - 149) << 23).astype(jnp.uint32)
    scaled_up = (bits & u(0x80000000)) | jnp.where(fits, up_small, up_big)
    out = jnp.where((exp == 0) & (k > 0), scaled_up, out)
    return jnp.where((a == 0) | (exp == 255), bits, out)


def _multiply_pow2_bits(bits: jax.Array, shift: jax.Array) -> jax.Array:
    """Bits of ``value * 2**shift`` for element values (zero or float32 normals): exact where
    the float32 carrier holds the product, +-inf where it passes float32's range."""
    u = np.uint32
    a = bits & u(0x7FFFFFFF)
    exp = (a >> u(23)).astype(jnp.int32)
    new_exp = exp + shift
    normal = bits + (shift << 23).astype(jnp.uint32)
    sig = (a & u(0x7FFFFF)) | u(1 << 23)
    sub = (bits & u(0x80000000)) | (sig >> jnp.clip(1 - new_exp, 0, 31).astype(jnp.uint32))
    overflow = (bits & u(0x80000000)) | u(0x7F800000)
    out = jnp.where(new_exp >= 1, jnp.where(new_exp > 254, overflow, normal), sub)
    return jnp.where((a == 0) | (exp == 255), bits, out)
