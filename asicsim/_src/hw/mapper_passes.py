"""How the mapper's candidates are measured and one chosen per element (:mod:`asicsim._src.hw.mapper`
generates them): stacked in chunks with their array-aligned twins, measured with the lean counts,
the least key kept chunk by chunk, ties to the first in one search order; ``balanced``'s first
pass keeps what its second can use (what is kept between calls: :mod:`asicsim._src.hw.mapper_cache`). On
large grids: one dataflow at a time, fields at the shape of the axes they vary along, and
each element's distinct candidates only, where they vary along few axes (and in the one chunk of
a few elements: a network on one design point)."""

from __future__ import annotations

import dataclasses

import numpy as np

from asicsim._src.hw.counts import ArrayHardware, GemmProblem, Schedule, schedule_counts
from asicsim._src.hw.mapper_shapes import (  # noqa: F401 (by_dataflow, merge_by_dataflow: the mapper's)
    FIELDS,
    by_dataflow,
    distinct,
    merge_by_dataflow,
    narrowed,
    signature,
)
from asicsim._src.hw.objectives import BALANCED_SLACK
from asicsim._src.hw.tiles import aligned, valid

#: Candidates are evaluated in chunks of at most this many (candidate, element) pairs, keeping a
#: running best, so memory stays bounded on large design sweeps.
STACK_ELEMENTS = 1 << 18


def measures(p: GemmProblem, hw: ArrayHardware, s: Schedule, score_energy) -> dict:
    """``latency`` (busy and stall cycles), ``energy`` (``score_energy``) and ``dram`` bytes of
    schedule ``s`` (fields may carry a leading candidate axis); inf outside the space."""
    c = schedule_counts(p, hw, Schedule(np.maximum(s.family, 0), s.Mt, s.Nt, s.Kt, s.double_buffered,
                                        s.psum_spill, s.Ma, s.Na, s.streamed, s.tile_share, s.fold_rows,
                                        s.fold_cols), lean=True)
    ok = valid(p, hw, s)
    out = {"latency": c.busy_cycles + c.cycles_stall, "dram": c.dram_bytes}
    out["energy"] = score_energy(c) if score_energy is not None else out["dram"]
    return {k: np.where(ok, v, np.inf) for k, v in out.items()}


def candidate_count(blocks: list, shape) -> int:
    """The candidates in ``blocks`` (without their twins)."""
    return sum(_lead(b, len(shape)) for b in blocks)


def _lead(b: Schedule, nd: int) -> int:
    """The candidates in block ``b``: the leading axis of a field with one more axis than the
    elements (1 where none has)."""
    return max((v.shape[0] for v in (np.asarray(getattr(b, f)) for f in FIELDS) if v.ndim > nd), default=1)


def _stack(blocks: list, shape, leads: list) -> Schedule:
    """One schedule with a leading candidate axis from blocks (each with or without one), written
    into arrays allocated once (assignment broadcasts each block: the values of
    ``np.concatenate`` of the broadcast blocks, without a broadcast copy per block). Each field
    keeps the element shape its blocks need (a tile that depends only on the buffers and the
    GEMM is not copied across the array axes: the counts broadcast it, value for value)."""
    nd, total = len(shape), sum(leads)
    out = []
    for f in FIELDS:
        vals = [np.asarray(getattr(b, f)) for b in blocks]
        own = np.broadcast_shapes(*{v.shape[1:] if v.ndim > nd else v.shape for v in vals})  # (each shape once)
        a = np.empty((total, *(1,) * (nd - len(own)), *own), dtype=np.result_type(*{v.dtype for v in vals}))
        at = 0
        for v, n in zip(vals, leads, strict=True):
            a[at:at + n] = v  # (one without the candidate axis broadcasts along it)
            at += n
        out.append(a)
    return Schedule(*out)


