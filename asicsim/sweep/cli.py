"""``asicsim sweep`` and ``asicsim demo``: registered by :func:`add_cli` on the main parser."""

from __future__ import annotations

import json
import os
import sys
import time


def add_cli(subparsers) -> None:
    from asicsim.cli_types import number

    p = subparsers.add_parser(
        "sweep", help="run a sweep spec (recipes x designs x workloads) into a results directory",
        description="Expand SPEC (a TOML file, or a shipped spec name such as 'demo') into points, "
                    "skip those already finished in --out, and run the rest in parallel worker "
                    "processes (or on Ray with --ray), writing each point's record as it finishes. "
                    "A killed sweep rerun with the same spec and directory loses and repeats nothing.")
    p.add_argument("spec", help="sweep spec .toml path or shipped name (e.g. demo)")
    p.add_argument("--out", required=True, metavar="DIR", help="results directory (created if missing)")
    p.add_argument("--workers", type=number(int), metavar="N", help="parallel workers (default: CPU count)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run on a Ray cluster: its address, 'auto' (the one running here, else a new local one) "
                        "or 'local' (a new local instance)")
    p.add_argument("--retry-failed", action="store_true", help="rerun the points that failed before")
    p.add_argument("--json", action="store_true", help="no progress bar; print the summary as JSON")
    p.set_defaults(func=run_sweep)

    p = subparsers.add_parser(
        "demo", help="the main job: a small sweep (6 recipes x 5 designs x 3 workloads) and its HTML report",
        description="Run the embedded demo sweep (sweeps/demo.toml: fp32, bf16, fp16 mixed, fp8 hybrid, "
                    "MXFP8 training and int8/MXFP8 post-training quantization on TPU v1, an edge int8 NPU, "
                    "a bf16 datacenter array and the V100/H100 GPU baselines; digits MLP, MNIST-1D CNN and "
                    "DeepBench's server inference GEMMs), write DIR/report.html and print a summary. "
                    "Rerunning resumes: finished points are kept.")
    p.add_argument("--out", default="asicsim-demo", metavar="DIR", help="results directory (default asicsim-demo)")
    p.add_argument("--workers", type=number(int), metavar="N", help="parallel workers (default: CPU count)")
    p.add_argument("--json", action="store_true", help="no progress bar; print the summary as JSON")
    p.set_defaults(func=run_demo)


def _print_summary(s: dict) -> None:
    print(f"{s['points']} points: {s['done']} done, {s['failed']} failed "
          f"({s['skipped']} finished before, {s['ran']} run now) in {s['seconds']:.1f} s -> {s['out']}")
    for f in s["failures"]:
        print(f"  failed {f['kind']} {f['id']}: {f['reason']}")


def _interrupted(out: str) -> int:
    print(f"\ninterrupted: every point finished so far is recorded in {out}; run the same command "
          "again to go on from there", file=sys.stderr)
    return 130


def run_sweep(args) -> int:
    from asicsim.sweep.run import sweep

    try:
        s = sweep(args.spec, args.out, workers=args.workers, ray=args.ray, retry_failed=args.retry_failed,
                  progress=None if args.json else sys.stderr)
    except KeyboardInterrupt:
        return _interrupted(args.out)
    if args.json:
        print(json.dumps(s, indent=1))
    else:
        _print_summary(s)
        print(f"results: asicsim.load_results({args.out!r}); report: asicsim report {args.out} -o report.html")
    return 0


def run_demo(args) -> int:
    from asicsim.report import summary_text, write_report
    from asicsim.sweep.run import sweep

    t0 = time.monotonic()
    try:
        s = sweep("demo", args.out, workers=args.workers, progress=None if args.json else sys.stderr)
    except KeyboardInterrupt:
        return _interrupted(args.out)
    html = os.path.join(args.out, "report.html")
    written = write_report(args.out, html)
    s["report"] = html
    s["report_files"] = written
    s["seconds_total"] = round(time.monotonic() - t0, 2)
    if args.json:
        print(json.dumps(s, indent=1, default=str))
        return 0
    _print_summary(s)
    print(summary_text(args.out))
    print(f"report: {html} (open it in any browser; it needs no network) — "
          f"{s['seconds_total']:.0f} s in all")
    return 0
