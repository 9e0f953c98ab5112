"""A comparison of two priced runs at one named scope, said in words: the report's answer,
``asicsim trace`` and ``asicsim cost`` all say it this way.

Each side's energy is read at the same scope (issue 30's record schema: ``energy_<scope>_j`` and
``energy_dynamic_<scope>_j`` for ``core``, ``chip``, ``board``): by default board to board, since a
GPU is measured as a board (what ``nvidia-smi`` reports), with chip to chip beside it and the
dynamic-only ratio at the same scope. A GPU has no separable core (``energy_core_j`` is NaN): asked
for core, a comparison with one is made chip to chip and says why. A record written before the
scopes were recorded has no ``energy_board_j``: its ratio is said "scope unknown", never presented
as a board's.

A ratio of :data:`EXPLAIN` or more either way is said with its reason (the costlier side's launch
floor, idle SMs, static share at the scope, or the work itself), and a total ratio whose direction
differs from the dynamic-only one says why (static power decides it: the share that is static).
A GPU that is launch- or occupancy-bound (:func:`asicsim._src.system.busy.gpu_bound`) is said to be,
with the fraction, and compared again at the records' ``busy_batch`` where both sides have one.

Rows are mappings (dicts or pandas rows) of a record's result keys.
"""

from __future__ import annotations

import math

from asicsim._src.hw.scopes import DEFAULT_SCOPE, SCOPES
from asicsim._src.report.units import SAME, compare, times
from asicsim._src.system.busy import gpu_bound

__all__ = ["DEFAULT_SCOPE", "SCOPES", "busy_text", "energy_phrase", "ratios", "why"]
#: The scope said beside the asked one.
BESIDE = {"board": "chip", "chip": "board", "core": "chip"}
#: A ratio of this many times or more, either way, is never said without its reason.
EXPLAIN = 100.0


def _num(row, key: str) -> float:
    """``row[key]`` as a float; NaN when missing, None or not a number."""
    try:
        v = row.get(key) if hasattr(row, "get") else None
        return math.nan if v is None else float(v)
    except (TypeError, ValueError):
        return math.nan


def pct(x: float) -> str:
    """A share as a percentage: "97 %"; from 99 up one decimal, rounded down, so that short of
    all is never said as 100 %.

    >>> pct(0.9649), pct(0.99749), pct(0.99999), pct(1.0)
    ('96 %', '99.7 %', '99.9 %', '100 %')
    """
    p = 100 * x
    return f"{math.floor(p * 10) / 10:.1f} %" if 99 <= p < 100 else f"{p:.0f} %"


def words(scope: str | None) -> str:
    """"board to board", "chip to chip", "core to core", or "scope unknown"."""
    return f"{scope} to {scope}" if scope else "scope unknown"


def has_scopes(row, prefix: str = "") -> bool:
    """Whether a record carries energies at named scopes (its board energy is a number)."""
    return math.isfinite(_num(row, f"{prefix}energy_board_j"))


def energies(row, scope: str | None, prefix: str = "") -> tuple[float, float]:
    """(total, dynamic) energy of ``row`` at ``scope``; ``scope`` None: the record's ``energy_j``
    and ``energy_dynamic_j`` (of an unknown scope). ``prefix``: ``busy_`` for the busy batch."""
    if scope is None:
        return _num(row, f"{prefix}energy_j"), _num(row, f"{prefix}energy_dynamic_j")
    return _num(row, f"{prefix}energy_{scope}_j"), _num(row, f"{prefix}energy_dynamic_{scope}_j")


def resolve(row, ref, scope: str, ref_name: str, prefix: str = "") -> tuple[str | None, str]:
    """The scope both sides can be compared at, and what is said about it: ``scope`` itself; chip
    where ``ref`` (or ``row``) has no core (a GPU); None (unknown) where a record has no scopes."""
    if not (has_scopes(row, prefix) and has_scopes(ref, prefix)):
        return None, ""
    if all(math.isfinite(energies(r, scope, prefix)[0]) for r in (row, ref)):
        return scope, ""
    return "chip", f"{ref_name} has no separable core, so chip to chip"


