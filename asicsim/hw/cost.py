"""``asicsim.cost``: what an operation costs on a systolic design, physically.

>>> import asicsim as sim
>>> r = sim.cost(sim.Gemm(1024, 1024, 1024), "tpu_v1")
>>> r.bound, r.cycles_compute
('bandwidth', 16384.0)

This module picks the formats (and checks the design executes them: :mod:`asicsim.hw.native`),
has :func:`asicsim.hw.pipeline.price` map and price every operation (the mapper's schedule,
:mod:`asicsim.hw.counts` for the model, :mod:`asicsim.hw.pricing` for traffic, energy and the
bound) and names the results, with the DRAM lower bound (:mod:`asicsim.hw.bounds`) beside each.
Each operand's bytes are its own format's in memory words (``formats``: ``act`` = ifmap,
``weight`` = filter, ``acc`` = partial sums, ``out`` = ofmap; MX formats count their shared scales;
tf32 is a 32-bit word), so int8 moves half the bytes of fp16. The bound follows DeepBench's three
regimes (:func:`asicsim.hw.pricing.classify_bound`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from asicsim.hw.bounds import operation_bounds
from asicsim.hw.counts import FAMILIES, ZERO_CODES
from asicsim.hw.design import SystolicDesign
from asicsim.hw.design_files import labelled_designs, load_design
from asicsim.hw.gpu import GpuDesign
from asicsim.hw.mapper import describe
from asicsim.hw.native import ExecutionMode, execution_mode, parse_emulate, storage_bits
from asicsim.hw.objectives import DEFAULT_OBJECTIVE, FASTEST, OBJECTIVES, check_objective
from asicsim.hw.operations import Conv, Gemm, Operation, OperationError
from asicsim.hw.pipeline import price
from asicsim.hw.power import is_static, scoped_power
from asicsim.hw.pricing import BOUNDS, TRAFFIC_KEYS
from asicsim.hw.scalesim_files import CONV_FIELDS, Topology
from asicsim.numerics import FormatError, get_format

ROLES = ("act", "weight", "acc", "out")
OPERAND_OF_ROLE = {"act": "ifmap", "weight": "filter", "acc": "psum", "out": "ofmap"}


def parse_formats(formats: str | Mapping | None) -> dict[str, str]:
    """``"act=int8,weight=int8,acc=int32"`` or a mapping -> {role: format name}; checked.
    An ``emulate`` key (``auto`` or a slowdown) asks for software emulation (asicsim.hw.native)."""
    if formats is None:
        return {}
    if isinstance(formats, str):
        pairs = {}
        for item in filter(None, (s.strip() for s in formats.split(","))):
            role, eq, name = item.partition("=")
            if not eq or not name.strip():
                raise OperationError(f"formats: {item!r}; allowed: ROLE=FORMAT pairs separated by commas, "
                                     f"roles {list(ROLES)}")
            pairs[role.strip()] = name.strip()
        formats = pairs
    bad = sorted(set(formats) - set(ROLES) - {"emulate"})
    if bad:
        raise OperationError(f"formats: unknown role(s) {bad}; allowed: {list(ROLES)} and 'emulate'")
    parse_emulate(formats.get("emulate"))
    for role, name in formats.items():
        if role == "emulate":
            continue
        try:
            get_format(name)
        except FormatError as err:
            raise OperationError(f"formats: {role} = {name!r}; allowed: {err}") from None
    return dict(formats)


def resolve_formats(design: SystolicDesign, formats=None) -> dict:
    """Format specs per role: the design's PE formats unless overridden; ``out`` defaults to ``act``."""
    given = parse_formats(formats)
    f = {"act": design.pe.a_format, "weight": design.pe.b_format, "acc": design.pe.acc_format}
    f = {r: get_format(given[r]) if r in given else v for r, v in f.items()}
    f["out"] = get_format(given["out"]) if "out" in given else f["act"]
    return f


