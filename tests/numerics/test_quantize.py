"""``quantize`` against oracles nobody here wrote: ml_dtypes, MPFR (gmpy2), SoftFloat, gfloat.

Float targets are every float format of the catalog with at most 16 bits. Inputs are every
float16 and every bfloat16 value, and every tie (and tie +-1 ulp of the input format) of each
target. Where an oracle differs from the documented conventions, the wrapper in ``oracles.py``
applies the convention (overflow to inf/NaN/max, no -0 in fnuz, ...), never our code.
"""

from __future__ import annotations

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import softfloatpy as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import (
    MODES,
    assert_same_bits,
    gfloat_round,
    ml_type,
    mpfr_round,
    mpfr_round_array,
)

from asicsim._src.numerics import FormatError, catalog, decode, get_format, quantize
from asicsim._src.numerics.scalar import round_float, round_int

FLOATS = {n: s for n, s in catalog().items() if s.kind == "float" and s.bits <= 16}
ML_FLOATS = [n for n in FLOATS if ml_type(n) is not None]


def all_values(dtype) -> np.ndarray:
    """Every value of a 16-bit float dtype, as that dtype."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)


F16 = all_values(np.float16)
BF16 = all_values(ml_dtypes.bfloat16)


def ml_reference(x32: np.ndarray, name: str) -> np.ndarray:
    """ml_dtypes' rounding of float32 input (float32, never float64: ml_dtypes would round twice)."""
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x32.astype(ml_type(name)).astype(np.float32)
    if FLOATS[name].nan == "none":  # ml_dtypes turns NaN into +-0 (or 6.0); we keep NaN (signed)
        ref = np.where(np.isnan(x32), np.copysign(np.float32(np.nan), x32), ref)
    return ref


def finite_grid(spec) -> np.ndarray:
    """All finite non-negative values of a float format, ascending (decoded from every code)."""
    codes = np.arange(1 << spec.bits, dtype=np.uint32).astype(np.uint16 if spec.bits > 8 else np.uint8)
    v = np.asarray(decode(codes, spec)).astype(np.float64)
    return np.unique(v[np.isfinite(v) & (v >= 0)])


def ties(spec) -> np.ndarray:
    """Every halfway point of the format (float64), including half the smallest quantum and the
    halfway point past max (towards the value the exponent range cuts off)."""
    grid = finite_grid(spec)
    if not spec.has_zero:
        grid = grid[grid > 0]
    top = grid[-1]
    past_max = math.ldexp(1.0, math.frexp(top)[1]) if spec.man_bits == 0 else top + (top - grid[-2])
    if spec.nan == "ones" and spec.man_bits > 0:
        past_max = top + (top - grid[-2])  # the NaN code's would-be value
    extended = np.concatenate([grid, [past_max]])
    mids = (extended[:-1] + extended[1:]) / 2
    return np.concatenate([mids, -mids])


def subsample(x: np.ndarray, n: int = 1500) -> np.ndarray:
    """All of ``x`` if small, else its 300 smallest and largest magnitudes and a random sample."""
    if x.size <= 2 * n:
        return x
    pick = np.random.default_rng(0).choice(x.size, n, replace=False)
    return np.concatenate([x[np.argsort(np.abs(x))][np.r_[:300, -300:0]], x[pick]])


def tie_inputs(spec, dtype) -> np.ndarray:
    """Ties of ``spec`` that ``dtype`` holds exactly, and their neighbours one ulp (of ``dtype``)
    either side, as ``dtype`` values."""
    t = ties(spec)
    with np.errstate(over="ignore", under="ignore"):
        tx = t.astype(np.float32).astype(dtype)
    exact = np.isfinite(tx.astype(np.float64)) & (tx.astype(np.float64) == t)
    tx = tx[exact]
    with np.errstate(over="ignore"):
        if dtype == ml_dtypes.bfloat16:  # no nextafter for bfloat16: step its bits
            b = tx.view(np.uint16)
            up, dn = (b + 1).view(dtype), (b - 1).view(dtype)
        else:
            up = np.nextafter(tx, np.array(np.inf, dtype))
            dn = np.nextafter(tx, np.array(-np.inf, dtype))
    out = np.concatenate([tx, up, dn])
    return out[np.isfinite(out.astype(np.float32))]


SPECIALS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.4028235e38, -3.4028235e38, 1e-45, -1e-45, 1e-40],
    np.float32,
)

