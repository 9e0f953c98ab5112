"""Tensors kept on chip between operations, and what a schedule does when they outgrow their buffer.

An operand the design's DRAM does not hold (TPU v1's activations live in its unified buffer; an
RNN's hidden state never leaves the chip) is *kept on chip*: it stays in its home buffer between
operations, and a schedule reads it (writes it) there in place, without tiles of its own. When the
kept tensors do not fit beside the tiles, the schedule *streams the overflow* of some of them
(:attr:`asicsim.hw.counts.Schedule.streamed`, a bit per operand, :data:`STREAM_BITS`): such an
operand's tiles take buffer space exactly as an off-chip operand's do (:func:`buffer_rows`), the
buffer keeps as much of the tensor as is left beside the tiles and the tensors kept whole
(:func:`resident_bytes`), and the rest moves through DRAM each time the schedule would fetch
(store) the operand, as an off-chip operand's would. Streaming every byte (nothing kept) is the
case where nothing is left; keeping less than what is left is never better for any objective
(the same tiles and steps, more DRAM bytes, cycles and energy), so the kept share is what is left.
The DRAM count is then that of a real schedule: the pebble and compulsory bounds
(:mod:`asicsim.hw.bounds`) hold for it (``tests/hw/test_dram_bounds.py``).

Which operand keeps what is left first: those kept whole (the schedule assumes them resident),
then the streamed ones in decreasing order of how often the schedule fetches them (ifmap ``T_n``,
filter ``T_m``, ofmap once; ties ifmap, filter, ofmap): the least DRAM bytes for the tiles.
"""

from __future__ import annotations

import functools
import itertools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from asicsim.hw.counts import ArrayHardware, GemmProblem, Schedule

#: the bit of :attr:`asicsim.hw.counts.Schedule.streamed` per operand
STREAM_BITS = {"ifmap": 1, "filter": 2, "ofmap": 4}
OPERANDS = tuple(STREAM_BITS)


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


def buffer_rows(p: GemmProblem, hw: ArrayHardware, spill: bool, streamed=0.0) -> list[tuple]:
    """Per buffer ``(a, b, c, budget)``: a schedule's tiles take ``a Mt Kt + b Kt Nt + c Mt Nt``
    bytes there (``a``: the A tile's bytes per element if the ifmap streams from DRAM into this
    buffer, off chip or its overflow ``streamed``; ``b`` the B tile's; ``c`` the partial sums' if
    they live here, plus the output staging's when the outputs leave through this buffer and
    partial sums live elsewhere), twice that when double-buffered, and ``budget`` is the capacity
    less the tensors kept whole there (:func:`kept_on_chip`; below zero where they do not fit).
    ``spill``: partial sums in the design's ``psum_spill`` buffer."""
    lay = hw.layout
    off = {k: np.asarray(v, dtype=bool) | streams(streamed, k) for k, v in p.off_chip.items()}
    a_eff = p.a_bytes * np.minimum(p.a_footprint / np.maximum(p.M * p.K * p.a_bytes, 1e-300), 1.0)
    psum_home = lay.psum_spill if spill else lay.home("psum")
    rows = []
    for i, cap in enumerate(hw.capacity):
        cap = np.asarray(cap, dtype=np.float64)
        a = np.where(off["ifmap"], a_eff, 0.0) if lay.home("ifmap") == i else 0.0
        b = np.where(off["filter"], p.b_bytes, 0.0) if lay.home("filter") == i else 0.0
        c = p.acc_bytes if psum_home == i else 0.0
        if lay.home("ofmap") == i and psum_home != i:
            c = c + np.where(off["ofmap"], p.out_bytes, 0.0)
        rows.append((a, b, c, cap - kept_on_chip(p, hw, i, streamed)))
    return rows


def any_kept(p: GemmProblem) -> bool:
    """Whether any operand of ``p`` is kept on chip anywhere."""
    return not all(np.all(np.asarray(p.off_chip[k], dtype=bool)) for k in OPERANDS)


def resident_bytes(p: GemmProblem, hw: ArrayHardware, s: Schedule, fetches: dict) -> dict | None:
    """Per operand kept on chip, the bytes of it the buffer keeps under schedule ``s`` (module
    docstring; the operand's footprint where it is kept whole and fits); None where nothing is
    kept on chip. ``fetches``: operand -> how often the schedule fetches (stores) it per
    repetition, which orders the streamed ones."""
    if not any_kept(p):
        return None
    foot = footprints(p)
    Ma = s.Mt if s.Ma is None else s.Ma
    Na = s.Nt if s.Na is None else s.Na
    homes = (False, True) if hw.layout.psum_spill is not None else (False,)
    rows = {sp: buffer_rows(p, hw, sp, s.streamed) for sp in homes}
    out = {}
    for i, cap in enumerate(hw.capacity):
        mine = [k for k in OPERANDS if hw.layout.home(k) == i]
        if not mine:
            continue

        def used(row):
            a, b, c, _ = row
            return a * s.Mt * s.Kt + b * s.Kt * s.Nt + c * Ma * Na

        use = used(rows[False][i]) if len(homes) == 1 else np.where(s.psum_spill, used(rows[True][i]),
                                                                      used(rows[False][i]))
        left = np.asarray(cap, dtype=np.float64) - use * np.where(s.double_buffered, 2.0, 1.0)
        size = {k: np.where(p.off_chip[k], 0.0, foot[k]) for k in mine}
        whole = {k: ~np.asarray(streams(s.streamed, k), dtype=bool) for k in mine}
        for x in mine:
            ahead = 0.0  # bytes of the operands that keep their share before x
            for y in mine:
                if y == x:
                    continue
                first = OPERANDS.index(y) < OPERANDS.index(x)
                before = (whole[y] & ~whole[x]) | ((whole[y] == whole[x]) & (
                    (fetches[y] > fetches[x]) | ((fetches[y] == fetches[x]) & first)))
                ahead = ahead + np.where(before, size[y], 0.0)
            out[x] = np.clip(left - ahead, 0.0, size[x])
    return out


def stream_choices(p: GemmProblem, hw: ArrayHardware) -> tuple[list[float], np.ndarray]:
    """``(masks, where)``: the values of :attr:`~asicsim.hw.counts.Schedule.streamed` the search
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