@dataclasses.dataclass(frozen=True)
class Chunk(Schedule):
    """Stacked candidates with their place in the search order (``order``: one whole number per
    candidate; ties on both measures go to the least); ``firsts``: where each element's distinct
    candidates are the first ``firsts`` (the rest copies of them: the one chunk of a few elements),
    else None."""

    order: np.ndarray | None = None
    firsts: np.ndarray | None = None


#: blocks whose fields vary along axes that hold at most this share of the grid keep only each
#: element's distinct candidates (:func:`stacked_chunks`)
DISTINCT_SHARE = 16


def prepared(blocks: list, shape) -> list:
    """``blocks`` as :func:`stacked_chunks` stacks them: each field cut to the element axes it
    varies along where there are several chunks (:func:`asicsim._src.hw.mapper_shapes.narrowed`),
    done once for both of ``balanced``'s passes."""
    nd = len(shape)
    if 2 * sum(_lead(b, nd) for b in blocks) * max(1, int(np.prod(shape))) <= STACK_ELEMENTS:
        return blocks
    return [narrowed(b, nd) for b in blocks]


def stacked_chunks(p: GemmProblem, hw: ArrayHardware, blocks: list, shape, narrow: bool = True):
    """The candidate blocks and their array-aligned twins (:func:`asicsim._src.hw.tiles.aligned`) in
    chunks: one chunk of both where all of them make at most :data:`STACK_ELEMENTS`
    (candidate, element) pairs, else groups of blocks, each followed by its twins as a chunk of
    their own, at most :data:`STACK_ELEMENTS` pairs per chunk (at least one block), so memory
    stays that of one chunk however large the design sweep.

    The search order (:class:`Chunk` ``order``) is that of one chunk of every block followed by
    every twin, however they are chunked: a design point of a sweep gets the schedule it gets
    priced alone. Where there are several chunks, blocks that vary along the same element axes
    are stacked together (in order within a chunk): a chunk of candidates that depend only on
    the buffers and the GEMM is counted at that shape, not over the array axes of the grid (each
    field cut to the axes it varies along: :func:`asicsim._src.hw.mapper_shapes.narrowed`); and where
    those axes hold at most 1 / :data:`DISTINCT_SHARE` of the grid, each of their elements keeps
    only its distinct candidates (:func:`asicsim._src.hw.mapper_shapes.distinct`: a candidate equal in
    every field to an earlier one has the same counts and a later place in the order, so it is
    never chosen, nor its twin). The one chunk of both keeps each element's distinct candidates
    and twins the same way. ``narrow=False``: the blocks are :func:`prepared` already."""
    size, nd = max(1, int(np.prod(shape))), len(shape)
    leads = [_lead(b, nd) for b in blocks]
    at = np.cumsum([0, *leads])
    total = int(at[-1])
    several = 2 * total * size > STACK_ELEMENTS
    if several and narrow:
        blocks = [narrowed(b, nd) for b in blocks]
    sigs = [signature(b, nd) for b in blocks] if several else [()] * len(blocks)
    for sig in dict.fromkeys(sigs):
        mine = [i for i in range(len(blocks)) if sigs[i] == sig]
        first = np.concatenate([np.arange(at[j], at[j] + leads[j]) for j in mine])
        if several and DISTINCT_SHARE * int(np.prod([x for x, v in zip(shape, sig, strict=True) if v])) <= size:
            s, order, _ = distinct(_stack([blocks[j] for j in mine], shape, [leads[j] for j in mine]), first)
            step = max(1, STACK_ELEMENTS // size)
            for lo in range(0, s.family.shape[0], step):
                part = Schedule(*(getattr(s, f)[lo:lo + step] for f in FIELDS))
                for twin, c in ((0, part), (total, narrowed(aligned(p, hw, part), nd))):
                    yield Chunk(*(getattr(c, f) for f in FIELDS), order=order[lo:lo + step] + twin)
            continue
        group, n, done = [], 0, 0
        for i in [*mine, None]:
            lead = 0 if i is None else leads[i]
            if group and (i is None or (several and (n + lead) * size > STACK_ELEMENTS)):
                s = _stack([blocks[j] for j in group], shape, [leads[j] for j in group])
                order = first[done:done + n]
                if not several:  # one chunk of both (one measure of a few elements), each
                    # element's distinct candidates only (:func:`asicsim._src.hw.mapper_shapes.distinct`)
                    # (the candidates and their twins as one stack, each at its own shape)
                    both, order, firsts = distinct([s, aligned(p, hw, s)], np.concatenate([order, order + total]))
                    yield Chunk(*(getattr(both, f) for f in FIELDS), order=order, firsts=firsts)
                    return
                for twin, c in ((0, s), (total, narrowed(aligned(p, hw, s), nd))):
                    yield Chunk(*(getattr(c, f) for f in FIELDS), order=order + twin)
                group, done, n = [], done + n, 0
            if i is not None:
                group.append(i)
                n += lead


def better(new: tuple, old: tuple) -> np.ndarray:
    """(primary, secondary, order) lexicographically less; primaries within 1e-12 are ties."""
    tie = np.abs(new[0] - old[0]) <= 1e-12 * np.abs(old[0])
    return np.where(tie, (new[1] < old[1]) | ((new[1] == old[1]) & (new[2] < old[2])), new[0] < old[0])


def measure_chunks(p, hw, blocks: list, shape, score_energy, chunks=None):
    """(chunk, its measures) for every chunk of the candidates and their twins (:func:`stacked_chunks`;
    ``chunks``: those chunks already stacked), one chunk at a time."""
    return ((chunk, measures(p, hw, chunk, score_energy))
            for chunk in (stacked_chunks(p, hw, blocks, shape, narrow=False) if chunks is None else chunks))


def _full(v, chunk: Schedule, shape) -> np.ndarray:
    """A measure of ``chunk`` broadcast to (its candidates, every element)."""
    return np.broadcast_to(v, (np.shape(chunk.family)[0], *shape))


def search(measured: list, shape, key) -> tuple:
    """The best candidate per element by ``key(measures) -> (primary, secondary)``: ((primary,
    secondary), its schedule fields). Within a chunk the least primary, ties (within 1e-12) on
    the secondary, then on the search order (:func:`stacked_chunks`); a chunk's winner replaces
    the best so far by :func:`better`."""
    best = ((np.full(shape, np.inf), np.full(shape, np.inf), np.full(shape, np.inf)),
            [np.zeros(shape) for _ in FIELDS])
    for chunk, m in measured:
        prim, sec = (_full(v, chunk, shape) for v in key(m))
        lo = prim.min(axis=0)
        # prim - lo >= 0 (or NaN, never within): its abs is itself
        sec = np.where(prim - lo <= 1e-12 * np.abs(lo), sec, np.inf)
        pick = np.argmin(sec, axis=0)[None]  # first in the chunk: least in the search order
        order = np.asarray(chunk.order if isinstance(chunk, Chunk) else np.arange(np.shape(chunk.family)[0]),
                           dtype=np.float64)
        order = order.reshape(order.shape + (1,) * (len(shape) + 1 - order.ndim))
        won = (np.take_along_axis(prim, pick, 0)[0], np.take_along_axis(sec, pick, 0)[0],
               np.take_along_axis(order, pick, 0)[0])
        b = better(won, best[0])
        if not b.any():  # nothing replaced
            continue
        # each field gathered where it has a value per element (a field that does not vary along
        # an axis is gathered without broadcasting it first)
        fields = [np.take_along_axis(getattr(chunk, f), pick, 0)[0] for f in FIELDS]
        best = (tuple(np.where(b, w, o) for w, o in zip(won, best[0], strict=True)),
                [np.where(b, w, o) for w, o in zip(fields, best[1], strict=True)])
    return best[0][:2], best[1]


#: the tie-break of each objective other than ``balanced``
SECOND = {"dram": "latency", "energy": "latency", "latency": "energy"}


def objective_key(objective: str):
    """The search key of ``objective`` other than ``balanced``: the objective, then its tie-break."""
    second = SECOND[objective]
    return lambda m: (m[objective], m[second])


def search_once(measured: list, shape, objective: str) -> tuple:
    """:func:`search` of chunks measured once (``balanced``: both its passes over the same
    measures: the fastest, then the least energy within the slack of it)."""
    if objective != "balanced":
        return search(measured, shape, objective_key(objective))
    limit = search(measured, shape, lambda m: (m["latency"], m["energy"]))[0][0] * (1.0 + BALANCED_SLACK)
    return search(measured, shape, lambda m: (np.where(m["latency"] <= limit, m["energy"], np.inf), m["latency"]))


#: at most this many (candidate, element) pairs of ``balanced``'s first pass are kept for its second
#: (24 bytes each); chunks past it are measured again
KEEP_PAIRS = 1 << 23


def keeping(measured, kept: list, candidates: int, shape):
    """``measured`` (chunks and their measures, for ``balanced``'s first pass), recording in ``kept``
    per chunk the (flat index, latency, energy) of every pair that can meet the second pass's
    limit (None: too many kept, measure that chunk again).

    Proof that a pair left out cannot: let ``P_j`` be :func:`search`'s best primary (latency)
    after chunk ``j`` and ``lo_j`` chunk ``j``'s least. A chunk replaces ``P`` only with a winner
    below it or within the tie tolerance above it, so ``P_j <= P_(j-1) (1 + 1e-12)``; a winner not
    taken is at least ``P_(j-1)`` less the tolerance and a winner is at most ``lo_j`` plus it, so
    ``P_j <= lo_j (1 + 3e-12)``. Hence ``P_j <= R_j (1 + 3e-12)^j`` with ``R_j`` the least of
    ``lo_1 .. lo_j``, and the final ``P <= R_j (1 + 3e-12)^n`` over ``n <= 2 candidates`` chunks
    (each holds at least one candidate or the twins of at least one; ``candidates``: their number,
    :func:`candidate_count`). The limit is ``P (1 + BALANCED_SLACK)``; a pair of latency
    above ``R_j (1 + BALANCED_SLACK) (1 + 4e-12)^(2 candidates + 1)`` (the extra for rounding) is
    above it, so its key in the second pass is inf, as for a pair not kept. (The step from the
    initial inf uses that a candidate of finite latency has finite energy, its tie-break: valid
    schedules have finite counts and the rates are finite.)"""
    margin = (1.0 + BALANCED_SLACK) * (1.0 + 4e-12) ** (2 * candidates + 1)
    least, total = None, 0
    for chunk, m in measured:
        lat = _full(m["latency"], chunk, shape)
        lo = np.fmin.reduce(lat, axis=0)
        least = lo if least is None else np.fmin(least, lo)
        idx = np.flatnonzero(lat <= least * margin)  # NaN and inf never below a finite bound
        total += idx.size
        kept.append((idx, lat.reshape(-1)[idx], _full(m["energy"], chunk, shape).reshape(-1)[idx])
                    if total <= KEEP_PAIRS else None)
        yield chunk, m


def kept_measures(p, hw, blocks: list, shape, score_energy, kept: list):
    """``balanced``'s second pass: every chunk again (stacked anew, :func:`stacked_chunks`) with the
    latency and energy kept by :func:`keeping` and inf elsewhere (keys identical to measuring it
    again: a pair not kept has an inf key either way, and a chunk whose least key is inf picks its
    first pair in both), or measured again where nothing was kept."""
    for chunk, k in zip(stacked_chunks(p, hw, blocks, shape, narrow=False), kept, strict=True):
        if k is None:
            yield chunk, measures(p, hw, chunk, score_energy)
            continue
        idx, lat, en = k
        full = (np.shape(chunk.family)[0], *shape)
        m = {"latency": np.full(full, np.inf), "energy": np.full(full, np.inf)}
        m["latency"].reshape(-1)[idx] = lat
        m["energy"].reshape(-1)[idx] = en
        yield chunk, m
