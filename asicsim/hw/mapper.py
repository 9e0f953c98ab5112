"""The mapper: for every GEMM on every design point, the best schedule the design allows.

The space (:mod:`asicsim.hw.counts` prices any point of it): the three loop-order families (which
operand stays resident in SRAM while the innermost tile loop runs: the ``Mt x Nt`` output block,
a ``K x Nt`` weight block or an ``Mt x K`` activation block), tile sizes at the buffer level, how a
buffer shared by several live tiles is split (the resident tile takes 1/2 or 7/8, the streamed
ones share the rest), where partial sums live (their buffer, or the one the design marks
``psum_spill``), and double buffering (every tile in two halves, so loads overlap compute, at half
the capacity) or not. The array's dataflow fixes the spatial unrolling inside a tile.

The search is pruned to a few candidates per family, and nothing pruned can win on DRAM bytes:

* in each family DRAM bytes depend on the tiles only through the trip counts of the streamed
  operands (``T_n`` for A, ``T_m`` for B; table in :mod:`asicsim.hw.counts`) and never grow
  when a tile grows, so for ``weights`` (``activations``) the widest (tallest) resident block the
  buffer holds is optimal: it is taken, and so is the variant that gives the partial-sum buffer to
  a longer stream instead (fewer weight reloads, same DRAM bytes when the block is whole);
* for the ``outputs`` family, bytes ``w_A T_n + w_B T_m`` with ``Mt Nt <= P`` (the partial-sum
  buffer): for each block width the tallest block that fits is best, and every distinct width
  (``ceil(N / T)``, at most ``2 sqrt(N)`` of them) is tried (:func:`_outputs_block_exact`); the
  two blocks around the real optimum ``Nt* = sqrt(w_A N P / (w_B M))`` are kept beside it for the
  other objectives;
* with double buffering every tile halves: bytes can only grow, time can only shrink, so both
  are evaluated and the objective decides.

Beyond that space, the winner's array-aligned twin (tiles cut to whole array folds) is tried for
every objective but ``dram``. The objective (:mod:`asicsim.hw.objectives`) is ``balanced``
(default: the least energy among the schedules within 5 % of the fastest one's cycles), ``energy``
(DRAM, SRAM and static energy; MAC energy does not depend on the schedule), ``dram`` (bytes; the
array shape then never changes the answer, since the candidates do not depend on it) or
``latency`` (busy and stall cycles); ties go to the first candidate. ``tests/hw/test_mapper.py`` enumerates the space tile by tile and
checks that the DRAM objective's choice is its minimum.
"""

from __future__ import annotations

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

_RESIDENT = {OUTPUTS: "psum", WEIGHTS: "filter", ACTIVATIONS: "ifmap"}


def _floor(x):
    return np.floor(np.where(np.isfinite(x), x, 1e18))


def _homes(hw: ArrayHardware, spill: bool) -> dict[str, int]:
    """Buffer of each operand's tile; partial sums in the ``psum_spill`` buffer when ``spill``."""
    lay = hw.layout
    homes = {op: lay.home(op) for op in ("ifmap", "filter", "ofmap", "psum")}
    if spill:
        homes["psum"] = lay.psum_spill
    return homes


def _live(p: GemmProblem, hw: ArrayHardware, spill: bool = False) -> list[str]:
    """Operands that need tile space: all but those kept whole on chip; output staging only when
    the outputs leave through a buffer other than the partial sums' (else the block converts in place)."""
    homes = _homes(hw, spill)
    live = [op for op in ("ifmap", "filter") if np.any(p.off_chip[op])] + ["psum"]
    if np.any(p.off_chip["ofmap"]) and homes["ofmap"] != homes["psum"]:
        live.append("ofmap")
    return live


