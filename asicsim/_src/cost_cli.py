"""The ``cost`` and ``trace`` commands (registered through :mod:`asicsim.cli_commands`): price
operations, kernel suites or SCALE-Sim inputs on designs, and price a training workload's op
trace under a recipe. The cost model itself is imported when a command runs."""

from __future__ import annotations

from asicsim._src.cli_commands import command_help
from asicsim._src.cli_json import json_text
from asicsim._src.cli_types import number
from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE, OBJECTIVES
from asicsim._src.hw.scopes import DEFAULT_SCOPE, SCOPES
from asicsim._src.workloads.workload_checks import MAX_BATCH


def add_cli(subparsers) -> None:
    """Register ``cost`` and ``trace`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "cost", help=command_help("cost"),
        description="Physical model: --design NAME|PATH with --gemm M,N,K, --conv, --rnn, "
                    "--topology or --workload SUITE|CSV, optionally --formats act=..,weight=..,acc=..,out=... SCALE-Sim "
                    "compatibility mode: --scalesim-config CFG --topology CSV [--gemm], reported "
                    "under SCALE-Sim's own column names.",
    )
    p.add_argument("--design", metavar="NAME", action="append",
                   help="a designs/ catalog name or a design .toml/.cfg path (repeatable: side by "
                        "side); for --workload deepbench_allreduce a link topology (nvlink, pcie3, ...); no default: "
                        "the physical model needs one")
    p.add_argument("--workload", metavar="SUITE|CSV",
                   help="a kernel suite (asicsim workloads, e.g. deepbench_gemm_train) or a CSV "
                        "written the same way: one row per kernel (default: none)")
    p.add_argument("--precision", metavar="P",
                   help="with --workload: a DeepBench precision setting the formats: fp32, "
                        "fp16_fp32math, fp16_mixed or int8 (--formats overrides single roles; default: the design's "
                        "formats)")
    p.add_argument("--gemm", nargs="?", const=True, action="append", metavar="M,N,K",
                   help="a GEMM to price (repeatable); alone, with --topology: read it as M,N,K rows "
                        "(default: none)")
    p.add_argument("--conv", action="append", metavar="H,W,C,N,FH,FW[,S,PAD,BATCH,GROUPS]",
                   help="a convolution (ifmap HxWxC, N filters FHxFW, stride, padding, batch, groups; default: none)")
    p.add_argument("--rnn", action="append", metavar="CELL,HIDDEN,BATCH,STEPS[,INPUT]",
                   help="RNN time steps; CELL vanilla|gru|lstm (default: none)")
    p.add_argument("--formats", metavar="ROLE=FMT,...",
                   help="override the design's formats: roles act, weight, acc, out "
                        "(default: the design's formats)")
    p.add_argument("--objective", choices=(*OBJECTIVES, "all"), default=DEFAULT_OBJECTIVE,
                   help="what the mapper chooses each schedule for: balanced (the least energy within 5 %% "
                        "of the fastest schedule's time), energy, dram bytes or latency; all: one row per "
                        "objective, the time/energy trade (default: balanced)")
    p.add_argument("--scope", choices=SCOPES, default=DEFAULT_SCOPE,
                   help="with several --design: the scope their energies are compared at, chip to chip beside "
                        "board (default: board, as a GPU is measured as a board)")
    p.add_argument("--scalesim-config", metavar="CFG", help="a SCALE-Sim .cfg file (compatibility mode; "
                   "default: none, the physical model)")
    p.add_argument("--topology", metavar="CSV", help="a SCALE-Sim topology CSV (conv or M,N,K; default: none)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_cost)
    p = subparsers.add_parser("trace", help=command_help("trace"),
                       description="Trace one training step (or, with --inference, one inference batch) of "
                                   "a training workload under a recipe and price every GEMM on each "
                                   "--design (systolic or GPU) in the formats of its role.")
    p.add_argument("workload", help="a training workload (asicsim train's names, e.g. mnist1d_cnn)")
    p.add_argument("--recipe", default="fp32", help="a recipe from formats/recipes/ or a .toml path")
    p.add_argument("--design", action="append", required=True, metavar="NAME",
                   help="a design to price on (repeatable), e.g. tpu_v1, gpu_v100")
    p.add_argument("--batch", type=number(int, maximum=MAX_BATCH), help="batch size (default: the workload's)")
    p.add_argument("--inference", action="store_true", help="one forward batch instead of a training step")
    p.add_argument("--objective", choices=OBJECTIVES, default=DEFAULT_OBJECTIVE,
                   help="what the mapper chooses a systolic design's schedules for (asicsim cost --help; "
                        "a GPU runs its fastest kernels; default: balanced)")
    p.add_argument("--scope", choices=SCOPES, default=DEFAULT_SCOPE,
                   help="with several --design: the scope their energies are compared at (default: board, as a GPU "
                        "is measured as a board; chip to chip is said beside it)")
    p.add_argument("--scale", help="the workload's scale (default: small; asicsim workloads lists them)")
    p.add_argument("--json", action="store_true", help="machine-readable output (trace and costs)")
    p.set_defaults(func=cmd_trace)


def _ints(flag: str, text: str, count: tuple[int, int], names: tuple[str, ...] = ()) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",")]
    except ValueError:
        vals = []
    if not (count[0] <= len(vals) <= count[1]):
        n = f"{count[0]}" if count[0] == count[1] else f"{count[0]} to {count[1]}"
        raise ValueError(f"{flag} {text!r}; allowed: {n} comma-separated integers")
    for i, v in enumerate(vals):  # sizes and counts; a padding may be 0
        least = 0 if i < len(names) and names[i] == "padding" else 1
        if v < least:
            name = names[i] if i < len(names) else f"value {i + 1}"
            raise ValueError(f"{flag} {text!r}: {name} = {v}; allowed: an integer >= {least}")
    return vals


def _operations(args) -> list:
    """The operations named on the command line (--gemm/--conv/--rnn, or a --topology file)."""
    from .hw import Conv, Gemm, Rnn, read_scalesim_topology, topology_operations

    ops = []
    for g in args.gemm_shapes:
        ops.append(Gemm(*_ints("--gemm", g, (3, 3), ("M", "N", "K"))))
    for c in args.conv or []:
        names = ("in_h", "in_w", "in_channels", "out_channels", "kernel_h", "kernel_w", "stride",
                 "padding", "batch", "groups")
        v = _ints("--conv", c, (6, 10), names)
        ops.append(Conv(**dict(zip(names, v, strict=False))))
    for r in args.rnn or []:
        cell, _, rest = r.partition(",")
        ops.append(Rnn(cell, *_ints("--rnn", rest, (3, 4), ("hidden", "batch", "steps", "input"))))
    if args.topology:
        ops.extend(topology_operations(read_scalesim_topology(
            args.topology, kind="gemm" if args.gemm is True else "auto")))
    if not ops:
        raise ValueError("cost --design: give --gemm M,N,K, --conv, --rnn or --topology CSV")
    return ops


def cmd_cost(args) -> int:
    """Price operations on a design (physical model) or reproduce SCALE-Sim from its own files."""

    from .hw import cost_table, scalesim_report_from_files

    args.gemm_shapes = [g for g in (args.gemm or []) if g is not True]
    if args.workload:
        return _cost_workload(args)
    if args.precision:
        raise ValueError("cost --precision: goes with --workload (DeepBench's precisions); use "
                         "--formats act=..,weight=..,acc=.. for --gemm/--conv/--rnn/--topology")
    if args.design:
        if args.scalesim_config:
            raise ValueError("cost: give either --design (physical model) or --scalesim-config "
                             "(SCALE-Sim compatibility mode), not both")
        if args.objective == "all":
            return _cost_trade(args)
        report = cost_table(_operations(args), args.design, args.formats, objective=args.objective).frame()
    elif args.scalesim_config and args.topology:
        if args.gemm_shapes or args.conv or args.rnn or args.formats:
            raise ValueError("cost --scalesim-config: SCALE-Sim mode takes its topology file only "
                             "(no --gemm M,N,K / --conv / --rnn / --formats); use --design for those")
        report = scalesim_report_from_files(args.scalesim_config, args.topology,
                                            kind="gemm" if args.gemm else "auto")
    else:
        raise ValueError(
            "cost: give --design NAME with --gemm M,N,K / --conv / --rnn / --topology CSV "
            "(physical model), or --scalesim-config CFG and --topology CSV (SCALE-Sim compatibility mode)"
        )
    if args.json:
        rows = report.to_dict(orient="records")
        print(json_text(rows))
    elif args.design:  # a readable summary; --json has every column
        summary = report[["design", "operation", "cycles", "cycles_stall", "utilization",
                          "mapping_efficiency", "bound", "objective"]].copy()
        summary.insert(3, "time_us", report["time_s"] * 1e6)
        summary["energy_uj"] = report["energy_pj"] / 1e6
        for part in ("dynamic", "static"):  # on short GPU ops static power is most of the total
            summary[f"energy_{part}_uj"] = report[f"energy_{part}_j"] * 1e6
        summary["dram_mb"] = report["dram_bytes"] / 1e6
        if "dram_bound_bytes" in report:  # the lower bound beside the figure (a GPU's: compulsory)
            summary["dram_bound_mb"] = report["dram_bound_bytes"] / 1e6
        if "sram_array_bytes" in report:  # buffers <-> array on a systolic design, L2 <-> SMs on a GPU
            summary["onchip_mb"] = report["sram_array_bytes"] / 1e6
        print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        for row in report.to_dict(orient="records"):
            for key in ("mapping", "note"):
                if isinstance(row.get(key), str) and row[key]:
                    print(f"{row['design']} {row['operation']}: {row[key]}")
        from .report.compared import cost_lines

        for line in cost_lines(report, args.design, args.scope, "run"):
            print(line)
    else:
        print(report.to_string(index=False))
    return 0


def _cost_trade(args) -> int:
    """``cost --objective all``: one row per (design, operation, objective), so the time/energy
    trade of each objective shows (``time_x``, ``energy_x``: over the ``latency`` schedule's). A
    GPU has one row, ``fastest``: its model takes its fastest kernel whatever the objective."""
    import pandas as pd

    from .hw import cost_table

    ops = _operations(args)
    report = pd.concat([cost_table(ops, args.design, args.formats, objective=o).frame() for o in OBJECTIVES],
                       ignore_index=True)
    key = ["design", "operation"]
    report = report.drop_duplicates([*key, "objective"]).sort_values(key, kind="stable", ignore_index=True)
    if args.json:
        print(json_text(report.to_dict(orient="records")))
        return 0
    fastest = report[report["objective"].isin(["latency", "fastest"])].set_index(key)
    at = pd.MultiIndex.from_frame(report[key])
    table = report[[*key, "objective"]].copy()
    table["time_us"] = report["time_s"] * 1e6
    table["time_x"] = report["time_s"].to_numpy() / fastest["time_s"].reindex(at).to_numpy()
    table["energy_uj"] = report["energy_j"] * 1e6
    table["energy_x"] = report["energy_j"].to_numpy() / fastest["energy_j"].reindex(at).to_numpy()
    table["dram_mb"] = report["dram_bytes"] / 1e6
    table["utilization"] = report["utilization"]
    table["mapping_efficiency"] = report["mapping_efficiency"]
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("time_x, energy_x: over the latency schedule's (a GPU runs its fastest kernel: one row, fastest)")
    for row in report.to_dict(orient="records"):
        if isinstance(row.get("mapping"), str) and row["mapping"]:
            print(f"{row['design']} {row['operation']} [{row['objective']}]: {row['mapping']}")
    return 0


def _cost_workload(args) -> int:
    """``cost --workload SUITE|CSV --design D [--design D2 ...]``: one row per kernel and design."""

    from .workloads import suite_costs

    if args.gemm_shapes or args.conv or args.rnn or args.topology or args.scalesim_config or args.gemm:
        raise ValueError("cost --workload: the suite is the work; give no --gemm / --conv / --rnn / "
                         "--topology / --scalesim-config with it")
    if not args.design:
        raise ValueError("cost --workload: give --design NAME (repeatable: several designs side by "
                         "side; for the all-reduce suite a link topology, e.g. nvlink)")
    report = suite_costs(args.workload, args.design, args.formats, args.precision)
    if args.json:  # a list with one object per (design, kernel), as the other --json outputs
        rows = report.to_dict(orient="records")
        print(json_text(rows))
        return 0
    shown = report.drop(columns=[c for c in ("suite", "application", "note", "format_out")
                                 if c in report]).copy()
    if "precision" in shown and shown["precision"].isna().all():  # no --precision: the format_* columns say
        shown = shown.drop(columns="precision")
    if "energy_j" in shown:  # chip designs (the all-reduce suite prices link topologies)
        joules = ("energy_j", "energy_dynamic_j", "energy_static_j")
        shown[list(joules)] = shown[list(joules)] * 1e6
        shown["dram_bytes"] = shown["dram_bytes"] / 1e6
        shown = shown.rename(columns={**{j: j[:-1] + "uj" for j in joules}, "dram_bytes": "dram_mb"})
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if "energy_j" in report:  # chip designs: the suite's kernels summed per design
        from .report.compared import cost_lines

        for line in cost_lines(report, args.design, args.scope, "suite"):
            print(line)
    return 0


def cmd_trace(args) -> int:
    """Price one training step (or inference batch) of a workload under a recipe on designs."""
    from .report.compared import trace_lines
    from .workloads import load_workload
    from .workloads.pricing import price_trace, workload_trace

    workload = load_workload(args.workload, scale=args.scale)
    trace = workload_trace(workload, args.recipe, batch=args.batch, training=not args.inference)
    table = price_trace(trace, args.design, args.recipe, objective=args.objective)
    compared = trace_lines(workload, trace, args.design, args.recipe, batch=args.batch, inference=args.inference,
                           scope=args.scope, objective=args.objective)
    if args.json:
        out = {"workload": args.workload, "scale": workload.scale, "recipe": args.recipe,
               "step": "inference" if args.inference else "training",
               "trace": trace.drop(columns=["lhs_shape", "rhs_shape"]).to_dict(orient="records"),
               "cost": table.to_dict(orient="records")}
        if compared:
            out["scope"], out["comparison"] = args.scope, compared[1:]
        print(json_text(out))
    else:
        what = "one inference batch" if args.inference else "one training step"
        gemms = int((trace.kind != "elementwise").sum())
        print(f"{args.workload} ({workload.scale} scale) under {args.recipe}: {what}, {gemms} GEMMs in the trace")
        _print_with_notes(table, key="design")
        for line in compared:
            print(line)
    return 0


def _print_with_notes(table, key: str) -> None:
    """A table with its notes as lines under it (one per note and ``key``, e.g. design), and its
    empty cells written n/a with the reason said once."""
    shown = table.drop(columns=["note"], errors="ignore")
    print(shown.to_string(index=False, na_rep="n/a", float_format=lambda v: f"{v:.4g}"))
    if shown.isna().any(axis=None):
        print("n/a: not priced on that design (the note below says why)")
    notes: dict = {}
    for row in table.to_dict(orient="records"):
        if isinstance(row.get("note"), str) and row["note"]:
            notes.setdefault((row[key], row["note"]), []).append(str(row.get("role", "")))
    for (who, note), roles in notes.items():
        print(f"{who} ({', '.join(r for r in roles if r)}): {note}")
