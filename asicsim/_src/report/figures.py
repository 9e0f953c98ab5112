"""The report's figures: matplotlib (Agg) drawn to SVG text, ready to inline in HTML.

Every function takes the report's tables and returns the SVG of one figure (see
:mod:`~asicsim._src.report.figures_base` for what they share). A panel without data is left out and a
sentence says so; a figure with nothing to draw is that sentence alone. The training figures are
in :mod:`~asicsim._src.report.figures_train`; a large design space is aggregated (top designs by the
objective, an ECDF for all: :mod:`~asicsim._src.report.aggregate`).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from asicsim._src.report.aggregate import MAX_BARS, ecdf_axes, top_designs, top_rows
from asicsim._src.report.figures_base import (
    COLORS,
    STYLE,
    esc,
    fig,
    legend_outside,
    log_axis,
    sentence,
    to_svg,
    wrap,
)
from asicsim._src.report.figures_roofline import roofline
from asicsim._src.report.figures_train import curves, pareto
from asicsim._src.report.load import ENERGY_PARTS, text
from asicsim._src.report.tables import BAIDU_FLOPS_PER_W

__all__ = ["MAX_BARS", "baidu", "curves", "deepbench", "energy", "numerics", "numerics_note", "pareto",
           "roofline", "to_svg"]


def _float(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def _empty(d: pd.DataFrame, col: str) -> bool:
    v = _float(d[col])
    return not (np.isfinite(v) & (v != 0)).any()


def numerics_has_data(df: pd.DataFrame, workload: str) -> bool:
    """Whether any numerics panel of ``workload`` has a nonzero value (else only the sentence)."""
    d = df[df["workload"] == workload]
    return not all(_empty(d, c) for c in ("underflow", "overflow"))


def numerics_note(df: pd.DataFrame, workload: str) -> str:
    """The sentence that stands for the numerics panels without data ("" when both have some)."""
    d = df[df["workload"] == workload]
    gone = [c for c in ("underflow", "overflow") if _empty(d, c)]
    if not gone:
        return ""
    what = " and ".join(gone)
    return (f"{workload}: no value {'underflowed or overflowed' if len(gone) == 2 else what + 'ed'} in any "
            f"recipe or tensor role, so the {what} panel{'s are' if len(gone) == 2 else ' is'} left out.")


def numerics(df: pd.DataFrame, workload: str) -> str:
    """Underflow and overflow fraction per recipe and tensor role (size-weighted mean); a panel
    whose values are all zero is left out, and the sentence of :func:`numerics_note` says so."""
    d = df[df["workload"] == workload].copy()
    cols = [c for c in ("underflow", "overflow") if not _empty(d, c)]
    note = numerics_note(df, workload)
    if not cols:
        return sentence(note)
    d["who"] = text(d["recipe"]) + " (" + text(d["kind"]) + ")"
    d["role"] = text(d["role"])
    who = sorted(set(d["who"]))
    roles = sorted(set(d["role"]))
    width = 0.8 / max(len(roles), 1)
    with plt.rc_context(STYLE):
        f, axes = fig(5.5 * len(cols) + 1.5, 3.4 + 0.05 * len(who), 1, len(cols), squeeze=False)
        for ax, col in zip(axes[0], cols, strict=True):
            for k, role in enumerate(roles):
                g = d[d["role"] == role].set_index("who").reindex(who)
                ax.bar(np.arange(len(who)) + (k - (len(roles) - 1) / 2) * width, g[col].fillna(0) * 100,
                       width, color=COLORS[k % 10], label=esc(role))
            ax.set_xticks(np.arange(len(who)), [wrap(w, 24) for w in who], rotation=35, ha="right",
                          rotation_mode="anchor", fontsize=7)
            ax.set_yscale("symlog", linthresh=1e-4)
            top = float(np.nanmax(_float(d[col]))) * 100
            ax.set_ylim(0, max(2 * top, 1e-2))
            ax.set_ylabel(f"{col} (% of values)")
            ax.set_title(esc(f"{workload}: {col} per tensor role"))
        legend_outside(axes[0][-1], "role")
        if note:
            f.suptitle(esc(note), fontsize=8, x=0.0, ha="left", y=-0.02, va="top")
    return to_svg(f)


def energy(df: pd.DataFrame, workload: str, phase: str) -> str:
    """Each design and recipe's energy per step (or batch) split by component (shares, the total
    written at the bar's end), beside the bytes moved per memory level. Past ``MAX_BARS`` rows:
    the lowest-energy ones and every GPU as bars, and below them the distribution (ECDF) of the
    energy over every row, per recipe."""
    full = df[(df["workload"] == workload) & (df["phase"] == phase)]
    d = top_rows(full, "energy_j")
    if len(d) < len(full):
        d = d.assign(_e=_float(d["energy_j"])).sort_values("_e", kind="stable").drop(columns="_e")
    labels = [wrap(f"{r.design} · {r.recipe}", 60) for r in d.itertuples()]
    y = np.arange(len(d))
    total = _float(d["energy_j"])
    per = "training step" if phase == "train" else "inference batch"
    with plt.rc_context(STYLE):
        tall = 1.8 + 0.28 * sum(lab.count("\n") + 1 for lab in labels)
        many = len(d) < len(full)
        f = plt.figure(figsize=(11, tall + (3.0 if many else 0)), layout="constrained")
        top, bottom = f.subfigures(2, 1, height_ratios=(tall, 3.0)) if many else (f, None)
        ax, bx = top.subplots(1, 2, sharey=True, width_ratios=(3, 2))
        parts = np.stack([np.nan_to_num(_float(d[f"energy_{p}_j"])) for p in ENERGY_PARTS])
        # energy a point did not split into components (a GPU's dynamic energy) counts as other
        parts[ENERGY_PARTS.index("other")] += np.clip(np.nan_to_num(total) - parts.sum(0), 0, None)
        share = parts / np.where(parts.sum(0) > 0, parts.sum(0), 1.0)
        left = np.zeros(len(d))
        for k, part in enumerate(ENERGY_PARTS):
            if part == "other" and not parts[k].any():
                continue
            ax.barh(y, share[k] * 100, left=left, color=COLORS[k % 10], label=part)
            left += share[k] * 100
        for yi, e in zip(y, total, strict=True):
            ax.text(101, yi, f"{e:.3g} J" if np.isfinite(e) else "not priced", va="center", fontsize=7)
        ax.set_xlim(0, 122)
        ax.set_xticks([0, 25, 50, 75, 100])
        ax.set_yticks(y, labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(f"% of the energy per {per} (total at the right)")
        ax.set_title(esc(f"{workload} ({phase}): energy by component")
                     + (f"\nthe {MAX_BARS} lowest-energy of {len(full):,} rows, and every GPU" if len(d) < len(full)
                        else ""))
        ax.legend(fontsize=7, ncols=len(ENERGY_PARTS), loc="lower left", bbox_to_anchor=(0, 1.0 + 0.6 / max(len(d), 4)))
        h = 0.38
        bx.barh(y - h / 2, np.nan_to_num(_float(d["dram_bytes"])), h, color=COLORS[3], label="DRAM")
        bx.barh(y + h / 2, np.nan_to_num(_float(d["sram_bytes"])), h, color=COLORS[0], label="on-chip SRAM")
        if (np.nan_to_num(_float(d["dram_bytes"])) > 0).any() or (np.nan_to_num(_float(d["sram_bytes"])) > 0).any():
            bx.set_xscale("log")
            log_axis(bx.xaxis, "B")
        bx.set_xlabel("bytes moved")
        bx.set_title("data movement per memory level")
        bx.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.0 + 0.6 / max(len(d), 4)), ncols=2)
        if bottom is not None:
            cx = bottom.subplots()
            ecdf_axes(cx, full, "energy_j", "recipe", f"energy per {per} (J), every row", marks=d)
            cx.set_title(esc(f"all {len(full):,} rows: the distribution of the energy per recipe"))
    return to_svg(f)


def deepbench(df: pd.DataFrame) -> str:
    """Geomean TFLOP/s per design on each DeepBench suite: past ``MAX_BARS`` designs, the ones
    with the least total energy and every GPU, and the distribution over all designs below."""
    full = df.copy()
    full["suite_p"] = text(full["suite"]) + " " + text(full["precision"], "default")
    full["design"] = text(full["design"])
    keep = top_designs(full, "energy_j", MAX_BARS // 2)
    d = full[full["design"].isin(keep)]
    many = d["design"].nunique() < full["design"].nunique()
    suites = sorted(set(d["suite_p"]))
    designs = keep if many else sorted(set(d["design"]))
    h = 0.8 / max(len(suites), 1)
    with plt.rc_context(STYLE):
        tall = 1.6 + 0.3 * sum(wrap(x, 60).count("\n") + 1 for x in designs) * max(1, len(suites) / 2)
        f = plt.figure(figsize=(10, tall + (3 if many else 0)), layout="constrained")
        top, bottom = f.subfigures(2, 1, height_ratios=(tall, 3)) if many else (f, None)
        ax = top.subplots()
        for k, s in enumerate(suites):
            g = d[d["suite_p"] == s].set_index("design").reindex(designs)
            ax.barh(np.arange(len(designs)) + (k - (len(suites) - 1) / 2) * h, g["geomean_tflops"].fillna(0),
                    h, color=COLORS[k % 10], label=esc(s))
        ax.set_yticks(np.arange(len(designs)), [wrap(x, 60) for x in designs], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("geomean TFLOP/s over the suite's kernels")
        ax.set_title("DeepBench: speed per design" + (f" (the {len(keep)} of {full['design'].nunique():,} designs "
                                                      "with the least energy, and every GPU)" if many else ""))
        legend_outside(ax, "suite")
        if bottom is not None:
            ecdf_axes(bottom.subplots(), full, "geomean_tflops", "suite_p", "geomean TFLOP/s, every design",
                      marks=d)
    return to_svg(f)


def baidu(df: pd.DataFrame) -> str:
    """Peak and best achieved flops per watt of each design as a fraction of Baidu's mark: past
    ``MAX_BARS`` designs, the best achieved and every GPU, the distribution of all below."""
    full = df.reset_index(drop=True)
    d = top_rows(full, "achieved_fraction_of_mark", MAX_BARS, highest=True)
    many = len(d) < len(full)
    if many:
        d = d.assign(_a=-_float(d["achieved_fraction_of_mark"])).sort_values("_a", kind="stable")
    y = np.arange(len(d))
    h = 0.38
    with plt.rc_context(STYLE):
        tall = 1.6 + 0.3 * sum(wrap(x, 60).count("\n") + 1 for x in d["design"])
        f = plt.figure(figsize=(10, tall + (3 if many else 0)), layout="constrained")
        top, bottom = f.subfigures(2, 1, height_ratios=(tall, 3)) if many else (f, None)
        ax = top.subplots()
        ax.barh(y - h / 2, d["peak_fraction_of_mark"].fillna(0), h, color=COLORS[0], label="peak (TDP)")
        ax.barh(y + h / 2, d["achieved_fraction_of_mark"].fillna(0), h, color=COLORS[1],
                label="best achieved on the sweep")
        ax.axvline(1.0, color="r", lw=1.5, label=f"Baidu: 10 PFLOP/s in 300 W\n({BAIDU_FLOPS_PER_W / 1e12:.1f} "
                                                 "TFLOP/s/W)")
        ax.set_yticks(y, [wrap(x, 60) for x in d["design"]], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("flop/s per watt as a fraction of the mark")
        ax.set_title("distance to 10 PFLOP/s in 300 W" + (f" (the {MAX_BARS} best achieved of {len(full):,} "
                                                          "designs, and every GPU)" if many else ""))
        legend_outside(ax)
        if bottom is not None:
            ecdf_axes(bottom.subplots(), full.assign(all="achieved"), "achieved_fraction_of_mark", "all",
                      "best achieved flop/s per watt as a fraction of the mark, every design", marks=d)
    return to_svg(f)
