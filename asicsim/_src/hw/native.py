"""Which MAC formats a systolic design executes, at what rate, and how many bits a tensor stores.

A design lists its native MAC modes (``[[pe.modes]]``: ``a`` ifmap, ``b`` filter, ``acc``
accumulator, ``rate`` as a fraction of the design's peak MAC rate); its own ``[pe]`` formats are
the full-rate mode when not listed (the modes and their checks: :mod:`asicsim._src.hw.mac_modes`,
re-exported here). :func:`execution_mode` decides how a requested
(act, weight, acc) triple runs:

1. **Natively** when some mode *embeds* it: the requested act, weight and acc formats each embed in
   the mode's a, b and acc (every value of the request is a value of the mode's format,
   :func:`asicsim._src.numerics.embed.embeds`; int4 on an int8 MAC, bf16 on an fp32 one). The MAC then
   computes with the mode's formats: operands enter unchanged and its accumulator holds every
   value the requested one does. The fastest matching mode wins.
2. Else **emulated in software** only if the caller asks (``emulate``):

   * ``emulate=S`` (a number ``S >= 1``): the caller's stated slowdown; the MACs run at ``1/S`` of
     the peak.
   * ``emulate="auto"``: derived where it is exact, integer (or fixed-point) operands on the
     design's integer modes. Each operand is split into radix-``2**d`` digits, the low ones
     unsigned ``d``-bit and the top one carrying the sign (a ``w``-bit integer -> ``n`` digits);
     every digit pair is one pass of the array on the fastest mode that embeds it, with the
     requested accumulator, and the shifted partial products add exactly in the integer
     accumulators. Slowdown = sum over digit pairs of ``1/rate``, minimised over ``d``. On a
     multiplier that takes signed and unsigned 8-bit operands this is ``ceil(w/8)**2`` passes:
     16 x 16 bits in 4, TPU v1's quarter rate (Jouppi et al., ISCA 2017, Sec. 2). Combining
     the passes' shifted results is assumed free (it happens in the accumulators).

   Anything else raises :class:`~asicsim._src.hw.operations.OperationError` naming the design's modes.

Rates divide the array's streaming (compute) cycles; fill and drain are paid once per GEMM, as
the passes pipeline like folds.

Energy prices the hardware that runs (:func:`mac_hardware`): a native request costs its mode's
multiplier and accumulator (fp8 on a bf16 multiplier costs the bf16 multiply), unless the mode
says ``operand_gating = true`` (with ``operand_gating_source``: the design gates the unused
operand bits off, so the multiplier switches only the requested formats' bits and costs theirs;
the accumulator is the mode's either way). Emulated requests price the requested formats (the
passes' hardware is not modelled; the result's energy source says so).

Storage: :func:`storage_bits` is what every byte count in memory uses (tf32 -> 32 bits; see
:func:`asicsim._src.numerics.formats.word_storage_bits`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from asicsim._src.hw.mac_modes import MODE_FIELDS as MODE_FIELDS
from asicsim._src.hw.mac_modes import MacMode as MacMode
from asicsim._src.hw.mac_modes import accumulator_problem as accumulator_problem
from asicsim._src.hw.mac_modes import mode_problems as mode_problems
from asicsim._src.hw.mac_modes import modes_problems as modes_problems
from asicsim._src.hw.mac_modes import product_format as product_format
from asicsim._src.hw.operations import OperationError
from asicsim._src.numerics.embed import embeds
from asicsim._src.numerics.formats import Format, IntFormat

EMULATE_AUTO = "auto"
MAX_SLOWDOWN = 1e6  # a stated slowdown above this is a typo, not an emulation


@dataclass(frozen=True)
class ExecutionMode:
    """How an operation's MACs run: at ``rate`` of the design's peak MAC rate, ``slowdown = 1/rate``
    (native 16-bit on TPU v1: rate 0.25, slowdown 4, not emulated)."""

    rate: float
    emulated: bool
    slowdown: float  # 1 / rate: how much longer the MACs take than at the peak
    source: str  # one line: which mode, or how the emulation was derived


def storage_bits(fmt: Format) -> float:
    """Bits one element of ``fmt`` takes in memory (DRAM, SRAM, links): ``fmt.storage_bits``."""
    return float(fmt.storage_bits)


def parse_emulate(value) -> str | float | None:
    """``None``, ``"auto"`` or a slowdown ``S >= 1`` (a number or its text); anything else errors."""
    if value is None or value == EMULATE_AUTO:
        return value
    try:
        s = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        s = math.nan
    if not 1 <= s <= MAX_SLOWDOWN:
        raise OperationError(f"formats: emulate = {value!r}; allowed: 'auto' (exact integer digit "
                             f"passes) or a slowdown S, 1 <= S <= {MAX_SLOWDOWN:g}, vs the design's peak")
    return s


def execution_mode(design, formats: dict[str, Format], emulate=None) -> ExecutionMode:
    """How ``formats`` (roles ``act``, ``weight``, ``acc``) run on a systolic ``design``
    (module docstring); raises OperationError naming the design's modes when they do not."""
    emulate = parse_emulate(emulate)
    modes = design.pe.modes
    a, b, acc = formats["act"], formats["weight"], formats["acc"]
    best = _best_mode(modes, a, b, acc)
    if best is not None:
        return ExecutionMode(best.rate, False, 1.0 / best.rate, f"native: {best.label}"
                             + (f" ({best.source})" if best.source else ""))
    want = f"act={a.name} x weight={b.name} -> acc={acc.name}"
    if isinstance(emulate, float):
        return ExecutionMode(1.0 / emulate, True, emulate,
                             f"emulated {want} at a stated slowdown of {emulate:g} vs the peak")
    if emulate == EMULATE_AUTO:
        found = _digit_emulation(modes, a, b, acc)
        if found is not None:
            slowdown, how = found
            return ExecutionMode(1.0 / slowdown, True, slowdown, f"emulated {want}: {how}")
        why = ("emulate=auto derives a slowdown only for integer formats on integer modes (exact "
               "digit passes); state one instead, e.g. emulate=16")
    else:
        why = ("or ask for software emulation: emulate=auto (integer formats, exact digit passes) "
               "or emulate=S (your slowdown S >= 1 vs the peak)")
    raise OperationError(
        f"design {design.name!r} does not execute {want}; its MAC modes: "
        + "; ".join(m.label for m in modes)
        + ". Formats whose every value is a value of a mode's formats also run (int4 on int8); "
        + why)


