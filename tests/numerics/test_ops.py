"""Correctly rounded ops (``add, sub, mul, div, sqrt, fma``) against independent oracles.

* MPFR (gmpy2): a context per format (precision man_bits + 1, subnormals emulated), every pair of
  float8_e4m3fn and float8_e5m2 codes for add/sub/mul/div and every code for sqrt in all five
  modes, fma on random triples, random sets for bf16, tf32, float6/float4, fnuz; rna is built
  from MPFR's round-toward-zero at one more bit. The format's overflow, inf and NaN conventions
  are applied by ``_conventions`` below, written from the DESIGN rules; the oracle itself is
  checked against numpy/ml_dtypes casts.
* Berkeley SoftFloat (softfloatpy): float16 add/sub/mul/div/sqrt/fma on random sets rich in
  subnormals, ties and overflow, in all five deterministic modes; float32 with hypothesis.
* The Fraction-based ``scalar_op`` reference, and the IEEE special cases written out.
"""

from __future__ import annotations

import math
import warnings

import gmpy2
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import softfloatpy as sf
from hypothesis import given, settings
from hypothesis import strategies as st

import asicsim as sim
from asicsim._src.numerics import ops

MODES = ["rne", "rna", "rtz", "rup", "rdn"]
_MPFR_ROUND = {
    "rne": gmpy2.RoundToNearest,
    "rtz": gmpy2.RoundToZero,
    "rup": gmpy2.RoundUp,
    "rdn": gmpy2.RoundDown,
}
_SF_ROUND = {
    "rne": sf.RoundingMode.NEAR_EVEN,
    "rna": sf.RoundingMode.NEAR_MAX_MAG,
    "rtz": sf.RoundingMode.MIN_MAG,
    "rup": sf.RoundingMode.MAX,
    "rdn": sf.RoundingMode.MIN,
}
_ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "sqrt": 1, "fma": 3}


# --- comparison --------------------------------------------------------------------------------


def _bits(x) -> np.ndarray:
    """float32 bit patterns with every NaN made one code, so results compare bit for bit."""
    b = np.asarray(x, np.float32).view(np.uint32).copy()
    b[np.isnan(np.asarray(x, np.float32))] = 0x7FC00000
    return b


def _assert_same(got, want, inputs, label: str) -> None:
    got_b, want_b = _bits(got).ravel(), _bits(want).ravel()
    bad = np.nonzero(got_b != want_b)[0]
    if bad.size:
        rows = [
            f"  {tuple(float(np.ravel(x)[i]) for x in inputs)} -> got "
            f"{float(np.ravel(got)[i])!r}, want {float(np.ravel(want)[i])!r}"
            for i in bad[:8]
        ]
        raise AssertionError(f"{label}: {bad.size} of {got_b.size} differ\n" + "\n".join(rows))


def _codes(dtype) -> np.ndarray:
    """Every value of an 8-bit ml_dtypes type, as float32."""
    return np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)


# --- the MPFR oracle ---------------------------------------------------------------------------


def _mpfr_context(spec, mode: str, extra_bits: int = 0):
    """MPFR rounding onto spec's grid (with ``extra_bits`` more precision); exponent unbounded
    above (overflow is applied by ``_conventions``). MPFR significands lie in [0.5, 1), so the
    smallest subnormal 2**qmin = 0.5 * 2**(qmin + 1) gives emin = qmin + 1."""
    return gmpy2.context(
        precision=spec.man_bits + 1 + extra_bits,
        emin=spec.smallest_subnormal_exp + 1 - extra_bits,
        emax=spec.emax + 16,
        subnormalize=True,
        round=_MPFR_ROUND[mode],
    )


def _conventions(y: float, spec, mode: str, saturate=None) -> float:
    """The format's rules for a correctly rounded (unbounded-exponent) result ``y``."""
    sat = spec.saturate if saturate is None else saturate
    if math.isnan(y):
        return math.nan
    neg = math.copysign(1.0, y) < 0
    limit = -spec.max if neg else spec.max
    beyond = (-math.inf if neg else math.inf) if spec.has_inf else math.nan
    if math.isinf(y):  # a genuinely infinite result (inf operand, x/0) or MPFR's own overflow
        return limit if sat or not (spec.has_inf or spec.has_nan) else beyond
    if abs(y) > spec.max:
        toward_zero = mode == "rtz" or (mode == "rup" and neg) or (mode == "rdn" and not neg)
        if sat or toward_zero or not (spec.has_inf or spec.has_nan):
            return limit
        return beyond
    if y == 0 and spec.nan == "negzero":
        return 0.0  # fnuz formats have no -0
    return y


