"""Designs side by side are labelled by the name or path as given (as a sweep spec's ``designs``
list labels them): a copied design file that keeps ``name = "edge_int8_32x32"`` with other rows
is never shown under the catalog design's name, in any command that prices several designs."""

from __future__ import annotations

import dataclasses
import json

import pytest

from asicsim._src.hw import Gemm, cost_table, load_design
from asicsim._src.hw.design_checks import DesignError
from asicsim._src.hw.design_files import designs_dir, labelled_designs
from asicsim.cli import main

NAME = "edge_int8_32x32"


@pytest.fixture
def copy(tmp_path) -> str:
    """The catalog design with a 16-row array, still named edge_int8_32x32."""
    text = (designs_dir() / f"{NAME}.toml").read_text(encoding="utf-8")
    assert "rows = 32" in text
    path = tmp_path / "copy.toml"
    path.write_text(text.replace("rows = 32", "rows = 16", 1), encoding="utf-8")
    assert load_design(path).name == NAME and load_design(path) != load_design(NAME)
    return str(path)


def _json(argv, capsys):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_labelled_designs_are_as_given(copy):
    d = load_design(NAME)
    assert [label for label, _ in labelled_designs([NAME, copy, d])] == [NAME, copy, NAME]
    assert labelled_designs(copy)[0][1] == load_design(copy)
    renamed = dataclasses.replace(load_design(copy), name=NAME)
    with pytest.raises(DesignError, match=f"{NAME}.*two different designs are named alike"):
        labelled_designs([d, renamed])  # two objects of one name, different content


def test_cost_table_and_command(copy, capsys):
    df = cost_table([Gemm(64, 64, 64)], [NAME, copy]).frame()
    assert list(df["design"]) == [NAME, copy] and df["cycles"].nunique() == 2
    rows = _json(["cost", "--design", NAME, "--design", copy, "--gemm", "64,64,64", "--json"], capsys)
    assert [r["design"] for r in rows] == [NAME, copy]
    assert main(["cost", "--design", NAME, "--design", copy, "--gemm", "64,64,64"]) == 0
    text = capsys.readouterr().out
    assert text.count(copy) >= 2  # its table row and its mapping line


def test_suite_costs_command(copy, capsys):
    rows = _json(["cost", "--workload", "deepbench_gemm_inference_server", "--design", NAME, "--design", copy,
                  "--json"], capsys)
    n = len(rows) // 2
    assert [r["design"] for r in rows] == [NAME] * n + [copy] * n


def test_trace_command_totals_per_design(copy, capsys):
    # both designs under one label summed their totals into one row
    out = _json(["trace", "digits_mlp", "--recipe", "int8_ptq_tensor", "--design", NAME, "--design", copy,
                 "--json"], capsys)
    totals = [r for r in out["cost"] if r["role"] == "total"]
    assert [r["design"] for r in totals] == [NAME, copy]
    forward = {r["design"]: r["time_s"] for r in out["cost"] if r["role"] == "forward"}
    assert set(forward) == {NAME, copy} and forward[NAME] != forward[copy]


def test_batching_command(copy, capsys):
    out = _json(["batching", "--model", "mlp", "--design", NAME, "--design", copy, "--rate", "100",
                 "--requests", "500", "--json"], capsys)
    assert [d["design"] for d in out["designs"]] == [NAME, copy]
