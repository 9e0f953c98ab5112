"""Volta's own GPU constants (issue 32 item 2): DeepBench's V100 GEMM sheet, its tensor-core rows
priced as DeepBench ran them (padded to multiples of 8), so Volta no longer borrows Turing's rate
and unaligned fallback (data/deepbench/measured/v100_gemm_results.csv, benchmarks/gpu_volta.py)."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_scripts import load_benchmark

import asicsim as sim
from asicsim._src.hw.gpu_model import generation_constants, load_fit
from asicsim._src.hw.operations import Gemm


@pytest.fixture(scope="module")
def gm():
    return load_benchmark("gpu_measured")


@pytest.mark.parametrize(("dims", "a_t", "b_t", "precision", "ran"), [
    # code/nvidia/gemm_bench.cu (DeepBench 30c5115) lines 265-300: half precision pads to 8
    ((35, 8457, 1760), False, False, "fp16_mixed", (40, 8457, 1760)),  # NN: M and K
    ((35, 8457, 1530), True, False, "fp16_mixed", (40, 8457, 1536)),  # TN: M and K
    ((7680, 5481, 2560), False, True, "fp16_mixed", (7680, 5488, 2560)),  # NT: M and N
    ((35, 8457, 4095), True, True, "fp16_mixed", (40, 8464, 4096)),  # TT: all three
    ((35, 8457, 1760), False, False, "fp32", (35, 8457, 1760)),  # not the tensor-core path: as is
    ((35, 8457, 1760), False, False, "int8", (35, 8457, 1760)),
])
def test_deepbench_ran_tensor_core_gemms_padded(gm, dims, a_t, b_t, precision, ran):
    assert gm.deepbench_tensor_padding(*dims, a_t, b_t, precision) == ran


def test_v100_sheet_rows_are_in_the_repository(gm):
    rows = [r for r in gm.deepbench_rows() if r["device"] == "V100" and r["kind"] == "gemm"]
    assert {r["precision"] for r in rows} == {"fp32", "fp16_mixed"}
    assert len(rows) == 320
    # DeepBench_NV_V100.xlsx, "Results - FP16 ip, Mixed math", row 52: 35 x 8457 x 1760 NN, 0.083 ms,
    # priced as the 40 x 8457 x 1760 GEMM gemm_bench ran
    (r,) = [r for r in rows if r["precision"] == "fp16_mixed" and r["ops"][0].N == 8457
            and r["ops"][0].K == 1760 and not r["ops"][0].a_transposed]
    assert r["time_us"] == pytest.approx(83.0) and r["ops"][0].M == 40


def test_volta_has_its_own_rates_and_no_borrowed_turing_fallback():
    """Before: Volta took eff_tensor from Turing (0.69, fitted on a power-limited T4) and Turing's
    unaligned fallback (fitted on T4 rows that DeepBench had padded: its scale at the bound, 2.0)."""
    fit = load_fit()
    _, borrowed = generation_constants(fit, "Volta")
    for key in ("eff_tensor", "eff_simt", "launch_us", "cta_k_overhead", "smax_p", "smax_p_stream"):
        assert f"{key}@Volta" in fit and key not in borrowed
    assert not any(k.startswith("unaligned_") and k.endswith("@Turing") for k in fit)
    assert borrowed["unaligned_eff"] == borrowed["unaligned_exp"] == "Hopper"
    notes = sim.cost(Gemm(35, 8457, 1760), "gpu_v100", "act=fp16,weight=fp16,acc=fp32").notes
    assert any("unaligned_eff, unaligned_exp" in n and "of Hopper" in n for n in notes)


@pytest.mark.parametrize(("device", "precision", "med", "p90"), [
    # benchmarks/RESULTS.md (issue 32, Volta): V100 with its own constants 0.065 / 0.359 and
    # 0.049 / 0.169 (borrowed: 0.309 / 0.599 and 0.104 / 0.571); T4 fp16, padded 0.105 / 0.257
    # (unpadded 0.120 / 0.691)
    ("V100", "fp16_mixed", 0.07, 0.37),
    ("V100", "fp32", 0.055, 0.18),
    ("T4", "fp16_mixed", 0.11, 0.27),
])
def test_gemm_error_on_the_deepbench_sheets(gm, device, precision, med, p90):
    gc = load_benchmark("gpu_calibration")
    rows = [r for r in gm.deepbench_rows() if (r["device"], r["precision"], r["kind"]) == (device, precision, "gemm")]
    (g,) = gc.groups_of(rows)
    e = np.abs(np.log(g.predict(load_fit()) / g.measured))
    assert np.median(e) <= med and np.quantile(e, 0.9) <= p90
