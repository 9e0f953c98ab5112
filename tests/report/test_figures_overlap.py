"""Points and curves that coincide are said, not hidden: a bf16 point drawn exactly over fp32's in
the Pareto plot, and recipes whose loss curves are the same (each recipe also has its own line
style, so the one drawn over the other still shows)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from asicsim._src.report import figures
from asicsim._src.report.figures_train import coinciding


def test_coinciding_names_the_earlier_twin():
    assert coinciding(["a", "b", "c", "d"], [(1.0, 2.0), (1.0, 2.0 + 1e-12), (1.0, 2.1), (1.0, 2.1)]) == \
        {"b": "a", "d": "c"}
    assert coinciding(["a", "b"], [np.array([1.0, np.nan]), np.array([1.0, np.nan])]) == {"b": "a"}
    assert coinciding(["a", "b"], [np.ones(3), np.ones(4)]) == {}


def test_pareto_says_a_hidden_point():
    rows = [{"workload": "w", "recipe": r, "design": d, "metric": "test_accuracy", "value": 0.95,
             "energy_j": e, "pareto": r == "fp32"} for r in ("fp32", "bf16") for d, e in (("npu", 1e-3), ("gpu", 2e-3))]
    rows.append({"workload": "w", "recipe": "int8", "design": "npu", "metric": "test_accuracy", "value": 0.90,
                 "energy_j": 5e-4, "pareto": True})
    svg = figures.pareto(pd.DataFrame(rows), "w")
    assert "bf16 on npu coincides with fp32 on npu" in svg and "bf16 on gpu coincides with fp32 on gpu" in svg
    assert svg.count("coincides with") == 2 and "(same point)" in svg


def test_curves_say_coinciding_recipes_and_differ_in_line_style():
    steps = np.arange(0, 100, 10)
    c = pd.DataFrame([{"id": f"{r}0", "workload": "w", "recipe": r, "seed": 0, "step": int(t),
                       "train_loss": 2.0 / (1 + t / 10) * (1.5 if r == "int8" else 1.0), "test_loss": 1.0}
                      for r in ("bf16", "fp32", "int8") for t in steps])
    results = pd.DataFrame({"id": ["bf160", "fp320", "int80"], "kind": "train", "workload": "w",
                            "recipe": ["bf16", "fp32", "int8"], "status": "done"})
    svg = figures.curves(c, results, "w")
    assert "coincides with bf16" in svg and svg.count("coincides with") == 1
    assert "stroke-dasharray" in svg  # fp32 is dashed: over bf16's solid line, both show
