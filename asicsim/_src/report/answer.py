"""The report's first section: per workload (and phase), the best (recipe, design) for the spec's
objective among the recipes within the accuracy limit, how it compares with every GPU of the
sweep, in one plain sentence and two small tables; then the runner-up and what it trades."""

from __future__ import annotations

import math

import pandas as pd

from asicsim._src.report import scope as scoped
from asicsim._src.report.accuracy import accuracy_text, limit_text, overlap
from asicsim._src.report.document import Section, Table, Text
from asicsim._src.report.load import SCOPE_COLUMNS, Results
from asicsim._src.report.objective import PER, WORDS, candidates, qualifies
from asicsim._src.report.scope import DEFAULT_SCOPE
from asicsim._src.report.units import compare, eng, points
from asicsim._src.system.busy import LAUNCH_BOUND, OCCUPANCY_BOUND

#: Each comparison against a GPU in the table: ratio, column header, word when the pick is better, when worse.
VERSUS = (("speedup", "time", "faster", "slower"), ("energy", "energy", "less", "more"),
          ("beside", "energy beside", "less", "more"), ("dynamic", "dynamic energy", "less", "more"),
          ("dram", "DRAM bytes", "fewer", "more"))


def _ref(cand: pd.DataFrame, row, g: str):
    ref = cand[(cand["workload"] == row["workload"]) & (cand["recipe"] == row["recipe"])
               & (cand["phase"] == row["phase"]) & (cand["design"] == g)]
    return ref.iloc[0] if len(ref) else None


def versus(cand: pd.DataFrame, row, gpus: list[str], scope: str = DEFAULT_SCOPE) -> list[dict]:
    """``row`` against each GPU of the sweep running the same recipe and phase, at ``scope``
    (:mod:`asicsim._src.report.scope`): its time, energy, energy at the scope beside, dynamic energy
    (same scope) and DRAM bytes over this row's (> 1: this row is better), ``at`` (the scope
    compared at, "scope unknown" for records without scopes) and ``ref`` (the GPU's row). A GPU
    without that cost point gets NaN."""
    out = []
    for g in gpus:
        if g == row["design"]:
            continue
        ref = _ref(cand, row, g)
        if ref is None:
            out.append({"gpu": g, "ref": None, "at": "", "beside_at": "",
                        **dict.fromkeys(("speedup", "energy", "beside", "dynamic", "dram"), math.nan)})
            continue
        used, _ = scoped.resolve(row, ref, scope, g)
        r = scoped.ratios(row, ref, used)
        dram = float(ref["dram_bytes"]) / float(row["dram_bytes"]) if float(row["dram_bytes"]) > 0 else math.nan
        out.append({"gpu": g, "ref": ref, "at": scoped.words(used),
                    "beside_at": scoped.words(scoped.BESIDE[used]) if used else "", **r, "dram": dram})
    return out


#: How the answer names a phase, and what one unit of its cost is.
PHASE = {"train": ("training", "step"), "infer": ("inference", "batch")}


def _energy(row, v: dict, scope: str, named: bool = True) -> str:
    return "uses " + scoped.energy_phrase(row, v["ref"], v["gpu"], scope, named=named)


def _gpu_clause(row, v: dict, objective: str, scope: str) -> str:
    """'uses 7.2x less energy than gpu_h100, board to board (5.6x less chip to chip; 5.6x less
    counting dynamic energy only) and is 38x faster' (time first when the objective is time)."""
    if v["ref"] is None:
        return f"has no {v['gpu']} cost point of its recipe to compare with"
    speed = compare(v["speedup"], "faster", "slower")
    if objective == "time":
        return f"is {scoped.than(speed, v['gpu'])} and {_energy(row, v, scope)}"
    return f"{_energy(row, v, scope)} and is {speed}"


def _explained(row, v: dict, scope: str) -> str:
    """The reasons a comparison needs (:func:`asicsim._src.report.scope.why`, ``busy_text``), each a sentence."""
    if v["ref"] is None:
        return ""
    unit = PHASE[row["phase"]][1]
    reason = scoped.why(row, v["ref"], row["design"], v["gpu"], scope, unit)
    parts = [reason, scoped.busy_text(row, v["ref"], row["design"], v["gpu"], scope, unit, said=reason)]
    return "".join(f" {p}" for p in parts if p)


def _more_gpus(row, v: dict, scope: str) -> str:
    if v["ref"] is None:
        return f" {v['gpu']} has no cost point of this recipe."
    return (f" Against {v['gpu']}: {_energy(row, v, scope, named=False)}, {compare(v['speedup'], 'faster', 'slower')}."
            + _explained(row, v, scope))


