"""What a pick costs in accuracy, said in words for the answer (:mod:`asicsim._src.report.answer`):
the accuracy limit, a recipe's difference to fp32 with its seed spread, and whether a difference is
told from seed noise (:mod:`asicsim._src.report.objective` computes the figures)."""

from __future__ import annotations

from asicsim._src.report.tables import is_fp32
from asicsim._src.report.units import points


def limit_text(opts: dict) -> str:
    return (f"within {opts['max_accuracy_drop']:g} accuracy points of fp32 on every seed (losses: within "
            f"{opts['max_loss_increase']:g} of fp32's) with no seed diverged")


def within_spread(row) -> bool:
    """Whether a recipe's accuracy difference to fp32 is within its seed spread: two or more seeds,
    some no worse than fp32 and some no better (the difference is then not told from seed noise)."""
    n = int(row["seeds"]) if row["seeds"] == row["seeds"] else 0
    return n >= 2 and float(row["delta_min"]) <= 0 <= float(row["delta_max"])


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
        if within_spread(row):  # not told from seed noise: neither a win nor a loss
            what = "points" if row["unit"] == "points" else row["unit"]
            return (f"within seed spread ({spread}{tail})" if short
                    else f"an accuracy within the seed spread of fp32: {spread.replace(' over', f' {what} over')}{tail}")
        if status == "spread":
            return (f"{value} ({spread}, the limit within it{tail})" if short
                    else f"{value} {unit} vs fp32 ({spread}{tail}; the limit lies within this seed spread)")
    return f"{value} ({spread}{tail})" if short else f"{value} {unit} vs fp32 ({spread}{tail})"


def overlap(a, b) -> bool:
    """Whether two recipes' seed ranges of the accuracy difference overlap (2+ seeds each, same
    metric): the difference between them is then not told from seed noise."""
    if a["unit"] != b["unit"] or not all(r["seeds"] == r["seeds"] and int(r["seeds"]) >= 2 for r in (a, b)):
        return False
    lo, hi = max(float(a["delta_min"]), float(b["delta_min"])), min(float(a["delta_max"]), float(b["delta_max"]))
    return lo <= hi
