"""fp32 baselines of the training workloads, against the MNIST-1D paper's table.

Greydanus (2020), "Scaling down Deep Learning", Table 1 (test accuracy): logistic regression 32 %,
MLP 68 %, CNN 94 %, GRU 91 %. Each workload trains its full schedule (Adam 1e-2, batch 100, 6000
steps, the paper's setup) over two seeds; the script prints one line per workload and checks the
mean against the paper within 3 points.

    python benchmarks/workload_baselines.py [--seeds 2] [--recipe fp32] [WORKLOAD ...]
    python benchmarks/workload_baselines.py --ptq [WORKLOAD ...]   # accuracy-drop table

``--ptq`` trains each workload in fp32 (seed 0) and prints the post-training-quantization table:
the metric under each inference recipe and its drop from fp32.

Results: benchmarks/RESULTS.md, section "Training workload baselines".
"""

from __future__ import annotations

import argparse
import os
import platform
import time

PAPER = {"mnist1d_logreg": 0.32, "mnist1d_mlp": 0.68, "mnist1d_cnn": 0.94, "mnist1d_gru": 0.91}
DEFAULT = [*PAPER, "mnist1d_lstm", "digits_mlp", "charlm_transformer"]
PTQ_WORKLOADS = ["digits_mlp", "mnist1d_mlp", "mnist1d_cnn", "mnist1d_gru"]
PTQ_RECIPES = ["int8_ptq_tensor", "int8_ptq_channel", "mxfp8", "mxfp6", "mxfp4"]


def ptq(workloads) -> int:
    import pandas as pd

    from asicsim._src.workloads.post_training import accuracy_drop_table

    pd.set_option("display.width", 200)
    for name in workloads:
        t0 = time.perf_counter()
        table = accuracy_drop_table(name, PTQ_RECIPES)
        print(table.drop(columns=["calibration"]).to_string(index=False, float_format="%.4f"))
        print(f"# {name}: {time.perf_counter() - t0:.0f} s; calibration: "
              f"{dict(zip(table.recipe, table.calibration, strict=True))}\n", flush=True)
    return 0


def main(argv=None) -> int:
    from asicsim._src.workloads.training import train

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="*", default=DEFAULT)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--recipe", default="fp32")
    ap.add_argument("--ptq", action="store_true", help="the accuracy-drop table instead")
    args = ap.parse_args(argv)
    if args.ptq:
        return ptq(args.workloads if args.workloads != DEFAULT else PTQ_WORKLOADS)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, recipe {args.recipe}")
    failed = []
    for name in args.workloads:
        t0 = time.perf_counter()
        r = train(name, args.recipe, seeds=tuple(range(args.seeds)), stats=False)
        dt = time.perf_counter() - t0
        vals = ", ".join(f"{v:.3f}" for v in r.per_seed)
        line = f"{name:20s} {r.metric} {r.mean:.3f} (seeds: {vals}) steps {r.settings['steps']} {dt:.0f} s"
        if name in PAPER:
            ok = abs(r.mean - PAPER[name]) <= 0.03
            line += f"  paper {PAPER[name]:.2f} {'OK' if ok else 'MISS'}"
            if not ok:
                failed.append(name)
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
