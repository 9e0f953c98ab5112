"""The report's energy split: dynamic and static energy beside the total, a vs-GPU ratio for each,
and a sentence when a GPU reference's energy is mostly static power. Small hand-made stores, so
every figure is checked against arithmetic done here."""

from __future__ import annotations

import math

import pytest

from asicsim._src.report import sections, tables
from asicsim._src.report.document import Text
from asicsim._src.report.load import load
from asicsim._src.sweep.point_identity import ID_SCHEME
from asicsim._src.sweep.store import Store

GPU = "gpu_x"


def _record(i: int, kind: str, labels: dict, result: dict) -> dict:
    return {"id": f"p{i:02d}", "kind": kind, "status": "done", "reason": "", "labels": labels,
            "result": result, "tables": {}, "ids": ID_SCHEME}


def _write(root, recs: list[dict]) -> None:
    store = Store(root)
    store.points.mkdir(parents=True)
    store.write(recs)


def _store(tmp_path, points: list[tuple[str, str, float, float, float | None]], kind: str = "cost"):
    """One point per (design, design_kind, time_s, energy_j, energy_static_j); energy_dynamic_j is
    written as total less static unless static is None (then neither is, as an old store)."""
    recs = []
    for i, (design, dkind, t, e, static) in enumerate(points):
        labels = ({"workload": "w", "recipe": "fp32", "phase": "train", "design": design} if kind == "cost"
                  else {"suite": "s", "precision": "int8", "design": design})
        result = {"time_s": t, "energy_j": e, "design_kind": dkind, "flops_per_j": 1.0 / e, "geomean_tflops": 1.0}
        if static is not None:
            result |= {"energy_static_j": static, "energy_dynamic_j": e - static}
        recs.append(_record(i, kind, labels, result))
    _write(tmp_path, recs)
    return load(tmp_path)


def _texts(section) -> str:
    return " ".join(b.text for b in section.blocks if isinstance(b, Text))


@pytest.mark.parametrize("kind", ["cost", "kernels"])
def test_ratios_match_hand_figures_and_static_heavy_gpu_is_said(tmp_path, kind):
    # the GPU: 100 J, 93 of them static; the accelerator: 1 J, 0.3 static
    res = _store(tmp_path, [(GPU, "gpu", 10.0, 100.0, 93.0), ("acc", "systolic", 2.0, 1.0, 0.3)], kind)
    t = tables.all_tables(res)
    df = (t["summary"] if kind == "cost" else t["deepbench"]).set_index("design")
    assert df.loc["acc", "energy_dynamic_j"] == pytest.approx(0.7)
    assert df.loc["acc", "energy_static_j"] == pytest.approx(0.3)
    assert df.loc["acc", f"speedup_vs_{GPU}"] == pytest.approx(5.0)
    assert df.loc["acc", f"energy_ratio_vs_{GPU}"] == pytest.approx(1.0 / 100.0)
    assert df.loc["acc", f"dynamic_energy_ratio_vs_{GPU}"] == pytest.approx(0.7 / 7.0)
    assert df.loc[GPU, f"dynamic_energy_ratio_vs_{GPU}"] == pytest.approx(1.0)
    build = sections.summary if kind == "cost" else sections.deepbench
    said = _texts(build(res, t))
    assert f"{GPU}'s energy on these {'steps' if kind == 'cost' else 'kernels'} is 93 % static power" in said
    assert "dynamic_energy_ratio_vs_G" in said and "total energy (dynamic + static)" in said


@pytest.mark.parametrize("kind", ["cost", "kernels"])
def test_no_static_sentence_when_the_gpu_is_mostly_dynamic(tmp_path, kind):
    res = _store(tmp_path, [(GPU, "gpu", 10.0, 100.0, 40.0), ("acc", "systolic", 2.0, 1.0, 0.9)], kind)
    t = tables.all_tables(res)
    build = sections.summary if kind == "cost" else sections.deepbench
    said = _texts(build(res, t))
    assert "static power (TDP share" not in said
    assert "dynamic_energy_ratio_vs_G" in said


def test_a_static_heavy_gpu_compared_with_nothing_is_not_said(tmp_path):
    # the accelerator has no energy (not executed): no row is compared with the GPU's
    res = _store(tmp_path, [(GPU, "gpu", 10.0, 100.0, 93.0), ("acc", "systolic", math.nan, math.nan, math.nan)])
    t = tables.all_tables(res)
    assert "static power (TDP share" not in _texts(sections.summary(res, t))


def test_shares_over_several_rows_are_a_range(tmp_path):
    recs = []
    for i, (recipe, static) in enumerate([("fp32", 60.0), ("bf16", 97.0)]):
        for j, (design, dkind, e, s) in enumerate([(GPU, "gpu", 100.0, static), ("acc", "systolic", 1.0, 0.1)]):
            recs.append(_record(2 * i + j, "cost", {"workload": "w", "recipe": recipe, "phase": "train",
                                                    "design": design},
                                {"time_s": 1.0, "energy_j": e, "energy_static_j": s, "energy_dynamic_j": e - s,
                                 "design_kind": dkind}))
    _write(tmp_path, recs)
    res = load(tmp_path)
    assert f"{GPU}'s energy on these steps is 60-97 % static power" in _texts(sections.summary(res, tables.all_tables(res)))


def test_an_old_store_without_the_dynamic_column_still_reports(tmp_path):
    # written before energy_dynamic_j: derived as total less static where static was recorded
    recs = [_record(0, "cost", {"workload": "w", "recipe": "fp32", "phase": "train", "design": GPU},
                    {"time_s": 10.0, "energy_j": 100.0, "energy_static_j": 93.0, "design_kind": "gpu"}),
            _record(1, "cost", {"workload": "w", "recipe": "fp32", "phase": "train", "design": "acc"},
                    {"time_s": 2.0, "energy_j": 1.0, "energy_static_j": 0.3, "design_kind": "systolic"}),
            _record(2, "kernels", {"suite": "s", "precision": "int8", "design": "acc"},
                    {"time_s": 2.0, "energy_j": 1.0, "design_kind": "systolic", "geomean_tflops": 1.0})]
    _write(tmp_path, recs)
    res = load(tmp_path)
    r = res.results.set_index("id")
    assert r.loc["p00", "energy_dynamic_j"] == pytest.approx(7.0)
    assert math.isnan(r.loc["p02", "energy_dynamic_j"])  # no static recorded: unknown, not the total
    s = tables.summary(res).set_index("design")
    assert s.loc["acc", f"dynamic_energy_ratio_vs_{GPU}"] == pytest.approx(0.1)
    assert math.isnan(tables.deepbench(res).iloc[0]["energy_dynamic_j"])
    t = tables.all_tables(res)
    assert "dynamic_energy_ratio_vs_G" in _texts(sections.summary(res, t)) + _texts(sections.deepbench(res, t))
