"""Readable scalar reference: round one exact rational onto a format's grid.

This is the spec written plainly with Python integers and ``fractions.Fraction`` (no floats,
no bit tricks). The fast kernels in ``rounding.py``/``quantize.py`` are tested against it, and
``ops.py``/``mac.py`` use it for their scalar models. ``u`` is the uniform draw in [0, 1) that
stochastic rounding compares against (``None`` for deterministic modes).
"""

from __future__ import annotations

import math
from fractions import Fraction

from .formats import FloatFormat, IntFormat
from .rounding import Rounding, RoundMode, parse_rounding

NAN = float("nan")
INF = float("inf")


def _round_int(q: Fraction, rnd: Rounding, u: Fraction | None, odd=None) -> int:
    """Round a non-negative rational to an integer (the magnitude; direction already resolved).

    ``odd(lo)`` says whether the code of the lower neighbour ``lo`` is odd (ties to even); by
    default the parity of ``lo`` itself."""
    lo = math.floor(q)
    frac = q - lo
    if frac == 0:
        return lo
    mode = rnd.mode
    if mode is RoundMode.RNE:
        lo_odd = lo % 2 == 1 if odd is None else odd(lo)
        return lo + (frac > Fraction(1, 2) or (frac == Fraction(1, 2) and lo_odd))
    if mode is RoundMode.RNA:
        return lo + (frac >= Fraction(1, 2))
    if mode is RoundMode.RTZ:
        return lo
    if mode is RoundMode.SR:
        if u is None:
            raise ValueError("stochastic rounding needs u")
        if rnd.bits is not None:  # hardware compares only the top N dropped bits
            frac = Fraction(math.floor(frac * 2**rnd.bits), 2**rnd.bits)
        return lo + (u < frac)
    raise AssertionError(mode)  # rup/rdn are resolved to rtz/away by the caller


def _grid_round(x: Fraction, quantum_exp_of, rnd: Rounding, u, code_bias=None) -> tuple[Fraction, bool]:
    """Round |x| on a grid whose spacing depends on the magnitude; returns (|result|, negative).

    ``code_bias``: for formats with no mantissa bits, whose codes count exponents, the exponent
    bias -- ties to even then means the even exponent field."""
    neg = x < 0
    mag = -x if neg else x
    q = Fraction(2) ** quantum_exp_of(mag)
    mode = rnd.mode
    if mode in (RoundMode.RUP, RoundMode.RDN):
        away = (mode is RoundMode.RUP) != neg
        scaled = mag / q
        k = math.ceil(scaled) if away else math.floor(scaled)
    else:
        e = quantum_exp_of(mag)
        odd = None if code_bias is None else (lambda lo: lo != 0 and (e + code_bias) % 2 == 1)
        k = _round_int(mag / q, rnd, u, odd)
    return k * q, neg


def nan_of(fmt, negative: bool) -> float:
    """The NaN a rounding gives, signed as ml_dtypes signs it: negative in fnuz formats (their
    one NaN is the negative-zero code), positive in unsigned ones, else ``negative`` -- the sign
    of the NaN input or of the value that overflowed onto an ``fn`` format's NaN."""
    if fmt.kind == "float" and fmt.nan == "negzero":
        negative = True
    elif not fmt.signed:
        negative = False
    return -NAN if negative else NAN


def round_float(x, fmt: FloatFormat, rounding="rne", *, saturate=None, u=None) -> float:
    """Round a real (int, float or Fraction) onto ``fmt``; returns a Python float (nan/inf too)."""
    rnd = parse_rounding(rounding)
    sat = fmt.saturate if saturate is None else saturate
    if isinstance(x, float) and math.isnan(x):
        return nan_of(fmt, math.copysign(1.0, x) < 0)
    if isinstance(x, float) and math.isinf(x):
        if not fmt.signed and x < 0:
            return NAN if fmt.has_nan else fmt.min
        if sat or not (fmt.has_inf or fmt.has_nan):
            return math.copysign(fmt.max, x)
        return x if fmt.has_inf else nan_of(fmt, x < 0)
    xf = Fraction(x)
    negative_zero = isinstance(x, float) and x == 0 and math.copysign(1, x) < 0
    if not fmt.signed and xf < 0:  # no negative numbers: NaN, or the format's min where no NaN
        return NAN if fmt.has_nan else fmt.min
    if xf == 0 and not fmt.has_zero:  # no zero: NaN, or the smallest number where no NaN
        return NAN if fmt.has_nan else fmt.smallest_normal
    qmin = fmt.smallest_subnormal_exp

    def quantum(mag: Fraction) -> int:
        if mag == 0:
            return qmin
        e = mag.numerator.bit_length() - mag.denominator.bit_length()
        if Fraction(2) ** e > mag:
            e -= 1
        return max(e - fmt.man_bits, qmin)

    mag, neg = _grid_round(xf, quantum, rnd, u, fmt.bias if fmt.man_bits == 0 else None)
    if mag > Fraction(fmt.max):
        toward_zero = rnd.mode is RoundMode.RTZ or (
            rnd.mode in (RoundMode.RUP, RoundMode.RDN) and (rnd.mode is RoundMode.RUP) == neg
        )
        if sat or toward_zero or not (fmt.has_inf or fmt.has_nan):
            mag = Fraction(fmt.max)
        else:
            return (-INF if neg else INF) if fmt.has_inf else nan_of(fmt, neg)
    if mag == 0 and not fmt.has_zero:
        mag = Fraction(fmt.smallest_normal)
    value = float(mag)
    if value == 0:  # the sign of zero follows the input where the format has -0
        signed_zero = fmt.signed and fmt.nan != "negzero"
        return -0.0 if signed_zero and (neg or negative_zero) else 0.0
    return -value if neg else value


def round_int(x, fmt: IntFormat, rounding="rne", *, saturate=None, u=None) -> float:
    """Round a real onto the fixed-point grid ``k * 2**-frac_bits``; saturate or wrap."""
    rnd = parse_rounding(rounding)
    sat = fmt.saturate if saturate is None else saturate
    if isinstance(x, float) and math.isnan(x):
        return nan_of(fmt, math.copysign(1.0, x) < 0)  # no NaN code: a NaN marks the input
    if isinstance(x, float) and math.isinf(x):
        return fmt.max if x > 0 else fmt.min
    mag, neg = _grid_round(Fraction(x), lambda _: -fmt.frac_bits, rnd, u)
    k = int(mag * 2**fmt.frac_bits) * (-1 if neg else 1)
    if k > fmt.kmax or k < fmt.kmin:
        if sat:
            k = min(max(k, fmt.kmin), fmt.kmax)
        else:  # two's complement wrap (of the unsigned bit pattern)
            k %= 1 << fmt.bits
            if fmt.signed and k >= 1 << (fmt.bits - 1):
                k -= 1 << fmt.bits
    return math.ldexp(k, -fmt.frac_bits) + 0.0  # integers have no -0
