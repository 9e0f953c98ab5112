"""The training figures: quality vs energy (a colour per recipe, a marker per design, error bars
over seeds) and loss curves (the seed mean with a min-max band)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from asicsim._src.report.figures_base import (
    COLORS,
    MARKERS,
    STYLE,
    esc,
    fig,
    legend_outside,
    to_svg,
    wrap,
)
from asicsim._src.report.tables import lower_is_better

#: Designs drawn with their own marker in one Pareto plot; the rest of a large design space is
#: drawn as small grey dots (every point is in pareto.csv and summary.csv).
MAX_DESIGNS = 10


def _float(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def seed_spread(results: pd.DataFrame | None, workload: str, col: str, keys: list[str]) -> pd.DataFrame:
    """Per ``keys``, the min and max of ``col`` over the seeds (training points for ``value``, cost
    points for energy), and how many seeds: the error bars. Empty without results."""
    out = ["lo", "hi", "seeds"]
    if results is None or not len(results):
        return pd.DataFrame(columns=[*keys, *out])
    kind = "train" if col == "value" else "cost"
    r = results[(results["kind"] == kind) & (results["workload"] == workload)].copy()
    if kind == "cost":
        r = r[r["phase"] == "train"]
    r["_v"] = _float(r[col])
    r = r[np.isfinite(r["_v"])]
    if not len(r):
        return pd.DataFrame(columns=[*keys, *out])
    g = r.groupby(keys, sort=True)["_v"]
    return pd.DataFrame({"lo": g.min(), "hi": g.max(), "seeds": g.size()}).reset_index()


def _y_limits(ax, y: np.ndarray, lo: np.ndarray, hi: np.ndarray, metric: str) -> None:
    """A y-range that shows the differences in context: at least +-1 accuracy point (a one-sample
    difference must not fill the axis) or +-5 % of a loss, and at least twice the seed spread."""
    ok = np.isfinite(y)
    if not ok.any():
        return
    bottom, top = float(np.nanmin(np.fmin(lo, y)[ok])), float(np.nanmax(np.fmax(hi, y)[ok]))
    mid = (bottom + top) / 2
    spread = float(np.nanmax((hi - lo)[ok])) if np.isfinite(hi - lo).any() else 0.0
    if lower_is_better(metric):
        least = 0.05 * abs(mid)
    else:
        least = 0.01 * (100.0 if np.nanmax(np.abs(y[ok])) > 1.5 else 1.0)  # a fraction or a percentage
    half = max((top - bottom) / 2 * 1.15, least, spread)
    ax.set_ylim(mid - half, mid + half)


#: One line style per recipe, so curves that coincide stay told apart (the later is drawn over).
LINESTYLES = ("-", "--", "-.", ":")


def coinciding(names: list[str], points: list) -> dict[str, str]:
    """{name: the earlier name} for each name whose point (numbers, equal to 1e-9 relative) equals
    an earlier name's: what a plot would otherwise hide under the earlier one."""
    out, seen = {}, []
    for name, pt in zip(names, points, strict=True):
        v = np.asarray(pt, dtype=float)
        same = next((n for n, w in seen if w.shape == v.shape
                     and np.allclose(v, w, rtol=1e-9, atol=0.0, equal_nan=True)), None)
        if same is not None:
            out[name] = same
        else:
            seen.append((name, v))
    return out