def mac_execution(design: SystolicDesign, fmts: dict, formats=None) -> ExecutionMode:
    """How the array runs MACs in ``fmts`` (rate of the peak, emulated or not; the ``emulate`` key of
    ``formats``): :func:`asicsim.hw.native.execution_mode`, which raises for formats the design
    does not execute. Only GEMM work needs it: the vector unit takes any format."""
    return execution_mode(design, fmts, parse_formats(formats).get("emulate"))


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
    traffic: dict[str, float]  # "level.operand.reads|writes" (elements) and "..._bytes"
    energy_pj: dict[str, float]  # mult, add, vector, buffer.<name>, dram, static
    sources: dict[str, str] = field(repr=False, default_factory=dict)
    bound: str = "compute"  # compute | bandwidth | occupancy, as the pricing pipeline classified it
    mapping: str = ""  # the schedule the mapper chose, in words
    schedule: dict = field(default_factory=dict)  # family, tiles (Mt, Nt, Kt), trips, double_buffered
    dram_bound_bytes: float = 0.0  # no schedule moves fewer DRAM bytes (asicsim.hw.bounds)
    dram_bound: str = ""  # which lower bound binds: compulsory | pebble
    cycles_sync: float = 0.0  # the design's per-operation synchronisation (array.sync_cycles)
    notes: tuple[str, ...] = ()  # what the price leaves out and why (e.g. no vector unit)
    execution: ExecutionMode | None = None  # systolic: MAC rate of the peak and whether emulated
    idle_power_w: dict = field(default_factory=dict)  # scope ("chip", "board") -> the design's idle power
    launch_fraction: float = float("nan")  # GPU: share of the time that is the launch/fixed-overhead floor
    sm_fraction: float = float("nan")  # GPU: time-weighted share of SMs busy
    # what the schedule was chosen for (asicsim.hw.objectives): the mapper's objective on a systolic
    # design; a GPU's model always takes its fastest kernel, so GPU results keep "fastest"
    objective: str = FASTEST

    def __post_init__(self):
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
        return sum(self.energy_pj.values())

    @property
    def energy_static_pj(self) -> float:
        """Static power (leakage, clock, controllers, DRAM background: the idle power) over the busy
        time, at board scope: every component :func:`asicsim.hw.power.is_static` names."""
        return sum(v for k, v in self.energy_pj.items() if is_static(k))

    @property
    def energy_dynamic_pj(self) -> float:
        """The energy the work itself switches (MACs, vector, buffers, DRAM): total less static.
        On short steps a GPU's total is mostly static, so comparisons of the work use this."""
        return self.energy_total_pj - self.energy_static_pj

    def scoped(self) -> dict:
        """The schema's per-scope keys (:mod:`asicsim.hw.power`): energy, dynamic energy, average
        power and achieved TOPS/W at core, chip and board; idle power at chip and board."""
        out = scoped_power(self.energy_pj, self.time_s, self.macs, has_core=self.kind_of_design != "gpu")
        nan = float("nan")
        return out | {f"idle_power_{s}_w": self.idle_power_w.get(s, nan) for s in ("chip", "board")}

    @property
    def kind_of_design(self) -> str:
        return "gpu" if "path" in self.formats else "systolic"

    @property
    def dram_bytes(self) -> float:
        return self.traffic["dram_bytes"]

    @property
    def sram_array_bytes(self) -> float:
        """Bytes between the buffers and the array (operand reads, result and partial-sum writes)."""
        return self.traffic["array_bytes"]

    def row(self) -> dict:
        r = {"operation": self.operation, "kind": self.kind, "design": self.design,
             **{f"format_{k}": v for k, v in self.formats.items()},
             "cycles": self.cycles, "cycles_compute": self.cycles_compute,
             "cycles_fill_drain": self.cycles_fill_drain, "cycles_stall": self.cycles_stall,
             "cycles_sync": self.cycles_sync, "time_s": self.time_s, "time_us": self.time_s * 1e6,
             "tops": 2 * self.macs / self.time_s / 1e12 if self.time_s else 0.0,  # achieved, dense count
             "macs": self.macs, "macs_performed": self.macs_performed,
             "utilization": self.utilization, "mapping_efficiency": self.mapping_efficiency,
             "bound": self.bound, "objective": self.objective, "energy_pj": self.energy_total_pj,
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


def cost(op: Operation, design: str | SystolicDesign | GpuDesign, formats: str | Mapping | None = None,
         *, objective: str = DEFAULT_OBJECTIVE) -> CostResult:
    """Price one operation on a design (a catalog name, a path or a spec), its GEMMs mapped for
    ``objective`` (:mod:`asicsim.hw.objectives`; a GPU runs its fastest kernel whatever it is)."""
    return cost_many([op], design, formats, objective=objective)[0]


def scheduled_for(design: str | SystolicDesign | GpuDesign, objective: str = DEFAULT_OBJECTIVE) -> str:
    """What ``design``'s results are scheduled for when priced for ``objective``: the mapper's
    ``objective`` on a systolic design; ``fastest`` on a GPU (its model takes its fastest kernel,
    with no DVFS model beyond its power cap). A result's ``objective`` key says the same."""
    check_objective(objective)
    return FASTEST if isinstance(load_design(design), GpuDesign) else objective


def bytes_per_element(fmts: dict) -> dict[str, float]:
    """Stored bytes per element of each operand, in memory words (tf32: 4 bytes; block formats
    count their shared scales): :func:`asicsim.hw.native.storage_bits`."""
    return {OPERAND_OF_ROLE[r]: storage_bits(f) / 8 for r, f in fmts.items()}


def cost_many(ops: Sequence[Operation], design: str | SystolicDesign | GpuDesign,
              formats: str | Mapping | None = None, *, objective: str = DEFAULT_OBJECTIVE) -> list[CostResult]:
    """Price several operations on one design in one vectorised pass (same numbers as :func:`cost`).

    Every GEMM the operations lower to (a conv's groups, an RNN's input projection and recurrent
    steps) is mapped by :mod:`asicsim.hw.mapper` for ``objective`` (:mod:`asicsim.hw.objectives`:
    ``balanced`` by default, ``energy``, ``dram`` bytes or ``latency``) and priced by
    :func:`asicsim.hw.pipeline.price`; each result says its ``objective``. A GPU's results say
    ``fastest``: its model takes its fastest kernel whatever the objective.
    """
    check_objective(objective)
    d = load_design(design)
    if isinstance(d, GpuDesign):  # the GPU baseline (asicsim.hw.gpu_model)
        return d.cost_many(ops, formats)
    fmts = resolve_formats(d, formats)
    zero = ZERO_CODES[d.array.zero_weights]
    has_gemm = [op.kind in ("gemm", "conv", "rnn") for op in ops]
    mode = mac_execution(d, fmts, formats) if any(has_gemm) else None  # raises for formats d does not run
    pr = price(ops, d, fmts, bytes_per_element(fmts), objective=objective, zero=zero,
               rate=mode.rate if mode else 1.0)
    n = len(ops)
    t = pr.counts
    performed = t["macs_nonzero"] if zero == ZERO_CODES["skip"] else t["macs"]
    slots = t["mapping_slots"]
    mapping = np.divide(t["mapped_pes"], slots, out=np.full(n, np.nan), where=slots > 0)
    names = {r: f.name for r, f in fmts.items()}

    def per_op(values: dict) -> list[dict[str, float]]:  # {key: array} -> one {key: float} per op
        cols = {k: np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)).tolist() for k, v in values.items()}
        return [{k: c[i] for k, c in cols.items()} for i in range(n)]

    traffic_of, energy_of = per_op(pr.traffic), per_op(pr.energy)
    bounds = [operation_bounds(op, d, formats) for op in ops]
    return [CostResult(
        operation=op.label, kind=op.kind, design=d.name, formats=names, pes=d.pes,
        clock_hz=_clock(pr, i, d), cycles_compute=float(t["cycles_compute"][i]),
        cycles_fill_drain=float(t["cycles_fill_drain"][i]), cycles_stall=float(t["cycles_stall"][i]),
        cycles_sync=float(t["cycles_sync"][i]),
        macs=float(t["macs"][i]), macs_performed=float(performed[i]),
        mapping_efficiency=float(mapping[i]), vector_ops=float(t["vector_ops"][i]),
        traffic=traffic_of[i], energy_pj=energy_of[i], sources=pr.sources,
        mapping=_mapping_text(t, i, d), schedule=_schedule(t, i), bound=BOUNDS[int(pr.bound[i])],
        dram_bound_bytes=float(bounds[i].bound), dram_bound=str(bounds[i].binding),
        notes=pr.notes[i], execution=mode if has_gemm[i] else None,
        idle_power_w={k: float(v) for k, v in pr.idle_w.items()}, objective=objective)
        for i, op in enumerate(ops)]


