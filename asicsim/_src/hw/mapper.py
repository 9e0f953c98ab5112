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

The search (:func:`candidates`), per buffering, partial-sum home, set of streamed kept tensors
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
  twin (:func:`asicsim._src.hw.tiles.aligned`);
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
counts uses (:func:`_dram_key`).
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

import itertools
from types import SimpleNamespace

import numpy as np

from asicsim._src.hw import mapper_cache as cache
from asicsim._src.hw import mapper_folds as folds
from asicsim._src.hw import mapper_levels as levels_mod
from asicsim._src.hw import mapper_passes as passes
from asicsim._src.hw import mapper_run as run
from asicsim._src.hw.counts import (
    ACTIVATIONS,
    IS,
    OS,
    OUTPUTS,
    WEIGHTS,
    WS,
    ArrayHardware,
    GemmCounts,
    GemmProblem,
    Schedule,
    schedule_counts,
)
from asicsim._src.hw.mapper_shapes import variant_of, variant_rows
from asicsim._src.hw.objectives import check_objective
from asicsim._src.hw.residency import TILE_SHARES, keeps_all, resident_bytes, stream_choices
from asicsim._src.hw.tiles import (
    buffer_rows,
    element_shape,
    most,
    most_sub,
    trip_min,
    trip_tiles,
)
from asicsim._src.hw.whole_tiles import whole_tile_scales

#: tie-break measure of each objective
_SECOND = passes.SECOND


def _dram_key(p: GemmProblem, hw: ArrayHardware, fam: int, t: list, mask: float = 0.0, share: float = 1.0):
    """The DRAM bytes per repetition of family ``fam`` with tiles ``t`` that depend on the tiles
    (:mod:`asicsim._src.hw.counts`: the streamed operands times their trips, partial sums spilled;
    kept tensors as the streamed set ``mask`` and tile share ``share`` keep them)."""
    M, N, K = p.M, p.N, p.K
    Tm, Tn, Tk = np.ceil(M / t[0]), np.ceil(N / t[1]), np.ceil(K / t[2])
    fetches = {"ifmap": Tn if fam != ACTIVATIONS else 1.0, "filter": Tm if fam != WEIGHTS else 1.0, "ofmap": 1.0}
    kept = resident_bytes(p, hw, SimpleNamespace(streamed=mask, tile_share=share), fetches)

    # the stationary operand in whole array-sized tiles (asicsim._src.hw.whole_tiles), the block as the array's tile
    pad_a, pad_b = whole_tile_scales(hw.whole_tiles, hw.dataflow == WS, hw.dataflow == IS, hw.rows, hw.cols,
                                     M, N, K, t[0], t[1], t[2])

    def moved(op, S, pad=1.0):  # as asicsim._src.hw.counts.schedule_counts
        return S * pad if kept is None else np.where(p.off_chip[op], S * pad, S - kept[op])

    wa, wb = moved("ifmap", p.a_footprint, pad_a), moved("filter", N * K * p.b_bytes, pad_b)
    if fam == OUTPUTS:
        return wa * Tn + wb * Tm
    spilled = 2 * M * N * p.acc_bytes * (Tk - 1)
    return (wa * Tn if fam == WEIGHTS else wb * Tm) + spilled


def _pick(key, t: list) -> list:
    """The tiles of the least ``key`` along the leading (list) axis (first on ties)."""
    pick = np.argmin(np.where(np.isfinite(key), key, np.inf), axis=0)[None]
    return [np.take_along_axis(np.broadcast_to(x, key.shape), pick, 0)[0] for x in t]


