"""Power at named scopes: what a systolic design's core, chip and board draw, busy and idle.

Scopes (the record schema of issue 30):

* ``core``: the array (multipliers, adders, PE registers), the vector unit and the on-chip buffers,
  dynamic and leakage (``leakage.sram``, ``leakage.logic``);
* ``chip``: core + clock distribution (``clock``), on-chip network and control (``control``), the
  DRAM controller and PHY (``dram_phy``), the host interface (``host_interface``) and any idle power
  the components do not name (``other_idle``: a fitted residual where a measured idle is published);
* ``board``: chip + the DRAM devices' access energy (``dram``) and background power
  (``dram_background``) + voltage-regulator losses (``vr_loss.dynamic``, ``vr_loss.static``).

Dynamic components are proportional to the work (events x pJ); static ones to the time (watts x
seconds): leakage, the clock tree (it toggles every cycle the chip is clocked), controllers, PHYs,
DRAM refresh and standby. **Idle power** is the static power (the chip clocked, doing nothing);
busy power adds the dynamic energy over the time. Every default below names its source; figures no
published source in the repository gives are marked ``assumption``/``estimate``. A design overrides
any of them in its ``[power]`` table (:class:`asicsim._src.hw.power_spec.PowerSpec`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from asicsim._src.hw.scopes import SCOPES

# --- defaults, each with its source -------------------------------------------------------------
#: Logic leakage as a share of the array's peak MAC power: the project's former static rule, now
#: for the logic alone. An assumption (no published accelerator leakage split in the repository).
LOGIC_LEAKAGE_FRACTION = (0.1, "assumption (estimate): logic leakage 0.1 x the array's peak MAC power "
                               "(PEs x clock x MAC pJ); no published figure")
#: SRAM leakage per MiB of on-chip buffer, held constant across nodes (denser cells, leakier devices).
SRAM_LEAKAGE_MW_PER_MIB = (30.0, "assumption (estimate): 30 mW per MiB of SRAM at any node (a few "
                                 "tens of pA per bitcell with its periphery at ~0.9 V and operating "
                                 "temperature); no measured per-MiB figure in the repository")
#: Clock distribution as a share of the core's peak dynamic power (array MACs and PE registers at
#: full rate), drawn whenever the chip is clocked.
CLOCK_FRACTION = (0.3, "assumption (estimate): clock tree 0.3 x the core's peak dynamic power, within "
                       "the 20-40 % share of dynamic power commonly reported for clock networks")
#: On-chip network and control as a share of the core's dynamic energy.
CONTROL_FRACTION = (0.1, "assumption (estimate): on-chip network, instruction and control logic 0.1 x "
                         "the core's dynamic energy")
#: DRAM controller + PHY standby power per GB/s of peak bandwidth.
PHY_MW_PER_GBPS = {"HBM": (2.0, "assumption (estimate): HBM controller + PHY 2 mW per GB/s of bandwidth "
                                "(short interposer wires, no termination)"),
                   "other": (10.0, "assumption (estimate): DDR/LPDDR/GDDR controller + PHY 10 mW per GB/s "
                                   "of bandwidth (terminated board traces, DLLs)")}
#: DRAM device background (standby + refresh) power.
DDR4_DEVICE_W = (0.066 * 1.2, "Micron 8Gb DDR4 SDRAM (MT40A512M16/MT40A1G16) data sheet, Table 10 x16 "
                              "IDD2N precharge standby 66 mA at DDR4-2133, x VDD 1.2 V = 79 mW per 8 Gb device")
#: LPDDR4 background per x16 channel (one "device": a x16 channel at 3.2 Gb/s per pin is 6.4 GB/s).
#: Micron 6 Gb LPDDR4-3200 x16 channel as DRAMPower ships it (tukl-msd/DRAMPower,
#: memspecs/MICRON_6Gb_LPDDR4-3200_32bit_A.json, currents from Micron's data sheet): IDD2N precharge
#: standby 2.0 mA on VDD1 1.8 V + 27 mA on VDD2 1.1 V + 0.75 mA on VDDQ 1.1 V = 34.1 mW.
LPDDR4_CHANNEL_W = (1.8 * 2.0e-3 + 1.1 * 27.0e-3 + 1.1 * 0.75e-3,
                    "Micron 6 Gb LPDDR4-3200 x16 channel (DRAMPower memspecs/MICRON_6Gb_LPDDR4-3200_32bit_A.json, "
                    "from Micron's data sheet): IDD2N 2.0 mA x VDD1 1.8 V + IDD2N2 27 mA x VDD2 1.1 V + IDD2NQ "
                    "0.75 mA x VDDQ 1.1 V = 34.1 mW per x16 channel (taken for LPDDR4X/LPDDR5 too: an assumption)")
DRAM_BACKGROUND = {  # kind family -> (watts per device or stack, unit, source)
    "DDR": (DDR4_DEVICE_W[0], "device", DDR4_DEVICE_W[1]),
    "LPDDR": (LPDDR4_CHANNEL_W[0], "device", LPDDR4_CHANNEL_W[1]),
    "GDDR": (0.3, "device", "assumption (estimate): 0.3 W per GDDR device in standby"),
    "HBM": (1.0, "stack", "assumption (estimate): 1 W per HBM stack in standby (8 DRAM dies at about "
                          "DDR4's 79 mW each plus the base die)"),
}
#: Bandwidth per HBM stack (GB/s), to count stacks: JEDEC JESD235 (HBM2 2.0 Gb/s x 1024),
#: JESD235C (HBM2E 3.6 Gb/s), JESD238 (HBM3 6.4 Gb/s); HBM3E 9.6 Gb/s (vendor announcements).
HBM_STACK_GBPS = {"HBM": 128.0, "HBM2": 256.0, "HBM2E": 460.8, "HBM3": 819.2, "HBM3E": 1228.8}
#: GB per DRAM device (an 8 Gb die) and GB/s per device when a design gives no capacity: a x16
#: DDR4/LPDDR4 device at 3.2 Gb/s per pin, a x32 GDDR device at 8 Gb/s per pin (GDDR5).
DEVICE_GIB, DEVICE_GBPS, GDDR_DEVICE_GBPS = 1.0, 6.4, 32.0
VR_EFFICIENCY = (0.9, "assumption (estimate): voltage regulators 90 % efficient (point-of-load "
                      "converters are quoted at 85-93 %)")


def dram_family(kind: str) -> str:
    k = kind.upper()
    return ("HBM" if k.startswith("HBM") else "LPDDR" if k.startswith("LPDDR")
            else "GDDR" if k.startswith("GDDR") else "DDR")


@dataclass(frozen=True)
class PowerModel:
    """One design's power components: ``static_w`` (component -> watts, arrays where a sweep varies
    the array), the dynamic overhead factors and every figure's source."""

    static_w: dict
    clock_hz: float
    control_fraction: float
    vr_efficiency: float
    sources: dict

    def idle_w(self, scope: str):
        """Idle power at ``scope`` (``core``, ``chip`` or ``board``): the static components in it."""
        chip = sum(v for k, v in self.static_w.items() if COMPONENTS[k][0] != "board")
        if scope == "core":
            return sum(v for k, v in self.static_w.items() if COMPONENTS[k][0] == "core")
        if scope == "chip":
            return chip
        if scope == "board":
            return (chip + self.static_w["dram_background"]) / self.vr_efficiency
        raise ValueError(f"scope {scope!r}; allowed: {list(SCOPES)}")


