"""``asicsim demo``, the README's main job, end to end (slow: a few minutes on 2 cores)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from asicsim._src.sweep import expand, load_results, load_spec


@pytest.mark.experiment  # 5-9 min: the whole demo (the main job)
def test_demo_runs_every_point_and_writes_the_report(tmp_path):
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "asicsim", "demo", "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    points = expand(load_spec("demo"))
    assert summary["points"] == len(points) and summary["failed"] == 0, summary["failures"]
    res = load_results(out)
    assert sorted(res["id"]) == sorted(p.id for p in points)
    assert {"train", "infer", "cost", "kernels"} == set(res["kind"])
    # the report's error bars and loss bands need seeds, its curves a shape
    assert res[res["kind"] == "train"].groupby(["workload", "recipe"]).size().min() >= 2
    assert load_results(out, "curves").groupby("id").size().min() >= 50
    html = (out / "report.html").read_text()
    for section in ("summary", "pareto", "curves", "numerics", "energy", "roofline", "deepbench", "baidu", "inputs"):
        assert f'<section id="{section}"' in html, section
    assert (out / "report.md").is_file()
    print(f"demo: {summary['seconds_total']} s")  # the budget is checked by hand (README: <= 5 min)


def test_demo_has_no_time_limit_and_reruns_failed_points(monkeypatch, tmp_path):
    from asicsim.cli import main

    # a slow or busy machine must not turn the demo's points into failures
    assert load_spec("demo").point_timeout_s is None
    seen = {}

    def sweep(spec, out, **kwargs):
        seen.update(kwargs, spec=spec)
        raise KeyboardInterrupt  # stop here: what the demo asked for is all this test needs

    monkeypatch.setattr("asicsim._src.sweep.run.sweep", sweep)
    assert main(["demo", "--out", str(tmp_path / "demo"), "--json"]) == 130
    assert seen["spec"] == "demo" and seen["retry_failed"] is True
