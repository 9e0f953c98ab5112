"""Correctly rounded float32 division, the same bits on every backend.

XLA:GPU does not round float32 division correctly (issue 20 measured 1.2 M of 4.2 M quotients
off by up to 2 ulp on an H100), and XLA:CPU flushes float32 subnormals (a subnormal operand
reads as zero, a subnormal quotient becomes zero). :func:`divide` therefore never uses a float32
division. Off a CPU it forms IEEE 754's round-to-nearest-even quotient from the operands' bits by
integer long division (:func:`divide_exact`: uint32 shifts, compares and subtractions only, exact
on any device). On a CPU it rounds float64's quotient of the operands, converted exactly
(:func:`divide_float64`; the same bits): the long division is ~27 unrolled steps of several
operations per element, which made the scale computations of an fp8 training step 90 % of its
StableHLO and half its compile time.

It handles every float32 input: zeros, infinities and NaN as IEEE 754 says (0/0 and inf/inf are
NaN, x/0 and inf/x an infinity of the operands' sign product, x/inf a signed zero, NaN in
gives NaN out, always the one quiet NaN 0x7fc00000), subnormal operands (normalised first) and
subnormal or overflowing quotients (rounded once, at their final precision). Its derivative is
the true quotient's, ``(da - q db) / b`` (the integer operations themselves have none; it is
computed as a product with ``1 / b``, so it is not itself correctly rounded).

It used to run XLA:CPU's own division on a CPU (issue 29 item 9): that flushed subnormal
quotients and turned ``inf / x`` into NaN and ``1 / -0`` into +inf.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..._jax_compat import enable_x64
from .rounding import f32_to_f64, f64_to_f32

_U = jnp.uint32
_STEPS = 26  # quotient bits after the leading one: 24 kept, a guard, and one to normalise into


def _unpack(bits):
    """(24-bit significand, unbiased exponent of its 1.f value) of finite nonzero bits; a
    subnormal's significand is shifted up to a leading one at bit 23."""
    mag = lax.bitwise_and(bits, np.uint32(0x7FFFFFFF))
    field = lax.convert_element_type(lax.shift_right_logical(mag, np.uint32(23)), jnp.int32)
    frac = lax.bitwise_and(mag, np.uint32(0x7FFFFF))
    lead = lax.sub(np.int32(31), lax.convert_element_type(lax.clz(lax.max(frac, np.uint32(1))), jnp.int32))
    sub = lax.eq(field, np.int32(0))  # a subnormal's leading bit moves up to bit 23
    shift = lax.select(sub, lax.sub(np.int32(23), lead), lax.full_like(lead, 0))
    sig = lax.select(sub, lax.shift_left(frac, lax.convert_element_type(shift, _U)),
                     lax.bitwise_or(frac, np.uint32(1 << 23)))
    exp = lax.select(sub, lax.sub(np.int32(-126), shift), lax.sub(field, np.int32(127)))
    return sig, exp


