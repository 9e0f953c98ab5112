"""The report's figures: matplotlib (Agg) drawn to SVG text, ready to inline in HTML.

Every function takes the report's tables and returns the SVG of one figure. The SVG is made
deterministic (fixed ids, no date) and self-contained: no XML prolog, no DOCTYPE, no metadata, no
namespace URLs (the HTML parser knows SVG), text kept as text (matplotlib escapes it).
"""

from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from asicsim.report.load import ENERGY_PARTS, text
from asicsim.report.tables import BAIDU_FLOPS_PER_W, lower_is_better

STYLE = {"svg.hashsalt": "asicsim-report", "svg.fonttype": "none",
         "font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "figure.dpi": 100,
         "font.family": "sans-serif"}
COLORS = plt.get_cmap("tab10").colors
#: Bars drawn at most in one energy figure (a large design space: the lowest-energy ones and every GPU).
MAX_BARS = 48
BOUND_MARKERS = {"compute": "o", "bandwidth": "s", "occupancy": "^", "power": "D"}


def to_svg(fig) -> str:
    """The figure as inline SVG text (and the figure closed)."""
    buf = io.StringIO()
    with plt.rc_context(STYLE):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return text.strip()


def _fig(w: float, h: float):
    with plt.rc_context(STYLE):
        return plt.subplots(figsize=(w, h), layout="constrained")


def _short(label, n: int = 48) -> str:
    """A name from a user file or a result, cut to ``n`` characters, its ``$`` escaped (matplotlib
    would read text between two as math)."""
    label = str(label)
    label = label if len(label) <= n else label[: n - 1] + "…"
    return label.replace("$", r"\$")


def pareto(df: pd.DataFrame, workload: str) -> str:
    """Quality vs energy per training step for one workload, the Pareto front highlighted."""
    d = df[df["workload"] == workload]
    metric = str(d["metric"].iloc[0])
    with plt.rc_context(STYLE):
        fig, ax = _fig(7, 4.2)
        for i, (rec, g) in enumerate(d.groupby("recipe", sort=True)):
            ax.scatter(g["energy_j"], g["value"], color=COLORS[i % 10], label=_short(rec), s=28, alpha=0.8)
        front = d[d["pareto"]].sort_values("energy_j")
        ax.plot(front["energy_j"], front["value"], "k--", lw=1, label="Pareto front")
        ax.scatter(front["energy_j"], front["value"], s=110, facecolors="none", edgecolors="k", lw=1.5)
        for row in front.itertuples():
            ax.annotate(_short(f"{row.design} / {row.recipe}", 40), (row.energy_j, row.value), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("energy per training step (J)")
        ax.set_ylabel(_short(metric) + (" (lower is better)" if lower_is_better(metric) else ""))
        ax.set_title(_short(f"{workload}: {metric} vs energy per step", 80))
        ax.legend(fontsize=7, loc="best")
    return to_svg(fig)


def curves(curves_df: pd.DataFrame, results: pd.DataFrame, workload: str) -> str:
    """Training and test loss vs step, one colour per recipe, a line per seed; an x marks where a
    run diverged."""
    c = curves_df[curves_df["workload"] == workload]
    r = results[(results["kind"] == "train") & (results["workload"] == workload)]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained", sharey=False)
        for i, (rec, g) in enumerate(c.groupby("recipe", sort=True)):
            color = COLORS[i % 10]
            for j, (pid, run) in enumerate(g.groupby("id", sort=True)):
                run = run.sort_values("step")
                info = r[r["id"] == pid]
                diverged = len(info) and str(info["status"].iloc[0]) == "failed"
                for ax, col in zip(axes, ("train_loss", "test_loss"), strict=True):
                    y = pd.to_numeric(run[col], errors="coerce").to_numpy(dtype=float)
                    ok = np.isfinite(y) & (y > 0)
                    x = run["step"].to_numpy(dtype=float)
                    label = _short(rec + (" (diverged)" if diverged else "")) if j == 0 else None
                    ax.plot(x[ok], y[ok], color=color, lw=1.2, label=label, alpha=0.9)
                    if diverged and ok.any():
                        step = info["diverged_step"].iloc[0]
                        at = float(step) if pd.notna(step) else x[ok][-1]
                        ax.plot([min(at, x[ok][-1])], [y[ok][-1]], "x", color=color, ms=9, mew=2)
        for ax, title in zip(axes, ("training loss", "test loss"), strict=True):
            ax.set_yscale("log")
            ax.set_xlabel("step")
            ax.set_title(_short(f"{workload}: {title}", 80))
        axes[0].legend(fontsize=7, loc="best")
    return to_svg(fig)


def numerics(df: pd.DataFrame, workload: str) -> str:
    """Underflow and overflow fraction per recipe and tensor role (size-weighted mean)."""
    d = df[df["workload"] == workload].copy()
    d["who"] = text(d["recipe"]) + " (" + text(d["kind"]) + ")"
    d["role"] = text(d["role"])
    who = sorted(set(d["who"]))
    roles = sorted(set(d["role"]))
    width = 0.8 / max(len(roles), 1)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.2 + 0.05 * len(who)), layout="constrained")
        for ax, col in zip(axes, ("underflow", "overflow"), strict=True):
            for k, role in enumerate(roles):
                g = d[d["role"] == role].set_index("who").reindex(who)
                ax.bar(np.arange(len(who)) + (k - (len(roles) - 1) / 2) * width, g[col].fillna(0) * 100,
                       width, color=COLORS[k % 10], label=_short(role))
            ax.set_xticks(np.arange(len(who)), [_short(w, 28) for w in who], rotation=30, ha="right",
                          fontsize=7)
            ax.set_yscale("symlog", linthresh=1e-4)
            top = float(np.nanmax(pd.to_numeric(d[col], errors="coerce").fillna(0))) * 100 if len(d) else 0.0
            ax.set_ylim(0, max(2 * top, 1e-2))
            ax.set_ylabel(f"{col} (% of values)")
            ax.set_title(_short(f"{workload}: {col} per tensor role", 80))
        axes[0].legend(fontsize=7, title="role", title_fontsize=7)
    return to_svg(fig)


