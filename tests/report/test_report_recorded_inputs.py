"""The report reads only what the sweep recorded: a user's workload file, gone since the sweep, is
shown in the inputs section as the sweep loaded it (not re-resolved, which said "unknown training
workload"), and the [report] table of a spec is checked when the spec is loaded."""

from __future__ import annotations

import re

import pytest

from asicsim._src.report import write_report
from asicsim._src.sweep import SweepError, sweep
from asicsim._src.sweep.spec import load_spec, spec_dict
from asicsim._src.workloads.workload import workloads_dir

SPEC = """name = "mine"
designs = ["dc_bf16_128x128", "gpu_v100"]
recipes = ["bf16"]

[[workloads]]
name = "{path}"
run = ["cost"]
batch = 32

[report]
objective = "time"
"""


def test_a_user_workload_file_is_shown_as_recorded(tmp_path):
    text = (workloads_dir() / "mnist1d_logreg.toml").read_text()
    mine = tmp_path / "my_logreg.toml"
    mine.write_text(text.replace('name = "mnist1d_logreg"', 'name = "my_logreg"'))
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(path=mine))
    out = tmp_path / "out"
    assert sweep(spec, out, workers=1, progress=None)["failed"] == 0
    mine.unlink()  # the report must not need it
    info = write_report(out, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    inputs = re.search(r'<section id="inputs">(.*?)</section>', page, re.S).group(1)
    assert "unknown training workload" not in page and "cannot load" not in page
    assert "workloads (after the spec&#x27;s overrides) as the sweep loaded them" in inputs
    assert "&quot;name&quot;: &quot;my_logreg&quot;" in inputs and "&quot;batch&quot;: 32" in inputs
    assert "recipes as the sweep loaded them" in inputs
    answer = re.search(r'<section id="answer">(.*?)</section>', page, re.S).group(1)
    assert 'objective = &quot;time&quot;' in answer  # the recorded [report] table
    assert "my_logreg (training): bf16 on dc_bf16_128x128" in answer and "faster than gpu_v100" in answer
    assert "accuracy not measured" in answer
    assert info["sections"][0] == "answer"


def _spec(tmp_path, report: str):
    path = tmp_path / "s.toml"
    top, table = (report, "") if report.startswith("report =") else ("", report)
    path.write_text(top + 'designs = ["tpu_v1"]\n[[kernels]]\nsuite = "deepbench_gemm_inference_server"\n' + table)
    return path


def test_the_report_table_is_checked_at_load(tmp_path):
    ok = load_spec(_spec(tmp_path, '[report]\nobjective = "edp"\nmax_accuracy_drop = 1\n'))
    assert ok.report == {"objective": "edp", "max_accuracy_drop": 1.0, "max_loss_increase": 0.01, "scope": "board"}
    assert spec_dict(ok)["report"] == ok.report
    assert load_spec(_spec(tmp_path, "")).report["objective"] == "energy"
    with pytest.raises(SweepError) as err:
        load_spec(_spec(tmp_path, '[report]\nobjective = "speed"\nmax_loss_increase = "0.1"\ncolor = 1\n'
                                     'scope = "die"\n'))
    msg = str(err.value)
    assert msg.startswith(str(tmp_path / "s.toml"))
    assert "report.objective = 'speed': allowed: ['energy', 'time', 'edp']" in msg
    assert "report.max_loss_increase = '0.1': allowed: a finite number >= 0" in msg
    assert ("report.color: no such field; fields are ['max_accuracy_drop', 'max_loss_increase', 'objective', "
            "'scope']") in msg
    assert "report.scope = 'die': allowed: ['core', 'chip', 'board']" in msg
    with pytest.raises(SweepError, match=r"report = 3: allowed: a table \[report\]"):
        load_spec(_spec(tmp_path, "report = 3\n"))
