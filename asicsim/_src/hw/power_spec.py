"""A design's ``[power]`` table: overrides of the power model's component defaults (:mod:`asicsim._src.hw.power`).

Every field is optional; None takes the default named in :mod:`asicsim._src.hw.power` (each with its
source). Validated at construction like every design part (:mod:`asicsim._src.hw.design_checks`).
"""

from __future__ import annotations

from dataclasses import dataclass

from asicsim._src.hw import limits as lim
from asicsim._src.hw.design_checks import Problem, in_range, own_fields, raise_if, text

#: The fields of ``[power]`` and the range each may take.
POWER_LIMITS = {
    "sram_leakage_mw_per_mib": lim.Limit(0, 1e5, "mW per MiB", "0 (none) up to 100 W per MiB, far beyond any "
                                         "SRAM (leaky high-performance cells draw tens of mW per MiB)"),
    "logic_leakage_fraction": lim.Limit(0, 10, "of the peak MAC power", "0..10 x the array's peak MAC power"),
    "clock_fraction": lim.Limit(0, 10, "of the core's peak dynamic power", "0..10 x; clock networks draw "
                                "20-40 % of a chip's dynamic power"),
    "control_fraction": lim.Limit(0, 10, "of the core's dynamic energy", "0..10 x the core's dynamic energy"),
    "dram_phy_w": lim.Limit(0, 1e4, "W", "0 W up to 10 kW"),
    "host_interface_w": lim.Limit(0, 1e4, "W", "0 W up to 10 kW"),
    "dram_background_w": lim.Limit(0, 1e4, "W", "0 W up to 10 kW"),
    "vr_efficiency": lim.Limit(0, 1, "", "a fraction in (0, 1]: power out over power in", lo_open=True),
    "other_idle_w": lim.Limit(0, 1e5, "W", "0 W up to 100 kW"),
}


@dataclass(frozen=True, kw_only=True)
class PowerSpec:
    """Overrides of the power components (None: the model's default, :mod:`asicsim._src.hw.power`).

    ``other_idle_w``: idle power the components do not name (a fitted residual where a chip's
    measured idle power is published, e.g. TPU v1); ``source``: where the design's values come from.
    """

    sram_leakage_mw_per_mib: float | None = None
    logic_leakage_fraction: float | None = None
    clock_fraction: float | None = None
    control_fraction: float | None = None
    dram_phy_w: float | None = None
    host_interface_w: float | None = None
    dram_background_w: float | None = None
    vr_efficiency: float | None = None
    other_idle_w: float | None = None
    source: str = ""

    @staticmethod
    def problems(v: dict) -> list[Problem]:
        out: list[Problem] = []
        for key, limit in POWER_LIMITS.items():
            in_range(out, v, key, limit, optional=True)
        text(out, v, "source")
        return out

    def __post_init__(self) -> None:
        raise_if(self.problems(own_fields(self)))
