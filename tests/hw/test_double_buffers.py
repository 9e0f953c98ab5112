"""Double buffering per operand (``array.double_buffers``) and whole tiles in the buffers' fit
(``array.whole_tiles``), issue 31.

TPU v1 double-buffers its weights in a Weight FIFO four 64 KiB tiles deep and, apart from it, its
accumulators (4096 x 256 x 32 bit: 2048 needed for peak, doubled so the compiler can double-buffer)
(Jouppi et al., ISCA 2017, arXiv:1704.04760, Sec. 2). Before the field a double-buffered schedule
doubled every tile: CNN0's 2888 x 256 partial-sum block (2.96 MB) fits the 4 MiB accumulators once,
not twice, so overlapping the weight fetches cost half the columns or a second weight pass.

Every figure below is a hand calculation from asicsim/_src/hw/counts.py's definitions (cycles: compute
is every fold's streamed cycles, fill/drain ``2R + C - 2``, a double-buffered stall ``X_e + X_d /
s + max(0, X_d - busy) (s - 1) / s`` over ``s`` tile steps)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw import (
    ArraySpec,
    BufferSpec,
    DesignError,
    DramSpec,
    PESpec,
    SystolicDesign,
    load_design,
)
from asicsim._src.hw.counts import (
    OUTPUTS,
    WEIGHTS,
    WS,
    ArrayHardware,
    BufferLayout,
    GemmProblem,
    Schedule,
    schedule_counts,
)
from asicsim._src.hw.design_files import list_designs
from asicsim._src.hw.tiles import valid

OPERANDS = ("ifmap", "filter", "ofmap", "psum")  # asicsim._src.hw.design_parts.OPERANDS (the default)
#: a 2 x 2 weight-stationary array, int8 operands, int32 partial sums, 1 byte per cycle of DRAM
ONE_BYTE_PER_CYCLE = 1.0


def hardware(caps, doubled=OPERANDS, whole=False, R=2, C=2):
    """Separate ifmap, filter, ofmap and psum buffers of ``caps`` bytes (``double_buffers`` passed
    only where it is not the default, so the whole-tile tests run on the code before the field)."""
    layout = BufferLayout(names=("ifmap", "filter", "ofmap", "psum"),
                          holds=(("ifmap",), ("filter",), ("ofmap",), ("psum",)))
    return ArrayHardware(rows=np.float64(R), cols=np.float64(C), dataflow=np.int64(WS),
                         capacity=tuple(np.float64(c) for c in caps), layout=layout,
                         dram_bytes_per_cycle=np.float64(ONE_BYTE_PER_CYCLE), whole_tiles=whole,
                         **({} if tuple(doubled) == OPERANDS else {"double_buffers": tuple(doubled)}))


def problem(M, N, K):
    """``Gemm(M, N, K)``, int8 in and out, int32 partial sums, every operand in DRAM."""
    f = np.float64
    return GemmProblem(M=f(M), N=f(N), K=f(K), a_bytes=f(1), b_bytes=f(1), acc_bytes=f(4), out_bytes=f(1),
                       a_footprint=f(M * K), reps=f(1), shared_weights=np.False_, density=f(1),
                       off_chip={k: np.True_ for k in ("ifmap", "filter", "ofmap")})


def outputs_schedule(Mt, Nt, Kt, db=True):
    return Schedule(np.float64(OUTPUTS), np.float64(Mt), np.float64(Nt), np.float64(Kt), np.bool_(db))


def test_only_the_listed_operands_transfers_overlap():
    """Gemm(4, 2, 2), outputs block 4 x 2, K in slivers of 1 (s = 2 steps), double-buffered.
    DRAM: A 4 x 2 = 8 B, B 2 x 2 = 4 B, C 4 x 2 = 8 B: X = 20 cycles. Busy: K = 2 over 1-row
    tiles is 2 row folds, 1 column fold, each streaming M = 4: compute 8, fill/drain 2R + C - 2 =
    4, busy 12. Every operand doubled: stall 20 / 2 + (20 - 12) / 2 = 14. Only the weights
    doubled: A's and C's 16 cycles stall, B's 4 overlap: 16 + 4 / 2 + 0 = 18. Single-buffered 20.
    (The old code has no ``double_buffers``: a TypeError.)"""
    p, s = problem(4, 2, 2), outputs_schedule(4, 2, 1)
    every = schedule_counts(p, hardware((64,) * 4), s)
    weights = schedule_counts(p, hardware((64,) * 4, ("filter",)), s)
    single = schedule_counts(p, hardware((64,) * 4, ("filter",)), outputs_schedule(4, 2, 1, db=False))
    for c in (every, weights, single):
        assert c.dram_bytes == 20 and c.cycles_compute == 8 and c.cycles_fill_drain == 4
    assert every.cycles_stall == 14
    assert weights.cycles_stall == 18
    assert single.cycles_stall == 20


def test_only_the_listed_operands_tiles_are_doubled():
    """The same schedule's tiles: A 4 x 1 = 4 B, B 1 x 2 = 2 B, partial sums 4 x 2 x 4 = 32 B,
    outputs staged 4 x 2 = 8 B (psum has a buffer of its own). Buffers of exactly one copy of A,
    two of B, one of C and of the partial sums (4, 4, 8, 32 B) fit it double-buffered only where
    the weights alone are doubled; single-buffered it fits either way. (Old code: a TypeError.)"""
    p, caps = problem(4, 2, 2), (4, 4, 8, 32)
    assert not valid(p, hardware(caps), outputs_schedule(4, 2, 1))
    assert valid(p, hardware(caps, ("filter",)), outputs_schedule(4, 2, 1))
    assert valid(p, hardware(caps), outputs_schedule(4, 2, 1, db=False))
    # one byte less of filter buffer: the doubled weight tile no longer fits
    assert not valid(p, hardware((4, 3, 8, 32), ("filter",)), outputs_schedule(4, 2, 1))
    # the partial sums doubled too: 64 B > 32
    assert not valid(p, hardware(caps, ("filter", "psum")), outputs_schedule(4, 2, 1))


def tpu_like(doubled=None):
    """A TPU v1 in miniature: 2 x 2 ws array moving whole 2 x 2 weight tiles, activations kept in a
    unified buffer (DRAM holds the weights only), an 8 B weight FIFO (two tiles) and 32 B of
    accumulators, 1 B per cycle."""
    kw = {} if doubled is None else {"double_buffers": doubled, "double_buffers_source": "test"}
    bufs = (BufferSpec(name="unified", holds=("ifmap", "ofmap"), capacity_kib=40 / 1024),
            BufferSpec(name="fifo", holds=("filter",), capacity_kib=8 / 1024),
            BufferSpec(name="acc", holds=("psum",), capacity_kib=32 / 1024))
    return SystolicDesign(name="tpu_like", technology_nm=45, clock_mhz=1000, static_power_w=0.0,
                          array=ArraySpec(rows=2, cols=2, dataflow="ws", whole_tiles=True, whole_tiles_source="test", **kw),
                          pe=PESpec(a_format="int8", b_format="int8", acc_format="int32"), buffers=bufs,
                          dram=DramSpec(kind="DDR4", bandwidth_gbps=1.0, holds=("filter",)))


@pytest.mark.parametrize("objective", ["latency", "balanced", "dram", "energy"])
def test_weights_overlap_without_halving_the_accumulators(objective):
    """Gemm(4, 2, 8) on :func:`tpu_like`: the 4 x 2 int32 partial-sum block is 32 B, the whole
    accumulator buffer. Weights alone doubled: block 4 x 2, K in 2-row slivers (a 2 x 2 tile, two
    in the FIFO), s = 4 steps, the 16 B of weights once: compute 4 folds x 4 = 16, fill/drain 4,
    stall 16 / 4 + max(16 - 20, 0) = 4: 24 cycles under every objective. Every tile doubled (the
    old rule), the best is 34.5 cycles (a 2-row block: the weights twice, 32 B; stall 32 / 8 +
    (32 - 20) 7 / 8 = 14.5) or 36 single-buffered (16 B exposed)."""
    r = sim.cost(sim.Gemm(4, 2, 8), tpu_like(["filter"]), objective=objective)
    assert r.cycles == 24 and r.cycles_stall == 4 and r.dram_bytes == 16
    assert (r.schedule["Mt"], r.schedule["Nt"], r.schedule["Kt"], r.schedule["double_buffered"]) == (4, 2, 2, True)
    old = sim.cost(sim.Gemm(4, 2, 8), tpu_like(), objective=objective)
    assert old.cycles in (34.5, 36.0)


def test_tpu_v1_cnn0_layer_keeps_its_block_and_overlaps_its_weights():
    """CNN0's layer (3x3, 256 -> 256 channels, 19 x 19 at batch 8: Gemm 2888 x 256 x 2304) on
    tpu_v1 at a quarter of its bandwidth (4x clock, Figure 11): the 2888 x 256 block stays in the
    accumulators (2.96 MB of 4 MiB, once), the 576 KiB of weights move once in nine 256 x 256
    tiles overlapped: X = 589,824 / (34e9 / 4 / 700e6) = 48,573.5 cycles, busy 25,992 + 766 (nine
    folds of 2,888 rows; 2 x 256 + 256 - 2), stall X / 9 + (X - busy) 8 / 9 = 24,788.9; 51,546.9
    cycles. Every tile doubled (the old rule) the best took 75,332 cycles per layer, and the paper's
    "about 2X" for 4x clock (Sec. 7) came out at 1.49 (tests/hw/test_tpu_v1_sensitivity.py)."""
    d = load_design("tpu_v1")
    assert d.array.double_buffers == ("filter",) and "four tiles deep" in d.array.double_buffers_source
    slow = dataclasses.replace(d, dram=dataclasses.replace(d.dram, bandwidth_gbps=d.dram.bandwidth_gbps / 4))
    r = sim.cost(sim.Conv(19, 19, 256, 256, 3, 3, padding=1, batch=8), slow)
    X = 2304 * 256 / (34e9 / 4 / 700e6)
    busy = 2888 * 9 + 766
    assert r.dram_bytes == 2304 * 256
    assert r.cycles == pytest.approx(busy + X / 9 + (X - busy) * 8 / 9, rel=1e-12)
    assert r.cycles == pytest.approx(51_546.85, abs=0.01)
    assert (r.schedule["Mt"], r.schedule["Nt"], r.schedule["tiles_k"]) == (2888, 256, 9)


# --- whole tiles take their padded bytes in the buffer ------------------------------------------
def test_a_block_that_fits_only_unpadded_is_refused():
    """ws, 2 x 2 array moving whole 2 x 2 weight tiles: a 3 x 3 weight block is 9 B but takes
    ceil(3 / 2) 2 x ceil(3 / 2) 2 = 16 B as whole tiles. A 12 B filter buffer held it before (the
    fit used the unpadded 9 B); now only 16 B does. Without whole tiles 9 B fit. (Fails on the
    old code: the first assertion.)"""
    p = problem(5, 3, 3)
    s = Schedule(np.float64(WEIGHTS), np.float64(5), np.float64(3), np.float64(3), np.False_)
    assert not valid(p, hardware((64, 12, 64, 64), whole=True), s)
    assert valid(p, hardware((64, 16, 64, 64), whole=True), s)
    assert valid(p, hardware((64, 9, 64, 64), whole=False), s)
    # the array's tile 1 column wide: each of the 3 columns pads to 2: 4 rows x 6 columns = 24 B
    narrow = dataclasses.replace(s, Na=np.float64(1))
    assert not valid(p, hardware((64, 23, 64, 64), whole=True), narrow)
    assert valid(p, hardware((64, 24, 64, 64), whole=True), narrow)


def small_fifo(fifo_bytes):
    bufs = (BufferSpec(name="ifmap", holds=("ifmap",), capacity_kib=64 / 1024),
            BufferSpec(name="fifo", holds=("filter",), capacity_kib=fifo_bytes / 1024),
            BufferSpec(name="ofmap", holds=("ofmap", "psum"), capacity_kib=64 / 1024))
    return SystolicDesign(name="fifo", technology_nm=45, clock_mhz=1000, static_power_w=0.0,
                          array=ArraySpec(rows=2, cols=2, dataflow="ws", whole_tiles=True, whole_tiles_source="test"),
                          pe=PESpec(a_format="int8", b_format="int8", acc_format="int32"), buffers=bufs,
                          dram=DramSpec(kind="DDR4", bandwidth_gbps=1.0))


def test_the_mapper_picks_a_block_whose_whole_tiles_fit():
    """Gemm(5, 3, 3) on a 2 x 2 array with whole 2 x 2 weight tiles and a 6 B weight buffer: one
    whole tile (4 B) fits, two do not, so a weight block is at most 2 x 2, single-buffered. The
    least DRAM: outputs block 5 x 2, K slivers of 2: A 15 B x ceil(3 / 2) = 30, B as whole tiles
    (4 rows x 4 columns) 16, C 15: 61 B. The old code took a 2 x 3 block (6 B unpadded, 8 B
    padded: it does not fit) for 46 B."""
    r = sim.cost(sim.Gemm(5, 3, 3), small_fifo(6), objective="dram")
    s = r.schedule
    assert math.ceil(s["Kt"] / 2) * 2 * math.ceil(s["Nt"] / 2) * 2 * (2 if s["double_buffered"] else 1) <= 6
    assert r.dram_bytes == 61


def test_a_weight_buffer_below_one_whole_tile_says_so():
    """A 3 B weight buffer cannot hold one whole 2 x 2 tile: no ws schedule fits (old code: it priced
    the GEMM on 1-row slivers)."""
    with pytest.raises(ValueError, match="whole_tiles"):
        sim.cost(sim.Gemm(5, 3, 3), small_fifo(3))


# --- the design field ------------------------------------------------------------------------
def test_every_other_shipped_design_doubles_every_tile():
    """The default keeps every other design's figures: a schedule doubles all its tiles or none."""
    assert ArraySpec(rows=2, cols=2, dataflow="ws").double_buffers == OPERANDS
    for name in list_designs("systolic"):
        if name != "tpu_v1":
            assert load_design(name).array.double_buffers == OPERANDS, name


