"""MX block scaling by the OCP ``floor`` rule with no scaling multiply where it pays: in float ops
in the tensor's own layout (:func:`floor_blocks_float`), or, for large tensors, by rounding each
element's bits to its block's quantum with integer ops (:func:`floor_blocks_bits`); both give
the bits of the general integer path (``scaling._scaled_groups``) for every input.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import random as _random
from .fast_rounding32 import fast_round32
from .formats import emax_of
from .fp32_scale import saturate_to_float32
from .pow2_scales import element_qmin, fast_layout
from .rounding import Rounding, RoundMode
from .scaling_plan import Scaling

# Tensors below this many elements keep ``floor_blocks_float`` (unpadded where the last block
# is short) and an integer block amax: the pad and the slice of ``floor_blocks_bits``
# cost more than they save there. Measured in training, where a GRU's GEMMs run inside a scan:
# mxfp8 on hidden 16 (tensors of 1600-4800 elements) 1.69 -> 1.45x and hidden 32 (3200-9600)
# 1.58 -> 1.51x with 4096 -> 12288; hidden 64 (19200) was faster with the magic-number path this
# path replaced (not measured again for it).
BITS_MIN_SIZE = 12288
_I = np.int32


def floor_blocks_float(x, element, plan: Scaling, rnd: Rounding, saturate: bool):
    """Power-of-two block scaling by the OCP MX ``floor`` rule in float ops, in ``x``'s own layout
    (the blocked axis split in two, no transpose): amax per block, ``x * 2**-s``, the float fast
    rounding, ``* 2**s``; the same bits as the integer path for every input. None where it does
    not apply (no float fast rounding for the element; element emax < 1 or qmin < -24). The
    block exponents: ``_floor_block_exponents``.

    The float products are exact except where XLA:CPU flushes subnormals: a product below
    2**-126 rounds to +-0 either way (below half the smallest quantum, 2**(qmin-1)), and only
    blocks with ``s < -100`` (amax below ~2**-92) can hold the two cases that differ: a
    subnormal input that scales to a nonzero element (taken as the integer ``mag`` converted
    exactly, times ``2**(-149 - s)``), and a result ``q * 2**s`` that is subnormal or needs
    ``2**-127`` (built from ``w = |q| * 2**(s + 149)``, an exact float: its integer value below
    2**23 is the subnormal's bits, above it ``w``'s exponent less 149).
    """

    if emax_of(element) < 1 or element_qmin(element) < -24:
        return None
    axis = plan.axis % x.ndim
    n, b = x.shape[axis], min(plan.block_size, x.shape[axis])
    # A small tensor with a short last block is not padded: its per-block values come from a
    # reduce_window and are read per element through a broadcast. Padding x and slicing the result
    # were two more XLA:CPU kernels, ~40 % of such a rounding (a GRU's dW operands, M = 100).
    window = n % b != 0 and x.size < BITS_MIN_SIZE
    padded, blocked, amax, shift = _floor_block_exponents(x, element, plan, window=window)
    if window:
        blocked = x
    bits = jax.lax.bitcast_convert_type(blocked, jnp.int32)
    mag = bits & np.int32(0x7FFFFFFF)
    finite = amax < np.int32(0x7F800000)
    tiny = shift < -100

    def pow2(e):  # 2**e for integer arrays e in [-126, 127]
        return jax.lax.bitcast_convert_type((e + 127) << 23, jnp.float32)

    # Per-block factors as one array behind a barrier: XLA:CPU reads them per block in the
    # elementwise pass (otherwise it recomputed them per element, unvectorised, at 2-4x the cost).
    factors = jnp.concatenate([
        pow2(-jnp.minimum(shift, 126)),  # 2**-s (s <= 126 as emax >= 1)
        jnp.where(tiny, pow2(-149 - jnp.clip(shift, -127, -23)), 0),  # subnormal inputs
        jnp.where(finite, pow2(jnp.clip(shift, -126, 127)), np.float32(np.nan)),  # 2**s
        jnp.where(tiny, pow2(jnp.clip(shift, -127, -100) + 149), 0),  # tiny outputs
    ], axis=axis + 1)
    factors = jax.lax.optimization_barrier(factors)
    down, down_sub, up, up_tiny = jnp.split(factors, 4, axis=axis + 1)
    if window:  # per element: each block's values repeated b times along the axis, cut to n
        down, down_sub, up, up_tiny = (_per_element(f, axis, b, n) for f in (down, down_sub, up, up_tiny))

    sign = bits & np.int32(-0x80000000)
    from_sub = jax.lax.bitcast_convert_type(mag.astype(jnp.float32) * down_sub, jnp.int32) | sign
    y = jnp.where(mag < np.int32(1 << 23), jax.lax.bitcast_convert_type(from_sub, jnp.float32), blocked * down)
    q = fast_round32(y, element, rnd, saturate)
    if q is None:
        return None
    w = jnp.abs(q) * up_tiny
    w_bits = jax.lax.bitcast_convert_type(w, jnp.int32)
    small = jnp.where(w < np.float32(2.0**23), w.astype(jnp.int32), w_bits - np.int32(149 << 23))
    small = jax.lax.bitcast_convert_type(small | (jax.lax.bitcast_convert_type(q, jnp.int32) & np.int32(-0x80000000)),
                                         jnp.float32)
    tiny_out = up_tiny > 0
    if not saturate:  # an overflow's inf/NaN is no tiny number: its bits are not w's (gave 7e-07)
        tiny_out = tiny_out & (jnp.abs(q) < np.float32(np.inf))
    values = jnp.where(tiny_out, small, q * up)
    if plan.rule != "floor":  # a scale rounded up from an amax near 2**128: q * up can pass float32's max
        values = saturate_to_float32(values, saturate)
    if not window:
        values = jax.lax.slice_in_dim(values.reshape(padded.shape), 0, n, axis=axis)
    return values, _block_scale_exponents(finite, shift, axis)


def _per_element(block_values, axis: int, b: int, n: int) -> jax.Array:
    """(..., blocks, 1, ...) per-block values as (..., n, ...): each repeated along the axis for
    its block's ``b`` elements (a broadcast XLA fuses into the consumer as index arithmetic)."""
    shape = list(block_values.shape)
    blocks = shape[axis]
    shape[axis + 1] = b
    spread = jnp.broadcast_to(block_values, shape).reshape(*shape[:axis], blocks * b, *shape[axis + 2:])
    return jax.lax.slice_in_dim(spread, 0, n, axis=axis)


