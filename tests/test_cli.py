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


# --- numeric options: the real problem, not argparse's "invalid int value" / "unrecognized" ---

BAD_NUMBERS = [
    (["cost", "--design", "tpu_v1", "--gemm", "-5,10,10"], "--gemm '-5,10,10': M = -5; allowed: an integer >= 1"),
    (["cost", "--design", "tpu_v1", "--gemm", "5,0,10"], "N = 0; allowed: an integer >= 1"),
    (["cost", "--design", "tpu_v1", "--conv", "8,8,3,-4,3,3"], "out_channels = -4; allowed: an integer >= 1"),
    (["cost", "--design", "tpu_v1", "--rnn", "gru,-8,4,2"], "hidden = -8; allowed: an integer >= 1"),
    (["train", "digits_mlp", "--steps", "-5"], "--steps: must be an integer in [1, 10000000]; got '-5'"),
    (["train", "digits_mlp", "--seeds", "0"], "--seeds: must be an integer in [1, 1000]; got '0'"),
    (["train", "digits_mlp", "--batch", "-1"], "--batch: must be an integer in [1, 1048576]; got '-1'"),
    (["train", "digits_mlp", "--eval-every", "0"], "--eval-every: must be an integer in [1, 10000000]; got '0'"),
    (["train", "digits_mlp", "--lr", "nan"], "--lr: must be a number > 0; got 'nan'"),
    (["train", "digits_mlp", "--lr", "-1e-3"], "--lr: must be a number > 0; got '-1e-3'"),
    (["infer", "digits_mlp", "--recipe", "int8_ptq_tensor", "--seeds", "-1"], "--seeds: must be an integer in [1, 1000]"),
    (["infer", "digits_mlp", "--recipe", "int8_ptq_tensor", "--steps", "0"], "--steps: must be an integer in [1, 10000000]"),
    (["trace", "digits_mlp", "--design", "tpu_v1", "--batch", "0"], "--batch: must be an integer in [1, 1048576]; got '0'"),
    (["sweep", "demo", "--out", "x", "--workers", "0"], "--workers: must be an integer in [1, 1024]; got '0'"),
    (["demo", "--workers", "-2"], "--workers: must be an integer in [1, 1024]; got '-2'"),
    # issue 29 item 17: a huge number is a typo, not a run that never ends or a memory traceback
    (["train", "digits_mlp", "--steps", "99999999999999999999999"], "--steps: must be an integer in [1, 10000000]"),
    (["train", "digits_mlp", "--seeds", "100000"], "--seeds: must be an integer in [1, 1000]"),
    (["trace", "digits_mlp", "--design", "tpu_v1", "--batch", "99999999999"], "--batch: must be an integer in [1, 1048576]"),
    (["sweep", "demo", "--out", "x", "--workers", "10000000"], "--workers: must be an integer in [1, 1024]"),
    (["batching", "--model", "mlp", "--design", "edge_int8_32x32", "--rate", "100", "--max-batch", "-1"],
     "max_batch = -1; allowed: an integer >= 1"),
    (["scaling", "allreduce", "--elements", "-5", "--ranks", "2", "--link", "pcie3"],
     "elements = -5; allowed: an integer in [1, "),
]


@pytest.mark.parametrize("argv, message", BAD_NUMBERS, ids=[" ".join(a[:1] + a[-2:]) for a, _ in BAD_NUMBERS])
def test_bad_numeric_option_says_what_is_allowed(argv, message, capsys):
    from asicsim.cli import main

    try:
        rc = main(argv)
    except SystemExit as exit_:  # argparse's own exit
        rc = exit_.code
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and "Traceback" not in err
    assert "invalid int value" not in err and "unrecognized arguments" not in err


def test_unwritable_out_and_report_paths_are_one_line_errors(tmp_path, capsys):
    from asicsim.cli import main

    a_file = tmp_path / "file"
    a_file.write_text("")
    spec = tmp_path / "spec.toml"
    spec.write_text('designs = ["tpu_v1"]\n[[kernels]]\nsuite = "deepbench_gemm_inference_server"\n')
    assert main(["sweep", str(spec), "--out", str(a_file / "out"), "--workers", "1", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "asicsim sweep: error:" in err and str(a_file) in err
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "1", "--json"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "out"), "-o", str(a_file / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "asicsim report: error:" in err and str(a_file) in err