#: component -> (scope, "dynamic" | "static"). GPU components: ``compute`` and ``l2`` (chip,
#: dynamic), ``dram`` (board: HBM access), ``static.chip``, ``static.hbm``, ``static.board``.
COMPONENTS = {
    "mult": ("core", "dynamic"), "add": ("core", "dynamic"), "registers": ("core", "dynamic"),
    "vector": ("core", "dynamic"), "leakage.sram": ("core", "static"), "leakage.logic": ("core", "static"),
    "control": ("chip", "dynamic"), "clock": ("chip", "static"), "dram_phy": ("chip", "static"),
    "host_interface": ("chip", "static"), "other_idle": ("chip", "static"),
    "dram": ("board", "dynamic"), "dram_background": ("board", "static"),
    "vr_loss.dynamic": ("board", "dynamic"), "vr_loss.static": ("board", "static"),
    "compute": ("chip", "dynamic"), "l2": ("chip", "dynamic"), "static.chip": ("chip", "static"),
    "static.hbm": ("board", "static"), "static.board": ("board", "static"),
    "static": ("board", "static"),  # a result written before the split: board static
}


def component(key: str) -> tuple[str, str]:
    """(scope, kind) of an energy component key (``buffer.<name>``: core, dynamic)."""
    if key.startswith("buffer."):
        return "core", "dynamic"
    if key not in COMPONENTS:
        raise KeyError(f"energy component {key!r}; known: buffer.<name> and {sorted(COMPONENTS)}")
    return COMPONENTS[key]


def is_static(key: str) -> bool:
    return component(key)[1] == "static"


