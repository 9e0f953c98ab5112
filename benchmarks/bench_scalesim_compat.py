"""asicsim's closed-form SCALE-Sim model against SCALE-Sim 3.0.0's own run time, and a design sweep.

1. ResNet-18 and ViT-S on SCALE-Sim's shipped configs (32x32 ws CALC; 256x256 os USER): asicsim's
   CPU time per network per design point (mean of repeats; with the DataFrame, and arrays only)
   against the CPU seconds
   SCALE-Sim took for the same run, as recorded by ``scripts/make_scalesim_golden.py`` in
   ``tests/hw/golden/scalesim_runs.json``. A run SCALE-Sim did not finish within the golden limit is
   reported with the CPU seconds it had used, so its ratio is a lower bound (marked ``>=``).
2. A vectorised sweep over ResNet-18's layers: array rows 1..192 x cols 1..192 x {os, ws, is}
   (110 592 design points), in chunks, printing design points per minute.

    python benchmarks/bench_scalesim_compat.py [--repeat 50] [--max-side 192]
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time
from pathlib import Path

import numpy as np

from asicsim._src.hw import (
    read_scalesim_config,
    read_scalesim_topology,
    scalesim_arrays,
    scalesim_report,
)

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "hw" / "golden"


def _cpu_s(fn, repeat: int) -> float:
    """Mean CPU seconds per call (CPU, not wall, time: SCALE-Sim's reference is CPU seconds too,
    and the machine may be shared)."""
    fn()  # warm up
    t0 = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - t0) / repeat


def bench_networks(repeat: int) -> None:
    runs = {r["run"]: r for r in json.loads((GOLDEN / "scalesim_runs.json").read_text())["runs"]}
    print(f"{'run':28s} {'layers':>6s} {'asicsim CPU ms':>14s} {'arrays ms':>9s} "
          f"{'SCALE-Sim CPU s':>15s} {'speed-up (df / arrays)':>22s}")
    for cfg_name in ("shipped_scale", "shipped_google"):
        cfg = read_scalesim_config(GOLDEN / "inputs" / f"{cfg_name}.cfg")
        knobs = {"ifmap_sram_kib": cfg.ifmap_sram_kib, "filter_sram_kib": cfg.filter_sram_kib,
                 "ofmap_sram_kib": cfg.ofmap_sram_kib, "bandwidth_mode": cfg.bandwidth_mode,
                 "bandwidth_words": cfg.bandwidth_words,
                 "ifmap_bank_bandwidth_words": cfg.ifmap_bank_bandwidth_words,
                 "filter_bank_bandwidth_words": cfg.filter_bank_bandwidth_words}
        for net in ("Resnet18", "vit_s"):
            topo = read_scalesim_topology(GOLDEN / "inputs" / f"{net}.csv")
            args = (topo, cfg.rows, cfg.cols, cfg.dataflow)
            t_df = _cpu_s(functools.partial(scalesim_report, *args, **knobs), repeat)
            t_arr = _cpu_s(functools.partial(scalesim_arrays, *args, **knobs), repeat)
            rec = runs.get(f"{cfg_name}/{net}", {})
            cpu_s = rec.get("cpu_s")
            if cpu_s is None:
                ref, ratio = "not run", "-"
            else:
                bound = ">=" if rec["status"] != "ok" else ""
                ref = f"{bound}{cpu_s:.1f}"
                ratio = f"{bound}{cpu_s / t_df:,.0f}x / {cpu_s / t_arr:,.0f}x"
            print(f"{cfg_name + '/' + net:28s} {len(topo.layer_names):6d} {t_df * 1e3:14.2f} "
                  f"{t_arr * 1e3:9.2f} {ref:>15s} {ratio:>22s}")


def bench_sweep(max_side: int, chunk_points: int = 16384) -> None:
    topo = read_scalesim_topology(GOLDEN / "inputs" / "Resnet18.csv")
    side = np.arange(1, max_side + 1)
    rows, cols, dfs = (a.ravel() for a in np.meshgrid(side, side, np.arange(3), indexing="ij"))
    points = rows.size
    t0, c0 = time.perf_counter(), time.process_time()
    best_cycles = np.inf
    for start in range(0, points, chunk_points):
        sl = slice(start, start + chunk_points)
        a = scalesim_arrays(topo, rows[sl], cols[sl], dfs[sl], ifmap_sram_kib=4096,
                            filter_sram_kib=4096, ofmap_sram_kib=4096)
        best_cycles = min(best_cycles, float(a["Total Cycles"].sum(axis=1).min()))
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    layers = len(topo.layer_names)
    print(f"sweep: {points:,} design points x {layers} ResNet-18 layers in {dt:.2f} s wall, "
          f"{cpu:.2f} s CPU: {points / dt * 60:,.0f} design points/minute by wall clock, "
          f"{points / cpu * 60:,.0f} by CPU time ({cpu / points * 1e6:.1f} us CPU per design "
          f"point per network); fewest total cycles {best_cycles:,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--max-side", type=int, default=192)
    args = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.processor() or platform.machine()}")
    bench_networks(args.repeat)
    bench_sweep(args.max_side)


if __name__ == "__main__":
    main()
