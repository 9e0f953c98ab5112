"""The mapper's search (asicsim/_src/hw/mapper.py) against an enumerator written here from the loop-nest
definition, sharing none of the mapper's candidate lists or buffer shares: every tile of every
family, buffering and partial-sum home, with its own rule for what fits. Prices come from the
model's own counts (asicsim._src.hw.counts.schedule_counts and the pipeline's energy)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import asicsim as sim
from asicsim._src.hw import ArraySpec, BufferSpec, DramSpec, PESpec, SystolicDesign, load_design
from asicsim._src.hw.cost import bytes_per_element, resolve_formats
from asicsim._src.hw.counts import ArrayHardware, Schedule, schedule_counts
from asicsim._src.hw.mapper import best_counts
from asicsim._src.hw.pipeline import gemm_problem, layout
from asicsim._src.hw.pricing import energy_rates, schedule_energy
from asicsim._src.hw.residency import TILE_SHARES

MIB = 2**20


def small_design(R, C, df, caps, psum=None, spill=False, holds=("ifmap", "filter", "ofmap")):
    """Separate ifmap, filter and ofmap buffers (``spill``: partial sums may be kept in the ofmap
    one), and a partial-sum buffer of ``psum`` bytes (None: they share the ofmap buffer); the DRAM
    ``holds`` those operands (the others are kept on chip between operations)."""
    bufs = [BufferSpec(name=n, holds=(n,), capacity_kib=c / 1024, psum_spill=spill and n == "ofmap")
            for n, c in zip(("ifmap", "filter", "ofmap"), caps, strict=True)]
    if psum is not None:
        bufs.append(BufferSpec(name="psum", holds=("psum",), capacity_kib=psum / 1024))
    return SystolicDesign(name="m", technology_nm=45, clock_mhz=1000, static_power_w=0.0,
                          array=ArraySpec(rows=R, cols=C, dataflow=df),
                          pe=PESpec(a_format="int8", b_format="int8", acc_format="int32"), buffers=tuple(bufs),
                          dram=DramSpec(kind="DDR4", bandwidth_gbps=1.0, holds=tuple(holds)))


def model(op, d):
    """The problem, hardware and energy score the pipeline gives the mapper for ``op`` on ``d``."""
    fmts = resolve_formats(d, None)
    bpe = bytes_per_element(fmts)
    lows = op.lower()
    p = gemm_problem(lows, [op] * len(lows), d, bpe)
    hw = ArrayHardware(rows=np.float64(d.array.rows), cols=np.float64(d.array.cols),
                       dataflow=np.int64({"os": 0, "ws": 1, "is": 2}[d.array.dataflow]),
                       capacity=tuple(np.float64(b.capacity_bytes) for b in d.buffers), layout=layout(d),
                       dram_bytes_per_cycle=np.asarray(d.dram_bytes_per_cycle), bypass_unused=d.array.bypass_unused,
                       whole_tiles=d.array.whole_tiles, double_buffers=d.array.double_buffers)
    rates = energy_rates(d, fmts)
    return p, hw, (lambda c: schedule_energy(c, dict(bpe, filter=p.b_bytes), rates))


def measures(c):
    return {"latency": c.busy_cycles + c.cycles_stall, "dram": c.dram_bytes}


def enumerate_space(op, d, score_energy) -> dict:
    """The least latency, energy and DRAM bytes over every schedule of the loop nest: families
    outputs (k innermost: the Mt x Nt block accumulates over K on chip), weights (m innermost: a
    Kt x Nt block resident, its partial-sum tile Mt x Na with Na <= Nt) and activations (n
    innermost: Mt x Kt resident, tile Ma x Nt); Kt < K outside the outputs family sends partial
    sums to DRAM, allowed where the outputs go to DRAM. A schedule fits when, in every buffer, the
    tiles homed there (A Mt x Kt if the ifmap streams from DRAM, B Kt x Nt likewise, the partial
    sums Ma x Na in their buffer, the outputs Ma x Na where they leave through another buffer;
    the array works through the Ma x Na tile in folds of any 1..R rows by 1..C columns, or of the
    whole array where it moves whole R x C tiles),
    doubled when double-buffered (only those of the operands the design's ``array.double_buffers``
    lists), fit the capacity less the tensors kept whole there; where the design moves its
    stationary operand in whole array tiles (``array.whole_tiles``), its block takes its padded
    bytes (:func:`padded_block`). An operand
    the DRAM does not hold is kept on chip, whole (no tiles) or streaming its overflow (its tiles
    as an off-chip operand's, in each share of :data:`TILE_SHARES` of the buffer it is homed in,
    less what is kept whole: the space asicsim/_src/hw/residency.py defines), each choice
    enumerated."""
    b = d
    assert all(len(x.holds) == 1 for x in b.buffers)
    bpe = {"ifmap": 1.0, "filter": 1.0, "psum": 4.0, "ofmap": 1.0}
    M, N, K = op.M, op.N, op.K
    cap = {x.holds[0]: x.capacity_bytes for x in d.buffers}
    size = {"ifmap": M * K, "filter": K * N, "ofmap": M * N}
    kept = [x for x in ("ifmap", "filter", "ofmap") if x not in d.dram.holds]
    bit = {"ifmap": 1, "filter": 2, "ofmap": 4}
    streams = [set(c) for n in range(len(kept) + 1) for c in itertools.combinations(kept, n)]
    psum_homes = ["psum" if "psum" in cap else "ofmap"] + (["ofmap"] if any(x.psum_spill for x in d.buffers) else [])
    p, hw, _ = model(op, d)
    best = {"latency": np.inf, "energy": np.inf, "dram": np.inf}
    shared = [(st, sh) for st in streams for sh in (TILE_SHARES if st else (1.0,))]
    for fam, db, home, (streaming, share) in itertools.product((0, 1, 2), (False, True), psum_homes, shared):
        moving = {x for x in ("ifmap", "filter", "ofmap") if x in d.dram.holds or x in streaming}
        whole = {x: size[x] * bpe[x] if x in kept and x not in streaming else 0.0 for x in cap}
        part = {x: share if x in streaming else 1.0 for x in cap}
        rows = []
        for m, n, k in itertools.product(range(1, M + 1), range(1, N + 1), range(1, K + 1)):
            if fam != 0 and k < K and "ofmap" not in d.dram.holds:
                continue
            subs = [(m, n)] if fam == 0 else [(m, s) for s in range(1, n + 1)] if fam == 1 else \
                [(s, n) for s in range(1, m + 1)]
            for ma, na in subs:
                # (buffer, operand, bytes) of every tile homed on chip
                tiles = [("ifmap", "ifmap", padded_block(d, "is", k, m, ma) * bpe["ifmap"] * ("ifmap" in moving)),
                         ("filter", "filter", padded_block(d, "ws", k, n, na) * bpe["filter"] * ("filter" in moving)),
                         (home, "psum", ma * na * bpe["psum"])]
                if home != "ofmap" and "ofmap" in moving:
                    tiles.append(("ofmap", "ofmap", ma * na * bpe["ofmap"]))
                use = dict.fromkeys(cap, 0.0)
                for where, what, nbytes in tiles:
                    use[where] += nbytes * (2 if db and what in d.array.double_buffers else 1)
                if all(use[x] <= part[x] * (cap[x] - whole[x]) for x in cap):
                    rows.append((m, n, k, ma, na))
        if not rows:
            continue
        # every fold of the array's tile: at most R rows and C columns of the array (the array's
        # own sides only where it moves whole R x C tiles)
        R, C = (1, 1) if d.array.whole_tiles else (d.array.rows, d.array.cols)
        folds = [(fr, fc) for fr in range(1, R + 1) for fc in range(1, C + 1)]
        m, n, k, ma, na, fr, fc = np.array([(*x, *f) for x in rows for f in folds], dtype=np.float64).T
        if d.array.whole_tiles:
            fr, fc = 0 * fr, 0 * fc
        c = schedule_counts(p, hw, Schedule(np.full(m.shape, float(fam)), m, n, k, np.asarray(db),
                                            np.asarray(home == "ofmap" and "psum" in cap), ma, na,
                                            float(sum(bit[x] for x in streaming)), share, fr, fc))
        got = dict(measures(c), energy=score_energy(c))
        for key in best:
            best[key] = min(best[key], float(np.min(got[key])))
    return best


def padded_block(d, stationary: str, k: int, n: int, na: int) -> int:
    """Elements a ``k x n`` block of the operand takes in its buffer: ``k n``, or, where the design's
    dataflow is ``stationary`` and it moves that operand in whole ``R x C`` tiles, ``k`` rounded up
    to whole ``R`` rows times each ``na``-wide piece of ``n`` (the array works through the block
    ``na`` columns at a time) rounded up to whole ``C`` columns."""
    R, C = d.array.rows, d.array.cols
    if not (d.array.whole_tiles and d.array.dataflow == stationary):
        return k * n
    pieces = [na] * (n // na) + ([n % na] if n % na else [])
    return math.ceil(k / R) * R * sum(math.ceil(w / C) * C for w in pieces)


def chosen(op, d, objective) -> float:
    p, hw, se = model(op, d)
    c = best_counts(p, hw, objective, se)
    return float(dict(measures(c), energy=se(c))[objective][0])


#: What each objective's choice may cost above the enumerated least on these small problems.
#: ``dram``: nothing (proven, asicsim/_src/hw/mapper.py). ``energy`` and ``latency``: 3 of 1,080
#: (case, objective) pairs above the least, by at most 1.0033x (before issue 31's second pass:
#: 468, up to 1.42x); 1.021x is the worst seen on other samples (benchmarks/RESULTS.md). Why not
#: exact: the misses cut two tile dimensions below what fits at once to gain tile steps (an
#: outputs block 3 x 3 of 9 x 8 where 3 x 8 fits), which only listing every pair of trip counts
#: finds, O(sqrt(M) sqrt(N)) candidates per GEMM (about twice the whole search at 1000 x 1000).
#: Double buffering trades tile steps against bytes and folds (``stall = X / s + ...``,
#: asicsim/_src/hw/counts.py), so no trip count of the misses' kind is dominated and none can be pruned.
GAP = {"dram": 1.0, "energy": 1.025, "latency": 1.025}


def assert_near_least(op, d, objective: str, gap: dict) -> None:
    """The mapper's choice under ``objective`` lies between the enumerated space's least and
    ``gap[objective]`` times it; where no schedule fits, the enumerator finds none either."""
    best = enumerate_space(op, d, model(op, d)[2])
    try:
        got = chosen(op, d, objective)
    except ValueError:
        assert best[objective] == np.inf
        return
    assert best[objective] * (1 - 1e-9) <= got <= best[objective] * gap[objective] * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(M=st.integers(1, 9), N=st.integers(1, 9), K=st.integers(1, 9), df=st.sampled_from(["os", "ws", "is"]),
       R=st.integers(1, 4), C=st.integers(1, 4), caps=st.tuples(*[st.integers(8, 300)] * 3),
       psum=st.one_of(st.none(), st.integers(4, 1200)), spill=st.booleans(),
       objective=st.sampled_from(["dram", "energy", "latency"]))
def test_against_the_enumerated_space(M, N, K, df, R, C, caps, psum, spill, objective):
    """``dram``: the least bytes of the whole space, exactly. ``energy`` and ``latency``: within
    :data:`GAP` of their least (equal in all but about 3 in 1,000)."""
    op = sim.Gemm(M, N, K)
    d = small_design(R, C, df, caps, psum, spill=spill and psum is not None)
    assert_near_least(op, d, objective, GAP)


@settings(max_examples=30, deadline=None)
@given(M=st.integers(1, 9), N=st.integers(1, 9), K=st.integers(1, 9), df=st.sampled_from(["ws", "is"]),
       R=st.integers(1, 4), C=st.integers(1, 4), caps=st.tuples(*[st.integers(8, 300)] * 3),
       psum=st.one_of(st.none(), st.integers(4, 1200)), objective=st.sampled_from(["dram", "energy", "latency"]))
def test_whole_tiles_against_the_enumerated_space(M, N, K, df, R, C, caps, psum, objective):
    """The stationary operand moved in whole array-sized tiles (``array.whole_tiles``: the counts
    price every schedule so, the enumerator's space is unchanged): ``dram`` exact, the others within
    :data:`GAP` (450 random (case, objective) pairs: dram 0 above the least, latency 1 at 1.007x)."""
    op = sim.Gemm(M, N, K)
    d = small_design(R, C, df, caps, psum)
    d = dataclasses.replace(d, array=dataclasses.replace(d.array, whole_tiles=True, whole_tiles_source="test"))
    assert_near_least(op, d, objective, GAP)


@settings(max_examples=40, deadline=None)
@given(M=st.integers(1, 9), N=st.integers(1, 9), K=st.integers(1, 9), df=st.sampled_from(["os", "ws", "is"]),
       R=st.integers(1, 4), C=st.integers(1, 4), caps=st.tuples(*[st.integers(8, 300)] * 3),
       psum=st.one_of(st.none(), st.integers(4, 1200)), whole=st.booleans(),
       doubled=st.lists(st.sampled_from(["ifmap", "filter", "ofmap", "psum"]), unique=True, max_size=3),
       objective=st.sampled_from(["dram", "energy", "latency"]))
def test_double_buffers_against_the_enumerated_space(M, N, K, df, R, C, caps, psum, whole, doubled, objective):
    """A double-buffered schedule that doubles only the tiles of the operands ``array.double_buffers``
    lists (the others' transfers stall), with and without whole-tile storage: ``dram`` exact, the
    others within :data:`GAP`."""
    op = sim.Gemm(M, N, K)
    d = small_design(R, C, df, caps, psum)
    d = dataclasses.replace(d, array=dataclasses.replace(d.array, whole_tiles=whole, whole_tiles_source="test",
                                                         double_buffers=tuple(doubled), double_buffers_source="test"))
    assert_near_least(op, d, objective, GAP)


#: The same with tensors kept on chip (``dram.holds`` leaves some out), whole or streaming their
#: overflow (asicsim/_src/hw/residency.py). ``dram``: exact (600 random cases of this test's
#: distribution, 0 above the least). ``energy``: 91 of 600 above the least, at most 1.070x;
#: ``latency``: 90 of 600, at most 1.190x (benchmarks/RESULTS.md, "Tensors kept on chip"): the
#: kept tensors leave tight budgets, where cutting two tile sides at once (the misses of ``GAP``)
#: and the tile share trade more; the bounds here leave a margin over the worst seen.
KEPT_GAP = {"dram": 1.0, "energy": 1.10, "latency": 1.25}


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(M=st.integers(1, 9), N=st.integers(1, 9), K=st.integers(1, 9), df=st.sampled_from(["os", "ws", "is"]),
       R=st.integers(1, 4), C=st.integers(1, 4), caps=st.tuples(*[st.integers(8, 300)] * 3),
       psum=st.one_of(st.none(), st.integers(4, 1200)),
       holds=st.sampled_from([("filter",), ("filter", "ofmap"), ("ifmap", "filter")]),
       objective=st.sampled_from(["dram", "energy", "latency"]))
def test_kept_tensors_against_the_enumerated_space(M, N, K, df, R, C, caps, psum, holds, objective):
    """Tensors kept on chip, whole or streaming their overflow: ``dram`` the least bytes of the
    whole space, exactly; ``energy`` and ``latency`` within :data:`KEPT_GAP`."""
    op = sim.Gemm(M, N, K)
    d = small_design(R, C, df, caps, psum, holds=holds)
    assert_near_least(op, d, objective, KEPT_GAP)


def test_kept_output_overflow_least_dram():
    """C (25 bytes) kept on chip in an 11-byte buffer: the least DRAM streams its overflow, a
    one-element output staging tile in 1/4 of the buffer and 3/4 (8.25 bytes) keeping C: A 20
    and B 20 once (weights resident, K x 5 block), C 25 - 8.25 written: 56.75."""
    op = sim.Gemm(5, 5, 4)
    d = small_design(3, 3, "os", (16, 81, 11), 259, holds=("ifmap", "filter"))
    assert chosen(op, d, "dram") == enumerate_space(op, d, model(op, d)[2])["dram"] == 20 + 20 + 25 - 8.25


@pytest.mark.parametrize(("shape", "df", "R", "C", "caps", "psum", "objective"), [
    ((3, 9, 3), "os", 3, 1, (44, 50, 16), None, "latency"),  # 1.247x before: one-column slivers
    ((7, 3, 2), "ws", 2, 2, (89, 60, 230), 778, "latency"),  # 1.233x: one-row slivers, more steps
    ((3, 9, 3), "os", 3, 1, (44, 50, 16), None, "energy"),  # 1.131x
    ((7, 3, 2), "ws", 2, 2, (89, 60, 230), 778, "energy"),  # 1.106x
    ((4, 5, 4), "os", 3, 1, (60, 194, 263), None, "latency"),  # 1.415x
    ((8, 4, 2), "ws", 1, 1, (63, 129, 139), 912, "latency"),  # 1.292x
    # dram, 144 B where 135 B move: the K-cut weights block was picked by a sliver that does not
    # fit (a buffer the sought tile takes nothing of was taken as no bound)
    ((3, 3, 9), "os", 1, 1, (8, 15, 8), None, "dram"),
])
def test_issue_31_energy_and_latency_cases(shape, df, R, C, caps, psum, objective):
    """The worst of the search's misses before its second pass, now the enumerated least (each
    fails on 9aa296c)."""
    op = sim.Gemm(*shape)
    d = small_design(R, C, df, caps, psum)
    best = enumerate_space(op, d, model(op, d)[2])
    assert chosen(op, d, objective) == pytest.approx(best[objective], rel=1e-12)


def with_buffers(design, kib):
    d = load_design(design)
    return dataclasses.replace(d, buffers=tuple(dataclasses.replace(b, capacity_kib=c)
                                                for b, c in zip(d.buffers, kib, strict=True)))


def test_issue_31_any_buffer_split():
    """dc_bf16_128x128 with 1024/512/256 KiB buffers: the resident A block takes 97 % of the
    activation buffer, so the GEMM moves its compulsory 3.686 MiB (the 1/2 and 7/8 splits: 6.02)."""
    r = sim.cost(sim.Gemm(304, 796, 1537), with_buffers("dc_bf16_128x128", (1024, 512, 256)), objective="dram")
    assert r.dram_bytes == r.dram_bound_bytes == pytest.approx(3.686 * MIB, rel=1e-3)


def test_issue_31_output_blocks_narrower_than_n():
    """tpu_v1 with 4x its DRAM bandwidth, Gemm(200, 2000, 2000) under ``latency``: 21,855 cycles
    (blocks the full N wide: 54,066). Before whole-tile weight fetches (``array.whole_tiles``)
    20,854 with a 200 x 223 output block; the 2000 x 2000 weights now move as 8 x 8 whole 256 x 256
    tiles, 2048^2 / 2000^2 = 1.0486x the bytes of this DRAM-bound GEMM (21,855 / 20,854 = 1.048)."""
    d = load_design("tpu_v1")
    d = dataclasses.replace(d, dram=dataclasses.replace(d.dram, bandwidth_gbps=4 * d.dram.bandwidth_gbps))
    assert sim.cost(sim.Gemm(200, 2000, 2000), d, objective="latency").cycles <= 21_856
    plain = dataclasses.replace(d, array=dataclasses.replace(d.array, whole_tiles=False))
    assert sim.cost(sim.Gemm(200, 2000, 2000), plain, objective="latency").cycles <= 20_856


def test_issue_31_partial_sums_spilled_to_dram():
    """Gemm(4096^3) on edge_int8_32x32: K cut in three, partial sums to DRAM and back, 640 MiB
    (partial sums kept on chip: 1,216 MiB)."""
    r = sim.cost(sim.Gemm(4096, 4096, 4096), "edge_int8_32x32", objective="dram")
    assert r.dram_bytes == 640 * MIB
    assert "partial sums to DRAM and back" in r.mapping
    assert r.traffic["dram.psum.reads_bytes"] == r.traffic["dram.psum.writes_bytes"] > 0


def test_issue_31_dram_objective_keeps_the_array_busy():
    """The edge conv 3x3 128->128 28x28 batch 8 under ``dram``: the least bytes with the array's
    tile decoupled from the resident block (utilisation 0.12 and 9,203 us before)."""
    conv = sim.Conv(28, 28, 128, 128, 3, 3, padding=1, batch=8)
    r = sim.cost(conv, "edge_int8_32x32", objective="dram")
    assert r.utilization > 0.6 and r.time_s < 2e-3
    assert r.dram_bytes <= sim.cost(conv, "edge_int8_32x32", objective="latency").dram_bytes


def test_issue_31_larger_buffers_not_slower():
    """Gemm(59, 94, 1350) on edge_int8_32x32: twice the buffers ran 20,961 cycles against 14,540."""
    op = sim.Gemm(59, 94, 1350)
    e = load_design("edge_int8_32x32")
    big = with_buffers("edge_int8_32x32", tuple(2 * b.capacity_kib for b in e.buffers))
    for objective in ("latency", "balanced"):
        assert sim.cost(op, big, objective=objective).cycles <= sim.cost(op, e, objective=objective).cycles


@pytest.mark.parametrize("objective", ["latency", "dram"])
def test_more_bandwidth_never_worse(objective):
    """The searched schedules do not depend on the DRAM bandwidth and each one's cycles never grow
    with it, so the chosen one never gets slower (or moves more bytes). Energy is not held: a wider
    DRAM interface has more idle power (asicsim._src.hw.power)."""
    ops = [sim.Gemm(200, 2000, 2000), sim.Gemm(59, 94, 1350), sim.Conv(28, 28, 128, 128, 3, 3, padding=1, batch=8),
           sim.Gemm(1000, 3000, 700)]
    metric = {"latency": "cycles", "energy": "energy_total_pj", "dram": "dram_bytes"}[objective]
    for design in ("edge_int8_32x32", "tpu_v1"):
        d = load_design(design)
        fast = dataclasses.replace(d, dram=dataclasses.replace(d.dram, bandwidth_gbps=2 * d.dram.bandwidth_gbps))
        for a, b in zip(sim.hw.cost_many(ops, d, objective=objective), sim.hw.cost_many(ops, fast, objective=objective),
                        strict=True):
            assert getattr(b, metric) <= getattr(a, metric) * (1 + 1e-12)


def test_issue_31_narrower_operands_not_slower():
    """int4 on edge_int8_32x32's int8 array, Gemm 512^3: half the bytes, so never slower than int8
    (it took 176.6 us against 165.9)."""
    op = sim.Gemm(512, 512, 512)
    t = {f: sim.cost(op, "edge_int8_32x32", f"act={f},weight={f}", objective="latency").time_s
         for f in ("int8", "int4")}
    assert t["int4"] <= t["int8"]


# --- monotone where physics says so (issue 31 item 2) -----------------------------------------
def _scaled(d, change):
    """``d`` with twice its buffers, twice its DRAM bandwidth or twice its array's rows and
    columns (buffers as they were)."""
    if change == "buffers":
        return dataclasses.replace(d, buffers=tuple(dataclasses.replace(b, capacity_kib=2 * b.capacity_kib)
                                                    for b in d.buffers))
    if change == "bandwidth":
        return dataclasses.replace(d, dram=dataclasses.replace(d.dram, bandwidth_gbps=2 * d.dram.bandwidth_gbps))
    return dataclasses.replace(d, array=dataclasses.replace(d.array, rows=2 * d.array.rows, cols=2 * d.array.cols))


#: what each objective measures on a result
OWN = {"latency": lambda r: r.cycles, "energy": lambda r: r.energy_total_pj, "dram": lambda r: r.dram_bytes}
#: the objectives physics holds monotone under each change. Energy is not held under larger
#: buffers (a larger SRAM costs more per access), more bandwidth (a wider DRAM interface idles at
#: more power) or a larger array (more PEs idle at more power).
HELD = {"buffers": ("latency", "dram"), "bandwidth": ("latency", "dram"), "array": ("latency", "dram"),
        "int4": ("latency", "energy", "dram")}


def _allowance(d, change) -> float:
    """Cycles a larger array may add: its longer one-time fill/drain (``2R + C - 2`` once per
    repetition, asicsim._src.hw.counts), which no schedule avoids where operands and results cross the
    whole array once. None where the design says they bypass unused rows and columns
    (``array.bypass_unused``: the fill/drain of the used block only). Per fold, a schedule uses
    only the rows its tile spans, so nothing else."""
    if change != "array" or d.array.bypass_unused:
        return 0.0
    return 2 * d.array.rows + d.array.cols


def _bytes_only(d):
    """``d`` moving its stationary operand's bytes, not whole array tiles (``array.whole_tiles``)."""
    return dataclasses.replace(d, array=dataclasses.replace(d.array, whole_tiles=False))


def _bypassing(d):
    return dataclasses.replace(d, array=dataclasses.replace(d.array, bypass_unused=True,
                                                            bypass_unused_source="test: a bypassing array"))


@settings(max_examples=60, deadline=None)
@given(M=st.integers(1, 40), N=st.integers(1, 40), K=st.integers(1, 40), df=st.sampled_from(["os", "ws", "is"]),
       R=st.integers(1, 6), C=st.integers(1, 6), caps=st.tuples(*[st.integers(16, 600)] * 3),
       psum=st.one_of(st.none(), st.integers(16, 2000)), change=st.sampled_from(sorted(HELD)),
       bypass=st.booleans())
def test_better_hardware_never_worse(M, N, K, df, R, C, caps, psum, change, bypass):
    """Twice the buffers, twice the bandwidth, twice the array (same buffers) or int4 operands
    instead of int8 never make the chosen schedule worse on its own objective, for every
    objective physics holds (:data:`HELD`).
    Exact for ``dram`` (its search is proven) and under more bandwidth (the candidates do not
    depend on it and none gets slower); ``latency`` and ``energy`` otherwise up to the search's
    gap (:data:`GAP`): with larger buffers or narrower operands the feasible set holds the other's
    schedules and none costs more there, so only a miss of the search can make it worse.

    A larger array: see :func:`test_larger_array_never_worse` (every tile, no skip)."""
    op = sim.Gemm(M, N, K)
    d = small_design(R, C, df, caps, psum)
    d = _bypassing(d) if bypass else d
    for objective in HELD[change]:
        try:
            before = sim.cost(op, d, objective=objective)
        except ValueError:  # nothing fits the smaller hardware
            continue
        if change == "int4":
            after = sim.cost(op, d, "act=int4,weight=int4", objective=objective)
        else:
            after = sim.cost(op, _scaled(d, change), objective=objective)
        slack = _allowance(d, change) if objective == "latency" else 0.0
        gap = 1.0 if change == "bandwidth" else GAP[objective]
        assert OWN[objective](after) <= OWN[objective](before) * gap * (1 + 1e-9) + slack, (objective, change)


@settings(max_examples=25, deadline=None)
@given(M=st.integers(1, 40), N=st.integers(1, 40), K=st.integers(1, 40), df=st.sampled_from(["os", "ws", "is"]),
       R=st.integers(1, 6), C=st.integers(1, 6), caps=st.tuples(*[st.integers(16, 600)] * 3),
       psum=st.one_of(st.none(), st.integers(16, 2000)), bypass=st.booleans())
# found by `python benchmarks/mapper_monotone_small.py 1 500 array` (random.Random(1)) on main at
# 0d54994: 2,449.8 -> 2,602.2 cycles (1.062x), the 6 x 6 array's 13 x 6 x 18 weights-resident
# tile (6 columns: its side) missing from the 12 x 12 array's candidates
@example(M=25, N=22, K=18, df="ws", R=6, C=6, caps=(264, 267, 77), psum=None, bypass=True)
@example(M=26, N=27, K=36, df="is", R=4, C=4, caps=(241, 329, 33), psum=None, bypass=True)  # 1.031x
@example(M=28, N=22, K=32, df="os", R=6, C=4, caps=(427, 451, 109), psum=None, bypass=True)  # 1.026x
def test_larger_array_never_worse(M, N, K, df, R, C, caps, psum, bypass):
    """Twice the array's rows and columns at the same buffers never make the chosen schedule worse
    on ``latency`` or ``dram`` (the objectives :data:`HELD` under a larger array), whatever the
    smaller array's tile. ``latency``: exactly never slower where operands bypass unused rows and
    columns, else by at most the longer one-time fill/drain (:func:`_allowance`); the argument is
    asicsim/_src/hw/mapper_folds.py's docstring (the larger array's candidates hold every tile
    of the smaller one's levels, and its fold list every fold the smaller one's does), so no
    search gap is allowed here. ``dram``: the bytes do not depend on the array (a proven search).
    Before (main at 0d54994), the examples above failed (6 of 1,000 random pairs up to 1.062x)."""
    op = sim.Gemm(M, N, K)
    d = small_design(R, C, df, caps, psum)
    d = _bypassing(d) if bypass else d
    for objective in HELD["array"]:
        try:
            before = sim.cost(op, d, objective=objective)
        except ValueError:  # nothing fits the buffers (the same on both arrays)
            continue
        after = sim.cost(op, _scaled(d, "array"), objective=objective)
        slack = _allowance(d, "array") if objective == "latency" else 0.0
        assert OWN[objective](after) <= OWN[objective](before) * (1 + 1e-9) + slack, (objective, bypass)


@pytest.mark.parametrize("bypass", [False, True])
def test_taller_tile_on_larger_array_runs_smaller_folds(bypass):
    """Gemm(1, 6, 5) on a 2 x 1 input-stationary array with 16-byte buffers against the 4 x 2 array.
    Before folds smaller than the array were a choice (asicsim/_src/hw/mapper_folds.py), the 4 x 2
    array's 5-row tiles took folds of 4 and 1 rows, each reloading 4 rows for a one-cycle stream:
    53.5 cycles (53.1 with bypass) against the 2 x 1 array's 47.3, beyond the 5-cycle fill/drain
    allowance (this test was a strict xfail). Now the 4 x 2 array runs folds of at most 2 rows:
    47.3 cycles without bypass (its 2 x 1 array's 46.5 plus 1 cycle of its longer fill/drain
    less rounding), 46.2 with bypass (equal). The 2 x 1 array's own choice also improved (47.3 ->
    46.5; 46.2 with bypass: folds of 1 row)."""
    d = small_design(2, 1, "is", (16, 16, 16), None)
    d = _bypassing(d) if bypass else d
    op = sim.Gemm(1, 6, 5)
    before = sim.cost(op, d, objective="latency")
    after = sim.cost(op, _scaled(d, "array"), objective="latency")
    assert after.cycles <= before.cycles * GAP["latency"] + _allowance(d, "array")
    assert after.cycles < 53.0  # 53.5 (53.1) before the fold choice
    if bypass:
        assert after.cycles <= before.cycles * (1 + 1e-12)


def test_larger_array_uses_part_of_it():
    """Gemm(1257, 242, 97) on tpu_v1 under ``latency``: twice the array's rows and columns at the
    same buffers costs exactly the larger array's longer one-time fill/drain more (2,063 + 768
    cycles): its 97-row weight tiles reload 97 rows a fold, not 512. Before: 2,138 -> 3,138
    cycles (every fold reloaded all 512 rows; 1.47x). With the bytes only: tpu_v1 moves whole
    weight tiles (``array.whole_tiles``), so twice its array moves one 512 x 512 tile (256 KiB) for
    these 97 x 242 weights where 256 x 256 moves 64 KiB: 2,130 -> 5,531 cycles (Sec. 7's point)."""
    op, d = sim.Gemm(1257, 242, 97), _bytes_only(load_design("tpu_v1"))
    small, big = sim.cost(op, d, objective="latency"), sim.cost(op, _scaled(d, "array"), objective="latency")
    assert big.cycles <= small.cycles + _allowance(d, "array")
    assert big.schedule["Kt"] == 97


def test_bypassing_array_fills_only_the_used_block():
    """Where operands bypass unused rows and columns (``array.bypass_unused``) the one-time
    fill/drain is ``2r + c - 2`` over the used block, not ``2R + C - 2`` over the array, so twice
    tpu_v1's array (same buffers) is never slower on Gemm(1257, 242, 97) (97-row weight tiles):
    1,731 cycles on both (fill/drain 434). Without bypass: 2,063 -> 2,831 cycles, the 768 of the
    longer fill/drain (766 -> 1,534)."""
    op, d = sim.Gemm(1257, 242, 97), _bytes_only(load_design("tpu_v1"))  # as above
    assert not d.array.bypass_unused  # no source says TPU v1 bypasses: today's figures kept
    plain = sim.cost(op, d, objective="latency")
    by = _bypassing(d)
    small, big = sim.cost(op, by, objective="latency"), sim.cost(op, _scaled(by, "array"), objective="latency")
    assert big.cycles <= small.cycles
    assert big.schedule["Kt"] == small.schedule["Kt"] == 97
    # the used block: 97 weight rows and the tile's columns (242 at most 256): 2 * 97 + 242 - 2
    # in place of 2 * 256 + 256 - 2, the rest (tile reloads) the same
    assert plain.cycles_fill_drain - small.cycles_fill_drain == (2 * 256 + 256 - 2) - (2 * 97 + 242 - 2)
    assert sim.cost(op, _scaled(d, "array"), objective="latency").cycles > plain.cycles + 700