# --- float16 / bfloat16 sweeps -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ML_FLOATS)
@pytest.mark.parametrize("src", ["float16", "bfloat16"])
def test_sweep_rne_vs_ml_dtypes(src, name):
    """All 65536 values of the source type, fed natively and as float32, to every target."""
    if name == "float8_e8m0fnu":
        pytest.skip("ml_dtypes rounds e8m0 ties up and mis-rounds subnormal input; see test_e8m0_vs_ml_dtypes")
    x = F16 if src == "float16" else BF16
    x32 = x.astype(np.float32)
    want = ml_reference(x32, name)
    # NaN signs count: -NaN in, or an overflow of -1000 onto an fn format, is ml_dtypes' -NaN
    assert_same_bits(quantize(x, name), want, x32, f"{src} -> {name} (native input)", nan="sign")
    assert_same_bits(quantize(x32, name), want, x32, f"{src} -> {name} (float32 input)", nan="sign")


def nan_and_overflow_inputs() -> np.ndarray:
    """Every NaN of float16 and bfloat16 (both signs, every payload) as float32, float32's own
    signalling and quiet NaNs, +-inf and values far beyond every format's max."""
    with np.errstate(invalid="ignore"):
        nans = np.concatenate([F16[np.isnan(F16)].astype(np.float32), BF16[np.isnan(BF16)].astype(np.float32)])
    own = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0xFFFFFFFF], np.uint32)
    return np.concatenate([nans, own.view(np.float32), np.float32([np.inf, -np.inf, 1e30, -1e30, 1000.0, -1000.0])])


@pytest.mark.parametrize("name", ML_FLOATS)
def test_nan_and_overflow_signs_vs_ml_dtypes(name):
    """Issue 29: quantize(-1000, "float8_e4m3fn", saturate=False) gave +NaN, ml_dtypes -NaN (0xFF).
    The NaN of every NaN input and every overflow has ml_dtypes' sign -- the input's, but negative
    in fnuz formats and positive in e8m0 -- from float32 and float64 input, in every rounding mode
    (NaN inputs: the mode cannot matter) and on the fast float path and the integer kernel alike."""
    x32 = nan_and_overflow_inputs()
    want = ml_reference(x32, name)
    with np.errstate(invalid="ignore"):
        x64 = x32.astype(np.float64)
    for x in (x32, x64, jnp.asarray(x32)):
        got = quantize(x, name, saturate=False)
        assert_same_bits(got, want, x32, f"{name} {x.dtype} rne", nan="sign")
    nan_in = np.isnan(x32)
    for mode in ("rna", "rtz", "rup", "rdn", "sr"):
        for x in (x32, x64):
            got = np.asarray(quantize(x[nan_in], name, mode, key=jax.random.key(0)))
            assert_same_bits(got, want[nan_in], x32[nan_in], f"{name} {x.dtype} {mode}", nan="sign")


def test_e8m0_vs_ml_dtypes():
    """ml_dtypes rounds e8m0 ties away from zero (so does MPFR at precision 1); we break ties to
    the even code (IEEE P3109, gfloat): so compare ml_dtypes with our ``rna`` on normal inputs."""
    x32 = np.concatenate([F16.astype(np.float32), BF16.astype(np.float32)])
    normal = ~np.isfinite(x32) | (np.abs(x32) >= np.finfo(np.float32).tiny) | (x32 == 0)
    x32 = x32[normal & (x32 >= 0)]
    want = ml_reference(x32, "float8_e8m0fnu")
    assert_same_bits(quantize(x32, "float8_e8m0fnu", "rna"), want, x32, "e8m0 rna vs ml_dtypes")
    # and ties to even: 3 = 1.5 * 2 sits between 2 (code 128, even) and 4 (code 129)
    got = np.asarray(quantize(np.array([3.0, 6.0, 12.0], np.float32), "float8_e8m0fnu"))
    np.testing.assert_array_equal(got, [2.0, 8.0, 8.0])


@pytest.mark.parametrize("name", list(FLOATS))
def test_fp16_sweep_vs_mpfr(name):
    """All float16 values in rna, rtz, rup, rdn (rne: ml_dtypes above; e8m0, which ml_dtypes
    rounds differently, and the slow test do rne against MPFR too)."""
    x32 = F16.astype(np.float32)
    modes = MODES if name == "float8_e8m0fnu" else MODES[1:]
    for mode in modes:
        want = mpfr_round_array(x32, FLOATS[name], mode)
        assert_same_bits(quantize(F16, name, mode), want, x32, f"float16 -> {name} {mode}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FLOATS))
def test_fp16_sweep_vs_mpfr_rne(name):
    x32 = F16.astype(np.float32)
    want = mpfr_round_array(x32, FLOATS[name], "rne")
    assert_same_bits(quantize(F16, name, "rne"), want, x32, f"float16 -> {name} rne")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FLOATS))
