"""``asicsim.cost``: what an operation costs on a systolic design, physically.

>>> import asicsim as sim
>>> r = sim.cost(sim.Gemm(1024, 1024, 1024), "tpu_v1")
>>> r.bound, r.cycles_compute
('bandwidth', 16384.0)

This module picks the formats (and checks the design executes them: :mod:`asicsim._src.hw.native`),
has :func:`asicsim._src.hw.pipeline.price` map and price every operation (the mapper's schedule,
:mod:`asicsim._src.hw.counts` for the model, :mod:`asicsim._src.hw.pricing` for traffic, energy and the
bound) and names the results, with the DRAM lower bound (:mod:`asicsim._src.hw.bounds`) beside each.
Each operand's bytes are its own format's in memory words (``formats``: ``act`` = ifmap,
``weight`` = filter, ``acc`` = partial sums, ``out`` = ofmap; MX formats count their shared scales;
tf32 is a 32-bit word), so int8 moves half the bytes of fp16. The bound follows DeepBench's three
regimes (:func:`asicsim._src.hw.pricing.classify_bound`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence

import numpy as np

from asicsim._src.hw.bounds import DramBounds
from asicsim._src.hw.cost_record import CostResult as CostResult
from asicsim._src.hw.counts import FAMILIES, ZERO_CODES
from asicsim._src.hw.design import SystolicDesign
from asicsim._src.hw.design_files import load_design
from asicsim._src.hw.gpu import GpuDesign
from asicsim._src.hw.gpu_cost import gpu_costs
from asicsim._src.hw.mapping_text import describe
from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE, FASTEST, check_objective
from asicsim._src.hw.operations import Conv, Gemm, Operation
from asicsim._src.hw.pipeline import gemm_bounds, gemm_problem, lower, price
from asicsim._src.hw.result import Bound, EnergySplit, Price, Schedule, Traffic
from asicsim._src.hw.result_table import Labels
from asicsim._src.hw.roles import OPERAND_OF_ROLE as OPERAND_OF_ROLE
from asicsim._src.hw.roles import ROLES as ROLES
from asicsim._src.hw.roles import bytes_per_element, mac_execution, resolve_formats
from asicsim._src.hw.roles import parse_formats as parse_formats
from asicsim._src.hw.scalesim_files import CONV_FIELDS, Topology


def cost(op: Operation, design: str | SystolicDesign | GpuDesign, formats: str | Mapping | None = None,
         *, objective: str = DEFAULT_OBJECTIVE) -> CostResult:
    """Price one operation on a design (a catalog name, a path or a spec), its GEMMs mapped for
    ``objective`` (:mod:`asicsim._src.hw.objectives`; a GPU runs its fastest kernel whatever it is)."""
    return cost_many([op], design, formats, objective=objective)[0]


def scheduled_for(design: str | SystolicDesign | GpuDesign, objective: str = DEFAULT_OBJECTIVE) -> str:
    """What ``design``'s results are scheduled for when priced for ``objective``: the mapper's
    ``objective`` on a systolic design; ``fastest`` on a GPU (its model takes its fastest kernel,
    with no DVFS model beyond its power cap). A result's ``objective`` key says the same."""
    check_objective(objective)
    return FASTEST if isinstance(load_design(design), GpuDesign) else objective


class Costs(list):
    """:func:`cost_many`'s answer: a list of :class:`CostResult` records, one per operation, and
    ``price``, the one typed :class:`~asicsim._src.hw.result.Price` (shape ``(operations,)``) they are
    views of."""

    def __init__(self, records: list[CostResult], price: Price):
        super().__init__(records)
        self.price = price