def _block_scale_exponents(finite, shift, axis: int) -> jax.Array:
    """The flat per-block scale exponents ``_floor_block_exponents``' keepdims ``shift`` gives
    (int32.min where a block holds NaN/inf), blocks ordered with ``axis`` last."""
    scale_exp = jnp.squeeze(jnp.where(finite, shift, jnp.iinfo(jnp.int32).min), axis + 1)
    return jnp.moveaxis(scale_exp, axis, -1).reshape(-1)


def _floor_block_exponents(x, element, plan: Scaling, *, window: bool = False):
    """(padded x, its (..., blocks, block, ...) view, int32 amax bits and OCP MX ``floor`` scale
    exponent per block, keepdims) for blocks along ``plan.axis``; a block axis no longer than the
    block size is one block, unpadded. ``window``: x is not padded (None, None for the first
    two); the amax is a ``reduce_window`` over x, which pads the short last block with zeros.

    The amax is an integer max of the magnitude bits, which XLA:CPU fuses with the pad and the
    bit masking into one kernel that reads x once. (Blocks along the last axis of large tensors
    were reduced as floats from the bits with their low 8 bits cleared, which XLA:CPU hands to
    a library kernel that does not fuse its producer: the masked tensor was written out and read
    back, one more pass over x. The integer max, in one process on 4096 x 4096 fp32, 32-element
    blocks, median of 9: 87-102 against 202-229 ms for the float one; see benchmarks/RESULTS.md,
    issue 37.)"""
    axis = plan.axis % x.ndim
    n, b = x.shape[axis], min(plan.block_size, x.shape[axis])
    pad = [(0, (-n) % b if i == axis else 0) for i in range(x.ndim)]
    if window:
        mag = jax.lax.bitcast_convert_type(x, jnp.int32) & np.int32(0x7FFFFFFF)
        size = [b if i == axis else 1 for i in range(x.ndim)]
        amax = jnp.expand_dims(jax.lax.reduce_window(mag, np.int32(0), jax.lax.max, size, size, pad), axis + 1)
        return None, None, amax, _floor_shift(amax, element, plan)
    padded = jnp.pad(x, pad) if pad[axis][1] else x
    blocked = padded.reshape(*padded.shape[:axis], -1, b, *padded.shape[axis + 1:])
    mag = jax.lax.bitcast_convert_type(blocked, jnp.int32) & np.int32(0x7FFFFFFF)
    amax = jnp.max(mag, axis=axis + 1, keepdims=True)
    return padded, blocked, amax, _floor_shift(amax, element, plan)


