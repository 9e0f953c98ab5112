"""The float fast path of round-to-nearest-even (``fast_round32``) against the integer kernel.

``quantize`` (unscaled, and the element rounding of scaled/MX formats) takes ``fast_round32``
where it applies. It must give the kernel's bits for every float32 input: every exponent field,
signs, zeros, subnormals, inf and NaN payloads, and the mantissa patterns that decide rounding
(ties, tie +-1, all-ones carries) for every target width. The slow test sweeps all 2**32 inputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.numerics import catalog, get_format
from asicsim._src.numerics.fast_rounding32 import fast_round32
from asicsim._src.numerics.grid_rounding import round_to_grid
from asicsim._src.numerics.rounding import F32, parse_rounding

RNE = parse_rounding("rne")
# every catalog format the fast path takes, plus grammar-built ones (fixed point, odd widths)
EXTRA = ["q7.8", "q3.4", "uq4.4", "int4", "uint8", "q15.8", "e3m4", "e5m6fn", "e2m5"]
NAMES = sorted({n for n, s in catalog().items() if s.kind in ("float", "int")} | set(EXTRA))
CASES = [(n, sat) for n in NAMES for sat in (False, True)
         if fast_round32(jnp.zeros(1, jnp.float32), get_format(n), RNE, sat) is not None]


def _inputs() -> np.ndarray:
    """float32 bits: every exponent field x the mantissa patterns around every rounding point."""
    man = {0, 1, 2, 3, 0x7FFFFF, 0x7FFFFE, 0x400000, 0x400001, 0x3FFFFF}
    for d in range(1, 24):  # bits dropped: the tie, tie +-1, and the values either side of a carry
        half = 1 << (d - 1)
        for base in (0, 1 << d, 0x7FFFFF & ~((1 << d) - 1)):
            man.update(((base | half) + k) & 0x7FFFFF for k in (-1, 0, 1))
    rng = np.random.default_rng(0)
    man.update(int(m) for m in rng.integers(0, 1 << 23, 64))
    m = np.array(sorted(man), np.uint32)
    e = np.arange(256, dtype=np.uint32)
    bits = ((e[:, None] << np.uint32(23)) | m[None, :]).reshape(-1)
    return np.concatenate([bits, bits | np.uint32(0x80000000)])


@pytest.mark.parametrize(("name", "sat"), CASES)
def test_fast_path_matches_kernel(name, sat):
    spec = get_format(name)
    bits = jnp.asarray(_inputs())
    ref = jax.jit(lambda b: round_to_grid(jnp, F32, b, spec, RNE, sat))(bits)
    got = jax.jit(lambda b: jax.lax.bitcast_convert_type(
        fast_round32(jax.lax.bitcast_convert_type(b, jnp.float32), spec, RNE, sat), jnp.uint32))(bits)
    bad = np.flatnonzero(np.asarray(ref) != np.asarray(got))
    assert bad.size == 0, [(hex(int(bits[i])), hex(int(ref[i])), hex(int(got[i]))) for i in bad[:5]]


def test_cases_cover_the_recipe_formats():
    names = {n for n, _ in CASES}
    for fmt in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn",
                "float4_e2m1fn", "q7.8", "int8"):
        assert get_format(fmt).name in {get_format(n).name for n in names}, fmt


def test_fast_path_declines():
    """Stochastic and directed rounding, wrapping integers, fnuz and e8m0 keep the kernel."""
    x = jnp.zeros(4, jnp.float32)
    assert fast_round32(x, get_format("fp16"), parse_rounding("rtz"), False) is None
    assert fast_round32(x, get_format("fp16"), parse_rounding("sr"), False) is None
    assert fast_round32(x, get_format("int8"), RNE, False) is None
    assert fast_round32(x, get_format("float8_e4m3fnuz"), RNE, False) is None
    assert fast_round32(x, get_format("float8_e8m0fnu"), RNE, False) is None


@pytest.mark.slow
@pytest.mark.parametrize(("name", "sat"), [c for c in CASES if get_format(c[0]).name in {
    "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
    "q7.8", "int8"}])
def test_fast_path_exhaustive(name, sat):
    """All 2**32 float32 inputs (about a minute per case on one core)."""
    spec = get_format(name)
    chunk = 1 << 24

    @jax.jit
    def mismatches(start):
        bits = jax.lax.iota(jnp.uint32, chunk) + start
        ref = round_to_grid(jnp, F32, bits, spec, RNE, sat)
        got = jax.lax.bitcast_convert_type(
            fast_round32(jax.lax.bitcast_convert_type(bits, jnp.float32), spec, RNE, sat), jnp.uint32)
        return jnp.sum(got != ref)

    for k in range((1 << 32) // chunk):
        assert int(mismatches(np.uint32(k * chunk))) == 0, hex(k * chunk)
