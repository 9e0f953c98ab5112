"""Accuracy vs weight sparsity of a GRU pruned during training, and the sparse data movement of the
same run (issue 34 item 5; Narang et al., "Exploring Sparsity in Recurrent Neural Networks",
ICLR 2017: RNNs pruned to 90-95 % during training lose little accuracy).

MNIST-1D's GRU workload (``mnist1d_gru``, bidirectional, head on all 40 steps) widened to
``--hidden`` units, trained ``--steps`` steps in fp32 per seed: dense, then every weight matrix
(``*/w*``: the input and recurrent weights of both directions and the head) pruned on Zhu & Gupta's
cubic schedule to each ``--sparsities`` target (exact at the end step), plus Narang's threshold
schedule aimed at 90 % (its ``q`` the 90 % quantile of each update's weights, so it ends at 90 % to
a weight too; the sparsity reached is measured either way). Pruning runs from ``--start`` to ``--end`` every ``--every`` steps; the rest of the run
trains with the masks fixed. Each run's measured per-layer sparsity is priced: one bf16
inference batch of ``--price-batch`` (``workload_trace(..., training=False)``) on ``--design``,
weights stored ``bitmask`` (nonzeros plus one bit per position), DRAM bytes and energy beside the
dense model's.

    python benchmarks/bench_pruning.py [--hidden 32] [--steps 1500] [--seeds 0] [--start 200] [--end 1000]
                                       [--every 50] [--sparsities 0.5 0.8 0.9 0.95] [--design dc_bf16_128x128]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from asicsim._src.workloads import train
from asicsim._src.workloads.pricing import price_trace, workload_trace
from asicsim._src.workloads.prune_price import sparse_trace
from asicsim._src.workloads.prune_rules import PruneRule
from asicsim._src.workloads.workload import load_workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--start", type=int, default=200)
    ap.add_argument("--end", type=int, default=1000)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--sparsities", type=float, nargs="+", default=[0.5, 0.8, 0.9, 0.95])
    ap.add_argument("--design", default="dc_bf16_128x128")
    ap.add_argument("--price-batch", type=int, default=1)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    base = load_workload("mnist1d_gru")
    w = base.replace(sizes={**base.sizes, "hidden": a.hidden}, steps=a.steps, eval_every=a.steps)
    runs = [("dense", ())]
    runs += [(f"cubic {s:.0%}", (PruneRule("cubic", start=a.start, end=a.end, every=a.every, sparsity=s,
                                           match="*/w*"),)) for s in a.sparsities]
    ramp = a.start + (a.end - a.start) // 2
    runs.append(("narang, aimed at 90%", (PruneRule("narang", start=a.start, ramp=ramp, end=a.end, every=a.every,
                                                   sparsity=0.9, match="*/w*"),)))
    trace = workload_trace(w, "bf16", batch=a.price_batch, training=False)
    dense_price = price_trace(trace, [a.design], "bf16").set_index("role").loc["total"]
    rows = []
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')}; "
          f"mnist1d_gru hidden {a.hidden}, {a.steps} steps, seeds {a.seeds}")
    print("| run | sparsity reached (all weight matrices) | test accuracy (per seed) | DRAM bytes / inference "
          "| energy uJ / inference |")
    print("|---|---|---|---|---|")
    for name, rules in runs:
        t0 = time.perf_counter()
        r = train(w.replace(prune=rules), "fp32", seeds=tuple(a.seeds), stats=False)
        sp = r.runs[0].sparsity
        if rules:
            sizes = {p: n for p, n in _sizes(w).items() if p in sp}
            reached = sum(sp[p] * n for p, n in sizes.items()) / sum(sizes.values())
            price = price_trace(sparse_trace(trace, sp), [a.design], "bf16").set_index("role").loc["total"]
        else:
            reached, price = 0.0, dense_price
        row = {"run": name, "sparsity": reached, "per_layer": sp, "accuracy": r.per_seed, "mean": r.mean,
               "diverged": r.diverged, "dram_bytes": float(price["dram_bytes"]),
               "energy_j": float(price["energy_j"]), "seconds": time.perf_counter() - t0}
        rows.append(row)
        print(f"| {name} | {reached:.1%} | {r.mean:.3f} ({', '.join(f'{x:.3f}' for x in r.per_seed)}) "
              f"| {row['dram_bytes']:.0f} ({row['dram_bytes'] / float(dense_price['dram_bytes']):.2f}x) "
              f"| {row['energy_j'] * 1e6:.3f} ({row['energy_j'] / float(dense_price['energy_j']):.2f}x) |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rows": rows}, f, indent=1)


def _sizes(w) -> dict[str, int]:
    """Elements of every weight matrix of the workload's model, by path."""
    import jax

    from asicsim._src.emulate.layer_rules import leaf_paths
    from asicsim._src.workloads.training import build

    _, model = build(w)
    params = model.init(0)
    return {p: int(np.size(x)) for p, x in zip(leaf_paths(params), jax.tree_util.tree_leaves(params), strict=True)
            if np.ndim(x) >= 2}


if __name__ == "__main__":
    main()
