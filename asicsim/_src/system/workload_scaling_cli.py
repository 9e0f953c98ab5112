"""``asicsim scaling --model WORKLOAD``: strong scaling of a training workload's own step, split
data, tensor or pipeline parallel (:mod:`asicsim._src.system.workload_scaling`), and with
``--accuracy`` the accuracy cost of its gradients rounded to ``--grad-format`` in training
(:mod:`asicsim._src.workloads.grad_rounding`) beside the time that format saves: the batch split over
``--replicas`` data-parallel replicas (default the largest ``--chips``), each replica's gradient
rounded before the float32 sum (``--allreduce ring``: every partial sum of the ring rounded too),
against the same replicas summing float32 gradients."""

from __future__ import annotations

from asicsim._src.hw.links import TopologyError

#: argparse defaults that only the preset models use: set on a workload run, an error
_PRESET_ONLY = {"overlap": (False, "--overlap"), "mode": ("strong", "--mode weak")}
#: flags that only a workload run uses
_WORKLOAD_ONLY = (("split", "data", "--split"), ("micro_batches", None, "--micro-batches"),
                  ("recipe", None, "--recipe"), ("scale", None, "--scale"), ("accuracy", False, "--accuracy"),
                  ("replicas", None, "--replicas"), ("allreduce", "sum", "--allreduce"))
COLUMNS = ("chips", "batch_per_chip", "micro_batches", "step_ms", "compute_ms", "comm_ms", "bubble_ms",
           "saved_ms", "samples_per_s", "speedup", "efficiency")


def add_arguments(p) -> None:
    """The workload flags of ``asicsim scaling``."""
    p.add_argument("--split", choices=("data", "tensor", "pipeline"), default="data",
                   help="workload: how the step is split over the chips")
    p.add_argument("--micro-batches", type=int, help="workload, --split pipeline: micro-batches (default 4 per stage)")
    p.add_argument("--recipe", help="workload: the recipe its trace is priced in (default bf16)")
    p.add_argument("--scale", help="workload: its scale (small by default; gpu: [scales.gpu])")
    p.add_argument("--accuracy", action="store_true",
                   help="workload: also train it with fp32 gradients and with gradients rounded to --grad-format")
    p.add_argument("--grad-rounding", default="rne", help="--accuracy: rne | sr (stochastic rounding)")
    p.add_argument("--seeds", default="0,1", help="--accuracy: comma-separated training seeds")
    p.add_argument("--train-steps", type=int, help="--accuracy: optimizer steps (default the workload's)")
    p.add_argument("--replicas", type=int, help="--accuracy: data-parallel replicas whose gradients are each "
                   "rounded before the sum (default the largest --chips; it must divide the workload's batch)")
    p.add_argument("--allreduce", choices=("sum", "ring"), default="sum",
                   help="--accuracy: sum the rounded gradients in fp32 (sum) or in a ring reduce-scatter whose "
                   "partial sums are rounded to --grad-format at every hop (ring)")


def check_preset_flags(args) -> None:
    """A preset model run with a workload-only flag set is an error naming it."""
    for dest, default, flag in _WORKLOAD_ONLY:
        if getattr(args, dest) != default:
            raise TopologyError(f"{flag} with --model {args.model!r}; allowed: only with a training workload "
                                "(a workloads/ name or .toml path)")


def run_workload(args, topo, chips: list[int], seeds: list[int]) -> dict:
    """The scaling rows (and with ``--accuracy`` the training comparison) of a workload run."""
    from asicsim._src.system.workload_batching import DEFAULT_RECIPE
    from asicsim._src.system.workload_scaling import workload_scaling_curve

    for dest, (default, flag) in _PRESET_ONLY.items():
        if getattr(args, dest) != default:
            raise TopologyError(f"{flag} with workload {args.model!r}; allowed: only with the preset models "
                                "(a workload scales strong, without overlap)")
    recipe = args.recipe or DEFAULT_RECIPE
    if args.replicas is not None and not args.accuracy:
        raise TopologyError(f"--replicas = {args.replicas} without --accuracy; allowed: only with --accuracy "
                            "(the replicas of the training run)")
    if args.allreduce != "sum" and not args.accuracy:
        raise TopologyError(f"--allreduce {args.allreduce} without --accuracy; allowed: only with --accuracy "
                            "(how the training run sums the replicas' gradients)")
    replicas = max(chips) if args.replicas is None else args.replicas
    if args.accuracy:  # a bad --grad-format, --grad-rounding or --replicas fails before anything runs
        from asicsim._src.workloads import load_workload
        from asicsim._src.workloads.grad_rounding import check_replicas, gradient_role

        gradient_role(args.grad_format, args.grad_rounding)
        w = load_workload(args.model, args.scale)
        try:
            check_replicas(replicas, w.batch if args.batch is None else args.batch)
        except ValueError as err:
            hint = "" if args.replicas is not None else " (the largest --chips; set --replicas)"
            raise TopologyError(f"--accuracy on workload {w.name!r}: {err}{hint}") from None
    rows = workload_scaling_curve(args.model, args.design, chips, args.split, batch=args.batch,
                                  micro_batches=args.micro_batches, recipe=recipe, topology=topo,
                                  grad_format=args.grad_format, scale=args.scale)
    out = {"workload": rows[0]["workload"], "design": rows[0]["design"], "topology": topo.name,
           "split": args.split, "recipe": recipe, "grad_format": args.grad_format, "parameters": rows[0]["parameters"],
           "points": [r for r in rows if r["chips"] in chips]}
    if args.accuracy:
        out["accuracy"] = gradient_accuracy(args.model, args.grad_format, args.grad_rounding, seeds,
                                            args.train_steps, args.scale, replicas, args.batch, args.allreduce)
    return out


