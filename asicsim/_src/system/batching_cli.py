"""The ``batching`` command (wired into asicsim/cli.py): a preset model or a training workload's
own model (:mod:`.workload_batching`) served on designs under a batching policy; the models,
the simulator and the p99 search are in :mod:`.batching`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asicsim._src.cli_commands import command_help
from asicsim._src.cli_json import json_text
from asicsim._src.hw.design_files import labelled_designs
from asicsim._src.system.batching import ARRIVALS, BatchingPolicy, service_table, simulate
from asicsim._src.system.batching_errors import BatchingError, nonneg_float, positive_int
from asicsim._src.system.inference_models import INFERENCE_MODELS, InferenceModel, get_model
from asicsim._src.system.p99_budget import max_throughput_under_p99
from asicsim._src.system.weight_residency import residency_comparison

#: Most rates one ``START:STOP:N`` may ask for (each is a simulation of --requests requests).
MAX_RATES = 1000


def _rate_item(item: str, capacity: float) -> list[float]:
    """One item of a --rate list: ``R``, ``START:STOP:N`` or ``Fx``."""
    try:
        if item.endswith("x"):
            return [float(item[:-1]) * capacity]
        if ":" not in item:
            return [float(item)]
        a, b, n = item.split(":")
        a, b, n = float(a), float(b), int(n)
    except ValueError:
        raise BatchingError(f"rate = {item!r}; allowed: requests/s (e.g. 500), START:STOP:N or a "
                            "multiple of the saturated rate (e.g. 0.5x)") from None
    if not 1 <= n <= MAX_RATES:  # N = 0 would leave no run to report
        raise BatchingError(f"rate = {item!r}: N = {n}; allowed: START:STOP:N with N an integer in "
                            f"[1, {MAX_RATES}]")
    return np.linspace(a, b, n).tolist()


def _rates(specs: Sequence[str] | None, capacity: float) -> list[float]:
    """``R``, ``START:STOP:N`` (N evenly spaced) or ``Fx`` (F times the saturated rate), comma lists."""
    items = [s.strip() for spec in (specs or ["0.1x,0.3x,0.5x,0.7x,0.9x,1.2x"]) for s in spec.split(",")]
    out = [r for item in items for r in _rate_item(item, capacity)]
    for r in out:
        nonneg_float("rate", r, positive=True)
    return out


def add_cli(subparsers) -> None:
    """Register the ``batching`` command on an argparse subparsers object."""
    p = subparsers.add_parser(
        "batching", help=command_help("batching"),
        description="Requests arrive (Poisson or evenly spaced) at one chip; a batch launches when "
                    "--max-batch requests wait or the oldest has waited --max-wait-ms, once the chip "
                    "is free. Service time and energy per batch come from the cost model. Reports "
                    "throughput, p50/p99 latency, energy per request; with --p99-budget-ms the largest "
                    "arrival rate (and batching policy) whose p99 meets the budget.")
    p.add_argument("--model", default="gru_speech", metavar="MODEL",
                   help=f"inference model: a preset ({', '.join(INFERENCE_MODELS)}) or a training "
                        "workload (asicsim train's names or a .toml path: the model it trains, priced from "
                        "its inference op trace; default gru_speech)")
    p.add_argument("--recipe", help="a workload model's precision recipe (its formats price every op; "
                                    "default bf16); presets use the design's formats or --formats")
    p.add_argument("--scale", help="a workload model's scale (default: small)")
    p.add_argument("--design", action="append", metavar="NAME",
                   help="a design name or .toml path (repeatable; default dc_bf16_128x128)")
    p.add_argument("--formats", metavar="ROLE=FMT,...",
                   help="override the design's formats (default: the design's formats)")
    p.add_argument("--rate", action="append", metavar="R",
                   help="arrival rate: requests/s, START:STOP:N, or a multiple of the saturated rate "
                        "such as 0.5x (repeatable, comma lists; default 0.1x..0.9x and 1.2x)")
    p.add_argument("--max-batch", type=int, default=16, help="largest batch (default 16)")
    p.add_argument("--max-wait-ms", type=float, default=2.0, help="longest wait of the oldest request (default 2)")
    p.add_argument("--arrivals", default="poisson", choices=list(ARRIVALS), help="request arrival process")
    p.add_argument("--requests", type=int, default=100_000, help="requests per run (default 100000)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the arrivals")
    p.add_argument("--p99-budget-ms", type=float, metavar="MS",
                   help="also report the largest throughput whose p99 latency meets this budget "
                        "(default: none, no budget)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run_cli)


def _cli_model(args) -> tuple:
    """(a preset InferenceModel or a workload name, its description); a workload's options
    (--recipe, --scale) with a preset, or --formats with a workload, are errors."""
    from asicsim._src.system.workload_batching import is_workload, workload_description

    if args.model in INFERENCE_MODELS:
        for opt in ("recipe", "scale"):
            if getattr(args, opt) is not None:
                raise BatchingError(f"--{opt} = {getattr(args, opt)!r} with preset model {args.model!r}; allowed: "
                                    f"--{opt} with a workload model only (presets take --formats)")
        m = get_model(args.model)
        return m, m.description
    if not is_workload(args.model):
        from asicsim._src.workloads import list_workloads

        raise BatchingError(f"model = {args.model!r}; allowed: a preset ({' | '.join(INFERENCE_MODELS)}) or a "
                            f"training workload ({' | '.join(list_workloads())}) or a workload .toml path")
    if args.formats is not None:
        raise BatchingError(f"--formats with workload model {args.model!r}; allowed: --recipe (a workload's ops "
                            "are priced in the formats its recipe gives each one)")
    return args.model, workload_description(args.model, scale=args.scale)


def run_cli(args) -> int:
    import pandas as pd

    model, describe = _cli_model(args)
    policy = BatchingPolicy(positive_int("max_batch", args.max_batch), nonneg_float("max_wait_ms", args.max_wait_ms) / 1e3)
    requests = positive_int("requests", args.requests)
    out = []
    for label, design in labelled_designs(args.design or ["dc_bf16_128x128"]):  # the name or path as given
        if isinstance(model, InferenceModel):
            table = service_table(model, design, args.formats, max(policy.max_batch, 64))
            residency = residency_comparison(model, design, args.formats)
        else:  # a workload: its own trace, every batch size traced and priced
            from asicsim._src.system.workload_batching import DEFAULT_RECIPE, workload_service_table

            table = workload_service_table(model, design, args.recipe or DEFAULT_RECIPE, max(policy.max_batch, 16),
                                           scale=args.scale)
            residency = []
        rec = {"design": label, "formats": table.formats, "service": table.rows(),
               "residency": residency, "runs": []}
        for rate in _rates(args.rate, table.capacity(policy.max_batch)):
            r = simulate(table, rate, policy, requests=requests, seed=args.seed, arrivals=args.arrivals)
            rec["runs"].append(r.row())
        if args.p99_budget_ms is not None:
            budget = nonneg_float("p99_budget_ms", args.p99_budget_ms, positive=True) / 1e3
            bs = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256) if b <= policy.max_batch} | {policy.max_batch})
            waits = sorted({0.0, budget / 4, budget / 2, policy.max_wait_s})
            res = max_throughput_under_p99(table, design, budget, formats=args.formats, max_batches=bs,
                                           max_waits_s=waits, requests=min(requests, 20_000), seed=args.seed,
                                           arrivals=args.arrivals)
            rec["p99_budget"] = res.row() | {"grid": res.grid}
        out.append(rec)
    if args.json:
        print(json_text({"model": table.model, "description": describe,
                         "policy": {"max_batch": policy.max_batch, "max_wait_ms": policy.max_wait_s * 1e3},
                         "arrivals": args.arrivals, "requests": requests, "seed": args.seed, "designs": out}))
        return 0
    fmt = {"float_format": lambda v: f"{v:.4g}", "index": False}
    print(f"model {table.model}: {describe}")
    print(f"policy: max_batch {policy.max_batch}, max_wait {policy.max_wait_s * 1e3:g} ms; "
          f"{args.arrivals} arrivals, {requests} requests, seed {args.seed}; one chip, one batch at a time")
    for rec in out:
        fm = ",".join(f"{k}={v}" for k, v in rec["formats"].items())
        print(f"\n== {rec['design']} ({fm})\nservice per batch:")
        print(pd.DataFrame(rec["service"]).to_string(**fmt))
        if rec["residency"]:
            print("persistent RNN: recurrent weights resident in the weight buffer or not (same design otherwise):")
            print(pd.DataFrame(rec["residency"]).to_string(**fmt))
        runs = pd.DataFrame(rec["runs"])
        ms = {"latency_p50_s": "p50_ms", "latency_p99_s": "p99_ms", "latency_mean_s": "mean_ms"}
        for k, v in ms.items():
            runs[v] = runs[k].astype(float) * 1e3
        runs["energy_mj"] = runs["energy_per_request_j"] * 1e3
        cols = ["rate_rps", "load", "stable", "throughput_rps", "p50_ms", "p99_ms", "mean_ms", "mean_batch",
                "utilization", "energy_mj"]
        print("runs (energy per request in mJ; unstable runs have no percentiles):")
        print(runs[cols].to_string(na_rep="unstable", **fmt))
        if "p99_budget" in rec:
            b = rec["p99_budget"]
            if b["max_rate_rps"] > 0:
                print(f"max throughput with p99 <= {b['p99_budget_ms']:g} ms: {b['max_rate_rps']:.4g} requests/s "
                      f"(max_batch {b['max_batch']}, max_wait {b['max_wait_ms']:.3g} ms; p99 "
                      f"{b['latency_p99_ms']:.4g} ms, mean batch {b['mean_batch']:.3g}, "
                      f"{b['energy_per_request_mj']:.4g} mJ/request)")
            else:
                print(f"no policy meets p99 <= {b['p99_budget_ms']:g} ms (batch-1 service alone is "
                      f"{rec['service'][0]['service_ms']:.4g} ms)")
    return 0