def mac_hardware(design, formats: dict[str, Format]) -> tuple[Format, Format, Format, str]:
    """(a, b, acc, why): the formats whose multiplier and accumulator energy one MAC of
    ``formats`` (roles ``act``, ``weight``, ``acc``) costs on ``design``: the native mode it runs
    on, its requested operands where that mode gates the unused bits (``operand_gating``), the
    requested formats when no mode runs them (emulated)."""
    a, b, acc = formats["act"], formats["weight"], formats["acc"]
    m = _best_mode(design.pe.modes, a, b, acc)
    if m is None:
        return a, b, acc, (f"emulated {a.name} x {b.name} -> {acc.name}: priced as that MAC "
                           "(the emulation passes' hardware is not modelled)")
    if m.operand_gating:
        return a, b, m.acc, (f"on mode {m.label} with operand gating ({m.operand_gating_source}): "
                             f"a {a.name} x {b.name} multiply, a {m.acc.name} accumulate")
    narrower = (a, b, acc) != (m.a, m.b, m.acc)
    return m.a, m.b, m.acc, (f"runs on mode {m.label}" + (
        f" (requested {a.name} x {b.name} -> {acc.name}; the mode gates no operand bits)" if narrower else ""))


def _best_mode(modes, a: Format, b: Format, acc: Format) -> MacMode | None:
    fits = [m for m in modes if embeds(a, m.a) and embeds(b, m.b) and embeds(acc, m.acc)]
    return max(fits, key=lambda m: m.rate) if fits else None


def _digits(x: IntFormat, d: int) -> list[list[IntFormat]]:
    """Ways to write ``x``'s integers (its fixed-point scale set aside) as radix-``2**d`` digits:
    ``n - 1`` unsigned ``d``-bit digits below a top digit of ``x``'s signedness."""
    out = []
    low = IntFormat(name=f"uint{d}", bits=d, signed=False)
    for n in range(2, x.bits + 1):
        r = x.bits - d * (n - 1)
        if r < 1 + int(x.signed):
            break
        out.append([IntFormat(name=f"{'' if x.signed else 'u'}int{r}", bits=r, signed=x.signed)]
                   + [low] * (n - 1))
    return out


def _digit_emulation(modes, a: Format, b: Format, acc: Format) -> tuple[float, str] | None:
    """(slowdown, how) of the cheapest exact digit decomposition on integer modes, or None."""
    ints = [m for m in modes if all(isinstance(f, IntFormat) for f in (m.a, m.b, m.acc))]
    if not ints or not (isinstance(a, IntFormat) and isinstance(b, IntFormat)):
        return None

    def options(x: IntFormat, pos: str) -> list[list[IntFormat]]:
        widths = {getattr(m, pos).bits - s for m in ints for s in (0, int(getattr(m, pos).signed))}
        return [[x]] + [ds for d in sorted(w for w in widths if w > 0) for ds in _digits(x, d)]

    best = None
    for da in options(a, "a"):
        for db in options(b, "b"):
            rates = [_best_mode(ints, p, q, acc) for p in da for q in db]
            if any(m is None for m in rates):
                continue
            slowdown = sum(1.0 / m.rate for m in rates)
            if best is None or slowdown < best[0]:
                how = (f"{len(da)} x {len(db)} digit passes (act digits "
                       f"{'+'.join(f.name for f in da)}, weight digits {'+'.join(f.name for f in db)}) "
                       f"on {', '.join(sorted({m.label for m in rates}))}: slowdown {slowdown:g}")
                best = (slowdown, how)
    return best