def gradient_accuracy(workload, grad_format: str, grad_rounding: str, seeds, steps, scale,
                      replicas: int = 1, batch: int | None = None, allreduce: str = "sum") -> dict:
    """The workload trained in fp32 over ``replicas`` data-parallel replicas with float32
    gradients summed (the fp32 all-reduce) and with each replica's gradient rounded to
    ``grad_format`` before the sum: the metric per seed, the means and the cost (rounded minus
    float32); ``batch``: the global batch (default the workload's); ``allreduce``: how the rounded
    gradients are summed (:data:`asicsim._src.emulate.replicas.ALLREDUCE`)."""
    from asicsim._src.workloads import train

    kw = {"seeds": tuple(seeds), "steps": steps, "stats": False, "scale": scale, "replicas": replicas,
          "batch": batch}
    plain = train(workload, "fp32", **kw)
    rounded = train(workload, "fp32", **kw, grad_format=grad_format, grad_rounding=grad_rounding, allreduce=allreduce)
    return {"metric": plain.metric, "seeds": list(seeds), "steps": plain.settings["steps"], "replicas": replicas,
            "allreduce": allreduce,
            "grad_rounding": grad_rounding, "fp32_grads": plain.per_seed, "rounded_grads": rounded.per_seed,
            "fp32_grads_test_loss": [r.test_loss for r in plain.runs],
            "rounded_grads_test_loss": [r.test_loss for r in rounded.runs],
            "fp32_grads_mean": plain.mean, "rounded_grads_mean": rounded.mean,
            "cost": rounded.mean - plain.mean, "rounded_diverged": rounded.diverged}


def print_table(out: dict, min_efficiency: float, stop) -> None:
    """The human-readable report of :func:`run_workload`'s result."""
    print(f"strong scaling of workload {out['workload']} ({out['parameters']} parameters, recipe "
          f"{out['recipe']}) on {out['design']} over {out['topology']}, split {out['split']}, "
          f"gradients {out['grad_format']}")
    print(" ".join(f"{c:>14}" for c in COLUMNS))
    for r in out["points"]:
        cells = [r[c[:-3] + "_s"] * 1e3 if c.endswith("_ms") else r[c] for c in COLUMNS]
        print(" ".join(f"{v:>14.4g}" if isinstance(v, float) else f"{v:>14}" for v in cells))
    notes: dict[str, list[int]] = {}
    for r in out["points"]:
        if r["note"]:
            notes.setdefault(r["note"], []).append(r["chips"])
    for n, chips in notes.items():
        print(f"note ({', '.join(map(str, chips))} chips): {n}")
    if stop is None:
        print(f"scaling pays (efficiency >= {min_efficiency:g}) up to {out['points'][-1]['chips']} chips")
    else:
        print(f"scaling stops paying at {stop['chips']} chips (efficiency {stop['efficiency']:.3f} < {min_efficiency:g})")
    acc = out.get("accuracy")
    if acc:
        print(f"accuracy ({acc['metric']}, {acc['steps']} steps, {acc['replicas']} replicas, all-reduce "
              f"{acc['allreduce']}, seeds {acc['seeds']}): "
              "fp32 gradients "
              f"{acc['fp32_grads_mean']:.4f} {acc['fp32_grads']}, {out['grad_format']} ({acc['grad_rounding']}) "
              f"{acc['rounded_grads_mean']:.4f} {acc['rounded_grads']}; cost {acc['cost']:+.4f}; test loss "
              f"{acc['fp32_grads_test_loss']} -> {acc['rounded_grads_test_loss']}"
              + (" (diverged)" if acc["rounded_diverged"] else ""))