def ratios(row, ref, scope: str, prefix: str = "") -> dict:
    """``ref`` over ``row`` (> 1: ``row`` costs less) at ``scope`` and beside it: ``energy``,
    ``dynamic`` (same scope), ``beside`` (at :data:`BESIDE`'s scope), ``speedup``."""
    (t, d), (rt, rd) = energies(row, scope, prefix), energies(ref, scope, prefix)
    out = {"energy": rt / t if t > 0 else math.nan, "dynamic": rd / d if d > 0 else math.nan}
    if scope is not None:
        b, rb = energies(row, BESIDE[scope], prefix)[0], energies(ref, BESIDE[scope], prefix)[0]
        out["beside"] = rb / b if b > 0 else math.nan
    else:
        out["beside"] = math.nan
    tt, rtt = _num(row, f"{prefix}time_s"), _num(ref, f"{prefix}time_s")
    out["speedup"] = rtt / tt if tt > 0 else math.nan
    return out


def than(phrase: str, who: str) -> str:
    return f"{phrase} {'as' if phrase.startswith('about') else 'than'} {who}"


def energy_phrase(row, ref, ref_name: str, scope: str = DEFAULT_SCOPE, prefix: str = "", named: bool = True) -> str:
    """"7.2x less energy than gpu_h100, board to board (5.6x less chip to chip; 5.6x less counting
    dynamic energy only)"; "41x less energy than g1, scope unknown (3.8x less counting dynamic
    energy only)"; without "than ``ref_name``" unless ``named``."""
    used, said = resolve(row, ref, scope, ref_name, prefix)
    r = ratios(row, ref, used, prefix)
    ratio = compare(r["energy"], "less energy", "more energy")
    head = f"{than(ratio, ref_name) if named else ratio}, {words(used)}"
    if said:
        head += f" ({said})"
    inner = []
    if used is not None and math.isfinite(r["beside"]):
        inner.append(f"{compare(r['beside'], 'less', 'more')} {words(BESIDE[used])}")
    if math.isfinite(r["dynamic"]):
        inner.append(f"{compare(r['dynamic'], 'less', 'more')} counting dynamic energy only")
    return head + (f" ({'; '.join(inner)})" if inner else "")


def _direction(r: float) -> int:
    return 0 if not math.isfinite(r) or abs(r - 1) <= SAME else (1 if r > 1 else -1)


def _static_share(row, scope: str | None, prefix: str = "") -> float:
    t, d = energies(row, scope, prefix)
    return 1 - d / t if t > 0 else math.nan


def bound_text(row, name: str, unit: str, prefix: str = "") -> str:
    """"gpu_h100's step is 97 % launch floor" / "gpu_h100 keeps 30 % of its SMs busy"; "" when
    ``row`` is not a bound GPU."""
    lf, sm = _num(row, f"{prefix}launch_fraction"), _num(row, f"{prefix}sm_fraction")
    b = gpu_bound(lf, sm)
    if b == "launch":
        return f"{name}'s {unit} is {pct(lf)} launch floor"
    if b == "occupancy":
        return f"{name} keeps {pct(sm)} of its SMs busy (time-weighted)"
    return ""


