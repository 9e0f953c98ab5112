"""Scaling a training workload's own step (``asicsim scaling --model WORKLOAD``): data, tensor and
pipeline splits of its op trace against hand calculations on digits_mlp (64-64-10) and
mnist1d_mlp (40-256-256-10), one chip against the single-chip step, the data split against the
preset path's GEMMs, bad input, the CLI."""

from __future__ import annotations

import argparse
import json

import pytest

from asicsim._src.hw import AllReduce, Gemm, cost_many
from asicsim._src.hw.design_files import load_design
from asicsim._src.hw.links import Link, allgather_time, send_time
from asicsim._src.numerics import get_format
from asicsim._src.system import scaling_cli
from asicsim._src.system.scaling import TrainingModel
from asicsim._src.system.workload_scaling import parallel_step
from asicsim._src.system.workload_split import Collective, pipeline_stages, tensor_split
from asicsim._src.workloads.pricing import trace_costs, workload_trace

DESIGN = "dc_bf16_128x128"
HAND = Link("hand", 10.0, 5.0)  # 10 GB/s, 5 us per ring step
FREE = Link("free", 1e12, 0.0)
DIGITS_PARAMS = 64 * 64 + 64 + 64 * 10 + 10  # weights and biases of the 64-64-10 MLP


def _bits(name):
    return get_format(name).storage_bits


def _single(batch=32, workload="digits_mlp"):
    return float(trace_costs(workload_trace(workload, "bf16", batch=batch), load_design(DESIGN), "bf16")["time_s"].sum())


@pytest.mark.parametrize("split", ["data", "tensor", "pipeline"])
def test_one_chip_is_the_single_chip_step(split):
    s = parallel_step("digits_mlp", DESIGN, 1, split, recipe="bf16", topology=HAND)
    assert s.step_s == pytest.approx(_single(), rel=1e-12)
    assert s.comm_s == 0 and s.bubble_s == 0 and s.compute_s == pytest.approx(s.step_s)


def test_data_parallel_by_hand_and_against_the_preset_gemms():
    s = parallel_step("digits_mlp", DESIGN, 4, "data", recipe="bf16", topology=HAND, grad_format="bf16")
    ring16 = 2 * 3 * (5e-6 + DIGITS_PARAMS * 2 / (4 * 10e9))  # ring all-reduce of the bf16 gradients
    ring32 = 2 * 3 * (5e-6 + DIGITS_PARAMS * 4 / (4 * 10e9))
    assert s.parameters == DIGITS_PARAMS and s.batch_per_chip == 8 and s.grad_bits == 16
    assert s.compute_s == pytest.approx(_single(8), rel=1e-12)
    assert s.comm_s == pytest.approx(ring16, rel=1e-12)
    assert s.step_s == pytest.approx(_single(8) + ring16, rel=1e-12)
    assert s.saved_s == pytest.approx(ring32 - ring16, rel=1e-9)
    # the trace's GEMMs are the preset model's of the same widths, plus the first layer's dX,
    # which the trace prices and the preset skips (nobody needs the data's gradient)
    trace = workload_trace("digits_mlp", "bf16", batch=32)
    costs = trace_costs(trace, load_design(DESIGN), "bf16")
    ops = [op for f, b in TrainingModel("p", "mlp", (64, 64, 10)).layer_operations(32) for op in f + b]
    preset = sum(r.time_s for r in cost_many([*ops, Gemm(32, 64, 64)], DESIGN))
    assert costs[costs["kind"] == "gemm"]["time_s"].sum() == pytest.approx(preset, rel=1e-12)


