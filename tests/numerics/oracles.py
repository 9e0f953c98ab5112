"""Independent oracles for the numerics tests: MPFR (gmpy2), gfloat, ml_dtypes, SoftFloat.

Nothing here calls asicsim's rounding code. What is ours is only the wrapper that applies a
format's conventions around the oracle's rounding (overflow to inf / NaN / max, no -0 in fnuz,
negative input to an unsigned format, e8m0's missing zero), written from DESIGN.md section 3.
"""

from __future__ import annotations

import functools
import math

import gfloat
import gmpy2
import ml_dtypes
import numpy as np
import softfloatpy as sf

from asicsim._src.numerics import FloatFormat

MODES = ("rne", "rna", "rtz", "rup", "rdn")

_MPFR_ROUND = {
    "rne": gmpy2.RoundToNearest,  # ties to even
    "rtz": gmpy2.RoundToZero,
    "rup": gmpy2.RoundUp,
    "rdn": gmpy2.RoundDown,
    "away": gmpy2.RoundAwayZero,  # directed away from zero (not ties-away)
}

_GFLOAT_ROUND = {
    "rne": gfloat.RoundMode.TiesToEven,
    "rna": gfloat.RoundMode.TiesToAway,
    "rtz": gfloat.RoundMode.TowardZero,
    "rup": gfloat.RoundMode.TowardPositive,
    "rdn": gfloat.RoundMode.TowardNegative,
}


