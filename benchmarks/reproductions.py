"""Reduced-precision training papers reproduced on real workloads, with measured numbers.

1. Gupta et al. 2015 (16-bit fixed point q7.8, weights updated in place): round-to-nearest vs
   stochastic rounding vs fp32 on the digits MLP (SGD, 3000 steps) at learning rates 0.1 and 0.01;
   also the variant where only the in-place weight update is rounded (gradients in fp32).
2. Micikevicius et al. 2018: (a) bf16/fp16 weights without an fp32 master copy vs with it, digits
   MLP, SGD at learning rates 0.01 and 0.001 (3000 steps); (b) loss scaling for narrow-range
   activation gradients (e4m3, fp16) on the MNIST-1D MLP (Adam 1e-2, 1500 steps): accuracy and the
   fraction of activation gradients underflowing, and their exponent histogram.
3. Wang et al. 2018: relative error of K-long fp16 dot products (positive values) accumulated
   sequentially in fp16, in chunks of 64 in fp16, and sequentially in fp32, K = 2^8 .. 2^16.
4. Micikevicius et al. 2018 on speech: the Deep Speech 2-shaped ``speech_ds2`` (CTC, espeak-ng
   corpus) under fp32, fp16_mixed, fp16_nomaster and fp16_noscale (600 steps), then int8 PTQ of
   the fp32 model; test CER (lower is better) on held-out speakers.

Seeds 0 and 1 (mean; accuracies are final test accuracies). The tests holding these outcomes with
margins are tests/repro/test_reproductions.py and tests/repro/test_speech_reproduction.py.

    python benchmarks/reproductions.py [--only gupta|micikevicius|wang|speech] [--seeds 2]

Results: benchmarks/RESULTS.md, section "Paper reproductions".
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import asicsim as sim
from asicsim._src.workloads import train


def _acc(workload, recipe, seeds, **kw):
    t0 = time.perf_counter()
    stats = kw.pop("stats", False)
    r = train(workload, recipe, seeds=seeds, eval_every=kw["steps"], stats=stats, **kw)
    return r, time.perf_counter() - t0


def _cell(r) -> str:
    div = [f"seed {x.seed} diverged at step {x.divergence['step']} ({x.divergence['cause'].split(':')[0]})"
           for x in r.runs if x.diverged]
    return f"{r.mean:.3f} ({', '.join(f'{v:.3f}' for v in r.per_seed)})" + (f"; {'; '.join(div)}" if div else "")


def update_only(rounding: str) -> dict:
    """q7.8 weights updated in place with ``rounding``; forward, gradients and GEMMs in fp32."""
    upd = "q7.8" if rounding == "rne" else {"format": "q7.8", "rounding": "sr"}
    return {"name": f"q7.8_update_only_{'rn' if rounding == 'rne' else 'sr'}",
            "roles": {"weight": "q7.8", "act": "fp32", "out": "fp32", "acc": "fp32", "grad": "fp32",
                      "wgrad": "fp32", "update": upd}}


def grad_recipe(grad: str, scale: float | None) -> dict:
    """Activation gradients (role ``grad``) in ``grad``, all else fp32, optional static loss scale."""
    roles = {"weight": "fp32", "act": "fp32", "out": "fp32", "acc": "fp32", "grad": grad,
             "wgrad": "fp32", "master": "fp32", "update": "fp32"}
    out = {"name": f"{grad}_grads_" + ("unscaled" if scale is None else f"x{scale:g}"), "roles": roles}
    if scale is not None:
        out["loss_scaling"] = {"kind": "static", "init": float(scale)}
    return out


def _lr_table(recipes, names, lrs, seeds) -> None:
    """One markdown row per learning rate: digits MLP test accuracy per recipe, 3000 SGD steps."""
    print("| lr | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for lr in lrs:
        cells, wall = [], 0.0
        for rec in recipes:
            r, dt = _acc("digits_mlp", rec, seeds, lr=lr, steps=3000)
            cells.append(_cell(r))
            wall += dt
        print(f"| {lr:g} | " + " | ".join(cells) + f" |  <!-- {wall:.0f} s -->", flush=True)


def gupta(seeds) -> None:
    recipes = ["fp32", "fixed16_sr", "fixed16_rn", update_only("sr"), update_only("rne")]
    names = ["fp32", "fixed16_sr", "fixed16_rn", "update-only SR", "update-only RN"]
    print("\n### Gupta 2015: digits MLP, q7.8 <8,8>, SGD batch 32, 3000 steps (test accuracy)\n")
    _lr_table(recipes, names, (0.1, 0.01), seeds)


def micikevicius(seeds) -> None:
    recipes = ["fp32", "bf16", "fp16_mixed", "bf16_nomaster", "fp16_nomaster"]
    print("\n### Micikevicius 2018 (a): master copy, digits MLP, SGD batch 32, 3000 steps (test accuracy)\n")
    _lr_table(recipes, recipes, (0.01, 0.001), seeds)

    print("\n### Micikevicius 2018 (b): loss scaling, MNIST-1D MLP, Adam 1e-2, batch 100, 1500 steps\n")
    print("Only the activation gradients (the dY entering the backward GEMMs) are narrow; underflow = "
          "fraction of the nonzero activation gradients that round to zero (seed 0, a training "
          "batch at the last step, times the loss scale).\n")
    print("| recipe | test accuracy | underflow grad:out_in | underflow grad:fc1_in |")
    print("|---|---|---|---|")
    runs = {}
    for rec in ["fp32", grad_recipe("e4m3", None), grad_recipe("e4m3", 1024), grad_recipe("e4m3", 8192),
                grad_recipe("fp16", None), grad_recipe("fp16", 1024)]:
        r, _ = _acc("mnist1d_mlp", rec, seeds, steps=1500, stats=True)
        num = r.runs[0].numerics
        runs[r.recipe] = r
        print(f"| {r.recipe} | {_cell(r)} | {num['grad:out_in']['underflow']:.3f} | "
              f"{num['grad:fc1_in']['underflow']:.3f} |", flush=True)
    histogram(runs["fp32"])


def histogram(r) -> None:
    """Exponent histogram of the fp32 run's activation gradients, unscaled and x1024, against the
    smallest subnormals of e4m3 (2^-9) and fp16 (2^-24)."""
    num = r.runs[0].numerics
    h: dict = {}
    for k in ("grad:out_in", "grad:fc1_in"):
        for e, c in num[k]["exp_hist"].items():
            h[e] = h.get(e, 0) + c
    total = sum(h.values())
    print("\nActivation gradients of the fp32 run (both layers, seed 0, last step): fraction per "
          "binade floor(log2|g|). With loss scale 2^10 every value moves up 10 binades.\n")
    print("| log2 \\|g\\| | fraction | unscaled: e4m3 / fp16 | x1024: e4m3 / fp16 |")
    print("|---|---|---|---|")
    rows: list = []  # consecutive binades with the same fate merged into one row
    for e in sorted(h):
        fate = (_fate(e, -9), _fate(e, -24), _fate(e + 10, -9), _fate(e + 10, -24))
        if rows and rows[-1][2] == fate:
            rows[-1][1] = e
            rows[-1][3] += h[e]
        else:
            rows.append([e, e, fate, h[e]])
    for lo, hi, fate, count in rows:
        span = f"{lo}" if lo == hi else f"{lo} .. {hi}"
        if lo == min(h):
            span = f"<= {hi}" if lo != hi else f"<= {lo}"
        print(f"| {span} | {count / total:.3f} | {fate[0]} / {fate[1]} | {fate[2]} / {fate[3]} |")
    below = {name: sum(c for e, c in h.items() if e < lo) / total for name, lo in (("e4m3", -10), ("fp16", -25))}
    below10 = {name: sum(c for e, c in h.items() if e + 10 < lo) / total for name, lo in (("e4m3", -10), ("fp16", -25))}
    print(f"\nBelow half the smallest subnormal (always zero): e4m3 {below['e4m3']:.3f} unscaled, "
          f"{below10['e4m3']:.3f} at x1024; fp16 {below['fp16']:.4f} unscaled, {below10['fp16']:.4f} at x1024.")


def _fate(e: int, fmt_min: int) -> str:
    """What rounding to nearest does to a value in binade ``e`` in a format whose smallest subnormal
    is 2^fmt_min."""
    if e >= fmt_min:
        return "kept"
    if e == fmt_min - 1:
        return f"0 or 2^{fmt_min}"
    return "zero"


def wang(rows: int = 8) -> None:
    print(f"\n### Wang 2018: K-long fp16 dot products of positive values (uniform [0,1)), {rows} rows, "
          "median relative error\n")
    print("| K | fp16 sequential | fp16 chunk:64 | fp32 sequential | wall |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for k in [2**8, 2**10, 2**12, 2**14, 2**16]:
        t0 = time.perf_counter()
        a = np.asarray(sim.quantize(rng.uniform(0, 1, (rows, k)).astype(np.float32), "fp16"))
        b = np.asarray(sim.quantize(rng.uniform(0, 1, (k, 1)).astype(np.float32), "fp16"))
        exact = (a.astype(np.float64) @ b.astype(np.float64))[:, 0]
        errs = []
        for spec in ("a=fp16,b=fp16,acc=fp16,order=sequential", "a=fp16,b=fp16,acc=fp16,order=chunk:64",
                     "a=fp16,b=fp16,acc=fp32,order=sequential"):
            got = np.asarray(sim.matmul(a, b, spec), np.float64)[:, 0]
            errs.append(float(np.median(np.abs(got - exact) / exact)))
        print(f"| 2^{int(np.log2(k))} | {errs[0]:.3g} | {errs[1]:.3g} | {errs[2]:.3g} | "
              f"{time.perf_counter() - t0:.1f} s |", flush=True)


def speech(seeds, steps: int = 600) -> None:
    """Micikevicius 2018 on the Deep Speech 2-shaped workload: test CER, WER, skipped steps and
    the largest fraction of activation gradients that underflow; then int8 PTQ of the fp32 model."""
    print(f"\n## speech_ds2 ({steps} steps, Adam 1e-3, batch 32): test CER on held-out speakers\n")
    print("| recipe | CER (mean; per seed) | WER | skipped steps | grad underflow (max layer) | s |")
    print("|---|---|---|---|---|---|")
    fp32_params = None
    for recipe in ("fp32", "fp16_mixed", "fp16_nomaster", "fp16_noscale"):
        t0 = time.perf_counter()
        r = train("speech_ds2", recipe, seeds=seeds, steps=steps, eval_every=steps // 2,
                  keep_params=recipe == "fp32")
        if recipe == "fp32":
            fp32_params = [x.params for x in r.runs]
        wer = np.mean([x.curves["test_wer"][-1] for x in r.runs])
        skipped = sum(x.skipped_steps for x in r.runs)
        under = max(v["underflow"] for x in r.runs for k, v in x.numerics.items() if k.startswith("grad:"))
        print(f"| {recipe} | {_cell(r)} | {wer:.3f} | {skipped} | {under:.2e} | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)
    from asicsim._src.workloads import infer

    for recipe in ("int8_ptq_tensor", "int8_ptq_channel"):
        q = infer("speech_ds2", recipe, seeds=seeds, params=fp32_params, stats=False)
        print(f"| fp32 model under {recipe} | {q.mean:.3f} (fp32 {np.mean(q.fp32):.3f}; drop {q.drop:+.4f}) "
              f"| | | | |", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["gupta", "micikevicius", "wang", "speech"])
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args(argv)
    seeds = tuple(range(args.seeds))
    import jax

    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"jax {jax.__version__}, seeds {list(seeds)}")
    t0 = time.perf_counter()
    if args.only in (None, "gupta"):
        gupta(seeds)
    if args.only in (None, "micikevicius"):
        micikevicius(seeds)
    if args.only in (None, "wang"):
        wang()
    if args.only in (None, "speech"):
        speech(seeds)
    print(f"\n# total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
