"""What the report's answer ranks by: the ``[report]`` settings the sweep recorded, each recipe's
accuracy cost against fp32 over seeds, and every priced (recipe, design) with its objective value.

Accuracy cost: for an accuracy metric (a fraction, higher is better) in points, 100 x (value -
fp32): 0.5 points is 0.005 of the fraction; for a loss metric (lower is better) in the metric's
own units, value - fp32. The fp32 reference of a training run is the fp32 recipe's run of the
same seed (the seed mean where that seed is missing); of an inference run, the fp32 model it was
quantized from (``fp32_value``). A recipe qualifies when the cost of every seed is within the
limit (``max_accuracy_drop`` points, ``max_loss_increase`` for losses) and no seed diverged: a pick
never rests on seed noise. The demo's 0.5-point limit is smaller than its own seed spread (issue 30:
fp16_mixed ranges from -1.00 to +1.30 points over 2 seeds), so a seed-mean rule would let a lucky seed
decide; the limit is what a user can lose, so it is not widened to fit the noise. A recipe whose
seeds fall on both sides of the limit has status ``spread``: not picked, and said so with its spread.
A run that failed (an error, a timeout, a lost worker, out of memory) has no result: it is left
out of the verdict, and a recipe whose runs all failed has none (status ``failed``).
"""

from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd

from asicsim._src.report.load import SCOPE_COLUMNS, Results
from asicsim._src.report.tables import is_fp32, lower_is_better
from asicsim._src.sweep.errors import SweepError
from asicsim._src.sweep.report_options import ReportOptions, report_options

#: The column each objective minimises, its unit, and how a sentence says it.
COLUMN = {"energy": "energy_j", "time": "time_s", "edp": "edp_js"}
UNIT = {"energy": "J", "time": "s", "edp": "J·s"}
WORDS = {"energy": "energy", "time": "time", "edp": "energy x time"}

#: How a phase's cost unit is said.
PER = {"train": "training step", "infer": "inference batch"}

QUALITY_COLUMNS = ["workload", "recipe", "phase", "metric", "unit", "delta", "delta_min", "delta_max", "seeds",
                   "diverged", "failed", "status"]


def options(res: Results, overrides: dict | None = None) -> ReportOptions:
    """The ``[report]`` settings (:class:`~asicsim._src.sweep.report_options.ReportOptions`): the
    sweep's recorded ones (spec.json), else its spec.toml's, else the defaults; ``overrides`` (from
    the command line) on top. A bad value raises
    :class:`~asicsim.SweepError` naming the file, field, value and what is allowed."""
    recorded, where = None, "report"
    if "report" in res.spec:
        recorded, where = res.spec["report"], f"{res.root / 'spec.json'}: report"
    elif res.spec_text:
        try:
            recorded = tomllib.loads(res.spec_text).get("report")
        except tomllib.TOMLDecodeError:
            recorded = None
        where = f"{res.root / 'spec.toml'}: report"
    opts, problems = report_options(recorded, where)
    if overrides:
        given = {k: v for k, v in overrides.items() if v is not None}
        opts, more = report_options({**opts, **given}, "report option")
        problems += more
    if problems:
        raise SweepError("; ".join(problems))
    return opts


def _accuracy(metric) -> bool:
    return not lower_is_better(metric)


def seed_deltas(res: Results) -> pd.DataFrame:
    """One row per training or inference run: workload, recipe, phase, seed, metric, value, its
    fp32 reference, ``delta`` (value - reference, x100 for accuracy metrics: points),
    ``diverged`` (a numerical verdict) and ``failed`` (no result: an error, a timeout, a lost worker)."""
    r = res.results
    cols = ["workload", "recipe", "phase", "seed", "metric", "value", "reference", "delta", "diverged", "failed"]
    runs = r[r["kind"].isin(["train", "infer"])].copy()
    if not len(runs):
        return pd.DataFrame(columns=cols)
    runs["phase"] = runs["kind"]
    runs["value"] = pd.to_numeric(runs["value"], errors="coerce")
    runs["reference"] = pd.to_numeric(runs["fp32_value"], errors="coerce")
    train = runs["kind"] == "train"
    fp32 = runs[train & runs["recipe"].map(is_fp32) & (runs["status"] != "failed")]
    by_seed = fp32.groupby(["workload", "seed"])["value"].mean()
    by_workload = fp32.groupby("workload")["value"].mean()
    ref = [by_seed.get((w, s), by_workload.get(w, np.nan)) for w, s in zip(runs["workload"], runs["seed"],
                                                                             strict=True)]
    runs.loc[train, "reference"] = np.asarray(ref, dtype=float)[train.to_numpy()]
    scale = np.where([_accuracy(m) for m in runs["metric"]], 100.0, 1.0)
    runs["delta"] = (runs["value"] - runs["reference"]) * scale
    runs["diverged"] = runs["status"] == "diverged"
    runs["failed"] = runs["status"] == "failed"
    return runs[cols].reset_index(drop=True)


