"""The rounding kernels every path shares: integer bit patterns of a carrier (float32's uint32,
float64's uint64) rounded onto a format's grid (:func:`round_to_grid`), exact multiplication by a power of two
(:func:`mul_pow2`) and the carrier bits of a format's codes (:func:`decode_float_bits`).

No float arithmetic anywhere (XLA on CPU flushes subnormals; on GPU it does not round float32
division correctly), and nothing here knows about scaling: :mod:`asicsim._src.numerics.scaling` and
:mod:`asicsim.numerics.quantize` both build on these kernels, so they stand below both.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .formats import FloatFormat, IntFormat
from .rounding import (
    F32,
    Carrier,
    Grid,
    Rounding,
    RoundMode,
    bit_length,
    round_magnitude,
)


def float_bits(value: float, c: Carrier) -> int:
    """Carrier bit pattern of a float value that the carrier holds exactly."""
    if c.width == 32:
        return int(np.array(value, np.float32).view(np.uint32))
    return int(np.array(value, np.float64).view(np.uint64))


def grid_of(spec: FloatFormat | IntFormat, c: Carrier, shift=None) -> Grid:
    """The kernel's view of a format, optionally shifted by a per-element power of two."""
    code_bias = None
    if spec.kind == "float":
        man, qmin = spec.man_bits, spec.smallest_subnormal_exp
        max_pos = max_neg = float_bits(spec.max, c)
        if man == 0:
            code_bias = spec.bias
    else:
        man, qmin = None, -spec.frac_bits
        max_pos = float_bits(spec.max, c)
        max_neg = float_bits(-spec.min, c) if spec.signed else 0
    if shift is None:
        return Grid(man, qmin, max_pos, max_neg, code_bias)
    return Grid(
        man,
        qmin + shift,
        shift_bits(max_pos, shift, c),
        shift_bits(max_neg, shift, c),
        None if code_bias is None else code_bias - shift,
    )


def shift_bits(bits: int, shift, c: Carrier):
    """Bits of (value of ``bits``) * 2**shift, for a normal value; clamped to the finite range."""
    if bits == 0:
        return jnp.zeros_like(shift, dtype=jnp.uint32)
    exp = (bits >> c.man) + shift
    man = bits & ((1 << c.man) - 1)
    normal = (jnp.clip(exp, 1, 2 * c.bias).astype(jnp.uint32) << c.man) | np.uint32(man)
    sig = np.uint32(man | (1 << c.man))
    sub = sig >> jnp.clip(1 - exp, 0, 31).astype(jnp.uint32)
    top = np.uint32(c.inf - 1)
    return jnp.where(exp >= 1, jnp.where(exp > 2 * c.bias, top, normal), sub)


def round_to_grid(xp, c: Carrier, bits, spec, rnd: Rounding, saturate: bool, rand=None, shift=None):
    """Round carrier bits onto ``spec``'s grid and apply its NaN/inf/overflow/zero conventions."""
    u = bits.dtype.type
    sign_bit = u(c.sign)
    a = bits & ~sign_bit
    negative = (bits & sign_bit) != u(0)
    grid = grid_of(spec, c, shift)
    r, over = round_magnitude(xp, c, a, negative, grid, rnd, rand)
    inf, nan = u(c.inf), u(c.nan)
    limit = xp.where(negative, _as_uint(grid.max_neg, u), _as_uint(grid.max_pos, u))

    if spec.kind == "int":
        if saturate:
            r = xp.where(over, limit, r)
            neg_out = negative
        else:
            r = wrap_bits(xp, c, r, negative, spec, shift)
            neg_out = (r & sign_bit) != u(0)  # the wrapped value's own sign
            r = r & ~sign_bit
        # +-inf saturates in either mode, keeping the input's sign (not the sign of whatever the
        # infinity's bits wrapped to: -inf gave +128 in int8)
        r = xp.where(a == inf, limit, r)
        neg_out = xp.where(a == inf, negative, neg_out)
        out = xp.where(neg_out & (r != u(0)), r | sign_bit, r)  # integers have no -0
        return xp.where(a > inf, nan_with_sign(spec, nan, bits & sign_bit), out)

    carrier_over = None
    if shift is not None and not saturate:
        # rounded up to 2**128 under a scale whose max * 2**s float32 cannot hold (``limit`` was
        # clamped to float32's max): the element is within its max, the product overflows, +-inf
        carrier_over = (r == inf) & (limit == u(c.inf - 1)) & (a < inf)
        if not spec.signed:  # a negative input to an unsigned format keeps its rule below
            carrier_over = carrier_over & ~negative
    mode = rnd.mode
    if saturate or not (spec.has_inf or spec.has_nan):
        over_val = limit
        inf_val = limit
    else:
        beyond = inf if spec.has_inf else nan
        if mode is RoundMode.RTZ:
            over_val = limit
        elif mode in (RoundMode.RUP, RoundMode.RDN):
            toward_zero = negative if mode is RoundMode.RUP else ~negative
            over_val = xp.where(toward_zero, limit, beyond)
        else:
            over_val = beyond
        inf_val = beyond
    r = xp.where(over, over_val, r)
    r = xp.where(a == inf, inf_val, r)
    lowest = u(float_bits(abs(spec.min), c)) if not spec.signed else u(0)  # an unsigned min
    if not spec.has_zero:  # e8m0: no zero code; tiny values clamp to the smallest, zero is NaN
        r = xp.where(r == u(0), u(float_bits(spec.smallest_normal, c)), r)  # (or the smallest,
        r = xp.where(a == u(0), nan if spec.has_nan else r, r)  # where there is no NaN either)
    if spec.signed and spec.nan != "negzero":
        out = r | (bits & sign_bit)
    else:  # no negative zero; an unsigned format has no negative numbers at all
        out = r
        if not spec.signed:
            out = xp.where(negative & (a != u(0)), nan if spec.has_nan else lowest, out)
        else:
            out = xp.where(negative & (r != u(0)), r | sign_bit, r)
    out = xp.where((r == nan) | (a > inf), nan_with_sign(spec, nan, bits & sign_bit), out)
    if carrier_over is not None:
        out = xp.where(carrier_over, inf | (bits & sign_bit), out)
    return out