def _free(p: GemmProblem, hw: ArrayHardware, spill: bool) -> dict[str, np.ndarray]:
    """Bytes of each live tile's buffer that tiles may use: its capacity less the tensors kept
    whole there between operations (at most half of it: what does not fit spills, and counts.py
    charges the overflow). Operands kept on chip need no tile space (inf)."""
    lay = hw.layout
    foot = {"ifmap": p.a_footprint, "filter": p.N * p.K * p.b_bytes, "ofmap": p.M * p.N * p.out_bytes}
    live, homes = _live(p, hw, spill), _homes(hw, spill)
    out = {}
    for op in ("ifmap", "filter", "psum", "ofmap"):
        if op not in live:
            out[op] = np.inf
            continue
        i = homes[op]
        cap = np.asarray(hw.capacity[i], dtype=np.float64)
        kept = sum(np.where(np.asarray(p.off_chip[k]), 0.0, foot[k])
                   for k in ("ifmap", "filter", "ofmap") if lay.home(k) == i and k != op)
        free = cap - np.minimum(kept, cap / 2)
        if op in ("ifmap", "filter"):
            free = np.where(np.asarray(p.off_chip[op]), free, np.inf)
        out[op] = free
    return out


def _available(p: GemmProblem, hw: ArrayHardware, family: int, db: bool, resident_share: float,
               spill: bool = False, free: dict | None = None, live: list | None = None):
    """Bytes each live tile may use (:func:`_free`, passed in when already computed): in a buffer
    several live tiles share, ``resident_share`` for the resident tile and the rest split evenly;
    halved when double-buffered. ``spill``: partial sums in the design's ``psum_spill`` buffer."""
    free = _free(p, hw, spill) if free is None else free
    live = _live(p, hw, spill) if live is None else live
    homes = _homes(hw, spill)
    resident = _RESIDENT[family]
    out = {}
    for op, f in free.items():
        if op in live:
            sharing = [o for o in live if homes[o] == homes[op]]
            if len(sharing) > 1:
                if resident in sharing:
                    f = f * (resident_share if op == resident else (1 - resident_share) / (len(sharing) - 1))
                else:
                    f = f / len(sharing)
            f = f / (2.0 if db else 1.0)
        out[op] = f
    return out


def _shares(p: GemmProblem, hw: ArrayHardware, family: int, spill: bool = False,
            live: list | None = None) -> tuple[float, ...]:
    """Resident shares searched: 1/2 and 7/8 where the resident tile shares its buffer."""
    live, homes = _live(p, hw, spill) if live is None else live, _homes(hw, spill)
    res = _RESIDENT[family]
    if res in live and sum(homes[o] == homes[res] for o in live) > 1:
        return (0.5, 0.875)
    return (0.5,)


