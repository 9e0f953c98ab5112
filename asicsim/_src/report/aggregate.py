"""A large design space in a figure: the top designs by the objective drawn one by one (every GPU
baseline kept), the distribution of all of them as an ECDF, so a 25,000-point sweep makes a
figure of the same size as a 25-point one."""

from __future__ import annotations

import numpy as np
import pandas as pd

from asicsim._src.report.figures_base import COLORS, esc, legend_outside

#: Rows drawn one by one in a bar figure (the rest go into the distribution).
MAX_BARS = 48


def _float(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def top_designs(d: pd.DataFrame, col: str, n: int = MAX_BARS, highest: bool = False) -> list[str]:
    """The ``n`` designs best on ``col`` (its least value over their rows; the highest with
    ``highest``), then every GPU design not among them."""
    v = pd.Series(_float(d[col]), index=d.index)
    v = -v if highest else v
    best = v.groupby(d["design"].astype(str)).min().fillna(np.inf).sort_values(kind="stable")
    keep = list(best.index[:n])
    if "design_kind" in d:
        gpus = sorted(set(d.loc[d["design_kind"] == "gpu", "design"].astype(str)) - set(keep))
        keep += gpus
    return keep


def top_rows(d: pd.DataFrame, col: str, n: int = MAX_BARS, highest: bool = False) -> pd.DataFrame:
    """The ``n`` rows best on ``col`` and every GPU row, in their order in ``d``; ``d`` itself when
    it has no more than ``n`` rows."""
    if len(d) <= n:
        return d
    v = pd.Series(_float(d[col]), index=d.index)
    v = (-v if highest else v).fillna(np.inf)
    keep = v.rank(method="first") <= n
    if "design_kind" in d:
        keep |= d["design_kind"] == "gpu"
    return d[keep]


def ecdf_axes(ax, d: pd.DataFrame, col: str, group: str, label: str, log: bool = True,
              marks: pd.DataFrame | None = None) -> None:
    """The ECDF of ``col`` over every row, a line per ``group`` value; the rows drawn one by one
    elsewhere (``marks``) ticked on the line."""
    groups = sorted(set(d[group].astype(str)))
    for i, g in enumerate(groups):
        v = _float(d.loc[d[group].astype(str) == g, col])
        v = np.sort(v[np.isfinite(v) & ((v > 0) if log else True)])
        if not len(v):
            continue
        y = np.arange(1, len(v) + 1) / len(v)
        ax.step(v, y, where="post", color=COLORS[i % 10], lw=1.3, label=esc(f"{g} ({len(v):,} rows)"))
    if log:
        ax.set_xscale("log")
    if marks is not None and "design_kind" in marks:
        marks = marks[marks["design_kind"] != "gpu"]  # the GPUs are drawn for reference, not as top designs
    if marks is not None and len(marks):
        m = _float(marks[col])
        m = m[np.isfinite(m)]
        if len(m):
            ax.axvspan(np.min(m), np.max(m), color="0.85", zorder=0, label="range drawn above")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(label)
    ax.set_ylabel("fraction of rows ≤ x")
    legend_outside(ax)
