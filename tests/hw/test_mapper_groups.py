"""A network's one chunk measured in groups of its GEMMs (asicsim/_src/hw/mapper_groups.py) prices
every operation bit for bit as the one chunk measured whole and as the unpruned evaluation of
tests/hw/test_mapper_fast.py (every candidate and twin in one list, full counts, no cache: an
independent reference written from the candidate list and the selection rule); the groups are
the least-cost cut of the GEMMs sorted by their distinct candidates (brute force over every cut)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_mapper_fast import unpruned_best_counts

import asicsim as sim
import asicsim._src.hw.mapper_cache as cache
import asicsim._src.hw.mapper_groups as groups
import asicsim._src.hw.mapper_levels as mapper_levels
import asicsim._src.hw.pipeline as pipeline
from asicsim._src.hw import cost_many
from asicsim._src.hw.objectives import OBJECTIVES

# GEMMs of very different sizes (few distinct candidates for the small ones, many for the large)
OPS = [sim.Gemm(1, 1000, 2048), sim.Gemm(7, 64, 48), sim.Conv(14, 14, 32, 48, 3, 3, padding=1),
       sim.Gemm(197, 768, 3072), sim.Conv(56, 56, 64, 64, 1, 1), sim.Gemm(3000, 40, 900)]


def _bits(price) -> dict:
    return {k: (np.asarray(v).dtype.str, np.asarray(v).shape, repr(np.asarray(v).tolist()))
            for k, v in price.arrays().items()}


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("design", ["edge_int8_32x32", "tpu_v1"])
def test_a_network_measured_in_groups_is_priced_as_one_chunk_and_unpruned(monkeypatch, objective, design):
    """Groups forced (no cost per group: as many as the GEMMs' distinct counts allow) and checked
    to be used (at least two); every array of the price equal bit for bit to the one chunk
    measured whole and to the unpruned evaluation. Fails where a group's column is cut before
    its last distinct candidate (a lost candidate moves the choice) or a group's energy is not
    cut with it (the shapes no longer broadcast)."""
    monkeypatch.setattr(groups, "GROUP_PAIRS", 0)
    used, measured = [], []
    real, measure = groups.groups, groups.passes.measures
    monkeypatch.setattr(groups, "groups", lambda f: used.append(real(f)) or used[-1])
    monkeypatch.setattr(groups.passes, "measures", lambda p, hw, c, se: measured.append(c) or measure(p, hw, c, se))
    cache.clear_cache()
    grouped = cost_many(OPS, design, objective=objective)
    # the array's own level's search, then (latency) the smaller levels' candidates at the GEMMs
    # where they can win (asicsim/_src/hw/mapper_levels.py), each in its groups
    assert used and len(used[0]) >= 2 and len(measured) == sum(len(u) for u in used)
    # each GEMM's column in its group holds every distinct candidate of its column in the one chunk
    own = (0 if objective in mapper_levels.OBJECTIVES else mapper_levels.OWN_ONLY, False)
    [(_, [chunk])] = [v for k, v in cache._CACHE.items() if k[1] == own]
    for g, c in zip(used[0], measured[:len(used[0])], strict=True):
        for j, e in enumerate(g):
            def rows(x, col):
                return {tuple(np.asarray(getattr(x, f))[i, col].item() for f in groups.FIELDS)
                        for i in range(np.shape(x.family)[0])}
            assert rows(c, j) == rows(chunk, e)
    monkeypatch.setattr(groups, "ENABLED", False)
    cache.clear_cache()
    whole = cost_many(OPS, design, objective=objective)
    assert _bits(grouped.price) == _bits(whole.price)
    monkeypatch.setattr(pipeline, "best_counts", unpruned_best_counts)
    ref = cost_many(OPS, design, objective=objective)
    assert _bits(grouped.price) == _bits(ref.price)
    assert repr(grouped) == repr(ref)


@pytest.mark.parametrize("seed", range(20))
def test_groups_are_the_least_cost_cut(seed):
    """The GEMMs sorted by their distinct candidates, cut into contiguous groups: pairs measured
    (each group's most distinct candidates times its GEMMs) plus GROUP_PAIRS per group, the least
    over every cut (brute force); every GEMM in exactly one group."""
    rng = np.random.default_rng(seed)
    firsts = rng.integers(1, 3000, int(rng.integers(1, 9)))
    got = groups.groups(firsts)
    assert sorted(np.concatenate(got).tolist()) == list(range(firsts.size))

    def cost(parts):
        return sum(groups.GROUP_PAIRS + firsts[g].max() * g.size for g in parts)

    f = np.argsort(firsts, kind="stable")
    best = min(cost([f[a:b] for a, b in itertools.pairwise((0, *cuts, f.size))])
               for r in range(f.size) for cuts in itertools.combinations(range(1, f.size), r))
    assert cost(got) == best
