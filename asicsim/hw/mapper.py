"""The mapper: for every GEMM on every design point, the best schedule the design allows.

The space (:mod:`asicsim.hw.counts` prices any point of it): the three loop-order families (which
operand stays resident in SRAM while the innermost tile loop runs: the ``Mt x Nt`` output block,
a ``Kt x Nt`` weight block or an ``Mt x Kt`` activation block), any tile sizes ``Mt <= M``,
``Nt <= N``, ``Kt <= K`` whose tiles fit the buffers under *any* split of a shared buffer (the
tiles of the live operands homed in a buffer, doubled when double-buffered, fit what the tensors
kept whole there leave: :func:`buffer_rows`), where partial sums live (their buffer, or the one the
design marks ``psum_spill``; with ``Kt < K`` in the weights and activations families they go to
DRAM and back between K slivers, allowed where the outputs leave through DRAM), and double
buffering or not. The array's dataflow fixes the spatial unrolling inside a tile.

The search (:func:`candidates`): for each family, buffering and partial-sum home, one tile
dimension runs over every distinct trip count (``ceil(D / t)`` and ``t`` for ``t <= sqrt(D)``:
every tile that is the smallest with its trip count) while the others are seeds (1, one array
side, the whole dimension) or the most that fits beside them (closed form per buffer); then every
candidate's array-aligned twin (:func:`aligned`). What is proven: the ``dram`` objective's choice
is the least DRAM bytes over the whole space (DRAM bytes depend on the tiles only through the
streamed operands' trip counts, never grow when a tile grows, and every family's trip count that
matters is enumerated with the others at their most), tested against an enumerator of every tile
(``tests/hw/test_mapper_search.py``); for ``energy`` and ``latency`` the same enumerator measures
the gap (stated in that test). Every objective breaks ties on a second measure (``dram`` and
``energy`` on cycles, ``latency`` on energy), so a DRAM-optimal schedule keeps the array busy.

The objective (:mod:`asicsim.hw.objectives`) is ``balanced`` (default: the least energy among the
schedules within 5 % of the fastest one's cycles), ``energy`` (DRAM, SRAM and static energy; MAC
energy does not depend on the schedule), ``dram`` (bytes) or ``latency`` (busy and stall cycles).
"""

from __future__ import annotations

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

_FIELDS = ("family", "Mt", "Nt", "Kt", "double_buffered", "psum_spill", "Ma", "Na")
#: tie-break measure of each objective
_SECOND = {"dram": "latency", "energy": "latency", "latency": "energy"}


def _floor(x):
    return np.floor(np.where(np.isfinite(x), x, 1e18))


def buffer_rows(p: GemmProblem, hw: ArrayHardware, spill: bool) -> list[tuple]:
    """Per buffer ``(a, b, c, budget)``: a schedule's tiles take ``a Mt Kt + b Kt Nt + c Mt Nt``
    bytes there (``a``: the A tile's bytes per element if the ifmap streams from DRAM into this
    buffer; ``b`` the B tile's; ``c`` the partial sums' if they live here, plus the output
    staging's when the outputs leave through this buffer and partial sums live elsewhere), twice
    that when double-buffered, and ``budget`` is the capacity less the tensors kept whole there
    between operations (at most half of it: counts.py charges the overflow). ``spill``: partial
    sums in the design's ``psum_spill`` buffer."""
    lay = hw.layout
    off = {k: np.asarray(v, dtype=bool) for k, v in p.off_chip.items()}
    a_eff = p.a_bytes * np.minimum(p.a_footprint / np.maximum(p.M * p.K * p.a_bytes, 1e-300), 1.0)
    psum_home = lay.psum_spill if spill else lay.home("psum")
    foot = {"ifmap": p.a_footprint, "filter": p.N * p.K * p.b_bytes, "ofmap": p.M * p.N * p.out_bytes}
    rows = []
    for i, cap in enumerate(hw.capacity):
        cap = np.asarray(cap, dtype=np.float64)
        kept = sum(np.where(off[k], 0.0, foot[k]) for k in foot if lay.home(k) == i)
        a = np.where(off["ifmap"], a_eff, 0.0) if lay.home("ifmap") == i else 0.0
        b = np.where(off["filter"], p.b_bytes, 0.0) if lay.home("filter") == i else 0.0
        c = p.acc_bytes if psum_home == i else 0.0
        if lay.home("ofmap") == i and psum_home != i:
            c = c + np.where(off["ofmap"], p.out_bytes, 0.0)
        rows.append((a, b, c, cap - np.minimum(kept, cap / 2)))
    return rows


