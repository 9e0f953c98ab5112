"""Per-group integer quantization (asicsim._src.numerics.group_quant) against an exact reference:
GPTQ's asymmetric and AWQ's symmetric rule written with fractions.Fraction (every quotient exact,
every rounding explicit), exhaustively over the int4 codes and by hypothesis beyond."""

from __future__ import annotations

import math
from fractions import Fraction

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asicsim._src.numerics.group_quant import (
    SCALE_FORMATS,
    code_range,
    group_dequantize,
    group_quantize,
    group_round,
    round_div,
    scale_of,
)

# (significand bits incl. the implicit one, smallest normal exponent) of the float scale formats
_FLOAT = {"fp32": (24, -126), "fp16": (11, -14), "bf16": (8, -126)}
_FMTS = {("int4", False): (-8, 7), ("uint4", True): (0, 15), ("int8", False): (-128, 127),
         ("uint8", True): (0, 255)}


_NP_SCALE = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


def ref_round_format(q: Fraction, fmt: str) -> Fraction:
    """``q > 0`` rounded to scale format ``fmt`` (nearest even; e8m0 up to a power of two)."""
    e = math.floor(math.log2(q))
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    if fmt == "e8m0":
        return Fraction(2) ** (e if Fraction(2) ** e == q else e + 1)
    p, emin = _FLOAT[fmt]
    ulp = Fraction(2) ** (max(e, emin) - (p - 1))
    return round(q / ulp) * ulp  # Python rounds a Fraction half to even


def ref_group(xs: list[float], lo: int, hi: int, zero_point: bool, fmt: str):
    """(codes, scale, zero, dequantized float32 values) of one group, exactly."""
    x32 = [np.float32(v) for v in xs]
    if zero_point:
        xmin, xmax = min(min(x32), np.float32(0)), max(max(x32), np.float32(0))
        rng = max(np.float32(xmax - xmin), np.float32(1e-5))  # a float32 subtraction, as GPTQ/AWQ
    else:
        rng = max(max(abs(v) for v in x32), np.float32(1e-5))
    s = ref_round_format(Fraction(float(rng)) / hi, fmt)
    z = min(max(round(-Fraction(float(xmin)) / s), 0), hi) if zero_point else 0
    codes = [min(max(round(Fraction(float(v)) / s) + z, lo), hi) for v in x32]
    deq = [np.float32(float(s * (c - z))) for c in codes]  # exact in float64, one rounding to float32
    return codes, s, z, deq


def check(x: np.ndarray, fmt: str, zero_point: bool, sfmt: str, group: int, axis: int = -1):
    lo, hi = _FMTS[(fmt, zero_point)]
    q = group_quantize(x, fmt=fmt, group_size=group, axis=axis, zero_point=zero_point, scale_format=sfmt)
    y = np.asarray(group_round(x, fmt=fmt, group_size=group, axis=axis, zero_point=zero_point, scale_format=sfmt))
    codes, scales, zeros = (np.moveaxis(np.asarray(a), axis, -1) for a in q)
    xm, ym = np.moveaxis(x, axis, -1), np.moveaxis(y, axis, -1)
    for idx in np.ndindex(xm.shape[:-1]):
        row = xm[idx]
        for gi, start in enumerate(range(0, row.size, group)):
            want_c, s, z, deq = ref_group(list(row[start:start + group]), lo, hi, zero_point, sfmt)
            where = f"{fmt} zp={zero_point} {sfmt} row {idx} group {gi}: {row[start:start + group]!r}"
            if sfmt in ("fp16", "bf16") and s > Fraction(float(ml_dtypes.finfo(_NP_SCALE[sfmt]).max)):
                # the scale overflows its format: inf, and the group dequantizes to NaN (not clipped)
                assert np.isinf(scales[idx][gi]) and np.isnan(ym[idx][start:start + group]).all(), where
                continue
            assert Fraction(float(scales[idx][gi])) == s, where
            assert int(zeros[idx][gi]) == z, where
            assert list(codes[idx][start:start + group]) == want_c, where
            got = ym[idx][start:start + group]
            assert got.view(np.uint32).tolist() == np.asarray(deq, np.float32).view(np.uint32).tolist(), where


