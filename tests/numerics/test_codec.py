"""``encode`` / ``decode``: every code of every <=16-bit float format, against ml_dtypes and gfloat."""

from __future__ import annotations

import gfloat
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import assert_same_bits, gfloat_info, ml_type

from asicsim._src.numerics import catalog, decode, encode, get_format, quantize

FLOATS = {n: s for n, s in catalog().items() if s.kind == "float" and s.bits <= 16}

# The one code each format writes for NaN, written out from the formats' definitions.
CANONICAL_NAN = {
    "float16": 0x7E00,  # quiet NaN, positive
    "bfloat16": 0x7FC0,
    "float8_e5m2": 0x7E,
    "float8_e4m3": 0x7C,  # IEEE-like E4M3: exponent 1111, quiet bit
    "float8_e3m4": 0x78,
    "float8_e4m3fn": 0x7F,  # OCP: S.1111.111
    "float8_e4m3fnuz": 0x80,  # fnuz: the negative-zero code
    "float8_e5m2fnuz": 0x80,
    "float8_e4m3b11fnuz": 0x80,
    "float8_e8m0fnu": 0xFF,
    "float8_e5m3fnu": 0xFF,
}


def all_codes(bits: int) -> np.ndarray:
    return np.arange(1 << bits, dtype=np.uint32).astype(np.uint8 if bits <= 8 else np.uint16)


def test_catalog_floats_all_covered():
    """Every <=16-bit float of the catalog has an ml_dtypes type (so the sweeps below cover all)."""
    assert set(FLOATS) == {n for n in FLOATS if ml_type(n) is not None}
    assert len(FLOATS) >= 13
    # and every float type ml_dtypes knows is a catalog format, so the sweeps cover them all
    known = {n for n in dir(ml_dtypes) if n.startswith(("float", "bfloat")) and isinstance(getattr(ml_dtypes, n), type)}
    assert known and known <= set(FLOATS), known - set(FLOATS)


@pytest.mark.parametrize("name", list(FLOATS))
def test_decode_every_code_vs_ml_dtypes(name):
    spec = FLOATS[name]
    codes = all_codes(spec.bits)
    got = np.asarray(decode(codes, name))
    assert got.dtype == np.float32
    want = codes.view(ml_type(name)).astype(np.float32)
    # bit for bit, NaNs included (e4m3fn 0xFF is -NaN, the fnuz NaN 0x80 is -NaN), but for the
    # payloads that float16 and bfloat16 keep: decode gives the quiet NaN of the code's sign
    assert_same_bits(got, want, codes, f"decode {name}", nan="exact" if spec.bits <= 8 else "sign")


@pytest.mark.parametrize("name", list(FLOATS))
def test_encode_decode_round_trip(name):
    spec = FLOATS[name]
    codes = all_codes(spec.bits)
    values = decode(codes, name)
    back = np.asarray(encode(values, name))
    assert back.dtype == codes.dtype
    nan = np.isnan(np.asarray(values))
    want = codes.copy()
    if spec.has_nan:  # the canonical NaN code, of the decoded NaN's sign where there is one per sign
        want[nan] = (CANONICAL_NAN.get(name, 0) | nan_sign_bit(spec, codes))[nan]
    else:
        assert not nan.any()
    np.testing.assert_array_equal(back, want)
    # ml_dtypes writes the same codes, NaNs included
    with np.errstate(invalid="ignore"):
        ml_codes = np.asarray(values).astype(ml_type(name)).view(codes.dtype)
    np.testing.assert_array_equal(back, ml_codes)


def nan_sign_bit(spec, codes: np.ndarray) -> np.ndarray:
    """The sign bit of ``codes`` where the format has a NaN code of each sign, else 0."""
    if spec.signed and spec.nan in ("ieee", "ones"):
        return codes & codes.dtype.type(1 << (spec.bits - 1))
    return np.zeros_like(codes)