def nan_with_sign(spec, nan, sign):
    """The NaN ``quantize`` returns, with the sign ml_dtypes gives it (``x.astype(fmt)
    .astype(float32)``): negative for fnuz formats (their one NaN is the negative-zero code),
    positive for unsigned formats (e8m0's 0xFF), else ``sign`` -- the sign bit of the input, be it
    a NaN or a value that overflows onto an ``fn`` format's NaN (-1000 onto float8_e4m3fn is -NaN,
    code 0xFF). Integers and fp6/fp4 have no NaN code: their NaN marks an input they cannot hold
    (a NaN), signed by the same rule."""
    if spec.kind == "float" and spec.nan == "negzero":
        return nan | nan.dtype.type(1 << (8 * nan.dtype.itemsize - 1))
    if not spec.signed:
        return nan
    return nan | sign


def wrap_bits(xp, c: Carrier, r, negative, spec: IntFormat, shift=None):
    """Two's-complement wrap of rounded magnitude bits ``r`` (value k * 2**(shift - F))."""
    u = r.dtype.type
    i = xp.int32 if c.width == 32 else xp.int64
    exp = (r >> u(c.man)).astype(i)
    sig = xp.where(exp > 0, (r & u((1 << c.man) - 1)) | u(1 << c.man), r)
    step = -spec.frac_bits if shift is None else shift - spec.frac_bits
    sh = xp.maximum(exp, 1) - (c.bias + c.man) - step  # k = sig * 2**sh
    left = sig << xp.clip(sh, 0, c.width - 1).astype(r.dtype)
    k = xp.where(sh >= c.width, u(0), xp.where(sh >= 0, left, sig >> xp.clip(-sh, 0, c.width - 1).astype(r.dtype)))
    modulus = u((1 << spec.bits) - 1)
    k = xp.where(negative, (u(0) - k), k) & modulus
    if spec.signed:
        k = k.astype(i) - xp.where(k >= u(1 << (spec.bits - 1)), i(1 << spec.bits), i(0))
    return int_to_bits(xp, c, k.astype(i), step)


def int_to_bits(xp, c: Carrier, k, step):
    """Carrier bits of ``k * 2**step`` (signed integer ``k``, ``|k| < 2**c.man``), built from
    integers: float ops would flush subnormal results, and XLA's exp2 is not exact. A product
    past the carrier's range is inf (a wrapped code times a scale near 2**128)."""
    i = k.dtype.type
    u = np.uint32 if c.width == 32 else np.uint64
    m = xp.abs(k).astype(u)
    lead = bit_length(xp, m, c) - 1
    e = lead + step
    frac = (m << xp.clip(c.man - lead, 0, c.width - 1).astype(u)) & u((1 << c.man) - 1)
    normal = (xp.clip(e + c.bias, 1, 2 * c.bias).astype(u) << u(c.man)) | frac
    s = step + (c.bias - 1 + c.man)  # subnormal: m * 2**step = (m << s) carrier quanta
    sub = xp.where(
        s >= 0,
        m << xp.clip(s, 0, c.width - 1).astype(u),
        m >> xp.clip(-s, 0, c.width - 1).astype(u),  # exact when the result is representable
    )
    normal = xp.where(e + c.bias > 2 * c.bias, u(c.inf), normal)  # past the carrier's range: inf
    bits = xp.where(m == u(0), u(0), xp.where(e >= 1 - c.bias, normal, sub))
    return xp.where(k < i(0), bits | u(c.sign), bits)


