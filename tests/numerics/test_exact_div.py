"""Issue 20 item 15: a float32 quotient that does not depend on the hardware's division.

Oracle: numpy's float32 division (IEEE 754 round-to-nearest-even on the host, subnormals kept).
:func:`divide_exact` uses integer operations only, so XLA:CPU's flushing of subnormals cannot
touch it and the bits it gives here are the bits it gives on a GPU, whose float32 division is
not correctly rounded (the issue measured up to 2 ulp on an H100)."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asicsim.numerics.exact_div import divide, divide_exact

_exact = jax.jit(divide_exact)


def _same(got, want):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bad = (got.view(np.uint32) != want.view(np.uint32)) & ~nan
    assert not bad.any(), list(zip(got[bad][:5], want[bad][:5], strict=True))


# divisors of every kind: normal, a power of two, subnormal, the extremes, zero, inf, NaN
DIVISORS = np.array([3.0, -7.0, 1.0, 0.1, 448.0, 2.0**-126, 2.0**-149, 1.4e-40, -3.4e38, 1e-30, 6.0,
                     0.0, -0.0, np.inf, np.nan], np.float32)


@pytest.mark.parametrize("b", DIVISORS.tolist())
def test_every_bfloat16_value_divided_exhaustively(b):
    # all 2**16 bfloat16 bit patterns as float32 dividends (zeros, subnormals, inf, NaN included)
    a = np.arange(2**16, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    with np.errstate(all="ignore"):
        want = a / np.float32(b)
    _same(_exact(a, np.float32(b)), want)


def test_random_bit_patterns_and_quotients_near_the_subnormal_and_overflow_edges():
    rng = np.random.default_rng(0)
    n = 1 << 18
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # quotients around 2**-126 .. 2**-149 and 2**128: exponents chosen to land there
    m = rng.random(n).astype(np.float32) + np.float32(1)
    a[: n // 4] = m[: n // 4] * np.float32(2.0**-100)
    b[: n // 4] = (rng.random(n // 4).astype(np.float32) + np.float32(1)) * np.float32(2.0 ** rng.integers(20, 52))
    a[n // 4: n // 2] = m[n // 4: n // 2] * np.float32(2.0**100)
    b[n // 4: n // 2] = (rng.random(n // 4).astype(np.float32) + np.float32(1)) * np.float32(2.0**-28)
    with np.errstate(all="ignore"):
        want = a / b
    _same(_exact(a, b), want)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=2, max_size=64))
def test_hypothesis_floats(xs):
    a = np.asarray(xs, np.float32)
    b = a[::-1].copy()
    with np.errstate(all="ignore"):
        _same(_exact(a, b), a / b)


def test_divide_is_correct_on_this_backend_and_gives_one_nan():
    rng = np.random.default_rng(1)
    a = rng.standard_normal(4096).astype(np.float32) * np.float32(1e3)
    s = np.float32(0.37)  # a broadcast divisor: XLA:CPU would multiply by its reciprocal
    _same(jax.jit(divide)(a, s), a / s)
    q = np.asarray(jax.jit(divide)(np.array([np.nan, -np.nan, 0.0], np.float32), np.float32(0.0)))
    assert set(q.view(np.uint32).tolist()) == {0x7FC00000}  # NaN payloads and 0/0: one NaN
