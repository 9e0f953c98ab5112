"""The mapper's fast path (asicsim/_src/hw/mapper_passes.py: lean counts, balanced's kept first pass, the
content-keyed candidate and choice caches; asicsim/_src/hw/bounds.py's cache) chooses bit for bit what the
unpruned evaluation chooses: every candidate measured with the full counts, balanced's second
pass measured again, nothing cached. The reference below is that evaluation, written from the
mapper's candidate list and selection rule (what is compared is the speed-ups, not the search).
At the end: the candidates generated along a variant axis against their generation one variant
at a time (copied from 4df6fca)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import asicsim as sim
import asicsim._src.hw.mapper as mapper
import asicsim._src.hw.mapper_cache as cache
import asicsim._src.hw.mapper_candidates as mapper_candidates
import asicsim._src.hw.mapper_levels as mapper_levels
import asicsim._src.hw.mapper_passes as passes
import asicsim._src.hw.mapper_shapes as shapes
import asicsim._src.hw.pipeline as pipeline
from asicsim._src.hw import cost_many, gemm_sweep
from asicsim._src.hw.cost import _operation_bounds, operation_bounds
from asicsim._src.hw.counts import (
    ACTIVATIONS,
    IS,
    LEAN_SKIPS,
    OS,
    OUTPUTS,
    WEIGHTS,
    Schedule,
    schedule_counts,
)
from asicsim._src.hw.mapper_candidates import _dram_key, _pick
from asicsim._src.hw.mapper_folds import fold_twins
from asicsim._src.hw.objectives import BALANCED_SLACK, OBJECTIVES
from asicsim._src.hw.tiles import (
    aligned,
    buffer_rows,
    element_shape,
    most,
    most_sub,
    trip_min,
    trip_tiles,
    valid,
)


def _select(prim, sec):
    """Per element the candidate of least primary, ties (within 1e-12) on the secondary, then the
    first: the mapper's rule over one list, written here without its chunks."""
    lo = prim.min(axis=0)
    sec = np.where(np.abs(prim - lo) <= 1e-12 * np.abs(lo), sec, np.inf)
    return np.argmin(sec, axis=0), lo


def unpruned_best_counts(p, hw, objective, score_energy=None, energy_key=None):
    """The search as measured before the fast path: every candidate and every twin in one list
    over the whole grid (no chunks, no split by dataflow), full counts, balanced's second pass
    on all of them, no cache."""
    shape = element_shape(p, hw)
    with np.errstate(divide="ignore", invalid="ignore"):  # every level where the objective lists them
        blocks = mapper_candidates.candidates(p, hw, None if objective in mapper_levels.OBJECTIVES else mapper_levels.OWN_ONLY)
    nd = len(shape)
    leads = [passes._lead(b, nd) for b in blocks]
    s = passes._stack(blocks, shape, leads)
    t = aligned(p, hw, s)
    n = sum(leads)
    s = Schedule(*(np.concatenate([np.broadcast_to(getattr(s, f), (n, *shape)),
                                   np.broadcast_to(getattr(t, f), (n, *shape))]) for f in passes.FIELDS))
    with np.errstate(divide="ignore", invalid="ignore"):
        c = schedule_counts(p, hw, Schedule(np.maximum(s.family, 0), s.Mt, s.Nt, s.Kt, s.double_buffered,
                                            s.psum_spill, s.Ma, s.Na, s.streamed, s.tile_share, s.fold_rows, s.fold_cols))
        ok = valid(p, hw, s)
        lat = np.where(ok, c.busy_cycles + c.cycles_stall, np.inf)
        m = {"latency": lat, "dram": np.where(ok, c.dram_bytes, np.inf)}
        m["energy"] = np.where(ok, score_energy(c) if score_energy is not None else c.dram_bytes, np.inf)
        if objective == "balanced":
            first, _ = _select(lat, m["energy"])
            limit = np.take_along_axis(lat, first[None], 0)[0] * (1.0 + BALANCED_SLACK)
            pick, lo = _select(np.where(lat <= limit, m["energy"], np.inf), lat)
        else:
            pick, lo = _select(m[objective], m[mapper._SECOND[objective]])
    assert np.all(np.isfinite(lo))
    b = [np.take_along_axis(getattr(s, f), pick[None], 0)[0] for f in passes.FIELDS]
    return schedule_counts(p, hw, Schedule(b[0], b[1], b[2], b[3], b[4] > 0, b[5] > 0, *b[6:]))


