"""The mapper: for every GEMM on every design point, a schedule for the objective.

The space (:mod:`asicsim.hw.counts` prices any point of it): the three loop-order families (which
operand stays resident in SRAM while the innermost tile loop runs: the ``Mt x Nt`` output block,
a ``Kt x Nt`` weight block or an ``Mt x Kt`` activation block), any tiles ``Mt <= M``, ``Nt <= N``,
``Kt <= K`` that fit the buffers under *any* split of a shared buffer (the tiles homed in a
buffer, doubled when double-buffered, fit what the tensors kept whole there leave:
:func:`asicsim.hw.tiles.buffer_rows`), the array's tile ``Ma x Na`` (the partial sums') inside
the resident block (the weights family works through its block ``Na`` columns at a time, the
activations family ``Ma`` rows at a time), partial sums in their buffer or the one the design
marks ``psum_spill`` or, with ``Kt < K`` outside the outputs family, to DRAM and back between K
slivers (where the outputs leave through DRAM), and double buffering or not.

The search (:func:`candidates`), per buffering and partial-sum home:

* outputs resident: every block width and every block height (the least tile of each trip count,
  :func:`asicsim.hw.tiles.trip_tiles`) with the other side as long as fits beside a one-deep K
  sliver; the one of least DRAM bytes is kept (closed form, on the design's buffer axes only, so
  cheap on sweeps over array shapes), and the full-width (full-height) one; each cut to the least tile of its trip count, then K as long as
  fits (or at twice and four times its trips), or K one array side deep and the other side
  re-fitted;
* weights (activations) resident: the block as wide (tall) as fits with K whole, or with K at
  every trip count (partial sums to DRAM; least DRAM kept), beside a one-row sliver and partial-sum
  tile; then that block, the block at twice and four times its trips, or as wide as fits beside a
  sliver one array side long; the sliver as long as fits; the array's tile the whole block or as
  wide as fits;
* one array-sized tile per family; then every candidate's array-aligned twin
  (:func:`asicsim.hw.tiles.aligned`).

What is proven: the ``dram`` objective's choice moves the least DRAM bytes of the whole space.
Per family the bytes depend on the tiles only through the streamed operands' trip counts
(outputs: ``T_m`` and ``T_n``; weights: ``T_n``, and ``T_k`` when partial sums spill; activations:
``T_m`` and ``T_k``) and never grow when a tile grows; the enumerated dimension runs over every
trip count while the others take the least space any schedule can give them (a one-deep sliver,
a one-column partial-sum tile), so the least trips of the other side for each is reached.
``tests/hw/test_mapper_search.py`` checks this against an enumerator of every tile that shares
none of this module. ``energy`` and ``latency`` are not proven optimal: on small random problems
(1-9 per dimension, arrays of 1-4 PEs a side) the same enumerator finds better schedules in about
two thirds of the cases, up to 1.24x (energy) and 1.56x (latency), and 2x larger buffers can still
choose a slower schedule (``benchmarks/RESULTS.md``, issue 31 section). Ties on the objective go to a second
measure (``dram`` and ``energy``: cycles; ``latency``: energy), so the DRAM-optimal schedule keeps
the array busy.

The objective (:mod:`asicsim.hw.objectives`) is ``balanced`` (default: the least energy among the
candidates within 5 % of the fastest one's cycles), ``energy`` (DRAM, SRAM and static energy; MAC
energy does not depend on the schedule), ``dram`` (bytes) or ``latency`` (busy and stall cycles).
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from asicsim.hw.counts import (
    ACTIVATIONS,
    FAMILIES,
    IS,
    OS,
    OUTPUTS,
    WEIGHTS,
    ArrayHardware,
    GemmCounts,
    GemmProblem,
    Schedule,
    schedule_counts,
)
from asicsim.hw.objectives import BALANCED_SLACK, check_objective
from asicsim.hw.tiles import (
    aligned,
    buffer_rows,
    element_shape,
    most,
    most_sub,
    trip_min,
    trip_tiles,
    valid,
)

_FIELDS = ("family", "Mt", "Nt", "Kt", "double_buffered", "psum_spill", "Ma", "Na")
#: tie-break measure of each objective
_SECOND = {"dram": "latency", "energy": "latency", "latency": "energy"}


def _dram_key(p: GemmProblem, hw: ArrayHardware, fam: int, t: list):
    """The DRAM bytes per repetition of family ``fam`` with tiles ``t`` that depend on the tiles
    (:mod:`asicsim.hw.counts`: the streamed operands times their trips, partial sums spilled)."""
    M, N, K = p.M, p.N, p.K
    Tm, Tn, Tk = np.ceil(M / t[0]), np.ceil(N / t[1]), np.ceil(K / t[2])
    lay = hw.layout

    def moved(op, S):
        return np.where(p.off_chip[op], S, np.maximum(S - np.asarray(hw.capacity[lay.home(op)]), 0.0))

    wa, wb = moved("ifmap", p.a_footprint), moved("filter", N * K * p.b_bytes)
    if fam == OUTPUTS:
        return wa * Tn + wb * Tm
    spilled = 2 * M * N * p.acc_bytes * (Tk - 1)
    return (wa * Tn if fam == WEIGHTS else wb * Tm) + spilled


def _pick(key, t: list) -> list:
    """The tiles of the least ``key`` along the leading (list) axis (first on ties)."""
    pick = np.argmin(np.where(np.isfinite(key), key, np.inf), axis=0)[None]
    return [np.take_along_axis(np.broadcast_to(x, key.shape), pick, 0)[0] for x in t]


def candidates(p: GemmProblem, hw: ArrayHardware) -> list[Schedule]:
    """The searched schedules (module docstring), before their array-aligned twins."""
    M, N, K = (np.asarray(x, dtype=np.float64) for x in (p.M, p.N, p.K))
    D = (M, N, K)
    ndim = len(element_shape(p, hw))
    lists = [trip_tiles(x, ndim) for x in D]
    one = np.ones_like(M)
    side = [np.minimum(M, np.where(hw.dataflow == IS, hw.cols, hw.rows)), np.minimum(N, np.where(hw.dataflow == IS, hw.rows, hw.cols))]
    dram_spill = np.asarray(p.off_chip["ofmap"], dtype=bool)
    k_side = np.minimum(K, np.where(hw.dataflow == OS, hw.cols, hw.rows))
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
                t = _pick(np.where(t[y] >= 1, _dram_key(p, hw, OUTPUTS, t), np.inf), t)
            t[y] = trip_min(t[y], D[y])
            k_most = most(2, t, rows, db, K)
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
                    for sub in (None, one):
                        g = list(u)
                        g[srm] = most(srm, u, rows, db, D[srm], [None, None] if sub is None else ps)
                        if sub is None:
                            emit(fam, g, ok)
                        else:
                            s_res = most_sub(g, g[srm], rows, db, g[res])
                            emit(fam, g, ok, (g[0], s_res) if res == 1 else (s_res, g[1]))
        for fam in (OUTPUTS, WEIGHTS, ACTIVATIONS):  # one array-sized tile: many steps
            emit(fam, [side[0], side[1], k_side if fam == OUTPUTS else np.where(dram_spill, k_side, K)])
    return out


#: Candidates are evaluated in chunks of at most this many (candidate, element) pairs, keeping a
#: running best, so memory stays bounded on large design sweeps.
STACK_ELEMENTS = 1 << 18


def _measures(p: GemmProblem, hw: ArrayHardware, s: Schedule, score_energy) -> dict:
    """``latency`` (busy and stall cycles), ``energy`` (``score_energy``) and ``dram`` bytes of
    schedule ``s`` (fields may carry a leading candidate axis); inf outside the space."""
    c = schedule_counts(p, hw, Schedule(np.maximum(s.family, 0), s.Mt, s.Nt, s.Kt, s.double_buffered,
                                        s.psum_spill, s.Ma, s.Na), lean=True)
    ok = valid(p, hw, s)
    out = {"latency": c.busy_cycles + c.cycles_stall, "dram": c.dram_bytes}
    out["energy"] = score_energy(c) if score_energy is not None else out["dram"]
    return {k: np.where(ok, v, np.inf) for k, v in out.items()}


def _lead(b: Schedule, nd: int) -> int:
    """The candidates in block ``b``: the leading axis of a field with one more axis than the
    elements (1 where none has)."""
    return max((np.shape(v)[0] for v in (getattr(b, f) for f in _FIELDS) if np.ndim(v) > nd), default=1)


def _stack(blocks: list, shape, leads: list) -> Schedule:
    """One schedule with a leading candidate axis from blocks (each with or without one), written
    into arrays allocated once (assignment broadcasts each block: the values of
    ``np.concatenate`` of the broadcast blocks, without a broadcast copy per block)."""
    nd, total = len(shape), sum(leads)
    out = []
    for f in _FIELDS:
        vals = [np.asarray(getattr(b, f)) for b in blocks]
        a = np.empty((total, *shape), dtype=np.result_type(*vals))
        at = 0
        for v, n in zip(vals, leads, strict=True):
            a[at:at + n] = v if v.ndim > nd else v[None]
            at += n
        out.append(a)
    return Schedule(*out)


def _chunks(blocks: list, hw: ArrayHardware, shape):
    """The candidate blocks and their array-aligned twins, stacked a few at a time: at most
    :data:`STACK_ELEMENTS` (candidate, element) pairs per chunk (at least one block), so memory
    stays that of one chunk however large the design sweep."""
    size, nd = max(1, int(np.prod(shape))), len(shape)
    group, leads, n = [], [], 0
    for b in [*blocks, None]:
        lead = 0 if b is None else _lead(b, nd)
        if group and (b is None or (n + lead) * 2 * size > STACK_ELEMENTS):
            s = _stack(group, shape, leads)
            twin = aligned(s, hw)
            yield Schedule(*(np.concatenate([getattr(s, f), np.broadcast_to(getattr(twin, f), s.Mt.shape)])
                             for f in _FIELDS))
            group, leads, n = [], [], 0
        if b is not None:
            group.append(b)
            leads.append(lead)
            n += lead


def _better(new: tuple, old: tuple) -> np.ndarray:
    """(primary, secondary) lexicographically less; primaries within 1e-12 are ties."""
    tie = np.abs(new[0] - old[0]) <= 1e-12 * np.abs(old[0])
    return np.where(tie, new[1] < old[1], new[0] < old[0])


def _measured(p, hw, blocks: list, shape, score_energy, chunks=None):
    """(chunk, its measures) for every chunk of the candidates and their twins (:func:`_chunks`;
    ``chunks``: those chunks already stacked), one chunk at a time."""
    return ((chunk, _measures(p, hw, chunk, score_energy))
            for chunk in (_chunks(blocks, hw, shape) if chunks is None else chunks))


#: The stacked candidates of small problems (a network on one design point), by the content of the
#: problem and the hardware (every array's dtype, shape and bytes, the buffer layout: never a
#: name): pricing the same GEMMs on the same design point again skips generating them. The
#: candidates are a function of exactly these (:func:`candidates`, :func:`_chunks`), so a hit
#: gives the arrays a miss would build; they are read-only. Design sweeps (more than
#: :data:`CACHE_PAIRS` candidate-element pairs) are not kept.
_CACHE: dict = {}
CACHE_ENTRIES = 128
CACHE_PAIRS = 1 << 16


def clear_cache() -> None:
    """Forget the cached candidates (timing a first call)."""
    _CACHE.clear()


def _content_key(p: GemmProblem, hw: ArrayHardware) -> tuple:
    arrays = [*(getattr(p, f.name) for f in dataclasses.fields(GemmProblem) if f.name != "off_chip"),
              *(p.off_chip[k] for k in sorted(p.off_chip)), hw.rows, hw.cols, hw.dataflow,
              hw.dram_bytes_per_cycle, *hw.capacity]
    return (tuple(sorted(p.off_chip)), hw.layout, hw.zero_weights, hw.mac_rate,
            tuple((a.dtype.str, a.shape, a.tobytes()) for a in map(np.asarray, arrays)))


def _searched(p: GemmProblem, hw: ArrayHardware, shape) -> tuple:
    """(candidate blocks, their stacked chunks or None where there are several): from the cache
    where the content matches."""
    small = max(1, int(np.prod(shape))) <= CACHE_PAIRS // 1024
    key = _content_key(p, hw) if small else None
    if key is not None and key in _CACHE:
        return _CACHE[key]
    cands = candidates(p, hw)
    if 2 * len(cands) * max(1, int(np.prod(shape))) > min(STACK_ELEMENTS, CACHE_PAIRS) or key is None:
        return cands, None
    chunks = list(_chunks(cands, hw, shape))
    for c in chunks:
        for f in _FIELDS:
            getattr(c, f).flags.writeable = False
    if len(_CACHE) >= CACHE_ENTRIES:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (cands, chunks)
    return cands, chunks


def _search(measured: list, shape, key) -> tuple:
    """The best candidate per element by ``key(measures) -> (primary, secondary)``: ((primary,
    secondary), its schedule fields)."""
    best = ((np.full(shape, np.inf), np.full(shape, np.inf)), [np.zeros(shape) for _ in _FIELDS])
    for chunk, m in measured:
        prim, sec = key(m)
        # least primary, ties on the secondary (first in order on exact ties)
        lo = prim.min(axis=0)
        sec = np.where(np.abs(prim - lo) <= 1e-12 * np.abs(lo), sec, np.inf)
        pick = np.argmin(sec, axis=0)[None]
        won = [np.take_along_axis(np.broadcast_to(a, prim.shape), pick, 0)[0]
               for a in (prim, sec, *(getattr(chunk, f) for f in _FIELDS))]
        won = ((won[0], won[1]), won[2:])
        b = _better(won[0], best[0])
        best = ((np.where(b, won[0][0], best[0][0]), np.where(b, won[0][1], best[0][1])),
                [np.where(b, w, o) for w, o in zip(won[1], best[1], strict=True)])
    return best


#: at most this many (candidate, element) pairs of ``balanced``'s first pass are kept for its second
#: (24 bytes each); chunks past it are measured again
KEEP_PAIRS = 1 << 23


def _keeping(measured, kept: list, blocks: int):
    """``measured`` (chunks and their measures, for ``balanced``'s first pass), recording in ``kept``
    per chunk the (flat index, latency, energy) of every pair that can meet the second pass's
    limit (None: too many kept, measure that chunk again).

    Proof that a pair left out cannot: let ``P_j`` be :func:`_search`'s best primary (latency)
    after chunk ``j`` and ``lo_j`` chunk ``j``'s least. A chunk replaces ``P`` only with a winner
    below it or within the tie tolerance above it, so ``P_j <= P_(j-1) (1 + 1e-12)``; a winner not
    taken is at least ``P_(j-1)`` less the tolerance and a winner is at most ``lo_j`` plus it, so
    ``P_j <= lo_j (1 + 3e-12)``. Hence ``P_j <= R_j (1 + 3e-12)^j`` with ``R_j`` the least of
    ``lo_1 .. lo_j``, and the final ``P <= R_j (1 + 3e-12)^n`` over ``n <= blocks`` chunks
    (each holds at least one block). The limit is ``P (1 + BALANCED_SLACK)``; a pair of latency
    above ``R_j (1 + BALANCED_SLACK) (1 + 4e-12)^(blocks + 1)`` (the extra for rounding) is
    above it, so its key in the second pass is inf, as for a pair not kept."""
    margin = (1.0 + BALANCED_SLACK) * (1.0 + 4e-12) ** (blocks + 1)
    least, total = None, 0
    for chunk, m in measured:
        lat = m["latency"]
        lo = np.fmin.reduce(lat, axis=0)
        least = lo if least is None else np.fmin(least, lo)
        idx = np.flatnonzero(lat <= least * margin)  # NaN and inf never below a finite bound
        total += idx.size
        kept.append((idx, lat.reshape(-1)[idx], m["energy"].reshape(-1)[idx]) if total <= KEEP_PAIRS else None)
        yield chunk, m


def _kept_measures(p, hw, blocks: list, shape, score_energy, kept: list):
    """``balanced``'s second pass: every chunk again (stacked anew, :func:`_chunks`) with the
    latency and energy kept by :func:`_keeping` and inf elsewhere (keys identical to measuring it
    again: a pair not kept has an inf key either way, and a chunk whose least key is inf picks its
    first pair in both), or measured again where nothing was kept."""
    for chunk, k in zip(_chunks(blocks, hw, shape), kept, strict=True):
        if k is None:
            yield chunk, _measures(p, hw, chunk, score_energy)
            continue
        idx, lat, en = k
        m = {"latency": np.full(chunk.Mt.shape, np.inf), "energy": np.full(chunk.Mt.shape, np.inf)}
        m["latency"].reshape(-1)[idx] = lat
        m["energy"].reshape(-1)[idx] = en
        yield chunk, m


def best_counts(p: GemmProblem, hw: ArrayHardware, objective: str, score_energy=None) -> GemmCounts:
    """The counts of the best schedule per element for ``objective`` (one of
    :data:`asicsim.hw.objectives.OBJECTIVES`). ``score_energy(counts) -> pJ`` prices a schedule
    for ``energy``, ``latency`` and ``balanced`` (the pricing pipeline's own rates). ``balanced``
    takes the least energy among the candidates within
    :data:`~asicsim.hw.objectives.BALANCED_SLACK` of the fastest one's cycles: never slower than
    ``latency``'s choice by more than the slack, never more energy."""
    check_objective(objective)
    shape = element_shape(p, hw)
    with np.errstate(divide="ignore", invalid="ignore"):
        cands, chunks = _searched(p, hw, shape)
        # one chunk (a design point, small grids): measured once for both of balanced's passes
        once = 2 * len(cands) * max(1, int(np.prod(shape))) <= STACK_ELEMENTS
        measured = _measured(p, hw, cands, shape, score_energy, chunks)
        measured = list(measured) if once else measured
        if objective == "balanced":  # two passes: the fastest, then the least energy near it
            fast = lambda m: (m["latency"], m["energy"])  # noqa: E731
            if once:
                limit = _search(measured, shape, fast)[0][0] * (1.0 + BALANCED_SLACK)
            else:
                kept: list = []
                limit = _search(_keeping(measured, kept, len(cands)), shape, fast)[0][0] * (1.0 + BALANCED_SLACK)
                measured = _kept_measures(p, hw, cands, shape, score_energy, kept)
            key = lambda m: (np.where(m["latency"] <= limit, m["energy"], np.inf), m["latency"])  # noqa: E731
        else:
            second = _SECOND[objective]
            key = lambda m: (m[objective], m[second])  # noqa: E731
        (score, _), best = _search(measured, shape, key)
    if not np.all(np.isfinite(score)):
        raise ValueError("no schedule fits the buffers (a buffer smaller than one element of each "
                         "operand it must hold)")
    return schedule_counts(p, hw, Schedule(best[0], best[1], best[2], best[3], best[4] > 0, best[5] > 0,
                                           best[6], best[7]))


def describe(family: int, Mt: float, Nt: float, Kt: float, tiles_m: float, tiles_n: float,
             double_buffered: bool, off_chip: dict[str, bool], psum_spill: str = "", tiles_k: float = 1) -> str:
    """One mapping in words, e.g. 'weights resident in SRAM (K x 1024 block); activations
    streamed 4x; tile 512x1024x4096; double-buffered'. ``psum_spill``: the buffer partial sums
    are kept in, when not the design's partial-sum buffer; ``tiles_k``: K slivers (outside the
    outputs family, partial sums go to DRAM and back between them)."""
    fam = FAMILIES[int(family)]
    k = "K" if tiles_k <= 1 else f"{Kt:.0f}"
    parts = {"outputs": f"outputs resident in SRAM ({Mt:.0f} x {Nt:.0f} block)",
             "weights": f"weights resident in SRAM ({k} x {Nt:.0f} block)",
             "activations": f"activations resident in SRAM ({Mt:.0f} x {k} block)"}
    words = [parts[fam]]
    if fam != "activations":
        words.append(f"activations {'streamed' if off_chip['ifmap'] else 'read on chip'} {tiles_n:.0f}x")
    if fam != "weights":
        words.append(f"weights {'streamed' if off_chip['filter'] else 'read on chip'} {tiles_m:.0f}x")
    if fam != "outputs" and tiles_k > 1:
        words.append(f"partial sums to DRAM and back {tiles_k - 1:.0f}x")
    words.append(f"tile {Mt:.0f}x{Nt:.0f}x{Kt:.0f} (MxNxK)")
    if psum_spill:
        words.append(f"partial sums in {psum_spill}")
    words.append("double-buffered" if double_buffered else "single-buffered")
    return "; ".join(words)
