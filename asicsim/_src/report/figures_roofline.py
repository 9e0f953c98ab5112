"""A design's roofline: one roof per precision path it was priced under, labelled with that path
(the recipes and DeepBench precisions that ran on it), every priced kernel placed on it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from asicsim._src.report.figures_base import COLORS, STYLE, esc, fig, legend_outside, to_svg, wrap
from asicsim._src.report.load import text

BOUND_MARKERS = {"compute": "o", "bandwidth": "s", "occupancy": "^", "power": "D"}


def roof_paths(results: pd.DataFrame, design: str) -> pd.DataFrame:
    """The roofs ``design`` was priced under, from the results: one per (peak ops/s, DRAM
    bytes/s), ``path`` naming what ran there ("mnist1d_cnn int8_ptq_channel infer", "DeepBench
    int8"). Points the design did not execute (a format it has no path for) are left out: an int8
    design's roof is never labelled with the fp32 recipe it could not run."""
    r = results[(results["design"] == design) & results["kind"].isin(["cost", "kernels"])
                & results["peak_ops_per_s"].notna() & (results["status"] == "done")]
    r = r[~text(r["reason"]).str.startswith("not executed")]
    path = np.where(r["kind"] == "cost", text(r["recipe"]) + " (" + text(r["phase"]) + ")",
                    "DeepBench " + text(r["precision"], "default"))
    r = r.assign(path=path)
    rows = [{"peak_ops_per_s": peak, "dram_bytes_per_s": bw, "path": ", ".join(sorted(set(g["path"])))}
            for (peak, bw), g in r.groupby(["peak_ops_per_s", "dram_bytes_per_s"], sort=True)]
    return pd.DataFrame(rows, columns=["peak_ops_per_s", "dram_bytes_per_s", "path"])


def roofline(points: pd.DataFrame, roofs: pd.DataFrame, design: str, results: pd.DataFrame | None = None) -> str:
    """One design's roofline (a roof per precision path it was priced under: from ``results``
    where given, else the ``roofs`` table's ``priced_as``) with every kernel placed, a marker per
    bound and a colour per source."""
    p = points[points["design"] == design]
    if results is not None:
        rf = roof_paths(results, design)
    else:
        rf = roofs[roofs["design"] == design].rename(columns={"priced_as": "path"})
    with plt.rc_context(STYLE):
        f, ax = fig(10, 4.4)
        xs = p["intensity"].astype(float)
        lo = float(xs.min()) / 2 if len(p) else 0.1
        hi = float(xs.max()) * 2 if len(p) else 1e4
        for roof in rf.itertuples():
            ridge = roof.peak_ops_per_s / roof.dram_bytes_per_s if roof.dram_bytes_per_s else 1.0
            lo, hi = min(lo, ridge / 20), max(hi, ridge * 20)
        grid = np.geomspace(max(lo, 1e-3), hi, 200)
        for k, roof in enumerate(rf.itertuples()):
            ax.plot(grid, np.minimum(roof.peak_ops_per_s, grid * roof.dram_bytes_per_s), color="k",
                    lw=1.6 - 0.4 * min(k, 2), ls=("-", "--", ":")[k % 3],
                    label=wrap(f"{roof.path}: {roof.peak_ops_per_s / 1e12:.3g} TFLOP/s, "
                               f"{roof.dram_bytes_per_s / 1e9:.3g} GB/s", 56))
        for i, (src, g) in enumerate(p.groupby("source", sort=True)):
            for bound, b in g.groupby("bound", sort=True):
                ax.scatter(b["intensity"], b["achieved"], s=16, alpha=0.7, color=COLORS[i % 10],
                           marker=BOUND_MARKERS.get(str(bound), "D"), label=wrap(f"{src} · {bound}-bound", 56))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (flop per DRAM byte)")
        ax.set_ylabel("achieved flop/s")
        ax.set_title(esc(f"roofline: {design}") if len(design) < 90 else wrap(f"roofline: {design}", 90))
        if not len(rf):
            ax.set_title(ax.get_title() + "\n(nothing priced ran on this design: no roof)", fontsize=9)
        legend_outside(ax, "roof per precision path; kernels")
    return to_svg(f)
