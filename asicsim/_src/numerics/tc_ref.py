"""Scalar reference of one tensor-core block, written plainly with ``Fraction`` and integers.

It follows the definition in :mod:`.tensorcore` step by step (the fast kernel there is tested
against it bit for bit), and, for the ``tc_exponent="operands"`` model, the published generic
model of Khattak & Mikaitis (``models/tools/Generic_BFMA_TC.m``, global-alignment branch).
"""

from __future__ import annotations

import math
from fractions import Fraction

from .mac import MacSpec
from .scalar import round_float

C_EMIN_FP32 = -126  # c is read as an fp32 value: a subnormal c aligns as 2**-126 (Generic_BFMA_TC.m)


def _neg(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def _exp(x: float) -> int:
    """floor(log2 |x|) of a nonzero float."""
    return math.frexp(x)[1] - 1


def flush(x: float, emin: int) -> float:
    """A subnormal of a format whose smallest normal is 2**emin flushed to a zero of its sign."""
    return math.copysign(0.0, x) if abs(x) < 2.0**emin else x


def block_ref(c: float, a: list[float], b: list[float], mac: MacSpec) -> float:
    """``d = c + sum(a[i] * b[i])`` as one tensor-core block of ``mac`` (operand values given
    on their formats, ``c`` on the accumulator format); returns the value rounded onto ``acc``."""
    acc, fa, fb = mac.spec("acc"), mac.spec("a_fmt"), mac.spec("b_fmt")
    rnd, sat = mac.acc_rounding, mac.saturate
    if mac.tc_flush in ("in", "both"):
        a = [flush(x, fa.emin) for x in a]
        b = [flush(x, fb.emin) for x in b]
    if mac.tc_flush in ("out", "both"):
        c = flush(c, acc.emin)
    products = [x * y for x, y in zip(a, b, strict=True)]  # exact in float64 (<= 24-bit operands)
    terms = [c, *products]
    if not all(math.isfinite(t) for t in terms):
        return round_float(sum(terms), acc, rnd, saturate=sat)
    if mac.tc_product_limit:
        limit = 2.0 ** (acc.emax + 1)
        over = {p > 0 for p in products if abs(p) >= limit}
        if over:
            return float("nan") if len(over) == 2 else (math.inf if True in over else -math.inf)
    late = mac.tc_late_c is not None
    aligned = []  # (value, alignment exponent) of the nonzero addends aligned together
    if c != 0 and not late:
        aligned.append((c, max(_exp(c), min(acc.emin, C_EMIN_FP32)) if mac.tc_exponent == "operands" else _exp(c)))
    for x, y, p in zip(a, b, products, strict=True):
        if p == 0:
            continue
        if mac.tc_exponent == "operands":  # e_a + e_b; the product kept unnormalised in [0, 4)
            aligned.append((p, max(_exp(x), fa.emin) + max(_exp(y), fb.emin)))
        else:
            aligned.append((p, _exp(p)))
    total = _aligned_sum(aligned, acc.man_bits + mac.guard_bits, mac)
    if late:  # the products' sum rounded onto acc, then c added with one rounding (IEEE zeros)
        if total:
            part = round_float(total, acc, mac.tc_late_c, saturate=sat)
        else:
            part = -0.0 if all(_neg(p) for p in products) else 0.0
        total = Fraction(part) + Fraction(c)
        if total == 0:
            neg = (_neg(part) and _neg(c)) or (rnd == "rdn" and (_neg(part) or _neg(c)))
            return round_float(-0.0 if neg else 0.0, acc, rnd, saturate=sat)
    if total == 0:
        zero = -0.0 if all(_neg(t) for t in terms) else 0.0
        return round_float(zero, acc, rnd, saturate=sat)
    d = round_float(total, acc, rnd, saturate=sat)
    if mac.tc_flush in ("out", "both"):
        d = flush(d, acc.emin)
    return d


def _aligned_sum(aligned: list, width: int, mac: MacSpec) -> Fraction:
    """Each addend's magnitude truncated onto 2**(e_max - width), plus a half quantum where bits
    were lost and ``tc_sticky``; the exact sum of those."""
    total = Fraction(0)
    if not aligned:
        return total
    emax = max(e for _, e in aligned)
    if mac.tc_min_exp is not None:
        emax = max(emax, mac.tc_min_exp)
    quantum = Fraction(2) ** (emax - width)
    for t, _ in aligned:
        mag = Fraction(abs(t))
        kept = mag // quantum * quantum
        if mac.tc_sticky and kept != mag:
            kept += quantum / 2
        total += kept if t > 0 else -kept
    return total


def tensorcore_ref(c: float, a: list[float], b: list[float], mac: MacSpec) -> float:
    """A whole dot product: blocks of ``k`` operand pairs, each block's result the next one's c."""
    k = mac.order_size
    for start in range(0, len(a), k):
        c = block_ref(c, a[start : start + k], b[start : start + k], mac)
    return c