def candidates(p: GemmProblem, hw: ArrayHardware, levels: int | None = None,
               smaller_only: bool = False) -> list[Schedule]:
    """The searched schedules (module docstring), before their array-aligned twins: per buffering
    and partial-sum home (double buffering, then the home, each False first), the same blocks in
    the same order. Every buffering and home is generated in one pass along a leading element axis
    of its own (elementwise, so the same values as one pass each) and then split
    (:mod:`asicsim._src.hw.mapper_shapes`). ``levels``: the smaller array levels listed are those
    halved at most that many times (:func:`asicsim._src.hw.mapper_folds.level_sides`; None: all;
    :data:`asicsim._src.hw.mapper_levels.OWN_ONLY`: none, nor their sides among the folds).
    ``smaller_only``: the smaller levels' candidates only, without the array's own level's (its
    candidates do not depend on ``levels``, so a search listing them already has their choice)."""
    M, N, K = (np.asarray(x, dtype=np.float64) for x in (p.M, p.N, p.K))
    D = (M, N, K)
    ndim = len(element_shape(p, hw))
    lists = [trip_tiles(x, ndim)[:, None] for x in D]  # (tiles, variant, *elements)
    one = np.ones_like(M)
    dram_spill = np.asarray(p.off_chip["ofmap"], dtype=bool)
    homes = (False, True) if hw.layout.psum_spill is not None else (False,)
    variants = [(db, spill) for db in (False, True) for spill in homes]
    lead = (len(variants),) + (1,) * ndim
    dbs = np.array([db for db, _ in variants]).reshape(lead)
    sp = np.array([spill for _, spill in variants]).reshape(lead)
    # kept tensors whole, or (where they may not leave room for the tiles) some of them streaming
    # their overflow, the tiles fitted to the whole budget or a share of it (what is left keeps more)
    masks, tight = stream_choices(p, hw)
    kept = [(0.0, 1.0, True)]  # (streamed set, tile share, where it can win)
    for mask in masks[1:]:
        full = np.False_  # a share below one that already keeps every streamed tensor cannot win
        for share in TILE_SHARES:
            can = tight & ~full
            if np.any(can):
                kept.append((mask, share, can))
            full = full | keeps_all(p, hw, mask, share)
    # per kept choice: (block along the variant axis, emitted for double buffering only); the
    # array's own level, then the tiles that depend on the array's sides at the smaller levels
    blocks, smaller, rows_of = [], {}, {}
    memo: dict = {}  # what the array's own level computed that does not depend on the array's sides

    def once(key, fn):
        if key not in memo:
            memo[key] = fn()
        return memo[key]
    # (whole R x C tiles: a fold moves the array's tile, so no level runs as a smaller array)
    own_only = levels == levels_mod.OWN_ONLY
    top = 0 if hw.whole_tiles or own_only else np.inf if levels is None else levels
    sides_of = folds.level_sides(p, hw, top)
    for level, (side, k_side, sub_side, _, new, _), (i_kept, (mask, share, can)) in (
            (v, sides, k) for v, sides in enumerate(sides_of) for k in enumerate(kept)):
        if smaller_only and not level:  # (what the smaller levels take from it is computed when asked: once)
            continue
        can = np.logical_and(can, new)  # (a level that cuts nothing new at an element: none there)
        out: list = []
        (smaller.setdefault(level, []) if level else blocks).append(out)
        if i_kept not in rows_of:
            rows_of[i_kept] = variant_rows([buffer_rows(p, hw, spill, mask, share, db) for db, spill in variants], lead)
        rows = rows_of[i_kept]

        def emit(fam, t, ok=True, sub=None, only_db=False, dep=False, out=out, mask=mask, share=share, can=can,
                 level=level):
            if level and not dep:  # a smaller level: only the tiles its sides change
                return
            Ma, Na = (t[0], t[1]) if sub is None else sub
            out.append((Schedule(np.where(np.logical_and(ok, can), fam, -1), *t, dbs, sp, Ma, Na,
                                 np.asarray(mask), np.asarray(share)), only_db))

        for x, widest in itertools.product((0, 1), (False, True)):
            # outputs resident: every block width (height), the other side as tall (wide) as fits
            # beside a K sliver one deep (array-independent: cheap on design sweeps), the one of
            # least DRAM bytes or the widest (tallest), cut to the least with its trip count; then
            # K as long as fits (or at twice and four times its trips), or K one array side deep
            # and the other side as tall (wide) as then fits
            y = 1 - x

            def outputs_block(x=x, y=y, widest=widest, rows=rows, mask=mask, share=share):
                every = [None, None, one]  # every block width (height), the other side as fits
                every[x] = D[x] if widest else lists[x]
                every[y] = most(y, every, rows, dbs, D[y])
                t = every if widest else _pick(np.where(every[y] >= 1, _dram_key(p, hw, OUTPUTS, every, mask, share),
                                                        np.inf), every)
                t = list(t)
                t[y] = trip_min(t[y], D[y])
                return every, t
            every, t = once(("outputs", i_kept, x, widest), outputs_block)
            t = list(t)  # (a smaller level: the block the array's own level picked)
            if not level:
                if not widest:
                    # every block height (width) with K as long as fits; double-buffered, also K one
                    # deep (the most steps)
                    every = [every[0], every[1], one]
                    # double-buffered only
                    emit(OUTPUTS, [every[0], every[1], np.where(every[y] >= 1, one, 0.0)], only_db=True)
                    every[y] = trip_min(every[y], D[y])
                    emit(OUTPUTS, [every[0], every[1], most(2, every, rows, dbs, K)])
                k_most = most(2, t, rows, dbs, K)
                if not widest:  # double-buffered: every K sliver length (more steps hide more; fewer partial-sum passes)
                    emit(OUTPUTS, [t[0], t[1], trip_min(np.minimum(lists[2], k_most), K)], only_db=True)
                for split in (1, 2, 4):
                    emit(OUTPUTS, [t[0], t[1], trip_min(np.ceil(K / (split * np.ceil(K / np.maximum(k_most, 1)))), K)
                                   if split > 1 else k_most])
            t[2] = k_side
            t[y] = trip_min(most(y, t, rows, dbs, D[y]), D[y])
            emit(OUTPUTS, t, dep=True)
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
                def block(k=k, ps=ps, fam=fam, res=res, srm=srm, rows=rows, mask=mask, share=share):
                    t = [None, None, k]
                    t[srm] = one
                    t[res] = most(res, t, rows, dbs, D[res], ps)
                    if k is not K:
                        t = _pick(np.where(t[res] >= 1, _dram_key(p, hw, fam, t, mask, share), np.inf), t)
                        t[2] = trip_min(t[2], K)
                    t[res] = trip_min(t[res], D[res])
                    return t
                t = once(("block", i_kept, fam, k is K), block)
                ok = dram_spill | (t[2] >= K)
                wide = list(t)
                wide[srm] = side[srm]
                wide[res] = trip_min(most(res, wide, rows, dbs, D[res], ps), D[res])
                half = list(t)  # the block at twice and four times its trips: room for the sliver
                half[res] = trip_min(np.ceil(D[res] / (2 * np.ceil(D[res] / np.maximum(t[res], 1)))), D[res])
                quarter = list(t)
                quarter[res] = trip_min(np.ceil(D[res] / (4 * np.ceil(D[res] / np.maximum(t[res], 1)))), D[res])
                for ui, u in enumerate((t, wide, half, quarter)):
                    fixed = ui != 1  # a block that does not depend on the array's sides
                    if not (level and fixed):  # the partial-sum tile the whole block wide (tall)
                        g = list(u)
                        g[srm] = most(srm, u, rows, dbs, D[srm], [None, None])
                        emit(fam, g, ok, dep=u is wide)
                    longest = (once(("longest", i_kept, fam, k is K, ui), lambda u=u, s=srm, r=rows, q=ps: most(s, u, r, dbs, D[s], q))
                               if fixed else most(srm, u, rows, dbs, D[srm], ps))
                    slivers = [longest, np.minimum(side[srm], longest), np.minimum(one, longest)]
                    if u is t and k is K and not level:  # double-buffered, K whole: every sliver length
                        slivers.append(trip_min(np.minimum(lists[srm], longest), D[srm]))
                    for i, sliver in enumerate(slivers):  # the partial-sum tile as wide (tall) as fits
                        only = i == 3
                        g = list(u)
                        g[srm] = sliver
                        s_res = (once(("sub", i_kept, fam, k is K, ui, i), lambda g=g, s=srm, r=rows, e=res: most_sub(g, g[s], r, dbs, g[e]))
                                 if fixed and i != 1 else most_sub(g, g[srm], rows, dbs, g[res]))
                        # or no taller than a fold's stream (os: no reload outlasts it), or cut
                        # to a multiple of the array side it spans (the other tiles uncut)
                        short = np.where(hw.dataflow == OS, np.maximum(np.floor(K / np.ceil(K / g[2])), 1), one)
                        across = sub_side[res]  # inf where the tile is streamed, not spatial
                        step = np.where(np.isfinite(across), across, 1.0)
                        cut = np.where(s_res >= across, np.floor(s_res / step) * step, s_res)
                        for j, sub in enumerate((s_res, np.minimum(s_res, short), cut) if i in (0, 2) else (s_res,)):
                            emit(fam, g, ok, (g[0], sub) if res == 1 else (sub, g[1]), only_db=only,
                                 dep=u is wide or i == 1 or j == 2)
        for fam in (OUTPUTS, WEIGHTS, ACTIVATIONS):  # one array-sized tile: many steps
            emit(fam, [side[0], side[1], k_side if fam == OUTPUTS else np.where(dram_spill, k_side, K)], dep=True)
    # in the order of (buffering, home, kept choice), the same blocks each
    out, *more = ([variant_of(b, v, ndim) for v, (db, _) in enumerate(variants) for out in bs
                   for b, only in out if db or not only] for bs in (blocks, *smaller.values()))
    # folds smaller than the array (mapper_folds); each smaller level's tiles after the array's
    # own, on that level's sides only (mapper_levels)
    # with the levels' sides among the folds, a tile's busy-least fold can be slower than the one
    # of the array's own list (the stall differs): both twins are listed, the array's first
    on_levels = [s for v, m in zip(smaller, more, strict=True) for s in levels_mod.on_level(p, hw, m, sides_of[v][3])]
    if smaller_only:
        return on_levels
    twins = folds.fold_twins(p, hw, out, (False,) if own_only else (False, True))
    return out + twins + on_levels


def _search(p: GemmProblem, hw: ArrayHardware, shape, objective: str, score_energy, levels: int | None,
            smaller_only: bool = False) -> tuple:
    """``((score, second), best fields)`` of the search over the candidates with ``levels`` smaller
    array levels (:func:`candidates`; ``smaller_only``: theirs only)."""
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