def _sweep(ops, design, grid, objective):
    return gemm_sweep(ops, design, rows=grid[0], cols=grid[1], dataflow=grid[2], buffer_scale=grid[3],
                      objective=objective).arrays()


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k]), equal_nan=True), k


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_fast_path_chooses_what_the_unpruned_evaluation_chooses(monkeypatch, seed, objective):
    """Random GEMMs on random design grids, in small chunks (many chunks: balanced keeps its first
    pass; seed 2 keeps almost nothing and measures chunks again): every figure of the sweep equal."""
    rng = np.random.default_rng(seed)
    ops = [sim.Gemm(*(int(x) for x in rng.integers(1, 1500, 3))) for _ in range(5)]
    ops.append(sim.Conv(14, 14, int(rng.integers(1, 200)), int(rng.integers(1, 200)), 3, 3, padding=1))
    grid = (rng.integers(1, 257, 3)[:, None, None, None], rng.integers(1, 257, 2)[None, :, None, None],
            np.array(["os", "ws", "is"])[None, None, :, None], 2.0 ** rng.integers(-4, 4, 2)[None, None, None, :])
    design = ("edge_int8_32x32", "dc_bf16_128x128", "tpu_v1")[seed]
    monkeypatch.setattr(passes, "STACK_ELEMENTS", 1 << 11)
    monkeypatch.setattr(shapes, "SPLIT_ELEMENTS", 1 << 6)  # searched one dataflow at a time
    monkeypatch.setattr(passes, "DISTINCT_SHARE", 1)  # every element keeps its distinct candidates
    monkeypatch.setattr(passes, "KEEP_PAIRS", 1 << 8 if seed == 2 else passes.KEEP_PAIRS)
    fast = _sweep(ops, design, grid, objective)
    monkeypatch.setattr(pipeline, "best_counts", unpruned_best_counts)
    _same(fast, _sweep(ops, design, grid, objective))


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_cached_candidates_give_what_a_cold_search_gives(monkeypatch, objective):
    """A network priced twice on a design point (the second from the cache) and after clearing
    it, and against the unpruned evaluation; a design point that differs only in a buffer's size
    does not hit the first one's entry."""
    ops = [sim.Conv(28, 28, 64, 64, 3, 3, padding=1), sim.Gemm(197, 768, 3072), sim.Gemm(1, 1000, 2048),
           sim.Conv(28, 28, 64, 64, 3, 3, padding=1)]
    cache.clear_cache()
    cold = repr(cost_many(ops, "edge_int8_32x32", objective=objective))
    # one entry of the array's own level (and, for latency, one of the smaller levels' candidates
    # at the GEMMs where a floor says they can win, asicsim/_src/hw/mapper_levels.py)
    own = (0 if objective in mapper_levels.OBJECTIVES else mapper_levels.OWN_ONLY, False)
    assert [key[1] for key in cache._CACHE].count(own) == 1
    assert len(cache._CHOSEN) == 1
    warm = repr(cost_many(ops, "edge_int8_32x32", objective=objective))  # the kept choice
    assert warm == cold
    small = sim.hw.load_design("edge_int8_32x32")
    small = dataclasses.replace(small, buffers=tuple(dataclasses.replace(b, capacity_kib=b.capacity_kib / 2)
                                                     for b in small.buffers))
    halved = cost_many(ops, small, objective=objective)
    assert [key[1] for key in cache._CACHE].count(own) == 2
    monkeypatch.setattr(pipeline, "best_counts", unpruned_best_counts)
    ref = repr(cost_many(ops, "edge_int8_32x32", objective=objective))
    assert cold == ref
    assert repr(halved) == repr(cost_many(ops, small, objective=objective))
    assert repr(halved) != cold


