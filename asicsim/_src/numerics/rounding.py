"""Rounding modes and the integer kernel that rounds IEEE bit patterns onto a format's grid.

The kernel works on the *magnitude bits* of a binary float carrier (float32 as uint32, or
float64 as uint64) and never does float arithmetic, so nothing is flushed by XLA's
denormals-are-zero CPU mode and no value is rounded twice. It is written once against an array
namespace (``numpy`` or ``jax.numpy``): numpy runs it for float64 inputs on the host, JAX runs
it (fused, under ``jit``) for float32.

The idea: the magnitude bits of a float are monotone in its value, and inside one binade the
target grid is "clear the low ``d`` bits". Adding an increment below the kept bits and masking
rounds, and a carry out of the mantissa correctly bumps the exponent. Only where the target
quantum is larger than the input's binade (``d`` > mantissa width) is the answer 0 or one quantum,
decided separately.
"""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import jax


class RoundMode(enum.Enum):
    RNE = "rne"  #: round to nearest, ties to even (the default everywhere)
    RNA = "rna"  #: round to nearest, ties away from zero
    RTZ = "rtz"  #: round toward zero (truncate)
    RUP = "rup"  #: round toward +inf
    RDN = "rdn"  #: round toward -inf
    SR = "sr"  #: stochastic: up with probability (distance to the lower neighbour) / spacing


class Rounding(NamedTuple):
    """A parsed rounding mode; ``bits`` is the number of random bits for ``sr{N}`` (None = exact)."""

    mode: RoundMode
    bits: int | None = None

    @property
    def stochastic(self) -> bool:
        return self.mode is RoundMode.SR

    def __str__(self) -> str:
        return f"sr{self.bits}" if self.bits is not None else self.mode.value


_SR_RE = re.compile(r"^sr(\d+)$")
ALLOWED = "rne, rna, rtz, rup, rdn, sr, sr{N} (1 <= N <= 32)"


def parse_rounding(rounding: str | RoundMode | Rounding) -> Rounding:
    """Accept ``"rne"``, ``RoundMode.RNE``, ``"sr8"``, ... and return a :class:`Rounding`."""
    if isinstance(rounding, Rounding):
        return rounding
    if isinstance(rounding, RoundMode):
        return Rounding(rounding)
    if isinstance(rounding, str):
        key = rounding.strip().lower()
        try:
            return Rounding(RoundMode(key))
        except ValueError:
            pass
        if m := _SR_RE.match(key):
            n = int(m[1])
            if 1 <= n <= 32:
                return Rounding(RoundMode.SR, n)
            raise ValueError(f"rounding {rounding!r}: sr{{N}} needs 1 <= N <= 32, got N={n}")
    raise ValueError(f"unknown rounding {rounding!r}; allowed: {ALLOWED}")


class Carrier(NamedTuple):
    """Layout of the binary float that holds the values (float32 or float64)."""

    width: int  # total bits
    man: int  # mantissa bits
    bias: int

    @property
    def sign(self) -> int:
        return 1 << (self.width - 1)

    @property
    def inf(self) -> int:
        return ((1 << (self.width - 1 - self.man)) - 1) << self.man

    @property
    def nan(self) -> int:
        return self.inf | (1 << (self.man - 1))

    def pow2_bits(self, exp: int) -> int:
        """Bits of 2**exp (normal or subnormal) in this carrier."""
        if exp >= 1 - self.bias:
            return (exp + self.bias) << self.man
        return 1 << (exp + self.bias - 1 + self.man)


F32 = Carrier(32, 23, 127)
F64 = Carrier(64, 52, 1023)


class Grid(NamedTuple):
    """What the kernel needs to know about the target, in carrier terms.

    ``man`` is the target's mantissa width (None for fixed point: one quantum everywhere);
    ``qmin`` the exponent of the smallest quantum; ``max_pos``/``max_neg`` the carrier bits of the
    largest magnitude allowed for each sign. ``qmin``/``max_*`` may be integer arrays (a per-element
    power-of-two scale shifts the grid); everything else is static. ``code_bias`` (formats with no
    mantissa bits only) is the exponent bias of the codes, minus any shift: there a value's code
    parity, which ties-to-even needs, is the parity of its exponent field, ``quantum + code_bias``.
    """

    man: int | None
    qmin: object
    max_pos: object
    max_neg: object
    code_bias: object = None


# --- float32 <-> float64 by bits: XLA:CPU's converts flush float32 subnormals ---------------------