def why(row, ref, row_name: str, ref_name: str, scope: str = DEFAULT_SCOPE, unit: str = "step",
        prefix: str = "") -> str:
    """The reason for a ratio of :data:`EXPLAIN` or more, and for a total ratio pointing the other
    way from the dynamic one, as a sentence; "" when neither needs one."""
    used, _ = resolve(row, ref, scope, ref_name, prefix)
    r = ratios(row, ref, used, prefix)
    total, dyn = r["energy"], r["dynamic"]
    if not math.isfinite(total):
        return ""
    big = total >= EXPLAIN or total <= 1 / EXPLAIN
    flip = _direction(total) * _direction(dyn) == -1
    if not (big or flip):
        return ""
    costly, costly_name, other, other_name = ((ref, ref_name, row, row_name) if total > 1
                                              else (row, row_name, ref, ref_name))
    where = f"{used} energy" if used else "energy"
    share, other_share = _static_share(costly, used, prefix), _static_share(other, used, prefix)
    parts = []
    if flip:
        head = "static power dominates" if share > 0.5 else "static power decides it"
        parts.append(f"{head}: {pct(share)} of {costly_name}'s {where} is static, {pct(other_share)} of "
                     f"{other_name}'s")
    if big:
        bound = bound_text(costly, costly_name, unit, prefix)
        if bound:
            parts.append(bound)
        if share > 0.5 and not flip:
            parts.append(f"{pct(share)} of {costly_name}'s {where} is static")
        dyn_big = math.isfinite(dyn) and dyn > 0 and (dyn >= EXPLAIN or dyn <= 1 / EXPLAIN)
        if dyn_big and _direction(dyn) == _direction(total):
            parts.append(f"its dynamic energy alone is {times(max(dyn, 1 / dyn))} "
                         f"{'more' if total > 1 else 'less'} than {other_name}'s")
        if not parts:  # neither side idles much nor is the work itself that far apart: say both parts
            d = dyn if total > 1 else 1 / dyn
            parts.append(f"{costly_name}'s dynamic energy is {compare(d, 'more', 'less')} than {other_name}'s "
                         f"and {pct(share)} of its {where} is static")
    said = times(max(total, 1 / total))
    lead = (f"Why {said} and the other way from dynamic energy" if big and flip else
            f"Why {said}" if big else "Total and dynamic-only ratios point opposite ways")
    return f"{lead}: {'; '.join(parts)}."


#: What :func:`busy_text` says where the records hold no figure at a larger batch.
NO_BUSY = ("the records hold no figure at a larger batch (written before asicsim priced one, or the batch is "
           "already at the limit).")


def busy_text(row, ref, row_name: str, ref_name: str, scope: str = DEFAULT_SCOPE, unit: str = "step",
              missing: str = NO_BUSY, said: str = "") -> str:
    """Where ``ref`` is a bound GPU: that it is, with the fraction (unless ``said``, the sentence
    before, gives it already), and the comparison again at the records' ``busy_batch`` (whether
    the GPU is busy there is said, as measured; where the records' ``busy_gpu`` names it, that the
    batch is the smallest keeping it busy, or the largest priced); "" when ``ref`` is not bound."""
    bound = bound_text(ref, ref_name, unit)
    if not bound:
        return ""
    kind = gpu_bound(_num(ref, "launch_fraction"), _num(ref, "sm_fraction"))
    text = f"{ref_name} is {kind}-bound" + ("" if bound.rstrip(".") in said else f": {bound}")
    b, rb = _num(row, "busy_batch"), _num(ref, "busy_batch")
    if not (math.isfinite(b) and b == rb):
        if math.isfinite(b) and math.isfinite(rb):
            return text + "; the two records were priced at different larger batches, so not compared there."
        return text + (f"; {missing}" if missing else ".")
    lf, sm = _num(ref, "busy_launch_fraction"), _num(ref, "busy_sm_fraction")
    state = gpu_bound(lf, sm)
    fractions = ", ".join(x for x in (f"launch floor {pct(lf)}" if math.isfinite(lf) else "",
                                      f"{pct(sm)} of SMs busy" if math.isfinite(sm) else "") if x)
    batch = _num(row, "batch")
    at = f"At batch {b:,.0f}" + (f" ({b / batch:,.0f}x the workload's {batch:,.0f})" if batch > 0 else "")
    chosen = ref_name in str(row.get("busy_gpu") or "").split(",")  # the batch was chosen for this GPU
    there = (f"where {ref_name} is still {state}-bound" if state else f"which keeps {ref_name} busy")
    if chosen:
        there = (f"the largest priced, {there}" if state else f"the smallest that keeps {ref_name} busy")
    there += f" ({fractions})" if fractions else ""
    speed = ratios(row, ref, None, "busy_")["speedup"]
    out = (f"{text}. {at}, {there}, {row_name} uses {energy_phrase(row, ref, ref_name, scope, 'busy_')} and is "
           f"{compare(speed, 'faster', 'slower')}.")
    reason = why(row, ref, row_name, ref_name, scope, "batch", "busy_")
    return out + (f" {reason}" if reason else "")

