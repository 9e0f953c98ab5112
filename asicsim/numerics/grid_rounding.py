"""The rounding kernels every path shares: integer bit patterns of a carrier (float32's uint32,
float64's uint64) rounded onto a format's grid (:func:`round_to_grid`), the fast float32 paths
(:func:`fast_round32`, :func:`fast_sr_fixed32`, :func:`fast_sr_float32`), exact multiplication by a power of two
(:func:`mul_pow2`) and the carrier bits of a format's codes (:func:`decode_float_bits`).

No float arithmetic anywhere (XLA on CPU flushes subnormals; on GPU it does not round float32
division correctly), and nothing here knows about scaling: :mod:`asicsim.numerics.scaling` and
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
    return xp.where((r == nan) | (a > inf), nan_with_sign(spec, nan, bits & sign_bit), out)


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


def fast_round32(x: jax.Array, spec, rnd: Rounding, saturate: bool) -> jax.Array | None:
    """``round_to_grid`` of float32 ``x`` by round-to-nearest-even, in a handful of vectorised
    ops, where that is provably the same (None elsewhere: use the integer kernel).

    The integer kernel runs at about 2.5 ns per element on XLA:CPU (AVX2 vectorises little of
    it); this path at about 0.1-0.3 ns. Floats: ``reduce_precision`` with float32's exponent
    range rounds the mantissa on the bits (subnormals and carries included, nothing flushed);
    below the format's smallest normal, ``round(x * 2**-qmin) * 2**qmin`` is exact (every
    product is a normal float32 when ``qmin >= -125``; an fp32 subnormal input is below half a
    quantum anyway); beyond ``max``, the overflow value. Saturating fixed point:
    clamp, ``round(x * 2**F) * 2**-F`` (exact below 2**24 quanta), no -0. NaN in, canonical NaN
    out, as the kernel gives. Checked bit for bit against the kernel on all 2**32 inputs per
    format (tests/numerics/test_fast_round.py).
    """
    if rnd.mode is not RoundMode.RNE or x.dtype != jnp.float32:
        return None
    f32 = np.float32
    if spec.kind == "float":
        if not (spec.signed and spec.has_zero and spec.subnormals and spec.nan != "negzero"
                and 1 <= spec.man_bits <= 22 and spec.exp_bits <= 8):
            return None
        full = spec.exp_bits == 8 and spec.bias == 127  # float32's range: no subnormal branch
        qmin = spec.smallest_subnormal_exp
        if not full and qmin < -125:
            return None
        y = jax.lax.reduce_precision(x, exponent_bits=8, mantissa_bits=spec.man_bits)
        if not full:
            # x * 2**-qmin on the exponent bits, not a float multiply: XLA folds a multiply by a
            # constant into the op that made x (a product, a dot), which then is not flushed
            # where x was. (Zeros and fp32 subnormals become values below 2**-2: they round to 0.)
            up = jax.lax.bitcast_convert_type(
                jax.lax.bitcast_convert_type(x, jnp.uint32) + np.uint32(-qmin << 23), jnp.float32)
            tiny = jnp.round(up) * f32(2.0**qmin)
            y = jnp.where(jnp.abs(x) < f32(spec.smallest_normal), tiny, y)
        nan = _signed_nan32(x, spec)
        if full and spec.has_inf and not saturate:
            # reduce_precision already overflows to +-inf here: only NaN is left to canonicalise
            # (the two-level overflow select below costs about twice as much on XLA:CPU).
            return jnp.where(jnp.abs(y) <= f32(np.inf), y, nan)
        if saturate or not (spec.has_inf or spec.has_nan):
            hi = f32(spec.max)
        elif not spec.has_inf:  # fn: overflow and NaN alike are the NaN of the input's sign
            return jnp.where(jnp.abs(y) <= f32(spec.max), y, nan)
        else:
            hi = f32(np.inf)
        # NaN fails all three comparisons. (Spelled without isnan: XLA:CPU ran an isnan select
        # next to the overflow select about 3x slower.)
        beyond = jnp.where(y > 0, hi, jnp.where(y < 0, -hi, nan))
        return jnp.where(jnp.abs(y) <= f32(spec.max), y, beyond)
    if spec.kind == "int":
        frac = spec.frac_bits
        if not (saturate and spec.float32_exact and -100 <= frac <= 100):
            return None
        y = jnp.clip(x, f32(spec.min), f32(spec.max))
        y = jnp.round(y * f32(2.0**frac)) * f32(2.0**-frac)
        bound = f32(max(spec.max, -spec.min))
        return jnp.where(y == 0, f32(0), jnp.where(jnp.abs(y) <= bound, y, _signed_nan32(x, spec)))  # no -0
    return None


def _signed_nan32(x: jax.Array, spec) -> jax.Array:
    """The quiet float32 NaN ``nan_with_sign`` gives for float32 ``x``."""
    sign = jax.lax.bitcast_convert_type(x, jnp.uint32) & np.uint32(F32.sign)
    nan = nan_with_sign(spec, np.uint32(F32.nan), sign)
    return jax.lax.bitcast_convert_type(jnp.broadcast_to(nan, x.shape), jnp.float32)


def fast_sr_fixed32(x: jax.Array, spec, rnd: Rounding, saturate: bool, rand) -> jax.Array | None:
    """``round_to_grid`` of float32 ``x`` onto saturating fixed point by stochastic rounding with
    the same ``rand`` (full 32 bits), in about half the kernel's ops (None elsewhere).

    Clamping first is exact (the bounds are on the grid; beyond them the kernel saturates
    either way) and leaves at most 24 significant bits above the quantum (``bits <= 24``), so the
    kernel's rule applies as it is to the clamped magnitude bits, without its exponent, overflow
    and subnormal cases: at or above one quantum, add the low ``d`` bits of ``rand`` below the
    quantum and clear them; below, one quantum iff ``rand`` is below the significand shifted to
    ``|x| / quantum * 2**32``. Shifts by 32 or more give 0 in XLA, which covers zeros and fp32
    subnormals (flushed or not: the threshold is 0 for ``frac_bits <= 64``). The sign is put
    back on the bits, no -0, NaN in, NaN out. (A float32 threshold converted to uint32 costs
    more than the whole integer rule on XLA:CPU.) Checked bit for bit against the kernel for
    the same ``rand`` in tests/numerics/test_fast_sr.py.
    """
    if not (rnd.mode is RoundMode.SR and rnd.bits is None and x.dtype == jnp.float32
            and spec.kind == "int" and saturate and spec.bits <= 24):
        return None
    u32 = np.uint32
    qmin = -spec.frac_bits
    xc = jnp.clip(x, np.float32(spec.min), np.float32(spec.max))
    bits = jax.lax.bitcast_convert_type(xc, jnp.uint32)
    a = bits & u32(0x7FFFFFFF)
    d = u32(qmin + 150) - (a >> u32(23))  # carrier bits below the quantum (> 23: below one)
    mask = (u32(1) << d) - u32(1)
    r = (a + (rand & mask)) & ~mask
    sig = (a & u32(0x7FFFFF)) | u32(0x800000)
    threshold = (sig << (u32(32) - d)) | (sig >> (d - u32(32)))  # one of the two shifts is >= 32
    quantum = u32(F32.pow2_bits(qmin))
    r = jnp.where(a < quantum, jnp.where(rand < threshold, quantum, u32(0)), r)
    out = jnp.where(r == u32(0), u32(0), r | (bits & u32(F32.sign)))  # no -0
    out = jnp.where(a > u32(F32.inf), jax.lax.bitcast_convert_type(_signed_nan32(x, spec), jnp.uint32), out)
    return jax.lax.bitcast_convert_type(out, jnp.float32)


def fast_sr_float32(x: jax.Array, spec, rnd: Rounding, saturate: bool, rand) -> jax.Array | None:
    """``round_to_grid`` of float32 ``x`` onto a float format by stochastic rounding with the same
    ``rand`` (full 32 bits), in about half the kernel's integer ops (None elsewhere).

    For a format with float32's or a narrower exponent range (``emin >= -126``), the kernel's
    count of carrier bits below the quantum is ``d = qmin + 150 - e`` with the exponent field
    ``e`` clamped to ``[1, emin + 127]`` (above: the format's own ``23 - man`` bits), one clamp
    instead of the kernel's quantum/binade/clip chain. At or above one quantum (``d <= 23``): add
    the low ``d`` bits of ``rand`` and clear them. Below (``d > 23``): one quantum iff ``rand`` is
    below the significand shifted to ``|x| / quantum * 2**32``; the significand is
    ``a - ((e - 1) << 23)`` (the hidden bit, or none for a carrier subnormal), and XLA's shifts by
    32 or more give 0, as in :func:`fast_sr_fixed32` (formats whose smallest quantum is at most
    2**-126, bf16 and tf32, never get there: that test is left out). A NaN or inf input rounds to bits at or
    above inf (its mantissa bits are kept or carried, never lost), so one overflow compare covers
    them, with one more for NaN where the format has inf. The sign goes back on the bits (the
    formats taken have -0 and signed NaNs). Checked bit for bit against the kernel for the same
    ``rand`` in tests/numerics/test_fast_sr.py.
    """
    if not (rnd.mode is RoundMode.SR and rnd.bits is None and x.dtype == jnp.float32
            and spec.kind == "float" and spec.signed and spec.has_zero and spec.subnormals
            and spec.nan != "negzero" and 1 <= spec.man_bits <= 22 and spec.exp_bits <= 8
            and spec.emin >= -126 and spec.max <= float(np.finfo(np.float32).max)):
        return None
    u32 = np.uint32
    qmin = spec.smallest_subnormal_exp
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    a = bits & u32(0x7FFFFFFF)
    e = jnp.clip(a >> u32(23), u32(1), u32(spec.emin + 127))
    d = u32(qmin + 150) - e  # carrier bits below the quantum (> 23: below one quantum)
    mask = (u32(1) << d) - u32(1)
    r = (a + (rand & mask)) & ~mask
    if qmin + 149 > 23:  # d <= qmin + 149: bf16 and tf32 (qmin < -126) never fall below one quantum
        sig = a - ((e - u32(1)) << u32(23))  # (where d > 23, e is the exponent field, or 1)
        threshold = (sig << (u32(32) - d)) | (sig >> (d - u32(32)))  # one of the two shifts is >= 32
        quantum = u32(F32.pow2_bits(qmin))  # normal: qmin > -126 here
        r = jnp.where(d > u32(23), jnp.where(rand < threshold, quantum, u32(0)), r)
    top = u32(float_bits(spec.max, F32))
    if saturate or not (spec.has_inf or spec.has_nan):
        r = jnp.where(a > u32(F32.inf), u32(F32.nan), jnp.minimum(r, top))
    elif spec.has_inf:
        beyond = jnp.where(a > u32(F32.inf), u32(F32.nan), u32(F32.inf))
        r = jnp.where(r > top, beyond, r)
    else:  # fn: overflow, inf and NaN alike are the NaN of the input's sign
        r = jnp.where(r > top, u32(F32.nan), r)
    return jax.lax.bitcast_convert_type(r | (bits & u32(F32.sign)), jnp.float32)


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
    integers: float ops would flush subnormal results, and XLA's exp2 is not exact."""
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
