"""The smaller array levels of the mapper's search, each on its own sides and listed only where a
proven floor says it can win (issue 31 items 2 and 4: larger arrays never slower under
``latency``; what it costs is in ``benchmarks/RESULTS.md``).

:mod:`asicsim._src.hw.mapper_folds` (its docstring) lists the tiles cut to an array side again at
every *level* of the array (sides ``R_v x C_v``: halved ``v`` times, rounded up), so a ``2R x 2C``
array lists the tiles an ``R x C`` array does. Here a level's candidates run on that level's
sides only: their folds are at most ``R_v x C_v`` (``Schedule.fold_rows``, ``fold_cols`` set to
the sides; the base candidate's fold is the level's whole array), and their fold twins are the
busy-least folds of the short lists of an ``R_v x C_v`` array (with and without its own smaller
levels' sides, as :func:`asicsim._src.hw.mapper_candidates.candidates` lists both), and the array-aligned twins of
both are cut to multiples of the level's sides (:func:`on_level`), as the search on an ``R_v x
C_v`` array lists them. With operands
bypassing unused rows and columns a fold counts on the larger array as on an array of its size
(:mod:`asicsim._src.hw.counts`: the array's sides enter only through the fold's), so each such
candidate has the counts the ``R_v x C_v`` array gives the same tile and fold (without bypass, the
larger array's one-time fill/drain on top, as before); the smaller array's own levels are the
larger one's next levels. A design moving whole ``R x C`` tiles (``array.whole_tiles``) lists no
smaller level: each fold moves the array's whole tile (its folds are the array's), so no part of
it runs as a smaller array would, and a larger array moves larger padded tiles (not held
monotone: ``tests/hw/test_mapper_search.py`` strips whole tiles there).

**Floor of a level** (:func:`level_floor`): every candidate of level ``v`` folds its array tile
into folds of at most ``R_v`` rows and ``C_v`` columns, and ``spatial_folds(dim, tile, F) >= dim
/ min(dim, F)`` (:func:`asicsim._src.hw.whole_tiles.spatial_folds`: each whole tile takes
``ceil(tile / F) >= tile / min(tile, F)`` folds, the partial last one at least one, and
``min(tile, F) <= min(dim, F)``), so its compute ``rows_f cols_f streamed / mac_rate >= M N K /
(min(row_dim, R_v) min(col_dim, C_v) mac_rate)`` (os: rows ``M``, columns ``N``; ws: ``K``, ``N``;
is: ``K``, ``M``; times the weights' density where the design skips zeros), and latency = busy +
stall ``>= reps compute`` (fill/drain, reloads and stall are non-negative). The reloads too
(where zeros are not skipped): with ``u <= R_v`` the rows a fold spans and ``s`` the cycles it
streams, compute + reloads ``= folds s / mac_rate + (folds - 1) max(u - s, 0) >= (folds - 1) u /
max(mac_rate, 1)`` (either term, for ``u`` above or below ``s``), and ``folds >= rows_f cols_f``
with ``rows_f >= row_dim / u``, so busy ``>= reps (row_dim col_dim / min(col_dim, C_v) - R_v) /
max(mac_rate, 1)``. Both never fall as the sides shrink.

**Which objectives list them** (:data:`OBJECTIVES`): ``latency`` only. The levels exist so that
a larger array at fixed buffers is never worse on an objective physics holds there
(``tests/hw/test_mapper_search.py`` ``HELD["array"]``): ``latency``, and ``dram``, whose bytes do
not depend on the array (its search over the array's own level is proven least). ``energy`` and
``balanced`` are not held: a larger array leaks more per cycle. Listing the levels for them too
cost 2.2-3.2x the cold search time for ``energy`` (the static term's floor rarely rules a level
out; ``benchmarks/RESULTS.md``), so their space stays the array's own level, with its fold lists
(:data:`OWN_ONLY`): the same candidates and choices as before the levels.

**Which levels are listed** (:func:`needed`): the array's own level is searched first; with
``L`` its choice's latency, a level ``v`` is listed only where, at some element, its floor
``f_v`` is at most ``L`` (with a margin of 1e-6 for rounding and the search's 1e-12 tie
tolerance): a candidate of latency above the choice's is never chosen.

A level not listed holds no candidate that beats the choice or ties with it, at any element, so
the choice is the one of the search over every level; :data:`PRUNE` False lists every level
(``tests/hw/test_mapper_levels.py`` compares both on random problems under ``latency``, with and
without bypass).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from asicsim._src.hw import mapper_folds as folds
from asicsim._src.hw import mapper_groups as groups
from asicsim._src.hw import mapper_passes as passes
from asicsim._src.hw.counts import (
    IS,
    OS,
    ZERO_CODES,
    ArrayHardware,
    GemmCounts,
    GemmProblem,
    Schedule,
    schedule_counts,
)
from asicsim._src.hw.mapper_bounds import ROUNDING, compute_floor
from asicsim._src.hw.tiles import aligned, element_shape

#: list a smaller level only where its floor says it can win (False: every level; the tests
#: compare both)
PRUNE = True
#: the objectives whose search lists the smaller levels (module docstring)
OBJECTIVES = ("latency",)
#: ``mapper_candidates.candidates``' ``levels`` for the other objectives: the array's own level only, its fold
#: lists without the smaller levels' sides (the space before the levels)
OWN_ONLY = -1
#: relative margin of :func:`needed` (rounding of the counts, the search's 1e-12 tie tolerance)
MARGIN = 1e-6


def _on(hw: ArrayHardware, sides) -> ArrayHardware:
    return dataclasses.replace(hw, rows=sides[0], cols=sides[1])


def on_level(p: GemmProblem, hw: ArrayHardware, blocks: list, sides) -> list:
    """Candidate ``blocks`` of the level of ``sides`` ``(R_v, C_v)`` with folds of that level's
    sides, then their fold twins on an array of those sides, then the array-aligned twins
    (:func:`asicsim._src.hw.tiles.aligned`) of both on those sides (module docstring)."""
    if not blocks:
        return blocks
    rl, cl = sides

    def capped(s: Schedule) -> Schedule:
        fr, fc = np.asarray(s.fold_rows, dtype=np.float64), np.asarray(s.fold_cols, dtype=np.float64)
        return dataclasses.replace(s, fold_rows=np.where(fr > 0, fr, rl), fold_cols=np.where(fc > 0, fc, cl))
    on, shape = _on(hw, sides), element_shape(p, hw)
    leads = [passes._lead(b, len(shape)) for b in blocks]
    if 2 * sum(leads) * max(1, int(np.prod(shape))) <= passes.STACK_ELEMENTS:  # few pairs: one block
        blocks = [passes._stack(blocks, shape, leads)]  # (the same candidates in the same order)
    # both fold twins, as mapper_candidates.candidates lists them for latency on an array of these sides
    twins = folds.fold_twins(p, on, blocks, (False, True))
    out = [capped(b) for b in blocks] + [capped(t) for t in twins]
    return out + [aligned(p, on, b) for b in out]  # and their twins aligned to the level's sides


def level_floor(p: GemmProblem, hw: ArrayHardware, sides) -> np.ndarray:
    """Cycles no candidate of the level of ``sides`` computes in less (module docstring):
    ``reps M N K / (min(row_dim, R_v) min(col_dim, C_v) mac_rate)``."""
    df = hw.dataflow
    rows, cols = np.asarray(sides[0], dtype=np.float64), np.asarray(sides[1], dtype=np.float64)
    row_dim, col_dim = np.where(df == OS, p.M, p.K), np.where(df == IS, p.M, p.N)
    scale = (rows * cols) / (np.minimum(row_dim, rows) * np.minimum(col_dim, cols))
    work = compute_floor(p, _on(hw, (rows, cols))) * scale
    if hw.zero_weights != ZERO_CODES["skip"]:  # the reloads: (folds - 1) u / max(mac_rate, 1)
        reload = (row_dim * col_dim / np.minimum(col_dim, cols) - rows) / max(float(np.max(hw.mac_rate)), 1.0)
        work = np.maximum(work, p.reps * reload)
    return work * (1.0 - ROUNDING)


def needed(p: GemmProblem, hw: ArrayHardware, c: GemmCounts, shape) -> np.ndarray:
    """Per element of ``shape``, the most halvings ``v`` of a smaller level
    (:func:`asicsim._src.hw.mapper_folds.level_sides`) that can hold a candidate beating or tying
    on ``latency`` the choice of counts ``c`` of the array's own level (module docstring; 0: none);
    every level where there is no choice."""
    lat = np.broadcast_to(np.asarray(c.busy_cycles + c.cycles_stall, dtype=np.float64), shape)
    bound = np.where(np.isfinite(lat), lat * (1.0 + MARGIN), np.inf)
    out = np.zeros(shape, dtype=int)
    for s in folds.level_sides(p, hw)[1:]:
        out = np.where(level_floor(p, hw, s[3]) <= bound, s[5], out)
    return out


def with_levels(p: GemmProblem, hw: ArrayHardware, shape, objective: str, score_energy, score, best, search) -> tuple:
    """The search's ``((score, second), best)`` over the array's own level, with the smaller
    levels that can win (:func:`needed`) searched at the elements where any can (``search(p, hw,
    shape, objective, score_energy, levels, smaller_only=True)``: the mapper's, over their
    candidates only) and the better of both kept per element. Only those GEMMs are searched where
    they can be cut out (each element's search is its own: :mod:`asicsim._src.hw.mapper_groups`),
    else every element.

    Neither list depends on the other, and the two choices are merged by the search's own rule
    (:func:`asicsim._src.hw.mapper_passes.better`: the objective, ties within 1e-12 on its
    tie-break, then the own level first), so the choice is one search's over both lists but for
    the order of exact ties on both keys and chains of ties within 1e-12
    (``tests/hw/test_mapper_levels.py`` holds the figures equal to the search over every level
    at once)."""
    first = Schedule(best[0], best[1], best[2], best[3], best[4] > 0, best[5] > 0, *best[6:])
    v = needed(p, hw, schedule_counts(p, hw, first, lean=True), shape)
    if not np.any(v):
        return score, best
    n = int(np.prod(shape))
    g = np.flatnonzero(v.reshape(-1))
    at = None if score_energy is None else getattr(score_energy, "at", None)
    energy = None if score_energy is None or at is None else at(g, n)
    # (a level listed by needed cuts a tile of its own at some element: its candidates are not empty)
    if g.size == n or not groups.sliceable(p, hw, shape) or (score_energy is not None and energy is None):
        g = slice(None)
        (sub, second), fields = search(p, hw, shape, objective, score_energy, int(v.max()), True)
    else:
        pg, hg = groups.subset(p, hw, g, n)
        (sub, second), fields = search(pg, hg, (g.size,), objective, energy, int(v.max()), True)

    def flat(x, sh):
        return np.array(np.broadcast_to(x, sh), dtype=np.float64).reshape(-1)
    old = [flat(x, shape) for x in (*score, *best)]
    new = [flat(x, shape if isinstance(g, slice) else (g.size,)) for x in (sub, second, *fields)]
    wins = passes.better((new[0], new[1], 1.0), (old[0][g], old[1][g], 0.0))
    for o, w in zip(old, new, strict=True):
        o[g] = np.where(wins, w, o[g])
    out = [x.reshape(shape) for x in old]
    return (out[0], out[1]), out[2:]