def softfloat32_binary(op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bits (uint32) of Berkeley SoftFloat's float32 ``op`` (``sf.f32_mul``, ``sf.f32_div``, ...)
    on float32 bit patterns ``a`` and ``b``, elementwise, in its current rounding mode."""
    def f32(bits):
        return sf.Float32.from_bytes(int(bits).to_bytes(4, "big"))

    return np.array([int.from_bytes(op(f32(x), f32(y)).to_bytes(), "big") for x, y in zip(a, b, strict=True)],
                    np.uint32)


def ml_type(name: str):
    """The ml_dtypes (or numpy) scalar type of a catalog format, or None."""
    if name == "float16":
        return np.float16
    return getattr(ml_dtypes, name, None)


def same_bits(got, want, nan: str = "any") -> np.ndarray:
    """Elementwise: identical float32 bit patterns, or both NaN: of any sign and payload
    (``nan="any"``), of the same sign (``"sign"``), or no exception (``"exact"``)."""
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float32)
    same = got.view(np.uint32) == want.view(np.uint32)
    if nan == "exact":
        return same
    both = np.isnan(got) & np.isnan(want)
    if nan == "sign":
        both &= np.signbit(got) == np.signbit(want)
    return same | both


def assert_same_bits(got, want, inputs, what: str, nan: str = "any") -> None:
    ok = same_bits(got, want, nan)
    if not ok.all():
        bad = np.flatnonzero(~ok.ravel())
        x = np.asarray(inputs).ravel()[bad[:8]]
        g = np.asarray(got, np.float32).ravel()[bad[:8]]
        w = np.asarray(want, np.float32).ravel()[bad[:8]]
        rows = "\n".join(f"  x={xi!r} ({float(xi).hex()}): got {gi!r} ({_hex32(gi)}), want {wi!r} ({_hex32(wi)})"
                         for xi, gi, wi in zip(x, g, w, strict=True))
        raise AssertionError(f"{what}: {bad.size} of {ok.size} differ, e.g.\n{rows}")


def _hex32(v) -> str:
    return f"0x{int(np.float32(v).view(np.uint32)):08x}"


# --- the format conventions around a plain rounding ------------------------------------------------


def _beyond(spec: FloatFormat, neg: bool) -> float:
    if spec.has_inf:
        return -math.inf if neg else math.inf
    return math.nan


def _overflow(spec: FloatFormat, mode: str, neg: bool, sat: bool) -> float:
    """Result for a finite input whose rounding (unbounded exponent) exceeds ``max``."""
    top = -spec.max if neg else spec.max
    if sat or not (spec.has_inf or spec.has_nan):
        return top
    toward_zero = mode == "rtz" or (mode == "rup" and neg) or (mode == "rdn" and not neg)
    return top if toward_zero else _beyond(spec, neg)


def convention(x: float, spec: FloatFormat, mode: str, sat: bool | None, round_finite) -> float:
    """Apply ``spec``'s NaN/inf/overflow/zero/sign rules; ``round_finite(x)`` rounds a finite
    nonzero real onto the grid with an unbounded exponent range (and the format's subnormals)."""
    sat = spec.saturate if sat is None else sat
    if math.isnan(x):
        return math.nan
    neg = math.copysign(1.0, x) < 0
    if not spec.signed and x < 0:  # no negative numbers: NaN, else the lowest value
        return math.nan if spec.has_nan else (0.0 if spec.has_zero else spec.smallest_normal)
    if math.isinf(x):
        if sat or not (spec.has_inf or spec.has_nan):
            return -spec.max if neg else spec.max
        return _beyond(spec, neg)
    if x == 0:
        if not spec.has_zero:  # no zero: NaN, else the smallest value
            return math.nan if spec.has_nan else spec.smallest_normal
        return -0.0 if neg and spec.signed and spec.nan != "negzero" else 0.0
    r = round_finite(x)
    if abs(r) > spec.max:
        return _overflow(spec, mode, neg, sat)
    if r == 0:
        if not spec.has_zero:
            return spec.smallest_normal
        return -0.0 if neg and spec.signed and spec.nan != "negzero" else 0.0
    return r


# --- MPFR ------------------------------------------------------------------------------------------


@functools.cache
def _mpfr_context(spec: FloatFormat, mode: str) -> gmpy2.context:
    # MPFR's significand is in [1/2, 1): a format exponent e is MPFR exponent e + 1, and emin is
    # the exponent of the smallest subnormal (subnormalize=True rounds like IEEE gradual underflow).
    return gmpy2.context(
        precision=spec.man_bits + 1,
        emin=spec.smallest_subnormal_exp + 1,
        emax=400,  # no MPFR overflow: the wrapper compares against the format's max
        subnormalize=True,  # also what makes MPFR honour emin (underflow to 0 / smallest)
        round=_MPFR_ROUND[mode],
    )


def _with_mode(v, spec: FloatFormat, mode: str) -> float:
    exact = v if isinstance(v, gmpy2.mpfr) else gmpy2.mpfr(v, 64)  # made outside the narrow
    with _mpfr_context(spec, mode):  # context: gmpy2's constructor skips the range check;
        return float(+exact)  # unary + rounds once, then subnormalizes


def mpfr_round(x: float, spec: FloatFormat, mode: str, sat: bool | None = None) -> float:
    """Round ``x`` (a Python float, i.e. an exact binary64 value) onto ``spec`` with MPFR.

    ``rna`` (no MPFR mode) is MPFR's nearest unless the input is exactly halfway between MPFR's
    toward-zero and away-from-zero results, then the away result. MPFR rounds precision-1 ties
    away; for formats with no mantissa bits ``rne`` picks the even code (the even exponent
    field), as IEEE P3109 and gfloat define ties-to-even there.
    """

    def round_finite(v: float) -> float:
        v_exact = gmpy2.mpfr(v, 64)
        if mode == "rna" or (mode == "rne" and spec.man_bits == 0):
            lo, hi = _with_mode(v_exact, spec, "rtz"), _with_mode(v_exact, spec, "away")
            # lo + hi and 2 v are exact in binary64: neighbours with short significands.
            if lo != hi and 2.0 * v == lo + hi:
                if mode == "rna":
                    return hi
                odd = lo != 0 and (math.frexp(abs(lo))[1] - 1 + spec.bias) % 2 == 1  # code parity
                return hi if odd else lo
            return _with_mode(v_exact, spec, "rne")
        return _with_mode(v_exact, spec, mode)

    return convention(float(x), spec, mode, sat, round_finite)


def mpfr_round_array(x, spec: FloatFormat, mode: str, sat: bool | None = None) -> np.ndarray:
    """``mpfr_round`` over an array (float32 or float64), once per distinct value."""
    x = np.asarray(x)
    flat = x.ravel()
    values, inverse = np.unique(flat.view(np.uint32 if x.dtype == np.float32 else np.uint64), return_inverse=True)
    out = np.array(
        [mpfr_round(float(v), spec, mode, sat) for v in values.view(x.dtype)], dtype=np.float64
    )
    return out[inverse].reshape(x.shape).astype(np.float32)


# --- gfloat ----------------------------------------------------------------------------------------


def gfloat_info(spec: FloatFormat) -> gfloat.FormatInfo:
    """gfloat's description of one of our float specs (built from its fields, not from names)."""
    high_nans = {"ieee": (1 << spec.man_bits) - 1, "ones": 1, "negzero": 0, "none": 0}[spec.nan]
    return gfloat.FormatInfo(
        name=spec.name,
        k=spec.bits,
        precision=spec.man_bits + 1,
        bias=spec.bias,
        is_signed=spec.signed,
        domain=gfloat.Domain.Extended if spec.has_inf else gfloat.Domain.Finite,
        has_nz=spec.signed and spec.nan != "negzero",
        num_high_nans=high_nans,
        has_subnormals=spec.subnormals,
        is_twos_complement=False,
    )


def gfloat_round(x: float, spec: FloatFormat, mode: str, sat: bool | None = None) -> float:
    """gfloat.round_float under our conventions (gfloat ignores the sign for unsigned formats and
    raises on overflow into a format with neither inf nor NaN, so those are decided first)."""
    fi = gfloat_info(spec)
    sat_ = spec.saturate if sat is None else sat
    gsat = sat_ or not (spec.has_inf or spec.has_nan)

    def round_finite(v: float) -> float:
        r = gfloat.round_float(fi, v, _GFLOAT_ROUND[mode], sat=gsat)
        # gfloat does not bound the exponent from below in formats without subnormals (it
        # returns 2**-149 for e2m0fnu); with no zero either (pure exponents), 0 < |v| < smallest
        # can only become the smallest value
        if not spec.subnormals and not spec.has_zero and 0 < abs(r) < spec.smallest_normal:
            r = math.copysign(spec.smallest_normal, r)
        return r

    return convention(float(x), spec, mode, sat_, round_finite)


# --- fp32 scales -----------------------------------------------------------------------------------


def fp32_scale(num, den) -> np.float32:
    """An fp32 scale ``num / den`` (num >= 0) as asicsim defines it (issue 29 item 10): the
    float32 nearest the quotient (numpy's float32 division: IEEE, subnormals kept), or the next
    float32 up where that is a subnormal below the quotient."""
    num, den = np.float32(num), np.float32(den)
    with np.errstate(all="ignore"):
        s = np.float32(num / den)
    if s < np.float32(2.0**-126) and float(s) * float(den) < float(num):  # exact in float64
        s = np.nextafter(s, np.float32(np.inf))
    return s
