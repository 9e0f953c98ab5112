"""Throughput of a cost-only sweep over a design space, end to end through ``asicsim sweep``.

The spec prices the MNIST-1D CNN's training step under two recipes and DeepBench's server
inference GEMMs and convolutions (int8) on every variant of ``edge_int8_32x32``: array rows x cols
x dataflow x activation-buffer x weight-buffer capacity. Everything a user waits for is timed:
expanding the spec (building and hashing every design), the worker processes, the vectorised
pricing (:mod:`asicsim._src.hw.family`), writing every record atomically, and consolidating the results
table. The anchor, in the same run: the same points priced one design at a time
(``trace_costs`` / ``suite_costs`` per design, no store) on a sample, extrapolated.

    python benchmarks/bench_sweep.py [--sizes 8,16,32,64,128,256] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import asicsim as sim
from asicsim._src.sweep import expand, load_spec


def spec_text(sizes: list[int]) -> str:
    return f"""
recipes = ["fp32", "fp16_mixed"]
[[workloads]]
name = "mnist1d_cnn"
run = ["cost"]
[[kernels]]
suite = "deepbench_gemm_inference_server"
precision = "int8"
[[kernels]]
suite = "deepbench_conv_inference_server"
precision = "int8"
[[design_space]]
base = "edge_int8_32x32"
vary = {{ "array.rows" = {sizes}, "array.cols" = {sizes}, "array.dataflow" = ["os", "ws", "is"], \
"buffers.activations.capacity_kib" = [64, 128, 256, 512, 1024], "buffers.weights.capacity_kib" = [32, 64, 128, 256, 512] }}
"""


def one_at_a_time(spec, sample: int) -> float:
    """Seconds per point pricing ``sample`` designs one by one (the scalar path), per point kind."""
    from asicsim._src.workloads.deepbench import suite_costs
    from asicsim._src.workloads.pricing import trace_costs, workload_trace

    designs = [d for _, d in spec.designs][:sample]
    traces = {r: workload_trace("mnist1d_cnn", r) for r in spec.recipes}
    t = time.perf_counter()
    for d in designs:
        for r, tr in traces.items():
            trace_costs(tr, d, r)
        for k in spec.kernels:
            suite_costs(k["suite"], d, precision=k["precision"])
    return (time.perf_counter() - t) / (len(designs) * (len(traces) + len(spec.kernels)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,16,32,64,128,256", help="array rows and cols values")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sample", type=int, default=20, help="designs priced one at a time for the anchor")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "space.toml"
        path.write_text(spec_text(sizes))
        t0 = time.perf_counter()
        spec = load_spec(path)
        n = len(expand(spec))
        t_expand = time.perf_counter() - t0
        t0 = time.perf_counter()
        summary = sim.sweep(spec, Path(tmp) / "out", workers=args.workers, progress=None)
        wall = time.perf_counter() - t0 + t_expand
        assert summary["done"] == n, summary
        scalar = one_at_a_time(spec, args.sample)
    print(f"# bench_sweep  {time.strftime('%Y-%m-%d')}  {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, workers={args.workers}")
    print(f"designs {len(spec.designs)}, points {n} (2 cost points + 2 DeepBench suites per design)")
    print(f"end to end: {wall:.1f} s (spec load + expand {t_expand:.1f} s) = {n / wall * 60:,.0f} points per minute")
    print(f"one design at a time (no store, 1 process): {scalar * 1e3:.1f} ms per point = "
          f"{60 / scalar:,.0f} points per minute; sweep / scalar speed-up {scalar * n / wall:.1f}x")


if __name__ == "__main__":
    main()