def _mpfr_call(ctx, op: str, args):
    if op == "sqrt":
        return ctx.sqrt(*args)
    return getattr(ctx, op)(*args)


def mpfr_op(op: str, args, spec, mode: str, saturate=None) -> float:
    """One op on mpfr operands (exact, 64 bits) rounded by MPFR onto the format."""
    if mode == "rna":
        # Round toward zero to one more bit: its last bit says below (0) or at/above (1) the
        # midpoint, so rna is that value if it is on the grid, else the one away from zero.
        y = _mpfr_call(_mpfr_context(spec, "rtz", extra_bits=1), op, args)
        on_grid = _mpfr_context(spec, "rtz").plus(y)
        if on_grid == y or gmpy2.is_nan(y) or gmpy2.is_infinite(y):
            r = y
        else:
            away = "rup" if y > 0 else "rdn"
            r = _mpfr_context(spec, away).plus(y)
    else:
        r = _mpfr_call(_mpfr_context(spec, mode), op, args)
    return _conventions(float(r), spec, mode, saturate)


def _mp(values) -> list:
    return [gmpy2.mpfr(float(v), 64) for v in np.ravel(values)]


# --- exhaustive 8-bit formats --------------------------------------------------------------------

FP8 = [("float8_e4m3fn", ml_dtypes.float8_e4m3fn), ("float8_e5m2", ml_dtypes.float8_e5m2)]


@pytest.mark.parametrize(
    "name,dtype",
    [
        *FP8,
        ("fp16", np.float16),
        ("bf16", ml_dtypes.bfloat16),
        ("float4_e2m1fn", ml_dtypes.float4_e2m1fn),
    ],
)
@pytest.mark.parametrize("mode", ["rne", "rna"])
def test_mpfr_oracle_matches_casts(name, dtype, mode):
    """The oracle itself (context, subnormals, overflow conventions, the rna construction) agrees
    with numpy/ml_dtypes casts, which round to nearest-even; rna differs only at ties."""
    spec = sim.get_format(name)
    rng = np.random.default_rng(1)
    n = 3000
    exps = rng.integers(spec.smallest_subnormal_exp - 2, min(spec.emax + 2, 126), n)
    x = np.ldexp(rng.integers(-16, 17, n) / 8, exps).astype(np.float32)  # many exact ties
    with warnings.catch_warnings():  # overflow to inf/NaN is what the casts are asked to do
        warnings.simplefilter("ignore", RuntimeWarning)
        cast = x.astype(dtype).astype(np.float32)
    got = np.array([mpfr_op("plus", (v,), spec, mode) for v in _mp(x)], np.float32)
    if mode == "rne":
        _assert_same(got, cast, (x,), f"MPFR vs cast {name}")
    else:  # rna: the same except at exact ties, where it takes the neighbour away from zero
        differ = _bits(got) != _bits(cast)
        assert 0 < differ.sum() < n // 4
        assert np.all(np.abs(got[differ]) > np.abs(cast[differ]))


@pytest.mark.parametrize("name,dtype", FP8)
@pytest.mark.parametrize("mode", MODES)
def test_fp8_all_pairs_vs_mpfr(name, dtype, mode):
    """Every (a, b) pair of codes, NaN and inf included: 65536 cases per op, format and mode."""
    spec = sim.get_format(name)
    v = _codes(dtype)
    a, b = np.meshgrid(v, v, indexing="ij")
    ctx = _mpfr_context(spec, "rne" if mode == "rna" else mode)
    mv = _mp(v)
    for op in ["add", "sub", "mul", "div"]:
        if mode == "rna":
            want = [mpfr_op(op, (x, y), spec, mode) for x in mv for y in mv]
        else:  # the same as mpfr_op, inlined: this loop is the test's hot spot
            f = getattr(ctx, op)
            want = [_conventions(float(f(x, y)), spec, mode) for x in mv for y in mv]
        want = np.array(want, np.float32).reshape(256, 256)
        got = getattr(sim, op)(a, b, name, mode)
        _assert_same(got, want, (a, b), f"{op} {name} {mode}")


