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
    """(sign, unbiased exponent of a 1.f significand, 24-bit significand) of finite nonzero bits;
    a subnormal's significand is shifted up to a leading one at bit 23."""
    mag = bits & np.uint32(0x7FFFFFFF)
    field = (mag >> 23).astype(jnp.int32)
    frac = mag & np.uint32(0x7FFFFF)
    lead = 31 - lax.clz(jnp.maximum(frac, np.uint32(1))).astype(jnp.int32)  # subnormal's leading bit
    shift = jnp.where(field == 0, 23 - lead, 0)
    sig = jnp.where(field == 0, frac << shift.astype(_U), frac | np.uint32(1 << 23))
    exp = jnp.where(field == 0, -126 - shift, field - 127)
    return sig, exp


def divide_exact(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a / b`` rounded to nearest even, from integer arithmetic on the bits (see the module)."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    ab, bb = lax.bitcast_convert_type(a, _U), lax.bitcast_convert_type(b, _U)
    sign = (ab ^ bb) & np.uint32(0x80000000)
    sa, ea = _unpack(ab)
    sb, eb = _unpack(bb)
    # long division of sa by sb: q = floor(sa * 2**(STEPS) / sb) with one leading bit to spare
    r = sa
    q = jnp.zeros_like(sa)
    for _ in range(_STEPS + 1):
        bit = r >= sb
        r = jnp.where(bit, r - sb, r)
        q = (q << 1) | bit.astype(_U)
        r = r << 1
    sticky = r != 0  # a remainder left: the quotient is above q
    # q holds sa/sb * 2**26 in [2**25, 2**27): make its leading bit bit 26
    top = q >= np.uint32(1 << _STEPS)
    e = ea - eb - jnp.where(top, 0, 1)
    q = jnp.where(top, q, q << 1)
    # q = 1.f * 2**26: the kept 24 bits are q >> 3, then a guard bit and two more (with the
    # remainder: sticky); a subnormal result is shifted further right first
    extra = jnp.clip(-126 - e, 0, 31)
    lost = (q & ((np.uint32(1) << extra.astype(_U)) - np.uint32(1))) != 0
    q = jnp.where(extra >= 31, np.uint32(0), q >> extra.astype(_U))
    sticky = sticky | lost
    keep = q >> 3
    guard = (q >> 2) & np.uint32(1)
    rest = ((q & np.uint32(3)) != 0) | sticky
    up = (guard == 1) & (rest | ((keep & np.uint32(1)) == 1))
    keep = keep + up.astype(_U)
    # assemble: a normal result's keep is 1.f (bit 23 set, or bit 24 after rounding up: the
    # exponent field absorbs the carry); a subnormal's is its fraction, field 0
    field = jnp.where(extra > 0, 0, e + 127).astype(_U)
    bits = jnp.where(extra > 0, keep, (field << 23) + (keep - np.uint32(1 << 23)))
    bits = jnp.where((extra == 0) & (e + 127 >= 255), np.uint32(0x7F800000), bits)  # overflow
    out = lax.bitcast_convert_type(bits | sign, jnp.float32)
    # zeros, infinities and NaN: IEEE 754's special cases, which the hardware divides exactly
    zero_a = (ab & np.uint32(0x7FFFFFFF)) == 0
    zero_b = (bb & np.uint32(0x7FFFFFFF)) == 0
    inf_a, inf_b = jnp.isinf(a), jnp.isinf(b)
    nan = jnp.isnan(a) | jnp.isnan(b) | (zero_a & zero_b) | (inf_a & inf_b)
    inf = (inf_a | zero_b) & ~nan
    zero = (zero_a | inf_b) & ~nan
    spec = jnp.where(nan, np.float32(np.nan),
                     lax.bitcast_convert_type(sign | jnp.where(inf, np.uint32(0x7F800000), np.uint32(0)), jnp.float32))
    return jnp.where(nan | inf | zero, spec, out)


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