def _counts_equal(a, b) -> bool:
    return all(np.array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)), equal_nan=True)
               for f in type(a).names() if getattr(a, f) is not None)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_a_kept_choice_is_the_searched_one_and_keyed_by_what_the_energy_reads(objective):
    """The chosen schedule kept by content (mapper_cache.chosen_key): a second search with the
    same problem, hardware, objective and energy key counts the kept schedule, equal to the
    unpruned evaluation's; an energy function with another key (here one that prices cycles
    instead of DRAM bytes, which picks another schedule under ``energy``) is searched again, not
    served the first one's choice (fails if the key left out the energy's content)."""
    p, hw, _ = _one_problem()
    p = dataclasses.replace(p, M=np.array([300.0, 8.0, 1000.0]), N=np.array([500.0, 2000.0, 64.0]),
                            K=np.array([700.0, 3000.0, 4096.0]), a_footprint=np.array([210e3, 24e3, 4096e3]))
    hw = dataclasses.replace(hw, capacity=(np.float64(1 << 14),))
    by_dram = lambda c: c.dram_bytes  # noqa: E731
    by_cycles = lambda c: c.busy_cycles + c.cycles_stall + 1e-3 * c.dram_bytes  # noqa: E731
    cache.clear_cache()
    first = mapper.best_counts(p, hw, objective, by_dram, ("dram",))
    assert len(cache._CHOSEN) == 1
    again = mapper.best_counts(p, hw, objective, by_dram, ("dram",))
    assert _counts_equal(again, first)
    assert _counts_equal(first, unpruned_best_counts(p, hw, objective, by_dram))
    other = mapper.best_counts(p, hw, objective, by_cycles, ("cycles",))
    assert len(cache._CHOSEN) == 2
    assert _counts_equal(other, unpruned_best_counts(p, hw, objective, by_cycles))
    if objective == "energy":
        assert not _counts_equal(other, first)  # the case can tell the keys apart
    unkeyed = mapper.best_counts(p, hw, objective, by_cycles)  # no key: searched, nothing kept
    assert len(cache._CHOSEN) == 2 and _counts_equal(unkeyed, other)


def test_lean_counts_are_the_full_counts_and_leave_the_rest_unusable():
    """schedule_counts(lean=True): every field it computes equals the full counts' (same
    expressions); the skipped ones are None, so an energy that read one would raise, not
    silently use a zero."""
    ops = [sim.Gemm(300, 500, 700), sim.Conv(14, 14, 32, 48, 3, 3, padding=1)]
    d = sim.hw.load_design("dc_bf16_128x128")
    seen = []

    def spy(p, hw, objective, score_energy=None, energy_key=None):  # nothing kept: searched each time
        shape = element_shape(p, hw)
        for s in passes.stacked_chunks(p, hw, mapper_candidates.candidates(p, hw), shape):
            full, lean = (schedule_counts(p, hw, Schedule(np.maximum(s.family, 0), s.Mt, s.Nt, s.Kt, s.double_buffered,
                                                          s.psum_spill, s.Ma, s.Na, s.streamed, s.tile_share, s.fold_rows, s.fold_cols), lean=b)
                          for b in (False, True))
            for f in type(full).names():
                v = getattr(lean, f)
                if f in LEAN_SKIPS:
                    assert v is None
                else:
                    assert np.array_equal(np.broadcast_to(v, np.shape(getattr(full, f))), getattr(full, f),
                                          equal_nan=True), f
            seen.append(score_energy(lean))
        return mapper.best_counts(p, hw, objective, score_energy)

    pipeline_best = pipeline.best_counts
    try:
        pipeline.best_counts = spy
        cost_many(ops, d)
    finally:
        pipeline.best_counts = pipeline_best
    assert seen
    with pytest.raises(TypeError):
        schedule_counts(*_one_problem(), lean=True).mapping_slots + 1


