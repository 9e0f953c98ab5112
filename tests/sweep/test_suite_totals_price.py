"""A kernel point's totals are read from the typed price, not from a per-kernel DataFrame (issue 31
item 7): a family's members build no table, and the time is not round-tripped through microseconds."""

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw.family import cost_designs
from asicsim._src.sweep.kernel_points import suite_totals
from asicsim._src.workloads.deepbench import load_suite, suite_costs


@pytest.mark.parametrize("design", ["tpu_v1", "gpu_t4"])
def test_suite_totals_read_the_typed_price(design):
    suite = load_suite("deepbench_gemm_inference_device")
    d = sim.load_design(design)
    pr = cost_designs(suite.operations(), [d]).take(0)
    t = suite_totals(pr, suite.flops())
    assert t["kernels"] == len(suite.flops()) and t["time_s"] == float(np.sum(pr.time_s))
    assert t["energy_j"] == float(np.sum(pr.energy.total * 1e-12))
    k = suite_costs(suite, d)  # the table view of the same price agrees
    for col in ("energy_j", "energy_static_j", "dram_bytes"):
        assert t[col] == pytest.approx(k[col].sum(), rel=1e-14), col
    assert t["time_s"] == pytest.approx(k["time_us"].sum() * 1e-6, rel=1e-14)
