"""``asicsim.cost``: what an operation costs on a systolic design, physically.

>>> import asicsim as sim
>>> r = sim.cost(sim.Gemm(1024, 1024, 1024), "tpu_v1")
>>> r.bound, r.cycles_compute
('compute', 16384.0)

Counts come from :mod:`asicsim.hw.physical` (the model and where it departs from SCALE-Sim);
this module picks the formats, prices the counts with :mod:`asicsim.hw.energy` and names them.
Each operand's bytes are its own format's (``formats``: ``act`` = ifmap, ``weight`` = filter,
``acc`` = partial sums, ``out`` = ofmap; MX formats count their shared scales), so int8 moves half
the bytes of fp16. The bound follows DeepBench's three regimes: ``bandwidth`` when moving the data
over the DRAM link takes longer than the array's work, else ``occupancy`` when fill/drain, reloads
and unmapped PEs cost more than the ideal compute time (utilization of the busy array < 50 %),
else ``compute``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from asicsim.hw.design import SystolicDesign
from asicsim.hw.design_files import load_design
from asicsim.hw.operations import (
    Conv,
    Elementwise,
    Gemm,
    GemmLowering,
    Operation,
    OperationError,
    Rnn,
    weight_store_bits,
)
from asicsim.hw.physical import ZERO_CODES, BufferLayout, gemm_counts
from asicsim.hw.pricing import energy, traffic
from asicsim.hw.scalesim_files import CONV_FIELDS, Topology
from asicsim.numerics import FormatError, get_format

ROLES = ("act", "weight", "acc", "out")
OPERAND_OF_ROLE = {"act": "ifmap", "weight": "filter", "acc": "psum", "out": "ofmap"}


def parse_formats(formats: str | Mapping | None) -> dict[str, str]:
    """``"act=int8,weight=int8,acc=int32"`` or a mapping -> {role: format name}; checked."""
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
    bad = sorted(set(formats) - set(ROLES))
    if bad:
        raise OperationError(f"formats: unknown role(s) {bad}; allowed: {list(ROLES)}")
    for role, name in formats.items():
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


def buffer_layout(design: SystolicDesign) -> BufferLayout:
    return BufferLayout(tuple(b.name for b in design.buffers), tuple(b.holds for b in design.buffers),
                        tuple(b.double_buffered for b in design.buffers))


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

    @property
    def cycles(self) -> float:
        return self.cycles_compute + self.cycles_fill_drain + self.cycles_stall

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
    def dram_bytes(self) -> float:
        return self.traffic["dram_bytes"]

    @property
    def sram_array_bytes(self) -> float:
        """Bytes between the buffers and the array (operand reads, result and partial-sum writes)."""
        return self.traffic["array_bytes"]

    @property
    def bound(self) -> str:
        busy = self.cycles_compute + self.cycles_fill_drain
        transfer = self.traffic["dram_transfer_cycles"]
        if transfer > 0 and transfer >= busy:
            return "bandwidth"
        ideal = self.macs_performed / self.pes
        if self.macs and ideal < 0.5 * busy:
            return "occupancy"
        return "compute"

    def row(self) -> dict:
        r = {"operation": self.operation, "kind": self.kind, "design": self.design,
             **{f"format_{k}": v for k, v in self.formats.items()},
             "cycles": self.cycles, "cycles_compute": self.cycles_compute,
             "cycles_fill_drain": self.cycles_fill_drain, "cycles_stall": self.cycles_stall,
             "time_s": self.time_s, "macs": self.macs, "macs_performed": self.macs_performed,
             "utilization": self.utilization, "mapping_efficiency": self.mapping_efficiency,
             "bound": self.bound, "energy_pj": self.energy_total_pj,
             "dram_bytes": self.dram_bytes, "sram_array_bytes": self.sram_array_bytes}
        r |= {f"energy.{k}_pj": v for k, v in self.energy_pj.items()}
        r |= {k: v for k, v in self.traffic.items() if k.count(".") == 2}
        return r


def _lower(op: Operation) -> tuple[list[GemmLowering], Elementwise | None]:
    if isinstance(op, (Gemm, Conv)):
        return op.lower(), None
    if isinstance(op, Rnn):
        return op.lower(), op.elementwise()
    if isinstance(op, Elementwise):
        return [], op
    raise OperationError(f"operation {op!r}; allowed: Gemm, Conv, Rnn or Elementwise")


def cost(op: Operation, design: str | SystolicDesign, formats: str | Mapping | None = None) -> CostResult:
    """Price one operation on a systolic design (a catalog name, a path or a spec)."""
    d = load_design(design)
    fmts = resolve_formats(d, formats)
    lowerings, vec = _lower(op)
    bits = {r: float(f.bits) for r, f in fmts.items()}
    zero = ZERO_CODES[d.array.zero_weights]
    layout = buffer_layout(d)
    caps = [b.capacity_bytes for b in d.buffers]
    total: dict[str, float] = {}
    for low in lowerings:
        c = gemm_counts(**_gemm_args(low, d, op, bits, layout, caps, zero))
        for k, v in c.items():
            if k.startswith("bytes.") or k in ("row_folds", "col_folds", "psum_chunks", "psum_spill"):
                total.setdefault(k, float(v))
            else:
                total[k] = total.get(k, 0.0) + float(v)
    if vec is not None:
        for k, v in _vector_counts(vec, d, bits).items():
            total[k] = total.get(k, 0.0) + v
    return _price(op, d, fmts, bits, total, zero)


def _gemm_args(low: GemmLowering, d: SystolicDesign, op, bits: dict, layout, caps, zero) -> dict:
    sparsity = getattr(op, "weight_sparsity", 0.0)
    holds = frozenset(d.dram.holds)
    if low.activations_on_chip:  # e.g. an RNN's hidden state: only the weights may come from DRAM
        holds &= {"filter"}
    return dict(
        M=low.M, N=low.N, K=low.K, rows=d.array.rows, cols=d.array.cols,
        dataflow={"os": 0, "ws": 1, "is": 2}[d.array.dataflow], a_bits=bits["act"],
        b_store_bits=weight_store_bits(bits["weight"], sparsity, op.sparse_format, low.K, low.N),
        acc_bits=bits["acc"], out_bits=bits["out"], layout=layout, capacity_bytes=caps,
        dram_holds=holds, dram_bytes_per_cycle=d.dram_bytes_per_cycle, ifmap_elems=low.ifmap_elems,
        reps=low.reps, shared_weights=low.shared_weights, density=1.0 - sparsity, zero_weights=zero)


def _vector_counts(op: Elementwise, d: SystolicDesign, bits: dict) -> dict[str, float]:
    """Elementwise work on the vector unit: lanes ops per vector cycle, streamed from the buffers;
    DRAM transfers overlap the stream (stall only for what the stream cannot hide)."""
    if d.vector is None:
        raise OperationError(f"design {d.name!r} has no [vector] unit; elementwise work (and RNN gates) "
                             "needs one: add a [vector] table with lanes")
    ops = op.elements * op.ops_per_element
    ratio = d.clock_mhz / (d.vector.clock_mhz or d.clock_mhz)
    cycles = math.ceil(ops / d.vector.lanes) * ratio
    reads, writes = op.elements * op.inputs, op.elements
    holds = set() if op.on_chip else set(d.dram.holds)
    dram_in = reads * bits["act"] / 8 if "ifmap" in holds else 0.0
    dram_out = writes * bits["out"] / 8 if "ofmap" in holds else 0.0
    transfer = (dram_in + dram_out) / d.dram_bytes_per_cycle
    return {"cycles_compute": cycles, "vector_ops": float(ops), "transfer_cycles": transfer,
            "cycles_stall": max(transfer - cycles, 0.0),
            "sram.ifmap.reads": float(reads), "sram.ofmap.writes": float(writes),
            "dram.ifmap.reads_bytes": dram_in, "dram.ofmap.writes_bytes": dram_out,
            "bytes.ifmap": bits["act"] / 8, "bytes.ofmap": bits["out"] / 8}


def _price(op, d: SystolicDesign, fmts, bits, t: dict, zero: int) -> CostResult:
    tr = traffic(t, bits)
    e, sources = energy(t, tr, d, fmts, zero)
    g = t.get
    macs = g("macs", 0.0)
    slots = g("mapping_slots", 0.0)
    return CostResult(
        operation=op.label, kind=op.kind, design=d.name,
        formats={r: f.name for r, f in fmts.items()}, pes=d.pes, clock_hz=d.clock_hz,
        cycles_compute=g("cycles_compute", 0.0), cycles_fill_drain=g("cycles_fill_drain", 0.0),
        cycles_stall=g("cycles_stall", 0.0), macs=macs,
        macs_performed=g("macs_nonzero", 0.0) if zero == ZERO_CODES["skip"] else macs,
        mapping_efficiency=g("mapped_pes", 0.0) / slots if slots else float("nan"),
        vector_ops=g("vector_ops", 0.0), traffic=tr, energy_pj=e, sources=sources)


def cost_table(ops: Iterable[Operation], designs: Iterable[str | SystolicDesign] | str | SystolicDesign,
               formats: str | Mapping | None = None) -> pd.DataFrame:
    """One row per (design, operation): :meth:`CostResult.row` as a pandas DataFrame."""
    if isinstance(designs, (str, SystolicDesign)):
        designs = [designs]
    ops = list(ops)
    return pd.DataFrame([cost(op, d, formats).row() for d in designs for op in ops])



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