def sentence(cand: pd.DataFrame, best, runner, gpus: list[str], opts: dict) -> str:
    """The plain answer for one workload and phase: the pick and its cost, against the first GPU
    (the others in a sentence each), its accuracy cost; then the runner-up and what it trades."""
    phase, unit = PHASE[best["phase"]]
    head = (f"{best['workload']} ({phase}): {best['recipe']} on {best['design']} ({eng(best['energy_j'], 'J')}, "
            f"{eng(best['time_s'], 's')} per {unit})")
    scope = opts.get("scope", DEFAULT_SCOPE)
    vs = versus(cand, best, gpus, scope)
    if vs:
        text = f"{head} {_gpu_clause(best, vs[0], opts['objective'], scope)}, at {accuracy_text(best)}."
        text += _explained(best, vs[0], scope) + "".join(_more_gpus(best, v, scope) for v in vs[1:])
    else:
        text = f"{head} has the least {WORDS[opts['objective']]}, at {accuracy_text(best)}."
    cheapest = cand.iloc[0]  # sorted by objective: what the limit excluded, if it did
    if cheapest["objective"] < best["objective"] and cheapest["status"] in ("over", "spread", "diverged", "failed"):
        saving = compare(best["objective"] / cheapest["objective"], "less " + WORDS[opts["objective"]], "")
        why = "The accuracy limit excludes" if cheapest["status"] != "failed" else "Not picked, having no result:"
        text += (f" {why} {cheapest['recipe']} on {cheapest['design']} "
                 f"({scoped.than(saving, 'the pick')}; {accuracy_text(cheapest)}).")
    if runner is None:
        return text + " No other (recipe, design) qualifies."
    trade = compare(runner["objective"] / best["objective"], "more " + WORDS[opts["objective"]],
                    "less " + WORDS[opts["objective"]])
    if runner["recipe"] == best["recipe"]:
        acc = ", same recipe"
    elif overlap(best, runner):
        acc = ", accuracy within the seed spread of the pick's"
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
    over = q[q["status"].isin(["over", "spread"])]
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
    from asicsim._src.report.tables import deepbench

    k = deepbench(res)
    if not len(k):
        return []
    keys = ["suite", "precision", "design"]
    scopes = res.done("kernels")[[*keys, *SCOPE_COLUMNS]].drop_duplicates(keys)  # the table keeps totals only
    k = k.merge(scopes.apply(lambda c: c if c.name in keys else pd.to_numeric(c, errors="coerce")), on=keys,
                how="left")
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
            scope = opts.get("scope", DEFAULT_SCOPE)
            text += (f"; against {gpu}: {scoped.energy_phrase(b, r, gpu, scope, named=False)}, "
                     f"{compare(r['time_s'] / b['time_s'], 'faster', 'slower')}")
            reason = scoped.why(b, r, b["design"], gpu, scope, "suite")
            text += f" ({reason[:-1]})" if reason else ""
        out.append(text + ".")
    return out


def _row(pick: str, r) -> dict:
    return {"workload": r["workload"], "per": PER[r["phase"]], "pick": pick, "recipe": r["recipe"],
            "design": r["design"], "accuracy vs fp32": accuracy_text(r, short=True),
            "energy": eng(r["energy_j"], "J"), "time": eng(r["time_s"], "s"), "DRAM": eng(r["dram_bytes"], "B")}


def _scope_text(opts: dict) -> str:
    scope = opts.get("scope", DEFAULT_SCOPE)
    return (f" Against a GPU, energy is compared {scoped.words(scope)} ([report] scope; a GPU is measured as a "
            f"board, what nvidia-smi reports), {scoped.words(scoped.BESIDE[scope])} beside it, and the dynamic-only "
            "ratio at the same scope; records written before energy scopes were recorded are said 'scope "
            f"unknown'. A ratio of {scoped.EXPLAIN:g}x or more, and a total ratio pointing the other way from the "
            "dynamic one, is said with its reason; a GPU whose step is mostly launch floor (launch_fraction > "
            f"{LAUNCH_BOUND:g}) or runs on few of its SMs (sm_fraction < {OCCUPANCY_BOUND:g}) is said to be, and "
            "compared again at a larger batch priced for every design (busy_batch).")


def _versus_row(r, label: str, v: dict) -> dict:
    """One row of the against-each-GPU table: the ratios in words, the scope compared at, and the
    energy at the scope beside it with that scope named."""
    out = {"workload": r["workload"], "per": PER[r["phase"]], "pick": label, "vs GPU": v["gpu"], "scope": v["at"],
           **{head: compare(v[k], word, worse) for k, head, word, worse in VERSUS}}
    if math.isfinite(v["beside"]):
        out["energy beside"] += f" {v['beside_at']}"
    return out


def section(res: Results, opts: dict) -> Section:
    s = Section("answer", "The answer: best format and design per workload")
    obj = WORDS[opts["objective"]]
    s.add(Text(f"Objective ([report] objective = \"{opts['objective']}\"): the least {obj} per training "
               f"step (per inference batch for inference) among the recipes {limit_text(opts)}. Accuracy vs "
               "fp32: the seed mean of each seed's difference to its fp32 run, in points (percent) for "
               "accuracy; the GPUs run the same recipe." + (_scope_text(opts) if res.gpus() else "")))
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
            vs_rows += [_versus_row(r, label, v) for v in versus(p["candidates"], r, gpus, opts.get("scope", DEFAULT_SCOPE))]
    if rows:
        s.add(Table(pd.DataFrame(rows), "The picks (per step or batch)", narrow=True))
    if vs_rows:
        s.add(Table(pd.DataFrame(vs_rows), "Against each GPU (same recipe)", narrow=True))
    untried = sorted(set(res.done("train")["workload"].dropna()) - {p["workload"] for p in ps})
    if untried:
        s.add(Text(f"Trained but not priced (no \"cost\" in run), so no design to pick: {', '.join(untried)}."))
    return s