def quality(res: Results, opts: dict) -> pd.DataFrame:
    """Per (workload, recipe, phase): the seed mean, min and max of the accuracy delta, ``seeds``
    (the runs with a result), the ``diverged`` ones, the ``failed`` ones (no result, left out), and
    ``status``: ok (every seed within the limit), over (every seed beyond it), spread (the limit
    lies within the seed spread: some seeds within, some beyond; not picked), diverged, no_fp32
    (no fp32 reference to compare with), or failed (every run failed: no verdict)."""
    d = seed_deltas(res)
    rows = []
    for (w, rec, ph), g in d.groupby(["workload", "recipe", "phase"], sort=True):
        metric = g["metric"].dropna().iloc[0] if g["metric"].notna().any() else ""
        ran = g[~g["failed"]]
        ok = ran[~ran["diverged"] & np.isfinite(ran["delta"].astype(float))]
        acc = _accuracy(metric)
        delta = float(ok["delta"].mean()) if len(ok) else np.nan
        losses = -ok["delta"].astype(float) if acc else ok["delta"].astype(float)
        limit = opts["max_accuracy_drop"] if acc else opts["max_loss_increase"]
        if not len(ran):
            status = "failed"
        elif ran["diverged"].any():
            status = "diverged"
        elif not len(ok):
            status = "no_fp32"
        else:
            within = losses <= limit + 1e-9
            status = "ok" if within.all() else "over" if not within.any() else "spread"
        rows.append({"workload": w, "recipe": rec, "phase": ph, "metric": metric,
                     "unit": "points" if acc else str(metric), "delta": delta,
                     "delta_min": float(ok["delta"].min()) if len(ok) else np.nan,
                     "delta_max": float(ok["delta"].max()) if len(ok) else np.nan,
                     "seeds": len(ran), "diverged": int(ran["diverged"].sum()), "failed": int(g["failed"].sum()),
                     "status": status})
    return pd.DataFrame(rows, columns=QUALITY_COLUMNS)


def candidates(res: Results, opts: dict, finite: bool = True) -> pd.DataFrame:
    """Every finished cost point (with a finite objective value, unless not ``finite``): its labels, time, energy (total,
    dynamic), DRAM bytes, ``objective`` (the value ranked by) and its recipe's quality; a recipe
    never trained or evaluated has status ``unmeasured``. Sorted by workload, phase (train
    first) and objective."""
    c = res.done("cost").copy()
    for k in ("time_s", "energy_j", "energy_dynamic_j", "dram_bytes", *SCOPE_COLUMNS):
        c[k] = pd.to_numeric(c[k], errors="coerce")
    c["edp_js"] = c["energy_j"] * c["time_s"]
    c["objective"] = c[COLUMN[opts["objective"]]]
    if finite:
        c = c[np.isfinite(c["objective"].astype(float))]
    keep = ["workload", "recipe", "phase", "design", "design_kind", "time_s", "energy_j", "energy_dynamic_j",
            "dram_bytes", "edp_js", "objective", *SCOPE_COLUMNS, "busy_gpu"]
    out = c[keep].merge(quality(res, opts), on=["workload", "recipe", "phase"], how="left")
    out["status"] = out["status"].fillna("unmeasured")
    out["_phase"] = out["phase"] != "train"
    out = out.sort_values(["workload", "_phase", "objective", "recipe", "design"], kind="stable")
    return out.drop(columns="_phase").reset_index(drop=True)


QUALIFY = ("ok", "unmeasured", "no_fp32")


def qualifies(df: pd.DataFrame) -> pd.Series:
    """Rows a pick may come from: within the accuracy limit, or with no accuracy to hold it to."""
    return df["status"].isin(QUALIFY)
