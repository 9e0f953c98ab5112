"""The physical cost model (asicsim.cost, gemm_sweep): hand calculations per dataflow, SCALE-Sim's own
numbers where the two modes must agree, invariants, published TPU v1 anchors, and bad input."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import asicsim as sim
from asicsim._src.hw import (
    BOUNDS,
    ArraySpec,
    BufferSpec,
    Conv,
    DesignError,
    DramSpec,
    Elementwise,
    Gemm,
    OperationError,
    PESpec,
    Rnn,
    SystolicDesign,
    VectorUnitSpec,
    cost,
    cost_table,
    gemm_sweep,
    multiplier_energy_pj,
    sram_access_energy_pj,
)
from asicsim._src.hw.operations import weight_store_bits
from asicsim._src.hw.power_spec import PowerSpec

GOLDEN = Path(__file__).parent / "golden"


def design(rows=2, cols=2, dataflow="os", *, ifmap=1 << 20, filter=1 << 20, ofmap=1 << 20, psum=None,
           double=False, bw_bytes_per_cycle=1e6, holds=("ifmap", "filter", "ofmap"), zero="compute",
           fmts=("int8", "int8", "int32"), vector=None) -> SystolicDesign:
    """A test design at 45 nm and 1 GHz (one cycle = 1 ns; bandwidth in bytes per cycle); buffer
    capacities in bytes; ``psum`` None: partial sums share the ofmap buffer. No static power and
    no chip/board overheads (hand energies are the array's, buffers' and DRAM's alone)."""
    bufs = [BufferSpec(name=n, holds=(n,), capacity_kib=c / 1024, double_buffered=double)
            for n, c in (("ifmap", ifmap), ("filter", filter), ("ofmap", ofmap))]
    if psum is not None:
        bufs.append(BufferSpec(name="psum", holds=("psum",), capacity_kib=psum / 1024, double_buffered=double))
    return SystolicDesign(
        name="t", technology_nm=45, clock_mhz=1000, static_power_w=0.0,
        power=PowerSpec(control_fraction=0.0, dram_background_w=0.0, vr_efficiency=1.0),
        array=ArraySpec(rows=rows, cols=cols, dataflow=dataflow, zero_weights=zero),
        pe=PESpec(a_format=fmts[0], b_format=fmts[1], acc_format=fmts[2]), buffers=tuple(bufs),
        dram=DramSpec(kind="DDR4", bandwidth_gbps=bw_bytes_per_cycle, holds=holds),
        vector=None if vector is None else VectorUnitSpec(lanes=vector))


# --- hand calculations: GEMM M=4, N=3, K=5 on a 2x2 array, int8 operands ------------------------
# os: Sr=M=4, Sc=N=3, T=K=5: rf=2, cf=2, 4 folds; ws: Sr=K=5, Sc=N=3, T=M=4: rf=3, cf=2;
# is: Sr=K=5, Sc=M=4, T=N=3: rf=3, cf=2. Fill/drain 2R+C-2 = 4 once; no reload since T >= R.
HAND = {
    "os": dict(compute=4 * 5, ifmap_reads=2 * 4 * 5, filter_reads=2 * 3 * 5, psum=0, mapping=12 / 16),
    "ws": dict(compute=6 * 4, ifmap_reads=2 * 4 * 5, filter_reads=3 * 5, psum=3 * 4 * 3, mapping=15 / 24),
    "is": dict(compute=6 * 3, ifmap_reads=4 * 5, filter_reads=2 * 3 * 5, psum=3 * 4 * 3, mapping=20 / 24),
}


@pytest.mark.parametrize("df", ["os", "ws", "is"])
def test_hand_gemm_every_dataflow(df):
    r = cost(Gemm(4, 3, 5), design(dataflow=df))
    h = HAND[df]
    assert r.cycles_compute == h["compute"]
    assert r.cycles_fill_drain == 2 * 2 + 2 - 2
    assert r.macs == 60 and r.mapping_efficiency == pytest.approx(h["mapping"])
    t = r.traffic
    assert t["sram.ifmap.reads"] == h["ifmap_reads"] and t["sram.ifmap.reads_bytes"] == h["ifmap_reads"]
    assert t["sram.filter.reads"] == h["filter_reads"]
    assert t["sram.psum.writes"] == h["psum"] and t["sram.psum.reads"] == h["psum"]
    assert t["sram.psum.writes_bytes"] == 4 * h["psum"]  # int32 partial sums
    assert t["sram.ofmap.writes"] == 12
    # everything fits: DRAM moves the compulsory footprints once (int8: one byte each)
    assert (t["dram.ifmap.reads_bytes"], t["dram.filter.reads_bytes"], t["dram.ofmap.writes_bytes"]) == (20, 15, 12)
    assert t["sram.ifmap.writes"] == 20 and t["sram.ofmap.reads"] == 12  # fills and drains
    # stall: bandwidth 1e6 B/cycle; single-buffered the transfer is exposed in full, double-buffered
    # the first of the tile steps' share
    steps = r.schedule["tiles_m"] * r.schedule["tiles_n"] * r.schedule["tiles_k"]
    assert r.cycles_stall == pytest.approx(47 / 1e6 / (steps if r.schedule["double_buffered"] else 1))
    adds = (3 - 1) * 12 if df != "os" else 0  # ws/is add row folds' partial sums in the accumulator
    e_mult = multiplier_energy_pj("int8", "int8").pj
    assert r.energy_pj["mult"] == pytest.approx(60 * e_mult)
    assert r.energy_pj["add"] == pytest.approx((60 + adds) * sim.hw.adder_energy_pj("int32").pj)


def test_a_partial_fold_still_loads_a_whole_tile():
    # issue 17 item 4: a 256x256 ws array loads 256-row weight tiles even for a 600x600 matrix.
    # Here ws, M=1 on 4x4, K=6 as one 6-row tile: folds of 4 and 2 weight rows; loading the second
    # still takes R=4 cycles, 3 more than the 1-cycle stream: fill/drain (2*4 + 4 - 2) + 3, as for
    # K=8. (The mapper takes K=6 as two 3-row tiles instead: each fold loads 3 rows, 2 more than
    # the stream: 10 + 2; issue 31, a schedule may use part of the array.)
    from asicsim._src.hw.counts import OUTPUTS, ArrayHardware, Schedule, schedule_counts
    from asicsim._src.hw.pipeline import gemm_problem, layout

    d = design(4, 4, "ws")
    for k in (6, 8):
        op = Gemm(1, 4, k)
        p = gemm_problem(op.lower(), [op], d, {"ifmap": 1.0, "filter": 1.0, "psum": 4.0, "ofmap": 1.0})
        hw = ArrayHardware(rows=np.float64(4), cols=np.float64(4), dataflow=np.int64(1),
                           capacity=tuple(np.float64(b.capacity_bytes) for b in d.buffers), layout=layout(d),
                           dram_bytes_per_cycle=np.float64(d.dram_bytes_per_cycle))
        c = schedule_counts(p, hw, Schedule(np.float64(OUTPUTS), np.float64(1), np.float64(4), np.float64(k),
                                            np.False_))
        assert (float(c.cycles_fill_drain[0]), float(c.cycles_compute[0])) == (10 + 3, 2)
    six = cost(Gemm(1, 4, 6), design(4, 4, "ws"))
    assert (six.cycles_fill_drain, six.cycles_compute, six.schedule["Kt"]) == (10 + 2, 2, 3)


def test_hand_reload_when_stream_is_shorter_than_the_array():
    # ws, M=1 on a 4x4 array, K=8, N=4: rf=2, cf=1, T=1; the second fold's weight reload (R=4
    # rows) outlasts the first fold's 1-cycle stream by 3 cycles: fill/drain = (2*4 + 4 - 2) + 3
    r = cost(Gemm(1, 4, 8), design(4, 4, "ws"))
    assert (r.cycles_compute, r.cycles_fill_drain) == (2, 10 + 3)
    assert r.bound == "occupancy"


def test_hand_partial_sums_fill_their_buffer():
    # ws, M=20, N=2, K=5 on 2x2, operand buffers 1 MiB, 64 B of int32 partial sums (16). DRAM
    # objective, by hand over the families (A 100 B, B 10 B, C 40 B, int8):
    #   outputs resident: Nt*=clip(sqrt(100*2*16/(10*20)),..,2)=2 -> Mt=8, T_m=3: 100+3*10+40=170
    #   weights resident: K x 2 block, A in 8-row slivers (8 x 2 psums): 100+10+40=150 (compulsory)
    #   activations resident: 16 x K block, B in 1-column slivers, T_m=2: 100+2*10+40=160
    # (ties on bytes go to the fastest: 2-row slivers, double-buffered: ten steps hide more of the
    # transfers than five 4-row ones, issue 31)
    r = cost(Gemm(20, 2, 5), design(2, 2, "ws", psum=64), objective="dram")
    assert r.dram_bytes == 150 == r.dram_bound_bytes
    assert r.schedule == {"family": "weights", "Mt": 2, "Nt": 2, "Kt": 5, "tiles_m": 10, "tiles_n": 1,
                          "tiles_k": 1, "double_buffered": True, "psum_spill": False, "streamed": 0,
                          "tile_share": 1.0, "fold_rows": 2, "fold_cols": 2}  # folds: the whole 2 x 2 array
    # the weights are loaded into the array once per 2-row sliver: 10 x 10 reads; rf=3 row folds
    assert r.traffic["sram.filter.reads"] == 5 * 2 * 10
    assert r.cycles_compute == 3 * 20
    # one int32 partial sum of room: the K x 2 weight block stays resident and the array works
    # through it one column (a 1 x 1 partial-sum tile) at a time: A once, the compulsory 150 B
    # (issue 31; with the array's tile tied to the block: 1-row slivers against a K x 1 block, A
    # twice, 250 B); partial sums never spill to DRAM
    r = cost(Gemm(20, 2, 5), design(2, 2, "ws", psum=4), objective="dram")
    assert r.dram_bytes == 100 + 10 + 40
    assert (r.schedule["Nt"], r.schedule["tiles_n"]) == (2, 1)
    assert r.traffic["dram.psum.writes_bytes"] == r.traffic["dram.psum.reads_bytes"] == 0


def test_hand_small_buffers_trade_reuse():
    # os M=4, N=3, K=5 on 2x2, int8 A (20 B) and B (15 B), int32 C: a 10 B ifmap buffer alone
    # still reaches the compulsory 47 B (B resident, A streamed in 2-row slivers)
    r = cost(Gemm(4, 3, 5), design(dataflow="os", ifmap=10), objective="dram")
    assert r.dram_bytes == 47 == r.dram_bound_bytes
    # every buffer small (ifmap 10, filter 10, ofmap 16 B = 4 partial sums), by hand:
    #   weights resident K x 2 (10 B), A 2-row slivers, T_n=2: 2*20+15+12=67
    #   activations resident 2 x K (10 B), B 2-column slivers (4 psums), T_m=2: 20+2*15+12=62
    #   outputs resident 2 x 2, T_m=T_n=2: 2*20+2*15+12=82
    r = cost(Gemm(4, 3, 5), design(dataflow="os", ifmap=10, filter=10, ofmap=16), objective="dram")
    assert r.dram_bytes == 62 and r.schedule["family"] == "activations"
    assert r.dram_bytes >= r.dram_bound_bytes == 47


def test_hand_stalls_per_tile_step():
    # schedule_counts directly: os M=4, N=3, K=5 on 2x2, outputs resident 2 x 3, T_m=2 (2 steps):
    # DRAM A + 2 B + C = 20+30+12 = 62 B over 1 B/cycle; busy: rows folds ceil(2/2)*2=2, column
    # folds 2, compute 2*2*5=20, fill/drain 2*2+2-2=4 (no reload: the stream of 5 >= 2 rows)
    from asicsim._src.hw.counts import OUTPUTS, ArrayHardware, Schedule, schedule_counts
    from asicsim._src.hw.pipeline import gemm_problem, layout
    d = design(dataflow="os", bw_bytes_per_cycle=1)
    op = Gemm(4, 3, 5)
    p = gemm_problem(op.lower(), [op], d, {"ifmap": 1.0, "filter": 1.0, "psum": 4.0, "ofmap": 1.0})
    hw = ArrayHardware(rows=np.float64(2), cols=np.float64(2), dataflow=np.int64(0),
                       capacity=tuple(np.float64(b.capacity_bytes) for b in d.buffers), layout=layout(d),
                       dram_bytes_per_cycle=np.float64(1))
    for db, stall in ((False, 62), (True, 62 / 2 + (62 - 24) / 2)):
        c = schedule_counts(p, hw, Schedule(np.float64(OUTPUTS), np.float64(2), np.float64(3), np.float64(5),
                                            np.asarray(db)))
        assert (float(c.dram_bytes[0]), float(c.cycles_compute[0]), float(c.cycles_fill_drain[0])) == (62, 20, 4)
        assert float(c.cycles_stall[0]) == pytest.approx(stall)
    # through the mapper: whole tiles in one step (24 + 47 cycles, nothing overlaps) or smaller
    # double-buffered steps, whichever is faster
    r = cost(op, d, objective="latency")
    assert r.cycles <= 24 + 47 and r.bound == "bandwidth"


def test_hand_energy_of_buffers_and_dram():
    d = design(dataflow="os")
    r = cost(Gemm(4, 3, 5), d)
    per_word = sram_access_energy_pj(1024, 8).pj  # 1 MiB buffers of 8-bit words
    ifmap_words = 40 + 20  # array reads + DRAM fills
    assert r.energy_pj["buffer.ifmap"] == pytest.approx(ifmap_words * per_word)
    # ofmap buffer: 12 writes + 12 drains, no partial sums (os)
    assert r.energy_pj["buffer.ofmap"] == pytest.approx(24 * per_word)
    assert r.energy_pj["dram"] == pytest.approx(47 * 8 * sim.hw.dram_energy_pj_per_bit("DDR4").pj)
    assert r.energy_static_pj == 0.0  # static_power_w = 0, no DRAM background
    assert r.energy_pj["control"] == r.energy_pj["vr_loss.dynamic"] == 0.0
    assert r.energy_total_pj == pytest.approx(sum(r.energy_pj.values()))


def test_conv_lowering_padding_stride_depthwise():
    c = Conv(7, 9, 3, 5, 3, 2, stride=2, padding=1, batch=2)
    assert (c.out_h, c.out_w) == ((7 + 2 - 3) // 2 + 1, (9 + 2 - 2) // 2 + 1)
    (low,) = c.lower()
    assert (low.M, low.N, low.K, low.reps) == (2 * 4 * 5, 5, 3 * 2 * 3, 1)
    assert low.ifmap_elems == 2 * 7 * 9 * 3  # the raw tensor, not the im2col matrix
    assert Conv(8, 8, 4, 4, 3, 3, padding="same", stride=2).out_h == 4
    dw = Conv(16, 16, 32, 32, 3, 3, padding=1, groups=32)
    (low,) = dw.lower()
    assert (low.M, low.N, low.K, low.reps) == (256, 1, 9, 32)
    r = cost(dw, design(4, 4, "ws"))
    assert r.macs == 256 * 9 * 32
    assert r.mapping_efficiency == pytest.approx(9 / 12 * 1 / 4)  # K=9 on 3 row folds, 1 of 4 cols
    # the ifmap crosses DRAM once however often im2col re-reads it
    assert r.traffic["dram.ifmap.reads_bytes"] == 16 * 16 * 32


def test_persistent_rnn_weights_resident_only_when_they_fit():
    weights = 3 * 256 * 256  # GRU recurrent weights, int8
    fits = design(16, 16, "ws", filter=4 * weights, vector=16)
    tight = design(16, 16, "ws", filter=weights // 4, vector=16)
    op = Rnn("gru", 256, batch=4, steps=20)
    a, b = cost(op, fits), cost(op, tight)
    # fits: input and recurrent weights come from DRAM once; tight: re-fetched on (almost) every step
    assert a.traffic["dram.filter.reads_bytes"] == 2 * weights
    assert b.traffic["dram.filter.reads_bytes"] > 15 * weights
    assert a.cycles < b.cycles or a.cycles_stall <= b.cycles_stall
    assert a.vector_ops == 4 * 256 * 20 * 11  # GRU: 11 elementwise ops per hidden unit per step
    # no vector unit: the gates are done elsewhere, said in a note, and cost nothing here
    c = cost(op, design(16, 16, "ws"))
    assert c.vector_ops == 0 and c.macs == a.macs
    assert len(c.notes) == 1 and "no [vector] unit" in c.notes[0]


@pytest.mark.parametrize("fmt,meta", [("dense", None), ("bitmask", 1.0), ("csr", None)])
def test_sparse_weight_storage(fmt, meta):
    K, N, s = 64, 32, 0.9
    bits = weight_store_bits(8, s if fmt != "dense" else 0.0, fmt, K, N)
    if fmt == "dense":
        assert bits == 8
    elif fmt == "bitmask":
        assert bits == pytest.approx(0.1 * 8 + meta)
    else:
        assert bits == pytest.approx(0.1 * (8 + 6) + 32 * 33 / (32 * 64))
    op = Gemm(16, N, K, weight_sparsity=s if fmt != "dense" else 0.0, sparse_format=fmt)
    r = cost(op, design(8, 8, "ws"))
    assert r.traffic["dram.filter.reads_bytes"] == pytest.approx(K * N * bits / 8)


def test_zero_weights_gate_saves_energy_skip_saves_cycles_too():
    op = Gemm(64, 64, 64, weight_sparsity=0.75, sparse_format="bitmask")
    base, gate, skip = (cost(op, design(8, 8, "os", zero=z)) for z in ("compute", "gate", "skip"))
    assert gate.energy_pj["mult"] == pytest.approx(base.energy_pj["mult"] / 4)
    assert gate.cycles_compute == base.cycles_compute
    assert skip.cycles_compute == pytest.approx(base.cycles_compute / 4)
    assert skip.macs_performed == pytest.approx(base.macs / 4)


def test_bytes_follow_each_operands_format_mx_scales_included():
    d = design(8, 8, "ws", psum=1 << 20)
    a = cost(Gemm(32, 32, 32), d, "act=int8,weight=int8")
    # fp16 and MX on this int8 design: emulated at a stated slowdown (bytes do not depend on it)
    b = cost(Gemm(32, 32, 32), d, "act=fp16,weight=fp16,out=fp16,emulate=4")
    assert b.traffic["dram.ifmap.reads_bytes"] == 2 * a.traffic["dram.ifmap.reads_bytes"]
    assert b.traffic["sram.filter.reads"] == a.traffic["sram.filter.reads"]
    mx = cost(Gemm(32, 32, 32), d, "act=mxfp8_e4m3,emulate=4")
    assert mx.traffic["dram.ifmap.reads_bytes"] == 32 * 32 * (8 + 8 / 32) / 8  # e8m0 scale per 32
    assert mx.formats["act"] == "mxfp8_e4m3" and mx.formats["out"] == "mxfp8_e4m3"


def test_on_chip_activations_only_spill_what_does_not_fit():
    only_w = design(8, 8, "ws", holds=("filter",), ifmap=1000)
    r = cost(Gemm(64, 8, 32), only_w)  # ifmap 2048 B in a 1000-byte buffer
    assert r.traffic["dram.ifmap.reads_bytes"] >= 2048 - 1000
    big = cost(Gemm(64, 8, 32), design(8, 8, "ws", holds=("filter",)))
    assert big.traffic["dram.ifmap.reads_bytes"] == 0 and big.traffic["dram.ofmap.writes_bytes"] == 0


# --- agreement with SCALE-Sim's own output -------------------------------------------------------
def _golden_rows() -> pd.DataFrame:
    g = pd.read_csv(GOLDEN / "scalesim_golden.csv")
    exact = ((g.ifmap_h - g.filter_h) % g.stride == 0) & ((g.ifmap_w - g.filter_w) % g.stride == 0)
    return g[exact].reset_index(drop=True)


def _whole_gemm_counts(op, d):
    """The counts of ``op`` on ``d`` mapped as SCALE-Sim maps it: the whole GEMM one tile step."""
    from asicsim._src.hw.counts import OUTPUTS, ArrayHardware, Schedule, schedule_counts
    from asicsim._src.hw.pipeline import gemm_problem, layout

    lows = op.lower()
    p = gemm_problem(lows, [op], d, {"ifmap": 1.0, "filter": 1.0, "psum": 4.0, "ofmap": 1.0})
    hw = ArrayHardware(rows=np.float64(d.array.rows), cols=np.float64(d.array.cols),
                       dataflow=np.int64({"os": 0, "ws": 1, "is": 2}[d.array.dataflow]),
                       capacity=tuple(np.float64(b.capacity_bytes) for b in d.buffers), layout=layout(d),
                       dram_bytes_per_cycle=np.float64(d.dram_bytes_per_cycle))
    c = schedule_counts(p, hw, Schedule(np.float64(OUTPUTS), p.M, p.N, p.K, np.False_))
    return type(c)(**{k: float(np.asarray(v).reshape(-1)[0]) for k, v in vars(c).items()})


def test_sram_reads_match_scalesim_goldens():
    """Physical and SCALE-Sim modes map folds the same way, so the SRAM reads the array makes
    under SCALE-Sim's mapping (the whole GEMM in one tile step) agree with SCALE-Sim's own reports
    (rows without overhanging windows). (The mapper may tile where bytes tie and tiles run faster:
    issue 31; a tiled GEMM reads per tile.)"""
    g = _golden_rows()
    assert len(g) > 300
    checked = 0
    for row in g.to_dict("records"):
        df, R, C = row["dataflow"], row["rows"], row["cols"]
        d = SystolicDesign(
            name="g", technology_nm=45, clock_mhz=1000,
            array=ArraySpec(rows=R, cols=C, dataflow=df),
            pe=PESpec(a_format="int8", b_format="int8", acc_format="int32"),
            buffers=tuple(BufferSpec(name=n, holds=(n,), capacity_kib=row[f"{n}_kib"], double_buffered=True)
                          for n in ("ifmap", "filter", "ofmap")),
            dram=DramSpec(kind="DDR4", bandwidth_gbps=10))
        op = Conv(row["ifmap_h"], row["ifmap_w"], row["channels"], row["num_filter"], row["filter_h"],
                  row["filter_w"], stride=row["stride"])
        (low,) = op.lower()
        Sr = low.M if df == "os" else low.K
        Sc = low.M if df == "is" else low.N
        rf, cf = -(-Sr // R), -(-Sc // C)
        c = _whole_gemm_counts(op, d)  # SCALE-Sim maps the whole GEMM: one tile step
        assert c.sram_ifmap_reads == row["SRAM IFMAP Reads"]
        assert c.sram_filter_reads == row["SRAM Filter Reads"]
        # SCALE-Sim's OFMAP writes: os M N + F (R + C); ws/is every row fold's partial sums
        if df == "os":
            assert row["SRAM OFMAP Writes"] == c.sram_ofmap_writes + rf * cf * (R + C)
        elif rf > 1:
            assert row["SRAM OFMAP Writes"] == c.sram_psum_writes
        else:
            assert row["SRAM OFMAP Writes"] == c.sram_ofmap_writes
        # pipelined folds never take longer than SCALE-Sim's fold-by-fold schedule (same folds;
        # os: plus the R cycles of shifting the outputs out, which SCALE-Sim does not count)
        assert c.busy_cycles <= row["Total Cycles"] + 1 + (R if df == "os" else 0)
        checked += 1
    assert checked == len(g)


# --- invariants ----------------------------------------------------------------------------------
dims = st.integers(1, 300)


@settings(max_examples=150, deadline=None)
@given(R=st.integers(1, 48), C=st.integers(1, 48), df=st.sampled_from(["os", "ws", "is"]),
       M=dims, N=dims, K=dims, cap=st.integers(16, 1 << 16), psum=st.one_of(st.none(), st.integers(4, 1 << 16)),
       double=st.booleans(), bw=st.floats(0.01, 100), zero=st.sampled_from(["compute", "gate", "skip"]),
       sparsity=st.sampled_from([0.0, 0.5, 0.9]))
def test_invariants(R, C, df, M, N, K, cap, psum, double, bw, zero, sparsity):
    fmt = "bitmask" if sparsity else "dense"
    op = Gemm(M, N, K, weight_sparsity=sparsity, sparse_format=fmt)
    kw = dict(ifmap=cap, filter=cap, ofmap=cap, psum=psum, double=double, bw_bytes_per_cycle=bw, zero=zero)
    r = cost(op, design(R, C, df, **kw))
    assert r.cycles >= r.macs_performed / (R * C) - 1e-9
    assert r.cycles_compute >= 0 and r.cycles_fill_drain >= 0 and r.cycles_stall >= 0
    assert all(v >= 0 for v in r.energy_pj.values())
    assert 0 < r.utilization <= 1 and 0 < r.mapping_efficiency <= 1
    t = r.traffic
    store = weight_store_bits(8, sparsity, fmt, K, N) / 8
    # DRAM traffic lies between the compulsory footprint and what the array reads from SRAM
    assert M * K <= t["dram.ifmap.reads_bytes"] + 1e-6 <= t["sram.ifmap.reads_bytes"] + 2e-6
    assert K * N * store <= t["dram.filter.reads_bytes"] + 1e-6 <= t["sram.filter.reads_bytes"] + 2e-6
    assert t["dram.ofmap.writes_bytes"] == M * N
    # more buffer never means more DRAM traffic (cycles may trade against it: the model picks
    # the partial-sum plan that moves fewer bytes)
    kw2 = dict(kw, ifmap=2 * cap, filter=2 * cap, ofmap=2 * cap, psum=None if psum is None else 2 * psum)
    r1 = cost(op, design(R, C, df, **kw), objective="dram")
    r2 = cost(op, design(R, C, df, **kw2), objective="dram")
    assert r.dram_bound_bytes - 1e-6 <= r1.dram_bytes <= r.dram_bytes + 1e-6
    assert r2.dram_bytes <= r1.dram_bytes + 1e-6
    # wider formats: twice the bits, twice the bytes (with twice the operand buffers and bandwidth,
    # and room for every int32 partial sum, so the schedule stays the same), same counts
    if sparsity:
        return  # sparse storage adds metadata bits that do not double with the format
    own_psum = 1 << 30
    r = cost(op, design(R, C, df, **{**kw, "psum": own_psum}), objective="dram")
    t = r.traffic
    d16 = design(R, C, df, **{**kw2, "psum": own_psum, "bw_bytes_per_cycle": 2 * bw},
                 fmts=("int16", "int16", "int32"))
    w = cost(op, d16, "out=int16", objective="dram")
    assert w.dram_bytes == pytest.approx(2 * r.dram_bytes)
    if w.schedule == r.schedule:  # equal DRAM bytes may come from another schedule (a tie)
        for k in ("dram.ifmap.reads_bytes", "dram.ofmap.writes_bytes", "sram.ifmap.reads_bytes"):
            assert w.traffic[k] == pytest.approx(2 * t[k]), k
        assert w.traffic["sram.ifmap.reads"] == t["sram.ifmap.reads"]


# --- published anchors: TPU v1 -------------------------------------------------------------------
def test_tpu_v1_peak_and_ridge():
    d = sim.load_design("tpu_v1")
    assert d.peak_tops == pytest.approx(92, rel=0.005)  # Jouppi et al. 2017: 92 TOPS
    ridge = d.peak_macs_per_s / (d.dram.bandwidth_gbps * 1e9)  # MACs per weight byte
    assert ridge == pytest.approx(1350, rel=0.001)


def test_tpu_v1_mlp_batch_sweep_crosses_at_the_ridge():
    """An MLP layer (weights from DRAM, activations in the unified buffer): bandwidth-bound below
    ~1350 rows per weight byte, compute-bound above, as the TPU paper's roofline says."""
    bounds = {b: cost(Gemm(b, 2048, 2048), "tpu_v1").bound for b in (16, 256, 1024, 1300, 1400, 1600, 2048)}
    assert bounds == {16: "bandwidth", 256: "bandwidth", 1024: "bandwidth", 1300: "bandwidth",
                      1400: "compute", 1600: "compute", 2048: "compute"}
    big = cost(Gemm(2048, 2048, 2048), "tpu_v1")
    assert big.utilization > 0.95
    assert 2 * big.macs / big.time_s / 1e12 == pytest.approx(92 * big.utilization, rel=0.01)


# --- the vectorised sweep is the same model --------------------------------------------------------
def test_sweep_equals_cost_per_variant():
    ops = [Gemm(256, 256, 256), Conv(28, 28, 32, 64, 3, 3, padding=1, batch=2),
           Gemm(17, 300, 200, weight_sparsity=0.8, sparse_format="csr")]
    rows, dfs = [16, 128], ["os", "ws", "is"]
    for name in ("tpu_v1", "dc_bf16_128x128", "edge_int8_32x32"):
        # tpu_v1 stores whole 256-column weight tiles: its 256 KiB FIFO at 1/64 (4 KiB) holds no
        # 128 x 256 tile, so no ws schedule fits there (tests/hw/test_double_buffers.py)
        scales = [1 / 8 if name == "tpu_v1" else 1 / 64, 1.0]
        out = gemm_sweep(ops, name, rows=np.array(rows)[:, None], dataflow=np.array(dfs),
                         buffer_scale=np.array(scales)[:, None, None])
        base = sim.load_design(name)
        for i, s in enumerate(scales):
            for j, R in enumerate(rows):
                for k, df in enumerate(dfs):
                    d = dataclasses.replace(
                        base, array=dataclasses.replace(base.array, rows=R, dataflow=df),
                        buffers=tuple(dataclasses.replace(b, capacity_kib=b.capacity_kib * s)
                                      for b in base.buffers))
                    for m, op in enumerate(ops):
                        row = cost(op, d).row()
                        for key in ("cycles", "energy_pj", "dram_bytes", "utilization"):
                            assert getattr(out, key)[i, j, k, m] == pytest.approx(row[key], rel=1e-12), key
                        assert out.bound_names[i, j, k, m] == row["bound"] == BOUNDS[out.bound[i, j, k, m]]
                        assert out.dram_bound_bytes[i, j, k, m] == pytest.approx(row["dram_bound_bytes"],
                                                                                 rel=1e-12)


# --- tables, CLI and errors ----------------------------------------------------------------------
def test_cost_table_rows():
    df = cost_table([Gemm(64, 64, 64), Rnn("lstm", 128, 2, 5)], ["dc_bf16_128x128", "fp8_128x128"]).frame()
    assert len(df) == 4 and set(df.design) == {"dc_bf16_128x128", "fp8_128x128"}
    for col in ("cycles", "cycles_compute", "cycles_fill_drain", "cycles_stall", "utilization",
                "mapping_efficiency", "bound", "energy_pj", "energy.dram_pj", "energy.leakage.sram_pj",
                "dram.filter.reads_bytes", "sram.psum.writes", "format_act"):
        assert col in df.columns, col
    e_cols = [c for c in df.columns if c.startswith("energy.")]
    assert np.allclose(df[e_cols].sum(axis=1), df.energy_pj)


def test_every_catalog_design_prices_every_kind():
    for name in sim.hw.list_designs():
        d = sim.load_design(name)
        ops = [Gemm(100, 200, 300), Conv(14, 14, 16, 32, 3, 3, padding="same")]
        if d.vector is not None:
            ops += [Rnn("lstm", 64, 4, 3), Elementwise(1000, 2, 2)]
        for op in ops:
            r = cost(op, d)
            assert r.cycles > 0 and r.energy_total_pj > 0 and r.bound in BOUNDS
            assert all(math.isfinite(v) for v in r.energy_pj.values())
            assert set(r.sources) == set(r.energy_pj)


def test_bad_operations_and_formats():
    with pytest.raises(OperationError, match="gemm: M = 0"):
        Gemm(0, 1, 1)
    with pytest.raises(OperationError, match="weight_sparsity"):
        Gemm(1, 1, 1, weight_sparsity=1.0)
    with pytest.raises(OperationError, match="sparse_format"):
        Gemm(1, 1, 1, sparse_format="coo")
    with pytest.raises(OperationError, match="groups"):
        Conv(8, 8, 6, 4, 3, 3, groups=4)
    with pytest.raises(OperationError, match="larger than the padded"):
        Conv(2, 2, 1, 1, 3, 3)
    with pytest.raises(OperationError, match="cell"):
        Rnn("transformer", 8, 1, 1)
    with pytest.raises(OperationError, match="unknown role"):
        cost(Gemm(2, 2, 2), "tpu_v1", "activation=int8")
    with pytest.raises(OperationError, match="act = 'int9x'"):
        cost(Gemm(2, 2, 2), "tpu_v1", {"act": "int9x"})
    with pytest.raises(DesignError, match="zero_weights"):
        ArraySpec(rows=2, cols=2, dataflow="ws", zero_weights="drop")
    with pytest.raises(DesignError, match="holds"):
        DramSpec(kind="DDR4", bandwidth_gbps=1, holds=("psum",))


def _cli(*args):
    import contextlib
    import io

    from asicsim.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_cli_design_gemm_json():
    code, out, _ = _cli("cost", "--design", "tpu_v1", "--gemm", "1024,1024,1024",
                        "--formats", "act=int8,weight=int8,acc=int32", "--json")
    assert code == 0
    (row,) = json.loads(out)
    want = cost(Gemm(1024, 1024, 1024), "tpu_v1").row()
    assert row["cycles"] == pytest.approx(want["cycles"]) and row["bound"] == want["bound"]
    assert row["format_acc"] == "int32"


def test_cli_design_topology_conv_rnn_and_errors():
    code, out, _ = _cli("cost", "--design", "dc_bf16_128x128", "--topology",
                        str(GOLDEN / "inputs" / "Resnet18.csv"), "--json")
    assert code == 0 and len(json.loads(out)) == 21
    code, out, _ = _cli("cost", "--design", "dc_bf16_128x128", "--conv", "14,14,8,8,3,3,1,1",
                        "--rnn", "gru,64,2,3", "--json")
    assert code == 0 and [r["kind"] for r in json.loads(out)] == ["conv", "rnn"]
    code, _, err = _cli("cost", "--design", "tpu_v1", "--gemm", "1,2")
    assert code == 2 and "3 comma-separated integers" in err
    code, _, err = _cli("cost", "--design", "tpu_v1")
    assert code == 2 and "--gemm M,N,K" in err
    code, _, err = _cli("cost", "--design", "nope", "--gemm", "1,1,1")
    assert code == 2 and "nope" in err


def test_cost_many_equals_one_at_a_time():
    ops = [Gemm(64, 96, 128), Rnn("gru", 64, 3, 4), Elementwise(500, 3, 2),
           Conv(12, 12, 8, 8, 3, 3, padding=1, groups=8), Gemm(9, 40, 70, weight_sparsity=0.5, sparse_format="csr")]
    for name in ("dc_bf16_128x128", "edge_int8_32x32"):
        fmts = "act=fp8_e4m3,weight=fp8_e4m3,emulate=4"  # native on bf16 (fp8 embeds), emulated on int8
        many = sim.hw.cost_many(ops, name, fmts)
        for op, m in zip(ops, many, strict=True):
            one = cost(op, name, fmts)
            assert m.row().keys() == one.row().keys()
            for k, v in one.row().items():
                if isinstance(v, float) and math.isnan(v):
                    assert math.isnan(m.row()[k])
                else:
                    assert m.row()[k] == (pytest.approx(v) if isinstance(v, float) else v), k


def test_readme_cost_example_is_what_the_cli_prints():
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    code, out, _ = _cli("cost", "--design", "tpu_v1", "--gemm", "1024,1024,1024",
                        "--formats", "act=int8,weight=int8,acc=int32")
    assert code == 0
    for line in out.strip().splitlines():
        assert line in readme, line