def _floor_shift(amax, element, plan: Scaling) -> jax.Array:
    """Block scale exponents from int32 amax bits by the plan's ``floor`` (OCP MX) or ``up`` rule
    (as :func:`pow2_scale_exponent`: one more where the amax's normalised mantissa exceeds the
    element max's), clamped to the scale format's range (an all-zero block: its lowest).
    (This and the bits path are ``lax`` ops: a step traces them at every MX site, and a
    ``jax.numpy`` op costs a few times a ``lax`` one to trace.)"""
    lead = lax.sub(_I(31), lax.clz(amax))
    normal = lax.ge(amax, _I(1 << 23))
    log2 = lax.select(normal, lax.sub(lax.shift_right_arithmetic(amax, _I(23)), _I(127)), lax.sub(lead, _I(149)))
    e = lax.sub(log2, _I(emax_of(element)))
    if plan.rule == "up":
        up = lax.shift_left(amax, lax.clamp(_I(0), lax.sub(_I(23), lead), _I(31)))
        man = lax.bitwise_and(lax.select(normal, amax, up), _I(0x7FFFFF))
        emax = emax_of(element)
        elem_man = int(np.array(math.ldexp(element.max, -emax), np.float32).view(np.int32)) & 0x7FFFFF
        e = lax.add(e, lax.convert_element_type(lax.gt(man, _I(elem_man)), jnp.int32))
    lo, hi = plan.exponent_range
    return lax.clamp(_I(lo), lax.select(lax.eq(amax, _I(0)), lax.full_like(e, lo), e), _I(hi))


