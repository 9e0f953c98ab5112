"""The exact result of ``add, mul, fma, div, sqrt`` on Python floats, written plainly with
``fractions.Fraction``: a Fraction, or a signed float zero, ±inf or NaN where IEEE 754 says so
(``inf - inf``, ``0 * inf``, ``0/0``, ``inf/inf`` and ``sqrt(x < 0)`` are NaN; ``x/0`` is ±inf; an
exact zero sum is +0, -0 in ``rdn``, and ``-0 + -0 = -0``). :func:`asicsim._src.numerics.ops.scalar_op`
rounds it once: the specification the vectorised ops are tested against.
"""

from __future__ import annotations

import math
from fractions import Fraction

_SQRT_BITS = 200  # fraction bits of the truncated root: far below any format's half-ulp


def _neg(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def _sum(p, c, p_neg: bool, c_neg: bool, rdn: bool):
    """Exact p + c (Fractions, or floats for ±inf); zero results as signed float zeros."""
    if (isinstance(p, float) and math.isinf(p)) or (isinstance(c, float) and math.isinf(c)):
        if isinstance(p, float) and isinstance(c, float) and math.isinf(p) and math.isinf(c):
            return p if p == c else math.nan
        return p if isinstance(p, float) and math.isinf(p) else c
    total = Fraction(p) + Fraction(c)
    if total != 0:
        return total
    if p == 0 and c == 0 and p_neg == c_neg:
        return -0.0 if p_neg else 0.0  # (+0) + (+0) = +0 and (-0) + (-0) = -0 in every mode
    return -0.0 if rdn else 0.0


def _exact_add(a, b, rdn):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return _sum(a, b, _neg(a), _neg(b), rdn)


def _product(a, b):
    """Exact a * b: Fraction, ±inf, NaN, or a signed float zero."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    neg = _neg(a) != _neg(b)
    if math.isinf(a) or math.isinf(b):
        return math.nan if a == 0 or b == 0 else (-math.inf if neg else math.inf)
    if a == 0 or b == 0:
        return -0.0 if neg else 0.0
    return Fraction(a) * Fraction(b)


def _exact_mul(a, b, rdn):
    return _product(a, b)


def _exact_fma(a, b, c, rdn):
    p = _product(a, b)
    if (isinstance(p, float) and math.isnan(p)) or math.isnan(c):
        return math.nan
    p_neg = p < 0 or (p == 0 and _neg(float(p)))
    return _sum(p, c, p_neg, _neg(c), rdn)


def _exact_div(a, b, rdn):
    if math.isnan(a) or math.isnan(b) or (math.isinf(a) and math.isinf(b)) or a == b == 0:
        return math.nan
    neg = _neg(a) != _neg(b)
    if math.isinf(a) or b == 0:
        return -math.inf if neg else math.inf
    if math.isinf(b) or a == 0:
        return -0.0 if neg else 0.0
    return Fraction(a) / Fraction(b)


def _exact_sqrt(a, rdn):
    if math.isnan(a) or a < 0:
        return math.nan
    if a == 0 or math.isinf(a):
        return a  # sqrt(±0) = ±0, sqrt(inf) = inf
    x = Fraction(a)
    scaled = x.numerator * 4**_SQRT_BITS
    root = math.isqrt(scaled // x.denominator)  # floor(sqrt(x) * 2**K)
    if root * root * x.denominator == scaled:
        return Fraction(root, 2**_SQRT_BITS)
    # Irrational (or inexact at K bits): any point strictly inside the bracket rounds the same.
    return Fraction(2 * root + 1, 2 ** (_SQRT_BITS + 1))


#: op name -> its exact result on Python floats (``rdn``: an exact zero sum is -0, IEEE 754 §6.3)
EXACT = {
    "add": _exact_add,
    "mul": _exact_mul,
    "fma": _exact_fma,
    "div": _exact_div,
    "sqrt": _exact_sqrt,
}
