"""Tensors kept on chip between operations that outgrow their buffer (asicsim/_src/hw/residency.py): the
overflow streams from DRAM through tiles of its own, the buffer keeps what is left beside the
tiles. Hand counts of small schedules, and the case the DRAM-bound property test found (issue 31)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw import ArraySpec, BufferSpec, DramSpec, PESpec, SystolicDesign
from asicsim._src.hw.cost import bytes_per_element, resolve_formats
from asicsim._src.hw.counts import ACTIVATIONS, OUTPUTS, ArrayHardware, Schedule, schedule_counts
from asicsim._src.hw.pipeline import gemm_problem, layout
from asicsim._src.hw.residency import stream_choices
from asicsim._src.hw.tiles import valid


def unified(kib_bytes, filter_bytes=1000, psum_bytes=1000):
    """TPU v1's layout, small: activations and outputs kept in one unified buffer (the DRAM holds
    only weights), a weight buffer and a partial-sum buffer, int8 with int32 partial sums."""
    bufs = (BufferSpec(name="unified", holds=("ifmap", "ofmap"), capacity_kib=kib_bytes / 1024),
            BufferSpec(name="weights", holds=("filter",), capacity_kib=filter_bytes / 1024),
            BufferSpec(name="acc", holds=("psum",), capacity_kib=psum_bytes / 1024))
    return SystolicDesign(name="u", technology_nm=45, clock_mhz=1000, static_power_w=0.0,
                          array=ArraySpec(rows=2, cols=2, dataflow="os"),
                          pe=PESpec(a_format="int8", b_format="int8", acc_format="int32"), buffers=bufs,
                          dram=DramSpec(kind="DDR4", bandwidth_gbps=1.0, holds=("filter",)))


def problem(op, d):
    bpe = bytes_per_element(resolve_formats(d, None))
    p = gemm_problem(op.lower(), [op], d, bpe)
    hw = ArrayHardware(rows=np.float64(d.array.rows), cols=np.float64(d.array.cols),
                       dataflow=np.int64({"os": 0, "ws": 1, "is": 2}[d.array.dataflow]),
                       capacity=tuple(np.float64(b.capacity_bytes) for b in d.buffers), layout=layout(d),
                       dram_bytes_per_cycle=np.asarray(d.dram_bytes_per_cycle))
    return p, hw


def f(x):
    return np.float64(x)


# Gemm(4, 6, 8), int8: A 32 bytes, B 48, C 24. Each row: (family, Mt, Nt, Kt, Ma, Na, double
# buffered, streamed, tile share, unified buffer bytes) -> (A, B, C DRAM bytes), counted by hand:
HAND = [
    # A and C fit whole (56 <= 60): only B moves, once per M block: 48 x T_m 2 = 96
    ((OUTPUTS, 2, 3, 8, 2, 3, False, 0, 1.0, 60), (0, 96, 0)),
    # A streams, C whole (24): the tiles may take half of the 26 bytes left (a 1 x 8 A tile: 8),
    # the other 13 keep A; its other 19 bytes are read per N block (T_n 2): 38; B per M block: 4 x 48
    ((OUTPUTS, 1, 3, 8, 1, 3, False, 1, 0.5, 50), (38, 192, 0)),
    # A and C stream, tiles in half of 50 (A 2 x 8 = 16 and C's 2 x 3 staging 6: 22 <= 25), 25
    # kept: A is fetched T_n = 2 times, C once, so A keeps them: (32 - 25) x 2 = 14, C 24 written
    ((OUTPUTS, 2, 3, 8, 2, 3, False, 5, 0.5, 50), (14, 96, 24)),
    # the same double-buffered needs 44: the tiles take the whole buffer, nothing kept
    # (tile share 1: the tensors are not kept on chip at all): A 32 x 2, C 24
    ((OUTPUTS, 2, 3, 8, 2, 3, True, 5, 1.0, 50), (64, 96, 24)),
    # activations resident (A read once, B per M block: T_m 2), both stream, tiles 2 x 8 + 1 x 6 =
    # 22 in half of 50: A and C are both fetched once, the tie goes to A: 32 - 25 = 7, C 24
    ((ACTIVATIONS, 2, 6, 8, 1, 6, False, 5, 0.5, 50), (7, 96, 24)),
    # a quarter of 200 for the tiles, 150 kept: both tensors (56) stay whole
    ((OUTPUTS, 2, 3, 8, 2, 3, False, 5, 0.25, 200), (0, 96, 0)),
]


@pytest.mark.parametrize(("s", "want"), HAND)
def test_dram_bytes_by_hand(s, want):
    fam, Mt, Nt, Kt, Ma, Na, db, streamed, share, ub = s
    p, hw = problem(sim.Gemm(4, 6, 8), unified(ub))
    sched = Schedule(f(fam), f(Mt), f(Nt), f(Kt), np.bool_(db), np.False_, f(Ma), f(Na), f(streamed), f(share))
    assert bool(valid(p, hw, sched))
    c = schedule_counts(p, hw, sched)
    assert (float(c.dram_ifmap_bytes[0]), float(c.dram_filter_bytes[0]), float(c.dram_ofmap_bytes[0])) == want
    assert float(c.dram_psum_bytes[0]) == 0


def test_tiles_beyond_their_share_do_not_fit():
    # tiles of 16 + 6 = 22 bytes in a quarter of 50 (12.5): not valid; in half: valid
    p, hw = problem(sim.Gemm(4, 6, 8), unified(50))
    for share, ok in ((0.25, False), (0.5, True)):
        s = Schedule(f(OUTPUTS), f(2), f(3), f(8), np.False_, np.False_, f(2), f(3), f(5), f(share))
        assert bool(valid(p, hw, s)) is ok


def test_a_tensor_kept_whole_must_fit():
    # A and C whole take 56 bytes: in a 50-byte buffer no schedule keeping both whole is valid
    # (before: the tiles took the other half and the count took the capacity off each tensor)
    p, hw = problem(sim.Gemm(4, 6, 8), unified(50))
    sched = Schedule(f(OUTPUTS), f(1), f(1), f(1), np.False_, np.False_, f(1), f(1), f(0), f(1))
    assert not bool(valid(p, hw, sched))
    # and the search offers streaming exactly where the kept tensors leave too little room
    assert stream_choices(p, hw)[0] == [0.0, 1.0, 4.0, 5.0]
    assert stream_choices(*problem(sim.Gemm(4, 6, 8), unified(1000)))[0] == [0.0]


def test_the_found_case_by_hand():
    # tpu_v1 with 1/64 of its buffers, 1 x 1 array, Gemm(1080, 1450, 2024) under `dram`: A (2.19
    # MB) and C (1.57 MB) overflow the 393,216-byte unified buffer, so both stream. The least
    # bytes: a 180 x 2024 activation block (364,320 bytes) takes the whole buffer (tile share 1,
    # nothing kept; half the buffer holds a 97-row block and B is read 12 times, not 6): A
    # 2,185,920 once, B 1450 x 2024 x 6 M blocks = 17,608,800, C 1,566,000 written: 21,360,720
    # (before: 5,900,288, below the pebble bound 5,900,302.7)
    d = sim.hw.load_design("tpu_v1")
    d = dataclasses.replace(d, array=dataclasses.replace(d.array, rows=1, cols=1),
                            buffers=tuple(dataclasses.replace(b, capacity_kib=b.capacity_kib / 64) for b in d.buffers))
    p, hw = problem(sim.Gemm(1080, 1450, 2024), d)
    for share, Mt, want in ((1.0, 180, 21_360_720), (0.5, 97, 2_185_920 - 196_608 + 1450 * 2024 * 12 + 1_566_000)):
        sched = Schedule(f(ACTIVATIONS), f(Mt), f(2), f(2024), np.False_, np.False_, f(Mt), f(2), f(5), f(share))
        assert bool(valid(p, hw, sched))
        assert float(schedule_counts(p, hw, sched).dram_bytes[0]) == want
    r = sim.hw.cost_many([sim.Gemm(1080, 1450, 2024)], d, objective="dram")[0]
    assert r.dram_bytes == 21_360_720 and r.schedule["family"] == "activations" and r.schedule["Mt"] == 180
    assert "none of them kept on chip" in r.mapping
