"""The report's figures on hand-made tables: a marker per design and error bars over seeds in the
Pareto plot, a y-range a one-sample difference cannot fill, loss bands, empty panels replaced by a
sentence, roofs labelled with the path that ran, ticks that do not overlap, full legends."""

from __future__ import annotations

import itertools
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from asicsim._src.report import figures
from asicsim._src.report.figures_base import log_axis, wrap
from asicsim._src.report.figures_roofline import roof_paths
from asicsim._src.report.figures_train import _y_limits, seed_spread

LONG = "edge_int8_32x32[array.rows=96,array.cols=8,array.dataflow=os,buffers.activations.capacity_kib=512]"


def _pareto_tables():
    designs = ["dc_a", "gpu_b", LONG]
    rows = [{"workload": "w", "recipe": r, "design": d, "metric": "test_accuracy", "value": v,
             "energy_j": e * (1 + i), "pareto": i == 0}
            for r, v, e in (("fp32", 0.958, 1e-3), ("bf16", 0.9585, 5e-4)) for i, d in enumerate(designs)]
    results = pd.DataFrame(
        [{"kind": "train", "workload": "w", "recipe": r, "seed": s, "value": v, "phase": np.nan, "design": np.nan,
          "energy_j": np.nan} for r, vals in (("fp32", (0.95, 0.966)), ("bf16", (0.957, 0.96))) for s, v in
         enumerate(vals)])
    return pd.DataFrame(rows), results


def test_pareto_has_a_marker_per_design_a_colour_per_recipe_and_full_names():
    df, results = _pareto_tables()
    svg = figures.pareto(df, "w", results)
    for name in ("recipe (colour)", "design (marker)", "fp32", "bf16", "dc_a", "gpu_b", "Pareto front",
                 "mean of 2 seeds, bars: min-max"):
        assert name in svg, name
    assert "…" not in svg and "..." not in svg
    # the long design name is there in full, wrapped onto lines
    assert all(part in svg for part in wrap(LONG).split("\n"))


def test_seed_spread_is_the_min_and_max_over_seeds():
    _, results = _pareto_tables()
    s = seed_spread(results, "w", "value", ["recipe"]).set_index("recipe")
    assert (s.loc["fp32", "lo"], s.loc["fp32", "hi"], s.loc["fp32", "seeds"]) == (0.95, 0.966, 2)
    assert seed_spread(None, "w", "value", ["recipe"]).empty


@pytest.mark.parametrize("values, lo, hi, least", [
    ((0.958, 0.9585), None, None, 0.02),  # one sample apart: still +-1 accuracy point
    ((95.8, 95.85), None, None, 2.0),  # a percentage
    ((0.958, 0.9585), (0.90, 0.95), (0.99, 0.96), 0.18),  # a wide seed spread: at least twice it
])
def test_y_range_is_not_filled_by_a_one_sample_difference(values, lo, hi, least):
    y = np.array(values)
    fig, ax = plt.subplots()
    _y_limits(ax, y, np.array(lo) if lo else y, np.array(hi) if hi else y, "test_accuracy")
    bottom, top = ax.get_ylim()
    plt.close(fig)
    assert top - bottom >= least - 1e-12
    assert bottom <= min(lo or values) and top >= max(hi or values)


def test_curves_band_over_seeds():
    steps = np.arange(0, 600, 12)
    c = pd.DataFrame([{"id": f"{r}{s}", "workload": "w", "recipe": r, "seed": s, "step": int(t),
                       "train_loss": 2.0 / (1 + t / 100) * (1 + 0.05 * s), "test_loss": 2.1 / (1 + t / 100)}
                      for r in ("fp32", "bf16") for s in (0, 1) for t in steps])
    results = pd.DataFrame({"id": c["id"].unique(), "kind": "train", "workload": "w",
                            "recipe": [x[:-1] for x in c["id"].unique()], "status": "done"})
    svg = figures.curves(c, results, "w")
    assert "fp32 (2 seeds)" in svg and "seed mean, band min-max" in svg
    bands = re.findall(r'id="(?:FillBetween)?PolyCollection_\d+"', svg)
    assert len(bands) == 4  # a band per recipe in each panel
    one_seed = figures.curves(c[c["seed"] == 0], results, "w")
    assert "fp32 (1 seed)" in one_seed and not re.search(r'id="(?:FillBetween)?PolyCollection_', one_seed)


