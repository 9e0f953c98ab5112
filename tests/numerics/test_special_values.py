"""Special values through every family of formats: overflow of MX elements at tiny block
scales, +-inf into wrapping integers, float64 input (numpy, lists, JAX x64) to plain and scaled
formats, subnormal fp32 scales. Oracles: MPFR (oracles.mpfr_round) and exact integer arithmetic.
"""

from __future__ import annotations

import io
import math
from contextlib import redirect_stdout
from fractions import Fraction

import jax.numpy as jnp
import numpy as np
import pytest
from oracles import assert_same_bits, fp32_scale, mpfr_round_array

from asicsim._jax_compat import enable_x64
from asicsim._src.numerics import catalog, decode, encode, get_format, quantize
from asicsim._src.numerics.formats import emax_of

# OCP MX's floor scale rule, which mx_reference implements (the "up" rule never overflows an
# element: test_scaling.py::test_up_rule_never_saturates); two-level formats (NVFP4: a float block
# scale under a tensor scale) have Transformer Engine's quantizer as their oracle (test_nvfp4.py)
MX = [n for n, s in catalog().items()
      if s.kind == "block" and s.block_size and s.element.kind == "float" and s.scale_rule == "floor"
      and not s.two_level]


def mx_reference(x: np.ndarray, name: str, sat: bool) -> np.ndarray:
    """OCP MX per 1-d block along the last axis: s = floor(log2 amax) - emax_elem clamped to
    the scale's range, each element rounded by MPFR at x / 2**s (exact in float64), times 2**s."""
    spec = get_format(name)
    elem, b = spec.element, spec.block_size
    out = np.empty(x.shape, np.float64)
    for i in range(0, x.shape[-1], b):
        blk = x[..., i:i + b].astype(np.float64)
        amax = np.abs(blk).max(axis=-1, keepdims=True)
        s = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - emax_of(elem), spec.scale.emin)
        s = np.clip(s, spec.scale.emin, spec.scale.emax)
        scaled = blk * np.exp2(-s)  # exact: a power of two, float64 range
        out[..., i:i + b] = mpfr_round_array(scaled, elem, "rne", sat).astype(np.float64) * np.exp2(s)
    return out.astype(np.float32)


@pytest.mark.parametrize("name", MX)
def test_mx_overflow_at_every_block_scale(name):
    """saturate=False: an element beyond max is inf/NaN (as its element format says) at every
    scale exponent; below -100 it came out as a finite wrong number (7.15e-07 for mxfp8_e4m3)."""
    spec = get_format(name)
    elem, b = spec.element, spec.block_size
    exps = np.arange(-127, 128 - emax_of(elem) - 1)
    rng = np.random.default_rng(3)
    blocks = rng.uniform(-1, 1, (exps.size, b)) * np.exp2(exps + emax_of(elem))[:, None]
    blocks[:, 0] = 1.99 * np.exp2(exps + emax_of(elem))  # above max * 2**s: overflows
    blocks[::2, 0] *= -1
    x = blocks.astype(np.float32)
    ok = np.isfinite(x).all(axis=1) & (np.abs(x[:, 0]) > 0)
    x = x[ok]
    want = mx_reference(x.reshape(1, -1), name, sat=False).reshape(x.shape)
    got = np.asarray(quantize(x.reshape(-1), name, saturate=False)).reshape(x.shape)
    assert_same_bits(got, want, x, f"{name} saturate=False, blocks along the last axis")
    got0 = np.asarray(quantize(x.T, name, saturate=False, axis=0)).T  # the general layout
    assert_same_bits(got0, want, x, f"{name} saturate=False, blocks along axis 0")
    if elem.has_inf or elem.has_nan:
        assert not np.isfinite(got[:, 0]).any()


SIGNED_INTS = [n for n, s in catalog().items() if s.kind == "int" and s.signed and s.float32_exact]


@pytest.mark.parametrize("name", [*SIGNED_INTS, "q3.4", "q0.7", "int3", "q10.2"])
def test_inf_into_wrapping_integers_keeps_its_sign(name):
    """+-inf saturates to max/min in wrap mode too (-inf gave +128 in int8: the sign was taken
    from the wrapped bits). Expected values from the format's definition, as exact fractions."""
    spec = get_format(name)
    lo = Fraction(-(2 ** (spec.bits - 1)) + int(spec.symmetric), 2**spec.frac_bits)
    hi = Fraction(2 ** (spec.bits - 1) - 1, 2**spec.frac_bits)
    for x in (np.float32([np.inf, -np.inf]), np.float64([np.inf, -np.inf]), jnp.float32([np.inf, -np.inf])):
        for sat in (False, True):
            got = np.asarray(quantize(x, name, saturate=sat))
            assert [Fraction(float(v)) for v in got] == [hi, lo], (type(x), x.dtype, sat, got)


E8 = ["bfloat16", "float32", "tf32", "e8m3", "e8m1", "float8_e8m0fnu"]


