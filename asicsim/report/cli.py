"""``asicsim report DIR -o report.html [--json]``: a sweep's results as a self-contained HTML
report, with the Markdown and CSV tables beside it."""

from __future__ import annotations

import json
import sys


def add_cli(subparsers) -> None:
    """Register ``report`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "report", help="turn a sweep's results directory into a self-contained HTML report (+ Markdown, CSV)",
        description="Read the sweep results in DIR (asicsim sweep --out DIR) and write one self-contained "
                    "HTML page (inline figures: accuracy-vs-energy Pareto front, loss curves, numerics, "
                    "energy and data movement, roofline per design, DeepBench vs GPU, distance to 10 "
                    "PFLOP/s in 300 W), the same as Markdown beside it, and every table as CSV in a "
                    "folder beside it. Prints a short summary (everything written with --json).")
    p.add_argument("results", metavar="DIR", help="a sweep's results directory")
    p.add_argument("-o", "--output", metavar="HTML", help="the HTML file to write (default: DIR/report.html)")
    p.add_argument("--json", action="store_true", help="machine-readable output (paths, sections, figures)")
    p.set_defaults(func=run_report)


def run_report(args) -> int:
    from asicsim.report import summary_text, write_report

    info = write_report(args.results, args.output)
    if args.json:
        json.dump(info, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(summary_text(args.results))
        print(f"\nwrote {info['html']}, {info['markdown']} and {len(info['tables'])} CSV tables in "
              f"{info['tables'] and next(iter(info['tables'].values())).rsplit('/', 1)[0]}")
    return 0
