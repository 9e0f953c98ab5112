"""The integer fast path of stochastic rounding onto float formats (``fast_sr_float32``) against
the integer kernel, given the same random bits.

As for fixed point (test_fast_sr.py): every exponent field with the mantissa patterns that decide
rounding, both signs, zeros, subnormals, inf and NaN payloads, each paired with random words at
the kernel's carry and threshold boundaries (+-2), all-zero/all-one words and random ones, for
every catalog float format the path takes and grammar-built ones, saturating and not; and every
float32 with fixed low 16 bits across many random words.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_fast_sr import _inputs, boundary_words

from asicsim._src.numerics import catalog, get_format, quantize
from asicsim._src.numerics.fast_rounding32 import fast_sr_float32
from asicsim._src.numerics.grid_rounding import round_to_grid
from asicsim._src.numerics.random import hash_bits, key_words
from asicsim._src.numerics.rounding import F32, parse_rounding

SR = parse_rounding("sr")
_ZERO = (jnp.zeros(1, jnp.float32), jnp.zeros(1, jnp.uint32))
EXTRA = ["e3m4", "e5m6fn", "e2m5", "e4m3", "e6m9", "e8m1", "e7m5b90"]  # e7m5b90: qmin = -94, the limit
NAMES = sorted({n for n, s in catalog().items() if s.kind == "float"} | set(EXTRA))
CASES = [(n, sat) for n in NAMES for sat in (False, True)
         if fast_sr_float32(_ZERO[0], get_format(n), SR, sat, _ZERO[1]) is not None]


def _check(spec, sat, bits: np.ndarray, rand: np.ndarray):
    ref = jax.jit(lambda b, r: round_to_grid(jnp, F32, b, spec, SR, sat, r))
    got = jax.jit(lambda b, r: jax.lax.bitcast_convert_type(
        fast_sr_float32(jax.lax.bitcast_convert_type(b, jnp.float32), spec, SR, sat, r), jnp.uint32))
    b, r = jnp.asarray(bits, jnp.uint32), jnp.asarray(rand, jnp.uint32)
    want, have = np.asarray(ref(b, r)), np.asarray(got(b, r))
    bad = np.flatnonzero(want != have)
    assert bad.size == 0, [(hex(int(bits[i])), hex(int(rand[i])), hex(int(want[i])), hex(int(have[i])))
                           for i in bad[:5]]


def _boundary_rand(spec, bits: np.ndarray, k: int, rng) -> np.ndarray:
    """Random words at the kernel's decision boundary for each input, offset by ``k`` (the
    kernel's quantum, recomputed here in int64 from the format's fields)."""
    a = (bits & np.uint32(0x7FFFFFFF)).astype(np.int64)
    exp = a >> 23
    qmin = spec.smallest_subnormal_exp
    return boundary_words(a, np.maximum(np.where(exp > 0, exp - 127 - spec.man_bits, qmin), qmin), k, rng)


def test_cases_cover_the_recipe_formats():
    names = {get_format(n).name for n, _ in CASES}
    for fmt in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn",
                "float4_e2m1fn", "tf32"):
        assert get_format(fmt).name in names, fmt


@pytest.mark.parametrize(("name", "sat"), CASES)
def test_fast_sr_float_matches_kernel_at_boundaries(name, sat):
    spec = get_format(name)
    bits = _inputs()
    rng = np.random.default_rng(1)
    words = [np.full(bits.size, w, np.uint32) for w in (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)]
    words += [rng.integers(0, 1 << 32, bits.size, dtype=np.uint64).astype(np.uint32) for _ in range(3)]
    words += [_boundary_rand(spec, bits, k, rng) for k in (-2, -1, 0, 1, 2)]
    _check(spec, sat, np.tile(bits, len(words)), np.concatenate(words))


@pytest.mark.parametrize(("name", "sat"), [("float8_e4m3fn", False), ("bfloat16", False), ("float16", False),
                                           ("float4_e2m1fn", False), ("float8_e5m2", True)])
def test_fast_sr_float_matches_kernel_exhaustively_over_the_high_16_bits(name, sat):
    spec = get_format(name)
    high = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    rng = np.random.default_rng(2)
    for low in (0x0000, 0x0001, 0x8000, 0x7FFF, 0xFFFF, int(rng.integers(0, 1 << 16))):
        bits = high | np.uint32(low)
        rand = rng.integers(0, 1 << 32, bits.size * 16, dtype=np.uint64).astype(np.uint32)
        _check(spec, sat, np.tile(bits, 16), rand)


def test_fast_sr_float_applies_only_where_exact():
    x, r = _ZERO
    for name, sat, rounding in [("float32", False, "sr"), ("float8_e4m3fnuz", False, "sr"),
                                ("float8_e8m0fnu", True, "sr"), ("bf16", False, "sr8"),
                                ("bf16", False, "rne"), ("q7.8", True, "sr"), ("e8m2b128", False, "sr"),
                                ("e7m10b110", False, "sr"), ("e7m4b100", True, "sr"),  # qmin -119, -103
                                ("e7m5b91", False, "sr")]:  # qmin -95: a zero would have threshold 1
        assert fast_sr_float32(x, get_format(name), parse_rounding(rounding), sat, r) is None, name


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float16", "e7m5b90"])
def test_fast_sr_float_below_one_quantum_against_float64(name):
    """The rule below one quantum, by class: every float32 magnitude below the format's smallest
    quantum ``2**qmin`` whose low 12 bits are 0x000, 0x001, 0x7FF, 0x800 or 0xFFF (every exponent
    field and the top 11 mantissa bits exhaustively: zeros and float32 subnormals included, both
    signs), each with the words 0, 2**32 - 1 and the threshold -1, +0, +1. The oracle is the
    definition, in float64 here: one quantum (with the input's sign) iff the word is below
    ``floor(|x| * 2**(32 - qmin))`` (exact in float64: 24 significant bits scaled by a power of
    two), else a signed zero; the kernel is checked against the same oracle."""
    spec = get_format(name)
    qmin = spec.smallest_subnormal_exp
    q_bits = (qmin + 127) << 23  # the quantum as float32 bits (normal for these formats)
    high = np.arange(0, q_bits, 1 << 12, dtype=np.int64)
    a = (high[:, None] | np.array([0x000, 0x001, 0x7FF, 0x800, 0xFFF])).reshape(-1)
    threshold = np.floor(a.astype(np.uint32).view(np.float32).astype(np.float64) * 2.0 ** (32 - qmin))
    assert threshold.max() < 2**32
    t = threshold.astype(np.int64)
    words = [np.zeros_like(t), np.full_like(t, 2**32 - 1), t - 1, t, t + 1]
    rand = (np.concatenate(words * 2) % 2**32).astype(np.uint32)
    bits = np.concatenate([a, a | 0x80000000] * len(words)).astype(np.uint32)
    sign = bits & np.uint32(0x80000000)
    thr = np.concatenate([t, t] * len(words))
    want = np.where(rand.astype(np.int64) < thr, np.uint32(q_bits), np.uint32(0)) | sign
    ref = jax.jit(lambda b, r: round_to_grid(jnp, F32, b, spec, SR, False, r))
    got = jax.jit(lambda b, r: jax.lax.bitcast_convert_type(
        fast_sr_float32(jax.lax.bitcast_convert_type(b, jnp.float32), spec, SR, False, r), jnp.uint32))
    for f in (got, ref):
        have = np.asarray(f(jnp.asarray(bits), jnp.asarray(rand)))
        bad = np.flatnonzero(have != want)
        assert bad.size == 0, [(hex(int(bits[i])), hex(int(rand[i])), hex(int(want[i])), hex(int(have[i])))
                               for i in bad[:5]]


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "bfloat16", "float4_e2m1fn"])
def test_quantize_sr_float_takes_the_fast_path_with_the_kernel_bits(fmt):
    spec = get_format(fmt)
    key = jax.random.key(3)
    x = jax.random.normal(jax.random.key(4), (257, 33)) * jnp.float32(40.0)
    x = x.at[0, :6].set(jnp.array([jnp.nan, jnp.inf, -jnp.inf, -0.0, 1e-40, -1e30]))
    rand = hash_bits(key_words(key), x.shape)
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    want = round_to_grid(jnp, F32, bits, spec, SR, spec.saturate, rand)
    got = jax.lax.bitcast_convert_type(quantize(x, fmt, "sr", key=key), jnp.uint32)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
