"""The report's tables, computed from a sweep's results (pandas in, pandas out, no formatting).

Each function takes a :class:`~asicsim._src.report.load.Results` and returns one DataFrame, empty
(with its columns) when the sweep has no data for it. Units are in the column names.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from asicsim._src.report.load import ENERGY_PARTS, Results, text

# one list of lower-is-better metrics, the workloads' (test_cer, val_loss, ...)
from asicsim._src.workloads.tasks import LOWER_IS_BETTER as LOWER_IS_BETTER
from asicsim._src.workloads.tasks import lower_is_better

#: Baidu's mark for a training accelerator: 10 PFLOP/s in 300 W (flop/s per watt = flop per joule).
BAIDU_FLOPS_PER_W = 10e15 / 300


def _nanmean(s: pd.Series) -> float:
    v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if len(v) else float("nan")


def is_fp32(recipe) -> bool:
    """Whether a recipe label is the fp32 reference (alone, or one of the spec entries of the same
    content that one point stands for: ``fp32 = my_fp32.toml``)."""
    return isinstance(recipe, str) and "fp32" in recipe.split(" = ")


def quality(res: Results) -> pd.DataFrame:
    """Accuracy (or loss) per (workload, recipe, phase): the seed mean of the finished and
    diverged runs' final metric, and its delta vs fp32: the fp32 training recipe for training,
    the fp32 model the quantized one was made from (``fp32_value``) for inference. ``runs``: the
    runs with a result (done or diverged); ``failed``: those without one (an error, a timeout, a
    lost worker), left out of every figure here."""
    cols = ["workload", "recipe", "phase", "metric", "value", "fp32_value", "delta_vs_fp32", "runs", "diverged",
            "failed"]
    r = res.results
    rows = []
    for kind in ("train", "infer"):
        runs = r[r["kind"] == kind]
        ran = runs[runs["status"] != "failed"]
        for (w, rec), g in runs.groupby(["workload", "recipe"], sort=True):
            ok = g[g["status"] != "failed"]
            if kind == "train":
                ref = ran[(ran["workload"] == w) & ran["recipe"].map(is_fp32)]
                fp32 = _nanmean(ref["value"]) if len(ref) else float("nan")
            else:
                fp32 = _nanmean(ok["fp32_value"])
            rows.append({"workload": w, "recipe": rec, "phase": kind, "metric": g["metric"].dropna().iloc[0]
                         if g["metric"].notna().any() else "", "value": _nanmean(ok["value"]), "fp32_value": fp32,
                         "runs": len(ok), "diverged": int((g["status"] == "diverged").sum()),
                         "failed": int((g["status"] == "failed").sum())})
    out = pd.DataFrame(rows, columns=cols)
    out["delta_vs_fp32"] = out["value"] - out["fp32_value"]
    return out


def _gpu_ratios(df: pd.DataFrame, gpus: list[str], keys: list[str]) -> pd.DataFrame:
    """Add speedup_vs_G (G's time / this time), energy_ratio_vs_G (this total energy / G's) and
    dynamic_energy_ratio_vs_G (the same without static power) for each GPU design G, matched on
    ``keys`` (same workload, recipe, phase or suite)."""
    df = df.copy()
    for g in gpus:
        ref = df[df["design"] == g][[*keys, "time_s", "energy_j", "energy_dynamic_j"]].rename(
            columns={"time_s": "_t", "energy_j": "_e", "energy_dynamic_j": "_d"}).drop_duplicates(keys)
        m = df[keys].merge(ref, on=keys, how="left")
        df[f"speedup_vs_{g}"] = m["_t"].to_numpy() / df["time_s"].to_numpy()
        df[f"energy_ratio_vs_{g}"] = df["energy_j"].to_numpy() / m["_e"].to_numpy()
        df[f"dynamic_energy_ratio_vs_{g}"] = _float(df["energy_dynamic_j"]) / _float(m["_d"])
    return df


def _float(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def static_shares(df: pd.DataFrame, gpus: list[str], keys: list[str]) -> dict[str, np.ndarray]:
    """Per GPU design G, the static share of G's energy (energy_static_j / energy_j) on each of
    its rows that another design is compared against (same ``keys``): what energy_ratio_vs_G
    divides by. GPUs without such a row are left out."""
    out = {}
    for g in gpus:
        mine = df[df["design"] == g].drop_duplicates(keys)
        others = df[(df["design"] != g) & np.isfinite(_float(df["energy_j"]))][keys].drop_duplicates()
        compared = mine.merge(others, on=keys, how="inner")
        share = _float(compared["energy_static_j"]) / _float(compared["energy_j"])
        share = share[np.isfinite(share)]
        if len(share):
            out[g] = share
    return out


def summary(res: Results) -> pd.DataFrame:
    """One row per (workload, recipe, phase, design): quality and delta vs fp32, time and energy
    (total, dynamic, static) per training step (phase train) or inference batch (phase infer),
    DRAM bytes, GFLOP/s/W and the ratios against every GPU design of the sweep under the same
    recipe. Workloads trained or evaluated but not priced get one row without a design."""
    q = quality(res)
    c = res.done("cost")
    cost = c[["workload", "recipe", "phase", "design", "design_kind", "time_s", "energy_j", "energy_dynamic_j",
              "energy_static_j", "dram_bytes", "flops_per_j"]].copy()
    cost["gflops_per_w"] = pd.to_numeric(cost.pop("flops_per_j"), errors="coerce") / 1e9
    cost = _gpu_ratios(cost, res.gpus(), ["workload", "recipe", "phase"])
    out = q.merge(cost, on=["workload", "recipe", "phase"], how="outer")
    out = out.drop(columns=["fp32_value"])
    out["_train_first"] = out["phase"] != "train"
    out = out.sort_values(["workload", "_train_first", "recipe", "design"], kind="stable", na_position="first")
    return out.drop(columns=["_train_first"]).reset_index(drop=True)


def pareto(res: Results) -> pd.DataFrame:
    """Accuracy vs energy per training step for every (workload, recipe, design) priced and
    trained; ``pareto`` marks the points no other point beats on both (less energy and better
    quality) within the workload."""
    s = summary(res)
    s = s[(s["phase"] == "train") & s["design"].notna() & np.isfinite(s["value"].astype(float))
          & np.isfinite(s["energy_j"].astype(float))]
    s = s[["workload", "recipe", "design", "metric", "value", "energy_j"]].reset_index(drop=True)
    flags = []
    for row in s.itertuples():
        same = s[s["workload"] == row.workload]
        sign = -1.0 if lower_is_better(row.metric) else 1.0
        better_q = sign * same["value"] >= sign * row.value
        better_e = same["energy_j"] <= row.energy_j
        strictly = (sign * same["value"] > sign * row.value) | (same["energy_j"] < row.energy_j)
        flags.append(not bool((better_q & better_e & strictly).any()))
    s["pareto"] = pd.Series(flags, dtype=bool)
    return s


def numerics(res: Results) -> pd.DataFrame:
    """Underflow / overflow / non-finite / zero fractions per (kind, workload, recipe, tensor
    role), averaged over tensors and seeds weighted by tensor size; ``max_*`` the worst tensor."""
    n = res.numerics
    cols = ["kind", "workload", "recipe", "role", "tensors", "underflow", "overflow", "nonfinite", "zero",
            "max_underflow", "max_overflow"]
    if not len(n):
        return pd.DataFrame(columns=cols)
    n = n.copy()
    size = pd.to_numeric(n["size"], errors="coerce").fillna(1.0).astype(float)
    rows = []
    for key, g in n.groupby(["kind", "workload", "recipe", "role"], sort=True):
        w = size.loc[g.index].to_numpy()
        row = dict(zip(["kind", "workload", "recipe", "role"], key, strict=True))
        row["tensors"] = int(g["tensor"].nunique())
        for k in ("underflow", "overflow", "nonfinite", "zero"):
            v = pd.to_numeric(g[k], errors="coerce").to_numpy(dtype=float)
            ok = np.isfinite(v)
            row[k] = float((v[ok] * w[ok]).sum() / w[ok].sum()) if ok.any() and w[ok].sum() else float("nan")
        row["max_underflow"] = float(pd.to_numeric(g["underflow"], errors="coerce").max())
        row["max_overflow"] = float(pd.to_numeric(g["overflow"], errors="coerce").max())
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def energy(res: Results) -> pd.DataFrame:
    """Energy per component and bytes per memory level of every priced (workload, recipe, phase,
    design): the energy breakdown and the data movement."""
    c = res.done("cost")
    parts = [f"energy_{p}_j" for p in ENERGY_PARTS]
    cols = ["workload", "phase", "recipe", "design", "design_kind", "energy_j", *parts, "dram_bytes", "sram_bytes"]
    return c[cols].sort_values(["workload", "phase", "recipe", "design"], kind="stable").reset_index(drop=True)


def roofline_points(res: Results) -> pd.DataFrame:
    """Every priced kernel placed on its design's roofline: ``intensity`` (flops per DRAM byte)
    and ``achieved`` (flop/s). Op-trace rows (workloads) and DeepBench rows; rows without MACs,
    time or DRAM traffic (nothing to place) are left out."""
    cols = ["design", "source", "label", "bound", "intensity", "achieved"]
    o = res.ops
    o = o[pd.to_numeric(o["macs"], errors="coerce").fillna(0) > 0]
    flops = 2.0 * o["macs"].astype(float)
    ops = pd.DataFrame({"design": o["design"], "source": "workload " + text(o["workload"]),
                        "label": text(o["recipe"]) + " " + text(o["phase"]) + " " + text(o["role"]),
                        "bound": o["bound"], "intensity": flops / o["dram_bytes"].astype(float),
                        "achieved": flops / o["time_s"].astype(float)})
    k = res.kernels
    tflops = pd.to_numeric(k["tflops"], errors="coerce").astype(float)
    kflops = tflops * 1e12 * pd.to_numeric(k["time_us"], errors="coerce").astype(float) * 1e-6
    ker = pd.DataFrame({"design": k["design"], "source": "DeepBench " + text(k["suite"]),
                        "label": text(k["precision"], "default"), "bound": k["bound"],
                        "intensity": kflops / k["dram_bytes"].astype(float), "achieved": tflops * 1e12})
    out = pd.concat([d for d in (ops, ker) if len(d)], ignore_index=True) if len(ops) or len(ker) else \
        pd.DataFrame(columns=cols)
    ok = np.isfinite(out["intensity"].astype(float)) & np.isfinite(out["achieved"].astype(float)) \
        & (out["intensity"].astype(float) > 0) & (out["achieved"].astype(float) > 0)
    return out[ok][cols].reset_index(drop=True)


def roofs(res: Results) -> pd.DataFrame:
    """Each design's roofs: the distinct (peak ops/s, DRAM bytes/s) its points were priced with
    (a GPU's peak depends on the precision), and where they come from."""
    r = res.results
    r = r[r["kind"].isin(["cost", "kernels"]) & r["peak_ops_per_s"].notna()]
    src = np.where(r["kind"] == "cost", text(r["recipe"]), text(r["precision"], "default"))
    r = r.assign(source=src)
    rows = []
    for (d, peak, bw), g in r.groupby(["design", "peak_ops_per_s", "dram_bytes_per_s"], sort=True):
        rows.append({"design": d, "design_kind": g["design_kind"].iloc[0], "peak_ops_per_s": peak,
                     "dram_bytes_per_s": bw, "ridge_flops_per_byte": peak / bw if bw else float("nan"),
                     "priced_as": ", ".join(sorted(set(g["source"])))})
    return pd.DataFrame(rows, columns=["design", "design_kind", "peak_ops_per_s", "dram_bytes_per_s",
                                       "ridge_flops_per_byte", "priced_as"])


def deepbench(res: Results) -> pd.DataFrame:
    """DeepBench suite totals per (suite, precision, design): total time, geomean TFLOP/s,
    energy (total, dynamic, static), GFLOP/s/W, and the ratios against every GPU design on the same
    suite and precision."""
    k = res.done("kernels").copy()
    cols = ["suite", "precision", "design", "design_kind", "kernels", "time_s", "geomean_tflops", "energy_j",
            "energy_dynamic_j", "energy_static_j", "gflops_per_w"]
    if not len(k):
        return pd.DataFrame(columns=cols)
    k["gflops_per_w"] = pd.to_numeric(k["flops_per_j"], errors="coerce") / 1e9
    k = k[cols]
    k = _gpu_ratios(k, res.gpus(), ["suite", "precision"])
    return k.sort_values(["suite", "precision", "design"], kind="stable").reset_index(drop=True)


def baidu(res: Results) -> pd.DataFrame:
    """How far each design is from Baidu's 10 PFLOP/s in 300 W (33.3 TFLOP/s per W, a board
    figure): its peak flops per board watt (``peak_flops_per_w_board``: a GPU's peak over its TDP,
    an accelerator's array at full rate with its board's idle power; records without it: peak over
    TDP where the TDP is known) and the best flops per joule (board energy) it achieved on the
    sweep's workloads and kernels, both as a fraction of the mark."""
    r = res.results
    r = r[r["kind"].isin(["cost", "kernels"]) & (r["status"] == "done")]
    rows = []
    for d, g in r.groupby("design", sort=True):
        peak = float(g["peak_ops_per_s"].max())
        power = float(g["power_w"].dropna().iloc[0]) if g["power_w"].notna().any() else float("nan")
        fpj = pd.to_numeric(g["flops_per_j"], errors="coerce")
        best = g.loc[fpj.idxmax()] if fpj.notna().any() else None
        where = "" if best is None else (f"{best['workload']} {best['recipe']} {best['phase']}"
                                         if best["kind"] == "cost" else f"{best['suite']} {best['precision']}")
        quoted = pd.to_numeric(g["peak_flops_per_w_board"], errors="coerce").max()
        peak_w = float(quoted) if pd.notna(quoted) else (peak / power if power > 0 else float("nan"))
        achieved = float(fpj.max()) if best is not None else float("nan")
        rows.append({"design": d, "design_kind": g["design_kind"].iloc[0], "power_w": power,
                     "peak_tflops": peak / 1e12, "peak_tflops_per_w": peak_w / 1e12,
                     "peak_fraction_of_mark": peak_w / BAIDU_FLOPS_PER_W,
                     "best_achieved_gflops_per_w": achieved / 1e9,
                     "achieved_fraction_of_mark": achieved / BAIDU_FLOPS_PER_W, "best_on": where})
    return pd.DataFrame(rows, columns=["design", "design_kind", "power_w", "peak_tflops", "peak_tflops_per_w",
                                       "peak_fraction_of_mark", "best_achieved_gflops_per_w",
                                       "achieved_fraction_of_mark", "best_on"])


def failed(res: Results) -> pd.DataFrame:
    """The failed points (no result: an error, a timeout, a lost worker, out of memory; a diverged
    run is a result and is not here): id, kind, labels (one string) and the first line of the reason."""
    r = res.results
    f = r[r["status"] == "failed"]
    label_cols = ("workload", "recipe", "seed", "phase", "suite", "precision", "design")

    def labels(row) -> str:
        return ", ".join(f"{c}={_plain(row[c])}" for c in label_cols if pd.notna(row[c]))

    return pd.DataFrame({"id": f["id"], "kind": f["kind"], "labels": [labels(x) for _, x in f.iterrows()],
                         "reason": _first_lines(f["reason"])},
                        columns=["id", "kind", "labels", "reason"]).reset_index(drop=True)


def diverged(res: Results) -> pd.DataFrame:
    """The runs that diverged (a numerical result): workload, recipe, phase, seed, the step and
    cause (training) and the reason."""
    r = res.results
    d = r[r["kind"].isin(["train", "infer"]) & (r["status"] == "diverged")]
    d = d.assign(phase=d["kind"], reason=_first_lines(d["reason"]))
    cols = ["workload", "recipe", "phase", "seed", "diverged_step", "diverged_cause", "reason"]
    return d[cols].sort_values(["workload", "phase", "recipe", "seed"], kind="stable").reset_index(drop=True)


def _first_lines(reasons: pd.Series) -> list[str]:
    return [str(x).splitlines()[0] if str(x) else "" for x in reasons.fillna("")]


def _plain(v):
    return int(v) if isinstance(v, float) and v.is_integer() else v


def all_tables(res: Results) -> dict[str, pd.DataFrame]:
    """Every table of the report, by the name its CSV file gets."""
    return {"summary": summary(res), "pareto": pareto(res), "numerics": numerics(res), "energy": energy(res),
            "roofs": roofs(res), "roofline_points": roofline_points(res), "deepbench": deepbench(res),
            "baidu": baidu(res), "failed": failed(res)}
