"""A real, small sweep and its report, made once per test session and shared by the report tests
(test_report.py, test_report_chromium.py): digits_mlp trained 60 steps under fp32 and bf16,
post-training int8 inference, priced on a GPU (gpu_v100) and on a systolic design whose name is
an HTML injection attempt (and that gives no TDP: its power is NaN), plus one DeepBench suite."""

from __future__ import annotations

import re
from pathlib import Path

from asicsim._src.hw.design_files import designs_dir

#: The systolic design's name: it must come out of every report escaped.
EVIL = "edge<b>x</b><script>alert(1)</script>"
SPEC_NAME = "t <script>alert('spec')</script>"
GPU = "gpu_v100"

SPEC = """name = "{name}"
seeds = [0]
recipes = ["fp32", "bf16"]
infer_recipes = ["int8_ptq_tensor"]
designs = ["{gpu}"]

[[workloads]]
name = "digits_mlp"
run = ["train", "infer", "cost"]
steps = 60
eval_every = 30

[[kernels]]
suite = "deepbench_gemm_inference_server"
precision = "int8"

[[design_space]]
base = "{design}"
"""

FP32_MODE = '''[[pe.modes]]  # test fixture: this copy also runs fp32 MACs (and fp16/bf16, which embed) at a stated rate
a = "fp32"
b = "fp32"
acc = "fp32"
rate = 0.25

'''

_cache: dict[str, dict] = {}


def real_report(tmp_path_factory) -> dict:
    """Run the sweep and write its report (once per session): ``{"out", "html", "info"}``."""
    if "report" not in _cache:
        import asicsim._src.sweep as sw
        from asicsim._src.report import write_report

        root = tmp_path_factory.mktemp("report_sweep")
        text = (designs_dir() / "edge_int8_32x32.toml").read_text()
        text = text.replace('name = "edge_int8_32x32"', f'name = "{EVIL}"')
        text = re.sub(r"^tdp_w = .*\n", "", text, flags=re.M)
        # the int8 design also runs the recipes' fp32/bf16 MACs (asicsim._src.hw.native), at a stated rate
        text = text.replace("[buffers.activations]", FP32_MODE + "[buffers.activations]")
        (root / "evil.toml").write_text(text)
        spec = root / "spec.toml"
        spec.write_text(SPEC.format(name=SPEC_NAME, gpu=GPU, design=root / "evil.toml"))
        out = root / "out"
        summary = sw.sweep(spec, out, workers=2, progress=None)
        assert summary["failed"] == 0, summary
        html = root / "site" / "report.html"
        info = write_report(out, html)
        _cache["report"] = {"out": out, "html": html, "info": info, "root": root}
    return _cache["report"]


def html_text(path: Path) -> str:
    return Path(path).read_text(encoding="utf-8")
