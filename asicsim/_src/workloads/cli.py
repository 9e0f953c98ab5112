"""``asicsim train`` and ``asicsim infer``: real workloads under a precision recipe.

Registered by :func:`add_cli` on the main parser's subparsers; :func:`run_train` and
:func:`run_infer` run a parsed command and return the exit status.
"""

from __future__ import annotations

import sys

import numpy as np

from asicsim._src.cli_commands import command_help
from asicsim._src.cli_json import json_text

SCALE_HELP = ("the workload's scale: small (default: the base settings, for a CPU) or one of its "
              "[scales.NAME] tables, e.g. gpu (asicsim workloads lists each workload's scales)")


def add_cli(subparsers) -> None:
    """Register ``train`` and ``infer`` on an argparse subparsers object."""
    from asicsim._src.cli_types import number
    from asicsim._src.workloads.workload import OPTIMIZERS
    from asicsim._src.workloads.workload_checks import MAX_BATCH, MAX_SEEDS, MAX_STEPS

    seeds, steps = number(int, maximum=MAX_SEEDS), number(int, maximum=MAX_STEPS)

    p = subparsers.add_parser(
        "train", help=command_help("train"),
        description="Train WORKLOAD (workloads/<name>.toml: digits_mlp, mnist1d_*, charlm_transformer, "
                    "...) with its GEMMs, gradients, weight update and optimizer state in the formats of "
                    "--recipe, once per seed. Prints the final test_accuracy (val_loss for the language "
                    "model, test_cer (character error rate, lower is better) for speech) as the mean "
                    "over seeds and per seed, whether a run diverged (step, cause), "
                    "the curves and per-tensor numerics statistics (fraction underflowed to zero, "
                    "overflowed; amax, fraction with |x| >= 6 (LLM.int8()'s outliers), kurtosis; "
                    "exponent histograms and every evaluation's amax/outliers with --json).")
    p.add_argument("workload", help="a training workload name or .toml path")
    p.add_argument("--recipe", default="fp32", help="precision recipe (formats/recipes/<name>.toml or a path)")
    p.add_argument("--seeds", type=seeds, default=2, help="number of seeds 0..N-1 (default 2)")
    p.add_argument("--optimizer", choices=list(OPTIMIZERS), help="override the workload's optimizer (default: the workload's)")
    p.add_argument("--lr", type=number(float, 0, above=True), help="override the learning rate (default: the workload's)")
    p.add_argument("--steps", type=steps, help="override the number of optimizer steps (default: the workload's)")
    p.add_argument("--batch", type=number(int, maximum=MAX_BATCH), help="override the batch size (default: the workload's)")
    p.add_argument("--eval-every", type=steps, help="override the evaluation cadence in steps (default: the workload's)")
    p.add_argument("--scale", help=SCALE_HELP)
    p.add_argument("--json", action="store_true", help="machine-readable output (everything)")
    p.set_defaults(func=run_train)

    p = subparsers.add_parser(
        "infer", help=command_help("infer"),
        description="Train WORKLOAD in fp32 (per seed), then evaluate its forward pass under --recipe "
                    "(e.g. int8_ptq_tensor, int8_ptq_channel, mxfp4; static scales are calibrated on "
                    "training batches where the recipe asks). Prints the fp32 and quantized metric, "
                    "the drop and the numerics statistics of weights and activations.")
    p.add_argument("workload", help="a training workload name or .toml path")
    p.add_argument("--recipe", required=True, help="inference recipe")
    p.add_argument("--seeds", type=seeds, default=1, help="number of seeds 0..N-1 (default 1)")
    p.add_argument("--steps", type=steps, help="override the fp32 training's steps (default: the workload's)")
    p.add_argument("--scale", help=SCALE_HELP)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run_infer)


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def _number(v, spec: str) -> str:
    """A figure of the numerics table, or a dash where there is none (None or NaN)."""
    return "–" if v is None or np.isnan(v) else format(v, spec)


def _numerics_lines(numerics: dict) -> list[str]:
    lines = [f"  {'tensor':28s} {'format':14s} {'underflow':>9s} {'overflow':>9s} {'zero':>7s} "
             + (" learned step (LSQ)" if numerics and all("step" in s for s in numerics.values())
                else f"{'amax':>9s} {'|x|>=6':>8s} {'kurt':>6s}  exponents")]
    for name, s in numerics.items():
        if "step" in s:  # a learned-step operand (asicsim._src.workloads.lsq_stats): its step, not exponents
            lines.append(f"  {name:28s} {s['format']:14s} {s['underflow']:9.2%} {s['overflow']:9.2%} "
                         f"{s['zero']:7.1%}  learned step {s['step']:.3g} ({s['step_min']:.3g}..{s['step_max']:.3g}), "
                         f"relative error {_number(s['rel_error'], '.2%')}")
            continue
        hist = s.get("exp_hist") or {}
        span = f"2^{min(hist)}..2^{max(hist)}" if hist else "none (no nonzero finite value)"
        fmt_span = ("" if s.get("fmt_min_exp") is None
                    else f" (format 2^{s['fmt_min_exp']:.0f}..2^{s['fmt_max_exp']:.1f})")
        lines.append(f"  {name:28s} {s['format']:14s} {s['underflow']:9.2%} {s['overflow']:9.2%} "
                     f"{s['zero']:7.1%} {_number(s.get('amax'), '.3g'):>9s} "
                     f"{_number(s.get('outliers'), '.2%'):>8s} {_number(s.get('kurtosis'), '.1f'):>6s}  "
                     f"{span}{fmt_span}")
    grads = [s for name, s in numerics.items() if name.split(":")[0] in ("grad", "wgrad")]
    if any(_number(s.get("outliers"), "") == "–" for s in grads):
        lines.append("  |x|>=6 –: not counted for gradients: they are measured times the loss scale, where "
                     "LLM.int8()'s threshold on activations means nothing")
    if any("step" in s for s in numerics.values()):
        lines.append("  learned steps (LSQ): overflow = the fraction beyond the codes (clipped to -Qn..Qp times the "
                     "step), underflow = nonzero elements rounded to 0")
    if any(_number(s.get("kurtosis"), "") == "–" for s in numerics.values() if "step" not in s):
        lines.append("  kurt –: no spread (the tensor's finite elements are all equal, or none is finite)")
    return lines