def scoped_energy(energy: dict, *, has_core: bool = True) -> dict:
    """Schema keys (``energy_<scope>_j``, ``energy_dynamic_<scope>_j``) from an energy split in pJ
    (values may be arrays). ``has_core=False`` (a GPU): the core scope is NaN."""
    out = {}
    for i, scope in enumerate(SCOPES):
        inside = [(k, v) for k, v in energy.items() if SCOPES.index(component(k)[0]) <= i]
        out[f"energy_{scope}_j"] = sum((v for _, v in inside), 0.0) * 1e-12
        out[f"energy_dynamic_{scope}_j"] = sum((v for k, v in inside if component(k)[1] == "dynamic"), 0.0) * 1e-12
    if not has_core:
        out["energy_core_j"] = out["energy_dynamic_core_j"] = math.nan
    return out




def scoped_power(energy: dict, time_s: float, macs: float, *, has_core: bool = True) -> dict:
    """:func:`scoped_energy` plus average power (``power_<scope>_w``) and achieved efficiency
    (``tops_per_w_<scope>``: 2 x MACs per joule / 1e12, dense count as ``tops``) per scope."""
    return derived_power(scoped_energy(energy, has_core=has_core), time_s, macs)


def derived_power(energies: dict, time_s, macs) -> dict:
    """``energies`` (the :data:`SCOPE_ENERGY_KEYS`, summed or not; arrays allowed) with average
    power and achieved TOPS/W per scope derived from them."""
    out = dict(energies)
    with np.errstate(divide="ignore", invalid="ignore"):
        for s in SCOPES:
            e = np.asarray(energies[f"energy_{s}_j"], dtype=np.float64)
            t = np.asarray(time_s, dtype=np.float64)
            p = np.where(t > 0, e / np.where(t > 0, t, 1.0), np.nan)
            eff = np.where((e > 0) & (np.asarray(macs) > 0), 2 * np.asarray(macs, dtype=np.float64) / e / 1e12, np.nan)
            out[f"power_{s}_w"] = float(p) if p.ndim == 0 else p
            out[f"tops_per_w_{s}"] = float(eff) if eff.ndim == 0 else eff
    return out


def power_model(design, mac_pj: float, register_pj: float = 0.0, pes=None, sram_kib=None) -> PowerModel:
    """The design's static power components and overhead factors (``pes``, ``sram_kib``: a swept
    array size and total buffer capacity)."""
    spec = design.power
    pes = design.pes if pes is None else pes
    f_hz, name = design.clock_hz, design.name

    def pick(field, default, how=""):
        given = getattr(spec, field) if spec is not None else None
        if given is not None:
            return given, f"design {name!r} [power] {field} = {given:g}" + (f" ({spec.source})" if spec.source else "")
        return default[0], f"{default[1]}{how}"

    static, src = {}, {}
    peak_mac_w = np.asarray(pes, dtype=np.float64) * f_hz * mac_pj * 1e-12
    frac, s = pick("logic_leakage_fraction", LOGIC_LEAKAGE_FRACTION)
    static["leakage.logic"], src["leakage.logic"] = frac * peak_mac_w, s
    mw, s = pick("sram_leakage_mw_per_mib", SRAM_LEAKAGE_MW_PER_MIB)
    kib = design.sram_kib if sram_kib is None else sram_kib
    static["leakage.sram"] = mw * 1e-3 * np.asarray(kib, dtype=np.float64) / 1024
    src["leakage.sram"] = f"{s}; x the buffers' MiB ({design.sram_kib / 1024:.4g} in the design)"
    frac, s = pick("clock_fraction", CLOCK_FRACTION)
    core_peak_w = np.asarray(pes, dtype=np.float64) * f_hz * (mac_pj + register_pj) * 1e-12
    static["clock"], src["clock"] = frac * core_peak_w, s
    fam = dram_family(design.dram.kind)
    per_gbps = PHY_MW_PER_GBPS["HBM" if fam == "HBM" else "other"]
    phy, s = pick("dram_phy_w", (per_gbps[0] * 1e-3 * design.dram.bandwidth_gbps,
                                 f"{per_gbps[1]}; x {design.dram.bandwidth_gbps:g} GB/s"))
    static["dram_phy"], src["dram_phy"] = phy, s
    host, s = pick("host_interface_w", (0.0, "not priced: the design states no host interface "
                                              "([power] host_interface_w)"))
    static["host_interface"], src["host_interface"] = host, s
    bg, s = pick("dram_background_w", _dram_background(design.dram))
    static["dram_background"], src["dram_background"] = bg, s
    other = spec.other_idle_w if spec is not None else None
    if other is not None:
        static["other_idle"], src["other_idle"] = other, f"design {name!r} [power] other_idle_w ({spec.source})"
    elif design.static_power_w is not None:  # a published idle power: the chip's idle is that
        chip_keys = [k for k in static if COMPONENTS[k][0] != "board"]
        named = sum(static[k] for k in chip_keys)
        rest = design.static_power_w - named
        static["other_idle"] = np.maximum(rest, 0.0)
        src["other_idle"] = (f"fitted: design {name!r} static_power_w = {design.static_power_w:g} W (the chip's "
                             "published idle power) less the modelled chip components")
        over = np.asarray(rest) < 0
        if np.any(over):  # the published figure wins: the estimates are scaled down to it
            scale = np.where(over, design.static_power_w / np.where(over, named, 1.0), 1.0)
            for k in chip_keys:
                static[k] = static[k] * scale
                src[k] += (f"; scaled to fit the design's static_power_w = {design.static_power_w:g} W "
                           "(the modelled chip idle components exceed it)")
    else:
        static["other_idle"], src["other_idle"] = 0.0, "none: the design publishes no idle power"
    ctrl, src["control"] = pick("control_fraction", CONTROL_FRACTION)
    eta, src["vr_loss.dynamic"] = pick("vr_efficiency", VR_EFFICIENCY)
    src["vr_loss.static"] = src["vr_loss.dynamic"]
    return PowerModel(static, f_hz, ctrl, eta, src)