@pytest.mark.parametrize("mode", MODES)
def test_bf16_sweep_vs_mpfr(name, mode):
    x32 = BF16.astype(np.float32)
    want = mpfr_round_array(x32, FLOATS[name], mode)
    assert_same_bits(quantize(BF16, name, mode), want, x32, f"bfloat16 -> {name} {mode}")


@pytest.mark.parametrize("mode", MODES)
def test_bf16_sweep_vs_mpfr_fast(mode):
    """The default run's slice of the bfloat16 sweep: three targets (the slow test does all)."""
    x32 = BF16.astype(np.float32)
    for name in ("float16", "float8_e4m3fn", "float4_e2m1fn"):
        want = mpfr_round_array(x32, FLOATS[name], mode)
        assert_same_bits(quantize(BF16, name, mode), want, x32, f"bfloat16 -> {name} {mode}")


# --- ties and their neighbours -----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FLOATS))
def test_ties_are_ties(name):
    """The tie generator itself: every tie is strictly between two neighbours, equidistant."""
    spec = FLOATS[name]
    t = ties(spec)
    assert t.size >= 2 * (finite_grid(spec).size - 1)
    x32 = t.astype(np.float32)
    dn = np.asarray(quantize(x32, spec, "rtz"))
    up = np.asarray(quantize(x32, spec, "rna", saturate=False))
    ok = (np.abs(t) < spec.max) & ((t > 0) | spec.signed)
    np.testing.assert_array_equal((up[ok].astype(np.float64) + dn[ok]) / 2, t[ok])


