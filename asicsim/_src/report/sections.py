"""The report's sections, in order, built from a sweep's results: what each says, which tables
and figures it holds, and the one sentence it says instead when the sweep has no data for it."""

from __future__ import annotations

import re

import pandas as pd

from asicsim._src.report import answer, figures, objective, pivots, trade
from asicsim._src.report.aggregate import top_designs
from asicsim._src.report.document import Figure, Section, Table, Text
from asicsim._src.report.load import Results
from asicsim._src.report.reproduce import inputs
from asicsim._src.report.tables import BAIDU_FLOPS_PER_W, diverged, static_shares

#: The roofline figures drawn at most (a large design space has its roofs in the CSV).
MAX_ROOFLINES = 12

#: Section ids in report order (``trade`` only where the answer picks a systolic design, ``failed`` only
#: when a point failed).
SECTION_IDS = ("answer", "trade", "summary", "pareto", "curves", "numerics", "energy", "roofline", "deepbench", "baidu",
               "failed", "inputs")


def slug(*parts) -> str:
    """An HTML id from names (letters, digits, - and _ only)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(str(p) for p in parts)).strip("-")


def _workloads(df: pd.DataFrame) -> list[str]:
    return sorted(set(df["workload"].dropna().astype(str))) if "workload" in df else []


#: What the vs-GPU energy columns divide, said once for the summary and the DeepBench section.
ENERGY_RATIOS = ("energy_ratio_vs_G: this design's total energy (dynamic + static) over G's, at the records' "
                 "energy_j scope (board to board for records with energy scopes; the answer says the scope); "
                 "dynamic_energy_ratio_vs_G: the same for dynamic energy only (MACs, vector unit, buffers, DRAM; "
                 "no static power), which compares the work itself")


def static_note(df: pd.DataFrame, gpus: list[str], keys: list[str], what: str) -> str:
    """One sentence per GPU whose energy is over half static on a row others are compared with
    (there the total-energy ratio mostly measures the GPU's static power over its busy time),
    "" when none is."""
    out = []
    for g, share in static_shares(df, gpus, keys).items():
        if share.max() <= 0.5:
            continue
        lo, hi = f"{100 * share.min():.0f}", f"{100 * share.max():.0f}"
        out.append(f"{g}'s energy on {what} is {lo if lo == hi else f'{lo}-{hi}'} % static power "
                   "(TDP share x busy time); the dynamic ratio compares the work itself.")
    return " ".join(out)


#: The vs-GPU ratio columns of a table, by their prefix (``speedup_vs_G`` ...).
RATIOS = ("speedup", "energy_ratio", "dynamic_energy_ratio")


def split_gpu_ratios(df: pd.DataFrame, keys: list[str], gpus: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A table without its vs-GPU ratio columns, and the ratios as rows (``keys``, ``vs`` G, one
    column per ratio): three columns whatever the count of GPUs, so neither table is wider than
    the page."""
    cols = [f"{r}_vs_{g}" for g in gpus for r in RATIOS if f"{r}_vs_{g}" in df]
    long = [df[keys].assign(vs=g, **{r: df[f"{r}_vs_{g}"] for r in RATIOS}) for g in gpus
            if all(f"{r}_vs_{g}" in df for r in RATIOS)]
    long = [x[x["design"] != x["vs"]] if "design" in keys else x for x in long]  # not G against itself
    vs = pd.concat(long, ignore_index=True) if long else pd.DataFrame(columns=[*keys, "vs", *RATIOS])
    return df.drop(columns=cols), vs


def summary(res: Results, t: dict, opts: dict | None = None) -> Section:
    s = Section("summary", "Per workload: recipes x designs")
    opts = opts or objective.options(res)
    df = t["summary"]
    if not len(df):
        return s.add(Text("No workload was trained, evaluated or priced in this sweep."))
    gpus = res.gpus()
    cand = objective.candidates(res, opts, finite=False)
    if len(cand):
        s.add(Text(f"Per workload, the {objective.WORDS[opts['objective']]} of one training step (one inference "
                   "batch for inference) of each recipe (rows) on each design (columns), least first both ways; "
                   "vs fp32: the recipe's accuracy difference to fp32 (seed mean; '(over)': every seed beyond the limit; "
                   "'(spread)': the limit lies within its seed spread, so it is not picked). "
                   "'–': not priced (the design cannot run the recipe's formats)."))
        s.add(*pivots.blocks(cand, opts))
    else:
        s.add(Text("No workload was priced (cost) in this sweep, so there is no recipes x designs table."))
    s.add(Text("summary.csv (in the tables folder beside this report) holds one row per workload, recipe, phase "
               "and design: value (the metric, seed mean); delta_vs_fp32: value minus the fp32 reference (the fp32 "
               "training recipe for phase train, the fp32 model before quantization for phase infer); time_s and "
               "energy_j per step or batch, energy_j split into energy_dynamic_j (MACs, vector unit, buffers, "
               "DRAM) and energy_static_j (static power over the busy time); dram_bytes; gflops_per_w (from the "
               "total energy)."
               + (f" speedup_vs_G: G's time over this design's time; {ENERGY_RATIOS}; for each GPU G in the sweep "
                  f"({', '.join(gpus)}), same recipe and phase."
                  if gpus else " The sweep has no GPU design, so there are no vs-GPU ratios.")))
    note = static_note(df, gpus, ["workload", "recipe", "phase"], "these steps")
    if note:
        s.add(Text(note))
    return s


def pareto(res: Results, t: dict) -> Section:
    s = Section("pareto", "Accuracy vs energy: the Pareto front")
    df = t["pareto"]
    if not len(df):
        return s.add(Text("No workload was both trained and priced (cost) in this sweep, so there is no "
                          "accuracy-vs-energy front."))
    s.add(Text("Each point is a (recipe, design): the recipe's final metric (seed mean) against the energy of "
               "one training step on the design. Circled: the Pareto front, points no other point beats on "
               "both energy and quality."))
    for w in _workloads(df):
        s.add(Figure(slug("fig-pareto", w), figures.pareto(df, w, res.results), f"{w}: quality vs energy per training step"))
    return s.add(Table(df[df["pareto"]].drop(columns=["pareto"]), "The Pareto points", csv="pareto"))


def curves(res: Results, t: dict) -> Section:
    s = Section("curves", "Loss curves per recipe")
    c = res.curves
    if not len(c):
        return s.add(Text("No training run in this sweep recorded curves."), *_diverged_runs(res))
    s.add(Text("Training and test loss against the optimizer step, a colour per recipe: the mean over seeds "
               "with a band from the lowest to the highest seed; an x marks where a run diverged (its last finite value)."))
    for w in _workloads(c):
        s.add(Figure(slug("fig-curves", w), figures.curves(c, res.results, w), f"{w}: loss curves"))
    return s.add(*_diverged_runs(res))


def _diverged_runs(res: Results) -> list:
    """The runs that diverged (training and inference), or a sentence saying none did."""
    div = diverged(res)
    if not len(div):
        return [Text("No run diverged.")]
    return [Table(div, "Runs that diverged (a numerical result: the step and cause; a run that failed has no "
                       "result and is listed under Failed points)")]


def numerics(res: Results, t: dict) -> Section:
    s = Section("numerics", "Numerics: underflow and overflow per tensor role")
    df = t["numerics"]
    if not len(df):
        return s.add(Text("No training or inference run in this sweep recorded numerics statistics."))
    s.add(Text("Fraction of values that underflowed to zero, overflowed, were non-finite or zero after "
               "rounding into the recipe's formats, per tensor role (weight, act, grad, wgrad), averaged over "
               "tensors and seeds weighted by tensor size; max_*: the worst tensor."))
    for w in _workloads(df):
        note = figures.numerics_note(df, w)
        if not figures.numerics_has_data(df, w):  # both panels empty: the sentence, no figure
            s.add(Text(note))
            continue
        s.add(Figure(slug("fig-numerics", w), figures.numerics(df, w), f"{w}: underflow and overflow"))
        if note:
            s.add(Text(note))
    return s.add(Table(df, csv="numerics"))


def energy(res: Results, t: dict) -> Section:
    s = Section("energy", "Energy breakdown and data movement")
    df = t["energy"]
    if not len(df):
        return s.add(Text("No workload was priced (cost) in this sweep, so there is no energy breakdown."))
    s.add(Text("Energy of one training step (phase train) or inference batch (phase infer) per component "
               "(MAC array, vector unit, on-chip buffers, DRAM, static), and the bytes moved to and from DRAM "
               "and on-chip SRAM, per design and recipe: the energy as shares of the total (written at the right), "
               "the bytes on a log scale."))
    for (w, ph), g in df.groupby(["workload", "phase"], sort=True):
        cap = f"{w} ({ph}): energy and data movement"
        if len(g) > figures.MAX_BARS:
            cap += f" (the {figures.MAX_BARS} lowest-energy of {len(g)} rows, and every GPU; all in energy.csv)"
        s.add(Figure(slug("fig-energy", w, ph), figures.energy(df, w, ph), cap))
    return s.add(Table(df, csv="energy"))


def roofline(res: Results, t: dict) -> Section:
    s = Section("roofline", "Roofline per design")
    pts, roofs = t["roofline_points"], t["roofs"]
    if not len(roofs):
        return s.add(Text("No design was priced in this sweep, so there is no roofline."))
    s.add(Text("Roof: min(peak flop/s, intensity x DRAM bandwidth), one per peak the design was priced with "
               "(a GPU's depends on the precision). Placed: every op of the workloads' traces (2 x MACs over "
               "its DRAM bytes and its time) and every DeepBench kernel, a marker per bound (circle compute, "
               "square bandwidth, triangle occupancy). Ops without DRAM traffic or MACs are not placed."))
    designs = sorted(set(roofs["design"]))
    cost = t["energy"]
    if len(designs) > MAX_ROOFLINES and len(cost) and "energy_j" in cost:  # the lowest-energy designs first
        best = [d for d in top_designs(cost, "energy_j", MAX_ROOFLINES) if d in set(designs)]
        designs = best + [d for d in designs if d not in set(best)]
    for d in designs[:MAX_ROOFLINES]:
        s.add(Figure(slug("fig-roofline", d), figures.roofline(pts, roofs, d, res.results), f"roofline: {d}"))
    if len(designs) > MAX_ROOFLINES:
        s.add(Text(f"Rooflines drawn for {MAX_ROOFLINES} of {len(designs)} designs (the lowest-energy ones and "
                   "every GPU); every point is in roofline_points.csv."))
    o = res.ops
    o = o[pd.to_numeric(o["macs"], errors="coerce").fillna(0) > 0]
    unplaced = o[~(pd.to_numeric(o["dram_bytes"], errors="coerce").fillna(0) > 0)]
    if len(unplaced):
        counts = unplaced.groupby("design").size()
        total = o.groupby("design").size()
        s.add(Text("Not placed (the cost model reports no DRAM traffic for them, e.g. operands that stay on "
                   "chip): " + "; ".join(f"{d}: {n} of {total[d]} ops" for d, n in counts.items()) + "."))
    return s.add(Table(roofs, "Roofs", csv="roofs"))


def deepbench(res: Results, t: dict) -> Section:
    s = Section("deepbench", "DeepBench kernel suites per design vs GPU")
    df = t["deepbench"]
    if not len(df):
        return s.add(Text("No DeepBench kernel suite was priced in this sweep."))
    gpus = res.gpus()
    s.add(Text("Per suite and design: total time of the suite's kernels (each run once), the geometric mean of "
               "their TFLOP/s, total energy with its dynamic and static parts (energy_dynamic_j, energy_static_j) "
               "and GFLOP/s per watt (from the total); speedup_vs_G: G's total time over this design's, "
               f"{ENERGY_RATIOS}; for each GPU G in the sweep."))
    note = static_note(df, gpus, ["suite", "precision"], "these kernels")
    if note:
        s.add(Text(note))
    s.add(Figure("fig-deepbench", figures.deepbench(df), "DeepBench: geomean TFLOP/s per design"))
    main, vs = split_gpu_ratios(df, ["suite", "precision", "design"], gpus)
    s.add(Table(main, csv="deepbench"))
    if len(vs):
        s.add(Table(vs, "Against each GPU vs (same suite and precision): speedup_vs_G, energy_ratio_vs_G and "
                        "dynamic_energy_ratio_vs_G as columns", csv="deepbench"))
    return s


def baidu(res: Results, t: dict) -> Section:
    s = Section("baidu", "Distance to 10 PFLOP/s in 300 W")
    df = t["baidu"]
    if not len(df):
        return s.add(Text("No design was priced in this sweep, so there is no distance to the mark."))
    s.add(Text(f"Baidu's mark for a training accelerator: 10 PFLOP/s in 300 W, {BAIDU_FLOPS_PER_W / 1e12:.1f} "
               "TFLOP/s per watt, a board figure. peak: the design's dense peak flop/s per board watt (a GPU: "
               "over its TDP; an accelerator: its array at full rate plus its board's idle power, buffers and "
               "DRAM traffic left out as vendors quote peaks); achieved: the best flop per joule the cost model found on the sweep's workloads "
               "and kernels (best_on says where). Both as a fraction of the mark (1 = the mark)."))
    s.add(Figure("fig-baidu", figures.baidu(df), "flop/s per watt as a fraction of Baidu's mark"))
    return s.add(Table(df, csv="baidu"))


def failed(res: Results, t: dict) -> Section | None:
    df = t["failed"]
    if not len(df):
        return None
    s = Section("failed", f"Failed points ({len(df)})")
    s.add(Text("Points that produced no result: an error, a timeout, a lost worker or out of memory. They "
               "say nothing about the numerics and are left out of every accuracy verdict (a run that "
               "diverged is a result, listed with its step and cause under the loss curves). Rerun them with "
               "asicsim sweep SPEC --out DIR --retry-failed."))
    return s.add(Table(df, csv="failed"))


BUILDERS = (pareto, curves, numerics, energy, roofline, deepbench, baidu, failed, inputs)


def build(res: Results, t: dict, opts: dict | None = None) -> list[Section]:
    """Every section of the report, in order (``failed`` only when a point failed); ``opts``: the
    [report] settings (:func:`asicsim._src.report.objective.options`, read from the sweep by default)."""
    opts = opts or objective.options(res)
    out = [answer.section(res, opts), trade.section(res, opts), summary(res, t, opts)]
    out = [s for s in out if s is not None]
    out += [s for s in (b(res, t) for b in BUILDERS) if s is not None]
    seen: set[str] = set()
    for s in out:  # figure ids unique in the page (two names can share a slug)
        for i, b in enumerate(s.blocks):
            if isinstance(b, Figure):
                fid, n = b.id, 1
                while fid in seen:
                    n += 1
                    fid = f"{b.id}-{n}"
                seen.add(fid)
                s.blocks[i] = Figure(fid, b.svg, b.caption)
    return out