def divide_exact(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a / b`` rounded to nearest even, from integer arithmetic on the bits (see the module).
    (``lax`` ops and a loop traced once: ``platform_dependent`` traces this on a CPU too, once
    per operand shape, where a ``jax.numpy`` op costs a few times a ``lax`` one.)"""
    a, b = jnp.broadcast_arrays(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    ab, bb = lax.bitcast_convert_type(a, _U), lax.bitcast_convert_type(b, _U)
    sign = lax.bitwise_and(lax.bitwise_xor(ab, bb), np.uint32(0x80000000))
    sa, ea = _unpack(ab)
    sb, eb = _unpack(bb)

    # long division of sa by sb: q = floor(sa * 2**(STEPS) / sb) with one leading bit to spare
    def step(_, rq):
        r, q = rq
        bit = lax.ge(r, sb)
        r = lax.select(bit, lax.sub(r, sb), r)
        return lax.shift_left(r, np.uint32(1)), lax.bitwise_or(lax.shift_left(q, np.uint32(1)),
                                                               lax.convert_element_type(bit, _U))

    # (unrolled where it is compiled, as a Python loop would be; its body traced once)
    r, q = lax.fori_loop(0, _STEPS + 1, step, (sa, lax.full_like(sa, 0)), unroll=True)
    sticky = lax.ne(r, np.uint32(0))  # a remainder left: the quotient is above q
    # q holds sa/sb * 2**26 in [2**25, 2**27): make its leading bit bit 26
    top = lax.ge(q, np.uint32(1 << _STEPS))
    e = lax.sub(lax.sub(ea, eb), lax.select(top, lax.full_like(ea, 0), lax.full_like(ea, 1)))
    q = lax.select(top, q, lax.shift_left(q, np.uint32(1)))
    # q = 1.f * 2**26: the kept 24 bits are q >> 3, then a guard bit and two more (with the
    # remainder: sticky); a subnormal result is shifted further right first
    extra = lax.clamp(np.int32(0), lax.sub(np.int32(-126), e), np.int32(31))
    extra_u = lax.convert_element_type(extra, _U)
    lost = lax.ne(lax.bitwise_and(q, lax.sub(lax.shift_left(lax.full_like(q, 1), extra_u), np.uint32(1))),
                  np.uint32(0))
    q = lax.select(lax.ge(extra, np.int32(31)), lax.full_like(q, 0), lax.shift_right_logical(q, extra_u))
    sticky = lax.bitwise_or(sticky, lost)
    keep = lax.shift_right_logical(q, np.uint32(3))
    guard = lax.ne(lax.bitwise_and(q, np.uint32(4)), np.uint32(0))
    rest = lax.bitwise_or(lax.ne(lax.bitwise_and(q, np.uint32(3)), np.uint32(0)), sticky)
    odd = lax.ne(lax.bitwise_and(keep, np.uint32(1)), np.uint32(0))
    up = lax.bitwise_and(guard, lax.bitwise_or(rest, odd))
    keep = lax.add(keep, lax.convert_element_type(up, _U))
    # assemble: a normal result's keep is 1.f (bit 23 set, or bit 24 after rounding up: the
    # exponent field absorbs the carry); a subnormal's is its fraction, field 0
    subnormal = lax.gt(extra, np.int32(0))
    field = lax.convert_element_type(lax.add(e, np.int32(127)), _U)
    bits = lax.select(subnormal, keep, lax.add(lax.shift_left(field, np.uint32(23)), lax.sub(keep, np.uint32(1 << 23))))
    overflow = lax.bitwise_and(lax.bitwise_not(subnormal), lax.ge(lax.add(e, np.int32(127)), np.int32(255)))
    bits = lax.select(overflow, lax.full_like(bits, 0x7F800000), bits)
    out = lax.bitcast_convert_type(lax.bitwise_or(bits, sign), jnp.float32)
    # zeros, infinities and NaN: IEEE 754's special cases, which the hardware divides exactly
    mag_a, mag_b = lax.bitwise_and(ab, np.uint32(0x7FFFFFFF)), lax.bitwise_and(bb, np.uint32(0x7FFFFFFF))
    zero_a, zero_b = lax.eq(mag_a, np.uint32(0)), lax.eq(mag_b, np.uint32(0))
    inf_a, inf_b = lax.eq(mag_a, np.uint32(0x7F800000)), lax.eq(mag_b, np.uint32(0x7F800000))
    nan = lax.bitwise_or(lax.bitwise_or(lax.gt(mag_a, np.uint32(0x7F800000)), lax.gt(mag_b, np.uint32(0x7F800000))),
                         lax.bitwise_or(lax.bitwise_and(zero_a, zero_b), lax.bitwise_and(inf_a, inf_b)))
    ok = lax.bitwise_not(nan)
    inf = lax.bitwise_and(lax.bitwise_or(inf_a, zero_b), ok)
    zero = lax.bitwise_and(lax.bitwise_or(zero_a, inf_b), ok)
    spec = lax.select(nan, lax.full_like(out, np.nan),
                      lax.bitcast_convert_type(lax.bitwise_or(sign, lax.select(
                          inf, lax.full_like(sign, 0x7F800000), lax.full_like(sign, 0))), jnp.float32))
    return lax.select(lax.bitwise_or(lax.bitwise_or(nan, inf), zero), spec, out)


def divide_float64(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a / b`` rounded to nearest even, from float64's quotient of the operands (converted by
    ``f32_to_f64``, which builds a subnormal from its bits: nothing flushes), for a CPU (see the
    module). A correctly rounded float64 quotient rounded again to float32 (``f64_to_f32``,
    subnormal results kept) is the correctly rounded float32 quotient (53 >= 2 * 24 + 2: double
    rounding is innocuous for division, Figueroa 1995), on float32's subnormal grid too (a
    coarser one). A float32 quotient is never a float64 subnormal, and float64's division gives
    IEEE 754's zeros, infinities and NaN. No float32 arithmetic touches the operands: under
    XLA:CPU's flushing, LLVM turned even an integer test of their bits for zero into a float
    compare that reads a subnormal as zero (``tests/numerics/test_exact_div.py`` runs every
    oracle test on this path)."""
    # (converted at their own shapes, then broadcast: a per-row scale converted per element kept
    # XLA:CPU from fusing the division into its consumer)
    a, b = jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)
    with enable_x64(True):
        a64, b64 = jnp.broadcast_arrays(f32_to_f64(a), f32_to_f64(b))
        q = a64 / b64
        # NaN: the positive quiet one
        return jnp.where(q != q, np.float32(np.nan), f64_to_f32(q))


def divide(a, b) -> jax.Array:
    """Correctly rounded float32 ``a / b`` on every backend (see the module): the operands are
    taken as float32 and broadcast against each other."""
    return _divide(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))


@jax.custom_jvp
def _divide(a, b):
    return lax.platform_dependent(a, b, cpu=divide_float64, default=divide_exact)


@_divide.defjvp
def _divide_jvp(primals, tangents):
    (a, b), (ta, tb) = primals, tangents
    q = _divide(a, b)
    return q, (ta - q * tb) * _divide(np.float32(1), b)  # linear in the tangents: transposable
