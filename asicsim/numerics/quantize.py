"""``quantize``: round any float array onto a format, exactly as hardware would.

float32 (and float16/bfloat16/float8 upcast bit-exactly) goes through a fused JAX kernel on the
uint32 view; float64 goes through the same kernel in numpy on the uint64 view, so a float64 input
is rounded once, never float64 -> float32 -> format. The result is always a float32 JAX array of
values the format represents (scaled formats: element value times its power-of-two scale).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._jax_compat import is_floating
from . import random as _random
from .catalog import get_format
from .formats import FloatFormat, Format, IntFormat
from .inputs import check_flag, real_input
from .rounding import (
    F32,
    F64,
    Carrier,
    Grid,
    Rounding,
    RoundMode,
    bit_length,
    f64_bits_to_f32_odd,
    f64_to_f32,
    parse_rounding,
    round_magnitude,
)
from .scaling import Scaling, resolve_scaling, scaled_quantize


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


# --- input handling ----------------------------------------------------------------------------


def _to_f32_bits(x) -> jax.Array:
    """uint32 bits of a JAX/numpy float array of at most 32 bits, without any float arithmetic."""
    dtype = np.dtype(x.dtype)
    if dtype == np.float32:
        return jax.lax.bitcast_convert_type(jnp.asarray(x), jnp.uint32)
    if dtype == jnp.bfloat16:
        b = jax.lax.bitcast_convert_type(jnp.asarray(x), jnp.uint16).astype(jnp.uint32)
        return b << np.uint32(16)
    spec = get_format(dtype.name)  # float16 and every ml_dtypes float8/6/4 type is in the catalog
    from .codec import decode_float_bits

    if not isinstance(x, jax.Array):  # numpy: view the codes on the host (XLA has no float6, and
        raw = jnp.asarray(np.asarray(x).view(np.dtype(f"uint{8 * dtype.itemsize}")))  # packs float4)
    elif spec.bits < 8:  # a JAX float4 array: its values are all normal float32 numbers
        return jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
    else:
        raw = jax.lax.bitcast_convert_type(x, _uint_of(dtype.itemsize))
    return decode_float_bits(jnp, F32, raw.astype(jnp.uint32), spec)


def _uint_of(itemsize: int):
    return {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32}[itemsize]


def _is_float64(x) -> bool:
    return np.dtype(getattr(x, "dtype", np.float64)) == np.float64


# --- the public function ------------------------------------------------------------------------


def quantize(
    x,
    fmt: str | Format,
    rounding: str | RoundMode | Rounding = "rne",
    *,
    key=None,
    saturate: bool | None = None,
    axis: int | None = None,
    block_size: int | None = None,
    scaling: Scaling | str | None = None,
    words=None,
) -> jax.Array:
    """Round ``x`` onto ``fmt`` and return float32 values the format represents.

    Args:
      x: float array (numpy or JAX; float64, float32, float16, bfloat16 or an ml_dtypes float;
        either byte order), list or Python number. float64 is rounded directly, never through
        float32. Anything else (strings, None, booleans, complex) is a TypeError.
      fmt: a format name, alias, grammar name (``e4m3fn``, ``q7.8``), TOML path or spec.
      rounding: ``rne`` (default), ``rna``, ``rtz``, ``rup``, ``rdn``, ``sr`` or ``sr{N}``.
      key: a ``jax.random`` key; required by stochastic rounding (same key, same bits).
      saturate: ``True`` clamps overflow to the largest finite value, ``False`` does not
        (any other value is a TypeError). ``None`` uses the format's own
        convention (inf for IEEE-like, NaN for fn/fnuz, saturation for formats with neither,
        integers and MX elements, as OCP MX requires).
      axis, block_size, scaling: scale the tensor before rounding (see ``Scaling``): ``axis``
        alone is per-channel, ``axis`` + ``block_size`` per-block. Block formats (MX, BFP)
        bring their own block scaling.
      words: instead of ``key``, the uint32[2] seed words drawn from one
        (:func:`asicsim.numerics.random.key_words`, or :func:`~asicsim.numerics.random.derive`
        from such words): many streams from one key without a threefry call for each.

    Returns:
      float32 JAX array of ``x``'s shape. Differentiable: the gradient passes straight through.
      A NaN result is the quiet NaN with ml_dtypes' sign (see ``nan_with_sign``): -1000 onto
      ``float8_e4m3fn`` is -NaN, as ``np.float32(-1000).astype(float8_e4m3fn)`` is.
    """
    x = real_input(x, "quantize")
    check_flag(saturate, "quantize: saturate", "True, False or None (the format's own convention)")
    spec = get_format(fmt)
    rnd = parse_rounding(rounding)
    if rnd.stochastic and words is None:
        words = _random.key_words(key)
    elif not rnd.stochastic:
        words = None
    plan = resolve_scaling(spec, axis=axis, block_size=block_size, scaling=scaling)
    if plan is not None:
        element, plan = plan
        sat = True if saturate is None and spec.kind == "block" else saturate
        sat = element.saturate if sat is None else sat
        return scaled_quantize(_scalable_f32(x), element, plan, rnd, sat, words)
    if spec.kind == "int" and not spec.float32_exact:
        raise ValueError(
            f"quantize to {spec.name!r}: {spec.bits}-bit integers are not exact in the float32 "
            "result; use an integer format of at most 24 magnitude bits, or encode()"
        )
    sat = spec.saturate if saturate is None else saturate
    if _is_float64(x) and not isinstance(x, jax.Array):
        return jnp.asarray(_quantize_host64(np.asarray(x, np.float64), spec, rnd, sat, words))
    return _quantize_ste(_as_f32(x), words, spec, rnd, sat)


def _as_f32(x) -> jax.Array:
    """float32 values of array ``x``; a JAX float64 array (x64 mode) passes for the float64
    kernel (numpy float64, lists and Python numbers never get here: quantize rounds them on the
    host, the scaled path converts them first)."""
    if not is_floating(x.dtype):
        raise TypeError(
            f"quantize expects a floating-point array, got dtype {x.dtype}; convert integers "
            "explicitly (x.astype(np.float32)) so no rounding happens behind your back"
        )
    if _is_float64(x):
        return x  # x64 mode: handled by the float64 kernel below
    if np.dtype(x.dtype) == np.float32:
        return jnp.asarray(x)  # keep it differentiable: no bitcast on the way in
    return jax.lax.bitcast_convert_type(_to_f32_bits(x), jnp.float32)


def _scalable_f32(x) -> jax.Array:
    """float32 input for the scaled kernels. float64 (numpy, lists, Python floats, JAX x64) is
    rounded to odd at float32 precision (``f64_bits_to_f32_odd``), so a power-of-two scale then
    rounds it once onto the element grid, as if from float64; fp32 scales compute in float32
    from there, as a fake-quant unit would."""
    if isinstance(x, (int, float)) or not hasattr(x, "dtype"):
        x = np.asarray(x, np.float32 if isinstance(x, int) else np.float64)
    if not _is_float64(x):
        return _as_f32(x)
    if isinstance(x, jax.Array):
        return _odd_f32(x)
    bits = f64_bits_to_f32_odd(np, np.asarray(x, np.float64).view(np.uint64))  # (not ascontiguousarray:
    return jnp.asarray(bits.view(np.float32))  # it made a 0-d input, a Python float, 1-d)


@jax.custom_jvp
def _odd_f32(x: jax.Array) -> jax.Array:
    bits = f64_bits_to_f32_odd(jnp, jax.lax.bitcast_convert_type(x, jnp.uint64))
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


@_odd_f32.defjvp
def _odd_f32_jvp(primals, tangents):
    return _odd_f32(primals[0]), tangents[0].astype(jnp.float32)  # straight through, as quantize


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4))
def _quantize_ste(x, words, spec, rnd, sat):
    return _quantize_jit(x, words, spec, rnd, sat)


@_quantize_ste.defjvp
def _quantize_ste_jvp(spec, rnd, sat, primals, tangents):
    x, words = primals
    return _quantize_ste(x, words, spec, rnd, sat), tangents[0]  # straight-through


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _quantize_jit(x, words, spec, rnd: Rounding, sat: bool):
    if x.dtype == jnp.float64:
        c, udt = F64, jnp.uint64
    else:
        c, udt = F32, jnp.uint32
    if c is F32 and (fast := fast_round32(x, spec, rnd, sat)) is not None:
        return fast
    bits = jax.lax.bitcast_convert_type(x, udt)
    rand = None
    if rnd.stochastic:
        rand = _random.hash_bits(words, x.shape)
        if c is F32 and (fast := fast_sr_fixed32(x, spec, rnd, sat, rand)) is not None:
            return fast
        if c is F64:
            hi = _random.hash_bits(words ^ np.uint32(0x9E3779B9), x.shape)
            rand = (hi.astype(udt) << np.uint64(32)) | rand.astype(udt)
    out = round_to_grid(jnp, c, bits, spec, rnd, sat, rand)
    out = jax.lax.bitcast_convert_type(out, x.dtype)
    return f64_to_f32(out) if c is F64 else out  # by bits: XLA's convert flushes below 2**-126


def _quantize_host64(x: np.ndarray, spec, rnd: Rounding, sat: bool, words) -> np.ndarray:
    """The float64 path, on the host: one rounding, straight from float64 to the format."""
    bits = x.view(np.uint64)
    rand = _random.host_bits64(np.asarray(words), x.shape) if rnd.stochastic else None
    with np.errstate(over="ignore"):
        out = round_to_grid(np, F64, bits, spec, rnd, sat, rand)
    return out.view(np.float64).astype(np.float32)  # exact: every format value fits float32
