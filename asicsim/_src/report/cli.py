"""``asicsim report DIR -o report.html [--json]``: a sweep's results as a self-contained HTML
report, with the Markdown and CSV tables beside it; and ``asicsim demo``, the demo sweep and its
report (here, above the sweep layer it runs)."""

from __future__ import annotations

import os
import sys
import time

from asicsim._src.cli_commands import command_help
from asicsim._src.cli_json import json_text
from asicsim._src.cli_types import number
from asicsim._src.hw.scopes import SCOPES
from asicsim._src.sweep.report_options import OBJECTIVES


def add_cli(subparsers) -> None:
    """Register ``report`` and ``demo`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "report", help=command_help("report"),
        description="Read the sweep results in DIR (asicsim sweep --out DIR) and write one self-contained "
                    "HTML page (inline figures: accuracy-vs-energy Pareto front, loss curves, numerics, "
                    "energy and data movement, roofline per design, DeepBench vs GPU, distance to 10 "
                    "PFLOP/s in 300 W), the same as Markdown beside it, and every table as CSV in a "
                    "folder beside it. Prints a short summary (everything written with --json).")
    p.add_argument("results", metavar="DIR", help="a sweep's results directory")
    p.add_argument("-o", "--output", metavar="HTML", help="the HTML file to write: a regular file or a new path; the Markdown "
                   "(same name, .md) and a <name>_tables folder go beside it (default: DIR/report.html)")
    p.add_argument("--objective", choices=OBJECTIVES, help="what the answer minimises per step: energy, time or "
                   "edp (energy x time) (default: the spec's [report] objective, else energy)")
    p.add_argument("--max-accuracy-drop", type=float, metavar="POINTS",
                   help="accuracy points below fp32 a recipe may lose to be picked (default: the spec's [report] "
                        "max_accuracy_drop, else 0.5)")
    p.add_argument("--scope", choices=SCOPES, help="the scope energies are compared at against a GPU: core, chip "
                   "or board (default: the spec's [report] scope, else board, as a GPU is measured as a board)")
    p.add_argument("--json", action="store_true", help="machine-readable output (paths, sections, figures)")
    p.set_defaults(func=run_report)

    p = subparsers.add_parser(
        "demo", help=command_help("demo"),
        description="Run the embedded demo sweep (sweeps/demo.toml: fp32, bf16, fp16 mixed, fp8 hybrid, "
                    "MXFP8 training and int8/MXFP8 post-training quantization on TPU v1, an edge int8 NPU, "
                    "a bf16 datacenter array and the V100/H100/B200 GPU baselines; digits MLP, MNIST-1D CNN and "
                    "DeepBench's server inference GEMMs), write DIR/report.html and print a summary. "
                    "Rerunning resumes: finished points are kept, failed ones (an error, a lost worker) "
                    "are run again.")
    p.add_argument("--out", default="asicsim-demo", metavar="DIR", help="results directory (default asicsim-demo)")
    p.add_argument("--workers", type=number(int, maximum=1024), metavar="N", help="parallel workers (default: CPU count)")
    p.add_argument("--json", action="store_true", help="no progress bar; print the summary as JSON")
    p.set_defaults(func=run_demo)


def run_report(args) -> int:
    # here: the report (pandas) loads when the command runs, not when the parser is built
    from asicsim._src.cli_progress import StepProgress
    from asicsim._src.report import summary_text, write_report

    options = {"objective": args.objective, "max_accuracy_drop": args.max_accuracy_drop, "scope": args.scope}
    bar = StepProgress(f"report {args.results}", "stages (load, tables, figures, pages, CSV)")
    try:
        info = write_report(args.results, args.output, options=options, progress=bar.update)
    finally:
        bar.close()
    if args.json:
        print(json_text(info, indent=1))
    else:
        print(summary_text(args.results, options))
        print(f"\nwrote {info['html']}, {info['markdown']} and {len(info['tables'])} CSV tables in "
              f"{info['tables'] and next(iter(info['tables'].values())).rsplit('/', 1)[0]}")
    return 0


def run_demo(args) -> int:
    # here: the report (pandas) and the sweep load when the command runs, not when the parser is built
    from asicsim._src.report import summary_text, write_report
    from asicsim._src.sweep.cli import interrupted, print_summary
    from asicsim._src.sweep.run import sweep

    t0 = time.monotonic()
    try:
        # a rerun also reruns the points that failed (an error, a lost worker): they have no result
        s = sweep("demo", args.out, workers=args.workers, retry_failed=True,
                  progress=None if args.json else sys.stderr)
    except KeyboardInterrupt:
        return interrupted(args.out)
    html = os.path.join(args.out, "report.html")
    written = write_report(args.out, html)
    s["report"] = html
    s["report_files"] = written
    s["seconds_total"] = round(time.monotonic() - t0, 2)
    if args.json:
        print(json_text(s, indent=1))
        return 0
    print_summary(s)
    print(summary_text(args.out))
    print(f"report: {html} (open it in any browser; it needs no network) — "
          f"{s['seconds_total']:.0f} s in all")
    return 0
