"""Ring all-reduce, link topologies and data-parallel scaling: hand calculations, the fit on
DeepBench's measured all-reduce sheets under stated thresholds, bad input, the CLI hooks."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from asicsim._src.hw import AllReduce, Gemm, OperationError, cost_many, list_designs
from asicsim._src.hw.links import (
    LINKS,
    TOPOLOGIES,
    Link,
    Topology,
    TopologyError,
    allreduce_time,
    fit_topology,
    get_topology,
    measured_allreduce,
    predict_rows,
)
from asicsim._src.system import scaling, scaling_cli
from asicsim._src.system.scaling import (
    TrainingModel,
    scaling_curve,
    stops_paying,
    training_step,
)

DESIGN = "dc_bf16_128x128"


# ---------------------------------------------------------------- ring all-reduce by hand

def test_ring_formula_hand_case():
    # 1e6 fp32 = 4 MB on 4 ranks, 10 GB/s, 5 us per step: 2 * 3 * (5 us + 4e6 / (4 * 10e9) s)
    link = Link("hand", 10.0, 5.0)
    r = allreduce_time(AllReduce(1_000_000, 4, 32), link)
    assert r.time_s == pytest.approx(6 * (5e-6 + 1e-4), rel=1e-12)  # 630 us
    assert r.algorithm_bandwidth_gbps == pytest.approx(4e6 / 630e-6 / 1e9)  # 6.349 GB/s
    assert r.bus_bandwidth_gbps == pytest.approx(1.5 * 4e6 / 630e-6 / 1e9)  # 9.524 GB/s
    assert r.bottleneck == "hand"
    # efficiency scales the bandwidth, overhead adds once per call; fp16 halves the bytes
    slow = Topology("slow", ((None, Link("half", 20.0, 5.0, efficiency=0.5)),), overhead_us=20.0)
    assert allreduce_time(AllReduce(1_000_000, 4, 32), slow).time_s == pytest.approx(650e-6)
    assert allreduce_time(AllReduce(1_000_000, 4, 16), link).time_s == pytest.approx(6 * (5e-6 + 5e-5))
    one = allreduce_time(AllReduce(1_000_000, 1), link)
    assert one.time_s == 0.0 and math.isnan(one.bus_bandwidth_gbps)


def test_hierarchy_uses_the_slowest_crossed_link():
    fast, slow = Link("fast", 100.0, 1.0), Link("slow", 10.0, 10.0)
    topo = Topology.hierarchy(fast, slow, ranks_per_node=2)
    assert [link.name for link in topo.crossed(2)] == ["fast"]
    assert [link.name for link in topo.crossed(8)] == ["fast", "slow"]
    op2, op8 = AllReduce(2_500_000, 2), AllReduce(2_500_000, 8)  # 10 MB
    assert allreduce_time(op2, topo).time_s == pytest.approx(2 * (1e-6 + 1e7 / (2 * 100e9)))
    assert allreduce_time(op8, topo).time_s == pytest.approx(14 * (10e-6 + 1e7 / (8 * 10e9)))
    assert allreduce_time(op8, topo).bottleneck == "slow"
    # DeepBench's machines: <= 4 ranks one PCIe root, <= 8 one node, 16 and 32 over InfiniBand
    db = TOPOLOGIES["deepbench_titanx_pascal"]
    assert [len(db.crossed(n)) for n in (2, 4, 8, 16, 32)] == [1, 1, 2, 3, 3]


# ---------------------------------------------------------------- the model on DeepBench's sheets

@pytest.fixture(scope="module")
def measured():
    return measured_allreduce()


def _errors(rows, topology):
    e = predict_rows(rows, topology)["abs_log_err"]
    return float(e.median()), float(e.quantile(0.9))


def test_measured_sheets_are_complete(measured):
    assert len(measured) == 133
    assert sorted(measured.device.unique()) == ["GTX1080Ti", "M40", "P100", "TitanX_Pascal"]
    busbw = 2 * (measured.ranks - 1) / measured.ranks * measured.bytes / (measured.time_us * 1e3)
    np.testing.assert_allclose(busbw, measured.busbw_gbps_recomputed, rtol=1e-3)


@pytest.mark.parametrize("device", ["TitanX_Pascal", "GTX1080Ti", "M40", "P100"])
def test_fitted_topology_error_under_thresholds(measured, device):
    """Thresholds: per device median |ln(pred/meas)| <= 0.06 and p90 <= 0.25 (observed 0.037-0.047
    and 0.10-0.23; the p90 is set by DeepBench's Baidu-RingAllReduce rows at 16M elements, which
    run at half the bus bandwidth of their NCCL neighbours). The stored preset equals a refit."""
    rows = measured[measured.device == device]
    preset = TOPOLOGIES[f"deepbench_{device.lower()}"]
    med, p90 = _errors(rows, preset)
    assert med <= 0.06 and p90 <= 0.25, (device, med, p90)
    refit = fit_topology(rows, device)
    assert refit.overhead_us == pytest.approx(preset.overhead_us, rel=0.01)
    for (_, a), (_, b) in zip(refit.levels, preset.levels, strict=True):
        assert a.effective_gbps == pytest.approx(b.effective_gbps, rel=0.01)
        assert a.latency_us == pytest.approx(b.latency_us, rel=0.01, abs=0.01)


def test_out_of_sample_error(measured):
    """A device predicted from its sibling's fit (same machine kind, never fitted on it): median
    <= 0.08, p90 <= 0.5 over all 133 rows (observed 0.050, 0.43). The generic pcie3 + FDR preset
    on TitanX/1080Ti (the fraction was fitted on TitanX): median <= 0.1 (observed 0.054, 0.077)."""
    sibling = {"TitanX_Pascal": "GTX1080Ti", "GTX1080Ti": "TitanX_Pascal", "M40": "P100", "P100": "M40"}
    errs = np.concatenate([
        predict_rows(g, fit_topology(measured[measured.device == sibling[dev]], sibling[dev]))["abs_log_err"]
        for dev, g in measured.groupby("device")])
    assert np.median(errs) <= 0.08 and np.quantile(errs, 0.9) <= 0.5
    preset = get_topology("pcie3", "infiniband_fdr", 8)
    for dev in ("TitanX_Pascal", "GTX1080Ti"):
        assert _errors(measured[measured.device == dev], preset)[0] <= 0.1


def test_the_check_can_fail(measured):
    """A wrong model (half the bandwidth, or no latency) breaks the thresholds above."""
    rows = measured[measured.device == "TitanX_Pascal"]
    good = TOPOLOGIES["deepbench_titanx_pascal"]
    half = Topology("half", tuple((s, Link(k.name, k.bandwidth_gbps / 2, k.latency_us)) for s, k in good.levels),
                    good.overhead_us)
    no_latency = Topology("nolat", tuple((s, Link(k.name, k.bandwidth_gbps, 0.0)) for s, k in good.levels))
    assert _errors(rows, half)[0] > 0.3
    assert _errors(rows, no_latency)[1] > 0.25


# ---------------------------------------------------------------- training step and scaling

def test_model_operations_and_parameters():
    m = TrainingModel("t", "mlp", (64, 128, 256))
    (f0, b0), (f1, b1) = m.layer_operations(8)
    assert f0 == [Gemm(8, 128, 64, name="t L0 fwd")]
    assert b0 == [Gemm(64, 128, 8, name="t L0 dW")]  # no dX for the first layer
    assert b1 == [Gemm(8, 128, 256, name="t L1 dX"), Gemm(128, 256, 8, name="t L1 dW")]
    macs = lambda ops: sum(g.M * g.N * g.K for g in ops)  # noqa: E731
    assert macs(b1) == 2 * macs(f1) and macs(b0) == macs(f0)
    assert m.parameters == 64 * 128 + 128 * 256
    gru = TrainingModel("g", "rnn", (32, 16), "gru", 10)
    assert gru.parameters == 3 * 16 * (32 + 16)
    assert scaling.MODELS["gru_2816"].parameters == 3 * 3 * 2816 * 5632


def test_step_without_overlap_hand_case():
    m = TrainingModel("t", "mlp", (256, 512, 512))
    link = Link("hand", 10.0, 5.0)
    s = training_step(m, 32, 4, DESIGN, link, grad_format="bf16")
    fwd = [Gemm(32, 512, 256), Gemm(32, 512, 512)]
    bwd = [Gemm(256, 512, 32), Gemm(32, 512, 512), Gemm(512, 512, 32)]
    t = [r.time_s for r in cost_many(fwd + bwd, DESIGN)]
    grad_bytes = (256 * 512 + 512 * 512) * 2
    ring = 2 * 3 * (5e-6 + grad_bytes / (4 * 10e9))
    assert s.forward_s == pytest.approx(sum(t[:2]))
    assert s.backward_s == pytest.approx(sum(t[2:]))
    assert s.allreduce_s == pytest.approx(ring)
    assert s.step_s == pytest.approx(sum(t) + ring)
    assert s.gradient_bytes == grad_bytes
    assert s.samples_per_s == pytest.approx(4 * 32 / s.step_s)


def test_overlap_list_schedule_hand_case():
    # forward 1 + 1 s, backward 2 s (layer 0) and 3 s (layer 1); each layer's all-reduce takes 3 s
    # (2 ranks: 2 * (1.5 s + ~0)). Layer 1's call runs 5 -> 8, layer 0's backward ends at 7, its
    # call runs 8 -> 11: step 11 s. Without overlap: 7 + one call for both layers (3 s) = 10 s.
    m = TrainingModel("t", "mlp", (8, 8, 8))
    topo = Topology.flat(Link("slowlat", 1e9, 1.5e6))
    computed = ([1.0, 1.0], [2.0, 3.0], 0.0, "d")
    over = scaling._step(m, 1, 2, topo, 32, True, computed)
    assert over.step_s == pytest.approx(11.0) and over.allreduce_s == pytest.approx(6.0)
    plain = scaling._step(m, 1, 2, topo, 32, False, computed)
    assert plain.step_s == pytest.approx(10.0)
    # communication that fits inside backward is hidden
    fast = scaling._step(m, 1, 2, Topology.flat(Link("l", 1e9, 0.25e6)), 32, True, computed)
    assert fast.step_s == pytest.approx(7.5)  # layer 0's 0.5 s call after backward ends at 7


def test_strong_and_weak_efficiency_definitions():
    link = LINKS["pcie3"]
    strong = scaling_curve("mlp_2560", DESIGN, link, (1, 2, 8), batch=256, mode="strong")
    t1 = training_step("mlp_2560", 256, 1, DESIGN, link).step_s
    for p in strong:
        tn = training_step("mlp_2560", 256 // p.chips, p.chips, DESIGN, link).step_s
        assert p.efficiency == pytest.approx(t1 / (p.chips * tn))
        assert p.speedup == pytest.approx(t1 / tn)
        assert p.step.samples_per_s == pytest.approx(256 / tn)
    weak = scaling_curve("mlp_2560", DESIGN, link, (1, 4), batch=64, mode="weak")
    t1 = training_step("mlp_2560", 64, 1, DESIGN, link).step_s
    t4 = training_step("mlp_2560", 64, 4, DESIGN, link).step_s
    assert weak[1].efficiency == pytest.approx(t1 / t4)
    assert weak[1].marginal_speedup == pytest.approx(4 * 64 / t4 / (64 / t1))
    # a free network: weak scaling is perfect, strong scaling only loses the array's efficiency
    free = Link("free", 1e12, 0.0)
    assert all(p.efficiency == pytest.approx(1.0) for p in
               scaling_curve("rnn_2560", DESIGN, free, (1, 2, 4), batch=16, mode="weak"))


def test_stops_paying_and_link_ordering():
    kw = dict(model="mlp_2560", design=DESIGN, chips=(1, 2, 4, 8, 16, 32, 64), batch=4096)
    points = {k: scaling_curve(topology=k, **kw) for k in ("nvlink", "pcie3")}
    stop = {k: stops_paying(p) for k, p in points.items()}
    # a faster link keeps paying down to a smaller per-chip batch
    assert stop["nvlink"]["batch_per_chip"] < stop["pcie3"]["batch_per_chip"]
    for k, p in points.items():
        first_bad = next(x for x in p if x.efficiency < 0.5)
        assert stop[k]["chips"] == first_bad.chips
        assert all(x.efficiency >= 0.5 for x in p if x.chips < first_bad.chips)
    assert stops_paying(points["nvlink"][:1]) is None


@pytest.mark.parametrize("design", [d for d in ("gpu_v100", "gpu_p100", "gpu_a100")
                                    if d in list_designs(kind="gpu")])
def test_gpu_designs_price_a_step(design):
    fp16 = "act=fp16,weight=fp16,acc=fp32"
    s = training_step("rnn_2560", 16, 8, design, "nvlink", formats=fp16, overlap=True)
    assert s.step_s > s.compute_s > 0 and s.allreduce_s > 0
    points = scaling_curve("mlp_2560", design, "pcie3", (1, 2, 4), 256, formats=fp16)
    assert points[0].efficiency == pytest.approx(1.0) and points[-1].efficiency < 1.0


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize(("call", "words"), [
    (lambda: Link("x", -1.0, 1.0), ["bandwidth_gbps", "-1.0", "allowed"]),
    (lambda: Link("x", 1.0, 1.0, efficiency=1.5), ["efficiency", "1.5", "(0, 1]"]),
    (lambda: Topology("t", ((4, LINKS["pcie3"]),)), ["levels", "last span None"]),
    (lambda: Topology("t", ((8, LINKS["pcie3"]), (4, LINKS["pcie3"]), (None, LINKS["pcie3"]))),
     ["spans", "[8, 4]", "increasing"]),
    (lambda: get_topology("nvlnk"), ["link", "'nvlnk'", "nvlink", "deepbench_m40"]),
    (lambda: get_topology("pcie3", "ethernet"), ["inter_link", "'ethernet'", "infiniband_edr"]),
    (lambda: get_topology("deepbench_m40", "pcie3"), ["inter_link", "'pcie3'", "deepbench_m40"]),
    (lambda: scaling_curve("mlp_2560", DESIGN, mode="medium"), ["mode", "'medium'", "strong | weak"]),
    (lambda: scaling_curve("mlp_9", DESIGN), ["model", "'mlp_9'", "mlp_2560"]),
    (lambda: scaling_curve("mlp_2560", DESIGN, chips=(1, 0)), ["chips", "0", "integers >= 1"]),
    (lambda: scaling_curve("mlp_2560", DESIGN, chips=(64,), batch=32), ["chips", "64", "global batch"]),
    (lambda: training_step("mlp_2560", 8, 2, DESIGN, grad_format="fp99"), ["grad_format", "'fp99'"]),
    (lambda: stops_paying([], min_efficiency=2), ["min_efficiency", "2", "(0, 1]"]),
    (lambda: TrainingModel("m", "cnn", (1, 2)), ["kind", "'cnn'", "mlp | rnn"]),
])
def test_bad_input_names_field_value_and_allowed(call, words):
    with pytest.raises(ValueError) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_bad_allreduce_spec():
    with pytest.raises(OperationError, match="ranks = 0"):
        AllReduce(10, 0)
    with pytest.raises(OperationError, match="AllReduce"):
        allreduce_time(Gemm(1, 1, 1), "nvlink")


# ---------------------------------------------------------------- CLI hooks

def _parser():
    p = argparse.ArgumentParser(prog="asicsim")
    scaling_cli.add_cli(p.add_subparsers(dest="command", required=True))
    return p


def _run(argv, capsys):
    args = _parser().parse_args(argv)
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_cli_allreduce_json_matches_library(capsys):
    out = _run(["scaling", "allreduce", "--elements", "1000000", "--ranks", "2,16",
                "--link", "deepbench_titanx_pascal", "--json"], capsys)
    rows = json.loads(out)
    want = allreduce_time(AllReduce(1_000_000, 16), "deepbench_titanx_pascal")
    assert [r["ranks"] for r in rows] == [2, 16]
    assert rows[1]["time_us"] == pytest.approx(want.time_s * 1e6)
    assert rows[1]["bus_bandwidth_gbps"] == pytest.approx(want.bus_bandwidth_gbps)
    text = _run(["scaling", "allreduce", "--elements", "1000000", "--link", "pcie3"], capsys)
    assert "busbw" in text and "pcie3" in text


def test_cli_train_json_and_table(capsys):
    argv = ["scaling", "--model", "mlp_2560", "--design", DESIGN, "--link", "nvlink", "--inter-link",
            "infiniband_edr", "--chips", "1,2,16", "--batch", "512", "--mode", "strong", "--overlap"]
    doc = json.loads(_run([*argv, "--json"], capsys))
    assert doc["topology"] == "nvlinkx8+infiniband_edr" and doc["overlap"] is True
    assert [p["chips"] for p in doc["points"]] == [1, 2, 16]
    assert doc["points"][0]["efficiency"] == pytest.approx(1.0)
    assert doc["points"][0]["marginal_speedup"] is None  # nan -> null
    text = _run(argv, capsys)
    assert "strong scaling of mlp_2560" in text and "efficiency" in text
    assert "stops paying" in text or "scaling pays" in text


def test_cli_errors():
    args = _parser().parse_args(["scaling", "--model", "mlp_2560"])
    with pytest.raises(TopologyError, match="--design is required"):
        args.func(args)
    args = _parser().parse_args(["scaling", "allreduce"])
    with pytest.raises(TopologyError, match="--elements is required"):
        args.func(args)
    args = _parser().parse_args(["scaling", "--design", DESIGN, "--chips", "1,x"])
    with pytest.raises(TopologyError, match="--chips"):
        args.func(args)
