"""The ``asicsim`` command, run as a user runs it (a subprocess of the installed entry point's
module), checked against the library and against SCALE-Sim's own recorded numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

GOLDEN = Path(__file__).parent / "hw" / "golden"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "asicsim.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_formats_lists_the_catalog_with_maxima():
    out = run_cli("formats")
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines()[2:]}
    assert "448" in lines["float8_e4m3fn"] and "240" in lines["float8_e4m3"]
    assert {"bfloat16", "int8", "q7.8", "mxfp4", "flex16+5"} <= set(lines)


def test_formats_json_resolves_grammar_names():
    out = run_cli("formats", "e4m3fn", "e5m2", "q3.4", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["name"] for r in rows] == ["float8_e4m3fn", "float8_e5m2", "q3.4"]
    assert rows[0]["max"] == 448.0 and rows[1]["smallest_subnormal"] == 2.0**-16
    assert rows[2]["kind"] == "int" and rows[2]["eps"] == 2.0**-4


def test_unknown_format_is_one_clear_error():
    out = run_cli("formats", "float8_e4m3f")
    assert out.returncode == 2
    assert "unknown format 'float8_e4m3f'" in out.stderr and "float8_e4m3fn" in out.stderr


@pytest.mark.parametrize("run, kind", [("shipped_google/alexnet", "conv"), ("shipped_scale/vit_s", "gemm")])
def test_cost_scalesim_mode_reproduces_scalesim(run, kind):
    config, topology = run.split("/")
    args = ["cost", "--scalesim-config", str(GOLDEN / "inputs" / f"{config}.cfg"),
            "--topology", str(GOLDEN / "inputs" / f"{topology}.csv"), "--json"]
    out = run_cli(*args, *(["--gemm"] if kind == "gemm" else []))
    assert out.returncode == 0, out.stderr
    got = pd.DataFrame(json.loads(out.stdout))
    want = pd.read_csv(GOLDEN / "scalesim_golden.csv")
    want = want[want["run"] == run].reset_index(drop=True)
    assert len(got) == len(want) > 0
    for column in ("Total Cycles", "SRAM IFMAP Reads", "SRAM Filter Reads", "SRAM OFMAP Writes"):
        assert got[column].tolist() == want[column].tolist(), column
    assert got["Mapping Efficiency %"].tolist() == pytest.approx(want["Mapping Efficiency %"].tolist())


def test_cost_without_inputs_says_what_is_missing():
    out = run_cli("cost", "--json")
    assert out.returncode == 2
    assert "--scalesim-config" in out.stderr and "--topology" in out.stderr


def test_system_commands_are_wired():
    out = run_cli("scaling", "allreduce", "--elements", "1000000", "--ranks", "2,16", "--link", "pcie3", "--json")
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)) == 2
    out = run_cli("batching", "--model", "mlp", "--design", "edge_int8_32x32", "--rate", "100", "--requests",
                  "2000", "--json")
    assert out.returncode == 0, out.stderr
    out = run_cli("batching", "--model", "mlp", "--design", "edge_int8_32x32", "--rate", "0")
    assert out.returncode == 2 and "rate" in out.stderr


def test_train_and_infer_commands_are_wired():
    out = run_cli("train", "digits_mlp", "--recipe", "bf16", "--seeds", "1", "--steps", "60", "--json")
    assert out.returncode == 0, out.stderr
    assert "test_accuracy" in json.loads(out.stdout)
    out = run_cli("train", "digits_mlp", "--recipe", "bf61")
    assert out.returncode == 2 and "bf16" in out.stderr