def _clock(pr, i: int, d: SystolicDesign) -> float:
    """The clock operation ``i`` ran at: the design's, or lower where its TDP capped it."""
    cycles, t = float(pr.cycles[..., i]), float(pr.time_s[..., i])
    return cycles / t if t > 0 and cycles > 0 and t > cycles / d.clock_hz else d.clock_hz


def _schedule(t: dict, i: int) -> dict:
    if not np.isfinite(t["family"][i]):
        return {}
    return {"family": FAMILIES[int(t["family"][i])], "Mt": int(t["Mt"][i]), "Nt": int(t["Nt"][i]),
            "Kt": int(t["Kt"][i]), "tiles_m": int(t["tiles_m"][i]), "tiles_n": int(t["tiles_n"][i]),
            "tiles_k": int(t["tiles_k"][i]), "double_buffered": bool(t["double_buffered"][i]),
            "psum_spill": bool(t["psum_spill"][i])}


def _mapping_text(t: dict, i: int, d: SystolicDesign) -> str:
    if not np.isfinite(t["family"][i]):
        return "vector unit"
    off = {o: o in d.dram.holds for o in ("ifmap", "filter")}
    spill = next((b.name for b in d.buffers if b.psum_spill), "") if t["psum_spill"][i] else ""
    return describe(t["family"][i], t["Mt"][i], t["Nt"][i], t["Kt"][i], t["tiles_m"][i], t["tiles_n"][i],
                    bool(t["double_buffered"][i]), off, spill, t["tiles_k"][i])