@pytest.mark.parametrize("sfmt", SCALE_FORMATS)
@pytest.mark.parametrize(("fmt", "zero_point"), [("int4", False), ("uint4", True)])
def test_every_int4_code_and_its_rounding_boundaries(fmt, zero_point, sfmt):
    """Each group holds a defining extreme and, for every code n, the values n*s and (n +- 1/2)*s
    and their float32 neighbours: every code, every tie and both sides of every boundary."""
    rng = np.random.default_rng(0)
    rows = []
    for base in (1.0, 0.37, 3.1e-3, 123.4, 1e-6):
        s = float(np.asarray(scale_of(jnp.float32(2 * base if zero_point else base), 15 if zero_point else 7, sfmt)))
        vals = []
        for n in range(-8, 9):
            for m in (n, n + 0.5, n - 0.5):
                v = np.float32(m * s)
                vals += [v, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(-np.inf))]
        vals = np.asarray(vals, np.float32)
        rows.append(np.concatenate([[np.float32(base), np.float32(-base)], rng.permutation(vals)]))
    width = min(len(r) for r in rows)
    x = np.stack([r[:width] for r in rows])
    check(x, fmt, zero_point, sfmt, group=x.shape[1])  # one group per row: the extremes set the scale
    check(x, fmt, zero_point, sfmt, group=16)  # and smaller, ragged groups


@pytest.mark.slow  # ~20 s; the exhaustive int4 code tests stay in the default run
@settings(max_examples=50, deadline=None)
@given(vals=st.lists(st.floats(-2.0, 2.0, width=32), min_size=140, max_size=140),
       fmt=st.sampled_from(sorted(_FMTS)), sfmt=st.sampled_from(SCALE_FORMATS),
       group=st.sampled_from([1, 3, 32]), exp=st.integers(-20, 20), axis=st.sampled_from([0, -1]))
def test_hypothesis_against_fraction_reference(vals, fmt, sfmt, group, exp, axis):
    """One shape (2, 70), so examples reuse compiled kernels; 70 leaves ragged groups of 3 and 32."""
    x = (np.asarray(vals, np.float32).reshape(2, 70) * np.float32(2.0**exp)).astype(np.float32)
    check(x, fmt[0], fmt[1], sfmt, group=group, axis=axis)


def test_round_div_ties_and_neighbours_exactly():
    s = np.float32(0.1)  # a full 24-bit significand: the products need the split
    n = np.arange(-600, 601, dtype=np.float64)
    x = np.concatenate([np.float32(n * float(s)), np.float32((n + 0.5) * float(s))]).astype(np.float32)
    x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))])
    got = np.asarray(round_div(jnp.asarray(x), jnp.float32(s)))
    want = [round(Fraction(float(v)) / Fraction(float(s))) for v in x]
    assert got.tolist() == want


def test_all_zero_group_and_dequantize_shapes():
    x = np.zeros((4, 10), np.float32)
    q = group_quantize(x, fmt="uint4", group_size=4, axis=-1, zero_point=True, scale_format="fp16")
    assert q.codes.shape == (4, 10) and q.scales.shape == (4, 3) and q.zeros.shape == (4, 3)
    assert np.all(np.asarray(group_dequantize(q, group_size=4, axis=-1)) == 0)
    assert np.all(np.asarray(q.scales) > 0)


@pytest.mark.parametrize(("fmt", "zp", "msg"), [("uint4", False, "signed"), ("int4", True, "unsigned"),
                                                ("e4m3", False, "integer"), ("int16", False, "8 bits")])
def test_bad_formats_are_named(fmt, zp, msg):
    with pytest.raises(ValueError, match=msg):
        code_range(fmt, zp)
    with pytest.raises(ValueError, match="scale format"):
        scale_of(jnp.float32(1.0), 7, "fp8")


@pytest.mark.parametrize("maxq", [7, 15, 127, 255])
def test_scale_is_the_exact_quotient_rounded_once(maxq):
    """``range / maxq`` rounded once to each scale format, for random ranges and for ranges whose
    quotient is a midpoint of the fp16/bf16 grid (and their float32 neighbours): a float32
    quotient rounded again (double rounding) or an inexact division fails here."""
    rng = np.random.default_rng(maxq)
    r = (rng.uniform(1, 2, 3000) * 2.0 ** rng.integers(-16, 16, 3000)).astype(np.float32)
    mids = []
    for p in (11, 8):  # fp16 and bf16 significands: m + 1/2 ulp, times maxq (exact in float32)
        m = rng.integers(2 ** (p - 1), 2**p, 500)
        mids.append(((2 * m + 1) * maxq * 2.0 ** (rng.integers(-30, -5, 500) - p)).astype(np.float32))
    mids = np.concatenate(mids)
    r = np.concatenate([r, mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(0))])
    r = np.maximum(r, np.float32(1e-5))
    for sfmt in SCALE_FORMATS:
        got = np.asarray(scale_of(jnp.asarray(r), maxq, sfmt))
        want = [ref_round_format(Fraction(float(v)) / maxq, sfmt) for v in r]
        bad = [(v, g, w) for v, g, w in zip(r, got, want, strict=True) if Fraction(float(g)) != w]
        assert not bad, (sfmt, bad[:3])
