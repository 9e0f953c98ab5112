"""The mapper: for every GEMM on every design point, a schedule for the objective.

The space (:mod:`asicsim._src.hw.counts` prices any point of it): the three loop-order families (which
operand stays resident in SRAM while the innermost tile loop runs: the ``Mt x Nt`` output block,
a ``Kt x Nt`` weight block or an ``Mt x Kt`` activation block), any tiles ``Mt <= M``, ``Nt <= N``,
``Kt <= K`` that fit the buffers under *any* split of a shared buffer (the tiles homed in a
buffer, doubled when double-buffered, fit what the tensors kept whole there leave:
:func:`asicsim._src.hw.residency.buffer_rows`), the array's tile ``Ma x Na`` (the partial sums') inside
the resident block (the weights family works through its block ``Na`` columns at a time, the
activations family ``Ma`` rows at a time), partial sums in their buffer or the one the design
marks ``psum_spill`` or, with ``Kt < K`` outside the outputs family, to DRAM and back between K
slivers (where the outputs leave through DRAM), double buffering or not (of the tiles of the
operands ``double_buffers`` lists: :func:`asicsim._src.hw.residency.buffer_rows`), and for each tensor
kept on chip between operations, kept whole or streaming its overflow (its tiles take buffer space
as an off-chip operand's, in a share of the buffer; the rest keeps as much of the tensor as fits:
:mod:`asicsim._src.hw.residency`).

The search (:func:`asicsim._src.hw.mapper_candidates.candidates`), per buffering, partial-sum home, set of streamed kept tensors
and tile share (:data:`asicsim._src.hw.residency.TILE_SHARES`; streaming only where the kept tensors
may not leave room for the whole problem's tiles, :func:`asicsim._src.hw.residency.stream_choices`
proves it cannot win elsewhere, and no share below one that already keeps every streamed tensor):

* outputs resident: every block width and every block height (the least tile of each trip count,
  :func:`asicsim._src.hw.tiles.trip_tiles`) with the other side as long as fits beside a one-deep K
  sliver; the one of least DRAM bytes is kept (closed form, on the design's buffer axes only, so
  cheap on sweeps over array shapes), and the full-width (full-height) one; each cut to the least
  tile of its trip count, then K as long as fits (or at twice and four times its trips), or K one
  array side deep and the other side re-fitted; every block height (width) with K as long as
  fits (double-buffered, also K one deep, and the kept block with K at every trip count);
* weights (activations) resident: the block as wide (tall) as fits with K whole, or with K at
  every trip count (partial sums to DRAM; least DRAM kept), beside a one-row sliver and partial-sum
  tile; then that block, the block at twice and four times its trips, or as wide as fits beside a
  sliver one array side long; the sliver as long as fits, one array side long or one deep (and,
  double-buffered, at every trip count beside the first block with K whole); the array's tile
  the whole block, or as wide as fits beside the sliver, or no taller than a fold's stream (os:
  its reload hides) or cut to a multiple of the array side it spans;
* one array-sized tile per family; then every candidate's fold twin, folds smaller than the array
  where they save cycles (:mod:`asicsim._src.hw.mapper_folds`), and every candidate's array-aligned
  twin (:func:`asicsim._src.hw.tiles.aligned`; cut to one side, the least tile of its trip count);
* the tiles cut to an array side again at the sides of every smaller level of the array (halved,
  rounded up, to 1 x 1), after the array's own, each on that level's sides only (folds at most
  its sides; fold and array-aligned twins as an array of its sides lists them), and searched only
  at the GEMMs where a proven floor on the level's cycles says it can beat or tie the array's own
  level's choice (:mod:`asicsim._src.hw.mapper_levels`): an array twice as large lists every
  schedule the smaller one does (``mapper_folds``' docstring: larger arrays never slower). For
  ``latency`` only, the objective physics holds never worse on a larger array that needs them.

Why the lists: double-buffered, more tile steps ``s`` hide more of the transfers (``stall = X / s
+ ...``, :mod:`asicsim._src.hw.counts`) while costing bytes, folds or reloads, so a sliver shorter than
fits (more steps) or a block at more trips can be the fastest or the least energy, and which one
depends on the rates: none of the trip counts is dominated.

What is proven: the ``dram`` objective's choice moves the least DRAM bytes of the whole space.
Per family the bytes depend on the tiles only through the streamed operands' trip counts
(outputs: ``T_m`` and ``T_n``; weights: ``T_n``, and ``T_k`` when partial sums spill; activations:
``T_m`` and ``T_k``) and never grow when a tile grows; the enumerated dimension runs over every
trip count while the others take the least space any schedule can give them (a one-deep sliver,
a one-column partial-sum tile), so the least trips of the other side for each is reached. Kept
tensors streaming their overflow keep a fixed share of their buffer for each tile share, so the
same holds for each (streamed set, tile share), whose per-pass bytes the key that picks the trip
counts uses (:func:`asicsim._src.hw.mapper_candidates._dram_key`).
``tests/hw/test_mapper_search.py`` checks this against an enumerator of every tile that shares
none of this module. ``energy`` and ``latency`` are not proven optimal: on small random problems
(1-9 per dimension, arrays of 1-4 PEs a side) the same enumerator finds a better schedule in about
3 of 1,000 (case, objective) pairs, by at most 2.5 % (before issue 31's second pass: 43 in 100,
up to 1.42x); the misses cut two tile dimensions below what fits at once (listing every pair of trip
counts would cost ``O(sqrt(M) sqrt(N))`` candidates per GEMM), see the test's ``GAP``; with tensors
kept on chip the gap is larger (the test's ``KEPT_GAP``). Ties on
the objective go to a second measure (``dram`` and ``energy``: cycles; ``latency``: energy), so
the DRAM-optimal schedule keeps the array busy.

The objective (:mod:`asicsim._src.hw.objectives`) is ``balanced`` (default: the least energy among the
candidates within 5 % of the fastest one's cycles), ``energy`` (DRAM, SRAM and static energy; MAC
energy does not depend on the schedule), ``dram`` (bytes) or ``latency`` (busy and stall cycles).

The candidates are measured and one chosen per element by :mod:`asicsim._src.hw.mapper_passes`
(chunks, lean counts, ``balanced``'s kept first pass) and kept by content between calls
(:mod:`asicsim._src.hw.mapper_cache`: the candidates and the choice), which
``tests/hw/test_mapper_fast.py`` holds to the unpruned evaluation bit for bit.
"""

