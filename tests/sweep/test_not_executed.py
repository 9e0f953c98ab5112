"""Sweep points whose formats a design does not execute (asicsim._src.hw.native): done, every figure NaN,
the reason saying so, never a total that quietly leaves the unpriced GEMMs out."""

from __future__ import annotations

import math

import asicsim as sim
from asicsim._src.sweep import load_results

SPEC = """
seeds = [0]
recipes = ["fp32"]
designs = ["tpu_v1", "gpu_v100"]
[[workloads]]
name = "digits_mlp"
run = ["cost"]
[[kernels]]
suite = "deepbench_gemm_inference_server"
precision = "fp16_mixed"
[[design_space]]
base = "edge_int8_32x32"
vary = { "array.rows" = [16, 32] }
"""


def test_points_a_design_cannot_run_are_said_not_summed(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    summary = sim.sweep(spec, tmp_path / "out", workers=1, progress=None)
    assert summary["failed"] == 0
    res = load_results(tmp_path / "out")
    # int8-only designs (one catalog design, a family of two) under fp32 and fp16 formats
    int8 = res[res["design"].astype(str).str.contains("tpu_v1|edge_int8")]
    assert len(int8) == 2 * 3 and (int8["status"] == "done").all()
    assert int8["time_s"].isna().all() and int8["energy_j"].isna().all()
    assert int8["reason"].str.contains("does not execute").all()
    # the GPU runs both: real figures, no reason
    gpu = res[res["design"] == "gpu_v100"]
    assert len(gpu) == 2 and all(math.isfinite(v) and v > 0 for v in gpu["time_s"])
    assert (gpu["reason"].fillna("") == "").all()
    # every cost and kernel record names its mapping objective (issue 30): a GPU its fastest kernel
    assert (int8["objective"] == "balanced").all() and (gpu["objective"] == "fastest").all()
