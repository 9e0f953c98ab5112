"""The report shows the time/energy trade of the mapping objective on the answer's picks (issue 30
item 5): a row per objective whose figures are the workload priced for that objective here, a
sentence where the objectives differ by more than a few percent, and a pick whose inputs changed
since the sweep left out, saying so."""

from __future__ import annotations

import dataclasses

import pytest

from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE, OBJECTIVES
from asicsim._src.report import trade
from asicsim._src.report.load import load
from asicsim._src.report.objective import options
from asicsim._src.sweep import sweep
from asicsim._src.system.busy import trace_totals
from asicsim._src.workloads import load_workload
from asicsim._src.workloads.pricing import trace_costs, workload_trace

SPEC = """recipes = ["bf16"]
designs = ["dc_bf16_128x128", "gpu_h100"]
[[workloads]]
name = "fmnist_cnn"
run = ["cost"]
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("trade")
    (root / "spec.toml").write_text(SPEC)
    assert sweep(root / "spec.toml", root / "out", workers=1, progress=None)["failed"] == 0
    res = load(root / "out")
    return res, options(res)


def test_the_table_holds_each_objective_as_priced_here(swept, monkeypatch):
    res, opts = swept
    df, notes = trade.trade(res, opts)
    assert notes == []
    # the pick is the accelerator (the GPU has no trade: its fastest kernel whatever the objective)
    assert df["design"].unique().tolist() == ["dc_bf16_128x128"] and df["mapping"].tolist() == list(OBJECTIVES)
    assert df.loc[df["recorded"], "mapping"].tolist() == [DEFAULT_OBJECTIVE]
    trace = workload_trace(load_workload("fmnist_cnn"), "bf16", training=True)
    for row in df.itertuples():
        c = trace_costs(trace, "dc_bf16_128x128", "bf16", objective=row.mapping)
        t = trace_totals(c)
        assert row.time_s == pytest.approx(t["time_s"], rel=1e-12)
        assert row.energy_j == pytest.approx(t["energy_j"], rel=1e-12)
        assert row.dram_bytes == pytest.approx(float(c["dram_bytes"].sum()), rel=1e-12)
    base = df[df["recorded"]].iloc[0]
    rec = res.done("cost").set_index("design").loc["dc_bf16_128x128"]
    assert base["time_s"] == pytest.approx(float(rec["time_s"]), rel=1e-9)  # the record, reproduced
    assert (df["time_x"] * base["time_s"]).tolist() == pytest.approx(df["time_s"].tolist(), rel=1e-12)
    # measured with issue 31's mapper: the objectives differ by 3.2 % (energy 1.8 % less energy than
    # balanced in 1.6 % more time; with the earlier mapper 0.9 % and 2.0 %); with its second pass
    # 8.0 % (balanced takes energy's schedule; latency's is 0.2 % faster for 8.0 % more energy;
    # with folds smaller than the array a choice, latency's pick takes 2.11 mJ, not 2.13; with
    # aligned twins cut to one side the least tile of their trips, 145.108 us and 2.15 mJ, not
    # 145.126 us and 2.11 mJ: faster, which is all latency asks, and the spread is 9.0 %);
    # under a 10 % threshold the choice is said not to matter
    assert 0.05 < trade.spread(df) < 0.10
    monkeypatch.setattr(trade, "MATTERS", 0.10)
    s = trade.section(res, opts)
    assert s.blocks[1].text == ("The four objectives price every pick within 10 % of each other in time and energy: "
                                "the choice does not matter here.")
    table = s.blocks[2].df
    assert table["mapping objective"].tolist() == ["balanced (the answer's)", "energy", "dram", "latency"]


def test_a_sentence_where_the_choice_matters(swept, monkeypatch):
    res, opts = swept
    monkeypatch.setattr(trade, "MATTERS", 0.005)
    text = trade.section(res, opts).blocks[1].text
    df, _ = trade.trade(res, opts)
    low = df.sort_values("energy_j", kind="stable").iloc[0]
    assert low["mapping"] == "balanced"  # it takes energy's schedule here (issue 31's second pass)
    assert text.startswith("On dc_bf16_128x128 (fmnist_cnn, training step, bf16) the mapping objective matters: "
                           f"the objectives differ by up to {100 * trade.spread(df):.1f} % in time or energy.")
    # latency's pick with aligned twins cut to one side the least tile of their trip count
    # (asicsim/_src/hw/tiles.py): 2.15 mJ (-8.2 %); with folds smaller than the array a choice,
    # 2.11 mJ (-6.3 %); before, 2.13 mJ (-7.4 %)
    assert ("The fastest, latency: 145 µs and 2.15 mJ; the least energy, balanced: 1.97 mJ (-8.2 %) in 145 µs "
            "(+0.2 % time)") in text
    assert text.endswith("; the answer uses balanced.")


def test_changed_inputs_are_said_not_shown(swept):
    res, opts = swept
    r = res.results.copy()
    r.loc[r["design"] == "dc_bf16_128x128", "time_s"] *= 1.5
    df, notes = trade.trade(dataclasses.replace(res, results=r), opts)
    assert not len(df) and len(notes) == 1 and "its inputs changed since the sweep" in notes[0]


def test_a_spec_that_no_longer_resolves_is_said(swept, tmp_path):
    """The spec names a workload file that has gone (the results copy and its source alike): no
    figures from other inputs, one note; the recorded figures stand in the answer."""
    res, opts = swept
    (tmp_path / "spec.toml").write_text(SPEC.replace('"fmnist_cnn"', f'"{tmp_path / "gone.toml"}"'))
    moved = dataclasses.replace(res, root=tmp_path, spec={**res.spec, "source": str(tmp_path / "spec.toml")})
    df, notes = trade.trade(moved, opts)
    assert not len(df) and notes == [
        "Not priced per objective: the sweep's spec does not resolve into its inputs again here (a file it names "
        "has moved or changed since), so only the recorded objective's figures stand."]
    assert trade.section(moved, opts).blocks[-1].text == notes[0]