def cost_many(ops: Sequence[Operation], design: str | SystolicDesign | GpuDesign,
              formats: str | Mapping | None = None, *, objective: str = DEFAULT_OBJECTIVE) -> Costs:
    """Price several operations on one design in one vectorised pass (same numbers as :func:`cost`).

    Every GEMM the operations lower to (a conv's groups, an RNN's input projection and recurrent
    steps) is mapped by :mod:`asicsim._src.hw.mapper` for ``objective`` (:mod:`asicsim._src.hw.objectives`:
    ``balanced`` by default, ``energy``, ``dram`` bytes or ``latency``) and priced by
    :func:`asicsim._src.hw.pipeline.price`; each result says its ``objective``. A GPU's results say
    ``fastest``: its model takes its fastest kernel whatever the objective. The records are
    views of one typed price: the answer's ``price`` (:class:`Costs`).
    """
    check_objective(objective)
    d = load_design(design)
    if isinstance(d, GpuDesign):  # the GPU baseline (asicsim._src.hw.gpu_model), vectorised
        return Costs(*gpu_costs(ops, d, formats))
    fmts = resolve_formats(d, formats)
    zero = ZERO_CODES[d.array.zero_weights]
    has_gemm = [op.kind in ("gemm", "conv", "rnn") for op in ops]
    mode = mac_execution(d, fmts, formats) if any(has_gemm) else None  # raises for formats d does not run
    pr = price(ops, d, fmts, bytes_per_element(fmts), objective=objective, zero=zero,
               rate=mode.rate if mode else 1.0)
    modes = [mode if g else None for g in has_gemm]
    pr = dataclasses.replace(pr, labels=_labels(pr, ops, d, modes, objective))
    return Costs(records(pr, ops, d, modes, objective), pr)


def _labels(pr: Price, ops: Sequence[Operation], d: SystolicDesign, modes: list, objective: str) -> Labels:
    """A systolic design's price over operations, named: its rows' mapping in words and MAC rate."""
    sch = {f: np.asarray(getattr(pr.schedule, f)).tolist() for f in Schedule.__dataclass_fields__}
    mapping = np.array([[_mapping_text({k: v[i] for k, v in sch.items()}, d) for i in range(len(ops))]],
                       dtype=object).reshape(1, len(ops))
    execution = np.full((3, 1, len(ops)), np.nan)
    for i, m in enumerate(modes):
        if m is not None:
            execution[:, 0, i] = (m.rate, float(m.emulated), m.slowdown)
    return Labels(designs=(d.name,), operations=tuple(op.label for op in ops), kinds=tuple(op.kind for op in ops),
                  objectives=(objective,), formats=(dict(pr.formats),), gpu=(False,), clock_hz=(d.clock_hz,),
                  levels=(pr.traffic.levels,), components=(pr.energy.components,), mapping=mapping,
                  execution=execution)


def records(pr: Price, ops: Sequence[Operation], d: SystolicDesign, modes: list,
            objective: str) -> list[CostResult]:
    """One :class:`CostResult` per operation of a price over operations (shape ``(len(ops),)``,
    with :class:`~asicsim._src.hw.result_table.Labels`): views of its typed arrays, named."""
    names = pr.labels.formats[0]
    col = {k: np.asarray(getattr(pr, k)).tolist() for k in (
        "cycles_compute", "cycles_fill_drain", "cycles_stall", "cycles_sync", "macs", "macs_performed",
        "vector_ops", "mapping_efficiency", "bound", "dram_bound_bytes", "dram_bound")}
    cycles, times = pr.cycles.tolist(), pr.time_s.tolist()
    sch = {f: np.asarray(getattr(pr.schedule, f)).tolist() for f in Schedule.__dataclass_fields__}
    tr, en = pr.traffic, pr.energy
    idle = {k: float(v) for k, v in pr.idle_w.items()}
    return [CostResult(
        operation=op.label, kind=op.kind, design=d.name, formats=names, pes=d.pes,
        clock_hz=_clock(cycles[i], times[i], d), cycles_compute=col["cycles_compute"][i],
        cycles_fill_drain=col["cycles_fill_drain"][i], cycles_stall=col["cycles_stall"][i],
        cycles_sync=col["cycles_sync"][i], macs=col["macs"][i], macs_performed=col["macs_performed"][i],
        mapping_efficiency=col["mapping_efficiency"][i], vector_ops=col["vector_ops"][i],
        traffic=Traffic(tr.levels, tr.bytes[..., i], tr.elements[..., i], tr.array_bytes[i],
                        tr.transfer_cycles[i]),
        energy_pj=EnergySplit(en.components, en.pj[:, i]), sources=pr.sources,
        mapping=pr.labels.mapping[0, i],
        schedule=_schedule({k: v[i] for k, v in sch.items()}), bound=Bound.of(col["bound"][i]),
        dram_bound_bytes=col["dram_bound_bytes"][i], dram_bound=col["dram_bound"][i],
        notes=pr.notes[i], execution=modes[i], idle_power_w=idle, objective=objective)
        for i, op in enumerate(ops)]


