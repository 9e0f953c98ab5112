"""What the mapping objective trades on the answer's picks (issue 30 item 5): each pick on a
systolic design (the best and the runner-up of each workload and phase), its workload priced again
for every mapping objective (:data:`asicsim._src.hw.objectives.OBJECTIVES`: ``balanced``, ``energy``,
``dram``, ``latency``), time and energy side by side, with a sentence where they differ by more than
:data:`MATTERS`.

The sweep prices every design for one objective (``balanced``, the record's ``objective``); this
section re-traces only the picks' workloads (one trace per workload, recipe and phase) and prices
them with :func:`asicsim._src.workloads.pricing.trace_costs`, the pricing ``asicsim trace --objective``
uses. The inputs come from the results directory's spec.toml, loaded again: the row of the record's
own objective must reproduce the record's time and energy, else the inputs changed since the sweep
and the pick's rows are left out, saying so (never a figure of other inputs in silence). A GPU's model
takes its fastest kernel whatever the objective, so it has no trade to show; ``latency`` puts both
sides of a ratio at their fastest.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE, OBJECTIVES
from asicsim._src.report.document import Section, Table, Text
from asicsim._src.report.load import Results
from asicsim._src.report.objective import PER
from asicsim._src.report.units import eng

#: Objectives whose time or energy differ by more than this share on a pick: the choice matters.
MATTERS = 0.03
#: How close the re-priced record objective must come to the record (the same inputs price the same).
SAME_INPUTS = 1e-6

COLUMNS = ["workload", "phase", "recipe", "design", "mapping", "recorded", "time_s", "energy_j", "dram_bytes",
           "time_x", "energy_x"]


def _spec(res: Results):
    """The sweep's spec loaded again: the results directory's copy (the last run's), else the spec
    file the sweep recorded as its source (files it names by a relative path sit beside it); (None,
    why) where neither loads. The figures are checked against the records all the same."""
    from asicsim._src.sweep.spec import SweepError, load_spec

    tried = [res.root / "spec.toml"]
    if res.spec.get("source") not in (None, "", "<table>"):
        tried.append(Path(str(res.spec["source"])))
    for path in tried:
        if path.is_file():
            try:
                return load_spec(path), ""
            except SweepError:  # a file it names moved or changed: the next, else said below
                continue
    return None, ("the sweep's spec does not resolve into its inputs again here (a file it names has moved or "
                  "changed since), so only the recorded objective's figures stand")


def _recorded(res: Results, row) -> str:
    """The mapping objective the record was priced for (its ``objective`` key; the default before it)."""
    r = res.done("cost")
    if "objective" not in r:
        return DEFAULT_OBJECTIVE
    m = r[(r["workload"] == row["workload"]) & (r["recipe"] == row["recipe"]) & (r["phase"] == row["phase"])
          & (r["design"] == row["design"])]["objective"].dropna()
    return str(m.iloc[0]) if len(m) and str(m.iloc[0]) in OBJECTIVES else DEFAULT_OBJECTIVE


def _picked(res: Results, opts: dict) -> list:
    """The answer's picks on systolic designs, each (workload, recipe, phase, design) once."""
    from asicsim._src.report.answer import picks

    out, seen = [], set()
    for p in picks(res, opts):
        for r in (p["best"], p["runner"]):
            key = None if r is None else (r["workload"], r["recipe"], r["phase"], r["design"])
            if key is None or key in seen or r["design_kind"] != "systolic":
                continue
            seen.add(key)
            out.append(r)
    return out


def _priced(trace, design, recipe) -> dict[str, dict]:
    from asicsim._src.system.busy import trace_totals
    from asicsim._src.workloads.pricing import trace_costs

    out = {}
    for o in OBJECTIVES:
        c = trace_costs(trace, design, recipe, objective=o)
        t = trace_totals(c)
        out[o] = {"time_s": t["time_s"], "energy_j": t["energy_j"],
                  "dram_bytes": float(pd.to_numeric(c["dram_bytes"], errors="coerce").sum(skipna=False))}
    return out


def _close(a, b) -> bool:
    return math.isclose(float(a), float(b), rel_tol=SAME_INPUTS)


def trade(res: Results, opts: dict) -> tuple[pd.DataFrame, list[str]]:
    """Rows (:data:`COLUMNS`) of each systolic pick priced per mapping objective (``mapping``;
    ``recorded``: the one its record was priced for): time, energy (``energy_j``, as the record's:
    board), DRAM bytes, and time and energy over the recorded objective's (``time_x``,
    ``energy_x``); and notes saying why a pick has no rows."""
    from asicsim._src.workloads.pricing import workload_trace

    picked = _picked(res, opts)
    if not picked:
        return pd.DataFrame(columns=COLUMNS), []
    spec, why = _spec(res)
    if spec is None:
        return pd.DataFrame(columns=COLUMNS), [f"Not priced per objective: {why}."]
    designs = dict(spec.designs)
    rows, notes, traces = [], [], {}
    for r in picked:
        label = f"{r['recipe']} on {r['design']} ({r['workload']}, {PER[r['phase']]})"
        design = designs.get(r["design"])
        found = [w["workload"] for w in spec.workloads if getattr(w["workload"], "name", None) == r["workload"]]
        if design is None or not found:
            notes.append(f"{label}: not priced per objective: the spec.toml loaded again has no such "
                         f"{'design' if design is None else 'workload'}.")
            continue
        mine = _recorded(res, r)
        for w in found:  # two workloads may share a name: the one that reproduces the record
            key = (id(w), r["recipe"], r["phase"])
            if key not in traces:
                traces[key] = workload_trace(w, spec.recipe(r["recipe"]), training=r["phase"] == "train")
            priced = _priced(traces[key], design, spec.recipe(r["recipe"]))
            if _close(priced[mine]["time_s"], r["time_s"]) and _close(priced[mine]["energy_j"], r["energy_j"]):
                break
        else:
            notes.append(f"{label}: not priced per objective: priced again for {mine}, it takes "
                         f"{eng(priced[mine]['time_s'], 's')} and {eng(priced[mine]['energy_j'], 'J')}, the record "
                         f"{eng(r['time_s'], 's')} and {eng(r['energy_j'], 'J')}: its inputs changed since the sweep.")
            continue
        base = priced[mine]
        for o in OBJECTIVES:
            p = priced[o]
            rows.append({"workload": r["workload"], "phase": r["phase"], "recipe": r["recipe"], "design": r["design"],
                         "mapping": o, "recorded": o == mine, **p, "time_x": p["time_s"] / base["time_s"],
                         "energy_x": p["energy_j"] / base["energy_j"]})
    return pd.DataFrame(rows, columns=COLUMNS), notes


def spread(g: pd.DataFrame) -> float:
    """The largest relative difference in time or energy among one pick's objectives."""
    return max(float(g[c].max() / g[c].min() - 1) for c in ("time_s", "energy_j"))


def change(x: float) -> str:
    """A ratio as a signed change: 1.006 -> "+0.6 %", 0.991 -> "-0.9 %", 1.0 -> "same"."""
    return "same" if x == 1 else f"{100 * (x - 1):+.1f} %"


def sentence(g: pd.DataFrame, mine: str) -> str:
    """Where the objectives differ by more than :data:`MATTERS`: what the fastest and the
    least-energy schedules cost, and which the answer uses."""
    r = g.iloc[0]
    fast = g.sort_values(["time_s", "energy_j"], kind="stable").iloc[0]
    low = g.sort_values(["energy_j", "time_s"], kind="stable").iloc[0]
    base = g[g["mapping"] == mine].iloc[0]
    text = (f"On {r['design']} ({r['workload']}, {PER[r['phase']]}, {r['recipe']}) the mapping objective matters: "
            f"the objectives differ by up to {100 * spread(g):.1f} % in time or energy. The fastest, "
            f"{fast['mapping']}: {eng(fast['time_s'], 's')} and {eng(fast['energy_j'], 'J')}; the least energy, "
            f"{low['mapping']}: {eng(low['energy_j'], 'J')} ({change(low['energy_j'] / fast['energy_j'])}) in "
            f"{eng(low['time_s'], 's')} ({change(low['time_s'] / fast['time_s'])} time); the answer uses {mine}")
    if mine not in (fast["mapping"], low["mapping"]):
        text += f" ({eng(base['time_s'], 's')}, {eng(base['energy_j'], 'J')})"
    return text + "."


def section(res: Results, opts: dict) -> Section | None:
    """The section: a table per pick and objective, a sentence where the choice matters; None
    where the answer picks no systolic design."""
    df, notes = trade(res, opts)
    if not len(df) and not notes:
        return None
    s = Section("trade", "The mapping objective: time against energy on the picks")
    s.add(Text("The sweep maps every systolic design's GEMMs for one objective (balanced: the least energy "
               "among schedules within 5 % of the fastest; asicsim._src.hw.objectives). Each pick of the answer on a "
               "systolic design, priced again for every objective: time and energy (board) per step (per batch "
               "for inference), and their change against the objective the answer uses. A GPU's model takes its fastest kernel "
               "whatever the objective, so latency puts both sides of a ratio at their fastest."))
    said = []
    for _, g in df.groupby(["workload", "phase", "recipe", "design"], sort=False):
        if spread(g) > MATTERS:
            said.append(sentence(g, str(g.loc[g["recorded"], "mapping"].iloc[0])))
    if len(df):
        s.add(Text(" ".join(said) if said else
                   f"The four objectives price every pick within {100 * MATTERS:g} % of each other in time and energy: "
                   "the choice does not matter here."))
        shown = pd.DataFrame({"workload": df["workload"], "per": df["phase"].map(PER), "recipe": df["recipe"],
                              "design": df["design"], "mapping objective": [m + (" (the answer's)" if r else "") for m, r in zip(df["mapping"], df["recorded"], strict=True)],
                              "time": [eng(v, "s") for v in df["time_s"]],
                              "energy": [eng(v, "J") for v in df["energy_j"]],
                              "DRAM": [eng(v, "B") for v in df["dram_bytes"]],
                              "time vs the answer's": [change(v) for v in df["time_x"]],
                              "energy vs the answer's": [change(v) for v in df["energy_x"]]})
        s.add(Table(shown, "Per mapping objective (same workload, recipe and design)", narrow=True))
    return s.add(*[Text(n) for n in notes])
