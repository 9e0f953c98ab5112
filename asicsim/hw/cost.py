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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from asicsim.hw.design import SystolicDesign
from asicsim.hw.design_files import load_design
from asicsim.hw.gpu import GpuDesign
from asicsim.hw.gpu_model import gpu_cost_many
from asicsim.hw.native import ExecutionMode, execution_mode, parse_emulate, storage_bits
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
    bound_override: str | None = None  # a model that classifies the bound itself (GPU baseline)
    execution: ExecutionMode | None = None  # systolic: MAC rate of the peak and whether emulated

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
        if self.bound_override is not None:
            return self.bound_override
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
             "time_s": self.time_s, "time_us": self.time_s * 1e6,
             "tops": 2 * self.macs / self.time_s / 1e12 if self.time_s else 0.0,  # achieved, dense count
             "macs": self.macs, "macs_performed": self.macs_performed,
             "utilization": self.utilization, "mapping_efficiency": self.mapping_efficiency,
             "bound": self.bound, "energy_pj": self.energy_total_pj,
             "energy_j": self.energy_total_pj * 1e-12,
             "dram_bytes": self.dram_bytes, "sram_array_bytes": self.sram_array_bytes}
        if self.execution is not None:
            r |= {"mac_rate": self.execution.rate, "emulated": self.execution.emulated,
                  "slowdown": self.execution.slowdown}
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


def cost(op: Operation, design: str | SystolicDesign | GpuDesign, formats: str | Mapping | None = None) -> CostResult:
    """Price one operation on a systolic design (a catalog name, a path or a spec)."""
    return cost_many([op], design, formats)[0]


_NOT_ADDITIVE = ("row_folds", "col_folds", "psum_chunks", "psum_spill")


def cost_many(ops: Sequence[Operation], design: str | SystolicDesign | GpuDesign,
              formats: str | Mapping | None = None) -> list[CostResult]:
    """Price several operations on one design in one vectorised pass (same numbers as :func:`cost`).

    Every GEMM the operations lower to (a conv's groups, an RNN's input projection and recurrent
    steps) is one element of the arrays :func:`~asicsim.hw.physical.gemm_counts` works on; the
    counts are summed per operation, vector work added, then priced together.
    """
    d = load_design(design)
    if isinstance(d, GpuDesign):  # the GPU baseline (asicsim.hw.gpu_model)
        return gpu_cost_many(ops, d, formats)
    fmts = resolve_formats(d, formats)
    bits = {r: storage_bits(f) for r, f in fmts.items()}  # memory words (tf32: 32)
    zero = ZERO_CODES[d.array.zero_weights]
    lowered = [_lower(op) for op in ops]
    n = len(ops)
    t: dict[str, np.ndarray] = {}
    owner, lows = [], []
    for i, (ls, _) in enumerate(lowered):
        owner += [i] * len(ls)
        lows += ls
    mode = mac_execution(d, fmts, formats) if lows else None  # raises for formats d does not run
    if lows:
        c = gemm_counts(**_gemm_arrays(lows, [ops[i] for i in owner], d, bits, zero), mac_rate=mode.rate)
        owner_arr = np.asarray(owner)
        first = np.unique(owner_arr, return_index=True)[1]  # an op's first lowering
        for k, v in c.items():
            if k in _NOT_ADDITIVE:
                continue
            v = np.broadcast_to(np.asarray(v, dtype=np.float64), owner_arr.shape)
            if k == "bytes.filter":  # stored bytes per weight (sparse formats): first lowering's
                t[k] = np.full(n, bits["weight"] / 8)
                t[k][owner_arr[first]] = v[first]
            elif not k.startswith("bytes."):  # the other widths are the formats'
                t[k] = np.bincount(owner_arr, weights=v, minlength=n)
    for i, (_, vec) in enumerate(lowered):
        if vec is not None:
            for k, v in _vector_counts(vec, d, bits).items():
                if not k.startswith("bytes."):
                    t.setdefault(k, np.zeros(n))[i] += v
    t.setdefault("bytes.filter", np.full(n, bits["weight"] / 8))
    tr = traffic(t, bits)
    e, sources = energy(t, tr, d, fmts, zero)
    z = np.zeros(n)
    g = lambda k: t.get(k, z)  # noqa: E731 - counts an operation kind never has are zero
    macs = g("macs")
    performed = g("macs_nonzero") if zero == ZERO_CODES["skip"] else macs
    slots = g("mapping_slots")
    mapping = np.divide(g("mapped_pes"), slots, out=np.full(n, np.nan), where=slots > 0)
    names = {r: f.name for r, f in fmts.items()}

    def per_op(values: dict) -> list[dict[str, float]]:  # {key: array} -> one {key: float} per op
        cols = {k: np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)).tolist() for k, v in values.items()}
        return [{k: c[i] for k, c in cols.items()} for i in range(n)]

    traffic_of, energy_of = per_op(tr), per_op(e)
    return [CostResult(
        operation=op.label, kind=op.kind, design=d.name, formats=names, pes=d.pes,
        clock_hz=d.clock_hz, cycles_compute=float(g("cycles_compute")[i]),
        cycles_fill_drain=float(g("cycles_fill_drain")[i]), cycles_stall=float(g("cycles_stall")[i]),
        macs=float(macs[i]), macs_performed=float(performed[i]),
        mapping_efficiency=float(mapping[i]), vector_ops=float(g("vector_ops")[i]),
        traffic=traffic_of[i], energy_pj=energy_of[i], sources=sources,
        execution=mode if lowered[i][0] else None)
        for i, op in enumerate(ops)]


