"""float32 <-> float64 by XLA's conversions where XLA:CPU's do not flush float32 subnormals, and
by counts of 2**-149 where they do; float32 products correctly rounded (``fp32_mul``).

Oracles: numpy's casts and float32 multiply on the host (IEEE 754, round to nearest even,
subnormals kept) and Berkeley SoftFloat's ``f32_mul`` (softfloatpy)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import softfloatpy as sf
from oracles import softfloat32_binary

from asicsim._jax_compat import enable_x64
from asicsim._src.numerics.fp32_exact import fp32_mul
from asicsim._src.numerics.rounding import f32_to_f64, f64_to_f32


def _bits32(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def _assert_same(got, want, nan_sign=True):
    """Bit for bit, a NaN against a NaN (of the same sign with ``nan_sign``; payloads aside)."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert not nan_sign or np.array_equal(np.signbit(got[nan]), np.signbit(want[nan]))
    bad = (_bits32(got) != _bits32(want)) & ~nan
    assert not bad.any(), list(zip(got[bad][:5], want[bad][:5], strict=True))


def _float32_edges(rng) -> np.ndarray:
    """Every float32 subnormal and the normals around them, both signs, random bit patterns of
    every kind, and the specials."""
    low = np.arange(0, 1 << 24, dtype=np.uint32)
    rand = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    special = np.array([0x7F800000, 0x7FC00000, 0x7F800001, 0x7F7FFFFF, 0x00800000, 0x007FFFFF], np.uint32)
    bits = np.concatenate([low, rand, special])
    return np.concatenate([bits, bits | np.uint32(0x80000000)]).view(np.float32)


def test_f32_to_f64_and_back_keep_every_subnormal():
    x = _float32_edges(np.random.default_rng(0))
    with enable_x64(True):
        wide = np.asarray(jax.jit(f32_to_f64)(x))
        back = np.asarray(jax.jit(lambda v: f64_to_f32(f32_to_f64(v)))(x))
    with np.errstate(invalid="ignore"):
        want = x.astype(np.float64)
    nan = np.isnan(x)
    assert np.array_equal(wide.view(np.uint64)[~nan], want.view(np.uint64)[~nan])
    assert np.isnan(wide[nan]).all() and np.array_equal(np.signbit(wide[nan]), np.signbit(x[nan]))
    _assert_same(back, x)


def _float64_cases(rng) -> np.ndarray:
    """float64 values that round onto float32's grid in every way: uniform over float32's exponent
    range and past it, the midpoints between neighbouring float32 numbers (ties) and a float64
    ulp either side of them, subnormal ones included, the overflow threshold, and the specials."""
    n = 1 << 18
    mags = np.ldexp(rng.uniform(1, 2, n), rng.integers(-160, 130, n))
    f32 = rng.integers(0, 0x7F800000, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    nxt = np.nextafter(f32, np.float32(np.inf))
    mid = (f32.astype(np.float64) + nxt.astype(np.float64)) / 2  # exact: 25 bits
    ties = np.concatenate([mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf)])
    sub = (np.arange(0, 1 << 12) + 0.5) * 2.0**-149  # subnormal ties, up to 2**-126
    top = float(np.finfo(np.float32).max)
    edge = np.array([top, top + 2.0**103, np.nextafter(top + 2.0**103, 0), 2.0**-126, 2.0**-150,
                     np.nextafter(2.0**-150, 1), 2.0**-151, 1e-300, 0.0, np.inf, np.nan, 5e-324])
    v = np.concatenate([mags, ties, sub, 2.0**-126 - sub[-64:] / 2**20, edge])
    return np.concatenate([v, -v])


def test_f64_to_f32_rounds_as_ieee_754():
    v = _float64_cases(np.random.default_rng(1))
    with enable_x64(True):
        got = np.asarray(jax.jit(f64_to_f32)(v))
    with np.errstate(over="ignore", invalid="ignore"):
        _assert_same(got, v.astype(np.float32))


def test_fp32_mul_is_the_correctly_rounded_float32_product():
    """Random operands of every kind and pairs whose products land in the subnormal range."""
    rng = np.random.default_rng(2)
    x = _float32_edges(rng)
    y = rng.permutation(x)
    # products near 2**-126..2**-149: operands around 2**-70 and 2**-66
    a = np.ldexp(rng.uniform(1, 2, 1 << 18), rng.integers(-80, -60, 1 << 18)).astype(np.float32)
    b = np.ldexp(rng.uniform(1, 2, 1 << 18), rng.integers(-80, -60, 1 << 18)).astype(np.float32)
    x, y = np.concatenate([x, a, -a]), np.concatenate([y, b, b])
    got = np.asarray(jax.jit(fp32_mul)(x, y))
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        _assert_same(got, x * y, nan_sign=False)  # an invalid product's NaN sign is the hardware's


@pytest.mark.parametrize("seed", range(3))
def test_fp32_mul_against_softfloat(seed):
    rng = np.random.default_rng(10 + seed)
    x = rng.integers(0, 1 << 32, 2000, dtype=np.uint64).astype(np.uint32)
    y = np.where(rng.random(2000) < 0.5, rng.integers(0, 1 << 32, 2000, dtype=np.uint64),
                 rng.integers(0x30000000, 0x50000000, 2000)).astype(np.uint32)
    got = _bits32(jax.jit(fp32_mul)(x.view(np.float32), y.view(np.float32)))
    want = softfloat32_binary(sf.f32_mul, x, y)
    _assert_same(got.view(np.float32), want.view(np.float32), nan_sign=False)
