"""The report's first section: per workload (and phase), the best (recipe, design) for the spec's
objective among the recipes within the accuracy limit, how it compares with every GPU of the
sweep, in one plain sentence and two small tables; then the runner-up and what it trades."""

from __future__ import annotations

import math

import pandas as pd

from asicsim.report.document import Section, Table, Text
from asicsim.report.load import Results
from asicsim.report.objective import PER, WORDS, candidates, qualifies
from asicsim.report.tables import is_fp32
from asicsim.report.units import compare, eng, points

#: Each comparison against a GPU in the table: ratio, column header, word when the pick is better, when worse.
VERSUS = (("speedup", "time", "faster", "slower"), ("energy", "energy", "less", "more"),
          ("dynamic", "dynamic energy", "less", "more"), ("dram", "DRAM bytes", "fewer", "more"))


def limit_text(opts: dict) -> str:
    return (f"within {opts['max_accuracy_drop']:g} accuracy points of fp32 (losses: within "
            f"{opts['max_loss_increase']:g} of fp32's) with no seed diverged")


def accuracy_text(row, short: bool = False) -> str:
    """What a pick costs in accuracy: "-0.14 accuracy points vs fp32 (-0.28 to 0.00 over 2 seeds)";
    runs that failed (no result) are said apart, never counted as diverged."""
    status = row["status"]
    failed = int(row["failed"]) if "failed" in row and row["failed"] == row["failed"] else 0
    if status == "failed":
        return (f"no accuracy verdict: its {failed} run{'s' if failed != 1 else ''} failed"
                + ("" if short else " (an error, a timeout or a lost worker: no result; see Failed points)"))
    tail = f"; {failed} more failed, no result" if failed else ""
    if is_fp32(row["recipe"]) and row["phase"] == "train" and status == "ok":
        return ("the fp32 reference" if short else "the fp32 reference itself") + tail
    if status == "unmeasured":
        return "accuracy not measured (the recipe was priced, not run)"
    if status == "no_fp32":
        return "accuracy not compared (no fp32 result for this workload)" + tail
    if status == "diverged":
        return f"diverged in {int(row['diverged'])} of {int(row['seeds'])} seeds" + tail
    unit = "accuracy points" if row["unit"] == "points" else row["unit"]
    value = points(row["delta"]) if row["unit"] == "points" else f"{row['delta']:+.3g}"
    n = int(row["seeds"])
    if n == 1:
        spread = "1 seed"
    else:
        lo, hi = ((points(row["delta_min"]), points(row["delta_max"])) if row["unit"] == "points"
                  else (f"{row['delta_min']:+.3g}", f"{row['delta_max']:+.3g}"))
        spread = f"{lo} to {hi} over {n} seeds"
    return f"{value} ({spread}{tail})" if short else f"{value} {unit} vs fp32 ({spread}{tail})"


def versus(cand: pd.DataFrame, row, gpus: list[str]) -> list[dict]:
    """``row`` against each GPU of the sweep running the same recipe and phase: its time, energy,
    dynamic energy and DRAM bytes over this row's (> 1: this row is better). A GPU without
    that cost point gets NaN."""
    out = []
    for g in gpus:
        if g == row["design"]:
            continue
        ref = cand[(cand["workload"] == row["workload"]) & (cand["recipe"] == row["recipe"])
                   & (cand["phase"] == row["phase"]) & (cand["design"] == g)]
        ref = ref.iloc[0] if len(ref) else None

        def ratio(col, ref=ref):
            return float(ref[col]) / float(row[col]) if ref is not None and float(row[col]) > 0 else math.nan

        out.append({"gpu": g, "speedup": ratio("time_s"), "energy": ratio("energy_j"),
                    "dynamic": ratio("energy_dynamic_j"), "dram": ratio("dram_bytes")})
    return out


#: How the answer names a phase, and what one unit of its cost is.
PHASE = {"train": ("training", "step"), "infer": ("inference", "batch")}


def _dynamic(v: dict) -> str:
    if not math.isfinite(v["dynamic"]):
        return ""
    said = compare(v["dynamic"], "less", "more")
    return " (about the same dynamic energy)" if said.startswith("about") else f" ({said} counting dynamic energy only)"


def _than(phrase: str, gpu: str) -> str:
    """'41x less energy than G', 'about the same energy as G'."""
    return f"{phrase} {'as' if phrase.startswith('about') else 'than'} {gpu}"