def floor_blocks_bits(x, element, plan: Scaling, rnd: Rounding, saturate: bool, words=None):
    """OCP MX ``floor`` block scaling with saturating float elements, RNE or stochastic rounding,
    in one elementwise pass of integer ops on the bits, with no scaling and no branch: the same
    bits (None where it does not apply).

    No value is scaled. With ``s`` the block's scale exponent, element ``|x|`` rounds to a multiple
    of its quantum ``2**(max(E, s + emin) - m)`` (``E`` its binade, ``m`` the element's mantissa
    bits), i.e. ``d = max(lead - m, s + qmin + 150 - max(e, 1))`` bits above its own ulp (``e``
    its exponent field; ``lead`` 23, or for a float32 subnormal the position of its leading bit,
    read from the exponent of its significand converted to float exactly). ``1 <= d <= 23``:
    round the magnitude bits to a multiple of ``2**d`` by RNE, ties to the even multiple, whose
    parity is bit ``d`` of the significand with its implicit bit (a carry into the exponent field
    is the next binade's value, for subnormals too: the encoding is linear there); ``d <= 0``: exact
    already; ``d == 24``: one quantum where the value is above half of it (a normal that is not a
    power of two), else 0; ``d > 24``: 0. The result is capped at ``max * 2**s`` (its bits, built
    per block, normal or subnormal) and the sign goes back on. Integer ops only, so XLA:CPU's
    flushing of float32 subnormals never enters, for every block exponent the plan allows where
    the smallest quantum ``2**(lo + qmin)`` is at least float32's ``2**-149``.

    Stochastic rounding (full 32-bit words, blocks along a last axis the block size divides, so
    the words are those the general path draws for each element, any tensor size) is the
    kernel's rule on the same ``d``: for ``1 <= d <= 23`` add the low ``d`` bits of the
    element's word and clear them; for ``d >= 24`` one quantum iff the word is below the
    significand shifted to ``|x| / quantum * 2**32``.

    The tensor is read in its own shape, each block's values spread over its elements
    (:func:`_per_element`), and no ``lax.cond`` guards the pass: both let XLA write the result in
    place of a donated input, which makes this path faster than the magic-number float pass it
    replaced, which needed a cond to the float path for blocks outside float32's normal
    range (1.15x with XLA:CPU's default vectors, 1.5-1.8x with 512-bit ones; benchmarks/RESULTS.md,
    issue 37 item 5)."""
    stochastic = rnd.mode is RoundMode.SR and rnd.bits is None and words is not None and fast_layout(x.shape, plan)
    if not (element.kind == "float" and saturate
            and (stochastic or (rnd.mode is RoundMode.RNE and x.size >= BITS_MIN_SIZE))
            and element.signed and element.has_zero and element.subnormals and element.nan != "negzero"
            and element.exp_bits <= 8 and 1 <= element.man_bits <= 22
            and emax_of(element) >= 1 and element_qmin(element) >= -24
            and plan.exponent_range[0] + element_qmin(element) >= -149):
        return None
    padded, params, scale_exp = _bits_plan(x, element, plan)
    rand = _random.hash_bits(words, x.shape) if stochastic else None
    return _bits_round(padded, params, rand, element=element, plan=plan, n=x.shape[plan.axis % x.ndim]), scale_exp


def _bits_plan(x, element, plan: Scaling):
    """(padded x, per-block ``(s + qmin + 150, cap bits)`` along a new axis after the blocks (cap
    -1 where a block holds NaN/inf), scale exponents) for ``floor_blocks_bits``."""
    axis = plan.axis % x.ndim
    padded, _, amax, shift = _floor_block_exponents(x, element, plan)
    emax, qmin = emax_of(element), element_qmin(element)
    finite = lax.lt(amax, _I(0x7F800000))
    s = lax.select(lax.bitwise_and(finite, lax.gt(amax, _I(0))), shift, lax.full_like(shift, 0))
    max_man = int(np.array(element.max, np.float32).view(np.int32)) & 0x7FFFFF
    top = lax.add(s, _I(emax))  # the exponent of max * 2**s; subnormal below -126, exact (quantum >= 2**-149)
    # past float32's range (a scale the ``up`` rule rounded up from an amax near 2**128): its max
    normal = lax.select(lax.gt(top, _I(127)), lax.full_like(top, 0x7F7FFFFF),
                        lax.bitwise_or(lax.shift_left(lax.add(top, _I(127)), _I(23)), _I(max_man)))
    subnormal = lax.shift_right_arithmetic(lax.full_like(top, (1 << 23) | max_man),
                                           lax.clamp(_I(0), lax.sub(_I(-126), top), _I(31)))
    cap = lax.select(lax.ge(top, _I(-126)), normal, subnormal)
    params = jnp.concatenate([lax.add(s, _I(qmin + 150)), lax.select(finite, cap, lax.full_like(cap, -1))],
                             axis=axis + 1)
    # in memory: fused, XLA:CPU computes the per-block values again for every element
    return padded, lax.optimization_barrier(params), _block_scale_exponents(finite, shift, axis)