@pytest.mark.parametrize("name", list(FLOATS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["f32", "f16", "bf16"])
def test_ties_rne_vs_ml_dtypes(name, dtype):
    if name == "float8_e8m0fnu" or ml_type(name) is None:
        pytest.skip("no ml_dtypes reference with ties to even")
    x = tie_inputs(FLOATS[name], dtype)
    if FLOATS[name].bits == 16:
        x = subsample(x, 8000)
    if x.size == 0 and name == np.dtype(dtype).name:
        pytest.skip("a format holds none of its own ties")
    assert x.size > 0
    x32 = x.astype(np.float32)
    assert_same_bits(quantize(x, name), ml_reference(x32, name), x32, f"ties of {name} in {np.dtype(dtype).name}")


@pytest.mark.parametrize("name", list(FLOATS))
@pytest.mark.parametrize("mode", MODES)
def test_ties_vs_mpfr(name, mode):
    spec = FLOATS[name]
    x32 = tie_inputs(spec, np.float32)
    x32 = np.concatenate([subsample(x32), SPECIALS])
    for sat in (None, True) if mode in ("rne", "rtz") else (None,):
        want = mpfr_round_array(x32, spec, mode, sat)
        assert_same_bits(quantize(x32, spec, mode, saturate=sat), want, x32, f"ties {name} {mode} sat={sat}")


# --- ties away: SoftFloat and the scalar reference ---------------------------------------------------

_SF_MODES = {
    "rne": sf.RoundingMode.NEAR_EVEN,
    "rna": sf.RoundingMode.NEAR_MAX_MAG,
    "rtz": sf.RoundingMode.MIN_MAG,
    "rup": sf.RoundingMode.MAX,
    "rdn": sf.RoundingMode.MIN,
}


def softfloat_f32_to_f16(x32: np.ndarray, mode: str) -> np.ndarray:
    sf.set_rounding_mode(_SF_MODES[mode])
    try:
        out = [
            sf.f32_to_f16(sf.Float32.from_bytes(int(b).to_bytes(4, "big"))).to_bytes()
            for b in x32.view(np.uint32)
        ]
    finally:
        sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    return np.array([int.from_bytes(o, "big") for o in out], np.uint16).view(np.float16).astype(np.float32)


@pytest.mark.parametrize("mode", MODES)
def test_fp16_target_vs_softfloat(mode):
    """Berkeley SoftFloat f32_to_f16 (IEEE: overflow per mode) on the bfloat16 sweep and on every
    float16 tie +-1 ulp of float32 -- ``rna`` is SoftFloat's near_maxMag."""
    rng = np.random.default_rng(1)
    x32 = np.concatenate(
        [
            BF16.astype(np.float32),
            tie_inputs(FLOATS["float16"], np.float32),
            rng.standard_normal(2000).astype(np.float32) * np.float32(1e-5),
            SPECIALS,
        ]
    )
    want = softfloat_f32_to_f16(x32, mode)
    assert_same_bits(quantize(x32, "float16", mode), want, x32, f"f32 -> f16 {mode} vs SoftFloat")


@pytest.mark.parametrize(
    "name", ["float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float4_e2m1fn", "float8_e4m3fnuz", "float8_e8m0fnu"]
)
@pytest.mark.parametrize("mode", MODES)
def test_scalar_reference_vs_mpfr(name, mode):
    """asicsim._src.numerics.scalar (Fractions) agrees with MPFR: it is a reference for ops.py/mac.py."""
    spec = FLOATS[name]
    x32 = np.concatenate([tie_inputs(spec, np.float32), SPECIALS])
    for x in x32.tolist():
        want = mpfr_round(x, spec, mode)
        got = round_float(x, spec, mode)
        assert (math.isnan(want) and math.isnan(got)) or (
            want == got and math.copysign(1, want) == math.copysign(1, got)
        ), (x, got, want)


# --- float64 input: one rounding ---------------------------------------------------------------------


def test_float64_rounds_once():
    # 1 + 2**-8 + 2**-40: float32 drops the 2**-40 and lands exactly on a bfloat16 tie, which
    # ties-to-even sends down to 1.0; the true value is above the tie, so bf16 is 1 + 2**-7.
    x = np.array([1 + 2**-8 + 2**-40, -(1 + 2**-8 + 2**-40)], np.float64)
    double = np.asarray(quantize(x.astype(np.float32), "bf16"))
    once = np.asarray(quantize(x, "bf16"))
    np.testing.assert_array_equal(double, [1.0, -1.0])
    np.testing.assert_array_equal(once, [1 + 2**-7, -(1 + 2**-7)])
    want = [mpfr_round(v, FLOATS["bfloat16"], "rne") for v in x.tolist()]
    np.testing.assert_array_equal(once, want)
    assert once.dtype == np.float32


@pytest.mark.parametrize("name", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2fnuz", "float4_e2m1fn", "float8_e8m0fnu"])
@pytest.mark.parametrize("mode", MODES)
def test_float64_vs_mpfr(name, mode):
    spec = FLOATS[name]
    rng = np.random.default_rng(7)
    t = ties(spec)
    x = np.concatenate(
        [
            rng.standard_normal(1000) * 2.0 ** rng.integers(-30, 30, 1000),
            subsample(t, 500),
            subsample(t, 500) * (1 + 2.0**-40),
            subsample(t, 500) * (1 - 2.0**-40),
            [5e-324, -5e-324, 1e300, -1e300, 3.4028235677973366e38, 3.4028235677973367e38 * 1.0000001],
            SPECIALS.astype(np.float64),
        ]
    )
    want = mpfr_round_array(x, spec, mode)
    assert_same_bits(quantize(x, spec, mode), want, x, f"float64 -> {name} {mode}")


# --- hypothesis: any e{E}m{M} format, float32 input, MPFR and gfloat ----------------------------------


@st.composite
def float_formats(draw):
    """Grammar names e{E}m{M}[fn|fnuz|fnu]b{bias} with any bias that keeps the format in float32."""
    e = draw(st.integers(2, 8))
    m = draw(st.integers(0, 10))
    suffix = draw(st.sampled_from(["", "fn", "fnuz", "fnu"]))
    if suffix == "" and m == 0:
        suffix = "fn"  # IEEE-like e{E}m0 has no NaN code and is refused (test_formats)
    bits = e + m + (suffix != "fnu")
    nan = {"": "ieee", "fnuz": "negzero"}.get(suffix, "ones" if bits >= 8 else "none")
    top = (1 << e) - 1 - (nan == "ieee") - (nan == "ones" and m == 0)  # largest finite field
    pure_exponent = suffix == "fnu" and m == 0
    bias = draw(st.integers(max(0, top - 127), 149 if pure_exponent else 150 - m))
    return get_format(f"e{e}m{m}{suffix}b{bias}")


@st.composite
def near_grid(draw, spec):
    """float32 values at, between, halfway between and one ulp off a format's grid points."""
    k = draw(st.integers(0, 1 << (spec.man_bits + 1)))
    e = draw(st.integers(spec.smallest_subnormal_exp, spec.emax + 1))
    half = draw(st.sampled_from([0.0, 0.5, 0.25, 0.75]))
    step = draw(st.sampled_from([0, 1, -1]))
    with np.errstate(over="ignore"):  # past float32's top the input is inf, on purpose
        v = np.float32(math.ldexp(k + half, e - spec.man_bits) if e - spec.man_bits >= -149 else 0.0)
        v = np.nextafter(v, np.float32(np.inf * step)) if step else v
    return float(-v if draw(st.booleans()) else v)


@st.composite
def format_and_inputs(draw):
    spec = draw(float_formats())
    xs = draw(st.lists(st.floats(width=32) | near_grid(spec), min_size=1, max_size=24))
    return spec, np.array(xs, np.float32)


def _check_any_format(spec, x32, sat):
    for mode in MODES:
        got = np.asarray(quantize(x32, spec, mode, saturate=sat))
        assert_same_bits(got, mpfr_round_array(x32, spec, mode, sat), x32, f"{spec.name} {mode} sat={sat} vs MPFR")
        want_g = np.array([gfloat_round(v, spec, mode, sat) for v in x32.tolist()], np.float32)
        assert_same_bits(got, want_g, x32, f"{spec.name} {mode} sat={sat} vs gfloat")
        host = np.asarray(quantize(x32.astype(np.float64), spec, mode, saturate=sat))
        assert_same_bits(host, got, x32, f"{spec.name} {mode}: float64 host path vs float32 path", nan="sign")
        ref = np.array([round_float(v, spec, mode, saturate=sat) for v in x32.tolist()], np.float32)
        assert_same_bits(ref, got, x32, f"{spec.name} {mode}: scalar.round_float", nan="sign")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(format_and_inputs(), st.sampled_from([None, True]))
def test_any_format_vs_mpfr_and_gfloat(case, sat):
    _check_any_format(*case, sat)


@pytest.mark.slow  # each example compiles its own format: 150 take about 90 s on 2 cores
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(format_and_inputs(), st.sampled_from([None, True]))
def test_any_format_vs_mpfr_and_gfloat_long(case, sat):
    _check_any_format(*case, sat)


# --- integers and fixed point -----------------------------------------------------------------------

INTS = ["int8", "uint8", "int4", "q7.8", "q1.14"]  # the slow run adds uint4, int2, q3.12, int16


def int_inputs() -> np.ndarray:
    rng = np.random.default_rng(3)
    x = np.concatenate(
        [
            F16.astype(np.float32),
            (rng.integers(-40000, 40000, 5000) / 2.0 ** rng.integers(0, 16, 5000)).astype(np.float32),
            (np.arange(-600, 600) + 0.5).astype(np.float32),  # integer ties
            (np.arange(-600, 600) / 512 + 1 / 1024).astype(np.float32),  # q*.9 / q*.8 grid ties
            SPECIALS,
        ]
    )
    return x[np.isfinite(x) | np.isnan(x)]


def numpy_int_round(x32: np.ndarray, spec, mode: str, sat: bool) -> np.ndarray:
    """numpy's rounding of x * 2**F to an integer k (np.round is ties-to-even), then saturate
    or wrap in int64 -- for |x| small enough that int64 holds k."""
    y = x32.astype(np.float64) * 2.0**spec.frac_bits
    k = {
        "rne": np.round,
        "rna": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5),
        "rtz": np.trunc,
        "rup": np.ceil,
        "rdn": np.floor,
    }[mode](y)
    k = k.astype(np.int64)
    if sat:
        k = np.clip(k, spec.kmin, spec.kmax)
    else:
        k = k & ((1 << spec.bits) - 1)
        if spec.signed:
            k = np.where(k >= 1 << (spec.bits - 1), k - (1 << spec.bits), k)
    return (k.astype(np.float64) * 2.0**-spec.frac_bits).astype(np.float32)


@pytest.mark.parametrize(
    "name", INTS + [pytest.param(n, marks=pytest.mark.slow) for n in ("uint4", "int2", "q3.12", "int16")]
)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sat", [True, False], ids=["saturate", "wrap"])
def test_int_vs_numpy(name, mode, sat):
    spec = get_format(name)
    x32 = int_inputs()
    fin = np.isfinite(x32) & (np.abs(x32) < 2.0**40)
    got = np.asarray(quantize(x32[fin], spec, mode, saturate=sat))
    assert_same_bits(got, numpy_int_round(x32[fin], spec, mode, sat), x32[fin], f"{name} {mode} sat={sat}")


@pytest.mark.parametrize("name", ["int8", "uint8", "int4", "q7.8", "q1.14"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sat", [True, False], ids=["saturate", "wrap"])
def test_int_vs_scalar(name, mode, sat):
    spec = get_format(name)
    x32 = np.concatenate([int_inputs()[::41], np.array([1e30, -1e30, 2.0**31 + 2**8, 3.0 * 2**-20], np.float32)])
    got = np.asarray(quantize(x32, spec, mode, saturate=sat))
    want = np.array([round_int(v, spec, mode, saturate=sat) for v in x32.tolist()], np.float32)
    assert_same_bits(got, want, x32, f"{name} {mode} sat={sat} vs scalar.round_int", nan="sign")


def test_int_specials():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 127.5, -128.5, 0.5, -0.5], np.float32)
    got = np.asarray(quantize(x, "int8"))
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:], [127, -128, 0, 127, -128, 0, 0])
    assert not np.signbit(got[3]) and not np.signbit(got[7])  # integers have no -0
    np.testing.assert_array_equal(np.asarray(quantize(np.float32([300, -129]), "int8", saturate=False)), [44, 127])
    np.testing.assert_array_equal(np.asarray(quantize(np.float32([-1, 256.0]), "uint8")), [0, 255])