def cost_table(ops: Iterable[Operation], designs: Iterable[str | SystolicDesign] | str | SystolicDesign,
               formats: str | Mapping | None = None, *, objective: str = DEFAULT_OBJECTIVE) -> pd.DataFrame:
    """One row per (design, operation): :meth:`CostResult.row` as a pandas DataFrame; ``design``
    is each design's name or path as given (:func:`~asicsim.hw.design_files.labelled_designs`);
    ``objective`` what the systolic designs' schedules were chosen for (GPU rows: ``fastest``)."""
    import pandas as pd  # here: pricing needs none (asicsim --help imports this module)

    ops = list(ops)
    check_objective(objective)
    rows = []
    for label, d in labelled_designs(designs):
        many = d.cost_many(ops, formats) if isinstance(d, GpuDesign) else cost_many(ops, d, formats, objective=objective)
        rows += [r.row() | {"design": label} for r in many]
    return pd.DataFrame(rows)



def topology_operations(topology: Topology) -> list[Operation]:
    """A SCALE-Sim topology as operations: GEMM rows as :class:`Gemm`, conv rows as unpadded
    :class:`Conv` (physical output size ``floor((H - F) / s) + 1``; SCALE-Sim's
    ``ceil((H - F + s) / s)`` adds an overhanging window when ``s`` does not divide ``H - F``)."""
    ops: list[Operation] = []
    for i, name in enumerate(topology.layer_names):
        v = {f: int(getattr(topology, f)[i]) for f in CONV_FIELDS}
        if topology.kind == "gemm":
            ops.append(Gemm(v["ifmap_h"], v["num_filter"], v["filter_w"], name=name))
        else:
            ops.append(Conv(v["ifmap_h"], v["ifmap_w"], v["channels"], v["num_filter"], v["filter_h"],
                            v["filter_w"], stride=v["stride"], name=name))
    return ops