@pytest.mark.parametrize("name,dtype", FP8)
@pytest.mark.parametrize("mode", MODES)
def test_fp8_sqrt_all_codes_vs_mpfr(name, dtype, mode):
    spec = sim.get_format(name)
    v = _codes(dtype)
    want = np.array([mpfr_op("sqrt", (x,), spec, mode) for x in _mp(v)], np.float32)
    _assert_same(sim.sqrt(v, name, mode), want, (v,), f"sqrt {name} {mode}")


@pytest.mark.parametrize("name,dtype", FP8)
@pytest.mark.parametrize("mode", MODES)
def test_fp8_fma_random_triples_vs_mpfr(name, dtype, mode):
    spec = sim.get_format(name)
    rng = np.random.default_rng(11)
    v = _codes(dtype)
    a, b, c = (v[rng.integers(0, 256, 5000)] for _ in range(3))
    want = np.array(
        [mpfr_op("fma", t, spec, mode) for t in zip(_mp(a), _mp(b), _mp(c), strict=True)],
        np.float32,
    )
    _assert_same(sim.fma(a, b, c, name, mode), want, (a, b, c), f"fma {name} {mode}")


@pytest.mark.parametrize(
    "name", ["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e4m3fnuz", "e3m4"]
)
def test_small_formats_vs_mpfr(name):
    """Formats without inf/NaN (saturating), without -0 (fnuz), IEEE-like: random pairs, all modes."""
    spec = sim.get_format(name)
    rng = np.random.default_rng(3)
    v = _all_values(spec)
    n = 1500
    a, b, c = (v[rng.integers(0, v.size, n)] for _ in range(3))
    for mode in MODES:
        for op, args in [("add", (a, b)), ("mul", (a, b)), ("div", (a, b)), ("fma", (a, b, c))]:
            want = np.array(
                [mpfr_op(op, t, spec, mode) for t in zip(*map(_mp, args), strict=True)],
                np.float32,
            )
            got = getattr(sim, op)(*args, name, mode)
            _assert_same(got, want, args, f"{op} {name} {mode}")


def _all_values(spec) -> np.ndarray:
    """Every value of a signed format, built from its fields (subnormals, normals up to max)."""
    sub = np.arange(1 << spec.man_bits) * spec.smallest_subnormal
    frac = 1 + np.arange(1 << spec.man_bits) / (1 << spec.man_bits)
    normal = np.ldexp(frac[None, :], np.arange(spec.emin, spec.emax + 1)[:, None]).ravel()
    mags = np.concatenate([sub, normal])
    mags = mags[mags <= spec.max]
    return np.concatenate([mags, -mags]).astype(np.float32)


@pytest.mark.parametrize("name", ["bf16", "tf32"])
@pytest.mark.parametrize("mode", MODES)
def test_bf16_tf32_random_vs_mpfr(name, mode):
    spec = sim.get_format(name)
    rng = np.random.default_rng(5)
    n = 1000
    a, b, c = (_random_values(rng, spec, n) for _ in range(3))
    for op, args in [
        ("add", (a, b)),
        ("sub", (a, b)),
        ("mul", (a, b)),
        ("div", (a, b)),
        ("sqrt", (a,)),
        ("fma", (a, b, c)),
    ]:
        want = np.array(
            [mpfr_op(op, t, spec, mode) for t in zip(*map(_mp, args), strict=True)], np.float32
        )
        _assert_same(getattr(sim, op)(*args, name, mode), want, args, f"{op} {name} {mode}")


def _random_values(rng, spec, n: int) -> np.ndarray:
    """Format values with exponents over the whole range (subnormals, near max) and sparse
    mantissas (so sums and products often land exactly on ties)."""
    man = rng.integers(0, 1 << spec.man_bits, n)
    sparse = rng.random(n) < 0.4
    man[sparse] &= ~((1 << max(spec.man_bits - 2, 0)) - 1)
    e = rng.integers(spec.emin - 1, spec.emax + 1, n)
    x = np.where(
        e < spec.emin,
        np.ldexp(man.astype(np.float64), spec.emin - spec.man_bits),
        np.ldexp(1.0 + man / (1 << spec.man_bits), e),
    )
    x = np.where(rng.random(n) < 0.5, -x, x)
    return np.asarray(sim.quantize(x.astype(np.float32), spec, "rtz"))  # top codes -> max


