"""cost_family: a design space priced in one pass equals cost_many on every member."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw.cost import cost_many
from asicsim._src.hw.family import cost_family, family_key
from asicsim._src.hw.native import MacMode
from asicsim._src.hw.result import Bound

OPS = [sim.Gemm(100, 64, 800), sim.Gemm(32, 10, 64), sim.Conv(28, 28, 16, 32, 3, 3, padding=1, batch=4),
       sim.Gemm(512, 512, 512, weight_sparsity=0.9), sim.Rnn("gru", 256, 16, 10),
       sim.Elementwise(4810, 12, inputs=3)]


def _variants(base: str, *, fp32_rate: float | None = None) -> list:
    d = sim.load_design(base)
    if fp32_rate is not None:  # a copy that also runs fp32 MACs (and what embeds in fp32: fp16, bf16)
        fp32 = MacMode(a="fp32", b="fp32", acc="fp32", rate=fp32_rate, source="test: a stated rate")
        d = dataclasses.replace(d, pe=dataclasses.replace(d.pe, modes=(*d.pe.modes, fp32)))
    out = []
    for rows, cols, flow, scale in itertools.product([8, 32, 128], [16, 256], ["os", "ws", "is"], [0.25, 1, 4]):
        bufs = tuple(dataclasses.replace(b, capacity_kib=b.capacity_kib * (scale if i % 2 == 0 else 1 / scale))
                     for i, b in enumerate(d.buffers))
        out.append(dataclasses.replace(d, name=f"{base}-{rows}x{cols}-{flow}-{scale}", buffers=bufs,
                                       array=dataclasses.replace(d.array, rows=rows, cols=cols, dataflow=flow)))
    return out


@pytest.mark.parametrize("base, formats", [("edge_int8_32x32", None), ("tpu_v1", None),
                                           ("tpu_v1", "act=int16,weight=int16"),  # quarter rate (native.py)
                                           ("edge_int8_32x32", "act=int16,emulate=auto"),
                                           ("dc_bf16_128x128", "act=fp8_e4m3,weight=fp8_e4m3,acc=fp32")])
def test_family_equals_cost_many_on_every_member(base, formats):
    designs = _variants(base)
    assert len({family_key(d) for d in designs}) == 1
    fam = cost_family(OPS, designs, formats)
    for i, d in enumerate(designs):
        ref = cost_many(OPS, d, formats)
        for j, r in enumerate(ref):
            assert fam.time_s[i, j] == pytest.approx(r.time_s, rel=1e-12, abs=0)
            assert fam.energy_pj[i, j] == pytest.approx(r.energy_total_pj, rel=1e-12)
            assert fam.dram_bytes[i, j] == pytest.approx(r.dram_bytes, rel=1e-12, abs=1e-9)
            assert fam.sram_array_bytes[i, j] == pytest.approx(r.sram_array_bytes, rel=1e-12, abs=1e-9)
            assert fam.utilization[i, j] == pytest.approx(r.utilization, rel=1e-12, abs=1e-15)
            assert Bound.of(fam.bound[i, j]) == r.bound and fam.bound_names[i, j] == r.row()["bound"]
            assert fam.dram_bound_bytes[i, j] == pytest.approx(r.dram_bound_bytes, rel=1e-12)
            one = fam.take((i, j))  # the typed parts, element by element
            assert one.traffic.bytes == pytest.approx(r.traffic.bytes, rel=1e-12, abs=1e-9)
            assert one.energy.components == r.energy_pj.components
            for k, v in r.energy_pj.items():
                assert fam.energy[k][i, j] == pytest.approx(v, rel=1e-12, abs=1e-9), k


def test_family_key_separates_what_cannot_be_vectorised():
    d = sim.load_design("edge_int8_32x32")
    assert family_key(d) == family_key(dataclasses.replace(d, name="x", array=dataclasses.replace(d.array, rows=7)))
    assert family_key(d) != family_key(dataclasses.replace(d, clock_mhz=900))
    assert family_key(sim.load_design("gpu_v100")) is None
    with pytest.raises(ValueError, match="differ from"):
        cost_family(OPS, [d, dataclasses.replace(d, clock_mhz=900)])
    assert np.all(cost_family(OPS[:1], [d]).time_s > 0)


def test_trace_totals_family_equal_trace_costs_per_design():
    from asicsim._src.workloads.pricing import trace_costs, trace_totals_family, workload_trace

    designs = _variants("edge_int8_32x32", fp32_rate=0.25)[::5]  # int8 only: give it fp32 MACs
    for recipe in ("fp32", "fp16_mixed"):
        trace = workload_trace("digits_mlp", recipe)
        fam = trace_totals_family(trace, designs, recipe)
        for i, d in enumerate(designs):
            ops = trace_costs(trace, d, recipe)
            for k in ("time_s", "energy_j", "energy_dynamic_j", "energy_mac_j", "energy_buffers_j", "energy_dram_j",
                      "energy_static_j", "energy_vector_j", "dram_bytes", "sram_bytes", "macs"):
                assert fam[k][i] == pytest.approx(float(np.nansum(ops[k])), rel=1e-12, abs=1e-18), (recipe, k)
