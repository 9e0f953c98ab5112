"""Tensors kept on chip between operations, and what a schedule does when they outgrow their buffer.

An operand the design's DRAM does not hold (TPU v1's activations live in its unified buffer; an
RNN's hidden state never leaves the chip) is *kept on chip*: it stays in its home buffer between
operations, and a schedule reads it (writes it) there in place, without tiles of its own. When the
kept tensors do not fit beside the tiles, the schedule *streams the overflow* of some of them
(:attr:`asicsim._src.hw.counts.Schedule.streamed`, a bit per operand, :data:`STREAM_BITS`): such an
operand's tiles take buffer space exactly as an off-chip operand's do (:func:`buffer_rows`); in
each buffer a streamed tensor is homed in, the schedule reserves the share ``tile_share`` of what
the tensors kept whole leave for its tiles and keeps that much less of the streamed tensors
(:func:`resident_bytes`: ``(1 - tile_share)`` of it, handed out as below); the rest of them moves
through DRAM each time the schedule would fetch (store) the operand, as an off-chip operand's
would. ``tile_share = 1`` keeps none of them (the tensor is not kept on chip at all). The DRAM
count is that of a real schedule, so the pebble and compulsory bounds (:mod:`asicsim._src.hw.bounds`)
hold for it (``tests/hw/test_dram_bounds.py``).

Why a reserved share and not all the tiles leave: then every byte a tile takes is a byte less
kept, so the least-DRAM schedule is the one of the least tiles (a one-row sliver on a 256-row
array: a GPT-2 block of 8192 tokens on TPU v1 ran 4,000x slower under ``dram`` for 0.3 % fewer
bytes). With the share fixed, the bytes depend on the tiles only through their trip counts, as
everywhere else in the model, and the mapper searches the shares :data:`TILE_SHARES`.

Which streamed operand keeps the share first: the one the schedule fetches most often (ifmap
``T_n``, filter ``T_m``, ofmap once; ties ifmap, filter, ofmap): the least DRAM bytes for it.
"""

from __future__ import annotations

import functools
import itertools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from asicsim._src.hw.counts import ArrayHardware, GemmProblem, Schedule

#: the bit of :attr:`asicsim._src.hw.counts.Schedule.streamed` per operand
STREAM_BITS = {"ifmap": 1, "filter": 2, "ofmap": 4}
OPERANDS = tuple(STREAM_BITS)
#: the shares of a buffer (what its whole-kept tensors leave) a streaming schedule may reserve for
#: its tiles (the mapper searches each: :attr:`asicsim._src.hw.counts.Schedule.tile_share`)
TILE_SHARES = (1.0, 1 / 4, 1 / 16, 1 / 64)


def footprints(p: GemmProblem) -> dict:
    """Bytes of each operand per repetition (a conv's raw ifmap, sparse weights as stored)."""
    return {"ifmap": p.a_footprint, "filter": p.N * p.K * p.b_bytes, "ofmap": p.M * p.N * p.out_bytes}


def streams(streamed, operand: str):
    """Whether the schedule(s) ``streamed`` (bit masks) stream ``operand``'s overflow."""
    if isinstance(streamed, (int, float)) and streamed == 0:
        return False
    return np.floor(np.asarray(streamed, dtype=np.float64) / STREAM_BITS[operand]) % 2 >= 1


def kept_on_chip(p: GemmProblem, hw: ArrayHardware, buffer: int, streamed=0.0):
    """Bytes of the tensors kept whole in buffer ``buffer`` between operations: the footprints of
    the operands homed there that do not live in DRAM and whose overflow ``streamed`` does not
    stream."""
    foot = footprints(p)
    return sum(np.where(p.off_chip[k] | streams(streamed, k), 0.0, foot[k])
               for k in OPERANDS if hw.layout.home(k) == buffer)


def streamed_homes(p: GemmProblem, hw: ArrayHardware, streamed) -> list:
    """Per buffer, where (per element) a kept tensor homed there streams its overflow."""
    out = []
    for i in range(len(hw.capacity)):
        here = np.False_
        for k in OPERANDS:
            if hw.layout.home(k) == i:
                here = here | (np.asarray(streams(streamed, k), dtype=bool) & ~np.asarray(p.off_chip[k], dtype=bool))
        out.append(here)
    return out


