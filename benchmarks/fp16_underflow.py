"""fp16 where it fails: activation gradients below fp16's range, and loss scaling recovering them.

Micikevicius et al. (Mixed Precision Training, ICLR 2018, section 3.2 and Figure 3) show the
histogram of activation gradients collected during fp32 training and the part of it below fp16's
smallest subnormal, 2^-24, which becomes zero in fp16; scaling the loss shifts the histogram up
into fp16's range. This script does the same on a workload (default ``mnist1d_deep_mlp``: a plain
MLP whose backward pass shrinks the gradient at every layer, so its lower layers' activation
gradients lie below 2^-24):

1. the log2 histogram of |activation gradient| (every tapped GEMM input's gradient, all layers,
   one training batch) of the fp32 model after its first step and at the end of fp32 training,
   with fp16's smallest subnormal (2^-24) and smallest normal (2^-14) marked, the fractions below
   them (:mod:`asicsim._src.workloads.grad_underflow`) and per layer the fraction below 2^-24;
2. the workload trained under fp32, fp16 without loss scaling (``fp16_noscale``) and fp16 with
   dynamic loss scaling (``fp16_mixed``: init 2^16) on each seed: the final metric per seed.

    python benchmarks/fp16_underflow.py                      # mnist1d_deep_mlp, seeds 0 1
    python benchmarks/fp16_underflow.py --workload mnist1d_mlp --seeds 0 --steps 1000

Results: benchmarks/RESULTS.md, "fp16 without loss scaling: where it fails".
"""

from __future__ import annotations

import argparse
import json
import time

RECIPES = ("fp32", "fp16_noscale", "fp16_mixed")


def first_step_histograms(workload: str, seed: int):
    """(histogram of the activation gradients after one fp32 step, their per-layer fraction below
    fp16's smallest subnormal, the fractions of the weight gradients (the dW GEMMs' outputs))."""
    from asicsim._src.workloads import train
    from asicsim._src.workloads.grad_underflow import merged_histogram, underflow_fractions

    first = train(workload, "fp32", seeds=(seed,), steps=1, eval_every=1).runs[0].numerics

    def depth(name):  # fc1_in, ..., fc17_in, out_in: the order of the layers
        digits = "".join(c for c in name if c.isdigit())
        return int(digits) if digits else 1 << 30

    layers = {k.split(":", 1)[1]: underflow_fractions(merged_histogram({k: first[k]}))["below_min"]
              for k in sorted((k for k in first if k.startswith("grad:")), key=depth)}
    return merged_histogram(first), layers, underflow_fractions(merged_histogram(first, "wgrad"))


def recipe_runs(workload: str, seeds, steps: int | None) -> dict:
    """{recipe: TrainResult} for :data:`RECIPES` (fp32 with its numerics statistics: the
    histogram at the end of training)."""
    from asicsim._src.workloads import train

    return {rec: train(workload, rec, seeds=tuple(seeds), steps=steps, stats=rec == "fp32") for rec in RECIPES}


def _print_histogram(title: str, hist: dict) -> dict:
    from asicsim._src.workloads.grad_underflow import histogram_lines, underflow_fractions

    f = underflow_fractions(hist)
    print(f"\n{title}: {f['values']} values; below 2^-25 (fp16 rounds to 0) {100 * f['zero']:.1f} %, "
          f"below 2^-24 {100 * f['below_min']:.1f} %, below 2^-14 (subnormal) {100 * f['subnormal']:.1f} %")
    print("\n".join(histogram_lines(hist)))
    return f


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="mnist1d_deep_mlp")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the workload's)")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    args = ap.parse_args(argv)
    from asicsim._src.workloads import load_workload
    from asicsim._src.workloads.grad_underflow import merged_histogram

    steps = args.steps or load_workload(args.workload).steps
    t0 = time.perf_counter()
    first, layers, wgrad = first_step_histograms(args.workload, args.seeds[0])
    runs = recipe_runs(args.workload, args.seeds, steps)
    last = merged_histogram(runs["fp32"].runs[0].numerics)
    out = {"workload": args.workload, "seeds": args.seeds, "steps": steps,
           "after_first_step": _print_histogram(f"{args.workload}, fp32, activation gradients after step 1", first),
           "at_end": _print_histogram(f"{args.workload}, fp32 (seed {args.seeds[0]}), activation gradients "
                                      f"after step {steps}", last),
           "layer_below_min_after_first_step": layers}
    print("\nper layer, after step 1: fraction of the activation gradient below 2^-24")
    for name, v in layers.items():
        print(f"  {name:<12} {100 * v:6.1f} %")
    print(f"weight gradients after step 1: below 2^-25 {100 * wgrad['zero']:.1f} %, below 2^-24 "
          f"{100 * wgrad['below_min']:.1f} %, below 2^-14 {100 * wgrad['subnormal']:.1f} % of {wgrad['values']} nonzero")
    out["wgrad_after_first_step"] = wgrad
    print(f"\n| recipe | {runs['fp32'].metric} per seed ({', '.join(map(str, args.seeds))}) | mean | "
          "skipped steps | diverged |\n|---|---|---|---|---|")
    out["runs"] = {}
    for rec, r in runs.items():
        skipped = [x.skipped_steps for x in r.runs]
        print(f"| {rec} | {', '.join(f'{v:.4f}' for v in r.per_seed)} | {r.mean:.4f} | "
              f"{', '.join(map(str, skipped))} | {r.diverged} |")
        out["runs"][rec] = {"per_seed": r.per_seed, "mean": r.mean, "skipped": skipped, "diverged": r.diverged}
    out["seconds"] = time.perf_counter() - t0
    print(f"\n{out['seconds']:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return out


if __name__ == "__main__":
    main()
