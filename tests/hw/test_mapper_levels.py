"""The smaller array levels listed only where a proven floor says they can win
(asicsim/_src/hw/mapper_levels.py): the choice is the one of the search over every level, and the
floor holds for every candidate of a level. The reference is the same search with the pruning off
(``mapper_levels.PRUNE = False``: every level listed at every element); the floor is checked
against the model's own counts of each level's candidates (asicsim._src.hw.counts)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_mapper_search import _bypassing, model, small_design

import asicsim as sim
from asicsim._src.hw import (
    cost_many,
    gemm_sweep,
    mapper,
    mapper_cache,
    mapper_candidates,
    mapper_levels,
    pipeline,
)
from asicsim._src.hw.counts import schedule_counts
from asicsim._src.hw.mapper_folds import level_sides
from asicsim._src.hw.tiles import element_shape, valid

OBJECTIVES = mapper_levels.OBJECTIVES  # the objectives that list the smaller levels


def _design(R, C, df, caps, psum, bypass, static_w):
    d = small_design(R, C, df, caps, psum)
    d = dataclasses.replace(d, static_power_w=static_w)
    return _bypassing(d) if bypass else d


def _priced(fn, prune: bool):
    """``fn()`` with the level pruning on or off, the mapper's kept choices forgotten first (they
    are kept by content, not by the flag)."""
    old = mapper_levels.PRUNE
    mapper_levels.PRUNE = prune
    mapper_cache.clear_cache()
    try:
        return fn()
    except ValueError as e:  # nothing fits: the same either way
        return str(e)
    finally:
        mapper_levels.PRUNE = old
        mapper_cache.clear_cache()


def _figures(r):
    if isinstance(r, str):
        return r
    return [np.asarray(getattr(r, k), dtype=np.float64).tolist() for k in ("cycles", "energy_total_pj", "dram_bytes")]


@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 60), N=st.integers(1, 60), K=st.integers(1, 60), df=st.sampled_from(["os", "ws", "is"]),
       R=st.integers(1, 12), C=st.integers(1, 12), caps=st.tuples(*[st.integers(16, 900)] * 3),
       psum=st.one_of(st.none(), st.integers(16, 2000)), bypass=st.booleans(),
       static_w=st.sampled_from([0.0, 0.5]))
@example(M=25, N=22, K=18, df="ws", R=12, C=12, caps=(300, 200, 100), psum=None, bypass=True, static_w=0.5)
@example(M=1, N=60, K=60, df="ws", R=8, C=8, caps=(900, 900, 900), psum=None, bypass=False, static_w=0.0)
def test_pruned_levels_choose_as_every_level(M, N, K, df, R, C, caps, psum, bypass, static_w):
    """Every objective that lists the levels, with and without bypass, static power or none: the
    pruned search prices the GEMM exactly as the search over every level."""
    d = _design(R, C, df, caps, psum, bypass, static_w)
    op = sim.Gemm(M, N, K)
    for objective in OBJECTIVES:
        got = _figures(_priced(lambda o=objective: sim.cost(op, d, objective=o), True))
        want = _figures(_priced(lambda o=objective: sim.cost(op, d, objective=o), False))
        assert got == want, objective


@pytest.mark.parametrize("bypass", [False, True])
def test_pruned_levels_on_a_network(bypass):
    """Several GEMMs in one search (the pruned search cuts out the GEMMs that need a smaller level,
    here the memory-bound M = 1 one): every GEMM as with every level listed."""
    d = _design(8, 8, "ws", (2000, 1500, 800), None, bypass, 0.5)
    ops = [sim.Gemm(1, 100, 200), sim.Gemm(64, 48, 72), sim.Gemm(7, 33, 90), sim.Gemm(128, 16, 9),
           sim.Gemm(3, 3, 300)]
    for objective in OBJECTIVES:
        got = _priced(lambda o=objective: cost_many(ops, d, objective=o), True)
        want = _priced(lambda o=objective: cost_many(ops, d, objective=o), False)
        assert [_figures(r) for r in got] == [_figures(r) for r in want], objective


def test_pruned_levels_on_an_array_grid():
    """A sweep over array sides (no GEMM axis to cut: every element searched with the levels any
    needs): the same figures as with every level listed."""
    ops = [sim.Gemm(1, 300, 500), sim.Gemm(96, 80, 64)]
    rows = np.array([4, 8, 16])
    for objective in OBJECTIVES:
        got = _priced(lambda o=objective: gemm_sweep(ops, "edge_int8_32x32", objective=o, rows=rows), True)
        want = _priced(lambda o=objective: gemm_sweep(ops, "edge_int8_32x32", objective=o, rows=rows), False)
        for name in ("cycles", "dram_bytes"):
            assert np.array_equal(np.asarray(getattr(got, name)), np.asarray(getattr(want, name))), (objective, name)


@settings(max_examples=8, deadline=None)
@example(M=1, N=1, K=9, df="os", R=2, C=2, caps=(16, 16, 16), bypass=False)
@given(M=st.integers(1, 60), N=st.integers(1, 60), K=st.integers(1, 60), df=st.sampled_from(["os", "ws", "is"]),
       R=st.integers(2, 8), C=st.integers(2, 8), caps=st.tuples(*[st.integers(16, 900)] * 3),
       bypass=st.booleans())
def test_level_floor_below_every_candidate(M, N, K, df, R, C, caps, bypass):
    """Every valid candidate a smaller level adds (its blocks, fold twins and folds, measured
    with the model's own counts) takes at least its level's floor in busy + stall cycles."""
    p, hw, _ = model(sim.Gemm(M, N, K), _design(R, C, df, caps, None, bypass, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):  # (tiles of 0 where a candidate is left out)
        _check_floors(p, hw)


def _check_floors(p, hw):
    before = len(mapper_candidates.candidates(p, hw, 0))
    for s in level_sides(p, hw)[1:]:
        blocks = mapper_candidates.candidates(p, hw, s[5])
        floor = mapper_levels.level_floor(p, hw, s[3])
        for b in blocks[before:]:
            b = dataclasses.replace(b, family=np.maximum(b.family, 0))
            ok = valid(p, hw, b) & (np.asarray(b.family) >= 0)
            c = schedule_counts(p, hw, b)
            lat = np.broadcast_to(c.busy_cycles + c.cycles_stall, np.shape(ok))
            assert np.all(~ok | (lat >= floor)), (s[3], float(np.min(np.where(ok, lat, np.inf))), float(floor))
        before = len(blocks)


def test_merge_keeps_a_level_only_where_the_search_would(monkeypatch):
    """``with_levels``' merge on the GEMMs cut out for the levels (here 1, 3 and 4 of 5, the
    levels' search faked): a level's choice replaces the own level's where its latency is lower
    (3), or higher within the 1e-12 tie tolerance with less energy (4); not where it is lower
    within the tolerance with more energy (1), nor at the GEMMs not searched. Fails where the
    merge writes the wrong elements or compares the latency alone."""
    seen = []
    real = pipeline.best_counts
    monkeypatch.setattr(pipeline, "best_counts",
                        lambda p, hw, o, se=None, key=None: seen.append((p, hw)) or real(p, hw, o, se, key))
    ops = [sim.Gemm(1, 100, 200), sim.Gemm(64, 48, 72), sim.Gemm(7, 33, 90), sim.Gemm(128, 16, 9),
           sim.Gemm(3, 3, 300)]
    cost_many(ops, _design(8, 8, "ws", (2000, 1500, 800), None, False, 0.5), objective="latency")
    p, hw = seen[0]
    shape = element_shape(p, hw)
    assert shape == (5,)  # (and finite figures, so that the ties below are ties)
    with np.errstate(divide="ignore", invalid="ignore"):
        (score, second), best = mapper._search(p, hw, shape, "latency", None, 0)
    assert np.all(np.isfinite(score) & (score > 0) & np.isfinite(second))
    monkeypatch.setattr(mapper_levels, "needed", lambda p, hw, c, shape: np.array([0, 1, 0, 2, 1]))
    at = np.array([1, 3, 4])
    level_score = score[at] * np.array([1 - 1e-13, 0.5, 1 + 1e-13])
    level_second = second[at] + np.array([1.0, 1.0, -1.0])

    def levels_search(pg, hg, sh, objective, se, levels, smaller_only):
        assert smaller_only and levels == 2 and sh == (3,) and np.array_equal(pg.M, np.asarray(p.M)[at])
        return (level_score, level_second), [np.full(3, 777.0 + i) for i in range(len(best))]
    (s, t), fields = mapper_levels.with_levels(p, hw, shape, "latency", None, (score, second), best, levels_search)
    took = np.array([False, False, False, True, True])
    assert np.array_equal(s, np.where(took, np.r_[0, level_score[0], 0, level_score[1:]], score))
    assert np.array_equal(t, np.where(took, np.r_[0, level_second[0], 0, level_second[1:]], second))
    for i, (f, b) in enumerate(zip(fields, best, strict=True)):
        assert np.array_equal(f, np.where(took, 777.0 + i, np.broadcast_to(b, shape)))