@pytest.mark.parametrize("name", E8)
def test_jax_float64_input_keeps_float32_subnormals(name):
    """JAX float64 input (x64): results below 2**-126 came out 0 (XLA's f64->f32 convert
    flushes); now equal to MPFR's rounding of the float64 value, and to the numpy float64 path.
    encode writes the same codes as for numpy input."""
    spec = get_format(name)
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-1, 1, 300) * np.exp2(rng.integers(-152, -120, 300)),
                        rng.standard_normal(50), [2.0**-149, -2.0**-149, 2.0**-150 * 1.5]])
    want = mpfr_round_array(x, spec, "rne")
    with enable_x64(True):
        got = np.asarray(quantize(jnp.asarray(x, jnp.float64), name))
        codes = np.asarray(encode(jnp.asarray(x, jnp.float64), name))
    assert_same_bits(got, want, x, f"{name} from JAX float64")
    assert_same_bits(np.asarray(quantize(x, name)), want, x, f"{name} from numpy float64")
    if spec.bits <= 16:
        np.testing.assert_array_equal(codes, np.asarray(encode(x, name)))


def near_ties(name: str, n: int = 64) -> np.ndarray:
    """float64 blocks whose elements sit within 2**-40 (relative) of an element tie: float32 input
    would round them onto the tie first, and then to even, not to the float64 value's side."""
    spec = get_format(name)
    elem = spec.element
    rng = np.random.default_rng(11)
    blocks = []
    for _ in range(n):
        s = int(rng.integers(-120, 100))
        codes = rng.integers(0, 1 << elem.man_bits, spec.block_size)
        e = rng.integers(elem.emin, emax_of(elem), spec.block_size)
        grid = (1 + codes / 2**elem.man_bits) * np.exp2(e)
        half = np.exp2(e - elem.man_bits - 1)
        v = (grid + half) * (1 + rng.choice([-1, 1], spec.block_size) * 2.0**-40)
        v[0] = elem.max  # pins the scale to 2**s
        blocks.append(v * np.exp2(s) * rng.choice([-1, 1], spec.block_size))
    return np.concatenate(blocks)


@pytest.mark.parametrize("name", MX)
def test_scaled_formats_take_float64_input(name):
    """numpy float64, lists and JAX x64 arrays into a block format: rounded once, from the
    float64 value (a TypeError before); MPFR reference at the exact float64 quotient."""
    x = near_ties(name)
    want = mx_reference(x.reshape(1, -1), name, sat=True).reshape(-1)
    assert_same_bits(np.asarray(quantize(x, name)), want, x, f"{name} from numpy float64")
    assert_same_bits(np.asarray(quantize(list(x[:32]), name)), want[:32], x[:32], f"{name} from a list")
    with enable_x64(True):
        got = np.asarray(quantize(jnp.asarray(x), name))
    assert_same_bits(got, want, x, f"{name} from JAX float64")
    codes, scales = encode(x, name)
    assert_same_bits(np.asarray(decode(codes, name, scales=scales, shape=x.shape)), want, x, "encode")


def fp32_scaled_reference(x: np.ndarray, qmax: float, mode: str = "rne", element="int8") -> np.ndarray:
    """Symmetric per-tensor fp32 scaling as float32 arithmetic defines it, each step rounded once
    to float32 (MPFR, subnormals included): s = amax / qmax (rounded up where subnormal, issue 29
    item 10), y = x / s (|y| at most qmax), q onto the element, q * s."""
    f32 = get_format("float32")
    amax = float(np.abs(x.astype(np.float64)).max())
    s = float(mpfr_round_array(np.float64([amax / qmax]), f32, "rne")[0]) if amax else 1.0
    if s < 2.0**-126:
        s = float(mpfr_round_array(np.float64([amax / qmax]), f32, "rup")[0])
    y = np.clip(mpfr_round_array(x.astype(np.float64) / s, f32, "rne"), -qmax, qmax)
    if element == "int8":
        q = np.clip(np.round(y.astype(np.float64)), -128, 127) + 0.0  # rne, saturating at int8 min/max, no -0
    else:
        q = mpfr_round_array(y, get_format(element), mode, True).astype(np.float64)
    return mpfr_round_array(q * s, f32, "rne")


@pytest.mark.parametrize("x", [
    [448 * 2.0**-120, 2.0**-129],  # the report: the second element came out 0
    [2.0**-130, -3 * 2.0**-140, 2.0**-149, 0.0],  # amax subnormal: all zeros before
    [2.0**-127, -2.0**-140, 1e-45, 2.0**-126],
    [1.0, 2.0**-149, -2.0**-130],  # a normal scale and subnormal inputs
], ids=["report", "subnormal-amax", "around-2^-126", "normal-scale"])
@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "int8", "float8_e5m2"])
def test_fp32_tensor_scale_below_float32_normals(x, fmt):
    x = np.float32(x)
    qmax = get_format(fmt).max
    want = fp32_scaled_reference(x, qmax, element=fmt)
    assert_same_bits(np.asarray(quantize(x, fmt, scaling="tensor", saturate=True)), want, x, fmt)