def _gpu_clause(v: dict, objective: str) -> str:
    """'uses 1,950x less energy than gpu_h100 (1.3x more counting dynamic energy only) and is 38x
    faster' (time first when the objective is time)."""
    if not math.isfinite(v["energy"]) and not math.isfinite(v["speedup"]):
        return f"has no {v['gpu']} cost point of its recipe to compare with"
    speed, energy = compare(v["speedup"], "faster", "slower"), compare(v["energy"], "less energy", "more energy")
    if objective == "time":
        return f"is {_than(speed, v['gpu'])} and uses {energy}{_dynamic(v)}"
    return f"uses {_than(energy, v['gpu'])}{_dynamic(v)} and is {speed}"


def _more_gpus(v: dict) -> str:
    if not math.isfinite(v["energy"]) and not math.isfinite(v["speedup"]):
        return f" {v['gpu']} has no cost point of this recipe."
    energy = compare(v["energy"], "less energy", "more energy")
    return f" Against {v['gpu']}: {energy}{_dynamic(v)}, {compare(v['speedup'], 'faster', 'slower')}."


def sentence(cand: pd.DataFrame, best, runner, gpus: list[str], opts: dict) -> str:
    """The plain answer for one workload and phase: the pick and its cost, against the first GPU
    (the others in a sentence each), its accuracy cost; then the runner-up and what it trades."""
    phase, unit = PHASE[best["phase"]]
    head = (f"{best['workload']} ({phase}): {best['recipe']} on {best['design']} ({eng(best['energy_j'], 'J')}, "
            f"{eng(best['time_s'], 's')} per {unit})")
    vs = versus(cand, best, gpus)
    if vs:
        text = f"{head} {_gpu_clause(vs[0], opts['objective'])}, at {accuracy_text(best)}."
        text += "".join(_more_gpus(v) for v in vs[1:])
    else:
        text = f"{head} has the least {WORDS[opts['objective']]}, at {accuracy_text(best)}."
    cheapest = cand.iloc[0]  # sorted by objective: what the limit excluded, if it did
    if cheapest["objective"] < best["objective"] and cheapest["status"] in ("over", "diverged", "failed"):
        saving = compare(best["objective"] / cheapest["objective"], "less " + WORDS[opts["objective"]], "")
        why = "The accuracy limit excludes" if cheapest["status"] != "failed" else "Not picked, having no result:"
        text += (f" {why} {cheapest['recipe']} on {cheapest['design']} "
                 f"({_than(saving, 'the pick')}; {accuracy_text(cheapest)}).")
    if runner is None:
        return text + " No other (recipe, design) qualifies."
    trade = compare(runner["objective"] / best["objective"], "more " + WORDS[opts["objective"]],
                    "less " + WORDS[opts["objective"]])
    if runner["recipe"] == best["recipe"]:
        acc = ", same recipe"
    elif best["unit"] == "points" and runner["unit"] == "points":
        diff = points(runner["delta"] - best["delta"])
        acc = ", the same accuracy" if diff == points(0.0) else f", {diff} accuracy points"
    else:
        acc = f", {accuracy_text(runner)}"
    return text + f" Runner-up: {runner['recipe']} on {runner['design']}, {trade}{acc}."


def _nothing(cand: pd.DataFrame, opts: dict) -> str:
    """Why nothing qualifies for one workload and phase (every recipe over the limit, diverged, or
    without a result)."""
    first = cand.iloc[0]
    q = cand.drop_duplicates("recipe")
    if (q["status"] == "failed").all():
        return (f"{first['workload']} ({PHASE[first['phase']][0]}): nothing is picked: every recipe's runs "
                "failed (an error, a timeout or a lost worker), so no recipe has an accuracy verdict. See Failed "
                "points; asicsim sweep SPEC --out DIR --retry-failed reruns them.")
    over = q[q["status"] == "over"]
    closest = over.iloc[(over["delta"].abs()).argsort().iloc[0]] if len(over) else None
    text = (f"{first['workload']} ({PHASE[first['phase']][0]}): no recipe is {limit_text(opts)}, so nothing is "
            "picked")
    if closest is not None:
        text += f" (the closest, {closest['recipe']}, is at {accuracy_text(closest)})"
    return text + ". The [report] table of the spec sets the limit (max_accuracy_drop, max_loss_increase)."