def f32_to_f64(x: jax.Array) -> jax.Array:
    """float64 of float32 values (subnormals included): XLA's conversion for the others, and a
    subnormal (which XLA:CPU's conversion flushes) from its count of 2**-149, exact in float64.
    (``lax`` ops: this runs at every fp32-exact product, and a ``jax.numpy`` op costs a few times
    a ``lax`` one to trace.)"""
    import jax.numpy as jnp  # here, not at the top: the format catalog and RoundMode need no JAX (asicsim --help)
    from jax import lax

    u = lax.bitcast_convert_type(x, jnp.uint32)
    mag = lax.bitwise_and(u, np.uint32(0x7FFFFFFF))
    # the sign by integer ops: LLVM may turn an integer test of a float's bits into a float
    # compare, which XLA:CPU's flushing reads as zero for a subnormal
    sign = lax.shift_left(lax.convert_element_type(lax.shift_right_logical(u, np.uint32(31)), jnp.uint64),
                          np.uint64(63))
    sub = lax.bitwise_or(lax.bitcast_convert_type(lax.mul(lax.convert_element_type(mag, jnp.float64),
                                                          np.float64(2.0**-149)), jnp.uint64), sign)
    return lax.select(lax.lt(mag, np.uint32(0x00800000)), lax.bitcast_convert_type(sub, jnp.float64),
                      lax.convert_element_type(x, jnp.float64))


def f64_to_f32(x: jax.Array) -> jax.Array:
    """float32 nearest (ties to even) to float64 ``x``, subnormal results included; NaN is the
    quiet NaN of ``x``'s sign. XLA's conversion rounds the normal range and past it; a subnormal
    result, which XLA:CPU's conversion flushes, is its count of 2**-149 rounded to nearest even
    by float64's own addition of 2**52 (the count is then the low bits). (``lax`` ops, as
    :func:`f32_to_f64`.)"""
    import jax.numpy as jnp
    from jax import lax

    mag = lax.abs(x)
    units = lax.convert_element_type(lax.bitcast_convert_type(
        lax.add(lax.mul(mag, np.float64(2.0**149)), np.float64(2.0**52)), jnp.uint64), jnp.uint32)
    bits = lax.select(lax.lt(mag, np.float64(2.0**-126)), units,
                      lax.bitcast_convert_type(lax.convert_element_type(mag, jnp.float32), jnp.uint32))
    bits = lax.select(lax.ne(mag, mag), lax.full_like(bits, 0x7FC00000), bits)
    high = lax.convert_element_type(lax.shift_right_logical(lax.bitcast_convert_type(x, jnp.uint64), np.uint64(32)),
                                    jnp.uint32)
    return lax.bitcast_convert_type(lax.bitwise_or(bits, lax.bitwise_and(high, np.uint32(0x80000000))), jnp.float32)


def f64_bits_to_f32_odd(xp, b):
    """uint32 float32 bits of float64 bits ``b`` rounded to odd: cut to float32's grid (24
    significant bits, or the subnormal quantum 2**-149) with the last bit set where anything
    nonzero was cut. Rounding that once more onto a grid at least two bits coarser is the one
    correct rounding of the float64 value, in every mode (Boldo & Melquiond, round-to-odd): how
    float64 input enters the float32 scaled kernels. At or beyond 2**128: +-inf; NaN stays NaN.
    Integer ops only, on ``xp`` (numpy on the host, jax.numpy under x64)."""
    u = np.uint64
    a = b & u((1 << 63) - 1)
    e = (a >> u(52)).astype(xp.int64)
    frac = a & u((1 << 52) - 1)
    sig = xp.where(e > 0, frac | u(1 << 52), frac)
    e1 = xp.maximum(e, 1)
    drop = xp.clip(xp.maximum(29, 926 - e1), 0, 63).astype(u)  # 29: normal; more below 2**-126
    kept = sig >> drop
    sticky = (sig & ((u(1) << drop) - u(1))) != u(0)
    bits = xp.where(e >= 897, ((e - 897).astype(u) << u(23)) + kept, kept) | sticky.astype(u)
    bits = xp.where(e >= 1151, u(0x7F800000), bits)
    bits = xp.where(e == 2047, xp.where(frac != u(0), u(0x7FC00000), u(0x7F800000)), bits)
    return (bits | ((b >> u(63)) << u(31))).astype(xp.uint32)


def bit_length(xp, v, c: Carrier):
    """Number of significant bits of unsigned ``v`` (exact below 2**53 on the numpy path)."""
    if xp is np:
        return np.frexp(v.astype(np.float64))[1].astype(np.int32 if c.width == 32 else np.int64)
    import jax

    return (c.width - jax.lax.clz(v)).astype(xp.int32 if c.width == 32 else xp.int64)