def _outputs_block_exact(M, N, P, mt_cap, nt_cap, w_a, w_b):
    """The ``Mt x Nt`` output block of least DRAM bytes ``w_a T_n + w_b T_m`` with ``Mt Nt <= P``:
    for each block width the tallest block is best (bytes never grow with ``Mt``), and the
    distinct widths ``ceil(N / T)`` are ``ceil(N / T)`` for ``T <= sqrt(N)`` and every width up
    to ``sqrt(N)``: all of them are tried, so no width is pruned."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in (M, N, P, mt_cap, nt_cap, w_a, w_b)))
    q = int(np.ceil(np.sqrt(np.max(N)))) if np.size(N) else 1
    t = np.arange(1, q + 1, dtype=np.float64).reshape((q,) + (1,) * len(shape))
    widths = np.concatenate([np.broadcast_to(np.ceil(N / t), (q, *shape)), np.broadcast_to(t, (q, *shape))])
    Nt = np.maximum(np.minimum(np.minimum(np.minimum(widths, N), nt_cap), P), 1.0)
    Mt = np.maximum(np.minimum(np.minimum(M, _floor(P / Nt)), mt_cap), 1.0)
    cost = w_a * np.ceil(N / Nt) + w_b * np.ceil(M / Mt)
    pick = np.argmin(cost, axis=0)[None]
    return np.take_along_axis(Mt, pick, 0)[0], np.take_along_axis(Nt, pick, 0)[0]


def candidates(p: GemmProblem, hw: ArrayHardware) -> list[Schedule]:
    """The pruned schedule space (module docstring)."""
    a_eff = p.a_bytes * np.minimum(p.a_footprint / np.maximum(p.M * p.K * p.a_bytes, 1e-300), 1.0)
    b, acc, o = p.b_bytes, p.acc_bytes, p.out_bytes
    M, N, K = p.M, p.N, p.K
    w_a = np.where(p.off_chip["ifmap"], p.a_footprint, 0.0) + 1e-9
    w_b = np.where(p.off_chip["filter"], N * K * b, 0.0) + 1e-9
    out = []
    spills = (False, True) if hw.layout.psum_spill is not None else (False,)
    frees = {spill: _free(p, hw, spill) for spill in spills}
    lives = {spill: _live(p, hw, spill) for spill in spills}
    for db, spill in itertools.product((False, True), spills):
        dbs, sp, free, live = np.asarray(db), np.asarray(spill), frees[spill], lives[spill]
        # outputs resident: an Mt x Nt block in the partial-sum buffer, K streamed in Kt slivers
        for share in _shares(p, hw, OUTPUTS, spill, live):
            av = _available(p, hw, OUTPUTS, db, share, spill, free, live)
            P = _floor(np.minimum(av["psum"] / acc, av["ofmap"] / o))
            mt_cap, nt_cap = _floor(av["ifmap"] / a_eff), _floor(av["filter"] / b)
            n_star = np.clip(np.sqrt(w_a * N * P / (w_b * M)), np.minimum(P / M, N), N)
            blocks = [_outputs_block_exact(M, N, P, mt_cap, nt_cap, w_a, w_b)]
            for tn in (np.ceil(N / n_star), np.maximum(np.floor(N / n_star), 1.0)):  # near the optimum
                Nt = np.maximum(np.minimum(np.minimum(np.ceil(N / tn), nt_cap), P), 1.0)
                blocks.append((np.maximum(np.minimum(np.minimum(M, _floor(P / Nt)), mt_cap), 1.0), Nt))
            for Mt, Nt in blocks:
                Kt = np.minimum(K, np.minimum(_floor(av["ifmap"] / (a_eff * Mt)), _floor(av["filter"] / (b * Nt))))
                ok = (P >= 1) & (Kt >= 1)
                out.append(Schedule(np.where(ok, OUTPUTS, -1), Mt, Nt, np.maximum(Kt, 1.0), dbs, sp))
        # weights resident (a K x Nt block, A streamed in Mt-row slivers) or activations resident
        # (an Mt x K block, B streamed in Nt-column slivers); Mt x Nt partial sums either way: the
        # block as wide (tall) as its buffer allows, or the partial sums given to the other side
        for fam in (WEIGHTS, ACTIVATIONS):
            for share in _shares(p, hw, fam, spill, live):
                av = _available(p, hw, fam, db, share, spill, free, live)
                P = _floor(np.minimum(av["psum"] / acc, av["ofmap"] / o))
                nt_max = np.minimum(np.minimum(N, _floor(av["filter"] / (b * K))), P)
                mt_max = np.minimum(np.minimum(M, _floor(av["ifmap"] / (a_eff * K))), P)
                wide = (np.minimum(mt_max, _floor(P / np.maximum(nt_max, 1))), nt_max)
                tall = (mt_max, np.minimum(nt_max, _floor(P / np.maximum(mt_max, 1))))
                for Mt, Nt in ((wide, tall) if fam == WEIGHTS else (tall, wide)):
                    ok = (Nt >= 1) & (Mt >= 1)
                    out.append(Schedule(np.where(ok, fam, -1), np.maximum(Mt, 1.0), np.maximum(Nt, 1.0), K, dbs, sp))
    return out


def aligned(s: Schedule, hw: ArrayHardware) -> Schedule:
    """``s`` with each spatially unrolled tile dimension cut to a multiple of the array side it
    maps to (ws: Kt rows, Nt columns; os: Mt rows, Nt columns; is: Kt rows, Mt columns), where
    the tile spans at least one side: no fold runs partly empty. Smaller tiles, so still feasible."""
    df = hw.dataflow

    def cut(x, side):
        return np.where(x >= side, np.floor(x / side) * side, x)

    Mt = np.where(df == OS, cut(s.Mt, hw.rows), np.where(df == IS, cut(s.Mt, hw.cols), s.Mt))
    Kt = np.where(df == OS, s.Kt, cut(s.Kt, hw.rows))
    Nt = np.where(df == IS, s.Nt, cut(s.Nt, hw.cols))
    return Schedule(s.family, Mt, Nt, Kt, s.double_buffered, s.psum_spill)


#: Candidates are evaluated together (one pass of array operations for all) while candidates x
#: elements stay below this; larger sweeps take them one at a time, keeping a running best, so
#: memory stays that of one candidate.
STACK_ELEMENTS = 1 << 16
_FIELDS = ("family", "Mt", "Nt", "Kt", "double_buffered", "psum_spill")


def _measure(p: GemmProblem, hw: ArrayHardware, s: Schedule, needs: tuple, score_energy) -> dict:
    """``needs`` of schedule ``s`` (fields may be stacked schedules): ``latency`` (busy and stall
    cycles), ``energy`` (``score_energy``) or ``dram`` bytes; inf where infeasible."""
    c = schedule_counts(p, hw, Schedule(np.maximum(s.family, 0), s.Mt, s.Nt, s.Kt, s.double_buffered > 0,
                                        np.asarray(s.psum_spill) > 0))
    value = {"latency": lambda: c.busy_cycles + c.cycles_stall, "energy": lambda: score_energy(c),
             "dram": lambda: c.dram_bytes}
    return {k: np.where(s.family >= 0, value[k](), np.inf) for k in needs}


def _scorer(name: str, limit=None):
    """Scores from measures: one measure, or ``balanced``'s energy of the schedules within
    ``limit`` cycles (inf beyond it)."""
    if name == "balanced":
        return lambda m: np.where(m["latency"] <= limit, m["energy"], np.inf)
    return lambda m: m[name]


def _argmin(scores, fields: list) -> tuple:
    """(least score, its schedule fields) per element over the leading (schedule) axis."""
    pick = np.argmin(scores, axis=0)[None]
    return (np.take_along_axis(scores, pick, 0)[0],
            [np.take_along_axis(np.broadcast_to(f, scores.shape), pick, 0)[0] for f in fields])


def _stack(schedules: list, shape) -> list:
    return [np.stack([np.broadcast_to(getattr(s, f), shape) for s in schedules]) for f in _FIELDS]


def _winners(p: GemmProblem, hw: ArrayHardware, schedules: list, scorers: dict, needs: tuple, score_energy,
             shape, stacked: bool) -> dict:
    """{name: (least score, its schedule fields)} per element for each scorer: every schedule in
    one stacked pass, or one at a time keeping a running best (memory of one schedule). Ties go to
    the first schedule either way."""
    if stacked:
        fields = _stack(schedules, shape)
        m = _measure(p, hw, Schedule(*fields), needs, score_energy)
        return {k: _argmin(f(m), fields) for k, f in scorers.items()}
    won = {k: (np.full(shape, np.inf), [np.zeros(shape) for _ in _FIELDS]) for k in scorers}
    for s in schedules:
        m = _measure(p, hw, s, needs, score_energy)
        for k, f in scorers.items():
            score = f(m)
            better = score < won[k][0]
            won[k] = (np.where(better, score, won[k][0]),
                      [np.where(better, getattr(s, g), b) for g, b in zip(_FIELDS, won[k][1], strict=True)])
    return won


def _or_twin(p: GemmProblem, hw: ArrayHardware, won: tuple, scorer, needs: tuple, score_energy) -> tuple:
    """The winner or its array-aligned twin (:func:`aligned`), whichever scores less."""
    score, best = won
    twin = aligned(Schedule(*best), hw)
    twin_score = scorer(_measure(p, hw, twin, needs, score_energy))
    better = twin_score < score
    return (np.where(better, twin_score, score),
            [np.where(better, getattr(twin, f), b) for f, b in zip(_FIELDS, best, strict=True)])


def best_counts(p: GemmProblem, hw: ArrayHardware, objective: str, score_energy=None) -> GemmCounts:
    """The counts of the best schedule per element for ``objective`` (one of
    :data:`asicsim.hw.objectives.OBJECTIVES`). ``score_energy(counts) -> pJ`` prices a schedule
    for ``energy``, ``latency`` and ``balanced`` (the pricing pipeline's own rates). Beyond the
    pruned space, array-aligned twins are tried (not for ``dram``: they depend on the array):
    ``energy`` its winner's; ``latency`` and ``balanced`` the twins of both the fastest and the
    least-energy candidate (the fastest schedule is sometimes the latter's twin: TPU v1, a
    1400x2048x2048 GEMM, 1.9x faster than the fastest candidate's twin). ``balanced`` then takes
    the least energy among the candidates and those schedules within
    :data:`~asicsim.hw.objectives.BALANCED_SLACK` of the fastest one's cycles, or that choice's
    twin if it is within too and uses less: never slower than ``latency``'s choice by more than
    the slack, never more energy."""
    check_objective(objective)
    with np.errstate(divide="ignore", invalid="ignore"):  # empty shares: infeasible candidates
        cands = candidates(p, hw)
    shape = np.broadcast_shapes(*(np.shape(getattr(s, f)) for s in cands for f in _FIELDS),
                                np.shape(hw.rows), np.shape(hw.cols), np.shape(hw.dataflow),
                                *(np.shape(c) for c in hw.capacity), np.shape(p.M))
    stacked = (len(cands) + 3) * int(np.prod(shape)) <= STACK_ELEMENTS
    needs = ("latency", "energy") if objective in ("latency", "balanced") else (objective,)
    won = _winners(p, hw, cands, {k: _scorer(k) for k in needs}, needs, score_energy, shape, stacked)
    if not np.all(np.isfinite(won[needs[0]][0])):
        raise ValueError("no schedule fits the buffers (a buffer smaller than one element of each "
                         "operand it must hold)")
    if objective == "dram":
        return _counts(p, hw, won["dram"][1])
    if objective == "energy":
        return _counts(p, hw, _or_twin(p, hw, won["energy"], _scorer("energy"), needs, score_energy)[1])
    twins = [aligned(Schedule(*won[k][1]), hw) for k in ("latency", "energy")]
    fastest = _winners(p, hw, [Schedule(*won["latency"][1]), *twins], {"latency": _scorer("latency")},
                       needs, score_energy, shape, stacked)["latency"]
    if objective == "latency":
        return _counts(p, hw, fastest[1])
    balanced = _scorer("balanced", fastest[0] * (1.0 + BALANCED_SLACK))
    won = _winners(p, hw, [*cands, *twins], {"balanced": balanced}, needs, score_energy, shape, stacked)
    return _counts(p, hw, _or_twin(p, hw, won["balanced"], balanced, needs, score_energy)[1])


def _counts(p: GemmProblem, hw: ArrayHardware, best: list) -> GemmCounts:
    return schedule_counts(p, hw, Schedule(best[0], best[1], best[2], best[3], best[4] > 0, best[5] > 0))


def describe(family: int, Mt: float, Nt: float, Kt: float, tiles_m: float, tiles_n: float,
             double_buffered: bool, off_chip: dict[str, bool], psum_spill: str = "") -> str:
    """One mapping in words, e.g. 'weights resident in SRAM (K x 1024 block); activations
    streamed 4x; tile 512x1024x4096; double-buffered'. ``psum_spill``: the buffer partial sums
    are kept in, when not the design's partial-sum buffer."""
    fam = FAMILIES[int(family)]
    parts = {"outputs": f"outputs resident in SRAM ({Mt:.0f} x {Nt:.0f} block)",
             "weights": f"weights resident in SRAM (K x {Nt:.0f} block)",
             "activations": f"activations resident in SRAM ({Mt:.0f} x K block)"}
    words = [parts[fam]]
    if fam != "activations":
        words.append(f"activations {'streamed' if off_chip['ifmap'] else 'read on chip'} {tiles_n:.0f}x")
    if fam != "weights":
        words.append(f"weights {'streamed' if off_chip['filter'] else 'read on chip'} {tiles_m:.0f}x")
    words.append(f"tile {Mt:.0f}x{Nt:.0f}x{Kt:.0f} (MxNxK)")
    if psum_spill:
        words.append(f"partial sums in {psum_spill}")
    words.append("double-buffered" if double_buffered else "single-buffered")
    return "; ".join(words)
