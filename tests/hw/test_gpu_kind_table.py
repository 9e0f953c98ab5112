"""Issue 32's table per device and kind (benchmarks/gpu_kind_table.py, benchmarks/RESULTS.md
2026-11-30): the command runs, and its figures are the model's: medians and p90s recomputed here from
the rows priced through the public price (gpu_cost_many), not read from the script."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def kt():
    return load_benchmark("gpu_kind_table")


@pytest.fixture(scope="module")
def in_sample(kt):
    """Every measured row with the shipped constants (no leave-one-out refits: seconds, not minutes)."""
    return kt.frames(loo=False)


def test_the_table_command_runs(kt, capsys):
    kt.main(["--no-loo", "--worst", "3"])
    out = capsys.readouterr().out
    assert "aim: median <= 0.1, p90 <= 0.3" in out and "# worst 3 rows (in_sample)" in out
    for device in ("H100", "H200", "V100", "T4", "M40", "P100", "GTX1080Ti", "TitanX_Pascal"):
        assert f"\n{device} " in out
    assert "meets the aim:" in out


@pytest.mark.parametrize(("device", "precision", "kind"), [
    ("H200", "fp8", "gemm"),  # held out: no fit sees the H200
    ("V100", "fp32", "conv_fwd"),  # DeepBench's sheet, a conv pass
])
def test_the_tables_figures_are_the_public_prices(kt, in_sample, device, precision, kind):
    """The table's median, p90 and bias of a kind equal those of the rows priced one by one through
    gpu_cost_many (Group.predict_public, the price asicsim.cost returns), and its roofline columns
    those of the datasheet peak and bandwidth; ``aim`` says yes exactly when both are within it."""
    from gpu_calibration import groups_of
    from gpu_measured import all_rows, h200_rows

    from asicsim._src.hw.gpu_model import load_fit

    rows = [r for r in (h200_rows() if device == "H200" else all_rows())
            if (r["device"], r["precision"], r["kind"]) == (device, precision, kind)]
    (g,) = groups_of(rows)
    e = np.log(g.predict_public(load_fit()) / g.measured)
    t = kt.kind_table(in_sample, ("in_sample",)).loc[(device, precision, kind)]
    assert t.n == len(rows) > 50
    assert t.in_sample_med == pytest.approx(np.median(np.abs(e)), rel=1e-9)
    assert t.in_sample_p90 == pytest.approx(np.quantile(np.abs(e), 0.9), rel=1e-9)
    assert t.bias == pytest.approx(np.exp(np.median(e)), rel=1e-9)
    flops = np.array([r["flops"] for r in rows])
    peak = {"fp8": g.design.fp8_tflops, "fp32": g.design.fp32_tflops}[precision] * 1e12
    assert np.all(g.naive() >= flops / peak * (1 - 1e-12))  # the roofline is at least the peak's time
    naive = np.abs(np.log(g.naive() / g.measured))
    assert t.naive_med == pytest.approx(np.median(naive), rel=1e-9)
    assert (t.aim == "yes") == (t.in_sample_med <= 0.10 and t.in_sample_p90 <= 0.30)


def test_held_out_columns_come_from_the_leave_one_out_predictions(kt, monkeypatch, tmp_path):
    """The held-out column of a fitted device is what loo_predictions returns (here stubbed: the
    in-sample prices x 2); the H200's
    is the shipped constants'; --loo-save / --loo-from store and restore them row by row and refuse
    a file of other rows."""
    calls = []

    def fake_loo(groups, priors, table):
        calls.append(len(groups))
        return [2.0 * g.predict(kt.load_fit()) for g in groups]

    monkeypatch.setattr(kt, "loo_predictions", fake_loo)
    path = tmp_path / "loo.csv"
    df = kt.frames(loo=None, save=str(path))
    assert calls == [len({(r["device"], r["precision"]) for r in kt.all_rows()})]
    fitted = df[df.device != "H200"]
    assert np.allclose(fitted.held_out, 2.0 * fitted.in_sample, rtol=1e-12)
    h200 = df[df.device == "H200"]
    assert np.array_equal(h200.held_out, h200.in_sample)
    again = kt.frames(loo=str(path))
    assert np.allclose(again.held_out, df.held_out, rtol=1e-12)
    t = kt.kind_table(df, ("held_out", "in_sample")).loc[("T4", "fp32", "gemm")]
    rows = fitted[(fitted.device == "T4") & (fitted.precision == "fp32") & (fitted.kind == "gemm")]
    assert t.held_out_med == pytest.approx(np.median(np.abs(np.log(rows.held_out / rows.meas))), rel=1e-9)
    f = __import__("pandas").read_csv(path)
    f.loc[0, "meas"] *= 1.5
    f.to_csv(path, index=False)
    with pytest.raises(ValueError, match="rerun with --loo-save"):
        kt.frames(loo=str(path))