def picks(res: Results, opts: dict) -> list[dict]:
    """Per (workload, phase) priced: ``best`` and ``runner`` (rows of :func:`candidates`, None
    where there is none) and the ``candidates`` of that workload and phase."""
    cand = candidates(res, opts)
    out = []
    for (w, ph), g in cand.groupby(["workload", "phase"], sort=False):
        ok = g[qualifies(g)]
        out.append({"workload": w, "phase": ph, "candidates": g,
                    "best": ok.iloc[0] if len(ok) else None, "runner": ok.iloc[1] if len(ok) > 1 else None})
    return out


def kernel_sentences(res: Results, opts: dict) -> list[str]:
    """Per DeepBench suite and precision, the design with the least objective on the whole suite,
    against each GPU (said where no workload was priced, so the answer still names a design)."""
    from asicsim.report.tables import deepbench

    k = deepbench(res)
    if not len(k):
        return []
    k = k.assign(edp_js=pd.to_numeric(k["energy_j"], errors="coerce") * pd.to_numeric(k["time_s"], errors="coerce"))
    col = {"energy": "energy_j", "time": "time_s", "edp": "edp_js"}[opts["objective"]]
    k = k.assign(objective=pd.to_numeric(k[col], errors="coerce"))
    out = []
    for (suite, prec), g in k.groupby(["suite", "precision"], sort=True):
        g = g[g["objective"].notna()].sort_values(["objective", "design"], kind="stable")
        if not len(g):
            continue
        b = g.iloc[0]
        text = (f"DeepBench {suite} ({prec}): the least {WORDS[opts['objective']]} on {b['design']} "
                f"({eng(b['energy_j'], 'J')}, {eng(b['time_s'], 's')} for the suite)")
        for gpu in res.gpus():
            ref = g[g["design"] == gpu]
            if gpu == b["design"] or not len(ref):
                continue
            r = ref.iloc[0]
            text += (f"; against {gpu}: {compare(r['energy_j'] / b['energy_j'], 'less energy', 'more energy')}, "
                     f"{compare(r['time_s'] / b['time_s'], 'faster', 'slower')}")
        out.append(text + ".")
    return out


def _row(pick: str, r) -> dict:
    return {"workload": r["workload"], "per": PER[r["phase"]], "pick": pick, "recipe": r["recipe"],
            "design": r["design"], "accuracy vs fp32": accuracy_text(r, short=True),
            "energy": eng(r["energy_j"], "J"), "time": eng(r["time_s"], "s"), "DRAM": eng(r["dram_bytes"], "B")}


def section(res: Results, opts: dict) -> Section:
    s = Section("answer", "The answer: best format and design per workload")
    obj = WORDS[opts["objective"]]
    s.add(Text(f"Objective ([report] objective = \"{opts['objective']}\"): the least {obj} per training "
               f"step (per inference batch for inference) among the recipes {limit_text(opts)}. Accuracy vs "
               "fp32: the seed mean of each seed's difference to its fp32 run, in points (percent) for "
               "accuracy; the GPUs run the same recipe."))
    ps = picks(res, opts)
    if not ps:
        r = res.results
        why = ("no workload was priced (a workload's run needs \"cost\")" if len(r) else "no point has finished")
        if len(res.done("cost")):
            why = "no priced design could run the recipes' formats (every cost point is without a number)"
        s.add(Text(f"Nothing to pick: {why}, so no (recipe, design) has an energy or time to compare."))
        return s.add(*[Text(x) for x in kernel_sentences(res, opts)])
    gpus = res.gpus()
    rows, vs_rows = [], []
    for p in ps:
        best, runner = p["best"], p["runner"]
        if best is None:
            s.add(Text(_nothing(p["candidates"], opts)))
            continue
        s.add(Text(sentence(p["candidates"], best, runner, gpus, opts)))
        for label, r in (("best", best), ("runner-up", runner)):
            if r is None:
                continue
            rows.append(_row(label, r))
            vs_rows += [{"workload": r["workload"], "per": PER[r["phase"]], "pick": label, "vs GPU": v["gpu"],
                         **{head: compare(v[k], word, worse) for k, head, word, worse in VERSUS}}
                        for v in versus(p["candidates"], r, gpus)]
    if rows:
        s.add(Table(pd.DataFrame(rows), "The picks (per step or batch)", narrow=True))
    if vs_rows:
        s.add(Table(pd.DataFrame(vs_rows), "Against each GPU (same recipe)", narrow=True))
    untried = sorted(set(res.done("train")["workload"].dropna()) - {p["workload"] for p in ps})
    if untried:
        s.add(Text(f"Trained but not priced (no \"cost\" in run), so no design to pick: {', '.join(untried)}."))
    return s
