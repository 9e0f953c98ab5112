"""``fp32_exact.quotient_to_round``, the ``x / s`` of fp32 scaling: on a CPU float64's quotient
converted to float32, against MPFR (gmpy2) at float32's precision and range, and against the
integer long division (``exact_div.divide``) through every rounding mode onto the grids it
serves."""

from __future__ import annotations

import gmpy2
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.numerics import get_format
from asicsim._src.numerics.exact_div import divide
from asicsim._src.numerics.fp32_exact import quotient_to_round
from asicsim._src.numerics.fp32_scale import round_bits
from asicsim._src.numerics.rounding import parse_rounding


def _operands(n: int, seed: int):
    """Dividends of every kind (random bit patterns: normals, subnormals, zeros, inf, NaN) and
    positive scales, normal and subnormal; a third of the pairs aimed at quotients near float32's
    smallest normal 2**-126, where the float64 path replaces its subnormals."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32).copy()
    s = (rng.integers(1, 0x7F800000, n, dtype=np.uint64).astype(np.uint32)).view(np.float32).copy()
    near = rng.random(n) < 1 / 3
    target = rng.uniform(-135, -118, n)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        x = np.where(near, (np.abs(x) % 8 + 1) * s * 2.0**target * rng.choice([-1, 1], n), x).astype(np.float32)
    return x, s


def _mpfr_quotient(x: float, s: float) -> np.float32:
    with gmpy2.context(gmpy2.ieee(32)) as ctx:
        ctx.subnormalize = True
        return np.float32(float(gmpy2.mpfr(float(x)) / gmpy2.mpfr(float(s))))


def test_quotient_is_correctly_rounded_where_it_is_normal():
    """Against MPFR at float32's precision: bit for bit wherever the true quotient rounds to a
    normal float32, zero or overflows; a subnormal quotient is +-2**-126, never anything else."""
    x, s = _operands(4000, 1)
    got = np.asarray(jax.jit(lambda a, b: quotient_to_round(a, b, -9))(x, s))
    for xi, si, gi in zip(x, s, got, strict=True):
        if np.isnan(xi):
            assert np.isnan(gi)
            continue
        want = _mpfr_quotient(xi, si)
        true = np.float64(xi) / np.float64(si)  # (float64 holds a float32 quotient's magnitude)
        if 2.0**-150 < abs(true) < 2.0**-126:  # a float32 subnormal: may be +-2**-126
            tiny = np.float32(np.copysign(2.0**-126, true))
            assert gi.view(np.uint32) == tiny.view(np.uint32), (xi, si, gi, want)
        else:
            assert gi.view(np.uint32) == want.view(np.uint32), (xi, si, gi, want)


@pytest.mark.parametrize("fmt", ["int8", "int4", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "q1.20"])
def test_rounded_quotient_is_the_long_divisions(fmt):
    """Rounded onto the element (every mode, saturating or not, stochastic rounding with the same
    words), the float64 path's quotient gives the long division's codes, subnormal quotients
    included (q1.20: a quantum of 2**-20)."""
    element = get_format(fmt)
    qmin = element.smallest_subnormal_exp if element.kind == "float" else -element.frac_bits
    assert qmin > -94
    x, s = _operands(20000, 2)
    rand = jnp.asarray(np.random.default_rng(3).integers(0, 2**32, x.size, dtype=np.uint64).astype(np.uint32))
    fast = jax.lax.bitcast_convert_type(quotient_to_round(x, s, qmin), jnp.uint32)
    exact = jax.lax.bitcast_convert_type(divide(x, s), jnp.uint32)
    for mode in ("rne", "rna", "rtz", "rup", "rdn", "sr"):
        rnd = parse_rounding(mode)
        for saturate in (True, False):
            r = rand if rnd.stochastic else None
            got = np.asarray(round_bits(fast, element, rnd, saturate, r))
            want = np.asarray(round_bits(exact, element, rnd, saturate, r))
            same = (got == want) | (np.isnan(got.view(np.float32)) & np.isnan(want.view(np.float32)))
            assert same.all(), (fmt, mode, saturate, x[~same][:3], s[~same][:3])


def test_grids_finer_than_the_replacement_take_the_long_division():
    """Where a quantum can be as small as 2**-94 or less (bfloat16's 2**-133), +-2**-126 would not
    round as a true subnormal quotient does: those take the long division, bit for bit."""
    x, s = _operands(2000, 4)
    got = np.asarray(quotient_to_round(x, s, -133)).view(np.uint32)
    want = np.asarray(divide(x, s)).view(np.uint32)
    np.testing.assert_array_equal(got, want)