def pareto(df: pd.DataFrame, workload: str, results: pd.DataFrame | None = None) -> str:
    """Quality vs energy per training step for one workload: a colour per recipe, a marker per
    design, the seed mean with min-max error bars over the seeds where ``results`` (the results
    table) is given, the Pareto front dashed."""
    d = df[df["workload"] == workload].copy()
    metric = str(d["metric"].iloc[0])
    d["energy_j"], d["value"] = _float(d["energy_j"]), _float(d["value"])
    q = seed_spread(results, workload, "value", ["recipe"])
    e = seed_spread(results, workload, "energy_j", ["recipe", "design"])
    d = d.merge(q.rename(columns={"lo": "q_lo", "hi": "q_hi", "seeds": "n"}), on="recipe", how="left")
    d = d.merge(e.drop(columns="seeds").rename(columns={"lo": "e_lo", "hi": "e_hi"}), on=["recipe", "design"],
                how="left")
    for c, base in (("q_lo", "value"), ("q_hi", "value"), ("e_lo", "energy_j"), ("e_hi", "energy_j")):
        d[c] = _float(d[c]) if c in d else np.nan
        d[c] = d[c].fillna(d[base])
    best = d.groupby("design")["energy_j"].min().sort_values(kind="stable")
    shown = list(best.index[:MAX_DESIGNS])
    recipes = sorted(set(d["recipe"].astype(str)))
    with plt.rc_context(STYLE):
        f, ax = fig(9, 4.4)
        rest = d[~d["design"].isin(shown)]
        if len(rest):
            ax.scatter(rest["energy_j"], rest["value"], s=6, color="0.6", alpha=0.5, lw=0, zorder=1,
                       rasterized=len(rest) > 500)  # one image, not thousands of SVG markers
        for row in d[d["design"].isin(shown)].itertuples():
            color = COLORS[recipes.index(str(row.recipe)) % 10]
            marker = MARKERS[shown.index(row.design) % len(MARKERS)]
            ax.errorbar(row.energy_j, row.value, yerr=[[row.value - row.q_lo], [row.q_hi - row.value]],
                        xerr=[[row.energy_j - row.e_lo], [row.e_hi - row.energy_j]], fmt=marker, color=color,
                        ms=7, mec="k", mew=0.5, capsize=2.5, elinewidth=1, alpha=0.9, zorder=3)
        drawn = d[d["design"].isin(shown)]
        hidden = coinciding([f"{r.recipe} on {r.design}" for r in drawn.itertuples()],
                            [(r.energy_j, r.value) for r in drawn.itertuples()])
        front = d[d["pareto"].astype(bool)].sort_values("energy_j")
        ax.plot(front["energy_j"], front["value"], "k--", lw=1, zorder=2)
        ax.set_xscale("log")
        _y_limits(ax, d["value"].to_numpy(), d["q_lo"].to_numpy(), d["q_hi"].to_numpy(), metric)
        seeds = int(d["n"].max()) if d["n"].notna().any() else 1
        ax.set_xlabel("energy per training step (J)")
        ax.set_ylabel(esc(metric) + (" (lower is better)" if lower_is_better(metric) else "")
                      + (f"\nmean of {seeds} seeds, bars: min-max" if seeds > 1 else ""))
        ax.set_title(esc(f"{workload}: {metric} vs energy per step"))
        head = Line2D([], [], ls="", marker="")
        handles = [head] + [Line2D([], [], color=COLORS[i % 10], marker="o", ls="", ms=7) for i in range(len(recipes))]
        labels = ["recipe (colour)", *(wrap(x) for x in recipes)]
        handles += [head] + [Line2D([], [], color="0.3", marker=MARKERS[i % len(MARKERS)], ls="", ms=7)
                             for i in range(len(shown))]
        labels += ["design (marker)" + (", least energy first" if len(rest) else ""), *(wrap(x) for x in shown)]
        if len(rest):
            handles.append(Line2D([], [], color="0.6", marker="o", ls="", ms=3))
            labels.append(f"{rest['design'].nunique()} other designs")
        handles.append(Line2D([], [], color="k", ls="--", lw=1))
        labels.append("Pareto front")
        for later, earlier in hidden.items():  # a point drawn exactly over another one: said, not hidden
            handles.append(head)
            labels.append(wrap(f"{later} coincides with {earlier} (same point)"))
        legend_outside(ax, handles=handles, labels=labels)
    return to_svg(f)


def curves(curves_df: pd.DataFrame, results: pd.DataFrame, workload: str) -> str:
    """Training and test loss vs step: per recipe the mean over its seeds, a band from the lowest
    to the highest seed, and an x where a seed's run diverged (its last finite value)."""
    c = curves_df[curves_df["workload"] == workload]
    r = results[(results["kind"] == "train") & (results["workload"] == workload)]
    with plt.rc_context(STYLE):
        f, axes = fig(11, 3.9, 1, 2)
        means = {rec: g.assign(_y=_float(g["train_loss"])).groupby("step")["_y"].mean()
                 for rec, g in c.groupby("recipe", sort=True)}
        same = coinciding(list(means), [np.concatenate([m.index.to_numpy(dtype=float), m.to_numpy()])
                                        for m in means.values()])
        for i, (rec, g) in enumerate(c.groupby("recipe", sort=True)):
            color, style = COLORS[i % 10], LINESTYLES[i % len(LINESTYLES)]
            runs = r[r["recipe"] == rec]
            diverged = set(runs.loc[runs["status"] == "diverged", "id"])
            n = g["id"].nunique()
            label = wrap(f"{rec} ({n} seed{'s' if n != 1 else ''}"
                         + (f", {len(diverged & set(g['id']))} diverged)" if diverged & set(g["id"]) else ")")
                         + (f"; coincides with {same[rec]}, line style tells them apart" if rec in same else ""))
            for ax, col in zip(axes, ("train_loss", "test_loss"), strict=True):
                v = g.assign(_y=_float(g[col]))
                v = v[np.isfinite(v["_y"]) & (v["_y"] > 0)]
                if not len(v):
                    continue
                by = v.groupby("step")["_y"]
                x = by.mean().index.to_numpy(dtype=float)
                ax.plot(x, by.mean().to_numpy(), color=color, lw=1.3, ls=style, label=label)
                if n > 1:
                    ax.fill_between(x, by.min().to_numpy(), by.max().to_numpy(), color=color, alpha=0.18, lw=0)
                for pid in diverged:
                    run = v[v["id"] == pid].sort_values("step")
                    if len(run):
                        ax.plot([run["step"].iloc[-1]], [run["_y"].iloc[-1]], "x", color=color, ms=9, mew=2)
        for ax, title in zip(axes, ("training loss", "test loss"), strict=True):
            ax.set_yscale("log")
            ax.set_xlabel("step")
            ax.set_title(esc(f"{workload}: {title}"))
        if axes[0].get_legend_handles_labels()[0] or axes[1].get_legend_handles_labels()[0]:
            src = axes[0] if axes[0].get_legend_handles_labels()[0] else axes[1]
            h, lab = src.get_legend_handles_labels()
            legend_outside(axes[1], "recipe: seed mean, band min-max", handles=h, labels=lab)
    return to_svg(f)
