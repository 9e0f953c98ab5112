"""Energy efficiency as architects quote it: pJ per MAC by component and peak TOPS/W per scope.

>>> from asicsim._src.hw.efficiency import peak_tops_per_w
>>> sorted(peak_tops_per_w("tpu_v1"))
['board', 'chip', 'core']

The peak is the array at full rate on the design's own formats (``formats`` may choose another
native mode): every PE does one MAC per cycle with its PE-register accesses, under the scope's
static power and overheads (:mod:`asicsim._src.hw.power`). Buffer and DRAM accesses depend on the
workload, so the peak leaves them out, as vendors' peak TOPS/W do; a workload's achieved
``tops_per_w_<scope>`` (cost rows) counts them. A GPU: peak ops over its TDP (board) and over the
TDP less the memory background and regulator share (chip); it has no separable core (NaN).
"""

from __future__ import annotations

import math

from asicsim._src.hw.power import component
from asicsim._src.hw.scopes import SCOPES


def energy_per_mac_pj(design, formats=None) -> dict[str, float]:
    """pJ per MAC at the peak rate, by component (``mult``, ``add``, ``registers``, ``control``,
    each static component spread over the peak MAC rate, the regulator losses) and ``total``.
    A systolic design only (a GPU's energy per op: :func:`asicsim._src.hw.gpu_model.energy_per_op_pj`)."""
    from asicsim._src.hw.design_files import load_design
    from asicsim._src.hw.gpu import GpuDesign

    d = load_design(design)
    if isinstance(d, GpuDesign):
        raise ValueError(f"energy_per_mac_pj: {d.name!r} is a GPU; allowed: a systolic design")
    return _per_mac(d, formats, _rates(d, formats))


def _rates(d, formats):
    """A systolic design's energy rates in ``formats`` (:func:`asicsim._src.hw.pricing.energy_rates`):
    built once per figure set (:func:`power_figures`), the per-MAC energies and idle power both read them."""
    from asicsim._src.hw.pricing import energy_rates
    from asicsim._src.hw.roles import resolve_formats

    return energy_rates(d, resolve_formats(d, formats))


def _per_mac(d, formats, r) -> dict[str, float]:
    """:func:`energy_per_mac_pj` of systolic design ``d`` from its energy rates ``r``."""
    from asicsim._src.hw.roles import mac_execution, resolve_formats

    rate = mac_execution(d, resolve_formats(d, formats), formats).rate
    pm = r.power
    macs_per_s = d.pes * d.clock_hz * rate
    out = {"mult": r.mult, "add": r.add, "registers": r.registers}
    out["control"] = (r.mult + r.add + r.registers) * pm.control_fraction
    out |= {k: float(w) / macs_per_s * 1e12 for k, w in pm.static_w.items()}
    dyn = sum(v for k, v in out.items() if component(k)[1] == "dynamic")
    stat = sum(v for k, v in out.items() if component(k)[1] == "static")
    loss = 1.0 / pm.vr_efficiency - 1.0
    out["vr_loss.dynamic"], out["vr_loss.static"] = dyn * loss, stat * loss
    out["total"] = sum(out.values())
    return out


def peak_tops_per_w(design, formats=None) -> dict[str, float]:
    """Peak TOPS per watt (TFLOPS/W on float paths; 2 ops per MAC) at ``core``, ``chip`` and ``board``."""
    from asicsim._src.hw.design_files import load_design
    from asicsim._src.hw.gpu import GpuDesign

    d = load_design(design)
    if isinstance(d, GpuDesign):
        return _gpu_peak(d, formats, idle_power(d))
    return _peak(energy_per_mac_pj(d, formats))


def _gpu_peak(d, formats, idle: dict) -> dict[str, float]:
    peak = d.peak_ops_per_s(formats) / 1e12
    chip_w = d.tdp_w - (idle["board"] - idle["chip"])  # less the memory background and regulators
    return {"core": math.nan, "chip": peak / chip_w, "board": peak / d.tdp_w}


def _peak(per_mac: dict) -> dict[str, float]:
    out = {}
    for i, scope in enumerate(SCOPES):
        pj = sum(v for k, v in per_mac.items() if k != "total" and SCOPES.index(component(k)[0]) <= i)
        out[scope] = 2 / pj  # 2 ops per pJ-per-MAC: TOPS/W
    return out


def power_figures(design, formats=None) -> tuple[dict[str, float], dict[str, float] | None]:
    """:func:`idle_power` and :func:`peak_tops_per_w` together, a systolic design's energy rates
    built once (``roof`` and ``asicsim designs`` need both); the peak is None where the design does
    not execute ``formats`` (:class:`~asicsim._src.hw.operations.OperationError`), the idle power stands."""
    from asicsim._src.hw.design_files import load_design
    from asicsim._src.hw.gpu import GpuDesign
    from asicsim._src.hw.operations import OperationError

    d = load_design(design)
    if isinstance(d, GpuDesign):
        idle = idle_power(d)
        peak = lambda: _gpu_peak(d, formats, idle)  # noqa: E731
    else:
        r = _rates(d, formats)
        idle = _idle(r)
        peak = lambda: _peak(_per_mac(d, formats, r))  # noqa: E731
    try:
        return idle, peak()
    except OperationError:  # formats the design does not execute: no peak to quote
        return idle, None


def _idle(r) -> dict[str, float]:
    return {s: float(r.power.idle_w(s)) for s in ("chip", "board")}


def idle_power(design, formats=None) -> dict[str, float]:
    """A design's idle power at chip and board scope (:mod:`asicsim._src.hw.power`; a GPU:
    :func:`asicsim._src.hw.gpu_cost.gpu_static_split` of its modelled static power)."""
    from asicsim._src.hw.design_files import load_design
    from asicsim._src.hw.gpu import GpuDesign

    d = load_design(design)
    if isinstance(d, GpuDesign):
        from asicsim._src.hw.gpu_cost import gpu_static_split
        from asicsim._src.hw.gpu_model import generation_constants, load_fit

        static = generation_constants(load_fit(), d.architecture)[0]["static_fraction"] * d.tdp_w
        return {"chip": gpu_static_split(d, static)[0]["static.chip"], "board": static}
    return _idle(_rates(d, formats))