def _one_problem():
    from asicsim._src.hw.counts import OUTPUTS, ArrayHardware, BufferLayout, GemmProblem
    one = np.float64(1)
    p = GemmProblem(M=np.float64(8), N=np.float64(8), K=np.float64(8), a_bytes=one, b_bytes=one, acc_bytes=one * 4,
                    out_bytes=one, a_footprint=np.float64(64), reps=one, shared_weights=np.False_,
                    density=one, off_chip={"ifmap": np.True_, "filter": np.True_, "ofmap": np.True_})
    hw = ArrayHardware(rows=one * 4, cols=one * 4, dataflow=np.int64(0), capacity=(np.float64(1 << 20),),
                       layout=BufferLayout(names=("b",), holds=(("ifmap", "filter", "ofmap", "psum"),)),
                       dram_bytes_per_cycle=one * 8)
    return p, hw, Schedule(np.float64(OUTPUTS), p.M, p.N, p.K, np.False_)


def test_cached_bounds_equal_uncached_and_are_read_only():
    d = sim.hw.load_design("edge_int8_32x32")
    for op in (sim.Conv(56, 56, 64, 64, 1, 1, stride=2), sim.Gemm(197, 768, 3072)):
        for fmts in (None, "act=int8,weight=int8"):
            b = operation_bounds(op, d, fmts)
            ref = _operation_bounds(op, d, fmts)
            assert np.array_equal(b.compulsory, ref.compulsory) and np.array_equal(b.pebble, ref.pebble)
            assert operation_bounds(op, d, fmts) is b  # the second from the cache
            assert not b.compulsory.flags.writeable
    by_dict = operation_bounds(op, d, {"act": "int8", "weight": "int8"})  # a dict: not cached, same bounds
    assert np.array_equal(by_dict.compulsory, operation_bounds(op, d, "act=int8,weight=int8").compulsory)


def test_a_design_point_of_a_sweep_gets_the_schedule_it_gets_priced_alone(monkeypatch):
    """Schedules that tie on both measures go to the first in one order however the sweep is
    chunked. Before, the first in its chunk's order: on a grid of 144 design points x 51 GEMMs,
    8 `dram` choices of the sweep differed from the design point priced alone (tpu_v1 at 5x100,
    ws, buffer_scale 0.3, Gemm(2610, 1023, 682): 2.949e9 array bytes in the sweep, 3.313e9
    alone); this grid, in small chunks, fails the same way on that code."""
    ops = [sim.Conv(1, 1, 512, 1000, 1, 1), sim.Gemm(1122, 2037, 367), sim.Gemm(2610, 1023, 682),
           sim.Gemm(960, 438, 2399)]
    rows, cols, scales = [5, 17], [32, 100, 256], [0.0625, 0.3, 4.0]
    grid = (np.array(rows)[:, None, None, None], np.array(cols)[None, :, None, None],
            np.array(["os", "ws", "is"])[None, None, :, None], np.array(scales)[None, None, None, :])
    monkeypatch.setattr(passes, "STACK_ELEMENTS", 1 << 12)  # many chunks
    swept = gemm_sweep(ops, "tpu_v1", rows=grid[0], cols=grid[1], dataflow=grid[2], buffer_scale=grid[3],
                       objective="dram")
    for i, j, k, m in np.ndindex(2, 3, 3, 3):
        alone = gemm_sweep(ops, "tpu_v1", rows=rows[i], cols=cols[j], dataflow=("os", "ws", "is")[k],
                           buffer_scale=scales[m], objective="dram")
        for key in ("sram_array_bytes", "cycles", "dram_bytes", "energy_pj"):
            assert np.array_equal(getattr(swept, key)[i, j, k, m], getattr(alone, key)), (key, i, j, k, m)


def _pairwise_distinct(flat: list, n: int) -> tuple:
    """The pairwise oracle of distinct: ``dup[j, e]`` (candidate j equals an earlier one in every
    field at element e), the count kept ``k`` and the kept indices per element, in order."""
    same = np.ones((n, n, flat[0].shape[1]), dtype=bool)
    for v in flat:
        same &= v[:, None] == v[None, :]
    dup = (same & np.tri(n, k=-1, dtype=bool)[..., None]).any(axis=1)  # [j]: equal to an earlier one
    k = max(1, int((~dup).sum(axis=0).max()))
    return dup, k, np.argsort(dup, axis=0, kind="stable")[:k]