def mul_pow2(x: jax.Array, k) -> jax.Array:
    """float32 ``x * 2**k`` for integer ``k``, from the bits: exact whenever the product is a
    float32 number, subnormals included (XLA:CPU flushes them in a float multiply). inf/NaN and
    zeros (with their sign) pass through."""
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    a = bits & np.uint32(0x7FFFFFFF)
    exp = (a >> np.uint32(23)).astype(jnp.int32)
    sig = jnp.where(exp > 0, (a & np.uint32(0x7FFFFF)) | np.uint32(1 << 23), a).astype(jnp.int32)
    step = jnp.maximum(exp, 1) - 150 + k
    out = int_to_bits(jnp, F32, sig, step) | (bits & np.uint32(F32.sign))
    out = jnp.where((exp == 255) | (a == 0), bits, out)
    return jax.lax.bitcast_convert_type(out, jnp.float32)


def _as_uint(v, u):
    return u(v) if isinstance(v, int) else v


def decode_float_bits(xp, c: Carrier, code, spec: FloatFormat):
    """Carrier bits of the values of integer ``code`` (unsigned array) in ``spec``."""
    u = np.uint32 if c.width == 32 else np.uint64
    i = xp.int32 if c.width == 32 else xp.int64
    code = code.astype(u)
    m_mask = (1 << spec.man_bits) - 1
    e_all = (1 << spec.exp_bits) - 1
    man = code & u(m_mask)
    e_field = ((code >> u(spec.man_bits)) & u(e_all)).astype(i)
    neg = ((code >> u(spec.bits - 1)) & u(1)) if spec.signed else xp.zeros_like(code)
    zero_exp = (e_field == 0) & bool(spec.subnormals or spec.has_zero)
    # Normal: exponent re-biased, mantissa widened.
    exp_c = e_field - spec.bias + c.bias
    normal = (exp_c.astype(u) << u(c.man)) | (man << u(c.man - spec.man_bits))
    # A normal of the format below the carrier's normal range (e8m0's 2**-127): a carrier subnormal.
    full = man | u(1 << spec.man_bits)
    normal_tiny = full << xp.clip(exp_c - 1 + c.man - spec.man_bits, 0, c.width - 1).astype(u)
    normal = xp.where(exp_c >= 1, normal, normal_tiny)
    # Subnormal (field 0): man * 2**(emin - M), normalised with a leading-zero count.
    lead = bit_length(xp, man, c) - 1  # position of the leading one
    e_sub = spec.emin - spec.man_bits + lead
    frac_sub = (man << xp.clip(c.man - lead, 0, c.width - 1).astype(u)) & u((1 << c.man) - 1)
    sub_normal = ((e_sub + c.bias).astype(u) << u(c.man)) | frac_sub
    sub_tiny = man << xp.clip(spec.emin - spec.man_bits + c.bias - 1 + c.man, 0, c.width - 1)
    sub = xp.where(man == u(0), u(0), xp.where(e_sub >= 1 - c.bias, sub_normal, sub_tiny.astype(u)))
    bits = xp.where(zero_exp, sub, normal)
    top = e_field == e_all
    if spec.nan == "ieee":
        bits = xp.where(top, xp.where(man == u(0), u(c.inf), u(c.nan)), bits)
    elif spec.nan == "ones":
        bits = xp.where(top & (man == u(m_mask)), u(c.nan), bits)
    elif spec.nan == "negzero":
        bits = xp.where((neg == u(1)) & (e_field == 0) & (man == u(0)), u(c.nan), bits)
    # Every code keeps its sign bit, NaNs included, as in ml_dtypes (e4m3fn 0xFF is -NaN; the fnuz
    # NaN, the negative-zero code, -NaN; e8m0fnu's 0xFF, unsigned, +NaN). A NaN is the quiet one,
    # as ml_dtypes' float8 types give it; numpy's float16 and ml_dtypes' bfloat16 keep a payload,
    # signalling NaNs too, which would then warn at every numpy cast: not kept here.
    return bits | (neg.astype(u) << u(c.width - 1))
