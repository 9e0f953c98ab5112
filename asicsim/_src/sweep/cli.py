"""``asicsim sweep``: registered by :func:`add_cli` on the main parser (``asicsim demo``, a
sweep and its report, is registered by :mod:`asicsim._src.report.cli`)."""

from __future__ import annotations

import sys

from asicsim._src.cli_commands import command_help
from asicsim._src.cli_json import json_text


def add_cli(subparsers) -> None:
    from asicsim._src.cli_types import number

    p = subparsers.add_parser(
        "sweep", help=command_help("sweep"),
        description="Expand SPEC (a TOML file, or a shipped spec name such as 'demo') into points, "
                    "skip those already finished in --out, and run the rest in parallel worker "
                    "processes (or on Ray with --ray), writing each point's record as it finishes. "
                    "A killed sweep rerun with the same spec and directory loses and repeats nothing.")
    p.add_argument("spec", help="sweep spec .toml path or shipped name (e.g. demo)")
    p.add_argument("--out", required=True, metavar="DIR", help="results directory (created if missing)")
    p.add_argument("--workers", type=number(int, maximum=1024), metavar="N", help="parallel workers (default: CPU count)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run on a Ray cluster: its address, 'auto' (the one running here, else a new local one) "
                        "or 'local' (a new local instance); default: none, local worker processes")
    p.add_argument("--retry-failed", action="store_true",
                   help="rerun the points that failed before (an error, a timeout, a lost worker, out of "
                        "memory), replacing their records; diverged runs are results and are kept")
    p.add_argument("--json", action="store_true", help="no progress bar; print the summary as JSON")
    p.set_defaults(func=run_sweep)


def print_summary(s: dict) -> None:
    print(f"{s['points']} points: {s['done']} done, {s['diverged']} diverged, {s['failed']} failed "
          f"({s['skipped']} finished before, {s['ran']} run now) in {s['seconds']:.1f} s -> {s['out']}")
    for f in s["divergences"]:
        print(f"  diverged {f['kind']} {f['id']}: {f['reason']}")
    for f in s["failures"]:
        print(f"  failed {f['kind']} {f['id']}: {f['reason']}")
    if s["failures"]:
        print("  failed: no result (an error, a timeout, a lost worker); rerun them with --retry-failed")


def interrupted(out: str) -> int:
    print(f"\ninterrupted: every point finished so far is recorded in {out}; run the same command "
          "again to go on from there", file=sys.stderr)
    return 130


def run_sweep(args) -> int:
    from asicsim._src.sweep.run import sweep

    try:
        s = sweep(args.spec, args.out, workers=args.workers, ray=args.ray, retry_failed=args.retry_failed,
                  progress=None if args.json else sys.stderr)
    except KeyboardInterrupt:
        return interrupted(args.out)
    if args.json:
        print(json_text(s, indent=1))
    else:
        print_summary(s)
        print(f"results: asicsim.load_results({args.out!r}); report: asicsim report {args.out} -o report.html")
    return 0