def round_magnitude(xp, c: Carrier, a, negative, grid: Grid, rnd: Rounding, rand=None):
    """Round finite magnitude bits ``a`` onto ``grid``. Returns (bits, overflowed).

    ``negative`` (bool array) picks the direction for ``rup``/``rdn`` and the overflow bound.
    ``rand`` (unsigned, carrier width) is required for stochastic rounding.
    """
    u = a.dtype.type
    i = xp.int32 if c.width == 32 else xp.int64
    exp = (a >> u(c.man)).astype(i)
    exp1 = xp.maximum(exp, 1)
    # Exponent of the target quantum at this magnitude, and how many carrier bits fall below it.
    # A carrier subnormal's binade comes from its leading one: the target may hold it as a normal.
    if grid.man is None:
        quantum = grid.qmin
    elif isinstance(grid.qmin, int) and grid.qmin >= -c.bias - grid.man:
        # Every carrier subnormal lies below the target's smallest normal, so the field 0 stands
        # in for its binade (and the leading-one count, which AVX2 cannot vectorise, is skipped).
        quantum = xp.maximum(exp - (c.bias + grid.man), grid.qmin)
    else:
        binade = xp.where(exp > 0, exp, bit_length(xp, a, c) - c.man)
        quantum = xp.maximum(binade - (c.bias + grid.man), grid.qmin)
    d_raw = quantum + (c.bias + c.man) - exp1
    small = d_raw > c.man  # value is below half... one quantum: result is 0 or one quantum
    d = xp.clip(d_raw, 0, c.man).astype(a.dtype)
    mask = (u(1) << d) - u(1)

    # Significand with the hidden bit: bit d of it is the parity of the lower neighbour's code
    # (d == c.man: the lower neighbour is one quantum, an odd code, or 0 for a carrier
    # subnormal), except for formats with no mantissa bits, whose codes count exponents.
    sig = xp.where(exp > 0, (a & u((1 << c.man) - 1)) | u(1 << c.man), a)

    mode = rnd.mode
    if mode in (RoundMode.RUP, RoundMode.RDN):
        away = ~negative if mode is RoundMode.RUP else negative
    if mode is RoundMode.RNE:
        odd = xp.where(d > u(0), (sig >> d) & u(1), u(0))  # d == 0: nothing to round
        if grid.man == 0:  # a lower neighbour 2**quantum (not 0) is odd when its exponent field is
            odd = odd & ((quantum + grid.code_bias) & 1).astype(a.dtype)
        inc = (mask >> u(1)) + odd
    elif mode is RoundMode.RNA:
        inc = (mask + u(1)) >> u(1)
    elif mode is RoundMode.RTZ:
        inc = None
    elif mode is RoundMode.SR:
        n = c.width if rnd.bits is None else rnd.bits
        if n >= c.man:
            inc = rand & mask
        else:
            inc = xp.where(d > u(n), (rand >> u(c.width - n)) << (d - u(n)), rand & mask)
    else:
        inc = xp.where(away, mask, u(0))
    r = a if inc is None else a + inc
    r = r & ~mask

    # Below one quantum: 0 or exactly one quantum (2**quantum, always a normal carrier value).
    if mode is RoundMode.RNE:
        up = (d_raw == c.man + 1) & (exp > 0) & (sig != u(1 << c.man))
    elif mode is RoundMode.RNA:
        up = (d_raw == c.man + 1) & (exp > 0)
    elif mode is RoundMode.RTZ:
        up = None
    elif mode is RoundMode.SR:
        n = c.width if rnd.bits is None else rnd.bits
        dd = d_raw.astype(a.dtype)
        hi = sig >> xp.minimum(xp.maximum(d_raw - n, 0), c.width - 1).astype(a.dtype)
        lo = sig << xp.minimum(xp.maximum(n - d_raw, 0), c.width - 1).astype(a.dtype)
        threshold = xp.where(dd >= u(n), hi, lo)
        up = (rand >> u(c.width - n)) < threshold
    else:
        up = away & (a != u(0))
    if up is not None:
        q_bits = (xp.clip(quantum + c.bias, 1, 2 * c.bias).astype(a.dtype)) << u(c.man)
        r = xp.where(small, xp.where(up, q_bits, u(0)), r)
    else:
        r = xp.where(small, u(0), r)

    max_pos, max_neg = (u(m) if isinstance(m, int) else m for m in (grid.max_pos, grid.max_neg))
    same = isinstance(grid.max_pos, int) and grid.max_pos == grid.max_neg
    return r, r > (max_pos if same else xp.where(negative, max_neg, max_pos))
