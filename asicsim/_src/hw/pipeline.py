"""The one pricing pipeline of the systolic model: lower -> map -> count -> traffic -> energy -> bound.

:func:`price` takes operations and a design, optionally with design axes (array rows, columns,
dataflow, buffer capacities as arrays that broadcast: a design space), and returns per-operation
a :class:`asicsim._src.hw.result.Price` of shape ``design_shape + (operations,)``. :func:`asicsim.cost_many` (one design, results
as records), :func:`asicsim._src.hw.family.cost_family` and :func:`asicsim.hw.gemm_sweep` are front ends
of it, so the three give the same numbers by construction.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from asicsim._src.hw.bounds import DramBounds, classical, fast_memory_bytes, problem_bounds
from asicsim._src.hw.counts import (
    ZERO_CODES,
    ArrayHardware,
    BufferLayout,
    GemmCounts,
    GemmProblem,
)
from asicsim._src.hw.design import SystolicDesign, buffer_tile_note
from asicsim._src.hw.mapper import best_counts
from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE, check_objective
from asicsim._src.hw.operations import (
    Elementwise,
    GemmLowering,
    Operation,
    OperationError,
    weight_store_bits,
)
from asicsim._src.hw.power import component, power_capped_time
from asicsim._src.hw.pricing import (
    ScheduleEnergy,
    classify_bound,
    energy,
    energy_rates,
    traffic,
)
from asicsim._src.hw.result import Bound, EnergySplit, Price, Schedule
from asicsim._src.hw.tiles import distinct_gemms, spread_counts
from asicsim._src.hw.vector_unit import vector_counts, vector_note

_DATAFLOW = {"os": 0, "ws": 1, "is": 2}
#: :func:`asicsim._src.hw.vector_unit.vector_counts` keys -> count names
_VECTOR_KEYS = {"cycles_compute": "cycles_compute", "vector_ops": "vector_ops", "transfer_cycles": "transfer_cycles",
                "cycles_stall": "cycles_stall", "sram.ifmap.reads": "sram_ifmap_reads",
                "sram.ofmap.writes": "sram_ofmap_writes", "dram.ifmap.reads_bytes": "dram_ifmap_bytes",
                "dram.ofmap.writes_bytes": "dram_ofmap_bytes"}
_SCHEDULE_FIELDS = tuple(f.name for f in fields(Schedule))


def lower(op: Operation) -> tuple[list[GemmLowering], Elementwise | None]:
    """The GEMMs an operation runs on the array and the elementwise work beside them."""
    if isinstance(op, Elementwise):
        return [], op
    if not hasattr(op, "lower") or op.kind not in ("gemm", "conv", "rnn"):
        raise OperationError(f"operation {op!r}; allowed: Gemm, Conv, Rnn or Elementwise")
    return op.lower(), (op.elementwise() if op.kind == "rnn" else None)


def layout(design: SystolicDesign) -> BufferLayout:
    spill = [i for i, b in enumerate(design.buffers) if b.psum_spill]
    return BufferLayout(tuple(b.name for b in design.buffers), tuple(b.holds for b in design.buffers),
                        spill[0] if spill else None)


def gemm_problem(lows: list[GemmLowering], ops: list, d: SystolicDesign, bpe: dict) -> GemmProblem:
    """The lowered GEMMs as one :class:`GemmProblem` (``ops[i]`` is ``lows[i]``'s operation; ``bpe``
    stored bytes per element per operand): what lives off chip, sparse storage, conv footprints."""
    def col(values):
        return np.asarray(values, dtype=np.float64)

    sparsity = col([getattr(op, "weight_sparsity", 0.0) for op in ops])
    on_chip = np.asarray([low.activations_on_chip for low in lows])
    # e.g. an RNN's hidden state never leaves the chip: only its weights may come from DRAM
    off = {o: (o in d.dram.holds) & (~on_chip if o != "filter" else np.ones_like(on_chip))
           for o in ("ifmap", "filter", "ofmap")}
    b_store = col([weight_store_bits(bpe["filter"] * 8, s, op.sparse_format, low.K, low.N) / 8
                   for low, op, s in zip(lows, ops, sparsity, strict=True)])
    M, K = col([low.M for low in lows]), col([low.K for low in lows])
    return GemmProblem(
        M=M, N=col([low.N for low in lows]), K=K, a_bytes=bpe["ifmap"], b_bytes=b_store,
        acc_bytes=bpe["psum"], out_bytes=bpe["ofmap"],
        a_footprint=col([low.ifmap_elems or low.M * low.K for low in lows]) * bpe["ifmap"],
        reps=col([low.reps for low in lows]), shared_weights=np.asarray([low.shared_weights for low in lows]),
        density=1.0 - sparsity, off_chip=off)


def gemm_bounds(p: GemmProblem, lows: list[GemmLowering], ops: list, owner, n: int, bpe: dict, caps, rows,
                cols) -> DramBounds:
    """DRAM lower bounds per operation (:func:`asicsim._src.hw.bounds.problem_bounds`) of the problem
    :func:`gemm_problem` made (``ops[j]`` owns ``lows[j]``; ``owner[j]`` its index of ``n``), with
    all on-chip storage of buffers ``caps`` and a ``rows x cols`` array as fast memory."""
    fast = fast_memory_bytes(list(caps), rows, cols, a_bytes=bpe["ifmap"], b_bytes=bpe["filter"],
                             acc_bytes=bpe["psum"])
    return problem_bounds(p, [low.activations_on_chip for low in lows], owner, n, fast,
                          [classical(op) for op in ops])


def price(ops, d: SystolicDesign, fmts: dict, bpe: dict, *, rows=None, cols=None, dataflow=None,
          capacity_bytes=None, objective: str = DEFAULT_OBJECTIVE, zero: int = 0, rate=1.0) -> Price:
    """Every operation on every design point (module docstring). ``bpe``: stored bytes per element
    per operand; ``rate``: MACs per PE per cycle of the formats' native mode (1 = full rate);
    ``objective``: what the mapper chooses schedules for (:mod:`asicsim._src.hw.objectives`)."""
    check_objective(objective)
    n = len(ops)
    R = np.asarray(d.array.rows if rows is None else rows, dtype=np.float64)
    C = np.asarray(d.array.cols if cols is None else cols, dtype=np.float64)
    df = np.asarray(_DATAFLOW[d.array.dataflow] if dataflow is None else dataflow)
    caps = tuple(np.asarray(b.capacity_bytes if capacity_bytes is None else capacity_bytes[i], dtype=np.float64)
                 for i, b in enumerate(d.buffers))
    shape = np.broadcast_shapes(R.shape, C.shape, df.shape, *(c.shape for c in caps))
    pes = R * C
    if shape == ():  # one design point: scalar rates (their per-capacity energies are cached)
        rates = energy_rates(d, fmts, pes=float(pes), buffer_kib=[float(c) / 1024 for c in caps])
    else:
        rates = energy_rates(d, fmts, pes=pes[..., None], buffer_kib=[c[..., None] / 1024 for c in caps])
    lowered = [lower(op) for op in ops]
    owner = np.asarray([i for i, (ls, _) in enumerate(lowered) for _ in ls], dtype=np.int64)
    lows = [low for ls, _ in lowered for low in ls]
    t: dict[str, np.ndarray] = {}
    bounds = DramBounds(np.zeros((*shape, n)), np.zeros((*shape, n)))
    if lows:
        p = gemm_problem(lows, [ops[i] for i in owner], d, bpe)
        hw = ArrayHardware(rows=R[..., None], cols=C[..., None], dataflow=df[..., None],
                           capacity=tuple(c[..., None] for c in caps), layout=layout(d),
                           dram_bytes_per_cycle=np.asarray(d.dram_bytes_per_cycle), zero_weights=zero,
                           mac_rate=rate, bypass_unused=d.array.bypass_unused,
                           whole_tiles=d.array.whole_tiles, double_buffers=d.array.double_buffers)
        bounds = gemm_bounds(p, lows, [ops[i] for i in owner], owner, n, bpe, caps, R, C)
        q, inverse = distinct_gemms(p, hw)  # each distinct GEMM searched once
        bpe_gemm = dict(bpe, filter=q.b_bytes)
        se = ScheduleEnergy(bpe_gemm, rates)
        c = spread_counts(best_counts(q, hw, objective, se, se.key), inverse)
        onehot = np.zeros((len(lows), n))
        onehot[np.arange(len(lows)), owner] = 1.0
        # an operation's mapping is that of its largest GEMM
        macs = np.broadcast_to(p.M * p.N * p.K * p.reps, (len(lows),))
        lead = np.zeros(n, dtype=np.int64)
        for i in range(n):
            mine = np.flatnonzero(owner == i)
            if mine.size:
                lead[i] = mine[np.argmax(macs[mine])]
        has_gemm = np.bincount(owner, minlength=n) > 0
        for name in GemmCounts.names():
            v = np.broadcast_to(np.asarray(getattr(c, name), dtype=np.float64), (*shape, len(lows)))
            t[name] = np.where(has_gemm, v[..., lead], np.nan) if name in GemmCounts.MAPPING else v @ onehot
        # stored bytes per weight: an operation's own (sparse formats), for traffic in elements
        t["filter_bytes"] = np.broadcast_to(p.b_bytes, (len(lows),))[lead] * np.ones((*shape, 1))
    zeros = np.zeros((*shape, n))
    for name in (*GemmCounts.names(), "vector_ops", "cycles_sync"):
        t.setdefault(name, zeros + (np.nan if name in GemmCounts.MAPPING else 0.0))
    t.setdefault("filter_bytes", np.full((*shape, n), bpe["filter"]))
    role_bits = {r: bpe[o] * 8 for r, o in (("act", "ifmap"), ("weight", "filter"), ("acc", "psum"),
                                            ("out", "ofmap"))}
    for i, (_, vec) in enumerate(lowered):
        if vec is not None:  # the vector unit's work does not depend on the varied fields
            for k, v in vector_counts(vec, d, role_bits).items():
                name = _VECTOR_KEYS[k]
                t[name] = np.array(t[name])
                t[name][..., i] += v
    # every operation that runs here waits for the design's per-operation synchronisation
    runs_here = np.asarray([bool(ls) or d.vector is not None for ls, _ in lowered])
    t["cycles_sync"] = t["cycles_sync"] + np.where(runs_here, float(d.array.sync_cycles), 0.0)
    tile = buffer_tile_note(d) if rows is None and cols is None and capacity_bytes is None else None
    notes = [tuple(filter(None, [vector_note(vec, d) if vec is not None else None, tile if ls else None]))
             for ls, vec in lowered]
    tr = traffic(t, dict(bpe, filter=t["filter_bytes"]), (*shape, n))
    e = energy(t, tr, rates, zero, bpe["psum"])
    performed = t["macs_nonzero"] if zero == ZERO_CODES["skip"] else t["macs"]
    busy = t["cycles_compute"] + t["cycles_fill_drain"]
    bound = classify_bound(t["transfer_cycles"], busy, performed, pes[..., None], t["macs"])
    time_s = (t["cycles_compute"] + t["cycles_fill_drain"] + t["cycles_stall"] + t["cycles_sync"]) / d.clock_hz
    if d.tdp_w is not None:  # over the TDP the clock drops (asicsim._src.hw.power.power_capped_time)
        dyn_chip = sum(v for k, v in e.items() if component(k)[1] == "dynamic" and component(k)[0] != "board")
        capped = power_capped_time(time_s, dyn_chip * 1e-12, d.tdp_w, rates.power.idle_w("chip"))
        if np.any(capped > time_s):
            e = energy(t, tr, rates, zero, bpe["psum"], time_s=capped)
            bound = np.where(capped > time_s, Bound.POWER.code, bound)
            time_s = capped
    if d.tdp_w is not None and np.any(rates.power.idle_w("chip") >= d.tdp_w):
        said = (f"the chip's idle power ({np.max(rates.power.idle_w('chip')):.3g} W) reaches its tdp_w "
                f"({d.tdp_w:g} W): no power-capped clock fits; priced at the design's clock")
        notes = [(*n, said) for n in notes]
    idle = {s: rates.power.idle_w(s) for s in ("core", "chip", "board")}
    full = (*shape, n)

    def arr(v):
        if isinstance(v, np.ndarray) and v.shape == full and v.dtype == np.float64:
            return v
        return np.broadcast_to(np.asarray(v, dtype=np.float64), full)

    return Price(
        cycles_compute=arr(t["cycles_compute"]), cycles_fill_drain=arr(t["cycles_fill_drain"]),
        cycles_stall=arr(t["cycles_stall"]), cycles_sync=arr(t["cycles_sync"]), macs=arr(t["macs"]),
        macs_performed=arr(performed), mapped_pes=arr(t["mapped_pes"]), mapping_slots=arr(t["mapping_slots"]),
        vector_ops=arr(t["vector_ops"]), time_s=arr(time_s), pes=np.asarray(pes, dtype=np.float64)[..., None],
        traffic=tr, energy=EnergySplit.from_parts(e, full), bound=np.broadcast_to(bound, full),
        schedule=Schedule(**{f: arr(t[f]) for f in _SCHEDULE_FIELDS}), sources=rates.sources,
        notes=tuple(notes), idle_w=idle, dram_compulsory_bytes=arr(bounds.compulsory),
        dram_pebble_bytes=arr(bounds.pebble), formats={r: f.name for r, f in fmts.items()})
