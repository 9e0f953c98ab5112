"""The system code reads the typed trace price (TracePrice.row_figures), not the per-row table:
its per-row figures are the table's to the last bit, in the same order (issue 31 item 7)."""

from __future__ import annotations

import numpy as np
import pytest

from asicsim._src.hw.design_files import load_design
from asicsim._src.workloads import load_workload
from asicsim._src.workloads.pricing import trace_price, workload_trace


@pytest.mark.parametrize("workload,recipe,design", [
    ("digits_mlp", "bf16", "dc_bf16_128x128"), ("digits_mlp", "bf16", "gpu_h100"),
    ("mnist1d_gru", "fp32", "gpu_v100"), ("mnist1d_gru", "fp32", "edge_int8_32x32"),  # unpriced: NaN
])
def test_row_figures_are_the_table_rows(workload, recipe, design):
    trace = workload_trace(load_workload(workload), recipe, batch=3)
    priced = trace_price(trace, [load_design(design)], recipe)
    fig, rows = priced.row_figures(0), priced.rows(0)
    assert len(fig["index"]) == len(rows) == len(trace) and sorted(fig["index"]) == list(trace.index)
    for k in ("time_s", "energy_j"):
        np.testing.assert_array_equal(fig[k], rows[k].to_numpy(dtype=np.float64))  # NaN where unpriced
        assert fig[k].sum() == rows[k].sum() or np.isnan(rows[k]).any()
    if design == "edge_int8_32x32":
        assert np.isnan(fig["time_s"]).any()
