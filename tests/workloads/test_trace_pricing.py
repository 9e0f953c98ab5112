"""Pricing a workload's op trace (one training step) on systolic designs and GPUs."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import pytest

from asicsim._src.emulate import load_recipe
from asicsim._src.hw import Elementwise, Gemm, cost_many, load_design
from asicsim._src.hw.native import MacMode
from asicsim._src.workloads.pricing import price_trace, workload_trace


def test_digits_mlp_trace_by_hand():
    # MLP 64-64-10, batch 32: forward GEMMs (32x64)(64x64) and (32x64)(64x10); training adds dX and dW
    t = workload_trace("digits_mlp", "bf16")
    fwd = t[(t.role == "forward") & (t.kind == "gemm")]
    assert [(r.M, r.N, r.K) for r in fwd.itertuples()] == [(32, 64, 64), (32, 10, 64)]
    assert set(t.role) == {"forward", "grad-input", "grad-weight", "optimizer"}
    update = t[t.role == "optimizer"].iloc[0]  # SGD: w -= lr g on 64*64+64 + 64*10+10 parameters
    assert (update.M, update.K) == (64 * 64 + 64 + 64 * 10 + 10, 2)
    for role in ("grad-input", "grad-weight"):
        assert t[t.role == role].macs.sum() == fwd.macs.sum() == 32 * (64 * 64 + 64 * 10)
    inf = workload_trace("digits_mlp", "bf16", training=False, batch=8)
    assert set(inf.role) == {"forward"} and list(inf[inf.kind == "gemm"].M) == [8, 8]


def test_grad_input_gemms_write_dx_in_grad_out():
    # fp8_hybrid reads dY in E5M2 and W in E4M3, writes dX in bf16 (grad_out), and dW in bf16
    t = workload_trace("digits_mlp", "fp8_hybrid")
    dx = t[(t.role == "grad-input") & (t.kind == "gemm")].iloc[0]
    assert (dx.format_lhs, dx.format_rhs, dx.format_acc, dx.format_out) == (
        "float8_e5m2", "float8_e4m3fn", "float32", "bfloat16")
    dw = t[(t.role == "grad-weight") & (t.kind == "gemm")].iloc[0]
    assert (dw.format_lhs, dw.format_rhs, dw.format_out) == ("float8_e4m3fn", "float8_e5m2", "bfloat16")
    # fp8_wang2018 keeps the first and last layer in fp16: the MLP's two GEMMs are both (the
    # old pricing took the recipe's E5M2 for every dX)
    t = workload_trace("digits_mlp", "fp8_wang2018")
    assert set(t[(t.role == "grad-input") & (t.kind == "gemm")].format_out) == {"float16"}


def test_each_gemm_is_priced_in_its_own_formats():
    # a layer rule and [first_last] give the two GEMMs of the MLP different formats: each row is
    # priced in its own (the old pricing took the recipe's roles for every row of a role)
    pol = dataclasses.replace(load_recipe("bf16"), name="bf16_first_fp32",
                              first_last=(("weight", load_recipe("fp32")["weight"]),
                                          ("act", load_recipe("fp32")["act"])))
    t = workload_trace("digits_mlp", pol)
    fwd = t[(t.role == "forward") & (t.kind == "gemm")]
    assert set(fwd.format_lhs) == {"float32"}  # first and last layer: both GEMMs of a 2-layer MLP
    tpu = _tpu_v1_with_fp32()
    table = price_trace(t, [tpu], pol)
    fwd_cost = table[table.role == "forward"].iloc[0]
    want = cost_many([Gemm(int(r.M), int(r.N), int(r.K)) for r in fwd.itertuples()], tpu,
                     {"act": "float32", "weight": "float32", "acc": "float32", "out": "bfloat16"})
    reps = [r.batch * r.count for r in fwd.itertuples()]
    gemm_time = sum(n * c.time_s for n, c in zip(reps, want, strict=True))
    assert fwd_cost.time_s >= gemm_time  # the forward's GEMMs at fp32 (plus its elementwise work)


def _tpu_v1_with_fp32() -> object:
    """tpu_v1 given an fp32 MAC mode (fp16 embeds in it) at a stated rate: int8 alone runs no
    fp16 recipe (asicsim._src.hw.native)."""
    d = load_design("tpu_v1")
    fp32 = MacMode(a="fp32", b="fp32", acc="fp32", rate=0.25, source="test: a stated rate")
    return dataclasses.replace(d, pe=dataclasses.replace(d.pe, modes=(*d.pe.modes, fp32)))


def test_formats_a_design_does_not_execute_are_not_priced_and_said():
    t = workload_trace("digits_mlp", "fp16_mixed")
    table = price_trace(t, ["tpu_v1"], "fp16_mixed")
    fwd = table[table.role == "forward"].iloc[0]
    assert math.isnan(fwd.time_s) and "does not execute act=float16" in fwd.note
    assert math.isnan(table[table.role == "total"].iloc[0].time_s)  # not a sum that skips them


def test_price_trace_sums_cost_many_per_role():
    t = workload_trace("digits_mlp", "fp16_mixed")
    tpu = _tpu_v1_with_fp32()
    table = price_trace(t, [tpu, "gpu_v100"], "fp16_mixed")
    assert list(table[table.role == "total"].design) == ["tpu_v1", "gpu_v100"]
    fwd = t[(t.role == "forward") & (t.kind == "gemm")]
    want = cost_many([Gemm(int(r.M), int(r.N), int(r.K)) for r in fwd.itertuples()], tpu,
                     {"act": "float16", "weight": "float16", "acc": "float32", "out": "float16"})
    ew = t[(t.role == "forward") & (t.kind == "elementwise")]  # bias adds, relu, the loss
    want_ew = cost_many([Elementwise(int(r.elements_out), int(r.ops), inputs=int(r.inputs),
                                     input_elements=int(r.elements_in)) for r in ew.itertuples()], tpu,
                        {"act": "float16", "weight": "float16", "acc": "float32", "out": "float16"})
    row = table[(table.design == "tpu_v1") & (table.role == "forward")].iloc[0]
    assert row.gemms == 2 and len(ew) > 0
    assert row.time_s == pytest.approx(sum(r.time_s for r in want)
                                       + sum(n * r.time_s for n, r in zip(ew["count"], want_ew, strict=True)))
    assert row.energy_j == pytest.approx((sum(r.energy_total_pj for r in want)
                                          + sum(n * r.energy_total_pj for n, r in zip(ew["count"], want_ew, strict=True)))
                                         * 1e-12)
    # grad-weight GEMMs take the gradient format on the B side
    gw = table[(table.design == "gpu_v100") & (table.role == "grad-weight")].iloc[0]
    assert "weight=float16" in gw.formats and "out=float16" in gw.formats
    upd = table[(table.design == "gpu_v100") & (table.role == "optimizer")].iloc[0]
    assert upd.time_s > 0 and "float32" in upd.formats  # fp16_mixed updates the fp32 master copy
    no_vector = price_trace(t, ["scalesim_google"], "fp16_mixed")
    assert "no [vector] unit" in no_vector[no_vector.role == "optimizer"].iloc[0].note
    for design in ("tpu_v1", "gpu_v100"):
        part = table[(table.design == design) & (table.role != "total")]
        total = table[(table.design == design) & (table.role == "total")].iloc[0]
        assert total.time_s == pytest.approx(part.time_s.sum()) and total.energy_j > 0


def test_trace_command_prices_on_a_systolic_design_and_a_gpu():
    out = subprocess.run([sys.executable, "-m", "asicsim.cli", "trace", "digits_mlp", "--recipe", "bf16",
                          "--design", "dc_bf16_128x128", "--design", "gpu_v100", "--json"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    totals = [r for r in doc["cost"] if r["role"] == "total"]
    assert [r["design"] for r in totals] == ["dc_bf16_128x128", "gpu_v100"]
    assert all(r["time_s"] > 0 and r["energy_j"] > 0 for r in totals)
    # 2 GEMMs x (forward, grad-input, grad-weight) + the update, besides the elementwise rows
    assert sum(r["kind"] != "elementwise" or r["role"] == "optimizer" for r in doc["trace"]) == 7


@pytest.mark.parametrize("training", [True, False])
def test_a_stochastic_rounding_recipe_is_priced_without_a_key(training):
    # tracing computes nothing, so it needs no random bits ("pass a key" failed every cost point)
    t = workload_trace("digits_mlp", "fixed16_sr", training=training)
    ref = workload_trace("digits_mlp", "fixed16_rn", training=training)
    assert t[["role", "M", "N", "K", "macs"]].equals(ref[["role", "M", "N", "K", "macs"]])
    table = price_trace(t, [_tpu_v1_with_fp32()], "fixed16_sr")  # q7.8 and fp32 embed in fp32
    assert table[table.role == "total"].iloc[0].time_s > 0


def test_trace_command_under_stochastic_rounding():
    out = subprocess.run([sys.executable, "-m", "asicsim.cli", "trace", "digits_mlp", "--recipe", "fixed16_sr",
                          "--design", "tpu_v1", "--json"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    trace = json.loads(out.stdout)["trace"]
    assert sum(r["kind"] != "elementwise" or r["role"] == "optimizer" for r in trace) == 7


def test_trace_command_takes_the_workload_scale():
    # digits_mlp's gpu scale: hidden 1024-1024 at batch 128 (workloads/digits_mlp.toml); the small
    # scale's first GEMM is (32 x 64) @ (64 x 64). --scale must change the traced shapes.
    def first_gemm(*extra):
        out = subprocess.run([sys.executable, "-m", "asicsim.cli", "trace", "digits_mlp", "--recipe", "bf16",
                              "--design", "dc_bf16_128x128", "--json", *extra], capture_output=True, text=True,
                             check=False)
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        r = next(r for r in doc["trace"] if r["kind"] == "gemm")
        return doc["scale"], (r["M"], r["N"], r["K"])
    assert first_gemm() == ("small", (32, 64, 64))
    assert first_gemm("--scale", "gpu") == ("gpu", (128, 1024, 64))
