"""A sweep prices an fp8 recipe on a GPU only where the chip has an fp8 path: on a V100 the point is
done with every figure NaN and the reason naming the chip's paths (asicsim._src.hw.gpu_paths)."""

from __future__ import annotations

import math

import pytest

import asicsim as sim
from asicsim._src.sweep import load_results

SPEC = """
seeds = [0]
recipes = ["fp8_hybrid"]
designs = ["gpu_v100", "gpu_h100"]
[[workloads]]
name = "digits_mlp"
run = ["cost"]
"""


@pytest.mark.slow  # ~12 s: a real sweep; tests/hw/test_gpu_paths.py holds the rule itself
def test_an_fp8_recipe_is_not_executed_on_volta(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    assert sim.sweep(spec, tmp_path / "out", workers=1, progress=None)["failed"] == 0
    res = load_results(tmp_path / "out").set_index("design")
    v100, h100 = res.loc["gpu_v100"], res.loc["gpu_h100"]
    assert v100["status"] == "done" and math.isnan(v100["time_s"]) and math.isnan(v100["peak_ops_per_s"])
    assert "GPU 'gpu_v100' does not execute act=float8_e4m3fn" in v100["reason"]
    assert h100["time_s"] > 0 and h100["peak_ops_per_s"] == sim.load_design("gpu_h100").fp8_tflops * 1e12
