"""The ``scaling`` command (registered through :mod:`asicsim.cli_commands`): step time and
strong/weak scaling of a model across chips, or ring all-reduce times; the model is in
:mod:`asicsim._src.system.scaling`."""

from __future__ import annotations

from types import SimpleNamespace

from asicsim._src.cli_commands import command_help
from asicsim._src.cli_json import json_text
from asicsim._src.hw.links import LINKS, TOPOLOGIES, TopologyError, allreduce_time, get_topology
from asicsim._src.hw.operations import AllReduce
from asicsim._src.system import workload_scaling_cli
from asicsim._src.system.scaling import (
    DEFAULT_CHIPS,
    MODELS,
    MODES,
    _grad_bits,
    get_model,
    scaling_curve,
    stops_paying,
)


def add_cli(subparsers) -> None:
    """Register ``asicsim scaling [train|allreduce] ...`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "scaling", help=command_help("scaling"),
        description="train (default): step time and strong/weak scaling of a model on --design over "
                    "--link (flat, or --inter-link above --ranks-per-node ranks). allreduce: ring "
                    f"all-reduce time and bus bandwidth. Links: {', '.join(LINKS)}; fitted DeepBench "
                    f"machines: {', '.join(TOPOLOGIES)}. Models: {', '.join(MODELS)}.")
    p.add_argument("what", nargs="?", choices=("train", "allreduce"), default="train")
    p.add_argument("--model", default="mlp_2560",
                   help=f"one of {', '.join(MODELS)}, or a training workload (a workloads/ name or .toml path)")
    p.add_argument("--design", metavar="NAME", help="a designs/ catalog name or path (train; no default: required there)")
    p.add_argument("--formats", metavar="ROLE=FMT,...",
                   help="override the design's formats (default: the design's formats)")
    p.add_argument("--link", default="nvlink", help="a link or a fitted DeepBench topology")
    p.add_argument("--inter-link", help="link between nodes, above --ranks-per-node ranks (default: none, --link throughout)")
    p.add_argument("--ranks-per-node", type=int, default=8, help="ranks on one node (with --inter-link)")
    p.add_argument("--chips", default=",".join(map(str, DEFAULT_CHIPS)), help="comma-separated chip counts")
    p.add_argument("--batch", type=int, help="global batch (strong) or per-chip batch (weak); default 512, "
                   "a workload's own batch for a workload")
    p.add_argument("--mode", choices=MODES, default="strong",
                   help="strong: --batch is the global batch; weak: --batch per chip")
    p.add_argument("--overlap", action="store_true", help="all-reduce each layer during backward")
    p.add_argument("--grad-format", default="fp32", help="gradient format on the wire (bits from it)")
    p.add_argument("--min-efficiency", type=float, default=0.5, help="where scaling stops paying")
    p.add_argument("--elements", type=int, help="allreduce: elements to sum (no default: required there)")
    p.add_argument("--ranks", default="2,4,8,16,32", help="allreduce: comma-separated rank counts")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    workload_scaling_cli.add_arguments(p)
    p.set_defaults(func=run_cli)


def _int_list(flag: str, text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise TopologyError(f"{flag} = {text!r}; allowed: comma-separated integers") from None


def run_cli(args) -> int:
    """Run ``asicsim scaling``; prints a table (or JSON) and returns the exit status."""
    topo = get_topology(args.link, args.inter_link, args.ranks_per_node)
    if args.what == "allreduce":
        if args.elements is None:
            raise TopologyError("scaling allreduce: --elements is required; allowed: an integer >= 1")
        bits = _grad_bits(args.grad_format)
        rows = [allreduce_time(AllReduce(args.elements, n, bits), topo).row()
                for n in _int_list("--ranks", args.ranks)]
        if args.json:
            print(json_text(rows))
            return 0
        print(f"ring all-reduce on {topo.name}: {args.elements} elements x {bits} bits")
        print(f"{'ranks':>5} {'time_us':>12} {'algbw GB/s':>10} {'busbw GB/s':>10}  bottleneck")
        for r in rows:
            print(f"{r['ranks']:>5} {r['time_us']:>12.1f} {r['algorithm_bandwidth_gbps']:>10.3f} "
                  f"{r['bus_bandwidth_gbps']:>10.3f}  {r['bottleneck']}")
        return 0
    if not args.design:
        raise TopologyError("scaling train: --design is required; allowed: a designs/ catalog name or path")
    if args.model not in MODELS:
        from asicsim._src.system.workload_batching import is_workload
        from asicsim._src.workloads import list_workloads

        if not is_workload(args.model):
            raise TopologyError(f"--model = {args.model!r}; allowed: {' | '.join(MODELS)}, or a training "
                                f"workload ({' | '.join(list_workloads())}) or a .toml path")
        return _run_workload(args, topo)
    workload_scaling_cli.check_preset_flags(args)
    args.batch = 512 if args.batch is None else args.batch
    points = scaling_curve(args.model, args.design, topo, _int_list("--chips", args.chips), args.batch,
                           args.mode, args.formats, args.grad_format, args.overlap)
    stop = stops_paying(points, args.min_efficiency)
    m = get_model(args.model)
    if args.json:
        print(json_text({"model": m.name, "design": points[0].step.design, "topology": topo.name,
                         "mode": args.mode, "overlap": args.overlap, "parameters": m.parameters,
                         "points": [p.row() for p in points], "stops_paying": stop}))
        return 0
    print(f"{args.mode} scaling of {m.name} ({m.parameters / 1e6:.1f} M weights) on "
          f"{points[0].step.design} over {topo.name}{' with overlap' if args.overlap else ''}")
    cols = ("chips", "batch_per_chip", "step_ms", "compute_ms", "allreduce_ms", "samples_per_s",
            "speedup", "efficiency")
    print(" ".join(f"{c:>14}" for c in cols))
    for p in points:
        r = p.row()
        print(" ".join(f"{r[c]:>14.4g}" if isinstance(r[c], float) else f"{r[c]:>14}" for c in cols))
    if stop is None:
        print(f"scaling pays (efficiency >= {args.min_efficiency:g}) up to {points[-1].chips} chips")
    else:
        print(f"scaling stops paying at {stop['chips']} chips (per-chip batch {stop['batch_per_chip']}, "
              f"efficiency {stop['efficiency']:.3f} < {args.min_efficiency:g})")
    return 0


def _run_workload(args, topo) -> int:
    out = workload_scaling_cli.run_workload(args, topo, _int_list("--chips", args.chips),
                                            _int_list("--seeds", args.seeds))
    points = [SimpleNamespace(chips=r["chips"], efficiency=r["efficiency"],
                              step=SimpleNamespace(batch_per_chip=r["batch_per_chip"])) for r in out["points"]]
    stop = stops_paying(points, args.min_efficiency)
    if args.json:
        print(json_text(out | {"stops_paying": stop}))
    else:
        workload_scaling_cli.print_table(out, args.min_efficiency, stop)
    return 0