# --- SoftFloat: float16 and float32 --------------------------------------------------------------


def _sf16(bits) -> list:
    return [sf.Float16.from_bytes(int(x).to_bytes(2, "big")) for x in bits]


def _sf16_values(objs) -> np.ndarray:
    raw = np.array([int.from_bytes(o.to_bytes(), "big") for o in objs], np.uint16)
    return raw.view(np.float16).astype(np.float32)


def _fp16_operands(rng, n: int):
    """Random float16 triples: a third any code (NaN, inf, subnormals), the rest with
    exponents near each other or tiny (cancellation, ties, underflow) or huge (overflow)."""
    any_code = rng.integers(0, 1 << 16, (3, n), dtype=np.uint16)
    sign = rng.integers(0, 2, (3, n)).astype(np.uint16) << 15
    man = rng.integers(0, 1 << 10, (3, n)).astype(np.uint16)
    man[:, rng.random(n) < 0.4] &= np.uint16(0x3C0)  # sparse mantissas: exact ties
    base = rng.integers(0, 31, n)
    exp = np.clip(base + rng.integers(-12, 13, (3, n)), 0, 30).astype(np.uint16)
    near = sign | (exp << 10) | man
    pick = rng.integers(0, 3, n)
    tiny = sign | (rng.integers(0, 3, (3, n)).astype(np.uint16) << 10) | man
    # Half the tiny ones get b = ±2**k (k = 1..11): quotients and products that land exactly
    # on subnormal ties, the only place a correctly rounded division can tie.
    pow2 = sign[1] | (rng.integers(16, 27, n).astype(np.uint16) << 10)
    halve = rng.random(n) < 0.5
    tiny[1, halve] = pow2[halve]
    tiny[1, halve & (rng.random(n) < 0.5)] ^= np.uint16(0x5000)  # or 2**-k: products
    return np.where(pick == 0, any_code, np.where(pick == 1, near, tiny))


_SF16_OPS = {
    "add": sf.f16_add,
    "sub": sf.f16_sub,
    "mul": sf.f16_mul,
    "div": sf.f16_div,
    "sqrt": sf.f16_sqrt,
    "fma": sf.f16_mul_add,
}


@pytest.mark.parametrize("mode", MODES)
def test_fp16_random_vs_softfloat(mode):
    rng = np.random.default_rng(2024)
    n = 20000
    bits = _fp16_operands(rng, n)
    objs = [_sf16(row) for row in bits]
    vals = bits.view(np.float16).astype(np.float32)
    sf.set_rounding_mode(_SF_ROUND[mode])
    try:
        for op, fn in _SF16_OPS.items():
            k = _ARITY[op]
            want = _sf16_values([fn(*t) for t in zip(*objs[:k], strict=True)])
            got = getattr(sim, op)(*vals[:k], "fp16", mode)
            _assert_same(got, want, tuple(vals[:k]), f"{op} fp16 {mode}")
    finally:
        sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


def _sf32(x: float):
    return sf.Float32.from_bytes(np.float32(x).view(np.uint32).item().to_bytes(4, "big"))


def _from_sf32(o) -> np.float32:
    return np.uint32(int.from_bytes(o.to_bytes(), "big")).view(np.float32)


_SF32_OPS = {
    "add": sf.f32_add,
    "sub": sf.f32_sub,
    "mul": sf.f32_mul,
    "div": sf.f32_div,
    "sqrt": sf.f32_sqrt,
    "fma": sf.f32_mul_add,
}

_f32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_f32, _f32, _f32), min_size=1, max_size=40),
    st.sampled_from(MODES),
)
def test_fp32_hypothesis_vs_softfloat(triples, mode):
    a, b, c = (np.array(col, np.float32) for col in zip(*triples, strict=True))
    sf.set_rounding_mode(_SF_ROUND[mode])
    try:
        for op, fn in _SF32_OPS.items():
            k = _ARITY[op]
            args = (a, b, c)[:k]
            want = np.array(
                [_from_sf32(fn(*map(_sf32, t))) for t in zip(*args, strict=True)], np.float32
            )
            _assert_same(getattr(sim, op)(*args, "fp32", mode), want, args, f"{op} fp32 {mode}")
    finally:
        sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


