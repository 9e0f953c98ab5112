"""price_trace sums the typed price per role (TracePrice.totals), not the per-row DataFrame
(issue 31 item 7: workload pricing reads one typed price)."""

import numpy as np
import pytest

from asicsim._src.workloads.pricing import (
    _TOTALLED_ENERGY,
    merged_notes,
    price_trace,
    workload_trace,
)
from asicsim._src.workloads.trace_price import trace_price


@pytest.fixture(scope="module")
def trace():
    return workload_trace("digits_mlp", "fp16_mixed")


@pytest.mark.parametrize("design", ["gpu_v100", "dc_bf16_128x128", "tpu_v1"])  # tpu_v1: fp16 not executed
def test_role_rows_are_the_typed_totals_of_the_role(trace, design):
    table = price_trace(trace, [design], "fp16_mixed")
    priced = trace_price(trace, [design], "fp16_mixed")
    rows = priced.rows(0)  # the per-row table: the old sums' source
    assert list(table.role[table.role != "total"]) == list(priced.roles()) == list(dict.fromkeys(rows.role))
    for role in priced.roles():
        got = table[table.role == role].iloc[0]
        tot = priced.totals(role)
        for k in ("time_s", *_TOTALLED_ENERGY, "dram_bytes"):
            assert got[k] == tot[k][0] or (np.isnan(got[k]) and np.isnan(tot[k][0])), (role, k)
        part = rows[rows.role == role]
        for k in ("time_s", "energy_j", "energy_static_j", "dram_bytes"):
            want = part[k].sum(skipna=False)
            assert got[k] == pytest.approx(want, rel=1e-12, nan_ok=True), (role, k)
        assert got.note == merged_notes(part.note)
        assert got.gemms == int(part.loc[part.kind != "elementwise", "reps"].sum())
        assert got.macs == float(part.macs.sum())
        assert got.idle_power_chip_w == priced.idle_power_w(0, "chip") or np.isnan(got.idle_power_chip_w)