def _bits_round(padded, params, rand, *, element, plan: Scaling, n: int):
    """The elementwise pass of ``floor_blocks_bits``, on the tensor in its own shape (``rand``:
    each element's uint32 word for stochastic rounding, or None for RNE)."""
    axis = plan.axis % padded.ndim
    b = min(plan.block_size, padded.shape[axis])
    k, cap = (_per_element(p, axis, b, padded.shape[axis]) for p in jnp.split(params, 2, axis=axis + 1))
    bits = lax.bitcast_convert_type(padded, jnp.int32)
    a = lax.bitwise_and(bits, _I(0x7FFFFFFF))
    e = lax.shift_right_arithmetic(a, _I(23))
    # a subnormal's leading bit: its significand (< 2**23) converted to float exactly, a normal float
    sub_lead = lax.sub(lax.shift_right_arithmetic(
        lax.bitcast_convert_type(lax.convert_element_type(a, jnp.float32), jnp.int32), _I(23)), _I(127))
    lead = lax.select(lax.gt(e, _I(0)), lax.full_like(e, 23), sub_lead)
    d = lax.max(lax.sub(lead, _I(element.man_bits)), lax.sub(k, lax.max(e, _I(1))))
    if rand is not None:
        r = _sr_magnitude(a, e, d, k, rand)
    else:
        r = _rne_magnitude(a, e, d)
    out = lax.bitcast_convert_type(lax.bitwise_or(lax.min(r, cap), lax.bitwise_and(bits, _I(-0x80000000))), jnp.float32)
    out = lax.select(lax.lt(cap, _I(0)), lax.full_like(out, np.nan), out)
    return lax.slice_in_dim(out, 0, n, axis=axis)


def _significand(a, e):
    """The 24-bit significand of magnitude bits ``a`` (exponent field ``e``): the implicit bit on."""
    implicit = lax.shift_left(lax.convert_element_type(lax.gt(e, _I(0)), jnp.int32), _I(23))
    return lax.bitwise_or(lax.bitwise_and(a, _I(0x7FFFFF)), implicit)


def _rne_magnitude(a, e, d):
    """Magnitude bits ``a`` (exponent field ``e``) rounded to nearest even at ``d`` bits."""
    dc = lax.clamp(_I(1), d, _I(23))
    # RNE: ties to the even multiple of the quantum, whose parity is bit d of the significand
    # with its implicit bit (at d = 23 the implicit bit, not the exponent field's lowest)
    odd = lax.bitwise_and(lax.shift_right_arithmetic(_significand(a, e), dc), _I(1))
    half = lax.sub(lax.shift_left(lax.full_like(dc, 1), lax.sub(dc, _I(1))), _I(1))
    low = lax.sub(lax.shift_left(lax.full_like(dc, 1), dc), _I(1))
    r = lax.bitwise_and(lax.add(lax.add(a, half), odd), lax.bitwise_not(low))
    above_half = lax.bitwise_and(lax.bitwise_and(lax.eq(d, _I(24)), lax.gt(e, _I(0))),
                                 lax.ne(lax.bitwise_and(a, _I(0x7FFFFF)), _I(0)))
    one_quantum = lax.select(above_half, lax.shift_left(lax.add(e, _I(1)), _I(23)), lax.full_like(e, 0))
    return lax.select(lax.le(d, _I(0)), a, lax.select(lax.ge(d, _I(24)), one_quantum, r))


def _sr_magnitude(a, e, d, k, rand):
    """Magnitude bits ``a`` stochastically rounded at ``d`` bits by the uint32 words ``rand``
    (``round_magnitude``'s rule; ``k - 23`` is the exponent field of one quantum when d >= 24)."""
    u32 = np.uint32
    mask = lax.sub(lax.shift_left(lax.full_like(d, 1), lax.clamp(_I(0), d, _I(23))), _I(1))
    r = lax.bitwise_and(lax.add(a, lax.bitwise_and(lax.bitcast_convert_type(rand, jnp.int32), mask)),
                        lax.bitwise_not(mask))
    sig = lax.bitcast_convert_type(_significand(a, e), jnp.uint32)
    du = lax.bitcast_convert_type(d, jnp.uint32)
    # one of the two shifts is >= 32: 0
    threshold = lax.bitwise_or(lax.shift_left(sig, lax.sub(u32(32), du)), lax.shift_right_logical(sig, lax.sub(du, u32(32))))
    one_quantum = lax.select(lax.lt(rand, threshold), lax.shift_left(lax.sub(k, _I(23)), _I(23)), lax.full_like(k, 0))
    return lax.select(lax.ge(d, _I(24)), one_quantum, r)
