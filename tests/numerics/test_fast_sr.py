"""The float fast path of stochastic rounding onto saturating fixed point (``fast_sr_fixed32``)
against the integer kernel, given the same random bits.

The kernel's SR rule depends on the low ``d`` bits of the random word (at or above one
quantum) and on the whole word against a threshold (below one quantum), so inputs are paired
with random words at the exact carry and threshold boundaries (+-1), with all-zero/all-one
words and with random ones. An exhaustive sweep covers every float32 with fixed low 16 bits
(every sign, exponent and top mantissa bits) across many random words.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.numerics import get_format, quantize
from asicsim._src.numerics.fast_rounding32 import fast_sr_fixed32
from asicsim._src.numerics.formats import IntFormat
from asicsim._src.numerics.grid_rounding import round_to_grid
from asicsim._src.numerics.random import hash_bits, key_words
from asicsim._src.numerics.rounding import F32, parse_rounding

SR = parse_rounding("sr")
NAMES = ["q7.8", "q3.4", "uq4.4", "int4", "int8", "uint8", "q15.8", "q11.12", "uq8.16", "q0.15", "q2.13"]
# the extremes of frac_bits (-64..64: quanta far below float32's normals, or far above 1), symmetric
ODD = [IntFormat(name="f64", bits=8, frac_bits=64), IntFormat(name="uf-64", bits=12, signed=False, frac_bits=-64),
       IntFormat(name="f40", bits=24, frac_bits=40), IntFormat(name="sym", bits=8, frac_bits=3, symmetric=True)]


def _pair(spec, sat=True):
    ref = jax.jit(lambda b, r: round_to_grid(jnp, F32, b, spec, SR, sat, r))
    got = jax.jit(lambda b, r: jax.lax.bitcast_convert_type(
        fast_sr_fixed32(jax.lax.bitcast_convert_type(b, jnp.float32), spec, SR, sat, r), jnp.uint32))
    return ref, got


def _check(spec, bits: np.ndarray, rand: np.ndarray):
    ref, got = _pair(spec)
    b, r = jnp.asarray(bits, jnp.uint32), jnp.asarray(rand, jnp.uint32)
    want, have = np.asarray(ref(b, r)), np.asarray(got(b, r))
    bad = np.flatnonzero(want != have)
    assert bad.size == 0, [(hex(int(bits[i])), hex(int(rand[i])), hex(int(want[i])), hex(int(have[i])))
                           for i in bad[:5]]


def _inputs() -> np.ndarray:
    """float32 bits: every exponent field x mantissa patterns (carries, halves, random), both signs."""
    man = {0, 1, 2, 3, 0x7FFFFF, 0x7FFFFE, 0x400000, 0x400001, 0x3FFFFF}
    for d in range(1, 24):
        for base in (0, 1 << d, 0x7FFFFF & ~((1 << d) - 1)):
            man.update(((base | (1 << (d - 1))) + k) & 0x7FFFFF for k in (-1, 0, 1))
            man.update((base + k) & 0x7FFFFF for k in (-1, 1))
    man.update(int(m) for m in np.random.default_rng(0).integers(0, 1 << 23, 64))
    m = np.array(sorted(man), np.uint32)
    e = np.arange(256, dtype=np.uint32)
    bits = ((e[:, None] << np.uint32(23)) | m[None, :]).reshape(-1)
    return np.concatenate([bits, bits | np.uint32(0x80000000)])


def _boundary_rand(spec, bits: np.ndarray, k: int, rng) -> np.ndarray:
    """Random words at the kernel's decision boundary for each input, offset by ``k``: where
    rounding up starts (low bits that carry into the quantum; below one quantum, the threshold)."""
    with np.errstate(invalid="ignore"):
        clipped = np.clip(bits.view(np.float32).astype(np.float64), spec.min, spec.max).astype(np.float32)
    a = np.abs(clipped).view(np.uint32).astype(np.int64)  # (NaN: any word will do)
    return boundary_words(a, -spec.frac_bits, k, rng)


def boundary_words(a: np.ndarray, quantum, k: int, rng) -> np.ndarray:
    """For magnitudes ``a`` (float32 bits as int64) rounded onto a grid of step ``2**quantum``
    (a scalar, or one exponent per element): random words offset by ``k`` from where the SR
    kernel starts rounding up (the low bits that carry into the quantum; below one quantum, the
    threshold on the significand)."""
    exp = a >> 23
    d_raw = quantum + 150 - np.maximum(exp, 1)
    d = np.clip(d_raw, 0, 23)
    mask = (np.int64(1) << d) - 1
    high = rng.integers(0, 1 << 32, a.size, dtype=np.int64)
    carry = (high & ~mask) | (((np.int64(1) << d) - (a & mask) + k) & mask)
    sig = np.where(exp > 0, (a & 0x7FFFFF) | 0x800000, a)
    thr = np.where(d_raw <= 32, sig << np.clip(32 - d_raw, 0, 31), sig >> np.clip(d_raw - 32, 0, 63))
    out = np.where(d_raw > 23, thr + k, carry)
    return (out % (1 << 32)).astype(np.uint32)


@pytest.mark.parametrize("name", NAMES + ODD, ids=str)
def test_fast_sr_matches_kernel_at_boundaries(name):
    spec = get_format(name) if isinstance(name, str) else name
    bits = _inputs()
    rng = np.random.default_rng(1)
    words = [np.full(bits.size, w, np.uint32) for w in (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)]
    words += [rng.integers(0, 1 << 32, bits.size, dtype=np.uint64).astype(np.uint32) for _ in range(3)]
    words += [_boundary_rand(spec, bits, k, rng) for k in (-2, -1, 0, 1, 2)]
    _check(spec, np.tile(bits, len(words)), np.concatenate(words))


# q7.8 (the recipes' format) in the default run; the other two widths in the slow step (~5 s each)
@pytest.mark.parametrize("name", ["q7.8", pytest.param("q3.4", marks=pytest.mark.slow),
                                  pytest.param("uq8.16", marks=pytest.mark.slow)])
def test_fast_sr_matches_kernel_exhaustively_over_the_high_16_bits(name):
    spec = get_format(name)
    high = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    rng = np.random.default_rng(2)
    for low in (0x0000, 0x0001, 0x8000, 0x7FFF, 0xFFFF, int(rng.integers(0, 1 << 16))):
        bits = high | np.uint32(low)
        for _ in range(4):  # 16 random words per input, 4 passes
            rand = rng.integers(0, 1 << 32, bits.size * 16, dtype=np.uint64).astype(np.uint32)
            _check(spec, np.tile(bits, 16), rand)


def test_fast_sr_applies_only_where_exact():
    x = jnp.zeros(4, jnp.float32)
    r = jnp.zeros(4, jnp.uint32)
    assert fast_sr_fixed32(x, get_format("q7.8"), SR, True, r) is not None
    assert fast_sr_fixed32(x, get_format("q7.8"), SR, False, r) is None  # wraps: kernel
    assert fast_sr_fixed32(x, get_format("q7.8"), parse_rounding("sr8"), True, r) is None
    assert fast_sr_fixed32(x, get_format("q7.8"), parse_rounding("rne"), True, r) is None
    assert fast_sr_fixed32(x, get_format("q15.16"), SR, True, r) is None  # 32 bits: not exact
    assert fast_sr_fixed32(x, get_format("bf16"), SR, True, r) is None


def test_quantize_sr_fixed_point_takes_the_fast_path_with_the_kernel_bits():
    spec = get_format("q7.8")
    key = jax.random.key(3)
    x = jax.random.normal(jax.random.key(4), (257, 33)) * jnp.float32(40.0)
    x = x.at[0, :4].set(jnp.array([jnp.nan, jnp.inf, -jnp.inf, -0.0]))
    rand = hash_bits(key_words(key), x.shape)
    want = round_to_grid(jnp, F32, jax.lax.bitcast_convert_type(x, jnp.uint32), spec, SR, True, rand)
    got = jax.lax.bitcast_convert_type(quantize(x, "q7.8", "sr", key=key), jnp.uint32)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