# --- stochastic rounding -----------------------------------------------------------------------------


def _sr_samples(x32, fmt, rounding, n_keys, start=0):
    keys = jax.random.split(jax.random.key(1234 + start), n_keys)
    xs = jnp.asarray(x32)
    return np.stack([np.asarray(quantize(xs, fmt, rounding, key=k)) for k in keys])


def test_sr_unbiased():
    """Mean over 400 keys of sr(x) is x within 5 standard errors (the spread of one rounding is
    at most half a quantum), for values all over the float8 e4m3 grid, subnormals included."""
    rng = np.random.default_rng(11)
    x32 = (rng.uniform(-1, 1, 256) * 2.0 ** rng.integers(-9, 8, 256)).astype(np.float32)
    samples = _sr_samples(x32, "float8_e4m3fn", "sr", 400)
    lo = np.asarray(quantize(x32, "float8_e4m3fn", "rdn"))
    hi = np.asarray(quantize(x32, "float8_e4m3fn", "rup"))
    assert np.all((samples == lo) | (samples == hi))  # only the two neighbours ever appear
    p = (x32.astype(np.float64) - lo) / np.where(hi > lo, hi - lo, 1)
    freq = np.mean(samples == hi, axis=0)
    se = np.sqrt(p * (1 - p) / samples.shape[0]) + 1e-9
    assert np.all(np.abs(freq - np.where(hi > lo, p, 0.0)) <= 5 * se + 1e-12), np.max(np.abs(freq - p) / se)
    mean = samples.astype(np.float64).mean(axis=0)
    assert abs((mean - x32).sum()) <= 5 * np.sqrt((((hi - lo) / 2) ** 2).sum() / samples.shape[0])