def test_listing_every_operand_is_the_default():
    base = tpu_like()
    every = tpu_like(list(reversed(OPERANDS)))
    for op in (sim.Gemm(4, 2, 8), sim.Gemm(7, 5, 3)):
        assert sim.cost(op, base).row() == sim.cost(op, every).row()


@pytest.mark.parametrize(("fields", "bad"), [
    ({"double_buffers": ["filter"]}, "double_buffers_source"),
    ({"double_buffers": ["filter"], "double_buffers_source": " "}, "double_buffers_source"),
    ({"double_buffers": ["weights"], "double_buffers_source": "x"}, "double_buffers"),
    ({"double_buffers": ["filter", "filter"], "double_buffers_source": "x"}, "double_buffers"),
    ({"double_buffers": "filter", "double_buffers_source": "x"}, "double_buffers"),
    ({"double_buffers": ["filter"], "double_buffers_source": 3}, "double_buffers_source"),
])
def test_bad_double_buffers_name_the_field(fields, bad):
    with pytest.raises(DesignError) as e:
        ArraySpec(rows=2, cols=2, dataflow="ws", **fields)
    assert f"{bad} = " in str(e.value)


def test_empty_list_is_allowed_with_a_source():
    """No operand doubled: a double-buffered schedule is a single-buffered one (every transfer stalls)."""
    a = ArraySpec(rows=2, cols=2, dataflow="ws", double_buffers=[], double_buffers_source="test")
    assert a.double_buffers == ()
    p, s = problem(4, 2, 2), outputs_schedule(4, 2, 1)
    assert schedule_counts(p, hardware((64,) * 4, ()), s).cycles_stall == 20
