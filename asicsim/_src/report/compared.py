"""Several designs priced side by side, compared at one named scope: the lines ``asicsim cost``
and ``asicsim trace`` end with (:mod:`asicsim._src.report.scope` says each comparison)."""

from __future__ import annotations

import math

from asicsim._src.hw.interface import roof
from asicsim._src.report.scope import (
    BESIDE,
    DEFAULT_SCOPE,
    busy_text,
    energy_phrase,
    ratios,
    why,
    words,
)
from asicsim._src.report.units import compare


def design_lines(totals: dict, gpus, scope: str = DEFAULT_SCOPE, unit: str = "step", missing: str = "") -> list[str]:
    """The comparison ``asicsim cost`` and ``asicsim trace`` print for several designs: each
    against the first GPU among them (else the first design), at ``scope``, with the reasons and
    a bound GPU's busy-batch comparison; ``totals``: design name -> its summed result keys (in the
    order given). [] for fewer than two designs."""
    names = list(totals)
    if len(names) < 2:
        return []
    priced = [n for n in names if _priced(totals[n])]
    if not priced:
        return ["No design prices every op, so none is compared (the notes above say why)."]
    ref_name = next((n for n in priced if n in set(gpus)), priced[0])
    ref = totals[ref_name]
    lines = [f"Compared {words(scope)} (--scope; a GPU is measured as a board, {words(BESIDE[scope])} beside it, "
             f"dynamic-only at the same scope), against {ref_name}:"]
    for n in names:
        if n == ref_name:
            continue
        if n not in priced:
            lines.append(f"  {n} is not compared: it does not price every op (the notes above say why).")
            continue
        speed = ratios(totals[n], ref, None)["speedup"]
        text = f"{n} uses {energy_phrase(totals[n], ref, ref_name, scope)} and is {compare(speed, 'faster', 'slower')}."
        reason = why(totals[n], ref, n, ref_name, scope, unit)
        extra = [reason, busy_text(totals[n], ref, n, ref_name, scope, unit, missing, said=reason)]
        lines.append("  " + " ".join([text, *(x for x in extra if x)]))
    return lines


def _priced(total) -> bool:
    """Whether a design's summed figures are numbers (a design that cannot run an op has none)."""
    return all(math.isfinite(float(total.get(k, math.nan))) for k in ("time_s", "energy_j"))


def _gpu_names(designs) -> set[str]:
    """The names of the GPUs among the designs given (a catalog name or a path)."""
    from asicsim._src.hw.design_files import load_design

    kind = {}  # the GPU baselines are picked by the design_kind label a record carries (roof)
    for d in designs or []:
        try:
            obj = load_design(d)
        except (ValueError, OSError):  # priced already, so only a GPU check: a failure is no GPU
            continue
        kind[obj.name] = roof(obj)["design_kind"]
    return {name for name in kind if kind.get(name) == "gpu"}


def cost_lines(report, designs, scope: str = DEFAULT_SCOPE, unit: str = "run") -> list[str]:
    """The designs of a cost table (``asicsim cost``) compared at ``scope``: each design's rows
    summed (time, energy per scope, the GPU's launch and SM shares time-weighted); a blank line
    first, [] for one design."""
    if report["design"].nunique() < 2:
        return []
    from asicsim._src.system.busy import trace_totals

    if "time_s" not in report:  # a DeepBench suite's table gives each kernel's time in µs
        report = report.assign(time_s=report["time_us"] * 1e-6)
    totals = {d: trace_totals(g) for d, g in report.groupby("design", sort=False)}
    return ["", *design_lines(totals, _gpu_names(designs), scope, unit)]


def trace_lines(workload, trace, designs, recipe, *, batch=None, inference: bool = False,
                scope: str = DEFAULT_SCOPE, objective: str | None = None) -> list[str]:
    """Several designs of ``asicsim trace`` compared at ``scope``: each design's trace totals,
    and where a GPU is launch- or occupancy-bound, every design again at the workload's busy batch
    for the GPUs given (:func:`asicsim._src.system.busy.busy_batch`); a blank line first, [] for one design. ``objective``: what the
    systolic designs' schedules are mapped for (default: :data:`asicsim._src.hw.objectives.DEFAULT_OBJECTIVE`)."""
    from asicsim._src.hw.design_files import labelled_designs
    from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE
    from asicsim._src.system.busy import busy_batch, busy_figures, gpu_bound, trace_totals
    from asicsim._src.workloads.pricing import trace_costs

    pairs = labelled_designs(designs)
    if len(pairs) < 2:
        return []
    objective = objective or DEFAULT_OBJECTIVE
    workload = workload.replace(batch=batch)
    totals = {label: trace_totals(trace_costs(trace, d, recipe, objective=objective)) | {"batch": workload.batch} for label, d in pairs}
    kind = {label: roof(d)["design_kind"] for label, d in pairs}
    gpus = {label for label in kind if kind.get(label) == "gpu"}
    if any(gpu_bound(t["launch_fraction"], t["sm_fraction"]) for t in totals.values()):
        big = busy_batch(workload, recipe, not inference, [d for label, d in pairs if label in gpus] or None)
        for label, d in pairs:
            totals[label] |= busy_figures(big, d, recipe, objective=objective)
    return ["", *design_lines(totals, gpus, scope, "batch" if inference else "step",
                              "its batch is already at the limit of the batch re-priced (asicsim._src.system.busy).")]
