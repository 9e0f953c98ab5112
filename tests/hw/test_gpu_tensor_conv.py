"""Tensor-core convolutions as the library runs them (issue 32 item 3): channels padded to the
path's alignment, the input channels of each filter tap taken ``conv_chunk_bytes`` at a time, NCHW
tensors transposed to and from NHWC, and each pass with its own tensor-core factor per generation.
Rows: DeepBench's V100 and T4 fp16 conv sheets (data/deepbench/measured/v100_conv_results.csv,
conv_results.csv; benchmarks/gpu_tensor_conv.py)."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_scripts import load_benchmark

import asicsim as sim
from asicsim._src.hw.gpu_cost import gpu_price
from asicsim._src.hw.gpu_kernels import conv_kernels
from asicsim._src.hw.gpu_model import generation_constants, load_fit
from asicsim._src.hw.operations import Conv, OperationError

FP16 = "act=fp16,weight=fp16,acc=fp32,out=fp16"
FP32 = "act=fp32,weight=fp32,acc=fp32,out=fp32"


@pytest.fixture(scope="module")
def gm():
    return load_benchmark("gpu_measured")


def test_first_layer_padded_and_chunked_on_the_tensor_cores():
    """224 x 224 x 3 -> 64, 7x7 stride 2, batch 16 (ResNet's first layer), hand counts: fp16 pads C
    3 -> 8 (the guide: channels divisible by 8 for fp16); the forward reduction takes 64 channels
    (128 bytes) per tap: K = 64 x 49 = 3136, not 3 x 49 = 147; the SIMT path keeps 147."""
    op = Conv(224, 224, 3, 64, 7, 7, stride=2, padding=3, batch=16)
    pq = 112 * 112
    (simt,) = conv_kernels(op, 0, "fwd")
    assert (simt["M"], simt["N"], simt["K"]) == (16 * pq, 64, 147)
    main, x, w = conv_kernels(op, 0, "fwd", pad=8, layout="NHWC", chunk=64)
    assert (main["M"], main["N"], main["K"]) == (16 * pq, 64, 64 * 49)
    assert main["align"] == 8 and main["a_elems"] == 16 * 224 * 224 * 8  # the padded NHWC copy
    # NHWC with C padded: the input and the filter are copied padded (read + write), not the output
    assert x["stream_bytes"] == 16 * 224 * 224 * (3 + 8)
    assert w["stream_bytes"] == 64 * 49 * (3 + 8)
    # the filter gradient: its N = C R S is taken in chunks too; the data gradient reduces over K = 64
    bf = conv_kernels(op, 0, "bwd_filter", pad=8, chunk=64)[0]
    bd = conv_kernels(op, 0, "bwd_data", pad=8, chunk=64)[0]
    assert (bf["M"], bf["N"], bf["K"]) == (64, 64 * 49, 16 * pq)
    assert (bd["M"], bd["N"], bd["K"]) == (16 * 224 * 224, 8, 64 * 49)


def test_nchw_transposes_every_tensor_of_the_pass():
    op = Conv(56, 56, 128, 256, 3, 3, padding=1, batch=16)
    nhwc = conv_kernels(op, 0, "fwd", pad=8, layout="NHWC", chunk=64)
    nchw = conv_kernels(op, 0, "fwd", pad=8, layout="NCHW", chunk=64)
    assert len(nhwc) == 1  # aligned channels, channels last: the GEMM alone
    x, w, y = (k["stream_bytes"] for k in nchw[1:])
    assert (x, w, y) == (2 * 16 * 56 * 56 * 128, 2 * 256 * 128 * 9, 2 * 16 * 56 * 56 * 256)
    assert len(conv_kernels(op, 0, "fwd", layout="NCHW")) == 1  # SIMT: either layout as is


def test_nchw_costs_the_transposes_at_the_copy_rate():
    """On the H100, fp16: NCHW - NHWC = three launches plus the bytes (read + write, 2 bytes each)
    at the design's copy rate, the streams' own price (gpu_model's elementwise kernels)."""
    op = Conv(56, 56, 128, 256, 3, 3, padding=1, batch=16)
    d = sim.load_design("gpu_h100")
    c, _ = generation_constants(load_fit(), "Hopper")
    a = gpu_price([op], d, FP16, conv_layout="NHWC").time_s[0]
    b = gpu_price([op], d, FP16, conv_layout="NCHW").time_s[0]
    moved = 2 * 2 * (16 * 56 * 56 * (128 + 256) + 256 * 128 * 9)
    hand = 3 * c["launch_us"] * 1e-6 + moved / (d.copy_bandwidth_gbps * 1e9)
    assert b - a == pytest.approx(hand, rel=1e-6)
    # the size: this conv (29.6 GFLOP) over 20 us; the transposes add a large fraction
    assert 1.4 < b / a < 2.0
    # fp32 on the SIMT cores: the layout changes nothing
    assert gpu_price([op], d, FP32, conv_layout="NCHW").time_s[0] == gpu_price([op], d, FP32).time_s[0]


def test_bad_layout_is_refused():
    with pytest.raises(OperationError, match="conv_layout = 'NCWH'; allowed: 'NHWC' \\| 'NCHW'"):
        gpu_price([Conv(8, 8, 8, 8, 3, 3)], sim.load_design("gpu_h100"), FP16, conv_layout="NCWH")


def test_each_pass_has_its_own_tensor_factor_per_generation():
    fit = load_fit()
    for gen in ("Volta", "Turing"):
        _c, borrowed = generation_constants(fit, gen)
        for p in ("conv_fwd", "conv_bwd_data", "conv_bwd_filter"):
            assert f"{p}_tensor@{gen}" in fit and f"{p}_tensor" not in borrowed
    _, borrowed = generation_constants(fit, "Hopper")  # no tensor-core conv measured on Hopper
    assert borrowed["conv_fwd_tensor"] == "Turing"
    # the notes say so where a tensor-core conv is priced, and only there
    conv = sim.cost(Conv(56, 56, 128, 256, 3, 3, padding=1, batch=16), "gpu_h100", FP16)
    assert any("conv_fwd_tensor" in n and "of Turing" in n for n in conv.notes)
    assert not sim.cost(Conv(56, 56, 128, 256, 3, 3, padding=1, batch=16), "gpu_h100").notes  # fp32


def test_v100_conv_rows_are_in_the_repository(gm):
    """DeepBench_NV_V100.xlsx, "Results - FP16 ip, Mixed math", row 176: 700 x 161 x 1 -> 32, 5x20
    stride 2, batch 4, forward 0.591 ms (fp32 sheet, same row: 0.078 ms); priced as conv_bench ran
    it: C = 8, NHWC."""
    rows = [r for r in gm.deepbench_rows() if r["device"] == "V100" and r["kind"].startswith("conv")]
    assert {r["kind"] for r in rows} == {"conv_fwd", "conv_bwd_data", "conv_bwd_filter"}
    half = [r for r in rows if r["precision"] == "fp16_mixed"]
    assert len(half) == 272  # 94 + 84 + 94: every fp16 forward is IMPLICIT_PRECOMP_GEMM
    (r,) = [r for r in half if r["kind"] == "conv_fwd" and r["ops"][0].in_w == 700 and r["ops"][0].batch == 4]
    assert r["time_us"] == pytest.approx(591.0) and r["layout"] == "NHWC"
    assert (r["ops"][0].in_channels, r["ops"][0].out_channels) == (8, 32)


@pytest.mark.parametrize(("device", "kind", "med", "p90"), [
    # benchmarks/RESULTS.md (issue 32 item 3), in sample; old code (unpadded, no chunk, the SIMT pass
    # factors): T4 0.133 / 0.638, 0.167 / 0.537, 0.271 / 0.636; V100 0.240 / 0.717, 0.267 / 0.671,
    # 0.208 / 0.947 (fwd, bwd_data, bwd_filter)
    ("T4", "conv_fwd", 0.126, 0.416), ("T4", "conv_bwd_data", 0.164, 0.529),
    ("T4", "conv_bwd_filter", 0.306, 0.659), ("V100", "conv_fwd", 0.211, 0.508),
    ("V100", "conv_bwd_data", 0.196, 0.656), ("V100", "conv_bwd_filter", 0.193, 0.432),
])
def test_tensor_conv_error_on_the_deepbench_sheets(gm, device, kind, med, p90):
    cal = load_benchmark("gpu_calibration")
    rows = [r for r in gm.deepbench_rows() if (r["device"], r["precision"], r["kind"]) == (device, "fp16_mixed", kind)]
    (g,) = cal.groups_of(rows)
    e = np.abs(np.log(g.predict(load_fit()) / g.measured))
    assert np.median(e) <= med + 0.01 and np.quantile(e, 0.9) <= p90 + 0.01


@pytest.mark.parametrize(("kind", "med", "p90"), [
    # benchmarks/RESULTS.md (issue 32, fourth pass): the V100's fp32 convs, never fitted on (Volta has no
    # conv constant of its own: Pascal's), 0.072 / 0.227, 0.180 / 0.680, 0.234 / 0.460
    ("conv_fwd", 0.072, 0.227), ("conv_bwd_data", 0.180, 0.680), ("conv_bwd_filter", 0.234, 0.460),
])
def test_v100_fp32_convs_with_the_borrowed_conv_constants(gm, kind, med, p90):
    cal = load_benchmark("gpu_calibration")
    rows = [r for r in gm.deepbench_rows() if (r["device"], r["precision"], r["kind"]) == ("V100", "fp32", kind)]
    (g,) = cal.groups_of(rows)
    assert "conv_fwd" in generation_constants(load_fit(), "Volta")[1]  # borrowed
    e = np.abs(np.log(g.predict(load_fit()) / g.measured))
    assert np.median(e) <= med + 0.01 and np.quantile(e, 0.9) <= p90 + 0.01