@pytest.mark.parametrize("seed", range(40))
def test_distinct_keeps_the_first_of_equal_candidates_per_element(seed):
    """mapper_shapes.distinct (sorted by a hash of the fields) keeps per element exactly what the
    pairwise definition keeps: the first of candidates equal in every field, in order (NaN equal
    to nothing), then copies, and the same search order."""
    rng = np.random.default_rng(seed)
    n, own = int(rng.integers(1, 40)), (int(rng.integers(1, 4)), int(rng.integers(1, 5)))

    def field():
        if rng.random() < 0.5:
            return rng.choice([0.0, 1.0, 2.0, 3.0, np.nan], size=(n, *own))
        return rng.integers(0, 2, (n, 1, own[1])).astype(float)

    s = Schedule(rng.integers(-1, 3, (n, *own)), field(), field(), field(), rng.random((n, 1, 1)) < 0.5,
                 rng.random((n, *own)) < 0.5, field(), field())
    flat = [np.broadcast_to(np.asarray(getattr(s, f)), (n, *own)).reshape(n, -1) for f in shapes.FIELDS]
    dup, k, keep = _pairwise_distinct(flat, n)
    order = 3 * np.arange(n)
    got, got_order, firsts = shapes.distinct(s, order)
    for f, v in zip(shapes.FIELDS, flat, strict=True):
        assert np.array_equal(getattr(got, f), np.take_along_axis(v, keep, 0).reshape(k, *own), equal_nan=True), f
    assert np.array_equal(got_order, order[keep].reshape(k, *own))
    # each element's distinct candidates are its first `firsts` (mapper_groups measures those only)
    assert np.array_equal(firsts, (~dup).sum(axis=0).reshape(own))


@pytest.mark.parametrize("seed", range(30))
def test_distinct_of_parts_is_the_pairwise_distinct_of_their_stack(seed):
    """mapper_shapes.distinct of a list of parts (the candidates and their twins, read at their own
    shapes without a concatenated copy) keeps what the pairwise definition keeps on the parts
    stacked one after the other (every field broadcast to (candidates, elements)): the first of
    candidates equal in every field, in order, then copies; the same fields (dtype, shape,
    values), search order and counts. Fields of whole numbers (packed keys), or NaN and halves
    (the hash), at (n, elements), (n, 1, columns) or one value; a field may be the same array in
    both parts (as the twins pass some on). Fails on a219d71 (distinct took one stack only)."""
    rng = np.random.default_rng(seed)
    n1, n2 = (int(x) for x in rng.integers(1, 30, 2))
    own = (int(rng.integers(1, 4)), int(rng.integers(1, 5)))
    odd = seed % 3 == 0  # NaN and halves: compared by hash

    def field(n, kind):
        if kind == 0:
            return rng.choice([0.0, 1.0, 2.0, 3.0, 2.5, np.nan] if odd else [0.0, 1.0, 2.0, 3.0, 40.0], size=(n, *own))
        if kind == 1:
            return rng.integers(0, 2, (n, 1, own[1])).astype(float)
        return np.full((1, 1, 1), 7.0)

    kinds = [int(k) for k in rng.integers(0, 3, 7)]
    a = Schedule(rng.integers(-1, 3, (n1, *own)), *(field(n1, k) for k in kinds[:3]), rng.random((n1, 1, 1)) < 0.5,
                 rng.random((n1, *own)) < 0.5, *(field(n1, k) for k in kinds[3:]))
    b = Schedule(rng.integers(-1, 3, (n2, *own)), *(field(n2, k) for k in kinds[:3]), rng.random((n2, 1, 1)) < 0.5,
                 rng.random((n2, *own)) < 0.5, *(field(n2, k) for k in kinds[3:]))
    if n1 == n2:  # passed on as it is (as aligned passes the family and the buffering)
        b = dataclasses.replace(b, family=a.family, double_buffered=a.double_buffered)
    n = n1 + n2
    flat = [np.concatenate([np.broadcast_to(np.asarray(getattr(x, f)), (m, *own)) for x, m in ((a, n1), (b, n2))])
            .reshape(n, -1) for f in shapes.FIELDS]
    dup, k, keep = _pairwise_distinct(flat, n)
    order = 5 * np.arange(n)
    got, got_order, firsts = shapes.distinct([a, b], order)
    for f, v in zip(shapes.FIELDS, flat, strict=True):
        g = getattr(got, f)
        assert g.dtype == v.dtype and g.shape == (k, *own), f
        assert np.array_equal(g, np.take_along_axis(v, keep, 0).reshape(k, *own), equal_nan=True), f
    assert np.array_equal(got_order, order[keep].reshape(k, *own))
    assert np.array_equal(firsts, np.maximum((~dup).sum(axis=0), 1).reshape(own))


