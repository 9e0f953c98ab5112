"""Tables for reading: per workload and phase, recipes (rows) x designs (columns) of the objective
(energy, time or energy x time per step), least first both ways, in engineering units, narrow
enough for the page; the long table with every number stays in summary.csv."""

from __future__ import annotations

import numpy as np
import pandas as pd

from asicsim._src.report.document import Table, Text
from asicsim._src.report.objective import PER, UNIT, WORDS
from asicsim._src.report.units import eng, points

#: Design columns shown at most (the GPUs among them); the rest is in summary.csv.
MAX_DESIGNS = 8

#: GPU columns kept at most, whatever their rank (they are what the others are compared with).
MAX_GPUS = 3


def _accuracy(q) -> str:
    status = q["status"]
    if status in ("ok", "over", "spread"):
        text = points(q["delta"]) if q["unit"] == "points" else f"{q['delta']:+.3g}"
        return text + {"over": " (over)", "spread": " (spread)"}.get(status, "")
    return {"diverged": "diverged", "no_fp32": "no fp32", "failed": "failed: no result"}.get(status, "–")


def _designs(g: pd.DataFrame) -> tuple[list[str], int]:
    """The design columns: the best-ranked non-GPU designs and up to :data:`MAX_GPUS` GPUs, in
    rank order (least objective first), of those with a number; and how many have one."""
    best = g.groupby("design")["objective"].min()
    best = best[np.isfinite(best.astype(float))]
    order = sorted(best.index, key=lambda d: (best[d], d))
    kind = g.groupby("design")["design_kind"].first()
    gpus = [d for d in order if kind.get(d) == "gpu"][:MAX_GPUS]
    others = [d for d in order if kind.get(d) != "gpu"][:MAX_DESIGNS - len(gpus)]
    keep = set(gpus) | set(others)
    return [d for d in order if d in keep], len(order)


def pivot(g: pd.DataFrame, opts: dict) -> list:
    """The blocks for one workload and phase (rows of :func:`~asicsim._src.report.objective.candidates`
    with ``finite=False``): the table, and a note when designs were left out."""
    first = g.iloc[0]
    designs, total = _designs(g)
    if not designs:
        return [Text(f"{first['workload']} ({PER[first['phase']]}): no design has a number for any recipe "
                     "(none can run these recipes' formats).")]
    recipes = g.groupby("recipe")["objective"].min()
    recipes = sorted(recipes.index, key=lambda r: (not np.isfinite(recipes[r]), recipes[r]
                                                  if np.isfinite(recipes[r]) else 0, r))
    unpriced = sorted(set(g["design"]) - set(g.loc[np.isfinite(g["objective"].astype(float)), "design"]))
    cell = g.drop_duplicates(["recipe", "design"]).set_index(["recipe", "design"])["objective"]
    units = set(g["unit"].dropna())
    head = f"vs fp32 ({units.pop() if len(units) == 1 else 'points; losses in their units'})"
    rows = []
    for r in recipes:
        q = g[g["recipe"] == r].iloc[0]
        rows.append({"recipe": r, head: _accuracy(q),
                     **{d: eng(cell.get((r, d), np.nan), UNIT[opts["objective"]]) for d in designs}})
    obj = WORDS[opts["objective"]]
    caption = f"{first['workload']}: {obj} per {PER[first['phase']]}, recipes x designs, least first"
    out: list = [Table(pd.DataFrame(rows), caption, csv="summary", narrow=True)]
    if total > len(designs):
        out.append(Text(f"Shown: {len(designs)} of {total} designs (those with the least {obj}, and the "
                        "GPUs); every one is in summary.csv."))
    if unpriced:
        out.append(Text(f"No number on {len(unpriced)} design(s) (they cannot run these recipes' formats): "
                        + (", ".join(unpriced[:MAX_DESIGNS]) + (" ..." if len(unpriced) > MAX_DESIGNS else ""))
                        + "."))
    return out


def blocks(cand: pd.DataFrame, opts: dict) -> list:
    """Every workload's and phase's table, train before infer."""
    out: list = []
    for _, g in cand.groupby(["workload", "phase"], sort=False):
        out += pivot(g, opts)
    return out