@pytest.mark.parametrize("name", [n for n in FLOATS if n != "float8_e8m0fnu"])
@pytest.mark.parametrize("src", ["float16", "bfloat16"])
def test_encode_rounds_like_ml_dtypes(name, src):
    """encode = quantize + pack: the codes of every float16/bfloat16 value equal ml_dtypes',
    NaN codes included: an overflow onto an fn format keeps its sign (-1000 -> 0xFF in e4m3fn)."""
    dtype = np.float16 if src == "float16" else ml_dtypes.bfloat16
    x32 = all_codes(16).view(dtype).astype(np.float32)
    x32 = x32[~np.isnan(x32)]
    codes = np.asarray(encode(x32, name))
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x32.astype(ml_type(name))
    np.testing.assert_array_equal(codes, ref.view(codes.dtype))


@pytest.mark.parametrize("name", [n for n in FLOATS if FLOATS[n].has_nan])
def test_encode_nan_and_overflow_signs_like_ml_dtypes(name):
    """NaN of either sign, +-inf and +-overflow from float32 and float64: ml_dtypes' codes."""
    big = min(2.0 * FLOATS[name].max, 3e38)
    for dtype in (np.float32, np.float64):
        x = np.array([np.nan, -np.nan, np.inf, -np.inf, big, -big, 1e38, -1e38], dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            want = x.astype(ml_type(name)).view(code_dtype_np(FLOATS[name]))
        np.testing.assert_array_equal(np.asarray(encode(x, name)), want, err_msg=str(dtype))


def code_dtype_np(spec):
    return np.uint8 if spec.bits <= 8 else np.uint16


# --- any e{E}m{M}: codes against gfloat's decoder ---------------------------------------------------


@st.composite
def small_formats(draw):
    e = draw(st.integers(2, 8))
    m = draw(st.integers(0, max(0, 9 - e)))
    suffix = draw(st.sampled_from(["", "fn", "fnuz", "fnu"]))
    if suffix == "" and m == 0:
        suffix = "fnu"
    bits = e + m + (suffix != "fnu")
    nan = {"": "ieee", "fnuz": "negzero"}.get(suffix, "ones" if bits >= 8 else "none")
    top = (1 << e) - 1 - (nan == "ieee") - (nan == "ones" and m == 0)
    pure_exponent = suffix == "fnu" and m == 0
    bias = draw(st.integers(max(0, top - 127), 149 if pure_exponent else 150 - m))
    return get_format(f"e{e}m{m}{suffix}b{bias}")


@settings(max_examples=15, deadline=None)
@given(small_formats())
def test_any_format_codes_vs_gfloat(spec):
    """Every code of a random format (biases down to the float32 subnormal range included):
    decode agrees with gfloat.decode_float, and encode(decode(c)) == c except NaNs."""
    codes = all_codes(spec.bits)
    got = np.asarray(decode(codes, spec))
    fi = gfloat_info(spec)
    want = np.array([gfloat.decode_float(fi, int(c)).fval for c in codes], np.float64).astype(np.float32)
    assert_same_bits(got, want, codes, f"decode {spec.name} vs gfloat")
    back = np.asarray(encode(got, spec)).astype(np.int64)
    nan = np.isnan(got)
    np.testing.assert_array_equal(back[~nan], codes[~nan])
    if nan.any():  # one canonical NaN code (of each sign, where the format has two)
        canonical = back[nan] & ~np.int64(nan_sign_bit(spec, np.int64(1 << (spec.bits - 1))))
        assert len(set(canonical.tolist())) == 1
        np.testing.assert_array_equal(back[nan] - canonical, nan_sign_bit(spec, codes.astype(np.int64))[nan])
        assert np.isnan(np.asarray(decode(back[nan][:1].astype(codes.dtype), spec))).all()


def test_float32_subnormal_normals_round_trip():
    """Values the format holds as normals but float32 only as subnormals (e8m0's 2**-127)."""
    np.testing.assert_array_equal(np.asarray(decode(np.uint8([0, 1]), "e8m0fnu")), [2.0**-127, 2.0**-126])
    np.testing.assert_array_equal(np.asarray(encode(np.float32([2.0**-127, 2.0**-126]), "e8m0fnu")), [0, 1])
    x = np.float32([2.0**-130, 1.25 * 2.0**-130, 1.875 * 2.0**-127, 1.5 * 2.0**-134, 3 * 2.0**-137])
    c = encode(x, "e8m3b135")
    np.testing.assert_array_equal(np.asarray(decode(c, "e8m3b135")), x)


# --- integers and fixed point -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["int8", "uint8", "int4", "uint4", "int2", "q7.8", "q1.14", "int16"])
def test_int_codes(name):
    spec = get_format(name)
    codes = all_codes(spec.bits)
    k = codes.astype(np.int64)
    if spec.signed:
        k = np.where(k >= 1 << (spec.bits - 1), k - (1 << spec.bits), k)
    want = (k * 2.0**-spec.frac_bits).astype(np.float32)
    got = np.asarray(decode(codes, name))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(encode(got, name)), codes)


