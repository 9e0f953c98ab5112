"""``asicsim report`` on a large design space: wall time, peak memory and HTML size.

The spec prices the MNIST-1D CNN's training step under three recipes (bf16, fp8 hybrid,
MXFP8) and DeepBench's server inference GEMMs and convolutions (in the design's own formats) on every variant of
``dc_bf16_128x128`` (rows x cols x
dataflow x two buffer sizes), about 25,000 points, plus the V100 as the GPU baseline. The report
must aggregate (top designs by energy, distributions for the rest): the target is <= 60 s and
<= 10 MB of HTML. The anchor, in the same run: the sweep that made the results (the report
should cost about what the sweep did, not many times it).

    python benchmarks/bench_report.py [--sizes 8,16,32,64,96,128,192,256] [--workers 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def spec_text(sizes: list[int]) -> str:
    return f"""
name = "bench_report"
recipes = ["bf16", "fp8_hybrid", "mxfp8"]
designs = ["gpu_v100"]
[[workloads]]
name = "mnist1d_cnn"
run = ["cost"]
[[kernels]]
suite = "deepbench_gemm_inference_server"
[[kernels]]
suite = "deepbench_conv_inference_server"
[[design_space]]
base = "dc_bf16_128x128"
vary = {{ "array.rows" = {sizes}, "array.cols" = {sizes}, "array.dataflow" = ["os", "ws", "is"], \
"buffers.activations.capacity_kib" = [2048, 4096, 8192, 16384, 32768], \
"buffers.weights.capacity_kib" = [1024, 2048, 4096, 8192, 16384] }}
"""


def timed_child(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MiB) of the child process alone, and its stdout."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if proc.returncode:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{out[-3000:]}")
    return wall, usage.ru_maxrss / 1024, out  # ru_maxrss: KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,16,32,64,96,128,192,256", help="array rows and cols values")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", metavar="DIR", help="write the sweep here and keep it (default: a temporary folder); "
                                                  "a DIR with the sweep finished is reused (the anchor then reruns "
                                                  "nothing and reads 0 s)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        (root / "space.toml").write_text(spec_text(sizes))
        out = root / "out"
        py = sys.executable
        t_sweep, _, text = timed_child([py, "-m", "asicsim", "sweep", str(root / "space.toml"), "--out", str(out),
                                        "--workers", str(args.workers), "--json"])
        points = json.loads(text[text.index("{"):])["points"]
        html = root / "report.html"
        t_report, rss, _ = timed_child([py, "-m", "asicsim", "report", str(out), "-o", str(html)])
        size = html.stat().st_size
    print(f"# bench_report  {time.strftime('%Y-%m-%d')}  {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, workers={args.workers}")
    print(f"points {points}; sweep (the anchor) {t_sweep:.1f} s")
    print(f"asicsim report: {t_report:.1f} s (target <= 60), {size / 1e6:.2f} MB HTML (target <= 10), "
          f"peak RSS {rss:,.0f} MiB; report / sweep time {t_report / max(t_sweep, 1e-9):.2f}x")


if __name__ == "__main__":
    main()
