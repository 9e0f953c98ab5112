"""Value-set inclusion between formats: does every value of one format belong to another?

``embeds(x, y)`` is the rule the hardware model uses to decide that a MAC built for ``y`` runs
``x`` natively (int4 on an int8 multiplier, bf16 on an fp32 one): nothing is rounded, clamped or
reinterpreted when ``x`` values enter a ``y`` datapath. It is exact, in rational arithmetic:

* a value ``v`` is in an integer/fixed-point format when ``v`` is a multiple of its ``eps`` in
  ``[min, max]``; in a float format when ``min <= v <= max`` (sign allowed) and ``v`` is a
  multiple of the format's quantum at ``v``'s binade, ``2**(max(e, emin) - man_bits)`` (below
  ``emin`` only with subnormals; zero only with ``has_zero``);
* ``x`` embeds in ``y`` when its specials do (``x`` has inf -> ``y`` has inf; NaN likewise; a zero
  needs a zero) and, for every binade ``[2**e, 2**(e+1))`` that holds values of ``x``, two
  witnesses are values of ``y``: the binade's smallest step above ``2**e`` (``2**e + q``, ``q``
  the quantum of ``x`` there, or ``2**e`` alone when ``q = 2**e``) and the binade's largest value of
  ``x``; the same for the negative magnitudes. That is sufficient: ``y``'s grid in a binade is
  a power-of-two spacing, so holding ``2**e + q`` means its spacing divides ``q`` and every
  multiple of ``q`` up to the largest witness (``<= max``) is on it.
* Block formats: a plain ``x`` embeds in a block ``y`` when it embeds in ``y``'s element format
  and 1 is a value of ``y``'s scale (a unit scale); a block ``x`` embeds in a block ``y`` when the
  elements and the scales embed and ``y``'s block divides ``x``'s (a ``None`` block, one scale
  per tensor, is divided by every block size). A block ``x`` in a plain ``y`` is not claimed.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from asicsim._src.numerics.formats import BlockFormat, FloatFormat, Format, IntFormat


def _exp(v: Fraction) -> int:
    """floor(log2(v)) for v > 0, exactly."""
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


def is_value(fmt: FloatFormat | IntFormat, v: Fraction | int) -> bool:
    """Whether the finite number ``v`` is exactly a value of ``fmt`` (module docstring)."""
    v = Fraction(v)
    if isinstance(fmt, IntFormat):
        k = v / Fraction(fmt.eps)
        return k.denominator == 1 and fmt.kmin <= k <= fmt.kmax
    if v == 0:
        return fmt.has_zero
    if v < 0 and not fmt.signed:
        return False
    a = abs(v)
    if a > Fraction(fmt.max):
        return False
    e = _exp(a)
    if e < fmt.emin and not fmt.subnormals:
        return False
    quantum = Fraction(2) ** (max(e, fmt.emin) - fmt.man_bits)
    return (a / quantum).denominator == 1


def _magnitude_witnesses(fmt: FloatFormat | IntFormat, top: Fraction):
    """For every binade holding magnitudes of ``fmt`` up to ``top``: its smallest step above the
    binade's power of two and its largest magnitude (module docstring)."""
    if top <= 0:
        return
    if isinstance(fmt, IntFormat):
        lo = Fraction(fmt.eps)
    else:
        lo = Fraction(fmt.smallest_subnormal if fmt.subnormals else fmt.smallest_normal)
    for e in range(_exp(lo), _exp(top) + 1):
        base = Fraction(2) ** e
        q = lo if isinstance(fmt, IntFormat) else Fraction(2) ** (max(e, fmt.emin) - fmt.man_bits)
        yield min(base + q, top) if q < base else base
        yield min(2 * base - q, top)


@functools.cache
def embeds(x: Format, y: Format) -> bool:
    """Whether every value of ``x`` is a value of ``y`` (module docstring for the exact rule)."""
    if isinstance(x, BlockFormat) or isinstance(y, BlockFormat):
        return _embeds_block(x, y)
    if x == y:
        return True
    has_inf = isinstance(x, FloatFormat) and x.has_inf
    has_nan = isinstance(x, FloatFormat) and x.has_nan
    if has_inf and not (isinstance(y, FloatFormat) and y.has_inf):
        return False
    if has_nan and not (isinstance(y, FloatFormat) and y.has_nan):
        return False
    x_zero = x.has_zero if isinstance(x, FloatFormat) else x.kmin <= 0 <= x.kmax
    if x_zero and not is_value(y, 0):
        return False
    pos = list(_magnitude_witnesses(x, Fraction(x.max)))
    neg = list(_magnitude_witnesses(x, -Fraction(x.min))) if x.min < 0 else []
    return all(is_value(y, w) for w in pos) and all(is_value(y, -w) for w in neg)


def _embeds_block(x: Format, y: Format) -> bool:
    if not isinstance(y, BlockFormat):
        return False  # a block format's values span its scale's range: not claimed (docstring)
    if not isinstance(x, BlockFormat):
        return embeds(x, y.element) and is_value(y.scale, 1)
    if not (embeds(x.element, y.element) and embeds(x.scale, y.scale)):
        return False
    if y.block_size is None:
        return x.block_size is None
    return x.block_size is None or x.block_size % y.block_size == 0