def _dram_background(dram) -> tuple[float, str]:
    return dram_background_w(dram.kind, dram.bandwidth_gbps, dram.capacity_gib)


def dram_background_w(kind: str, bandwidth_gbps: float, capacity_gib: float | None = None) -> tuple[float, str]:
    """(watts, source) of the DRAM devices' background power: per HBM stack (stacks from the
    bandwidth) or per 8 Gb device (devices from the capacity, else from the bandwidth)."""
    fam = dram_family(kind)
    w, unit, src = DRAM_BACKGROUND[fam]
    if fam == "HBM":
        per = HBM_STACK_GBPS.get(kind.upper(), HBM_STACK_GBPS["HBM2"])
        n = math.ceil(bandwidth_gbps / per - 1e-9)
        how = f"{n} stack(s) = ceil({bandwidth_gbps:g} / {per:g} GB/s per {kind} stack)"
    elif capacity_gib is not None:
        n = max(math.ceil(capacity_gib / DEVICE_GIB - 1e-9), 1)
        how = f"{n} device(s) = {capacity_gib:g} GiB / {DEVICE_GIB:g} GiB (8 Gb) per device"
    else:
        per = GDDR_DEVICE_GBPS if fam == "GDDR" else DEVICE_GBPS
        n = max(math.ceil(bandwidth_gbps / per - 1e-9), 1)
        how = f"{n} device(s) = ceil({bandwidth_gbps:g} / {per:g} GB/s per device; no capacity given)"
    kind_note = "" if kind.upper() == "DDR4" or fam != "DDR" else f" (assumption: {kind} taken as DDR4)"
    return w * n, f"{w:.3g} W per {unit}{kind_note}, {how} [{src}]"


def static_energy(model: PowerModel, time_s) -> dict:
    """pJ of every static component over ``time_s`` seconds."""
    t = np.asarray(time_s)
    return {k: np.asarray(v) * t * 1e12 for k, v in model.static_w.items()}


def add_overheads(e: dict, model: PowerModel) -> dict:
    """Adds ``control`` (chip dynamic) and the regulator losses to a split that has the core's
    dynamic components, ``dram`` and the static ones (:func:`static_energy`)."""
    core_dyn = sum(v for k, v in e.items() if component(k) == ("core", "dynamic"))
    e["control"] = core_dyn * model.control_fraction
    dyn = sum(v for k, v in e.items() if component(k)[1] == "dynamic")
    stat = sum(v for k, v in e.items() if component(k)[1] == "static")
    loss = 1.0 / model.vr_efficiency - 1.0
    e["vr_loss.dynamic"], e["vr_loss.static"] = dyn * loss, stat * loss
    return e


def power_capped_time(time_s, dynamic_j, tdp_w, static_w):
    """The time a chip takes when its power must stay within ``tdp_w``: ``max(t, E_dyn / (TDP -
    static))``, energy per operation taken constant in the clock (the linear DVFS rule the GPU model
    uses, :mod:`asicsim._src.hw.gpu_model`). So energy = E_dyn + static x t and power <= TDP."""
    budget = np.asarray(tdp_w, dtype=np.float64) - static_w
    with np.errstate(divide="ignore", invalid="ignore"):  # idle over the TDP: no clock fits (said by the caller)
        capped = np.where(budget > 0, np.asarray(dynamic_j) / np.where(budget > 0, budget, 1.0), 0.0)
    return np.maximum(time_s, capped)