def buffer_rows(p: GemmProblem, hw: ArrayHardware, spill: bool, streamed=0.0, share=1.0, db=False) -> list[tuple]:
    """Per buffer ``(a, b, c, budget)``: a schedule's tiles take ``a Mt Kt + b Kt Nt + c Mt Nt``
    bytes there (``a``: the A tile's bytes per element if the ifmap streams from DRAM into this
    buffer, off chip or its overflow ``streamed``; ``b`` the B tile's; ``c`` the partial sums' if
    they live here, plus the output staging's when the outputs leave through this buffer and
    partial sums live elsewhere), twice that when double-buffered, and ``budget`` is the capacity
    less the tensors kept whole there (:func:`kept_on_chip`; below zero where they do not fit),
    ``share`` of that where a streamed tensor is homed there. ``spill``: partial sums in the
    design's ``psum_spill`` buffer. ``db`` (bool or array): the rows of a double-buffered schedule
    where the design doubles only some operands' tiles (``hw.double_buffers``): the coefficient of
    an operand it does not double is halved, so that twice the row is the bytes the tiles take
    (the doubled ones twice, the others once); every operand doubled, the rows do not depend on it."""
    if not any_kept(p) or not np.any(streamed):  # nothing streams (the common case, fast)
        streamed, share = 0.0, 1.0
    lay = hw.layout
    off = {k: np.asarray(v, dtype=bool) | streams(streamed, k) for k, v in p.off_chip.items()}
    a_eff = p.a_bytes * np.minimum(p.a_footprint / np.maximum(p.M * p.K * p.a_bytes, 1e-300), 1.0)
    psum_home = lay.psum_spill if spill else lay.home("psum")
    homes = streamed_homes(p, hw, streamed) if not (isinstance(share, float) and share == 1.0) else None
    some = not hw.doubles_all and np.any(db)

    def once(x, op):  # an operand's tile kept once in a double-buffered schedule: half its row
        return x * np.where(db, 0.5, 1.0) if some and op not in hw.double_buffers else x

    rows = []
    for i, cap in enumerate(hw.capacity):
        cap = np.asarray(cap, dtype=np.float64)
        a = once(np.where(off["ifmap"], a_eff, 0.0), "ifmap") if lay.home("ifmap") == i else 0.0
        b = once(np.where(off["filter"], p.b_bytes, 0.0), "filter") if lay.home("filter") == i else 0.0
        c = once(p.acc_bytes, "psum") if psum_home == i else 0.0
        if lay.home("ofmap") == i and psum_home != i:
            c = c + once(np.where(off["ofmap"], p.out_bytes, 0.0), "ofmap")
        budget = cap - kept_on_chip(p, hw, i, streamed)
        rows.append((a, b, c, budget if homes is None else np.where(homes[i], budget * share, budget)))
    return rows


def any_kept(p: GemmProblem) -> bool:
    """Whether any operand of ``p`` is kept on chip anywhere."""
    return not all(np.all(np.asarray(p.off_chip[k], dtype=bool)) for k in OPERANDS)