@pytest.mark.parametrize("mode", MODES)
def test_fp32_random_vs_softfloat(mode):
    """Random float32 bit patterns paired at nearby exponents (ties, cancellation, subnormals)."""
    rng = np.random.default_rng(99)
    n = 3000
    sign = rng.integers(0, 2, (3, n)).astype(np.uint32) << np.uint32(31)
    man = rng.integers(0, 1 << 23, (3, n)).astype(np.uint32)
    man[:, rng.random(n) < 0.4] &= np.uint32(0x7FFF00)
    exp = np.clip(rng.integers(0, 255, n) + rng.integers(-26, 27, (3, n)), 0, 254)
    vals = (sign | (exp.astype(np.uint32) << np.uint32(23)) | man).view(np.float32)
    sf.set_rounding_mode(_SF_ROUND[mode])
    try:
        for op, fn in _SF32_OPS.items():
            args = tuple(vals[: _ARITY[op]])
            want = np.array(
                [_from_sf32(fn(*map(_sf32, t))) for t in zip(*args, strict=True)], np.float32
            )
            _assert_same(getattr(sim, op)(*args, "fp32", mode), want, args, f"{op} fp32 {mode}")
    finally:
        sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


@pytest.mark.parametrize("mode", MODES)
def test_fp32_hard_quotients_vs_softfloat(mode):
    """a / (1 - 2**-24) = a (1 + 2**-24 + 2**-48 + ...): for short a, the bits after the first
    ~24 are zero for a long run before the next one, so only an exact sticky bit gets these
    right (random operands almost never do this)."""
    rng = np.random.default_rng(4)
    a = np.ldexp(rng.integers(1, 256, 400), rng.integers(-140, 100, 400)).astype(np.float32)
    a = np.where(rng.random(400) < 0.5, -a, a)
    b = np.full_like(a, 1 - 2.0**-24)
    b[::2] = -(1 - 2.0**-24) * 2.0 ** rng.integers(-20, 20, 200)
    sf.set_rounding_mode(_SF_ROUND[mode])
    try:
        want = np.array(
            [_from_sf32(sf.f32_div(_sf32(x), _sf32(y))) for x, y in zip(a, b, strict=True)]
        )
    finally:
        sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    _assert_same(sim.div(a, b, "fp32", mode), want, (a, b), f"div fp32 {mode}")


# --- the plain Fraction reference ----------------------------------------------------------------


# Formats without mantissa bits (e8m0) are left out: there quantize breaks ties by the parity of
# the exponent code while round_float (and ml_dtypes) round 1.5 * 2**k up, a known disagreement
# between the two references that is not the ops' to settle.
@pytest.mark.parametrize(
    "name", ["float8_e4m3fn", "float8_e5m2fnuz", "fp16", "bf16", "float6_e3m2fn", "e5m2b3"]
)
def test_matches_scalar_reference(name):
    spec = sim.get_format(name)
    rng = np.random.default_rng(17)
    a, b, c = (_random_values(rng, spec, 150) for _ in range(3))
    for mode in MODES:
        for op in _ARITY:
            args = (a, b, c)[: _ARITY[op]]
            want = np.array(
                [ops.scalar_op(op, *t, fmt=name, rounding=mode) for t in zip(*args, strict=True)],
                np.float32,
            )
            _assert_same(getattr(sim, op)(*args, name, mode), want, args, f"{op} {name} {mode}")


