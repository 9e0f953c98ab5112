"""The catalog commands of ``asicsim``: ``formats``, ``designs``, ``recipes`` and ``workloads``
list what ships (one line per entry with a short description; ``--json`` has every field)."""

from __future__ import annotations

import json
import math
import re


def _format_rows(names: list[str] | None) -> list[dict]:
    # here: a listing loads only its own layer (`asicsim --help` loads none)
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
        if math.log2(abs(v)).is_integer():
            return f"2^{math.log2(abs(v)):.0f}"
        short = f"{v:.4g}"  # exact digits where a plain number would look exact (q7.8: not 128)
        return short if "e" in short else repr(v)
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
        tiny = _fmt_num(r["smallest_subnormal"]) if "smallest_subnormal" in r else "n/a"
        bits = f"{r['bits']:g}"
        alias = ", ".join(r["aliases"])
        desc = f"[{alias}] {r['description']}" if alias else r["description"]
        print(f"{r['name']:<20} {r['kind']:<5} {bits:>5} {_fmt_num(r['max']):>10} {tiny:>13}  {desc}")
    if any("smallest_subnormal" not in r for r in rows):
        print("min subnormal n/a: an integer or block format (no subnormals)")
    return 0


def first_sentence(text: str) -> str:
    """The first sentence of a catalog description, on one line: what a listing shows."""
    text = " ".join(text.split())
    m = re.search(r"(?<=[.!?])\s+(?=[A-Z0-9(])", text)
    return text[: m.start()] if m else text


def _print_rows(rows: list[dict], columns: tuple[str, ...], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    print("  ".join(f"{c:<{widths[c]}}" for c in columns) + "  description")
    for r in rows:
        print("  ".join(f"{r[c]!s:<{widths[c]}}" for c in columns) + "  " + first_sentence(r["description"]))


def design_rows(efficiency: bool = True) -> list[dict]:
    """Every shipped design: systolic arrays first, then the GPU baselines; ``efficiency``: with
    its idle power and peak TOPS/W per scope (:func:`_efficiency`)."""
    # here: a listing loads only its own layer (`asicsim --help` loads none)
    from .hw import load_design
    from .hw.design_files import list_designs

    return [{"name": n, "kind": kind, "description": load_design(n).description, **(_efficiency(n, kind) if efficiency else {})}
            for kind in ("systolic", "gpu") for n in list_designs(kind)]


#: Formats a GPU's peak efficiency is also quoted in: its tensor-core path (the default is fp32 SIMT).
_GPU_TENSOR_FORMATS = "act=fp16,weight=fp16,acc=fp32"


def _efficiency(name: str, kind: str) -> dict:
    """Peak ops, idle power and peak TOPS/W per scope (core, chip, board) of a design, in its own
    formats (a GPU: also on its fp16 tensor path): :mod:`asicsim._src.hw.efficiency`."""
    # here: a listing loads only its own layer (`asicsim --help` loads none)
    from .hw import load_design
    from .hw.efficiency import peak_tops_per_w, power_figures

    d = load_design(name)

    def peak(formats, eff=None):
        eff = eff or peak_tops_per_w(d, formats)
        return {"formats": formats or "design", "peak_tops": d.peak_ops_per_s(formats) / 1e12,
                **{f"tops_per_w_{s}": (None if v != v else v) for s, v in eff.items()}}

    idle, own = power_figures(d)  # the energy rates built once for both
    return {"tdp_w": d.power_w if d.power_w == d.power_w else None,
            "idle_power_chip_w": idle["chip"], "idle_power_board_w": idle["board"],
            "peak": [peak(None, own)] + ([peak(_GPU_TENSOR_FORMATS)] if kind == "gpu" else [])}


def recipe_rows() -> list[dict]:
    # here: a listing loads only its own layer (`asicsim --help` loads none)
    from .emulate.policy import list_recipes
    from .emulate.recipes import load_recipe

    return [{"name": n, "description": load_recipe(n).description} for n in list_recipes()]


def workload_rows() -> list[dict]:
    """Training workloads (asicsim train, infer, trace) and kernel suites (asicsim cost --workload)."""
    # here: a listing loads only its own layer (`asicsim --help` loads none)
    from .workloads import list_workloads, load_workload
    from .workloads.deepbench_files import suite_rows

    rows = []
    for n in list_workloads():
        w = load_workload(n)
        rows.append({"name": n, "kind": "training", "scales": ",".join(w.scales), "kernels": None,
                     "precisions": None, "description": w.description})
    for s in suite_rows():
        subset = s["name"].removeprefix("deepbench_").removeprefix(s["kind"]).strip("_").replace("_", " ")
        precisions = s["precisions"].replace(";", ", ") or "none published"
        rows.append({"name": s["name"], "kind": f"suite:{s['kind']}", "scales": "-",
                     "kernels": int(s["kernels"]),
                     "precisions": s["precisions"],
                     "description": f"DeepBench {s['kind']} kernels{f', {subset} set' if subset else ''} "
                                    f"({s['kernels']} kernels; "
                                    f"DeepBench precisions: {precisions})"})
    return rows


def cmd_designs(args) -> int:
    _print_rows(design_rows(efficiency=args.json), ("name", "kind"), args.json)
    return 0


def cmd_recipes(args) -> int:
    _print_rows(recipe_rows(), ("name",), args.json)
    return 0


def cmd_workloads(args) -> int:
    _print_rows(workload_rows(), ("name", "kind", "scales"), args.json)
    return 0


def add_cli(sub) -> None:
    """Register the catalog commands on the main parser's subparsers."""
    p = sub.add_parser("formats", help="list number formats (catalog, or the names given)")
    p.add_argument("names", nargs="*", help="format names, grammar names or .toml paths (default: the catalog)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_formats)
    p = sub.add_parser("designs", help="list the designs (systolic arrays and GPU baselines)",
                       description="Every design in designs/: a name for --design, its kind (systolic "
                                   "or gpu) and the first sentence of its description.")
    p.add_argument("--json", action="store_true", help="machine-readable output (full descriptions)")
    p.set_defaults(func=cmd_designs)
    p = sub.add_parser("recipes", help="list the precision recipes",
                       description="Every recipe in formats/recipes/: a name for --recipe and the "
                                   "first sentence of its description.")
    p.add_argument("--json", action="store_true", help="machine-readable output (full descriptions)")
    p.set_defaults(func=cmd_recipes)
    p = sub.add_parser("workloads", help="list the training workloads and the kernel suites (DeepBench)",
                       description="Every workload in workloads/: training workloads (asicsim train, "
                                   "infer, trace) and DeepBench kernel suites (asicsim cost --workload) "
                                   "with their kernel counts.")
    p.add_argument("--json", action="store_true", help="machine-readable output (kernel counts, precisions)")
    p.set_defaults(func=cmd_workloads)