def resident_bytes(p: GemmProblem, hw: ArrayHardware, s: Schedule, fetches: dict) -> dict | None:
    """Per operand kept on chip, the bytes of it its buffer keeps under schedule ``s`` (module
    docstring): its footprint where it is kept whole; where it streams, its part of ``(1 -
    s.tile_share)`` of what the whole-kept tensors leave of the buffer. None where nothing is
    kept on chip. ``fetches``: operand -> how often the schedule fetches (stores) it per
    repetition, which orders the streamed ones."""
    if not any_kept(p):
        return None
    foot = footprints(p)
    whole_only = not np.any(s.streamed)  # nothing streams (the common case): fast
    out = {}
    for i, cap in enumerate(hw.capacity):
        mine = [k for k in OPERANDS if hw.layout.home(k) == i]
        if not mine:
            continue
        size = {k: np.where(p.off_chip[k], 0.0, foot[k]) for k in mine}
        if whole_only:  # every kept tensor whole: as much of each as the buffer holds
            for j, x in enumerate(mine):
                before = sum((size[y] for y in mine[:j]), start=0.0)
                out[x] = np.clip(np.asarray(cap, dtype=np.float64) - before, 0.0, size[x])
            continue
        flow = {k: np.asarray(streams(s.streamed, k), dtype=bool) for k in mine}
        left = (1.0 - np.asarray(s.tile_share, dtype=np.float64)) * np.maximum(
            np.asarray(cap, dtype=np.float64) - kept_on_chip(p, hw, i, s.streamed), 0.0)
        for x in mine:
            ahead = 0.0  # bytes of the streamed operands that keep their share before x
            for y in mine:
                if y != x:
                    first = (fetches[y] > fetches[x]) | ((fetches[y] == fetches[x]) & (OPERANDS.index(y) < OPERANDS.index(x)))
                    ahead = ahead + np.where(flow[y] & first, size[y], 0.0)
            # kept whole: all of it where the schedule fits (tiles.valid), else what the buffer holds
            before = sum((np.where(flow[y], 0.0, size[y]) for y in mine[:mine.index(x)]), start=0.0)
            whole = np.clip(np.asarray(cap, dtype=np.float64) - before, 0.0, size[x])
            out[x] = np.where(flow[x], np.clip(left - ahead, 0.0, size[x]), whole)
    return out


def keeps_all(p: GemmProblem, hw: ArrayHardware, streamed: float, share: float) -> np.ndarray:
    """Where (per element) the share ``1 - share`` of every buffer keeps all of the streamed kept
    tensors homed there: a smaller tile share then keeps no more and only fits fewer tiles."""
    foot = footprints(p)
    out = np.True_
    for i, cap in enumerate(hw.capacity):
        mine = [k for k in OPERANDS if hw.layout.home(k) == i]
        flowing = sum((np.where(np.asarray(streams(streamed, k), dtype=bool) & ~np.asarray(p.off_chip[k], dtype=bool),
                                foot[k], 0.0) for k in mine), start=0.0)
        room = (1.0 - share) * np.maximum(np.asarray(cap, dtype=np.float64) - kept_on_chip(p, hw, i, streamed), 0.0)
        out = out & (room >= flowing)
    return out


def stream_choices(p: GemmProblem, hw: ArrayHardware) -> tuple[list[float], np.ndarray]:
    """``(masks, where)``: the values of :attr:`~asicsim._src.hw.counts.Schedule.streamed` the search
    needs, 0 (every kept tensor whole) and every set of the kept operands, and where (per element)
    the sets other than 0 can win: where some buffer's kept tensors may not leave room for the
    largest tiles it can take. Elsewhere the kept tensors and the whole problem's tiles,
    double-buffered, fit every buffer, so a schedule that streams has a twin with the same tiles
    that keeps every tensor whole and moves no more DRAM bytes, so no more stall cycles or energy:
    streaming cannot win under any objective. Only 0 where that holds everywhere."""
    kept = [k for k in OPERANDS if not np.all(np.asarray(p.off_chip[k], dtype=bool))]
    tight = np.False_
    homes = (False, True) if hw.layout.psum_spill is not None else (False,)
    for sp in homes:
        for i, (a, b, c, budget) in enumerate(buffer_rows(p, hw, sp)):
            if any(hw.layout.home(k) == i for k in kept):
                tight = tight | (2 * (a * p.M * p.K + b * p.K * p.N + c * p.M * p.N) > budget)
    if not np.any(tight):
        return [0.0], tight
    masks = [0.0]
    for n in range(1, len(kept) + 1):
        for combo in itertools.combinations(kept, n):
            mask = float(sum(STREAM_BITS[k] for k in combo))
            # a set whose tensors kept whole overflow a buffer on every element has no schedule
            room = [budget for *_, budget in buffer_rows(p, hw, False, mask)]
            if np.any(functools.reduce(np.logical_and, [np.asarray(r) >= 0 for r in room])):
                masks.append(mask)
    return masks, tight
