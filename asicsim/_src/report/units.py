"""Numbers for reading: engineering units with a fixed count of significant digits, and ratios
said as words ("41x less", "2.0x more").

>>> eng(3.141e-6, "s"), eng(0.0209, "J"), eng(192220, "B"), eng(1.23e12, "FLOP/s")
('3.14 µs', '20.9 mJ', '192 KB', '1.23 TFLOP/s')
>>> eng(float("nan"), "J"), eng(0, "s")
('–', '0 s')
>>> times(41.3), times(0.5)
('41x', '0.50x')
>>> compare(41.3, "less energy", "more energy"), compare(0.5, "faster", "slower"), compare(1.01, "faster", "slower")
('41x less energy', '2.0x slower', 'about as fast')
"""

from __future__ import annotations

import math

#: Significant digits of every engineering number.
DIGITS = 3

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"),
             (1e-9, "n"), (1e-12, "p"), (1e-15, "f"))

#: Within this factor of 1 a ratio is said as "about the same".
SAME = 0.03

#: For each word pair of :func:`compare`, what it says when the ratio is about 1.
_ABOUT = {"faster": "about as fast", "less energy": "about the same energy",
          "less dynamic energy": "about the same dynamic energy", "fewer DRAM bytes": "about as many DRAM bytes",
          "less": "about the same", "fewer": "about as many"}


def _digits(x: float, digits: int) -> str:
    """``x`` (>= 0) with ``digits`` significant digits, trailing zeros kept (3.10, not 3.1)."""
    if x == 0:
        return "0"
    x = float(f"{x:.{digits - 1}e}")  # rounded first, so 9.996 counts as 10.0, not 9.996 with 4 digits
    return f"{x:.{max(0, digits - 1 - math.floor(math.log10(x)))}f}"


def _number(v) -> float | None:
    """``v`` as a float; None when it is no number or NaN (shown as "–")."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def eng(v, unit: str, digits: int = DIGITS) -> str:
    """``v`` in ``unit`` with an SI prefix that puts 1 to 999 before it (bytes: KB, MB, GB, decimal)."""
    v = _number(v)
    if v is None:
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if v == 0:
        return f"0 {unit}"
    sign, a = ("-" if v < 0 else ""), float(f"{abs(v):.{digits - 1}e}")
    scale, prefix = next(((s, p) for s, p in _PREFIXES if a >= s), _PREFIXES[-1])
    if unit == "B" and prefix == "k":
        prefix = "K"
    if unit == "B" and scale < 1:  # no millibytes
        scale, prefix = 1.0, ""
    return f"{sign}{_digits(a / scale, digits)} {prefix}{unit}"


def times(r, digits: int = 2) -> str:
    """A ratio as "0.50x", "3.2x", "41x", "1,950x" (two significant digits, three from 100 up)."""
    r = _number(r)
    if r is None:
        return "–"
    if not math.isfinite(r) or r <= 0:
        return "–"
    if r >= 10 ** digits:  # whole numbers from here on, rounded to three significant digits
        return f"{float(f'{r:.2e}'):,.0f}x"
    return f"{_digits(r, digits)}x"


def compare(r, better: str, worse: str) -> str:
    """``r`` = the other's cost over this one's: "41x less energy" (r > 1), "2.0x more energy"
    (r < 1), "about the same energy" within :data:`SAME` of 1; "–" when unknown."""
    r = _number(r)
    if r is None:
        return "–"
    if not math.isfinite(r) or r <= 0:
        return "–"
    if abs(r - 1) <= SAME:
        first, _, rest = better.partition(" ")
        return _ABOUT.get(better) or (f"about the same {rest}" if first in ("less", "more") and rest
                                      else "about the same")
    return f"{times(r)} {better}" if r > 1 else f"{times(1 / r)} {worse}"


def points(v, digits: int = 2) -> str:
    """An accuracy difference in points with a sign: "+0.14", "-1.20", "0.00"."""
    v = _number(v)
    if v is None:
        return "–"
    text = f"{v:+.{digits}f}"
    return text.lstrip("+-") if float(text) == 0 else text
