"""The mapper's candidate schedules: the list :mod:`asicsim._src.hw.mapper`'s docstring states,
generated for every element of a problem at once.

:func:`candidates` walks the array's own level and then each smaller level
(:func:`asicsim._src.hw.mapper_folds.level_sides`), and per level each kept-tensor choice
(:func:`_kept_choices`); for each it emits the outputs family's blocks (:func:`_outputs`), the
weights and activations families' (:func:`_stationary`) and one array-sized tile per family.
A smaller level emits only the tiles its sides change (``dep``); what does not depend on the
array's sides is computed once per kept choice and shared (:meth:`_Space.once`).
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np

from asicsim._src.hw import mapper_folds as folds
from asicsim._src.hw import mapper_levels as levels_mod
from asicsim._src.hw.counts import (
    ACTIVATIONS,
    IS,
    OS,
    OUTPUTS,
    WEIGHTS,
    WS,
    ArrayHardware,
    GemmProblem,
    Schedule,
)
from asicsim._src.hw.mapper_shapes import variant_of, variant_rows
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


def _more_trips(tile, dim, split: int):
    """The least tile with ``split`` times the trip count of ``tile`` over ``dim``."""
    return trip_min(np.ceil(dim / (split * np.ceil(dim / np.maximum(tile, 1)))), dim)


def _kept_choices(p: GemmProblem, hw: ArrayHardware) -> list:
    """``(streamed set, tile share, where it can win)`` per choice: kept tensors whole, or (where
    they may not leave room for the tiles) some of them streaming their overflow, the tiles fitted
    to the whole budget or a share of it (what is left keeps more)."""
    masks, tight = stream_choices(p, hw)
    kept = [(0.0, 1.0, True)]
    for mask in masks[1:]:
        full = np.False_  # a share below one that already keeps every streamed tensor cannot win
        for share in TILE_SHARES:
            can = tight & ~full
            if np.any(can):
                kept.append((mask, share, can))
            full = full | keeps_all(p, hw, mask, share)
    return kept


class _Space:
    """What every block of one problem reads: its dimensions along a leading list axis, the
    (double buffering, partial-sum home) variants along a leading variant axis, and a memo of what
    the array's own level computed that does not depend on the array's sides."""

    def __init__(self, p: GemmProblem, hw: ArrayHardware):
        self.p, self.hw = p, hw
        self.M, self.N, self.K = (np.asarray(x, dtype=np.float64) for x in (p.M, p.N, p.K))
        self.D = (self.M, self.N, self.K)
        self.ndim = len(element_shape(p, hw))
        self.lists = [trip_tiles(x, self.ndim)[:, None] for x in self.D]  # (tiles, variant, *elements)
        self.one = np.ones_like(self.M)
        self.dram_spill = np.asarray(p.off_chip["ofmap"], dtype=bool)
        homes = (False, True) if hw.layout.psum_spill is not None else (False,)
        self.variants = [(db, spill) for db in (False, True) for spill in homes]
        self.lead = (len(self.variants),) + (1,) * self.ndim
        self.dbs = np.array([db for db, _ in self.variants]).reshape(self.lead)
        self.sp = np.array([spill for _, spill in self.variants]).reshape(self.lead)
        self.memo: dict = {}

    def once(self, key, fn):
        if key not in self.memo:
            self.memo[key] = fn()
        return self.memo[key]

    def rows(self, mask, share):
        return variant_rows([buffer_rows(self.p, self.hw, spill, mask, share, db) for db, spill in self.variants],
                            self.lead)


def _emitter(g: _Space, out: list, level: int, mask, share, can):
    """``emit(fam, tiles, ok, sub, only_db, dep)``: append one block to ``out`` (a smaller level:
    only the tiles its sides change, ``dep``)."""
    def emit(fam, t, ok=True, sub=None, only_db=False, dep=False):
        if level and not dep:
            return
        Ma, Na = (t[0], t[1]) if sub is None else sub
        out.append((Schedule(np.where(np.logical_and(ok, can), fam, -1), *t, g.dbs, g.sp, Ma, Na,
                             np.asarray(mask), np.asarray(share)), only_db))
    return emit


def _outputs(g: _Space, emit, level: int, k_side, i_kept: int, rows, mask, share) -> None:
    """Outputs resident: every block width (height), the other side as tall (wide) as fits beside
    a K sliver one deep (array-independent: cheap on design sweeps), the one of least DRAM bytes
    or the widest (tallest), cut to the least with its trip count; then K as long as fits (or at
    twice and four times its trips), or K one array side deep and the other side as tall (wide)
    as then fits."""
    D, K, dbs, one = g.D, g.K, g.dbs, g.one
    for x, widest in itertools.product((0, 1), (False, True)):
        y = 1 - x

        def outputs_block(x=x, y=y, widest=widest):
            every = [None, None, one]  # every block width (height), the other side as fits
            every[x] = D[x] if widest else g.lists[x]
            every[y] = most(y, every, rows, dbs, D[y])
            t = every if widest else _pick(np.where(every[y] >= 1, _dram_key(g.p, g.hw, OUTPUTS, every, mask, share),
                                                    np.inf), every)
            t = list(t)
            t[y] = trip_min(t[y], D[y])
            return every, t
        every, t = g.once(("outputs", i_kept, x, widest), outputs_block)
        t = list(t)  # (a smaller level: the block the array's own level picked)
        if not level:
            if not widest:
                # every block height (width) with K as long as fits; double-buffered, also K one
                # deep (the most steps)
                every = [every[0], every[1], one]
                emit(OUTPUTS, [every[0], every[1], np.where(every[y] >= 1, one, 0.0)], only_db=True)
                every[y] = trip_min(every[y], D[y])
                emit(OUTPUTS, [every[0], every[1], most(2, every, rows, dbs, K)])
            k_most = most(2, t, rows, dbs, K)
            if not widest:  # double-buffered: every K sliver length (more steps hide more; fewer partial-sum passes)
                emit(OUTPUTS, [t[0], t[1], trip_min(np.minimum(g.lists[2], k_most), K)], only_db=True)
            for split in (1, 2, 4):
                emit(OUTPUTS, [t[0], t[1], _more_trips(k_most, K, split) if split > 1 else k_most])
        t[2] = k_side
        t[y] = trip_min(most(y, t, rows, dbs, D[y]), D[y])
        emit(OUTPUTS, t, dep=True)


def _stationary(g: _Space, emit, level: int, side, sub_side, i_kept: int, rows, mask, share) -> None:
    """Weights (activations) resident: a K x Nt weight (Mt x K activation) block as wide (tall) as
    fits beside a one-row (column) sliver and partial-sum tile, or K cut at every trip count
    (partial sums to DRAM, where allowed) with the block as wide as fits; then the block cut to the
    least with its trip count, or as wide as fits beside a sliver one array side long; the sliver
    as long as fits; the partial-sum tile the whole block wide (tall), or as wide as fits beside
    the rest."""
    D, K, dbs, one, hw = g.D, g.K, g.dbs, g.one, g.hw
    for fam, res, srm in ((WEIGHTS, 1, 0), (ACTIVATIONS, 0, 1)):
        ps = [None, None]
        ps[res] = one
        for k in (K, g.lists[2]):
            def block(k=k, ps=ps, fam=fam, res=res, srm=srm):
                t = [None, None, k]
                t[srm] = one
                t[res] = most(res, t, rows, dbs, D[res], ps)
                if k is not K:
                    t = _pick(np.where(t[res] >= 1, _dram_key(g.p, hw, fam, t, mask, share), np.inf), t)
                    t[2] = trip_min(t[2], K)
                t[res] = trip_min(t[res], D[res])
                return t
            t = g.once(("block", i_kept, fam, k is K), block)
            ok = g.dram_spill | (t[2] >= K)
            wide = list(t)
            wide[srm] = side[srm]
            wide[res] = trip_min(most(res, wide, rows, dbs, D[res], ps), D[res])
            half = list(t)  # the block at twice and four times its trips: room for the sliver
            half[res] = _more_trips(t[res], D[res], 2)
            quarter = list(t)
            quarter[res] = _more_trips(t[res], D[res], 4)
            for ui, u in enumerate((t, wide, half, quarter)):
                fixed = ui != 1  # a block that does not depend on the array's sides
                if not (level and fixed):  # the partial-sum tile the whole block wide (tall)
                    v = list(u)
                    v[srm] = most(srm, u, rows, dbs, D[srm], [None, None])
                    emit(fam, v, ok, dep=u is wide)
                longest = (g.once(("longest", i_kept, fam, k is K, ui), lambda u=u, s=srm, q=ps: most(s, u, rows, dbs, D[s], q))
                           if fixed else most(srm, u, rows, dbs, D[srm], ps))
                slivers = [longest, np.minimum(side[srm], longest), np.minimum(one, longest)]
                if u is t and k is K and not level:  # double-buffered, K whole: every sliver length
                    slivers.append(trip_min(np.minimum(g.lists[srm], longest), D[srm]))
                for i, sliver in enumerate(slivers):  # the partial-sum tile as wide (tall) as fits
                    only = i == 3
                    v = list(u)
                    v[srm] = sliver
                    s_res = (g.once(("sub", i_kept, fam, k is K, ui, i), lambda v=v, s=srm, e=res: most_sub(v, v[s], rows, dbs, v[e]))
                             if fixed and i != 1 else most_sub(v, v[srm], rows, dbs, v[res]))
                    # or no taller than a fold's stream (os: no reload outlasts it), or cut
                    # to a multiple of the array side it spans (the other tiles uncut)
                    short = np.where(hw.dataflow == OS, np.maximum(np.floor(K / np.ceil(K / v[2])), 1), one)
                    across = sub_side[res]  # inf where the tile is streamed, not spatial
                    step = np.where(np.isfinite(across), across, 1.0)
                    cut = np.where(s_res >= across, np.floor(s_res / step) * step, s_res)
                    for j, sub in enumerate((s_res, np.minimum(s_res, short), cut) if i in (0, 2) else (s_res,)):
                        emit(fam, v, ok, (v[0], sub) if res == 1 else (sub, v[1]), only_db=only,
                             dep=u is wide or i == 1 or j == 2)


def candidates(p: GemmProblem, hw: ArrayHardware, levels: int | None = None,
               smaller_only: bool = False) -> list[Schedule]:
    """The searched schedules (:mod:`asicsim._src.hw.mapper`'s docstring), before their
    array-aligned twins: per buffering and partial-sum home (double buffering, then the home, each
    False first), the same blocks in the same order. Every buffering and home is generated in one
    pass along a leading element axis of its own (elementwise, so the same values as one pass each)
    and then split (:mod:`asicsim._src.hw.mapper_shapes`). ``levels``: the smaller array levels
    listed are those halved at most that many times
    (:func:`asicsim._src.hw.mapper_folds.level_sides`; None: all;
    :data:`asicsim._src.hw.mapper_levels.OWN_ONLY`: none, nor their sides among the folds).
    ``smaller_only``: the smaller levels' candidates only, without the array's own level's (its
    candidates do not depend on ``levels``, so a search listing them already has their choice)."""
    g = _Space(p, hw)
    kept = _kept_choices(p, hw)
    # per kept choice: (block along the variant axis, emitted for double buffering only); the
    # array's own level, then the tiles that depend on the array's sides at the smaller levels
    blocks, smaller, rows_of = [], {}, {}
    # (whole R x C tiles: a fold moves the array's tile, so no level runs as a smaller array)
    own_only = levels == levels_mod.OWN_ONLY
    top = 0 if hw.whole_tiles or own_only else np.inf if levels is None else levels
    sides_of = folds.level_sides(p, hw, top)
    for level, (side, k_side, sub_side, _, new, _), (i_kept, (mask, share, can)) in (
            (v, sides, k) for v, sides in enumerate(sides_of) for k in enumerate(kept)):
        if smaller_only and not level:  # (what the smaller levels take from it is computed when asked: once)
            continue
        out: list = []
        (smaller.setdefault(level, []) if level else blocks).append(out)
        if i_kept not in rows_of:
            rows_of[i_kept] = g.rows(mask, share)
        rows = rows_of[i_kept]
        # (a level that cuts nothing new at an element: none there)
        emit = _emitter(g, out, level, mask, share, np.logical_and(can, new))
        _outputs(g, emit, level, k_side, i_kept, rows, mask, share)
        _stationary(g, emit, level, side, sub_side, i_kept, rows, mask, share)
        for fam in (OUTPUTS, WEIGHTS, ACTIVATIONS):  # one array-sized tile: many steps
            emit(fam, [side[0], side[1], k_side if fam == OUTPUTS else np.where(g.dram_spill, k_side, g.K)], dep=True)
    # in the order of (buffering, home, kept choice), the same blocks each
    out, *more = ([variant_of(b, v, g.ndim) for v, (db, _) in enumerate(g.variants) for out in bs
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