# --- IEEE special cases, written out -------------------------------------------------------------

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize(
    "op,args,mode,want",
    [
        ("add", (INF, -INF), "rne", NAN),
        ("sub", (INF, INF), "rtz", NAN),
        ("add", (INF, 1.0), "rtz", INF),  # an infinite operand is not an overflow
        ("mul", (0.0, INF), "rne", NAN),
        ("mul", (-0.0, 3.0), "rne", -0.0),
        ("div", (1.0, 0.0), "rne", INF),
        ("div", (1.0, -0.0), "rne", -INF),
        ("div", (0.0, 0.0), "rne", NAN),
        ("div", (INF, INF), "rne", NAN),
        ("div", (-1.0, INF), "rne", -0.0),
        ("sqrt", (-1.0,), "rne", NAN),
        ("sqrt", (-0.0,), "rne", -0.0),
        ("sqrt", (-0.0,), "rdn", -0.0),
        ("sqrt", (INF,), "rne", INF),
        ("add", (1.0, -1.0), "rne", 0.0),  # exact zero sum: +0 ...
        ("add", (1.0, -1.0), "rup", 0.0),
        ("add", (1.0, -1.0), "rdn", -0.0),  # ... except rounding down (IEEE 754 6.3)
        ("sub", (2.5, 2.5), "rdn", -0.0),
        ("add", (0.0, -0.0), "rne", 0.0),
        ("add", (0.0, -0.0), "rdn", -0.0),
        ("add", (0.0, 0.0), "rdn", 0.0),
        ("add", (-0.0, -0.0), "rne", -0.0),
        ("add", (-0.0, -0.0), "rup", -0.0),
        ("fma", (0.0, INF, 1.0), "rne", NAN),
        ("fma", (INF, 0.0, NAN), "rne", NAN),
        ("fma", (INF, 1.0, -INF), "rne", NAN),
        ("fma", (-0.0, 1.0, 0.0), "rne", 0.0),
        ("fma", (-0.0, 1.0, -0.0), "rne", -0.0),
        ("fma", (2.0, 3.0, -6.0), "rdn", -0.0),
        ("fma", (2.0, 3.0, -6.0), "rne", 0.0),
        ("fma", (0.0, 1.0, -0.0), "rdn", -0.0),
        ("mul", (65504.0, 2.0), "rne", INF),  # overflow: per mode
        ("mul", (65504.0, 2.0), "rtz", 65504.0),
        ("mul", (-65504.0, 2.0), "rup", -65504.0),
        ("mul", (-65504.0, 2.0), "rdn", -INF),
        ("mul", (2.0**-24, 0.5), "rne", 0.0),  # tie between 0 and the smallest subnormal
        ("mul", (2.0**-24, 0.5), "rna", 2.0**-24),
        ("mul", (-(2.0**-24), 0.25), "rtz", -0.0),  # underflow keeps the sign
        ("mul", (-(2.0**-24), 0.25), "rdn", -(2.0**-24)),
        ("mul", (3 * 2.0**-24, 0.5), "rne", 2.0**-23),  # 1.5 smallest subnormals: to even
    ],
)
def test_ieee_special_cases_fp16(op, args, mode, want):
    got = float(getattr(sim, op)(*args, "fp16", mode))
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == want and math.copysign(1, got) == math.copysign(1, want), (got, want)
    ref = ops.scalar_op(op, *args, fmt="fp16", rounding=mode)
    assert _bits(ref) == _bits(got)


@pytest.mark.parametrize(
    "name,op,args,want",
    [
        ("float8_e4m3fn", "div", (1.0, 0.0), NAN),  # no inf: x/0 and overflow are NaN
        ("float8_e4m3fn", "mul", (448.0, 2.0), NAN),
        ("float8_e4m3fn", "add", (448.0, 16.0), 448.0),  # 464 ties back down to 448 (even)
        ("float8_e4m3fn", "add", (448.0, 32.0), NAN),
        ("float4_e2m1fn", "mul", (6.0, 6.0), 6.0),  # no inf, no NaN: saturates
        ("float4_e2m1fn", "div", (1.0, 0.0), 6.0),
        ("float8_e4m3fnuz", "sub", (1.0, 1.0), 0.0),
        ("float8_e4m3fnuz", "mul", (-0.0, 1.0), 0.0),  # no -0
        ("float8_e4m3fn", "mul", (3 * 2.0**-9, 0.5), 2.0**-8),  # tie at the smallest subnormal
        ("fp32", "mul", (3 * 2.0**-149, 0.5), 2.0**-148),
        ("bf16", "mul", (3 * 2.0**-133, 0.5), 2.0**-132),
    ],
)
def test_format_conventions(name, op, args, want):
    got = float(getattr(sim, op)(*args, name))
    assert _bits(got) == _bits(want), (got, want)
    assert _bits(ops.scalar_op(op, *args, fmt=name)) == _bits(want)