def test_fp32_tensor_scale_random_tiny_tensors():
    rng = np.random.default_rng(21)
    for k in range(20):
        x = (rng.standard_normal(40) * 2.0 ** float(rng.integers(-149, -100))).astype(np.float32)
        for fmt in ("float8_e4m3fn", "int8"):
            want = fp32_scaled_reference(x, get_format(fmt).max, element=fmt)
            assert_same_bits(np.asarray(quantize(x, fmt, scaling="tensor", saturate=True)), want, x, f"{fmt} #{k}")


def test_cli_prints_exact_max():
    """`asicsim formats` printed q7.8's max as 128 (it is 127.99609375)."""
    from asicsim.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        main(["formats", "q7.8"])
    assert "127.99609375" in out.getvalue(), out.getvalue()
    assert math.isclose(get_format("q7.8").max, 127.99609375)


SCALED = ["mxfp8_e4m3", "mxfp6_e2m3", "mxfp4", "mxint8", "msfp12", "flex16+5"]


@pytest.mark.parametrize("fmt", SCALED)
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 64)])
def test_empty_arrays_under_scaled_formats_stay_empty(fmt, shape):
    # Used to raise ZeroDivisionError (MX) or a zero-size reduction (flex16+5).
    x = np.zeros(shape, np.float32)
    q = np.asarray(quantize(x, fmt))
    assert q.shape == shape and q.dtype == np.float32
    codes = encode(x, fmt)
    assert np.asarray(codes[0] if isinstance(codes, tuple) else codes).size == 0
    assert np.asarray(quantize(x, "fp8_e4m3", scaling="tensor")).shape == shape


@pytest.mark.parametrize("fmt", SCALED)
def test_a_0d_array_under_a_scaled_format_is_one_block_of_one_element(fmt):
    for v in (3.3, -1e-3, 0.0, 448.5):
        got = np.asarray(quantize(np.float32(v), fmt))
        assert got.shape == ()
        assert_same_bits(got, np.asarray(quantize(np.float32([v]), fmt))[0], np.float32(v), fmt)


def _asymmetric_in_numpy_float32(x, fmt):
    """Asymmetric per-tensor fp32 scaling as float32 arithmetic, each step a numpy float32
    operation (IEEE, subnormals kept; written from the definition, not from asicsim's code):
    s = (hi - lo) / span (rounded up where subnormal), zp = clip(rint(min - lo / s)),
    q = clip(rint(x / s + zp)) on the
    element's grid, value = (q - zp) * s."""
    e, f = get_format(fmt), np.float32
    lo, hi = min(f(x.min()), f(0)), max(f(x.max()), f(0))
    span = f(e.kmax - e.kmin) * f(e.eps)
    s = f(1) if hi == lo else fp32_scale(f(hi - lo), span)  # up where subnormal (issue 29 item 10)
    zp = np.clip(np.rint(f(f(e.min) - f(lo / s))), f(e.min), f(e.max)).astype(f)
    y = f(f(x / s) + zp)
    q = np.clip(f(np.rint(y / f(e.eps)) * f(e.eps)), f(e.min), f(e.max)).astype(f)
    return f(f(q - zp) * s)


@pytest.mark.parametrize("fmt", ["uint8", "int8", "uint4", "int4", "q3.4"])
@pytest.mark.parametrize("exponent", [0, -100, -125, -130, -140, -147, 100])
def test_asymmetric_fp32_scaling_is_float32_arithmetic(fmt, exponent):
    # Was: the scale clamped at 2**-126 and subnormal results flushed (every tensor below
    # 2**-125 wrong), and lo / s computed as lo * (1 / s) (uint4: 4 of 50 tensors at 2**0).
    from asicsim._src.numerics.scaling import Scaling

    rng = np.random.default_rng(abs(exponent) * 7 + len(fmt))
    for _ in range(30):
        x = ((rng.normal(size=16) + (rng.random() - 0.3) * 3) * 2.0**exponent).astype(np.float32)
        got = np.asarray(quantize(x, fmt, scaling=Scaling(symmetric=False)))
        want = _asymmetric_in_numpy_float32(x, fmt)
        # values, not bits: the sign of a zero follows the element rounding's convention
        assert np.array_equal(got, want), (fmt, exponent, x[got != want], got[got != want])


def test_asymmetric_fp32_scaling_per_channel_is_per_tensor_of_each_channel():
    from asicsim._src.numerics.scaling import Scaling

    rng = np.random.default_rng(5)
    x = (rng.normal(size=(6, 5)) * np.float32(2.0**-128) * [1, 4, 0.25, 2**20, 1]).astype(np.float32)
    got = np.asarray(quantize(x, "uint8", scaling=Scaling(granularity="channel", axis=1,
                                                          symmetric=False)))
    for c in range(x.shape[1]):
        assert np.array_equal(got[:, c], _asymmetric_in_numpy_float32(x[:, c], "uint8")), c
