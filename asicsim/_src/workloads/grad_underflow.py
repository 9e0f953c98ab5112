"""How much of a run's activation gradients fall below a float format's range: the log2
histogram of |activation gradient| that Micikevicius et al. plot (Mixed Precision Training,
ICLR 2018, Figure 3) and the fractions it implies.

The histograms come from training's numerics statistics (:mod:`.stats`: ``exp_hist``, counts of
floor(log2 |x|) over the nonzero elements of each tapped activation gradient, group ``grad``);
:func:`merged_histogram` sums a run's tensors, :func:`underflow_fractions` reads the fractions off
it. Every threshold is a power of two, so the bins give them exactly:

``zero``        |x| < min_subnormal / 2: round-to-nearest-even gives 0 (at exactly half the
                smallest subnormal, a tie, it gives 0 too; that single value is counted in the
                next bin)
``below_min``   |x| < the smallest subnormal (fp16: 2^-24): 0 or the smallest subnormal after
                rounding, all precision gone
``subnormal``   |x| < the smallest normal (fp16: 2^-14): fewer significand bits than normal values

>>> h = {-30: 1, -25: 1, -20: 1, -10: 1}
>>> underflow_fractions(h, "fp16")
{'zero': 0.25, 'below_min': 0.5, 'subnormal': 0.75, 'values': 4}
"""

from __future__ import annotations

import math

from asicsim._src.numerics import FloatFormat, get_format
from asicsim._src.workloads.stats import EXP_HI, EXP_LO


def format_thresholds(fmt: str) -> tuple[int, int]:
    """(log2 of the smallest subnormal, log2 of the smallest normal) of float format ``fmt``."""
    spec = get_format(fmt)
    if not isinstance(spec, FloatFormat):
        raise ValueError(f"format {fmt!r}: allowed: a float format (fp16, bf16, e4m3, ...); "
                         "an underflow threshold is a float format's")
    lo = spec.smallest_subnormal if spec.subnormals else spec.smallest_normal
    return int(math.log2(lo)), int(math.log2(spec.smallest_normal))


def merged_histogram(numerics: dict, group: str = "grad") -> dict[int, int]:
    """``{floor(log2 |x|): count}`` summed over a run's tensors of ``group`` (``numerics``:
    a :class:`~asicsim._src.workloads.training.RunResult`'s ``numerics``, with histograms)."""
    out: dict[int, int] = {}
    for name, s in numerics.items():
        if name.split(":")[0] != group:
            continue
        if "exp_hist" not in s:
            raise ValueError(f"numerics[{name!r}] has no exp_hist: the statistics were taken "
                             "without histograms (train() keeps them for the last evaluation)")
        for e, c in s["exp_hist"].items():
            out[int(e)] = out.get(int(e), 0) + int(c)
    return dict(sorted(out.items()))


def underflow_fractions(hist: dict[int, int], fmt: str = "fp16") -> dict:
    """Fractions of the histogram's values in ``fmt``'s underflow ranges (module docstring)."""
    lo, normal = format_thresholds(fmt)
    n = sum(hist.values())
    if n == 0:
        raise ValueError("the histogram holds no values: no gradient to measure")

    def below(exp: int) -> float:  # |x| < 2**exp  <=>  floor(log2 |x|) < exp
        return sum(c for e, c in hist.items() if e < exp) / n

    return {"zero": below(lo - 1), "below_min": below(lo), "subnormal": below(normal), "values": n}


def histogram_lines(hist: dict[int, int], fmt: str = "fp16", width: int = 40) -> list[str]:
    """The histogram as text, one log2 bin a line (``[2^e, 2^(e+1))``, percent, a bar), with
    ``fmt``'s smallest subnormal and smallest normal marked where they fall; the lowest bin of
    :mod:`.stats` (2^-48) holds every smaller nonzero value and reads ``(0, 2^-47)``."""
    lo, normal = format_thresholds(fmt)
    n = max(sum(hist.values()), 1)
    top = max(hist.values(), default=1)
    lines = []
    for e in range(min([*hist, lo - 1]), max([*hist, normal]) + 1):
        c = hist.get(e, 0)
        mark = {lo: f"  <- {fmt} smallest subnormal 2^{lo}", normal: f"  <- {fmt} smallest normal 2^{normal}"}.get(e, "")
        # the end bins of :mod:`.stats`' histograms also hold the values beyond them
        span = (f"(0, 2^{e + 1:>4})" if e == EXP_LO else f"[2^{e:>4}, inf)" if e == EXP_HI
                else f"[2^{e:>4}, 2^{e + 1:>4})")
        lines.append(f"{span:<17} {100 * c / n:6.2f} % {'#' * round(width * c / top):<{width}}{mark}")
    return lines