@pytest.mark.parametrize("name, sign", [("bf16", 0), ("float8_e4m3fn", 0), ("float8_e4m3fnuz", 1)])
def test_nan_results_have_the_formats_sign_on_every_host(name, sign):
    """A NaN the op makes (inf - inf: x86 gives -NaN, ARM +NaN) or passes on (a -NaN operand) is
    the format's quiet NaN: positive, negative in fnuz formats, whose NaN is the -0 code. An
    overflow onto an fn format's NaN keeps the value's sign, as quantize (and ml_dtypes) do."""
    want = np.uint32(0x7FC00000 | sign << 31)
    for got in (sim.add(np.inf, -np.inf, name), sim.mul(-np.nan, 1.0, name), sim.sqrt(-1.0, name),
                sim.fma(0.0, np.inf, 1.0, name), sim.div(-0.0, 0.0, name)):
        assert np.asarray(got).view(np.uint32) == want, (name, float(got))
    if name == "float8_e4m3fn":
        assert np.asarray(sim.mul(-448.0, 2.0, name)).view(np.uint32) == 0xFFC00000


def test_saturate_overrides_the_format():
    assert float(sim.mul(448.0, 2.0, "float8_e4m3fn", saturate=True)) == 448.0
    assert float(sim.div(-1.0, 0.0, "fp16", saturate=True)) == -65504.0
    assert float(sim.add(65504.0, 65504.0, "fp16", "rne", saturate=False)) == INF


# --- single rounding of fma ----------------------------------------------------------------------


def test_bf16_fma_rounds_once():
    """7 * 37 = 259 needs 9 bits; with c = -2**-20 the exact result is just below the bf16 tie
    258|260, so fma gives 258, while fp32 rounding of the product-sum lands exactly on the tie
    and bf16 RNE then picks 260: double rounding."""
    a, b, c = np.float32(7.0), np.float32(37.0), np.float32(-(2.0**-20))
    fused = float(sim.fma(a, b, c, "bf16"))
    product = sim.mul(a, b, "fp32")
    two_step = float(sim.quantize(sim.add(product, c, "fp32"), "bf16"))
    assert (fused, two_step) == (258.0, 260.0)
    ctx = _mpfr_context(sim.get_format("bf16"), "rne")
    assert fused == float(ctx.fma(*_mp([a, b, c])))

    # Measured over random bf16 triples whose addend sits ~2**-10..2**-30 below the product.
    rng = np.random.default_rng(8)
    n = 4000
    x = np.asarray(sim.quantize(rng.uniform(1, 16, n).astype(np.float32), "bf16"))
    y = np.asarray(sim.quantize(rng.uniform(1, 16, n).astype(np.float32), "bf16"))
    z = np.asarray(
        sim.quantize(
            (rng.choice([-1, 1], n) * np.ldexp(1.0, rng.integers(-30, -10, n))).astype(np.float32),
            "bf16",
        )
    )
    fused = np.asarray(sim.fma(x, y, z, "bf16"))
    two_step = np.asarray(sim.quantize(sim.add(sim.mul(x, y, "fp32"), z, "fp32"), "bf16"))
    differ = int(np.sum(fused != two_step))
    assert differ > 20, differ  # double rounding is common here ...
    spec = sim.get_format("bf16")
    want = np.array(
        [mpfr_op("fma", t, spec, "rne") for t in zip(_mp(x), _mp(y), _mp(z), strict=True)]
    )
    _assert_same(fused, want, (x, y, z), "fma bf16")  # ... and the fused result is MPFR's


# --- stochastic rounding -----------------------------------------------------------------------------


def test_sr_add_is_unbiased():
    """E[add(a, b, bf16, sr)] = a + b; rtz or rne would miss by a fixed fraction of an ulp."""
    a = np.float32(1.0)
    b = np.float32(3 * 2.0**-10 + 2.0**-13)  # a + b = 1 + 0.40625 ulp (bf16 ulp at 1 is 2**-7)
    exact = float(a) + float(b)
    n, keys = 20000, 10
    draws = np.concatenate(
        [
            np.asarray(sim.add(np.full(n, a), np.full(n, b), "bf16", "sr", key=jax.random.key(k)))
            for k in range(keys)
        ]
    )
    lo, hi = 1.0, 1.0 + 2.0**-7
    assert set(np.unique(draws)) == {lo, hi}  # only the two neighbours
    p = (exact - lo) / (hi - lo)
    sigma = (hi - lo) * math.sqrt(p * (1 - p) / draws.size)
    assert abs(draws.mean() - exact) < 5 * sigma, (draws.mean(), exact, sigma)