def test_sr_n_bits_probability():
    """sr2 looks at the top two dropped bits only: a dropped fraction of 0.7 (binary 0.1011...)
    is seen as 0.5, so it rounds up half of the time, while exact sr rounds up 70% of the time."""
    frac = 0.7
    x = np.full(4096, 1 + frac * 2.0**-7, np.float32)  # bfloat16 quantum at 1 is 2**-7
    hi = np.float32(1 + 2.0**-7)
    up2 = np.mean(_sr_samples(x, "bf16", "sr2", 8) == hi)
    up = np.mean(_sr_samples(x, "bf16", "sr", 8) == hi)
    n = 8 * 4096
    assert abs(up2 - 0.5) < 5 * math.sqrt(0.25 / n), up2
    assert abs(up - np.float64(x[0] - 1) * 2**7) < 5 * math.sqrt(0.21 / n), up
    # sr1 on a fraction below one half never rounds up; sr3 sees 0.7 as 0.625
    assert np.mean(_sr_samples(np.full(512, 1 + 0.4 * 2.0**-7, np.float32), "bf16", "sr1", 4) == hi) == 0
    up3 = np.mean(_sr_samples(x, "bf16", "sr3", 8) == hi)
    assert abs(up3 - 0.625) < 5 * math.sqrt(0.625 * 0.375 / n), up3


def test_sr_small_values_probability():
    """Below one quantum (into the subnormal gap of e4m3fn) the result is 0 or the quantum."""
    q = 2.0**-9
    x = np.full(4096, 0.3 * q, np.float32)
    s = _sr_samples(x, "float8_e4m3fn", "sr", 8)
    assert set(np.unique(s)) <= {0.0, np.float32(q)}
    assert abs(np.mean(s > 0) - 0.3) < 5 * math.sqrt(0.21 / s.size)


def test_sr_reproducible_and_key_dependent():
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    k1, k2 = jax.random.key(1), jax.random.key(2)
    a = np.asarray(quantize(x, "e4m3fn", "sr", key=k1))
    b = np.asarray(quantize(x, "e4m3fn", "sr", key=k1))
    c = np.asarray(quantize(x, "e4m3fn", "sr", key=k2))
    np.testing.assert_array_equal(a, b)
    assert (a != c).sum() > 100
    raw = np.asarray(quantize(x, "e4m3fn", "sr", key=jax.random.PRNGKey(1)))  # raw uint32[2] keys too
    np.testing.assert_array_equal(raw, np.asarray(quantize(x, "e4m3fn", "sr", key=jax.random.PRNGKey(1))))


