"""Fast float32 paths of the rounding kernels: where a handful of vectorised ops on float32's
bit patterns provably give the same bits as :func:`asicsim._src.numerics.grid_rounding.round_to_grid`
(round to nearest even onto any format, :func:`fast_round32`; stochastic rounding onto fixed
point, :func:`fast_sr_fixed32`, and onto float formats, :func:`fast_sr_float32`), they return the
rounded values; elsewhere None, and the caller uses the integer kernel. Each path is tested
against that kernel (tests/numerics/test_fast_round.py, test_fast_sr.py, test_fast_sr_float.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .grid_rounding import float_bits, nan_with_sign
from .rounding import F32, Rounding, RoundMode


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
    below the threshold ``floor(|x| * 2**(32 - qmin))``, the kernel's significand shifted to
    ``|x| / quantum * 2**32``. Here that threshold is ``|x|`` scaled by an integer add on its
    exponent field (exact: ``|x| < 2**qmin`` keeps the product below 2**32 and normal) and
    converted to uint32 (a truncation), so the lower clamp of ``e`` is not needed either; a
    float32 zero or subnormal becomes a value below 1 (threshold 0, as the kernel gives) when
    ``qmin >= -94``, which formats with ``-126 < qmin < -94`` do not meet (they take the kernel).
    Formats whose smallest quantum is at most 2**-126, bf16 and tf32, never fall below one
    quantum: that test is left out. A NaN or inf input rounds to bits at or
    above inf (its mantissa bits are kept or carried, never lost), so one overflow compare covers
    them, with one more for NaN where the format has inf. The sign goes back on the bits (the
    formats taken have -0 and signed NaNs). Checked bit for bit against the kernel for the same
    ``rand`` in tests/numerics/test_fast_sr_float.py.
    """
    if not (rnd.mode is RoundMode.SR and rnd.bits is None and x.dtype == jnp.float32
            and spec.kind == "float" and spec.signed and spec.has_zero and spec.subnormals
            and spec.nan != "negzero" and 1 <= spec.man_bits <= 22 and spec.exp_bits <= 8
            and spec.emin >= -126 and spec.max <= float(np.finfo(np.float32).max)):
        return None
    u32 = np.uint32
    qmin = spec.smallest_subnormal_exp
    below = qmin > -126  # d <= qmin + 149: bf16 and tf32 never fall below one quantum
    if -126 < qmin < -94:  # a zero would scale to a threshold of 1 or more
        return None
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    a = bits & u32(0x7FFFFFFF)
    e = jnp.minimum(a >> u32(23), u32(spec.emin + 127))
    e = e if below else jnp.maximum(e, u32(1))  # (e = 0 has d > 23 where the threshold decides)
    d = u32(qmin + 150) - e  # carrier bits below the quantum (> 23: below one quantum)
    mask = (u32(1) << jnp.minimum(d, u32(24))) - u32(1)  # (d > 23: r is replaced below)
    r = (a + (rand & mask)) & ~mask
    if below:
        scaled = jax.lax.bitcast_convert_type(a + u32((32 - qmin) << 23), jnp.float32)
        threshold = scaled.astype(jnp.uint32)  # (where d <= 23 it is not used)
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


def fast_round_any32(x: jax.Array, spec, rnd: Rounding, saturate: bool, rand=None) -> jax.Array | None:
    """The fast path that applies to this rounding, or None (use the integer kernel): without
    ``rand``, :func:`fast_round32`; with it, :func:`fast_sr_fixed32` or :func:`fast_sr_float32`."""
    if rand is None:
        return fast_round32(x, spec, rnd, saturate)
    fast = fast_sr_fixed32(x, spec, rnd, saturate, rand)
    return fast_sr_float32(x, spec, rnd, saturate, rand) if fast is None else fast