def _most(dim: int, t: list, rows: list, db, D, ps=(None, None)):
    """The largest tile along ``dim`` (0 M, 1 N, 2 K) that fits beside the other two of ``t``, at
    most ``D``; below 1 when none does. ``ps``: the partial-sum tile's rows and columns where fixed
    (None or NaN: the tile's own)."""
    m, n, k = (0.0 if x is None else x for x in t)  # t[dim] is what is sought
    fm, fn = (np.isnan(x) if x is not None else True for x in ps)  # follows the tile
    pm = m if ps[0] is None else np.where(fm, m, ps[0])
    pn = n if ps[1] is None else np.where(fn, n, ps[1])
    best = D
    for a, b, c, budget in rows:
        u = budget / np.where(db, 2.0, 1.0)
        if dim == 0:
            coef, const = a * k + np.where(fm, c * pn, 0.0), b * k * n + np.where(fm, 0.0, c * pm * pn)
        elif dim == 1:
            coef, const = b * k + np.where(fn, c * pm, 0.0), a * m * k + np.where(fn, 0.0, c * pm * pn)
        else:
            coef, const = a * m + b * n, c * pm * pn
        room = np.where(coef > 0, (u - const) / np.where(coef > 0, coef, 1.0), np.inf)
        best = np.minimum(best, _floor(room))
    return best


def _most_sub(t: list, other, rows: list, db, cap):
    """The most rows (columns) of the partial-sum tile beside ``other`` columns (rows) that fit
    with the tiles ``t``, at most ``cap``."""
    m, n, k = t
    best = cap
    for a, b, c, budget in rows:
        room = budget / np.where(db, 2.0, 1.0) - a * m * k - b * k * n
        best = np.minimum(best, np.where(c * other > 0, _floor(room / np.where(c * other > 0, c * other, 1.0)), np.inf))
    return best


def fits(s: Schedule, rows: list) -> np.ndarray:
    """Whether the tiles of ``s`` fit every buffer (:func:`buffer_rows`)."""
    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na
    ok = (s.Mt >= 1) & (s.Nt >= 1) & (s.Kt >= 1) & (Ma >= 1) & (Na >= 1) & (Ma <= s.Mt) & (Na <= s.Nt)
    for a, b, c, budget in rows:
        used = a * s.Mt * s.Kt + b * s.Kt * s.Nt + c * Ma * Na
        ok = ok & (used * np.where(s.double_buffered, 2.0, 1.0) <= budget * (1 + 1e-12))
    return ok


def trip_tiles(D, ndim: int) -> np.ndarray:
    """Every tile that is the smallest with its trip count (a leading axis before ``ndim`` element
    axes; repeats allowed): ``ceil(D / t)`` and ``t`` for ``t <= sqrt(D)``."""
    D = np.asarray(D, dtype=np.float64)
    q = int(np.ceil(np.sqrt(np.max(D)))) if D.size else 1
    t = np.arange(1, q + 1, dtype=np.float64).reshape((q,) + (1,) * ndim)
    return np.concatenate([np.ceil(D / t), np.minimum(t, D)])


def element_shape(p: GemmProblem, hw: ArrayHardware) -> tuple:
    """The shape every count broadcasts to: design axes and GEMMs."""
    return np.broadcast_shapes(*(np.shape(x) for x in (p.M, p.N, p.K, p.a_bytes, p.b_bytes, p.acc_bytes,
                                                        p.out_bytes, p.a_footprint, p.reps, *p.off_chip.values(),
                                                        hw.rows, hw.cols, hw.dataflow, *hw.capacity)))


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


def trip_min(t, D):
    """The least tile with the trip count of ``t`` (same trips, less space)."""
    return np.where(t >= 1, np.ceil(D / np.ceil(D / np.maximum(t, 1))), t)


def _pick(key, t: list) -> list:
    """The tiles of the least ``key`` along the leading (list) axis (first on ties)."""
    pick = np.argmin(np.where(np.isfinite(key), key, np.inf), axis=0)[None]
    return [np.take_along_axis(np.broadcast_to(x, key.shape), pick, 0)[0] for x in t]