def test_sr_float64_host_path():
    x = np.full(20000, 1 + 0.25 * 2.0**-7 + 2.0**-40, np.float64)
    k = jax.random.key(5)
    a = np.asarray(quantize(x, "bf16", "sr", key=k))
    np.testing.assert_array_equal(a, np.asarray(quantize(x, "bf16", "sr", key=k)))
    assert set(np.unique(a)) == {1.0, np.float32(1 + 2.0**-7)}
    assert abs(np.mean(a > 1) - 0.25) < 5 * math.sqrt(0.1875 / x.size)
    assert not np.array_equal(a, np.asarray(quantize(x, "bf16", "sr", key=jax.random.key(6))))


def test_sr_needs_key():
    with pytest.raises(ValueError, match="needs a key"):
        quantize(np.float32([1.0]), "bf16", "sr")


def test_sr_scalar_reference_probabilities():
    """scalar.round_float's sr{N} threshold: u below the truncated fraction rounds up."""
    spec = get_format("bf16")
    x = Fraction(1) + Fraction(7, 10) * Fraction(1, 128)
    assert round_float(x, spec, "sr2", u=Fraction(49, 100)) > 1
    assert round_float(x, spec, "sr2", u=Fraction(1, 2)) == 1
    assert round_float(x, spec, "sr", u=Fraction(69, 100)) > 1


# --- jit / vmap / grad -------------------------------------------------------------------------------


def test_jit_vmap_grad():
    x = jnp.asarray(np.random.default_rng(2).standard_normal((4, 33)).astype(np.float32))
    want = np.asarray(quantize(x, "e4m3fn"))
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: quantize(v, "e4m3fn"))(x)), want)
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v: quantize(v, "e4m3fn"))(x)), want)
    g = jax.grad(lambda v: jnp.sum(quantize(v, "e4m3fn") * v))(x)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(want + x))  # d/dv q(v)*v, STE: q + v
    g_sr = jax.grad(lambda v: jnp.sum(quantize(v, "fp4", "sr", key=jax.random.key(0))))(x)
    np.testing.assert_array_equal(np.asarray(g_sr), np.ones_like(x))
    g_mx = jax.grad(lambda v: jnp.sum(quantize(v, "mxfp8")))(x)
    np.testing.assert_array_equal(np.asarray(g_mx), np.ones_like(x))
    k = jax.random.key(3)
    in_jit = jax.jit(lambda v, key: quantize(v, "bf16", "sr", key=key))(x, k)
    np.testing.assert_array_equal(np.asarray(in_jit), np.asarray(quantize(x, "bf16", "sr", key=k)))


def test_no_recompilation():
    from asicsim._src.numerics.quantize import _quantize_jit

    x = np.random.default_rng(0).standard_normal(77).astype(np.float32)
    quantize(x, "float8_e5m2", "rtz")
    n = _quantize_jit._cache_size()
    quantize(x + np.float32(1), "float8_e5m2", "rtz")
    quantize(jnp.asarray(x), get_format("float8_e5m2"), "rtz")
    assert _quantize_jit._cache_size() == n
    quantize(x, "float8_e5m2", "rne")  # another mode is another program
    assert _quantize_jit._cache_size() == n + 1


# --- bad input ---------------------------------------------------------------------------------------


def test_rejects_integer_arrays():
    with pytest.raises(TypeError, match="floating-point array, got dtype int32"):
        quantize(np.arange(4, dtype=np.int32), "bf16")
    with pytest.raises(TypeError, match="floating-point"):
        quantize(jnp.arange(4), "e4m3fn")


def test_rejects_int_wider_than_carrier():
    with pytest.raises(ValueError, match="not exact in the float32"):
        quantize(np.float32([1.0]), "int32")
    with pytest.raises(ValueError, match="not exact in the float32"):
        quantize(np.float32([1.0]), "q20.10")


def test_rejects_bad_rounding_and_format():
    with pytest.raises(ValueError, match=r"unknown rounding 'nearest'.*rne, rna"):
        quantize(np.float32([1.0]), "bf16", "nearest")
    with pytest.raises(ValueError, match="1 <= N <= 32"):
        quantize(np.float32([1.0]), "bf16", "sr40", key=jax.random.key(0))
    with pytest.raises(FormatError, match="did you mean 'bfloat16'"):
        quantize(np.float32([1.0]), "bfloat61")
    with pytest.raises(FormatError, match="e9m3"):
        quantize(np.float32([1.0]), "e9m3")


def test_python_scalars_and_shapes():
    assert float(quantize(1.0 + 2**-9, "bf16")) == 1.0  # a Python float is float64: one rounding
    assert float(quantize(1.0 + 2**-8 + 2**-40, "bf16")) == 1 + 2**-7
    assert float(quantize(3, "fp4")) == 3.0
    assert quantize(np.zeros((2, 0, 3), np.float32), "bf16").shape == (2, 0, 3)
    assert quantize(np.float32(2.5), "int8").shape == ()