def test_tensor_split_pairs_column_and_row_parallel_gemms():
    trace = workload_trace("mnist1d_mlp", "bf16")  # 40-256-256-10, batch 100
    share, comms = tensor_split(trace, 2, _bits)
    g = share[share["kind"] == "gemm"]
    shapes = [tuple(int(x) for x in r) for r in g[["M", "N", "K"]].to_numpy()]
    assert shapes == [(100, 128, 40), (100, 40, 128), (40, 128, 100),  # column-parallel: N / 2
                      (100, 256, 128), (100, 128, 256), (128, 256, 100),  # row-parallel: K / 2
                      (100, 5, 256), (100, 256, 5), (256, 5, 100)]  # unpaired: column-parallel
    assert g["macs"].sum() * 2 == trace[trace["kind"] == "gemm"]["macs"].sum()
    assert comms == [Collective("allreduce", "backward", 100 * 40, 16, 1, 0),  # the pair's dX (f)
                     Collective("allreduce", "forward", 100 * 256, 16, 1, 1),  # the pair's output (g)
                     Collective("allreduce", "backward", 100 * 256, 16, 1, 2),  # layer 3's dX
                     Collective("allgather", "forward", 100 * 10, 16, 1, 2)]  # the unpaired output


def test_tensor_split_of_a_transformer_is_megatrons():
    # Shoeybi et al. 2019 §3: per transformer layer two all-reduces forward and two backward, of
    # batch x sequence x d_model (32 x 64 x 64); QKV -> attention -> output projection is a pair
    trace = workload_trace("charlm_transformer", "bf16")  # 2 layers, d_model 64, 4 heads, context 64
    share, comms = tensor_split(trace, 2, _bits)
    layer = 32 * 64 * 64
    assert [(c.kind, c.phase, c.elements) for c in comms] == [
        *[("allreduce", "backward", layer), ("allreduce", "forward", layer)] * 4,
        ("allreduce", "backward", layer), ("allgather", "forward", 32 * 64 * 96)]  # the LM head (96 symbols)
    attention = share[(share["kind"] == "gemm") & (share["rhs_role"] != "weight")]
    assert set(attention["batch"]) == {32 * 4 // 2}  # heads split over the chips


def test_tensor_parallel_step_by_hand():
    s = parallel_step("digits_mlp", DESIGN, 2, "tensor", recipe="bf16", topology=HAND)
    # all-reduces of the 32 x 10 bf16 logits (forward) and of the first layer's 32 x 64 dX (backward)
    ring = sum(2 * 1 * (5e-6 + n * 2 / (2 * 10e9)) for n in (32 * 10, 32 * 64))
    assert s.comm_s == pytest.approx(ring, rel=1e-12)
    share, _ = tensor_split(workload_trace("digits_mlp", "bf16"), 2, _bits)
    assert s.compute_s == pytest.approx(float(trace_costs(share, load_design(DESIGN), "bf16")["time_s"].sum()))
    assert s.step_s == pytest.approx(s.compute_s + ring) and s.batch_per_chip == 32 and "lower bound" in s.note
    assert allgather_time(AllReduce(1000, 4, 16), HAND).time_s == pytest.approx(3 * (5e-6 + 2000 / 4e10))


@pytest.mark.parametrize("chips", [2, 4])
def test_bytes_and_time_of_the_two_layer_mlp_on_2_and_4_chips(chips):
    # digits_mlp is 64-64-10 at batch 32. Tensor parallel (Shoeybi et al. 2019 §3, the MLP block):
    # layer 1 column-parallel, layer 2 row-parallel: one all-reduce of the 32 x 10 bf16 output
    # forward (g) and one of the 32 x 64 bf16 input gradient backward (f), whatever the chip count:
    # (320 + 2048) x 2 bytes; each a ring of 2(n-1) steps of 5 us + bytes / (n x 10 GB/s)
    t = parallel_step("digits_mlp", DESIGN, chips, "tensor", recipe="bf16", topology=HAND)
    assert t.comm_bytes == (32 * 10 + 32 * 64) * 2 == 4736
    ring = sum(2 * (chips - 1) * (5e-6 + n * 2 / (chips * 10e9)) for n in (32 * 10, 32 * 64))
    assert t.comm_s == pytest.approx(ring, rel=1e-12)  # 20.47 us on 2 chips, 60.71 us on 4
    # data parallel: every weight and bias gradient once, in fp32: 4810 x 4 bytes
    d = parallel_step("digits_mlp", DESIGN, chips, "data", recipe="bf16", topology=HAND)
    assert d.comm_bytes == DIGITS_PARAMS * 4 == 19240
    assert d.comm_s == pytest.approx(2 * (chips - 1) * (5e-6 + 19240 / (chips * 10e9)), rel=1e-12)


def test_pipeline_stages_minimise_the_slowest_stage():
    assert pipeline_stages([1, 2, 3, 4], 2) == [(0, 3), (3, 4)]  # 6 | 4 (not 3 | 7)
    assert pipeline_stages([1, 2, 3, 4], 3) == [(0, 2), (2, 3), (3, 4)]  # 3 | 3 | 4
    assert pipeline_stages([5, 1, 1, 1, 1, 1], 2) == [(0, 1), (1, 6)]
    assert pipeline_stages([1.0], 1) == [(0, 1)]


def test_pipeline_step_by_hand_and_the_gpipe_bubble():
    m, mb = 4, 8  # global batch 32 in 4 micro-batches of 8, 2 stages: one layer each
    s = parallel_step("digits_mlp", DESIGN, 2, "pipeline", micro_batches=m, recipe="bf16", topology=FREE)
    layer = [[Gemm(mb, 64, 64), Gemm(mb, 64, 64), Gemm(64, 64, mb)],  # forward, dX, dW
             [Gemm(mb, 10, 64), Gemm(mb, 64, 10), Gemm(64, 10, mb)]]
    g = [sum(r.time_s for r in cost_many(ops, DESIGN)) for ops in layer]
    costs = trace_costs(workload_trace("digits_mlp", "bf16", batch=mb), load_design(DESIGN), "bf16")
    opt = costs[costs["role"] == "optimizer"]["time_s"].sum()
    ew = costs[(costs["kind"] == "elementwise") & (costs["role"] != "optimizer")]["time_s"].sum()
    stage = [x * (1 + ew / sum(g)) for x in g]  # elementwise shared in proportion to GEMM time
    opt_stage = max(opt * 4096 / 4736, opt * 640 / 4736)  # the update in proportion to weights
    sends = [send_time(8 * 64 * 2, 2, FREE)] * 2  # the 8 x 64 bf16 boundary, forward and back
    t = max(stage[0] + sends[0], stage[1] + sends[1])
    assert s.step_s == pytest.approx((m + 2 - 1) * t + opt_stage, rel=1e-9)
    assert s.bubble_s / (s.step_s - opt_stage) == pytest.approx((2 - 1) / (m + 2 - 1))  # (p-1)/(m+p-1)
    assert s.compute_s + s.comm_s + s.bubble_s == pytest.approx(s.step_s)
    assert s.batch_per_chip == mb and s.micro_batches == m


@pytest.mark.parametrize("kw, words", [
    (dict(chips=2, split="model"), ["split", "'model'", "data | tensor | pipeline"]),
    (dict(chips=0, split="data"), ["chips", "0", "integer >= 1"]),
    (dict(chips=64, split="data"), ["chips = 64", "batch = 32", "one chip per sample"]),
    (dict(chips=2, split="tensor", micro_batches=4), ["micro_batches", "split = 'tensor'", "pipeline"]),
    (dict(chips=3, split="pipeline"), ["pipeline stages = 3", "1 .. 2", "GEMM sites"]),
    (dict(chips=2, split="pipeline", micro_batches=33), ["micro_batches = 33", "1 .. 32"]),
    (dict(chips=2, split="data", grad_format="fp99"), ["grad_format", "'fp99'"]),
    (dict(chips=2, split="data", batch=0), ["batch = 0", "integer >= 1"]),
    (dict(chips=2, split="data", recipe="fp32"), ["recipe = 'fp32'", "not priced", "--recipe"]),
])
def test_bad_input_names_field_value_and_allowed(kw, words):
    kw = {"recipe": "bf16", **kw}
    with pytest.raises(ValueError) as info:
        parallel_step("digits_mlp", DESIGN, **kw)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def _run(argv, capsys):
    p = argparse.ArgumentParser(prog="asicsim")
    scaling_cli.add_cli(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_cli_scales_a_workload(capsys):
    argv = ["scaling", "--model", "digits_mlp", "--design", DESIGN, "--chips", "1,2", "--split", "tensor"]
    doc = json.loads(_run([*argv, "--json"], capsys))
    assert doc["workload"] == "digits_mlp" and doc["split"] == "tensor" and doc["parameters"] == DIGITS_PARAMS
    assert [p["chips"] for p in doc["points"]] == [1, 2] and doc["points"][0]["efficiency"] == pytest.approx(1.0)
    assert doc["points"][1]["step_s"] == pytest.approx(
        parallel_step("digits_mlp", DESIGN, 2, "tensor", recipe="bf16").step_s)
    text = _run(argv, capsys)
    assert "strong scaling of workload digits_mlp" in text and "comm_ms" in text and "note (2 chips)" in text


@pytest.mark.parametrize("extra, message", [
    (["--model", "digits_mlp", "--overlap"], "--overlap with workload 'digits_mlp'"),
    (["--model", "digits_mlp", "--mode", "weak"], "--mode weak with workload"),
    (["--model", "mlp_2560", "--split", "tensor"], "--split with --model 'mlp_2560'"),
    (["--model", "mlp_2560", "--accuracy"], "--accuracy with --model 'mlp_2560'"),
    (["--model", "mlp_9"], "--model = 'mlp_9'; allowed: mlp_2560"),
    (["--model", "digits_mlp", "--accuracy", "--grad-rounding", "nearest"], "rounding = 'nearest'; allowed: rne"),
    (["--model", "digits_mlp", "--accuracy", "--grad-format", "fp99"], "format = 'fp99'"),
    (["--model", "digits_mlp", "--replicas", "2"], "--replicas = 2 without --accuracy"),
    (["--model", "mlp_2560", "--replicas", "2"], "--replicas with --model 'mlp_2560'"),
    (["--model", "digits_mlp", "--accuracy", "--replicas", "5"], "replicas = 5 does not divide batch = 32"),
    (["--model", "digits_mlp", "--accuracy", "--chips", "1,3"], "replicas = 3 .*set --replicas"),
    (["--model", "digits_mlp", "--accuracy", "--replicas", "0"], "replicas = 0; allowed: an integer >= 1"),
    (["--model", "digits_mlp", "--allreduce", "ring"], "--allreduce ring without --accuracy"),
    (["--model", "mlp_2560", "--allreduce", "ring"], "--allreduce with --model 'mlp_2560'"),
])
def test_cli_bad_combinations(extra, message):
    p = argparse.ArgumentParser(prog="asicsim")
    scaling_cli.add_cli(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["scaling", "--design", DESIGN, "--chips", "1,2", *extra])
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        args.func(args)


def test_cli_accuracy_trains_over_the_replicas(capsys):
    argv = ["scaling", "--model", "digits_mlp", "--design", DESIGN, "--chips", "1,4", "--grad-format", "int8",
            "--accuracy", "--seeds", "0", "--train-steps", "20"]
    doc = json.loads(_run([*argv, "--json"], capsys))
    acc = doc["accuracy"]
    assert acc["replicas"] == 4 and acc["steps"] == 20 and acc["seeds"] == [0]  # replicas: the largest --chips
    from asicsim._src.workloads import train

    kw = dict(seeds=(0,), steps=20, stats=False, replicas=4)
    assert acc["fp32_grads"] == train("digits_mlp", "fp32", **kw).per_seed
    assert acc["rounded_grads"] == train("digits_mlp", "fp32", **kw, grad_format="int8").per_seed
    assert doc["points"][1]["saved_s"] > 0  # 8-bit gradients on the wire: 4 x fewer bytes than fp32