def energy(df: pd.DataFrame, workload: str, phase: str) -> str:
    """Each design and recipe's energy per step (or batch) split by component (shares, the total
    written at the bar's end), beside the bytes moved per memory level."""
    d = df[(df["workload"] == workload) & (df["phase"] == phase)]
    if len(d) > MAX_BARS:  # a large design space: every GPU and the lowest-energy rest
        e = pd.to_numeric(d["energy_j"], errors="coerce").fillna(np.inf)
        keep = (d["design_kind"] == "gpu") | (e.rank(method="first") <= MAX_BARS)
        d = d[keep].head(MAX_BARS + int((d["design_kind"] == "gpu").sum()))
    labels = [_short(f"{r.design} · {r.recipe}", 56) for r in d.itertuples()]
    y = np.arange(len(d))
    total = pd.to_numeric(d["energy_j"], errors="coerce").to_numpy(dtype=float)
    with plt.rc_context(STYLE):
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 1.8 + 0.26 * len(d)), layout="constrained",
                                     sharey=True, width_ratios=(3, 2))
        parts = np.stack([pd.to_numeric(d[f"energy_{p}_j"], errors="coerce").fillna(0).to_numpy(dtype=float)
                          for p in ENERGY_PARTS])
        share = parts / np.where(parts.sum(0) > 0, parts.sum(0), 1.0)
        left = np.zeros(len(d))
        for k, part in enumerate(ENERGY_PARTS):
            if part == "other" and not parts[k].any():
                continue
            ax.barh(y, share[k] * 100, left=left, color=COLORS[k % 10], label=part)
            left += share[k] * 100
        for yi, e in zip(y, total, strict=True):
            ax.text(101, yi, f"{e:.3g} J", va="center", fontsize=7)
        ax.set_xlim(0, 118)
        ax.set_yticks(y, labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("% of the energy per " + ("training step" if phase == "train" else "inference batch")
                      + " (total at the right)")
        ax.set_title(_short(f"{workload} ({phase}): energy by component", 80))
        ax.legend(fontsize=7, ncols=len(ENERGY_PARTS), loc="lower left", bbox_to_anchor=(0, 1.06))
        h = 0.38
        bx.barh(y - h / 2, d["dram_bytes"].astype(float), h, color=COLORS[3], label="DRAM")
        bx.barh(y + h / 2, d["sram_bytes"].astype(float), h, color=COLORS[0], label="on-chip SRAM")
        if (d[["dram_bytes", "sram_bytes"]].astype(float) > 0).any().any():
            bx.set_xscale("log")
        bx.set_xlabel("bytes moved")
        bx.set_title("data movement per memory level")
        bx.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.06), ncols=2)
    return to_svg(fig)