def candidates(p: GemmProblem, hw: ArrayHardware) -> list[Schedule]:
    """The searched schedules (module docstring)."""
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

        for x in (0, 1):
            # outputs resident: every block width (height), the other side as tall (wide) as fits
            # beside a K sliver one deep (array-independent: cheap on design sweeps), cut to the
            # least with its trip count; then K as long as fits, or K one array side deep and the
            # other side as tall (wide) as then fits
            y = 1 - x
            t = [None, None, one]
            t[x] = lists[x]
            t[y] = _most(y, t, rows, db, D[y])
            t = _pick(np.where(t[y] >= 1, _dram_key(p, hw, OUTPUTS, t), np.inf), t)
            t[y] = trip_min(t[y], D[y])
            emit(OUTPUTS, [t[0], t[1], _most(2, t, rows, db, K)])
            t[2] = k_side
            t[y] = trip_min(_most(y, t, rows, db, D[y]), D[y])
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
                t[res] = _most(res, t, rows, db, D[res], ps)
                if k is not K:
                    t = _pick(np.where(t[res] >= 1, _dram_key(p, hw, fam, t), np.inf), t)
                    t[2] = trip_min(t[2], K)
                t[res] = trip_min(t[res], D[res])
                ok = dram_spill | (t[2] >= K)
                wide = list(t)
                wide[srm] = side[srm]
                wide[res] = trip_min(_most(res, wide, rows, db, D[res], ps), D[res])
                half = list(t)  # the block at twice and four times its trips: room for the sliver
                half[res] = trip_min(np.ceil(D[res] / (2 * np.ceil(D[res] / np.maximum(t[res], 1)))), D[res])
                quarter = list(t)
                quarter[res] = trip_min(np.ceil(D[res] / (4 * np.ceil(D[res] / np.maximum(t[res], 1)))), D[res])
                for u in (t, wide, half, quarter):
                    for sub in (None, one):
                        g = list(u)
                        g[srm] = _most(srm, u, rows, db, D[srm], [None, None] if sub is None else ps)
                        if sub is None:
                            emit(fam, g, ok)
                        else:
                            s_res = _most_sub(g, g[srm], rows, db, g[res])
                            emit(fam, g, ok, (g[0], s_res) if res == 1 else (s_res, g[1]))
        for fam in (OUTPUTS, WEIGHTS, ACTIVATIONS):  # one array-sized tile: many steps
            emit(fam, [side[0], side[1], k_side if fam == OUTPUTS else np.where(dram_spill, k_side, K)])
    return out + [aligned(s, hw) for s in out]


def aligned(s: Schedule, hw: ArrayHardware) -> Schedule:
    """``s`` with each spatially unrolled dimension of the array's tile cut to a multiple of the
    array side it maps to (ws: Kt rows, Na columns; os: Ma rows, Na columns; is: Kt rows, Ma
    columns), where it spans at least one side: no fold runs partly empty. The outputs family's
    block is the array's tile, so it is cut with it. Smaller tiles, so still feasible."""
    df = hw.dataflow

    def cut(x, side):
        return np.where(x >= side, np.floor(x / side) * side, x)

    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na
    Ma = np.where(df == OS, cut(Ma, hw.rows), np.where(df == IS, cut(Ma, hw.cols), Ma))
    Kt = np.where(df == OS, s.Kt, cut(s.Kt, hw.rows))
    Na = np.where(df == IS, Na, cut(Na, hw.cols))
    out = s.family == OUTPUTS
    return Schedule(s.family, np.where(out, Ma, s.Mt), np.where(out, Na, s.Nt), Kt, s.double_buffered,
                    s.psum_spill, Ma, Na)


#: Candidates are evaluated in chunks of at most this many (candidate, element) pairs, keeping a
#: running best, so memory stays bounded on large design sweeps.
STACK_ELEMENTS = 1 << 18


def valid(p: GemmProblem, hw: ArrayHardware, s: Schedule) -> np.ndarray:
    """Whether ``s`` is in the space: its tiles fit (:func:`fits`) and it cuts K outside the
    outputs family only where partial sums may go to DRAM (the outputs leave through it)."""
    rows = {sp: buffer_rows(p, hw, sp) for sp in ((False, True) if hw.layout.psum_spill is not None else (False,))}
    ok = fits(s, rows[False])
    if True in rows:
        ok = np.where(s.psum_spill, fits(s, rows[True]), ok)
    cut_k = (s.family != OUTPUTS) & (s.Kt < p.K)
    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na
    # the outputs family's block is the array's tile; the others split only their resident block
    whole = np.where(s.family == OUTPUTS, (Ma == s.Mt) & (Na == s.Nt),
                     np.where(s.family == WEIGHTS, Ma == s.Mt, Na == s.Nt))
    return ok & whole & (s.family >= 0) & (~cut_k | np.asarray(p.off_chip["ofmap"], dtype=bool))


