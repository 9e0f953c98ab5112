"""Folds smaller than the array in the mapper's search (issue 31 item 2: a larger array can run what
a smaller one does).

:mod:`asicsim._src.hw.counts` lets a schedule cut its array tile into folds of at most ``F_r`` rows
and ``F_c`` columns (``Schedule.fold_rows``, ``fold_cols``; its docstring says what the hardware
does). Per candidate the fold's sides change only the array's part of the busy cycles (the DRAM
bytes, buffer use and tile loops stay): with ``r`` the rows of the array tile (os: ``Ma``; ws, is:
``Kt``), ``c`` its columns, ``sigma`` the cycles a fold streams and ``Q`` the column folds times
streamed trips,

``busy(F_r, F_c) = rows_f cols_f streamed / mac_rate + (folds - 1) max(0, min(F_r, r) - sigma)
+ [bypass] (2 min(F_r, r) + min(F_c, c))`` (+ what no fold changes).

Which heights can win: among heights giving the same fold count, the least one has the least
reloads and fill/drain and the same folds, SRAM reads and partial sums (the least height of ``F``
folds of ``r`` rows is ``ceil(r / F)``); a height at most ``sigma`` hides its reloads, so of those
only the one of fewest folds, ``ceil(r / ceil(r / sigma))``, trades nothing but fill/drain for a
fold more; above ``sigma`` a fold costs about its height, so ``F`` folds cost about ``r`` and fewer
rows a fold save fill/drain and rounding. Each candidate gets one twin (:func:`fold_twins`): the
busy-least of the array's sides and the heights of ``ceil(r / R)`` (the array's count, balanced),
``F_s - 1``, ``F_s`` and ``F_s + 1`` folds (``F_s = ceil(r / sigma)``), by the columns of the
array or, where operands bypass unused columns, its balanced width ``ceil(c / ceil(c / C))``
(without bypass a narrower fold only adds folds). The partial last tile and the rounding of
``ceil(r / F) F`` make this a short list, not a proof: ``tests/hw/test_mapper_search.py``
enumerates every fold height and width from the loop nest and holds the choice to the least
within its ``GAP``. A design that moves whole array tiles (``array.whole_tiles``) gets none.

Larger arrays at fixed buffers (issue 31 item 2). The array's *levels* are its sides halved
``v`` times, rounded up, down to 1 x 1 (:func:`array_levels`); those of ``2R x 2C`` are ``2R x 2C``
and those of ``R x C`` (``ceil(2R / 2^v) = ceil(R / 2^(v-1))``). The mapper's tiles are of two
kinds: those its lists take from the problem and the buffers alone (the same for every array),
and those cut to an array side (the array-sized tiles, a block as wide as the array, a sliver one
side long, a tile cut to a multiple of a side, K one side deep); the latter are generated at the
sides of every level (:func:`level_sides`, a level that cuts nothing new skipped), after the
array's own. So every tile the ``R x C`` array lists is listed for ``2R x 2C``. The fold twin's
list holds every level's sides and balanced folds (its ``F_s`` heights are clipped to the
array's balanced one, another level's where smaller), so for every tile the larger array's list
holds every fold the smaller array's does, or its own sides where the tile spans no more. Counts:
a fold of ``F_r x F_c`` on the larger array has the counts of the same schedule on an array of
that size where operands bypass unused rows and columns (folds, streamed cycles, reloads,
fill/drain of the used block, SRAM, DRAM and partial sums: :mod:`asicsim._src.hw.counts` reads the
array's sides only through the fold's, but for ``mapping_slots``); without bypass the one-time
fill/drain is ``2R + C - 2`` a repetition, so the larger array adds ``2R + C`` per repetition to
the busy cycles and at most that to the latency. For a tile, latency (busy + stall) grows with
the busy cycles (the stall falls by at most ``later < 1`` a cycle), so the busy-least fold of
the list is mostly its latency-least. Not always: with the levels' sides in the list, 6 of 1,016
changed choices of ``benchmarks/mapper_identity.py``'s grids were up to 1.05 % slower than with
the array's own list, so ``latency`` lists both twins, the array's own first, and the argument is
a sketch, not a proof. Where it holds, ``latency`` on ``2R x 2C`` is at most that on ``R x C``
(plus that fill/drain without bypass), for arrays ``2^k`` times larger (held by
``tests/hw/test_mapper_search.py::test_larger_array_never_worse`` and, on 1,600 random pairs,
``benchmarks/mapper_monotone_small.py``: none worse); ``dram`` is proven least
over a space that does not depend on the array. A level's candidates run on its sides only and
carry their fold and array-aligned twins on those sides (:mod:`asicsim._src.hw.mapper_levels`,
which lists a level only where a proven floor says it can win). Not covered: a larger array of
other sides (``6 x 6`` to ``7 x 7``, or ``R x C`` to ``2R x C``: its levels differ; measured on a
sweep's grid by ``benchmarks/mapper_monotone.py --grid``) and designs moving whole array tiles;
``tests/hw/test_mapper_search.py`` holds the 2x case under both objectives with and without
bypass (cost in ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import numpy as np

from asicsim._src.hw import mapper_passes as passes
from asicsim._src.hw.counts import IS, OS, WS, ArrayHardware, GemmProblem, Schedule, ceil_div
from asicsim._src.hw.tiles import element_shape
from asicsim._src.hw.whole_tiles import spatial_folds


def _busy(height: tuple, width: tuple, g):
    """The fold-dependent busy cycles (module docstring) on geometry ``g`` of a fold of
    ``height`` ``(row folds, min(F_r, r))`` and ``width`` ``(column folds, min(F_c, c))`` (each
    part computed once per side, not once per pair)."""
    rows_f, u = height
    cols_f, used_c = width
    a = rows_f * cols_f
    fill = np.where(g["bypass"], 2 * u + used_c, 0.0)
    return a * g["streamed"] / g["rate"] + (a * g["trips"] - 1) * np.maximum(u - g["sigma"], 0) + fill


def array_levels(hw: ArrayHardware) -> list:
    """``[(R_v, C_v)]``: the array's sides halved ``v`` times, rounded up, ``v = 0, 1, ...`` until
    both are 1 (per element; a grid runs until its largest array is done)."""
    R, C = np.asarray(hw.rows, dtype=np.float64), np.asarray(hw.cols, dtype=np.float64)
    out, v = [(R, C)], 0
    while np.max(out[-1][0]) > 1 or np.max(out[-1][1]) > 1:
        v += 1
        out.append((np.ceil(R / 2.0**v), np.ceil(C / 2.0**v)))
    return out


def level_sides(p: GemmProblem, hw: ArrayHardware, most: float = np.inf) -> list:
    """Per array level (:func:`array_levels`) whose tiles differ from the level before's:
    ``(side, k_side, sub_side, (R_v, C_v), new, v)``, the tiles the mapper cuts to that array's sides (os:
    ``M`` on rows, ``N`` on columns; ws: ``K`` rows, ``N`` columns; is: ``K`` rows, ``M`` columns),
    each at most the problem's, the side a partial-sum tile's rows (columns) span (inf: streamed),
    the level's sides (its candidates' folds are at most these: :mod:`asicsim._src.hw.mapper_levels`)
    and where (per element) it cuts something new: a level's candidates are left out where not, so
    each element's candidates are those it gets searched alone. ``most``: the levels halved at
    most that many times only."""
    M, N, K, df = p.M, p.N, p.K, hw.dataflow
    out, last = [], None
    for v, (rl, cl) in enumerate(array_levels(hw)):
        if v > most:
            break
        side = [np.minimum(M, np.where(df == IS, cl, rl)), np.minimum(N, np.where(df == IS, rl, cl))]
        k_side = np.minimum(K, np.where(df == OS, cl, rl))
        sub_side = [np.where(df == OS, rl, np.where(df == IS, cl, np.inf)), np.where(df == IS, np.inf, cl)]
        # a side at least the problem's cuts nothing (mapper_candidates.candidates: cut where the tile spans it)
        key = [*side, k_side, np.minimum(sub_side[0], M), np.minimum(sub_side[1], N)]
        new = np.True_
        if last is not None:
            both = np.broadcast_arrays(*key, *last)
            new = np.any([a != b for a, b in zip(both[:len(key)], both[len(key):], strict=True)], axis=0)
        if np.any(new):  # where it cuts nothing new at an element, its candidates are left out there
            out.append((side, k_side, sub_side, (rl, cl), new, v))
        last = key
    return out


def fold_twin(p: GemmProblem, hw: ArrayHardware, s: Schedule, lists: tuple = (True,)) -> list:
    """Per entry of ``lists``, ``s`` with the busy-least fold of its short list (module docstring;
    0 where that is the array's; the first of the list on ties): True with the smaller levels'
    sides, False without them (the array alone, for the objectives that list no smaller level:
    :data:`asicsim._src.hw.mapper_levels.OBJECTIVES`). The list without is the start of the list
    with, so each fold's cycles are computed once for both."""
    R, C, df = np.asarray(hw.rows, dtype=np.float64), np.asarray(hw.cols, dtype=np.float64), hw.dataflow
    os_, ws_ = df == OS, df == WS
    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na
    trips = np.where(os_, ceil_div(p.K, s.Kt), np.where(ws_, ceil_div(p.M, Ma), ceil_div(p.N, Na)))
    streamed = np.where(os_, p.K, np.where(ws_, p.M, p.N))
    g = {"row_dim": np.where(os_, p.M, p.K), "r": np.where(os_, Ma, s.Kt), "col_dim": np.where(df == IS, p.M, p.N),
         "c": np.where(df == IS, Ma, Na), "trips": trips, "streamed": streamed, "sigma": streamed / trips,
         "bypass": bool(hw.bypass_unused), "rate": hw.mac_rate}
    r = np.maximum(g["r"], 1.0)
    f_arr = np.ceil(r / R)
    f_s = np.ceil(r / np.maximum(g["sigma"], 1.0))
    heights = [R] + [np.ceil(r / np.clip(f, f_arr, r)) for f in (f_arr, f_s - 1, f_s, f_s + 1)]
    widths = [C] + ([np.ceil(g["c"] / np.ceil(g["c"] / C))] if hw.bypass_unused else [])
    own = (len(heights), len(widths))  # the array's own list: these first heights and widths
    for rl, cl in array_levels(hw)[1:] if any(lists) else []:  # every smaller level's sides and balanced folds
        heights += [rl, np.ceil(r / np.ceil(r / rl))]
        widths += [cl, np.ceil(g["c"] / np.ceil(g["c"] / cl))] if hw.bypass_unused else []
    h_parts = [(spatial_folds(g["row_dim"], g["r"], fr), np.minimum(fr, g["r"])) for fr in heights]
    w_parts = [(spatial_folds(g["col_dim"], g["c"], fc), np.minimum(fc, g["c"])) for fc in widths]
    busy: dict = {}
    out = []
    for with_levels in lists:
        nh, nw = (len(heights), len(widths)) if with_levels else own
        best, best_fr, best_fc = None, R, C
        for j in range(nw):
            for i in range(nh):
                if (i, j) not in busy:
                    busy[i, j] = _busy(h_parts[i], w_parts[j], g)
                b = busy[i, j]
                if best is None:
                    best = b
                    continue
                win = b < best
                best = np.where(win, b, best)
                best_fr, best_fc = np.where(win, heights[i], best_fr), np.where(win, widths[j], best_fc)
        fold_r = np.where(best_fr < np.minimum(R, g["r"]), best_fr, 0.0)
        fold_c = np.where(best_fc < np.minimum(C, g["c"]), best_fc, 0.0)
        out.append(Schedule(s.family, s.Mt, s.Nt, s.Kt, s.double_buffered, s.psum_spill, s.Ma, s.Na, s.streamed,
                            s.tile_share, fold_r, fold_c))
    return out


def fold_twins(p: GemmProblem, hw: ArrayHardware, blocks: list, lists: tuple = (True,)) -> list:
    """The fold twins of the candidate blocks (none for ``array.whole_tiles``) per entry of
    ``lists`` (:func:`fold_twin`), each in the blocks' order, one list after the other: where the
    blocks make few (candidate, element) pairs (a design point), one block of all of them stacked
    (one pass, not one per block), of the candidates with a fold smaller than the array at some
    element; else one per block that has one somewhere. Where a candidate's fold stays the
    array's, its twin equals it in every field (a copy, later in the search order: never chosen; the one chunk of a design
    point drops it, :func:`asicsim._src.hw.mapper_shapes.distinct`)."""
    if hw.whole_tiles or not blocks:
        return []
    shape = element_shape(p, hw)
    leads = [passes._lead(b, len(shape)) for b in blocks]
    if 2 * sum(leads) * max(1, int(np.prod(shape))) <= passes.STACK_ELEMENTS:
        blocks = [passes._stack(blocks, shape, leads)]
    with np.errstate(divide="ignore", invalid="ignore"):
        pairs = [fold_twin(p, hw, b, lists) for b in blocks]
    out = []
    for t in (t for k in range(len(lists)) for t in (pair[k] for pair in pairs)):
        smaller = (np.asarray(t.fold_rows) > 0) | (np.asarray(t.fold_cols) > 0)
        if len(blocks) == 1 and smaller.ndim > len(shape):  # the stacked block: only the candidates
            keep = smaller.reshape(smaller.shape[0], -1).any(axis=1)  # with a smaller fold somewhere
            t = Schedule(*(np.asarray(getattr(t, f))[keep] if np.ndim(getattr(t, f)) > len(shape) else getattr(t, f)
                           for f in passes.FIELDS))
        if np.any(smaller):
            out.append(t)
    return out