def test_distinct_with_fields_equal_everywhere():
    """Fields equal for every candidate and element are not compared (mapper_shapes.distinct):
    all fields equal keeps the first of each element; one field varying keeps its distinct
    values' firsts; a NaN everywhere is compared (equal to nothing: every candidate kept)."""
    n, own = 5, (2, 3)
    ones = np.ones((n, *own))
    s = Schedule(np.zeros((n, *own), dtype=np.int64), ones, ones, ones, np.zeros((n, 1, 1), dtype=bool),
                 np.zeros((n, 1, 1), dtype=bool), ones, ones, 0.0 * ones, ones)
    got, order, firsts = shapes.distinct(s, np.arange(n))
    assert got.Mt.shape == (1, *own) and np.all(order == 0) and np.all(firsts == 1)
    mt = np.array([3.0, 1.0, 3.0, 2.0, 1.0])[:, None, None] * ones
    got, order, firsts = shapes.distinct(dataclasses.replace(s, Mt=mt), np.arange(n))
    assert np.all(firsts == 3) and np.array_equal(order[:, 0, 0], [0, 1, 3]) and np.array_equal(got.Mt[:, 0, 0], [3.0, 1.0, 2.0])
    got, order, _ = shapes.distinct(dataclasses.replace(s, Kt=np.full((n, *own), np.nan)), np.arange(n))
    assert np.array_equal(order[:, 1, 2], np.arange(n))


# --- the candidates generated along a variant axis are those generated one variant at a time ---

