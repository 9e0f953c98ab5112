"""A report over points where a label is missing on some rows (a [[kernels]] suite without a
precision beside one with): no sort or concatenation meets a NaN among strings."""

from __future__ import annotations

import pandas as pd

from asicsim._src.report import summary_text, write_report
from asicsim._src.sweep import sweep

SPEC = """
designs = ["tpu_v1"]
[[kernels]]
suite = "deepbench_gemm_inference_server"
precision = "int8"
[[kernels]]
suite = "deepbench_gemm_inference_server"
"""


def test_kernel_suites_with_and_without_precision(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    assert sweep(spec, out, workers=1, progress=None)["failed"] == 0
    info = write_report(out, tmp_path / "site" / "report.html")
    roofs = pd.read_csv(info["tables"]["roofs"])
    assert roofs["priced_as"].tolist() == ["default, int8"]
    deepbench = pd.read_csv(info["tables"]["deepbench"])
    assert sorted(deepbench["precision"]) == ["default", "int8"]
    points = pd.read_csv(info["tables"]["roofline_points"])
    assert set(points["label"]) == {"default", "int8"}
    assert "default" in summary_text(out)