def _numerics(over: float, under: float) -> pd.DataFrame:
    return pd.DataFrame([{"kind": "train", "workload": "w", "recipe": r, "role": role, "underflow": under,
                          "overflow": over} for r in ("fp32", "mxfp8") for role in ("act", "weight")])


def test_numerics_leaves_out_an_empty_panel_and_says_so():
    svg = figures.numerics(_numerics(0.0, 1e-3), "w")
    assert "underflow per tensor role" in svg and "overflow per tensor role" not in svg
    assert "no value overflowed in any recipe or tensor role" in svg
    assert figures.numerics_note(_numerics(1e-4, 1e-3), "w") == ""


def test_numerics_without_any_value_is_a_sentence():
    svg = figures.numerics(_numerics(0.0, 0.0), "w")
    assert svg.startswith("<svg") and "no value underflowed or overflowed" in svg
    assert "per tensor role" not in svg


def test_roof_labelled_with_the_path_that_ran():
    r = pd.DataFrame([
        {"kind": "cost", "design": "int8_npu", "recipe": "fp32", "phase": "train", "precision": np.nan,
         "status": "done", "reason": "not executed: design does not execute fp32", "peak_ops_per_s": 1e12,
         "dram_bytes_per_s": 1e10},
        {"kind": "kernels", "design": "int8_npu", "recipe": np.nan, "phase": np.nan, "precision": "int8",
         "status": "done", "reason": "", "peak_ops_per_s": 1e12, "dram_bytes_per_s": 1e10},
        {"kind": "cost", "design": "int8_npu", "recipe": "int8_ptq", "phase": "infer", "precision": np.nan,
         "status": "done", "reason": "", "peak_ops_per_s": 1e12, "dram_bytes_per_s": 1e10},
    ])
    paths = roof_paths(r, "int8_npu")
    assert list(paths["path"]) == ["DeepBench int8, int8_ptq (infer)"]
    points = pd.DataFrame({"design": ["int8_npu"], "source": ["DeepBench x"], "label": ["int8"],
                           "bound": ["compute"], "intensity": [50.0], "achieved": [5e11]})
    svg = figures.roofline(points, pd.DataFrame(), "int8_npu", r)
    assert "DeepBench int8, int8_ptq (infer)" in svg and "fp32" not in svg


def _overlaps(labels) -> bool:
    boxes = sorted((t.get_window_extent() for t in labels if t.get_text() and t.get_visible()), key=lambda b: b.x0)
    return any(a.x1 > b.x0 for a, b in itertools.pairwise(boxes))


@pytest.mark.parametrize("lo, hi", [(1e3, 1e12), (2e5, 4e6), (1.0, 1e15)])
def test_log_axis_labels_do_not_overlap(lo, hi):
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.barh([0, 1], [lo, hi])
    ax.set_xscale("log")
    ax.set_xlim(lo / 2, hi * 2)
    log_axis(ax.xaxis, "B")
    fig.canvas.draw()
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    plt.close(fig)
    assert 2 <= len(labels) <= 12
    assert not _overlaps(labels)


def test_a_large_design_space_is_aggregated():
    from asicsim._src.report.load import ENERGY_PARTS

    n = 25_000
    rng = np.random.default_rng(0)
    e = rng.lognormal(-8, 1, n)
    df = pd.DataFrame({"workload": "w", "phase": "train", "recipe": np.where(np.arange(n) % 2, "bf16", "fp8"),
                       "design": [f"d{i:05d}" for i in range(n)], "design_kind": "systolic", "energy_j": e,
                       **{f"energy_{p}_j": e / len(ENERGY_PARTS) for p in ENERGY_PARTS},
                       "dram_bytes": rng.uniform(1e5, 1e9, n), "sram_bytes": rng.uniform(1e5, 1e9, n)})
    svg = figures.energy(df, "w", "train")
    shown = set(re.findall(r"(d\d{5}) · ", svg))
    assert len(shown) == figures.MAX_BARS
    assert shown == {f"d{i:05d}" for i in np.argsort(e)[:figures.MAX_BARS]}  # the least energy
    assert "the distribution of the energy" in svg and "12,500 rows" in svg
    assert len(svg) < 1_000_000
    b = pd.DataFrame({"design": df["design"], "design_kind": "systolic", "peak_fraction_of_mark": 0.1,
                      "achieved_fraction_of_mark": rng.uniform(0, 0.1, n)})
    svg = figures.baidu(b)
    assert len(set(re.findall(r">(d\d{5})<", svg))) == figures.MAX_BARS and len(svg) < 1_000_000
