"""``exact_div.divide``'s two paths (a CPU's float64 quotient, ``divide_float64``, and the
integer long division every other backend runs, ``divide_exact``) against MPFR (gmpy2) at float32's
precision and range, subnormal quotients included, and the fp32 scaling that divides by them."""

from __future__ import annotations

import gmpy2
import jax
import numpy as np
import pytest

from asicsim._src.numerics.exact_div import divide_exact, divide_float64


def _operands(n: int, seed: int):
    """Dividends of every kind (random bit patterns: normals, subnormals, zeros, inf, NaN) and
    positive scales, normal and subnormal; a third of the pairs aimed at quotients near float32's
    smallest normal 2**-126 and through its subnormals."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32).copy()
    s = (rng.integers(1, 0x7F800000, n, dtype=np.uint64).astype(np.uint32)).view(np.float32).copy()
    near = rng.random(n) < 1 / 3
    target = rng.uniform(-152, -118, n)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        x = np.where(near, (np.abs(x) % 8 + 1) * s * 2.0**target * rng.choice([-1, 1], n), x).astype(np.float32)
    return x, s


def _mpfr_quotient(x: float, s: float) -> np.float32:
    with gmpy2.context(gmpy2.ieee(32)) as ctx:
        ctx.subnormalize = True
        return np.float32(float(gmpy2.mpfr(float(x)) / gmpy2.mpfr(float(s))))


@pytest.mark.parametrize("path", [divide_float64, divide_exact], ids=["float64", "long division"])
def test_quotient_is_mpfrs_at_float32_precision(path):
    """Bit for bit MPFR's quotient, rounded once to float32 (subnormals kept), for every pair."""
    x, s = _operands(4000, 1)
    got = np.asarray(jax.jit(path)(x, s))
    sub = 0
    for xi, si, gi in zip(x, s, got, strict=True):
        if np.isnan(xi):
            assert gi.view(np.uint32) == 0x7FC00000
            continue
        want = _mpfr_quotient(xi, si)
        sub += bool(want != 0 and abs(want) < 2.0**-126)
        assert gi.view(np.uint32) == want.view(np.uint32), (xi, si, gi, want)
    assert sub > 500  # the subnormal quotients were there
