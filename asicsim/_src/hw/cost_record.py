"""One operation's price as a record: :class:`CostResult`, what :func:`asicsim.cost` returns.

A view of one element of a :class:`asicsim._src.hw.result.Price` (its typed traffic and energy, its
:class:`~asicsim._src.hw.result.Bound`), named (operation, design, formats) and flattened by ``row()``
into the keys ``asicsim cost --json``, cost tables and sweeps print. Low in the hw package: the
systolic front ends and the GPU model both build it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from asicsim._src.hw.native import ExecutionMode
from asicsim._src.hw.objectives import FASTEST, OBJECTIVES
from asicsim._src.hw.power import scoped_power
from asicsim._src.hw.result import Bound, EnergySplit, Traffic
from asicsim._src.hw.result_table import TRAFFIC_KEYS as TRAFFIC_KEYS
from asicsim._src.numerics.frozen_fields import convert_fields, converted


@dataclass(frozen=True)
class CostResult:
    """One operation on one design: cycles, traffic, energy and bound. ``row()`` flattens it."""

    operation: str
    kind: str
    design: str
    formats: dict[str, str]
    pes: int
    clock_hz: float
    cycles_compute: float
    cycles_fill_drain: float
    cycles_stall: float
    macs: float
    macs_performed: float  # nonzero MACs when the design skips zero weights
    mapping_efficiency: float
    vector_ops: float
    traffic: Traffic  # per level x operand x direction; also a mapping "level.operand.reads|writes[_bytes]"
    energy_pj: EnergySplit  # pJ per component (mult, add, vector, buffer.<name>, dram, static ...)
    sources: dict[str, str] = field(repr=False, default_factory=dict)
    # compute | bandwidth | occupancy | power, as the pricing classified it (a name or a member; checked)
    bound: Bound = converted(Bound, default=Bound.COMPUTE)
    mapping: str = ""  # the schedule the mapper chose, in words
    schedule: dict = field(default_factory=dict)  # family, tiles (Mt, Nt, Kt), trips, double_buffered
    dram_bound_bytes: float = 0.0  # no schedule moves fewer DRAM bytes (asicsim._src.hw.bounds)
    dram_bound: str = ""  # which lower bound binds: compulsory | pebble
    cycles_sync: float = 0.0  # the design's per-operation synchronisation (array.sync_cycles)
    notes: tuple[str, ...] = ()  # what the price leaves out and why (e.g. no vector unit)
    execution: ExecutionMode | None = None  # systolic: MAC rate of the peak and whether emulated
    idle_power_w: dict = field(default_factory=dict)  # scope ("chip", "board") -> the design's idle power
    launch_fraction: float = float("nan")  # GPU: share of the time that is the launch/fixed-overhead floor
    sm_fraction: float = float("nan")  # GPU: time-weighted share of SMs busy
    # what the schedule was chosen for (asicsim._src.hw.objectives): the mapper's objective on a systolic
    # design; a GPU's model always takes its fastest kernel, so GPU results keep "fastest"
    objective: str = FASTEST

    def __post_init__(self):
        for name, kind in (("traffic", Traffic), ("energy_pj", EnergySplit)):
            if not isinstance(getattr(self, name), kind):
                raise TypeError(f"CostResult.{name}: {type(getattr(self, name)).__name__}; allowed: {kind.__name__}")
        convert_fields(self)
        if self.objective not in (*OBJECTIVES, FASTEST):
            raise ValueError(f"CostResult.objective = {self.objective!r}: allowed: "
                             f"{' | '.join((*OBJECTIVES, FASTEST))}")

    @property
    def cycles(self) -> float:
        return self.cycles_compute + self.cycles_fill_drain + self.cycles_stall + self.cycles_sync

    @property
    def time_s(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def utilization(self) -> float:
        """Useful MACs over what the whole array could do in the total time."""
        return self.macs_performed / (self.cycles * self.pes) if self.cycles else 0.0

    @property
    def energy_total_pj(self) -> float:
        return float(self.energy_pj.total)

    @property
    def energy_static_pj(self) -> float:
        """Static power (leakage, clock, controllers, DRAM background: the idle power) over the busy
        time, at board scope: every component :func:`asicsim._src.hw.power.is_static` names."""
        return float(self.energy_pj.static)

    @property
    def energy_dynamic_pj(self) -> float:
        """The energy the work itself switches (MACs, vector, buffers, DRAM): total less static.
        On short steps a GPU's total is mostly static, so comparisons of the work use this."""
        return float(self.energy_pj.dynamic)

    def scoped(self) -> dict:
        """The schema's per-scope keys (:mod:`asicsim._src.hw.power`): energy, dynamic energy, average
        power and achieved TOPS/W at core, chip and board; idle power at chip and board."""
        out = scoped_power(dict(self.energy_pj), self.time_s, self.macs, has_core=self.kind_of_design != "gpu")
        nan = float("nan")
        return out | {f"idle_power_{s}_w": self.idle_power_w.get(s, nan) for s in ("chip", "board")}

    @property
    def kind_of_design(self) -> str:
        return "gpu" if "path" in self.formats else "systolic"

    @property
    def dram_bytes(self) -> float:
        return float(self.traffic.dram_bytes)

    @property
    def sram_array_bytes(self) -> float:
        """Bytes between the buffers and the array (operand reads, result and partial-sum writes)."""
        return float(self.traffic.array_bytes)

    def row(self) -> dict:
        r = {"operation": self.operation, "kind": self.kind, "design": self.design,
             **{f"format_{k}": v for k, v in self.formats.items()},
             "cycles": self.cycles, "cycles_compute": self.cycles_compute,
             "cycles_fill_drain": self.cycles_fill_drain, "cycles_stall": self.cycles_stall,
             "cycles_sync": self.cycles_sync, "time_s": self.time_s, "time_us": self.time_s * 1e6,
             "tops": 2 * self.macs / self.time_s / 1e12 if self.time_s else 0.0,  # achieved, dense count
             "macs": self.macs, "macs_performed": self.macs_performed,
             "utilization": self.utilization, "mapping_efficiency": self.mapping_efficiency,
             "bound": self.bound.value, "objective": self.objective, "energy_pj": self.energy_total_pj,
             "energy_j": self.energy_total_pj * 1e-12, "energy_dynamic_j": self.energy_dynamic_pj * 1e-12,
             "energy_static_j": self.energy_static_pj * 1e-12,
             "dram_bytes": self.dram_bytes, "dram_bound_bytes": self.dram_bound_bytes,
             "dram_bound": self.dram_bound, "mapping": self.mapping, "note": "; ".join(self.notes),
             "sram_array_bytes": self.sram_array_bytes}
        if self.execution is not None:
            r |= {"mac_rate": self.execution.rate, "emulated": self.execution.emulated,
                  "slowdown": self.execution.slowdown}
        r |= self.scoped() | {"launch_fraction": self.launch_fraction, "sm_fraction": self.sm_fraction,
                              "objective": self.objective}
        r |= {f"energy.{k}_pj": v for k, v in self.energy_pj.items()}
        r |= {k: self.traffic[k] for k in TRAFFIC_KEYS if k in self.traffic}
        return r