def _measures(p: GemmProblem, hw: ArrayHardware, s: Schedule, score_energy) -> dict:
    """``latency`` (busy and stall cycles), ``energy`` (``score_energy``) and ``dram`` bytes of
    schedule ``s`` (fields may carry a leading candidate axis); inf outside the space."""
    c = schedule_counts(p, hw, Schedule(np.maximum(s.family, 0), s.Mt, s.Nt, s.Kt, s.double_buffered,
                                        s.psum_spill, s.Ma, s.Na))
    ok = valid(p, hw, s)
    out = {"latency": c.busy_cycles + c.cycles_stall, "dram": c.dram_bytes}
    out["energy"] = score_energy(c) if score_energy is not None else out["dram"]
    return {k: np.where(ok, v, np.inf) for k, v in out.items()}


def _stack(blocks: list, shape) -> Schedule:
    """One schedule with a leading candidate axis from blocks (each with or without one)."""
    def lead(s):
        return max((np.shape(getattr(s, f))[0] for f in _FIELDS if np.ndim(getattr(s, f)) > len(shape)),
                   default=1)
    fields = []
    for f in _FIELDS:
        parts = []
        for s in blocks:
            v = np.asarray(getattr(s, f))
            if v.ndim <= len(shape):
                v = v[None]
            parts.append(np.broadcast_to(v, (lead(s), *shape)))
        fields.append(np.concatenate(parts))
    return Schedule(*fields)


def _chunks(s: Schedule, shape):
    n = s.Mt.shape[0]
    step = max(1, STACK_ELEMENTS // max(1, int(np.prod(shape))))
    for i in range(0, n, step):
        yield Schedule(*(getattr(s, f)[i:i + step] for f in _FIELDS))


def _better(new: tuple, old: tuple) -> np.ndarray:
    """(primary, secondary) lexicographically less; primaries within 1e-12 are ties."""
    tie = np.abs(new[0] - old[0]) <= 1e-12 * np.abs(old[0])
    return np.where(tie, new[1] < old[1], new[0] < old[0])


def _search(p, hw, cands: Schedule, shape, score_energy, key) -> tuple:
    """The best candidate per element by ``key(measures) -> (primary, secondary)``: ((primary,
    secondary), its schedule fields)."""
    best = ((np.full(shape, np.inf), np.full(shape, np.inf)), [np.zeros(shape) for _ in _FIELDS])
    for chunk in _chunks(cands, shape):
        prim, sec = key(_measures(p, hw, chunk, score_energy))
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


def best_counts(p: GemmProblem, hw: ArrayHardware, objective: str, score_energy=None) -> GemmCounts:
    """The counts of the best schedule per element for ``objective`` (one of
    :data:`asicsim.hw.objectives.OBJECTIVES`). ``score_energy(counts) -> pJ`` prices a schedule
    for ``energy``, ``latency`` and ``balanced`` (the pricing pipeline's own rates). ``balanced``
    takes the least energy among the schedules within
    :data:`~asicsim.hw.objectives.BALANCED_SLACK` of the fastest one's cycles: never slower than
    ``latency``'s choice by more than the slack, never more energy."""
    check_objective(objective)
    shape = element_shape(p, hw)
    with np.errstate(divide="ignore", invalid="ignore"):
        cands = _stack(candidates(p, hw), shape)
        if objective == "balanced":
            (fastest, _), won = _search(p, hw, cands, shape, score_energy, lambda m: (m["latency"], m["energy"]))
            limit = fastest * (1.0 + BALANCED_SLACK)
            cands = _stack([Schedule(*won), cands], shape)  # the fastest is within the slack
            key = lambda m: (np.where(m["latency"] <= limit, m["energy"], np.inf), m["latency"])  # noqa: E731
        else:
            second = _SECOND[objective]
            key = lambda m: (m[objective], m[second])  # noqa: E731
        (score, _), best = _search(p, hw, cands, shape, score_energy, key)
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