def test_int_encode_rounds_and_saturates():
    np.testing.assert_array_equal(np.asarray(encode(np.float32([2.5, -2.5, 300, -300]), "int8")), [2, 254, 127, 128])
    np.testing.assert_array_equal(np.asarray(encode(np.float32([1 / 512, 3 / 512]), "q7.8")), [0, 2])


# --- block formats -------------------------------------------------------------------------------------

BLOCKS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8", "msfp16", "msfp12"]


@pytest.mark.parametrize("name", BLOCKS)
def test_block_encode_decode_round_trip(name):
    rng = np.random.default_rng(5)
    # whole float32 range per row: scales down to 2**-127 and element values that are float32
    # subnormals (encode once multiplied them by 2**-scale, which XLA flushed)
    x = (rng.standard_normal((9, 70)) * 2.0 ** np.array([[0], [5], [-9], [40], [-20], [-127], [-134], [-140], [120]])).astype(np.float32)
    x[1] = 0.0
    x[2, 3] = np.nan
    x[3, 40] = np.inf
    codes, scales = encode(x, name)
    spec = get_format(name)
    assert codes.shape[-1] == spec.block_size
    assert codes.shape[0] == scales.shape[0]
    assert scales.dtype == jnp.uint8
    got = np.asarray(decode(codes, name, scales=scales, shape=x.shape))
    want = np.asarray(quantize(x, name))
    assert_same_bits(got, want, x, f"{name} round trip")
    b = spec.block_size  # a NaN or inf poisons exactly its own block
    assert np.isnan(want[2, :b]).all() and not np.isnan(want[2, b : 2 * b]).any()
    blk = 40 // b * b
    assert np.isnan(want[3, blk : blk + b]).all() and not np.isnan(want[3, :blk]).any()
    assert (want[1] == 0).all()


def test_block_nan_scale_code():
    x = np.zeros(64, np.float32)
    x[5] = np.nan
    x[40] = 3.0
    codes, scales = encode(x, "mxfp8_e4m3")
    np.testing.assert_array_equal(np.asarray(scales), [0xFF, 128 - 8 + 1 - 1])  # 2**(1 - 8) -> 127 - 7
    assert np.isnan(np.asarray(decode(codes, "mxfp8_e4m3", scales=scales))[0]).all()


# --- errors --------------------------------------------------------------------------------------------


def test_decode_rejects_float_codes():
    with pytest.raises(TypeError, match="integer codes, got dtype float32"):
        decode(np.float32([1.0]), "e4m3fn")


def test_block_decode_needs_scales():
    with pytest.raises(ValueError, match="needs scales="):
        decode(np.uint8([1, 2]), "mxfp4")


def test_flexpoint_round_trip_and_nan():
    """Flexpoint: int16 mantissas sharing one 5-bit exponent over the whole tensor."""
    x = np.random.default_rng(0).standard_normal((3, 50)).astype(np.float32) * np.float32(100)
    codes, scales = encode(x, "flex16+5")
    assert scales.shape == (1,) and codes.dtype == jnp.uint16
    got = np.asarray(decode(codes, "flex16+5", scales=scales, shape=x.shape))
    np.testing.assert_array_equal(got, np.asarray(quantize(x, "flex16+5")))
    assert np.abs(got - x).max() <= 2.0 ** (int(np.floor(np.log2(np.abs(x).max()))) - 15)
    x[0, 0] = np.nan
    assert np.isnan(np.asarray(quantize(x, "flex16+5"))).all()
    with pytest.raises(ValueError, match=r"cannot store.*scale format 'e5m0fnu' has no NaN code"):
        encode(x, "flex16+5")