def one_variant_at_a_time(p, hw) -> list:
    """asicsim._src.hw.mapper.candidates as at 4df6fca (copied): one pass per buffering and home."""
    M, N, K = (np.asarray(x, dtype=np.float64) for x in (p.M, p.N, p.K))
    D = (M, N, K)
    ndim = len(element_shape(p, hw))
    lists = [trip_tiles(x, ndim) for x in D]
    one = np.ones_like(M)
    side = [np.minimum(M, np.where(hw.dataflow == IS, hw.cols, hw.rows)), np.minimum(N, np.where(hw.dataflow == IS, hw.rows, hw.cols))]
    dram_spill = np.asarray(p.off_chip["ofmap"], dtype=bool)
    k_side = np.minimum(K, np.where(hw.dataflow == OS, hw.cols, hw.rows))
    # the array side a partial-sum tile's rows (columns) span (inf: streamed, not spatial)
    sub_side = [np.where(hw.dataflow == OS, hw.rows, np.where(hw.dataflow == IS, hw.cols, np.inf)),
                np.where(hw.dataflow == IS, np.inf, hw.cols)]
    out = []
    homes = (False, True) if hw.layout.psum_spill is not None else (False,)
    for db, spill in ((db, spill) for db in (False, True) for spill in homes):
        rows = buffer_rows(p, hw, spill)
        dbs, sp = np.asarray(db), np.asarray(spill)

        def emit(fam, t, ok=True, sub=None, dbs=dbs, sp=sp):
            Ma, Na = (t[0], t[1]) if sub is None else sub
            out.append(Schedule(np.where(ok, fam, -1), *t, dbs, sp, Ma, Na))

        for x, widest in itertools.product((0, 1), (False, True)):
            # outputs resident: every block width (height), the other side as tall (wide) as fits
            # beside a K sliver one deep (array-independent: cheap on design sweeps), the one of
            # least DRAM bytes or the widest (tallest), cut to the least with its trip count; then
            # K as long as fits (or at twice and four times its trips), or K one array side deep
            # and the other side as tall (wide) as then fits
            y = 1 - x
            t = [None, None, one]
            t[x] = D[x] if widest else lists[x]
            t[y] = most(y, t, rows, db, D[y])
            if not widest:
                # every block height (width) with K as long as fits; double-buffered, also K one
                # deep (the most steps)
                every = [t[0], t[1], one]
                if db:
                    emit(OUTPUTS, [every[0], every[1], np.where(every[y] >= 1, one, 0.0)])
                every[y] = trip_min(t[y], D[y])
                emit(OUTPUTS, [every[0], every[1], most(2, every, rows, db, K)])
                t = _pick(np.where(t[y] >= 1, _dram_key(p, hw, OUTPUTS, t), np.inf), t)
            t[y] = trip_min(t[y], D[y])
            k_most = most(2, t, rows, db, K)
            if db and not widest:  # every K sliver length (more steps hide more; fewer partial-sum passes)
                emit(OUTPUTS, [t[0], t[1], trip_min(np.minimum(lists[2], k_most), K)])
            for split in (1, 2, 4):
                emit(OUTPUTS, [t[0], t[1], trip_min(np.ceil(K / (split * np.ceil(K / np.maximum(k_most, 1)))), K)
                               if split > 1 else k_most])
            t[2] = k_side
            t[y] = trip_min(most(y, t, rows, db, D[y]), D[y])
            emit(OUTPUTS, t)
        for fam, res, srm in ((WEIGHTS, 1, 0), (ACTIVATIONS, 0, 1)):
            # a K x Nt weight (Mt x K activation) block as wide (tall) as fits beside a one-row
            # (column) sliver and partial-sum tile, or K cut at every trip count (partial sums to
            # DRAM, where allowed) with the block as wide as fits; then the block cut to the least
            # with its trip count, or as wide as fits beside a sliver one array side long; the
            # sliver as long as fits; the partial-sum tile the whole block wide (tall), or as
            # wide as fits beside the rest
            ps = [None, None]
            ps[res] = one
            for k in (K, lists[2]):
                t = [None, None, k]
                t[srm] = one
                t[res] = most(res, t, rows, db, D[res], ps)
                if k is not K:
                    t = _pick(np.where(t[res] >= 1, _dram_key(p, hw, fam, t), np.inf), t)
                    t[2] = trip_min(t[2], K)
                t[res] = trip_min(t[res], D[res])
                ok = dram_spill | (t[2] >= K)
                wide = list(t)
                wide[srm] = side[srm]
                wide[res] = trip_min(most(res, wide, rows, db, D[res], ps), D[res])
                half = list(t)  # the block at twice and four times its trips: room for the sliver
                half[res] = trip_min(np.ceil(D[res] / (2 * np.ceil(D[res] / np.maximum(t[res], 1)))), D[res])
                quarter = list(t)
                quarter[res] = trip_min(np.ceil(D[res] / (4 * np.ceil(D[res] / np.maximum(t[res], 1)))), D[res])
                for u in (t, wide, half, quarter):
                    g = list(u)  # the partial-sum tile the whole block wide (tall)
                    g[srm] = most(srm, u, rows, db, D[srm], [None, None])
                    emit(fam, g, ok)
                    longest = most(srm, u, rows, db, D[srm], ps)
                    slivers = [longest, np.minimum(side[srm], longest), np.minimum(one, longest)]
                    if db and u is t and k is K:  # double-buffered, K whole: every sliver length
                        slivers.append(trip_min(np.minimum(lists[srm], longest), D[srm]))
                    for i, sliver in enumerate(slivers):  # the partial-sum tile as wide (tall) as fits
                        g = list(u)
                        g[srm] = sliver
                        s_res = most_sub(g, g[srm], rows, db, g[res])
                        # or no taller than a fold's stream (os: no reload outlasts it), or cut
                        # to a multiple of the array side it spans (the other tiles uncut)
                        short = np.where(hw.dataflow == OS, np.maximum(np.floor(K / np.ceil(K / g[2])), 1), one)
                        across = sub_side[res]  # inf where the tile is streamed, not spatial
                        step = np.where(np.isfinite(across), across, 1.0)
                        cut = np.where(s_res >= across, np.floor(s_res / step) * step, s_res)
                        for sub in (s_res, np.minimum(s_res, short), cut) if i in (0, 2) else (s_res,):
                            emit(fam, g, ok, (g[0], sub) if res == 1 else (sub, g[1]))
        for fam in (OUTPUTS, WEIGHTS, ACTIVATIONS):  # one array-sized tile: many steps
            emit(fam, [side[0], side[1], k_side if fam == OUTPUTS else np.where(dram_spill, k_side, K)])
    return out



