"""The one typed price (asicsim._src.hw.result): every front end returns it or a view of it."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw.family import cost_designs
from asicsim._src.hw.result import BOUNDS, DIRECTIONS, OPERANDS, Bound, EnergySplit, Traffic

OPS = [sim.Gemm(256, 256, 256), sim.Conv(28, 28, 32, 64, 3, 3, padding=1, batch=2), sim.Elementwise(4096, 2),
       sim.Rnn("lstm", 128, 4, 3)]


def test_bound_has_one_encoding():
    assert BOUNDS == ("compute", "bandwidth", "occupancy", "power", "launch")
    for code, name in enumerate(BOUNDS):
        b = Bound.of(code)
        assert b == name and b.code == code and Bound(name) is b and repr(b) == repr(name)
    assert Bound.names(np.array([[1, 0], [3, 2]])).tolist() == [["bandwidth", "compute"], ["power", "occupancy"]]
    r = sim.cost(sim.Gemm(1024, 1024, 1024), "tpu_v1")
    assert r.bound is Bound.BANDWIDTH and type(r.row()["bound"]) is str
    assert json.loads(json.dumps(r.row()["bound"])) == "bandwidth"


@pytest.mark.parametrize("design", ["edge_int8_32x32", "gpu_v100"])
def test_traffic_is_typed_per_level_operand_and_direction(design):
    for r in sim.hw.cost_many(OPS, design):
        t = r.traffic
        assert t.bytes.shape == t.elements.shape == (2, len(OPERANDS), len(DIRECTIONS))
        for lvl in t.levels:
            for o in OPERANDS:
                for d in DIRECTIONS:  # the record keys read the typed arrays
                    assert t[f"{lvl}.{o}.{d}_bytes"] == t.of(lvl, o, d)
                    assert t[f"{lvl}.{o}.{d}"] == t.of(lvl, o, d, unit="elements")
        assert r.dram_bytes == pytest.approx(float(t.bytes[t.levels.index("dram")].sum()), rel=1e-12)
        assert r.energy_total_pj == sum(r.energy_pj.values())
        assert r.energy_static_pj + r.energy_dynamic_pj == pytest.approx(r.energy_total_pj, rel=1e-12)


@pytest.mark.parametrize(("make", "error", "fragment"), [
    (lambda: Traffic(("sram", "dram"), np.zeros((2, 3, 2)), np.zeros((2, 4, 2)), 0.0, 0.0), ValueError,
     "Traffic.bytes: leading axes (2, 3, 2); allowed: (2, 4, 2)"),
    (lambda: EnergySplit(("mult", "add"), np.zeros((3, 5))), ValueError,
     "EnergySplit.pj: leading axis (3,); allowed: (2,)"),
    (lambda: dataclasses.replace(sim.cost(sim.Gemm(8, 8, 8), "tpu_v1"), traffic={"dram_bytes": 1.0}), TypeError,
     "CostResult.traffic: dict; allowed: Traffic"),
    (lambda: dataclasses.replace(sim.cost(sim.Gemm(8, 8, 8), "tpu_v1"), energy_pj={"dram": 1.0}), TypeError,
     "CostResult.energy_pj: dict; allowed: EnergySplit"),
    (lambda: dataclasses.replace(sim.cost(sim.Gemm(8, 8, 8), "tpu_v1"), bound="slow"), ValueError, "'slow'"),
])
def test_bad_parts_are_refused_at_construction(make, error, fragment):
    with pytest.raises(error, match=None) as info:
        make()
    assert fragment in str(info.value)


@pytest.mark.parametrize("design", ["tpu_v1", "gpu_v100"])
def test_one_design_alone_is_the_price_its_records_view(design):
    d = sim.load_design(design)
    records = sim.hw.cost_many(OPS, d)
    p = cost_designs(OPS, [d])
    assert p.shape == (1, len(OPS))
    for j, r in enumerate(records):
        one = p.take((0, j))
        assert float(one.time_s) == r.time_s and float(one.energy_pj) == r.energy_total_pj
        assert Bound.of(one.bound) == r.bound and float(one.dram_bound_bytes) == r.dram_bound_bytes
        assert float(one.utilization) == pytest.approx(r.utilization, rel=1e-12)
        assert one.notes == r.notes
        assert np.array_equal(one.traffic.bytes, r.traffic.bytes)
    assert p.take(0).formats == records[0].formats and p.labels.designs == (d.name,)
    np.testing.assert_array_equal(p.dram_compulsory_bytes[0], records.price.dram_compulsory_bytes)


def test_a_family_priced_together_equals_each_member_alone():
    base = sim.load_design("edge_int8_32x32")
    designs = [dataclasses.replace(base, name=f"r{r}", array=dataclasses.replace(base.array, rows=r))
               for r in (8, 32, 64)]
    fam = cost_designs(OPS, designs)
    assert fam.shape == (3, len(OPS))
    for i, d in enumerate(designs):
        alone = cost_designs(OPS, [d])
        for name in ("time_s", "energy_pj", "dram_bytes", "utilization", "dram_bound_bytes"):
            assert getattr(fam, name)[i] == pytest.approx(getattr(alone, name)[0], rel=1e-12), name
        assert fam.bound[i].tolist() == alone.bound[0].tolist()
    with pytest.raises(ValueError, match="joins no family"):
        cost_designs(OPS, [sim.load_design("gpu_v100"), sim.load_design("gpu_a100")])


def test_a_price_selects_along_its_axes_and_keeps_notes_per_operation():
    p = sim.hw.gemm_sweep(OPS[:2], "edge_int8_32x32", rows=np.array([[8], [32]]), buffer_scale=np.array([1.0, 2.0]))
    assert p.shape == (2, 2, 2)
    one = p.take((1, 0, 1))
    assert float(one.time_s) == p.time_s[1, 0, 1] and float(one.energy_pj) == p.energy_pj[1, 0, 1]
    assert one.traffic.bytes.shape == (2, 4, 2) and one.notes == p.notes[1]
    assert p.take((1,)).notes == p.notes and p.take((..., 0)).notes == p.notes[0]
    flat = p.arrays()
    assert flat["traffic.dram.filter.reads_bytes"].shape == p.shape and flat["bound"].dtype.kind == "i"
    assert all(np.shape(v) == p.shape and np.asarray(v).dtype.kind in "fib" for v in flat.values())


def test_a_family_member_keeps_its_own_idle_power():
    base = sim.load_design("edge_int8_32x32")
    designs = [dataclasses.replace(base, name=f"w{k}", buffers=tuple(
        dataclasses.replace(b, capacity_kib=b.capacity_kib * k) for b in base.buffers)) for k in (1, 4)]
    fam = cost_designs(OPS, designs)  # SRAM leakage grows with the buffers
    idle = [fam.take(i).idle_power_w("chip") for i in range(2)]
    assert idle == [cost_designs(OPS, [d]).take(0).idle_power_w("chip") for d in designs] and idle[1] > idle[0]
    with pytest.raises(ValueError, match="designs of different idle power"):
        fam.idle_power_w("chip")


@pytest.mark.parametrize("design", ["tpu_v1", "gpu_v100"])
def test_cost_many_answers_records_and_the_price_they_view(design):
    res = sim.hw.cost_many(OPS, design)
    assert isinstance(res, list) and len(res) == len(OPS) and res.price.shape == (len(OPS),)
    assert res.price.time_s.tolist() == [r.time_s for r in res]
    assert res.price.dram_bytes.tolist() == [r.dram_bytes for r in res]
    assert res.price.bound_names.tolist() == [r.row()["bound"] for r in res]