def _error(command: str, err: Exception) -> int:
    print(f"asicsim {command}: error: {err}", file=sys.stderr)
    return 2


def run_train(args) -> int:
    from asicsim._src.cli_progress import StepProgress
    from asicsim._src.workloads.datasets import DatasetUnavailable
    from asicsim._src.workloads.training import train

    bar = StepProgress(f"train {args.workload} under {args.recipe}", "steps (all seeds)")
    try:
        r = train(args.workload, args.recipe, seeds=tuple(range(args.seeds)), optimizer=args.optimizer,
                  lr=args.lr, steps=args.steps, batch=args.batch,
                  eval_every=getattr(args, "eval_every", None), progress=bar.update,
                  scale=getattr(args, "scale", None))
    except DatasetUnavailable as err:
        return _error("train", err)
    finally:
        bar.close()
    if args.json:
        print(json_text(r.to_dict(), indent=1))
        return 0
    s = r.settings
    print(f"{r.workload} (scale {s['scale']}) under {r.recipe}: {s['model']} on {s['dataset']}, "
          f"{s['optimizer']} lr {s['lr']:g}, "
          f"batch {s['batch']}, {s['steps']} steps")
    print(f"{r.metric}: {r.mean:.4f} (mean of {len(r.runs)} seeds: "
          f"{', '.join(f'{v:.4f}' for v in r.per_seed)})")
    if r.metric == "test_cer":
        from asicsim._src.workloads import speech_corpus_stats

        print(speech_corpus_stats.baseline_line(s["dataset"]))
    print(f"diverged: {r.diverged}")
    for run in r.runs:
        div = (f"diverged at step {run.divergence['step']}: {run.divergence['cause']}"
               if run.diverged else "no divergence")
        print(f"\nseed {run.seed}: {run.metric} {run.final:.4f}; {div}; skipped steps {run.skipped_steps}, "
              f"overflow steps {run.overflow_steps}; {run.seconds:.1f} s")
        c = run.curves
        # speech (CTC) has error rates (lower is better) where a classifier has an accuracy
        last, names = (("test_cer", "test_wer"), ("test_cer", "test_wer")) if "test_cer" in c else (
            ("test_accuracy",), ("test_acc",))
        print(f"  {'step':>6s} {'train_loss':>10s} {'test_loss':>10s} " + " ".join(f"{n:>9s}" for n in names))
        for i, step in enumerate(c["step"]):
            print(f"  {step:6d} {_fmt(c['train_loss'][i]):>10s} {_fmt(c['test_loss'][i]):>10s} "
                  + " ".join(f"{_fmt(c[k][i]):>9s}" for k in last))
        if any(None in c[k] for k in (*last, "test_loss")):
            print("  n/a: not measured (a language model has no test accuracy)")
        if run.numerics:
            print(f"  numerics at step {c['step'][-1]} (one training batch; gradients before rounding, "
                  "times the loss scale):")
            print("\n".join(_numerics_lines(run.numerics)))
    return 0


def run_infer(args) -> int:
    from asicsim._src.cli_progress import StepProgress
    from asicsim._src.workloads.datasets import DatasetUnavailable
    from asicsim._src.workloads.post_training import infer

    bar = StepProgress(f"infer {args.workload}: fp32 training", "steps (all seeds)")
    try:
        r = infer(args.workload, args.recipe, seeds=tuple(range(args.seeds)), steps=args.steps,
                  progress=bar.update, scale=getattr(args, "scale", None))
    except DatasetUnavailable as err:
        return _error("infer", err)
    finally:
        bar.close()
    if args.json:
        print(json_text(r.to_dict(), indent=1))
        return 0
    print(f"{r.workload}: fp32-trained model evaluated under {r.recipe} (calibration: {r.calibration})")
    print(f"{r.metric}: {r.mean:.4f} (per seed: {', '.join(f'{v:.4f}' for v in r.quantized)}); "
          f"fp32 {np.mean(r.fp32):.4f}; drop {r.drop:+.4f}")
    print(f"diverged: {r.diverged}")
    if r.numerics:
        print("numerics (one training batch):")
        print("\n".join(_numerics_lines(r.numerics)))
    return 0
