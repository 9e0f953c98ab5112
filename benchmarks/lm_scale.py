"""fp8 / MX recipes against bf16 on the GPT-2-shaped character LM (workload gpt2_small_lm).

Trains the workload at ``--scale`` (``small``: 4 layers, d_model 128, context 64, ~1-2 min per
recipe on 2 CPU cores; ``gpu``: GPT-2 small's 12 layers, d_model 768, 12 heads, context 1024, for
one GPU) under each recipe and writes two tables: the validation loss (nats per character; chance
is ln 96 = 4.56) with divergence and time, and per layer the activations' amax, outlier fraction
(|x| >= 6, LLM.int8()'s definition) and kurtosis (asicsim._src.workloads.stats) at the last evaluation
and the largest amax over all evaluations. Where fp8/MX formats fail on transformers it is through
such outliers and the loss spikes they cause, so both are shown side by side.

    python benchmarks/lm_scale.py                       # small scale, bf16 fp8_hybrid mxfp8 mxfp4
    python benchmarks/lm_scale.py --scale gpu --out lm_gpu   # on a GPU machine: one command

``--out DIR`` keeps ``lm_scale_<scale>.md`` (the tables) and ``lm_scale_<scale>.json`` (every
run's curves and numerics curve). Results: benchmarks/RESULTS.md, "GPT-2-shaped LM: fp8/MX vs bf16".
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
from pathlib import Path

RECIPES = ("bf16", "fp8_hybrid", "mxfp8", "mxfp4")


def _machine() -> str:
    import jax

    dev = jax.devices()[0]
    kind = getattr(dev, "device_kind", dev.platform)
    return f"{platform.node()}, {kind} ({dev.platform}), {os.cpu_count()} CPUs, jax {jax.__version__}"


def _loss_table(results: dict) -> list[str]:
    lines = ["| recipe | val loss (mean) | per seed | diverged | test loss curve (seed 0) | s per run |",
             "|---|---|---|---|---|---|"]
    for rec, r in results.items():
        div = "; ".join(f"step {x.divergence['step']}: {x.divergence['cause']}" for x in r.runs if x.diverged) or "no"
        curve = " ".join(f"{v:.3f}" for v in r.runs[0].curves["test_loss"])
        secs = sum(x.seconds for x in r.runs) / len(r.runs)
        lines.append(f"| {rec} | {r.mean:.4f} | {', '.join(f'{v:.4f}' for v in r.per_seed)} | {div} "
                     f"| {curve} | {secs:.0f} |")
    return lines


def _layer_table(results: dict) -> list[str]:
    """Per activation tap (so per layer): amax / outlier fraction / kurtosis at the last evaluation
    and the largest amax over the run, seed 0."""
    recs = list(results)
    taps = sorted({k for r in results.values() for c in r.runs[0].numerics_curve
                   for k in c["tensors"] if k.startswith("act:")})
    head = "| tensor | " + " | ".join(f"{r}: amax (max over run) / outliers / kurtosis" for r in recs) + " |"
    lines = [head, "|---|" + "---|" * len(recs)]
    for t in taps:
        cells = []
        for rec in recs:
            curve = results[rec].runs[0].numerics_curve
            have = [c["tensors"][t] for c in curve if t in c["tensors"]]
            if not have:
                cells.append("n/a")
                continue
            last, top = have[-1], max(h["amax"] for h in have)
            cells.append(f"{last['amax']:.2f} ({top:.2f}) / {last['outliers']:.2e} / {last['kurtosis']:.1f}")
        lines.append(f"| {t.removeprefix('act:')} | " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", default="small", help="the workload's scale: small (default) or gpu")
    ap.add_argument("--recipes", default=",".join(RECIPES), help="comma-separated training recipes")
    ap.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per recipe (default 1)")
    ap.add_argument("--steps", type=int, help="override the scale's steps (e.g. a short GPU check)")
    ap.add_argument("--workload", default="gpt2_small_lm", help="a language-model workload")
    ap.add_argument("--out", type=Path, help="folder for the tables (.md) and all curves (.json)")
    args = ap.parse_args(argv)

    from asicsim._src.workloads.training import train
    from asicsim._src.workloads.workload import load_workload

    w = load_workload(args.workload, args.scale).replace(steps=args.steps)
    results = {}
    t0 = time.perf_counter()
    for rec in args.recipes.split(","):
        r = train(w, rec, seeds=tuple(range(args.seeds)))
        results[rec] = r
        print(f"# {rec}: val loss {r.mean:.4f}, diverged {r.diverged}, "
              f"{sum(x.seconds for x in r.runs):.0f} s", flush=True)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = [f"{w.name} at scale {w.scale}: {w.model} {w.sizes}, context {w.context}, batch {w.batch}, "
            f"{w.steps} steps, {w.optimizer} lr {w.lr:g}, on {w.dataset}; {args.seeds} seed(s); "
            f"{when}; {_machine()}; {time.perf_counter() - t0:.0f} s in all", ""]
    text = "\n".join([*head, *_loss_table(results), "", *_layer_table(results)]) + "\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"lm_scale_{w.scale}.md").write_text(text)
        dump = {rec: r.to_dict() for rec, r in results.items()}
        (args.out / f"lm_scale_{w.scale}.json").write_text(json.dumps(dump, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