from __future__ import annotations

import numpy as np

from asicsim._src.hw import mapper_cache as cache
from asicsim._src.hw import mapper_levels as levels_mod
from asicsim._src.hw import mapper_passes as passes
from asicsim._src.hw import mapper_run as run
from asicsim._src.hw.counts import ArrayHardware, GemmCounts, GemmProblem, Schedule, schedule_counts
from asicsim._src.hw.mapper_candidates import candidates
from asicsim._src.hw.objectives import check_objective
from asicsim._src.hw.tiles import element_shape

#: tie-break measure of each objective
_SECOND = passes.SECOND


def _search(p: GemmProblem, hw: ArrayHardware, shape, objective: str, score_energy, levels: int | None,
            smaller_only: bool = False) -> tuple:
    """``((score, second), best fields)`` of the search over the candidates with ``levels`` smaller
    array levels (:func:`~asicsim._src.hw.mapper_candidates.candidates`; ``smaller_only``: theirs only)."""
    cands, chunks = cache.searched(p, hw, shape, lambda p, hw: candidates(p, hw, levels, smaller_only),
                                   (levels, smaller_only))
    return run.search_over(p, hw, shape, objective, score_energy, cands, chunks)


def best_counts(p: GemmProblem, hw: ArrayHardware, objective: str, score_energy=None,
                energy_key=None) -> GemmCounts:
    """The counts of the best schedule per element for ``objective`` (one of
    :data:`asicsim._src.hw.objectives.OBJECTIVES`). ``score_energy(counts) -> pJ`` prices a schedule
    for ``energy``, ``latency`` and ``balanced`` (the pricing pipeline's own rates). ``balanced``
    takes the least energy among the candidates within
    :data:`~asicsim._src.hw.objectives.BALANCED_SLACK` of the fastest one's cycles: never slower than
    ``latency``'s choice by more than the slack, never more energy. ``energy_key``: the content of
    what ``score_energy`` reads (:func:`asicsim._src.hw.pricing.schedule_energy_key`); with it the choice
    for a few elements is kept by content, and the same search again counts the kept schedule only
    (:func:`asicsim._src.hw.mapper_cache.chosen_key`)."""
    check_objective(objective)
    split = passes.by_dataflow(p, hw)
    if split is not None:  # a sweep over dataflows: each searched on its own (module docstring)
        return passes.merge_by_dataflow(hw, [(v, best_counts(p, h, objective, score_energy, energy_key))
                                             for v, h in split])
    shape = element_shape(p, hw)
    kept_key = cache.chosen_key(p, hw, shape, objective, score_energy, energy_key)
    hit = cache.chosen(kept_key)
    if hit is not None:
        return schedule_counts(p, hw, hit)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the array's own level first; the smaller levels where a proven floor says they can win
        # (mapper_levels)
        listed = objective in levels_mod.OBJECTIVES
        first = (0 if levels_mod.PRUNE else None) if listed else levels_mod.OWN_ONLY
        score, best = _search(p, hw, shape, objective, score_energy, first)
        if listed and levels_mod.PRUNE and not hw.whole_tiles:
            score, best = levels_mod.with_levels(p, hw, shape, objective, score_energy, score, best, _search)
    score = score[0]
    if not np.all(np.isfinite(score)):
        raise ValueError("no schedule fits the buffers (a buffer smaller than one element of each operand it must "
                         "hold, or, with array.whole_tiles, than one rows x cols tile of the stationary one)")
    chosen = Schedule(best[0], best[1], best[2], best[3], best[4] > 0, best[5] > 0, *best[6:])
    cache.remember(kept_key, chosen)
    return schedule_counts(p, hw, chosen)