def _problems():
    """(p, hw) the pipeline gives the mapper: networks on shipped designs and with partial sums
    allowed in the activation buffer (four variants), and a random grid of design points."""
    from asicsim._src.hw.cost import bytes_per_element, resolve_formats
    rng = np.random.default_rng(7)
    ops = [sim.Gemm(*(int(x) for x in rng.integers(1, 3000, 3))) for _ in range(6)]
    ops += [sim.Conv(14, 14, 96, 200, 3, 3, padding=1), sim.Gemm(1, 1000, 2048)]
    edge = sim.hw.load_design("edge_int8_32x32")
    spill = dataclasses.replace(edge, buffers=tuple(dataclasses.replace(b, psum_spill="ifmap" in b.holds)
                                                   for b in edge.buffers))
    seen = []

    def spy(p, hw, objective, score_energy=None, energy_key=None):  # nothing kept: searched each time
        seen.append((p, hw))
        return mapper.best_counts(p, hw, objective, score_energy)

    best = pipeline.best_counts
    try:
        pipeline.best_counts = spy
        for d in (edge, spill):
            cost_many(ops, d)
        fmts = resolve_formats(spill, None)
        pipeline.price(ops, spill, fmts, bytes_per_element(fmts), rows=np.array([[7.0], [64.0]]),
                       cols=np.array([[16.0, 128.0]]), dataflow=np.array([[0], [2]]))
    finally:
        pipeline.best_counts = best
    return seen


def test_candidates_along_a_variant_axis_are_those_one_variant_at_a_time():
    """mapper_candidates.candidates generates every (double buffering, partial-sum home) in one pass and
    splits them: the same blocks, in the same order, with the same values (bits) as one pass each
    (and then the same fold twins of them). The array's own level only: the tiles cut to the
    sides of its smaller levels follow (mapper_folds.level_sides), generated by the same emits;
    they are held by test_mapper_search.py::test_larger_array_never_worse, not here. Without the
    levels (mapper_levels.OWN_ONLY: the objectives that list none), exactly these and their fold
    twins on the array's own fold lists."""
    for p, hw in _problems():
        with np.errstate(divide="ignore", invalid="ignore"):
            got, ref = mapper_candidates.candidates(p, hw), one_variant_at_a_time(p, hw)
            own = mapper_candidates.candidates(p, hw, mapper_levels.OWN_ONLY)  # the objectives without levels
            own_ref = ref + fold_twins(p, hw, ref, (False,))
            # then each one's fold twins (asicsim._src.hw.mapper_folds): the array's list, then with
            # the levels' sides, each list searched on its own (mapper_candidates.candidates shares the folds'
            # cycles between both)
            ref = ref + fold_twins(p, hw, ref, (False,)) + fold_twins(p, hw, ref, (True,))
        assert len(got) >= len(ref) and len(own) == len(own_ref)
        for g, r in [*zip(got[:len(ref)], ref, strict=True), *zip(own, own_ref, strict=True)]:
            for f in passes.FIELDS:
                a, b = np.asarray(getattr(g, f)), np.asarray(getattr(r, f))
                shape = np.broadcast_shapes(a.shape, b.shape)
                assert np.broadcast_to(a, shape).tobytes() == np.broadcast_to(b, shape).tobytes(), f
