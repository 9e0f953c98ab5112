"""The vector unit (asicsim._src.hw.vector_unit) and per-operation synchronisation (array.sync_cycles).

Hand numbers: the test design runs at 1 GHz (one cycle = 1 ns) with 8 lanes at 500 MHz, so one
vector cycle is 2 array cycles; int8 operands and outputs (1 byte per element).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from asicsim._src.hw import Conv, Elementwise, Gemm, OperationError, cost
from asicsim._src.hw.design import (
    ArraySpec,
    BufferSpec,
    DramSpec,
    PESpec,
    SystolicDesign,
    VectorUnitSpec,
)
from asicsim._src.hw.family import cost_family
from asicsim._src.hw.vector_unit import vector_counts, vector_note

BITS = {"act": 8.0, "out": 8.0, "weight": 8.0, "acc": 32.0}


def design(*, lanes: int | None = 8, vector_mhz: float | None = 500, sync: float = 0,
           static_w: float = 0.0) -> SystolicDesign:
    return SystolicDesign(
        name="v", technology_nm=45, clock_mhz=1000, static_power_w=static_w,
        array=ArraySpec(rows=4, cols=4, dataflow="ws", sync_cycles=sync),
        pe=PESpec(a_format="int8", b_format="int8", acc_format="int32"),
        buffers=(BufferSpec(name="ub", holds=("ifmap", "filter", "ofmap"), capacity_kib=1024),),
        dram=DramSpec(kind="DDR4", bandwidth_gbps=1000.0, holds=("ifmap", "filter", "ofmap")),
        vector=None if lanes is None else VectorUnitSpec(lanes=lanes, clock_mhz=vector_mhz))


def test_vector_cycles_are_ceil_ops_over_lanes_times_the_clock_ratio():
    # 100 outputs x 3 ops = 300 ops; ceil(300 / 8) = 38 vector cycles; x 1000/500 = 76 array cycles
    r = cost(Elementwise(100, ops_per_element=3, inputs=2), design())
    assert r.cycles_compute == 76 and r.vector_ops == 300
    assert r.cycles == 76 and r.notes == ()
    # the vector unit at the design's clock (clock_mhz omitted): ratio 1
    assert cost(Elementwise(100, 3), design(vector_mhz=None)).cycles_compute == 38
    # reads: 2 operands per output from the buffer; writes: one per output
    assert r.traffic["sram.ifmap.reads"] == 200 and r.traffic["sram.ofmap.writes"] == 100


def test_a_pooling_window_reads_its_window_from_the_buffer_and_each_pixel_once_from_dram():
    # 3x3 max-pool, stride 2, over a 9x9 map: 4x4 outputs, each reading 9 pixels (8 compares);
    # the 81 distinct pixels come from DRAM once
    pool = Elementwise(16, ops_per_element=8, inputs=9, input_elements=81, work="pooling")
    c = vector_counts(pool, design(), BITS)
    assert c["sram.ifmap.reads"] == 16 * 9 and c["dram.ifmap.reads_bytes"] == 81
    assert c["dram.ofmap.writes_bytes"] == 16 and c["vector_ops"] == 16 * 8
    assert c["cycles_compute"] == math.ceil(16 * 8 / 8) * 2
    # without input_elements every read is distinct (no reuse): 144 bytes from DRAM
    assert vector_counts(dataclasses.replace(pool, input_elements=None), design(), BITS)[
        "dram.ifmap.reads_bytes"] == 144


def test_no_vector_unit_is_zero_time_and_energy_and_a_note():
    op = Elementwise(1000, 4, work="normalisation")
    r = cost(op, design(lanes=None))
    assert r.cycles == 0 and r.time_s == 0 and r.energy_total_pj == 0 and r.vector_ops == 0
    assert r.notes == (vector_note(op, design(lanes=None)),)
    assert "no [vector] unit" in r.notes[0] and "normalisation" in r.notes[0]
    assert vector_note(op, design()) is None
    # a GEMM on the same design carries no note and costs what it costs
    g = cost(Gemm(8, 8, 8), design(lanes=None))
    assert g.notes == () and g.cycles > 0


def test_sync_cycles_are_added_per_operation_as_their_own_component():
    ops = [Gemm(32, 16, 24), Conv(8, 8, 4, 8, 3, 3), Elementwise(64, 2)]
    base = [cost(op, design()) for op in ops]
    sync = [cost(op, design(sync=1000)) for op in ops]
    for b, s in zip(base, sync, strict=True):
        assert s.cycles_sync == 1000 and b.cycles_sync == 0
        assert s.cycles == pytest.approx(b.cycles + 1000)
        assert s.cycles_compute == b.cycles_compute and s.row()["cycles_sync"] == 1000
    # idle (static) power runs through the sync cycles: the board's idle watts x 1000 ns more
    r0, r1 = cost(ops[0], design(static_w=0.5)), cost(ops[0], design(static_w=0.5, sync=1000))
    assert r1.idle_power_w["board"] >= 0.5  # the chip's 0.5 W idle, plus DRAM background and regulators
    assert r1.energy_static_pj - r0.energy_static_pj == pytest.approx(r1.idle_power_w["board"] * 1000e-9 * 1e12)
    # the vectorised family pass agrees
    fam = cost_family(ops, [design(sync=1000)])
    assert fam.cycles[0].tolist() == pytest.approx([s.cycles for s in sync])
    # work done elsewhere (no vector unit) does not wait for this design's synchronisation
    assert cost(Elementwise(64, 2), design(lanes=None, sync=1000)).cycles == 0


def test_elementwise_bad_fields_name_the_field():
    with pytest.raises(OperationError, match="work = 'gelu'; allowed: elementwise"):
        Elementwise(10, work="gelu")
    with pytest.raises(OperationError, match="input_elements = 31; allowed: at most elements x inputs = 30"):
        Elementwise(10, inputs=3, input_elements=31)
    with pytest.raises(OperationError, match="input_elements = 0"):
        Elementwise(10, input_elements=0)


def test_gpu_streams_distinct_inputs_of_a_pooling_window():
    pool = Elementwise(1 << 20, ops_per_element=8, inputs=9, input_elements=4 << 20, work="pooling")
    a = cost(pool, "gpu_v100")
    b = cost(dataclasses.replace(pool, input_elements=None), "gpu_v100")
    # (4 + 1) Mi elements streamed against (9 + 1) Mi without reuse
    assert a.dram_bytes / b.dram_bytes == pytest.approx(5 / 10)