def test_sr_fma_probability_and_reproducibility():
    a, b, c = np.float32(1.5), np.float32(1.5), np.float32(2.0**-9)  # 2.25 + 2**-9: 1/8 ulp up
    key = jax.random.key(3)
    x = sim.fma(np.full(40000, a), b, c, "bf16", "sr", key=key)
    frac_up = float(np.mean(np.asarray(x) > 2.25))
    assert abs(frac_up - 0.125) < 5 * math.sqrt(0.125 * 0.875 / 40000), frac_up
    y = sim.fma(np.full(40000, a), b, c, "bf16", "sr", key=key)
    assert np.array_equal(np.asarray(x), np.asarray(y))  # same key, same bits
    z = np.asarray(sim.fma(np.full(40000, a), b, c, "bf16", "sr4", key=key))
    assert set(np.unique(z)) <= {2.25, 2.265625}


def test_sr_needs_a_key():
    with pytest.raises(ValueError, match="key"):
        sim.add(1.0, 2.0**-12, "bf16", "sr")


# --- interface -----------------------------------------------------------------------------------------


def test_jax_inputs_broadcasting_and_dtype():
    a = jnp.asarray(np.array([[1.0], [2.0]], np.float32))
    b = np.array([2.0**-149, 0.5, 3.0], np.float32)
    out = sim.add(a, b, "fp32")
    assert out.dtype == jnp.float32 and out.shape == (2, 3) and isinstance(out, jax.Array)
    tiny = jnp.asarray(np.float32(2.0**-149))  # a subnormal JAX input is not flushed
    assert float(sim.mul(tiny, 1.0, "fp32")) == 2.0**-149
    assert float(sim.add(tiny, tiny, "fp32")) == 2.0**-148
    h = np.array([1.0, 2.0], np.float16)
    assert np.array_equal(np.asarray(sim.sqrt(h, "fp16")), [1.0, np.sqrt(np.float16(2.0))])
    bf = jnp.asarray(np.array([3.0], ml_dtypes.bfloat16))
    assert float(sim.div(bf, 3.0, "bf16")[0]) == 1.0
    assert float(sim.sub(1, 2, "fp16")) == -1.0  # Python ints that float32 holds exactly


def test_inputs_are_not_pre_rounded():
    """Operands are used as given: 1 + 2**-8 is not a bf16 value (rne would make it 1), and
    1 + 2**-8 + 2**-10, rounded once, is above the tie."""
    a, b = np.float32(1 + 2.0**-8), np.float32(2.0**-10)
    assert float(sim.add(a, b, "bf16")) == 1.0 + 2.0**-7
    assert float(sim.add(sim.quantize(a, "bf16"), b, "bf16")) == 1.0


@pytest.mark.parametrize(
    "fmt,exc,match",
    [
        ("int8", ValueError, "int8.*float formats"),
        ("mxfp8_e4m3", ValueError, "mxfp8_e4m3.*block"),
        ("q7.8", ValueError, "q7.8"),
        ("fp99", ValueError, "unknown format 'fp99'"),
    ],
)
def test_bad_format(fmt, exc, match):
    with pytest.raises(exc, match=match):
        sim.add(1.0, 1.0, fmt)


def test_bad_operands():
    with pytest.raises(ValueError, match="float32 cannot hold exactly"):
        sim.add(0.1, 0.2, "bf16")
    with pytest.raises(ValueError, match="float32 cannot hold exactly"):
        sim.mul(np.array([1e300]), 1.0, "fp32")
    with pytest.raises(TypeError, match="dtype int"):
        sim.add(np.arange(3), 1.0, "fp16")
    with pytest.raises(TypeError, match=r"outside jax\.jit"):
        jax.jit(lambda x: sim.add(x, x, "fp16"))(jnp.ones(2))
    with pytest.raises(ValueError, match="unknown rounding"):
        sim.add(1.0, 1.0, "fp16", "nearest")
    with pytest.raises(ValueError, match="unknown op"):
        ops.scalar_op("pow", 1.0, 2.0, fmt="fp16")