@pytest.mark.parametrize("mode", MODES)
def test_float32_target_is_identity(mode):
    """Rounding float32 onto float32 changes nothing (it once added the mantissa's last bit)."""
    rng = np.random.default_rng(4)
    bits = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([bits.view(np.float32), SPECIALS, np.arange(1, 300, dtype=np.uint32).view(np.float32)])
    got = np.asarray(quantize(x, "float32", mode))
    assert_same_bits(got, x, x, f"float32 -> float32 {mode}")
    with np.errstate(invalid="ignore"):  # signalling NaNs
        x64 = x.astype(np.float64)
    assert_same_bits(np.asarray(quantize(x64, "float32", mode)), x, x, "float64 path")


@pytest.mark.parametrize("fmt, x", [
    ("int8", [0.3, -0.3, 2.7, -126.6]),
    ("q7.8", [0.3 / 256, -2.7 / 256, 1.0 + 0.9 / 256]),
    ("float4_e2m1fn", [0.3, 2.6, -5.5]),
    ("mxint8", [1.0] + [0.3 / 64] * 31),  # scale 1: elements below one step of 2**-6
    ("mxfp4", [4.0] + [0.7] * 31),
])
def test_sr_unbiased_other_formats(fmt, x):
    """Mean of sr over 1000 keys is within 5 standard errors of x (integers, fp4, MX blocks)."""
    x32 = np.array(x, np.float32)
    samples = _sr_samples(x32, fmt, "sr", 1000, start=7).astype(np.float64)
    lo = np.asarray(quantize(x32, fmt, "rdn")).astype(np.float64)
    hi = np.asarray(quantize(x32, fmt, "rup")).astype(np.float64)
    se = (hi - lo) / 2 / math.sqrt(samples.shape[0]) + 1e-12
    assert np.all(np.abs(samples.mean(axis=0) - x32) <= 5 * se), (samples.mean(axis=0), x32)


@pytest.mark.parametrize("name", [n for n in ML_FLOATS if n not in ("float16", "bfloat16")])
def test_native_ml_dtypes_input(name):
    """Every code of an ml_dtypes float8/6/4 array, passed natively, is decoded bit-exactly."""
    codes = np.arange(1 << FLOATS[name].bits, dtype=np.uint32).astype(np.uint8)
    x = codes.view(ml_type(name))
    # NaN signs count (e4m3fn 0xFF, the fnuz 0x80 are -NaN), from numpy and JAX arrays alike,
    # where JAX has the type (it has no float8_e5m3fnu up to jax 0.11)
    inputs = [x] if FLOATS[name].bits < 8 else [x, *jax_array_of(x)]
    for xi in inputs:
        assert_same_bits(quantize(xi, "float32"), x.astype(np.float32), codes, f"{name} input", nan="sign")
        assert_same_bits(quantize(xi, "bf16"), ml_reference(x.astype(np.float32), "bfloat16"), codes,
                         f"{name} -> bf16", nan="sign")


def jax_array_of(x: np.ndarray) -> list:
    """``[jnp.asarray(x)]``, or ``[]`` where JAX has no array type for ``x``'s dtype."""
    try:
        return [jnp.asarray(x)]
    except TypeError:
        return []


def test_native_jax_float4_input():
    x = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
    assert_same_bits(quantize(jnp.asarray(x), "float32"), x.astype(np.float32), x, "jax float4 input")


def test_unsigned_and_zero_less_conventions():
    """Unsigned formats have no negative numbers: NaN where the format has a NaN, else its lowest
    value; a format with no zero (e8m0) maps 0 to NaN, or to its smallest value if it has no NaN."""
    x = np.float32([0.0, -0.0, -1.0, -np.inf, 1e-30, 3.0])
    np.testing.assert_array_equal(np.asarray(quantize(x, "e4m3fnu")), [0, 0, 0, 0, 0, 3])  # 7 bits, no NaN
    got = np.asarray(quantize(x, "e5m3fnu"))  # 8 bits: NaN at all-ones
    assert np.isnan(got[2:4]).all() and list(got[[0, 1, 4, 5]]) == [0, 0, 0, 3]
    got = np.asarray(quantize(x, "e8m0fnu"))
    assert np.isnan(got[:4]).all() and list(got[4:]) == [2.0**-100, 2.0]
    np.testing.assert_array_equal(np.asarray(quantize(x, "e2m0fnu")), [0.5, 0.5, 0.5, 0.5, 0.5, 2.0])  # tie: even code
    assert get_format("e4m3fnu").min == 0 and get_format("e8m0fnu").min == 2.0**-127
