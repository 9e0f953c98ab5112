"""The ``asicsim`` command. Nothing imports this module; it only calls the library."""

from __future__ import annotations

import argparse
import json
import math
import sys


def _format_rows(names: list[str] | None) -> list[dict]:
    from .numerics.catalog import aliases, catalog, get_format

    if names:
        specs = [get_format(n) for n in names]
    else:  # floats, then integers, then block formats; widest first within a kind
        order = {"float": 0, "int": 1, "block": 2}
        specs = sorted(catalog().values(), key=lambda s: (order[s.kind], -s.bits, s.name))
    by_canonical: dict[str, list[str]] = {}
    for alias, canonical in aliases().items():
        if alias != canonical.lower():
            by_canonical.setdefault(canonical, []).append(alias)
    rows = []
    for spec in specs:
        row = {
            "name": spec.name,
            "kind": spec.kind,
            "bits": spec.bits,
            "max": spec.max,
            "aliases": sorted(by_canonical.get(spec.name, [])),
            "description": spec.description,
            "source": spec.source,
        }
        if spec.kind == "float":
            row |= {
                "grammar": spec.grammar_name,
                "bias": spec.bias,
                "smallest_normal": spec.smallest_normal,
                "smallest_subnormal": spec.smallest_subnormal,
                "eps": spec.eps,
                "inf": spec.has_inf,
                "nan": spec.nan,
            }
        elif spec.kind == "int":
            row |= {"min": spec.min, "eps": spec.eps, "frac_bits": spec.frac_bits}
        else:
            row |= {
                "element": spec.element.name,
                "scale": spec.scale.name,
                "block_size": spec.block_size or "tensor",
            }
        rows.append(row)
    return rows


def _fmt_num(v) -> str:
    if isinstance(v, float):
        if v == 0 or (1e-3 <= abs(v) < 1e6 and v == float(f"{v:.6g}")):
            return f"{v:g}"
        return f"2^{math.log2(v):.0f}" if math.log2(v).is_integer() else f"{v:.4g}"
    return str(v)


def cmd_formats(args) -> int:
    rows = _format_rows(args.names)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = f"{'name':<20} {'kind':<5} {'bits':>5} {'max':>10} {'min subnormal':>13}  aliases / description"
    print(header)
    print("-" * len(header))
    for r in rows:
        tiny = _fmt_num(r["smallest_subnormal"]) if "smallest_subnormal" in r else "-"
        bits = f"{r['bits']:g}"
        alias = ", ".join(r["aliases"])
        desc = f"[{alias}] {r['description']}" if alias else r["description"]
        print(f"{r['name']:<20} {r['kind']:<5} {bits:>5} {_fmt_num(r['max']):>10} {tiny:>13}  {desc}")
    return 0


def cmd_cost(args) -> int:
    """Price layers on a design. Today: SCALE-Sim compatibility mode (its files, its columns)."""
    import numpy as np

    from .hw import scalesim_report_from_files

    if not (args.scalesim_config and args.topology):
        raise ValueError(
            "cost: give --scalesim-config CFG and --topology CSV (SCALE-Sim compatibility mode); "
            "pricing catalog designs (--design) is not implemented yet"
        )
    kind = "gemm" if args.gemm else "auto"
    report = scalesim_report_from_files(args.scalesim_config, args.topology, kind=kind)
    if args.json:
        rows = report.replace({np.nan: None}).to_dict(orient="records")
        print(json.dumps(rows, indent=2, default=_json_default))
    else:
        print(report.to_string(index=False))
    return 0


def _json_default(v):
    import numpy as np

    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asicsim", description="Reduced-precision accelerator emulator and cost model."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("formats", help="list number formats (catalog, or the names given)")
    p.add_argument("names", nargs="*", help="format names, grammar names or .toml paths")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_formats)
    p = sub.add_parser(
        "cost",
        help="price layers on a design (SCALE-Sim compatibility mode: its .cfg and topology CSV)",
    )
    p.add_argument("--scalesim-config", metavar="CFG", help="a SCALE-Sim .cfg file")
    p.add_argument("--topology", metavar="CSV", help="a SCALE-Sim topology CSV (conv or M,N,K)")
    p.add_argument("--gemm", action="store_true", help="read the topology as M,N,K GEMMs")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_cost)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"asicsim {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