def operation_bounds(op: Operation, design, formats=None) -> DramBounds:
    """The DRAM lower bounds (:mod:`asicsim._src.hw.bounds`) of one operation on one systolic design,
    of the very problem :func:`cost_many` prices (its lowering, stored bytes and placement:
    :func:`asicsim._src.hw.pipeline.gemm_problem`); cached by content (the arrays are read-only)."""
    design = load_design(design)
    if not isinstance(design, SystolicDesign):
        raise ValueError(f"design = {design.name!r} ({type(design).__name__}); allowed: a systolic design "
                         "(the GPU baseline has no buffer model to bound)")
    try:  # the operation, the resolved design and the formats by value (frozen dataclasses, strings)
        return _bounds_of(op, design, formats)
    except TypeError:  # formats given as a dict: not hashable, computed each time
        return _operation_bounds(op, design, formats)


@functools.lru_cache(maxsize=4096)
def _bounds_of(op, design, formats) -> DramBounds:
    b = _operation_bounds(op, design, formats)
    for a in (b.compulsory, b.pebble):
        a.flags.writeable = False
    return b


def _operation_bounds(op, d: SystolicDesign, formats) -> DramBounds:
    bpe = bytes_per_element(resolve_formats(d, formats))
    lows, _ = lower(op)
    if not lows:
        return DramBounds(np.array(0.0), np.array(0.0))
    p = gemm_problem(lows, [op] * len(lows), d, bpe)
    b = gemm_bounds(p, lows, [op] * len(lows), np.zeros(len(lows), dtype=np.int64), 1, bpe,
                    [bt.capacity_bytes for bt in d.buffers], d.array.rows, d.array.cols)
    return DramBounds(np.array(b.compulsory[0]), np.array(b.pebble[0]))


def _clock(cycles: float, t: float, d: SystolicDesign) -> float:
    """The clock an operation ran at: the design's, or lower where its TDP capped it."""
    return cycles / t if t > 0 and cycles > 0 and t > cycles / d.clock_hz else d.clock_hz


def _schedule(t: dict) -> dict:
    if not np.isfinite(t["family"]):
        return {}
    return {"family": FAMILIES[int(t["family"])], "Mt": int(t["Mt"]), "Nt": int(t["Nt"]),
            "Kt": int(t["Kt"]), "tiles_m": int(t["tiles_m"]), "tiles_n": int(t["tiles_n"]),
            "tiles_k": int(t["tiles_k"]), "double_buffered": bool(t["double_buffered"]),
            "psum_spill": bool(t["psum_spill"]), "streamed": int(t["streamed"]),
            "tile_share": float(t["tile_share"]), "fold_rows": int(t["fold_rows"]), "fold_cols": int(t["fold_cols"])}


def _mapping_text(t: dict, d: SystolicDesign) -> str:
    if not np.isfinite(t["family"]):
        return "vector unit"
    off = {o: o in d.dram.holds for o in ("ifmap", "filter", "ofmap")}
    spill = next((b.name for b in d.buffers if b.psum_spill), "") if t["psum_spill"] else ""
    return describe(t["family"], t["Mt"], t["Nt"], t["Kt"], t["tiles_m"], t["tiles_n"],
                    bool(t["double_buffered"]), off, spill, t["tiles_k"], t["streamed"], t["tile_share"],
                    (t["fold_rows"], t["fold_cols"]) if (t["fold_rows"], t["fold_cols"]) != (d.array.rows, d.array.cols) else ())


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
