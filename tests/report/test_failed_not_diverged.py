"""A point that failed (an error, a timeout, a lost worker, out of memory) has no result: the
report lists it apart with its reason and keeps it out of every accuracy verdict; a run that
diverged is a result, listed with its step and cause. Records an older asicsim wrote (a diverged
run as ``failed`` with its step) read as divergences."""

from __future__ import annotations

from asicsim._src.report import answer, objective, pivots, summary_text, tables
from asicsim._src.report.document import Text
from asicsim._src.report.load import load
from asicsim._src.sweep.point_identity import ID_SCHEME
from asicsim._src.sweep.store import Store

TIMEOUT = "timed out after 1 s (point_timeout_s = 1): no result"
DIED = "worker process died (signal SIGKILL) while running this point"

# (recipe, seed, status, result, reason) of training runs of workload "w"
RUNS = [
    ("fp32", 0, "done", {"value": 0.90}, ""),
    ("fp32", 1, "done", {"value": 0.92}, ""),
    ("fp8", 0, "failed", {}, TIMEOUT),  # both seeds timed out: no verdict
    ("fp8", 1, "failed", {}, TIMEOUT),
    ("bf16", 0, "diverged", {"value": None, "diverged": True, "diverged_step": 5, "diverged_cause": "nan loss"},
     "diverged at step 5: nan loss"),
    ("bf16", 1, "done", {"value": 0.91}, ""),
    ("mx", 0, "failed", {}, DIED),  # one seed lost, one measured: a verdict from that one
    ("mx", 1, "done", {"value": 0.919}, ""),
    # written by an older asicsim: a divergence was "failed" with its step, a failure without one
    ("old", 0, "failed", {"value": None, "diverged": True, "diverged_step": 3, "diverged_cause": "inf loss"},
     "diverged at step 3: inf loss"),
    ("oldfail", 0, "failed", {}, "MemoryError: out of memory"),
]

# energy per training step on design "a": fp8 (no result) is the cheapest
ENERGY = {"fp8": 0.1, "old": 0.2, "oldfail": 0.25, "bf16": 0.3, "mx": 0.5, "fp32": 2.0}


def _results(root):
    recs = []
    for recipe, seed, status, result, reason in RUNS:
        recs.append({"id": f"t{len(recs):03d}", "kind": "train", "status": status, "reason": reason,
                     "labels": {"workload": "w", "recipe": recipe, "seed": seed},
                     "result": {"metric": "test_accuracy", **result}, "tables": {}, "ids": ID_SCHEME})
    for recipe, e in ENERGY.items():
        recs.append({"id": f"c{len(recs):03d}", "kind": "cost", "status": "done", "reason": "",
                     "labels": {"workload": "w", "recipe": recipe, "phase": "train", "design": "a"},
                     "result": {"time_s": 1.0, "energy_j": e, "energy_static_j": 0.0, "energy_dynamic_j": e,
                                "dram_bytes": 1.0, "design_kind": "systolic"}, "tables": {}, "ids": ID_SCHEME})
    store = Store(root)
    store.points.mkdir(parents=True)
    store.write(recs)
    return load(root)


def test_a_failure_is_no_divergence_and_no_verdict(tmp_path):
    res = _results(tmp_path)
    opts = objective.options(res)
    q = objective.quality(res, opts).set_index("recipe")
    assert q["status"].to_dict() == {"bf16": "diverged", "fp32": "ok", "fp8": "failed", "mx": "ok",
                                     "old": "diverged", "oldfail": "failed"}
    assert q.loc["fp8", ["seeds", "diverged", "failed"]].tolist() == [0, 0, 2]
    assert q.loc["mx", ["seeds", "diverged", "failed"]].tolist() == [1, 0, 1]
    assert abs(q.loc["mx", "delta"] - (0.919 - 0.92) * 100) < 1e-9  # its measured seed against fp32 seed 1
    t = tables.quality(res).set_index("recipe")
    assert t.loc["fp8", ["runs", "diverged", "failed"]].tolist() == [0, 0, 2]
    assert t.loc["bf16", ["runs", "diverged", "failed"]].tolist() == [2, 1, 0]
    assert t.loc["old", ["runs", "diverged", "failed"]].tolist() == [1, 1, 0]


def test_the_report_lists_divergences_and_failures_apart(tmp_path):
    res = _results(tmp_path)
    div = tables.diverged(res)
    assert sorted(zip(div["recipe"], div["diverged_step"], div["diverged_cause"], strict=True)) == \
        [("bf16", 5, "nan loss"), ("old", 3, "inf loss")]
    failed = tables.failed(res)
    assert sorted(failed["labels"].str.extract(r"recipe=(\w+)")[0]) == ["fp8", "fp8", "mx", "oldfail"]
    assert set(failed["reason"]) == {TIMEOUT, DIED, "MemoryError: out of memory"}
    text = summary_text(tmp_path)
    assert "w train fp8: no verdict: its 2 runs failed (no result)" in text
    assert "fp8: test_accuracy" not in text and "2 of 2 diverged" not in text
    assert "w train bf16: test_accuracy" in text and "1 of 2 diverged" in text
    assert "w train mx: test_accuracy 0.919 (+0.0090); 1 more failed (no result)" in text
    assert "1 diverged" not in text.split("\n")[1] and ", 4 failed" in text.split("\n")[1]


def test_the_answer_picks_no_recipe_without_a_result_and_says_why(tmp_path):
    res = _results(tmp_path)
    opts = objective.options(res)
    said = [b.text for b in answer.section(res, opts).blocks if isinstance(b, Text)]
    pick = next(x for x in said if x.startswith("w (training)"))
    assert pick.startswith("w (training): mx on a")  # fp8, old, oldfail and bf16 are cheaper: no verdict / diverged
    assert "Not picked, having no result: fp8 on a" in pick and "no accuracy verdict: its 2 runs failed" in pick
    assert "at -0.10 accuracy points vs fp32 (1 seed; 1 more failed, no result)" in pick
    cand = objective.candidates(res, opts, finite=False)
    cells = {r: pivots._accuracy(g.iloc[0]) for r, g in cand.groupby("recipe")}
    assert cells["fp8"] == cells["oldfail"] == "failed: no result" and cells["bf16"] == "diverged"


def test_nothing_picked_when_every_run_failed(tmp_path):
    store = Store(tmp_path)
    store.points.mkdir(parents=True)
    store.write([{"id": f"t{i}", "kind": "train", "status": "failed", "reason": TIMEOUT,
                  "labels": {"workload": "w", "recipe": r, "seed": 0}, "result": {}, "tables": {}, "ids": ID_SCHEME}
                 for i, r in enumerate(("fp32", "fp8"))]
                + [{"id": f"c{i}", "kind": "cost", "status": "done", "reason": "",
                    "labels": {"workload": "w", "recipe": r, "phase": "train", "design": "a"},
                    "result": {"time_s": 1.0, "energy_j": 1.0 + i, "energy_dynamic_j": 1.0, "dram_bytes": 1.0},
                    "tables": {}, "ids": ID_SCHEME} for i, r in enumerate(("fp32", "fp8"))])
    res = load(tmp_path)
    said = [b.text for b in answer.section(res, objective.options(res)).blocks if isinstance(b, Text)]
    assert any("nothing is picked: every recipe's runs failed" in x for x in said), said
    assert not any("diverged in" in x for x in said)