def roofline(points: pd.DataFrame, roofs: pd.DataFrame, design: str) -> str:
    """One design's roofline (each roof it was priced under) with every kernel placed, a marker
    per bound and a colour per source."""
    p = points[points["design"] == design]
    rf = roofs[roofs["design"] == design]
    with plt.rc_context(STYLE):
        fig, ax = _fig(10, 4.4)
        xs = p["intensity"].astype(float)
        lo = float(xs.min()) / 2 if len(p) else 0.1
        hi = float(xs.max()) * 2 if len(p) else 1e4
        for roof in rf.itertuples():
            lo, hi = min(lo, roof.ridge_flops_per_byte / 20), max(hi, roof.ridge_flops_per_byte * 20)
        grid = np.geomspace(max(lo, 1e-3), hi, 200)
        for k, roof in enumerate(rf.itertuples()):
            ax.plot(grid, np.minimum(roof.peak_ops_per_s, grid * roof.dram_bytes_per_s), color="k",
                    lw=1.6 - 0.4 * min(k, 2), ls=("-", "--", ":")[k % 3],
                    label=_short(f"roof {roof.peak_ops_per_s / 1e12:.3g} TFLOP/s, "
                                 f"{roof.dram_bytes_per_s / 1e9:.3g} GB/s ({roof.priced_as})", 70))
        for i, (src, g) in enumerate(p.groupby("source", sort=True)):
            for bound, b in g.groupby("bound", sort=True):
                ax.scatter(b["intensity"], b["achieved"], s=16, alpha=0.7, color=COLORS[i % 10],
                           marker=BOUND_MARKERS.get(str(bound), "D"), label=_short(f"{src} · {bound}-bound", 70))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (flop per DRAM byte)")
        ax.set_ylabel("achieved flop/s")
        ax.set_title(_short(f"roofline: {design}", 80))
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return to_svg(fig)


def deepbench(df: pd.DataFrame) -> str:
    """Geomean TFLOP/s per design on each DeepBench suite."""
    d = df.copy()
    d["suite_p"] = text(d["suite"]) + " " + text(d["precision"], "default")
    d["design"] = text(d["design"])
    suites = sorted(set(d["suite_p"]))
    designs = sorted(set(d["design"]))
    h = 0.8 / max(len(suites), 1)
    with plt.rc_context(STYLE):
        fig, ax = _fig(8, 1.4 + 0.3 * len(designs) * max(1, len(suites) / 2))
        for k, s in enumerate(suites):
            g = d[d["suite_p"] == s].set_index("design").reindex(designs)
            ax.barh(np.arange(len(designs)) + (k - (len(suites) - 1) / 2) * h, g["geomean_tflops"].fillna(0),
                    h, color=COLORS[k % 10], label=_short(s))
        ax.set_yticks(np.arange(len(designs)), [_short(x, 56) for x in designs], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("geomean TFLOP/s over the suite's kernels")
        ax.set_title("DeepBench: speed per design")
        ax.legend(fontsize=7, loc="lower right")
    return to_svg(fig)


def baidu(df: pd.DataFrame) -> str:
    """Peak and best achieved flops per watt of each design as a fraction of Baidu's mark."""
    d = df.reset_index(drop=True)
    y = np.arange(len(d))
    h = 0.38
    with plt.rc_context(STYLE):
        fig, ax = _fig(8, 1.4 + 0.3 * len(d))
        ax.barh(y - h / 2, d["peak_fraction_of_mark"].fillna(0), h, color=COLORS[0], label="peak (TDP)")
        ax.barh(y + h / 2, d["achieved_fraction_of_mark"].fillna(0), h, color=COLORS[1],
                label="best achieved on the sweep")
        ax.axvline(1.0, color="r", lw=1.5, label=f"Baidu: 10 PFLOP/s in 300 W ({BAIDU_FLOPS_PER_W / 1e12:.1f} "
                                                 "TFLOP/s/W)")
        ax.set_yticks(y, [_short(x, 56) for x in d["design"]], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("flop/s per watt as a fraction of the mark")
        ax.set_title("distance to 10 PFLOP/s in 300 W")
        ax.legend(fontsize=7, loc="lower right")
    return to_svg(fig)