def _gemm_arrays(lows: list[GemmLowering], ops: list, d: SystolicDesign, bits: dict, zero: int) -> dict:
    """Arguments of :func:`gemm_counts` with one array element per lowered GEMM."""
    def col(values):
        return np.asarray(values, dtype=np.float64)

    sparsity = [getattr(op, "weight_sparsity", 0.0) for op in ops]
    on_chip = np.asarray([low.activations_on_chip for low in lows])
    # e.g. an RNN's hidden state never leaves the chip: only its weights may come from DRAM
    holds = {o: (o in d.dram.holds) & (~on_chip if o != "filter" else True)
             for o in ("ifmap", "filter", "ofmap")}
    return dict(
        M=col([low.M for low in lows]), N=col([low.N for low in lows]), K=col([low.K for low in lows]),
        rows=d.array.rows, cols=d.array.cols, dataflow={"os": 0, "ws": 1, "is": 2}[d.array.dataflow],
        a_bits=bits["act"], acc_bits=bits["acc"], out_bits=bits["out"],
        b_store_bits=col([weight_store_bits(bits["weight"], s, op.sparse_format, low.K, low.N)
                          for low, op, s in zip(lows, ops, sparsity, strict=True)]),
        layout=buffer_layout(d), capacity_bytes=[b.capacity_bytes for b in d.buffers],
        dram_holds=holds, dram_bytes_per_cycle=d.dram_bytes_per_cycle,
        ifmap_elems=col([low.ifmap_elems or low.M * low.K for low in lows]),
        reps=col([low.reps for low in lows]), shared_weights=np.asarray([low.shared_weights for low in lows]),
        density=1.0 - col(sparsity), zero_weights=zero)


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


def cost_table(ops: Iterable[Operation], designs: Iterable[str | SystolicDesign] | str | SystolicDesign,
               formats: str | Mapping | None = None) -> pd.DataFrame:
    """One row per (design, operation): :meth:`CostResult.row` as a pandas DataFrame."""
    if isinstance(designs, (str, SystolicDesign, GpuDesign)):
        designs = [designs]
    ops = list(ops)
    return pd.DataFrame([r.row() for d in designs for r in cost_many(ops, d, formats)])



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
