"""DeepBench kernel suites as workloads: the shipped files, their operations, their prices, the CLI."""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import asicsim as sim
from asicsim._src.hw import list_designs, load_design
from asicsim._src.hw.operations import RNN_CELLS, AllReduce, Conv, Gemm, OperationError, Rnn
from asicsim._src.hw.pricing import BOUNDS
from asicsim._src.workloads import (
    PRECISIONS,
    WorkloadError,
    list_suites,
    load_suite,
    suite_costs,
    workloads_dir,
)
from asicsim._src.workloads.deepbench import SHAPE_COLUMNS, RecurrentRnn

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "data" / "deepbench"
# kernel counts per suite, from data/deepbench/README.md (checked there against DeepBench's code)
COUNTS = {
    "deepbench_gemm_train": 160, "deepbench_gemm_inference_server": 75,
    "deepbench_gemm_inference_device": 13, "deepbench_conv_train": 94,
    "deepbench_conv_inference_server": 107, "deepbench_conv_inference_device": 16,
    "deepbench_rnn_train": 53, "deepbench_rnn_inference_server": 69,
    "deepbench_rnn_inference_device": 3, "deepbench_sparse_gemm_inference_server": 24,
    "deepbench_sparse_gemm_inference_device": 8, "deepbench_allreduce": 35,
}
SYSTOLIC = [d for d in list_designs() if not d.startswith("gpu_")]
PRICED = [n for n in COUNTS if n != "deepbench_allreduce"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asicsim.cli", *args], capture_output=True,
                          text=True, timeout=120)


def test_every_suite_is_shipped_and_loads_with_deepbench_counts():
    assert list_suites() == sorted(COUNTS)
    for name, n in COUNTS.items():
        s = load_suite(name)
        assert (s.name, len(s), len(s.operations())) == (name, n, n)
        assert list(s.shapes.columns) == list(SHAPE_COLUMNS[s.kind])
        if "idx" in s.table:  # position in DeepBench's C++ list
            assert s.table["idx"].tolist() == list(range(n))


def test_shipped_files_are_the_source_rows_unchanged():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_deepbench_workloads.py"),
                          "--check"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr  # regenerated == shipped
    for kind in ("gemm", "conv", "rnn", "sparse_gemm"):
        with open(SOURCE / f"{kind}.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for set_ in {r["set"] for r in rows}:
            with open(workloads_dir() / f"deepbench_{kind}_{set_}.csv", newline="") as f:
                shipped = list(csv.DictReader(f))
            assert shipped == [{k: v for k, v in r.items() if k != "set"} for r in rows if r["set"] == set_]


def test_precisions_are_deepbenchs():
    p = {n: load_suite(n).precisions for n in COUNTS}
    assert p["deepbench_gemm_train"] == ["fp16_fp32math", "fp16_mixed", "fp32"]
    assert p["deepbench_gemm_inference_server"] == p["deepbench_conv_inference_server"] == ["int8"]
    assert p["deepbench_sparse_gemm_inference_server"] == p["deepbench_rnn_inference_server"] == ["fp32"]
    assert p["deepbench_conv_inference_device"] == ["fp32"]
    assert p["deepbench_rnn_inference_device"] == []  # DeepBench publishes no results for it
    assert set().union(*p.values()) <= set(PRECISIONS)


def test_conv_output_sizes_are_deepbenchs_p_and_q_for_every_row():
    for name in [n for n in COUNTS if "_conv_" in n]:
        s = load_suite(name)
        ops = s.operations()
        assert [op.out_h for op in ops] == s.table["P_out_h"].tolist()
        assert [op.out_w for op in ops] == s.table["Q_out_w"].tolist()
        # R is the filter height (along H), S the width (along W)
        assert [(op.kernel_h, op.kernel_w, op.in_h, op.in_w) for op in ops] == \
            list(zip(s.shapes["R"], s.shapes["S"], s.shapes["H"], s.shapes["W"], strict=True))


def _macs(op) -> int:
    return sum(low.M * low.N * low.K * low.reps for low in op.lower())


def test_flops_from_the_operations_are_deepbenchs_counts():
    for name in PRICED:
        s = load_suite(name)
        ops, t = s.operations(), s.table
        macs = np.array([_macs(op) for op in ops], dtype=np.int64)
        if s.kind == "gemm":
            assert (2 * macs == t["flops"]).all()
        elif s.kind == "conv":
            assert (2 * macs == t["flops_fwd"]).all()
        elif s.kind == "rnn":  # recurrent part only (CUDNN_SKIP_INPUT)
            assert (2 * macs == t["flops_fwd"]).all()
            assert [RNN_CELLS[op.cell] for op in ops] == t["gates"].tolist()
        else:  # sparse: the dense problem, and nnz of the sparse operand (now the weight)
            assert (2 * macs == t["dense_flops"]).all()
            nnz = np.array([(1 - op.weight_sparsity) * op.N * op.K for op in ops])
            assert np.abs(nnz - t["nnz_A"]).max() <= 0.5
            assert (2 * t["nnz_A"] * t["N"] == t["sparse_useful_flops"]).all()
        assert np.array_equal(s.flops(), t[{"gemm": "flops", "conv": "flops_fwd", "rnn": "flops_fwd",
                                            "sparse_gemm": "sparse_useful_flops"}[s.kind]])


def test_operation_mapping_by_kind():
    g = load_suite("deepbench_gemm_train")
    assert g.operations()[20] == Gemm(1760, 16, 1760, a_transposed=True)  # idx 20: TN
    r = load_suite("deepbench_rnn_train").operations()[0]
    assert isinstance(r, Rnn) and (r.cell, r.hidden, r.batch, r.steps) == ("vanilla", 1760, 16, 50)
    (low,) = r.lower()  # no input projection: the recurrent GEMMs only
    assert (low.M, low.N, low.K, low.reps, low.shared_weights) == (16, 1760, 1760, 50, True)
    assert isinstance(r, RecurrentRnn) and r.elementwise() is not None
    sp = load_suite("deepbench_sparse_gemm_inference_server")
    # DeepBench: sparse A (7680 x 2560) times dense B (2560 x 1); asicsim: C^T = B^T A^T, A^T the weight
    assert sp.operations()[0] == Gemm(1, 7680, 2560, weight_sparsity=0.95, sparse_format="csr")
    ar = load_suite("deepbench_allreduce").operations()
    assert ar[0] == AllReduce(100000, 2) and ar[0].bytes == 400000


@pytest.mark.parametrize("design", SYSTOLIC)
def test_every_suite_prices_on_every_systolic_design(design):
    for name in PRICED:
        s = load_suite(name)
        df = suite_costs(s, design)
        assert len(df) == len(s) and (df["design"] == load_design(design).name).all()
        assert list(df.columns[:len(s.shapes.columns)]) == list(s.shapes.columns)
        assert df[list(s.shapes.columns)].equals(s.shapes)
        assert (df["time_us"] > 0).all() and np.isfinite(df[["time_us", "energy_j", "dram_bytes"]]).all().all()
        assert set(df["bound"]) <= set(BOUNDS)
        np.testing.assert_allclose(df["tflops"], s.flops() / (df["time_us"] * 1e6), rtol=1e-12)
        if s.kind in ("gemm", "conv", "rnn"):  # DeepBench's count is the model's dense count
            np.testing.assert_allclose(df["tflops"], df["tops"], rtol=1e-12)
        else:
            assert (df["tflops"] < df["tops"]).all()


def test_designs_side_by_side_and_precisions():
    a = suite_costs("deepbench_gemm_inference_device", ["tpu_v1", "dc_bf16_128x128"])
    assert len(a) == 26 and a["design"].tolist() == ["tpu_v1"] * 13 + ["dc_bf16_128x128"] * 13
    own = suite_costs("deepbench_gemm_inference_device", "dc_bf16_128x128")
    pd.testing.assert_frame_equal(a.iloc[13:].reset_index(drop=True), own)
    assert (own["format_act"] == "bfloat16").all() and own["precision"].isna().all()
    # fp16 is not a bf16 value set: on the bf16 array it runs only emulated (asicsim._src.hw.native)
    with pytest.raises(OperationError, match="does not execute act=float16"):
        suite_costs("deepbench_gemm_inference_device", "dc_bf16_128x128", precision="fp16_mixed")
    fp = suite_costs("deepbench_gemm_inference_device", "dc_bf16_128x128", "emulate=2", precision="fp16_mixed")
    assert fp[["format_act", "format_weight", "format_acc", "format_out"]].drop_duplicates().values.tolist() \
        == [["float16", "float16", "float32", "float16"]]
    mixed = suite_costs("deepbench_gemm_inference_device", "tpu_v1", "acc=fp32,emulate=2", precision="int8")
    assert (mixed["format_acc"] == "float32").all() and (mixed["format_weight"] == "int8").all()
    with pytest.raises(WorkloadError, match=re.escape("precision = 'fp64'; allowed: fp32 | fp16_fp32math")):
        suite_costs("deepbench_gemm_train", "tpu_v1", precision="fp64")


def test_rnn_on_a_design_without_a_vector_unit_prices_the_gemms_and_says_so():
    with_vec = suite_costs("deepbench_rnn_inference_device", "tpu_v1")
    assert (with_vec["note"] == "").all()
    no_vec = suite_costs("deepbench_rnn_inference_device", "scalesim_default")
    assert no_vec["note"].str.contains("no vector unit").all()


def test_hand_checked_conv_row_and_sparse_row():
    # conv train idx 0 (DeepSpeech): W=700 H=161 C=1 N=4 K=32 R=5 S=20, no padding, stride 2x2
    s = load_suite("deepbench_conv_train")
    op = s.operations()[0]
    assert op == Conv(161, 700, 1, 32, 5, 20, stride=2, stride_w=2, padding=0, padding_w=0, batch=4)
    # P = (161 - 5) // 2 + 1 = 79, Q = (700 - 20) // 2 + 1 = 341; im2col GEMM (4*79*341) x 32 x (5*20*1)
    (low,) = op.lower()
    assert (op.out_h, op.out_w, low.M, low.N, low.K) == (79, 341, 107756, 32, 100)
    assert 2 * 107756 * 32 * 100 == 689638400 == s.table["flops_fwd"][0]
    row = suite_costs(s, "tpu_v1").iloc[0]
    direct = sim.cost(op, "tpu_v1").row()
    assert row["time_us"] == direct["time_us"] and row["energy_j"] == direct["energy_j"]
    # 100 x 32 weights fit one 256 x 256 fold: at least one streamed row per cycle for M = 107756 rows
    assert row["time_us"] >= 107756 / 700e6 * 1e6
    assert math.isclose(row["tflops"], 689638400 / (row["time_us"] * 1e-6) / 1e12)
    # sparse server idx 0: A 7680 x 2560 at 95 % zeros (nnz 983040) times B 2560 x 1
    sp = suite_costs("deepbench_sparse_gemm_inference_server", "tpu_v1").iloc[0]
    assert math.isclose(sp["tflops"], 2 * 983040 * 1 / (sp["time_us"] * 1e-6) / 1e12)
    assert math.isclose(sp["tops"], 2 * 7680 * 2560 / (sp["time_us"] * 1e-6) / 1e12)


def test_allreduce_suite_prices_on_link_topologies_with_the_ring_model():
    from asicsim._src.hw.links import LINKS, TOPOLOGIES, allreduce_time, get_topology

    df = suite_costs("deepbench_allreduce", ["deepbench_titanx_pascal", "nvlink"])
    assert len(df) == 70 and list(df.columns[:2]) == ["size_floats", "ranks"]
    assert df["design"].tolist() == ["deepbench_titanx_pascal"] * 35 + ["nvlink"] * 35
    r = allreduce_time(AllReduce(100000, 2), TOPOLOGIES["deepbench_titanx_pascal"])
    assert df["time_us"][0] == r.time_s * 1e6 and df["bytes"][0] == 400000
    # hand check, 100000 fp32 over 2 ranks on one flat NVLink: overhead + 2(n-1) = 2 steps of
    # (latency + bytes / (n * achieved bandwidth))
    link, overhead_us = LINKS["nvlink"], get_topology("nvlink").overhead_us
    step_us = link.latency_us + 400000 / (2 * link.bandwidth_gbps * link.efficiency * 1e9) * 1e6
    assert df["time_us"][35] == pytest.approx(overhead_us + 2 * step_us)
    with pytest.raises(WorkloadError, match="link topology, not on a chip design: design = 'tpu_v1'"):
        suite_costs("deepbench_allreduce", "tpu_v1")
    with pytest.raises(WorkloadError, match="allowed: none"):
        suite_costs("deepbench_allreduce", "nvlink", precision="fp16_mixed")


def test_unknown_suite_names_close_matches():
    with pytest.raises(WorkloadError, match="did you mean deepbench_gemm_train"):
        load_suite("deepbench_gem_train")
    with pytest.raises(WorkloadError, match="does not exist"):
        load_suite("no/such/file.csv")


@pytest.mark.parametrize(("column", "value", "allowed"), [
    ("M", "12x", "an integer >= 1"), ("K", "0", "an integer >= 1"),
    ("a_transposed", "yes", "0 or 1"), ("precisions", "fp64", "tokens fp32 | fp16_fp32math"),
])
def test_malformed_file_names_file_row_field_value_allowed(tmp_path, column, value, allowed):
    rows = [{"M": "64", "N": "32", "K": "16", "a_transposed": "0", "b_transposed": "1",
             "precisions": "fp32"} for _ in range(3)]
    rows[1][column] = value
    path = tmp_path / "mine.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(WorkloadError) as err:
        load_suite(path)
    msg = str(err.value)
    assert str(path) in msg and "row 2 (line 3)" in msg and f"field {column} = {value!r}" in msg
    assert f"allowed: {allowed}" in msg


def test_a_suite_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("M,N,K,a_transposed,b_transposed,precisions\n64,32,16,0,1,fp32 \xe9\n"
                     .encode("latin-1"))
    with pytest.raises(WorkloadError, match=rf"{path}: not UTF-8 text \(byte 0xe9 at offset 61\)"):
        load_suite(path)


def test_malformed_conv_output_size_and_unknown_columns(tmp_path):
    src = (workloads_dir() / "deepbench_conv_inference_device.csv").read_text().splitlines()
    head, first = src[0], src[1].split(",")
    cols = head.split(",")
    first[cols.index("P_out_h")] = "999"
    bad = tmp_path / "conv.csv"
    bad.write_text("\n".join([head, ",".join(first)]) + "\n")
    with pytest.raises(WorkloadError, match=r"row 1 \(line 2\): field P_out_h = 999; allowed: 112"):
        load_suite(bad)
    odd = tmp_path / "odd.csv"
    odd.write_text("X,Y\n1,2\n")
    with pytest.raises(WorkloadError, match="name no kernel kind; allowed"):
        load_suite(odd)


def test_user_csv_without_deepbench_extras(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("type,hidden,batch,timesteps\ngru,512,4,10\n")
    s = load_suite(path)
    assert s.kind == "rnn" and s.name == "mine"
    df = suite_costs(path, "tpu_v1")
    assert df["tflops"][0] == pytest.approx(2 * 3 * 512**2 * 4 * 10 / (df["time_us"][0] * 1e6))


def test_cli_cost_workload_json_one_row_per_kernel():
    out = run_cli("cost", "--workload", "deepbench_gemm_train", "--design", "tpu_v1", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) == 160
    assert list(rows[0])[:9] == ["M", "N", "K", "a_transposed", "b_transposed", "time_us", "tflops",
                                 "tops", "energy_j"]
    assert {"dram_bytes", "bound", "design", "format_act"} <= set(rows[0])
    lib = suite_costs("deepbench_gemm_train", "tpu_v1")
    assert [r["time_us"] for r in rows] == lib["time_us"].tolist()
    assert (rows[40]["M"], rows[40]["N"], rows[40]["b_transposed"]) == (1760, 7133, True)


def test_cli_workloads_and_two_designs_and_errors(tmp_path):
    out = run_cli("workloads", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)  # training workloads first, then the kernel suites
    assert {r["name"]: r["kernels"] for r in rows if r["kind"].startswith("suite:")} == COUNTS
    path = tmp_path / "g.csv"
    path.write_text("M,N,K,a_transposed,b_transposed\n128,128,128,0,0\n")
    out = run_cli("cost", "--workload", str(path), "--design", "tpu_v1", "--design", "fp8_128x128",
                  "--precision", "fp16_mixed", "--formats", "emulate=4")  # fp16 runs on neither natively
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "tpu_v1" in lines[1] and "fp8_128x128" in lines[2] and lines[3] == ""
    # then the two designs' suite totals compared at the board scope (issue 30)
    assert lines[4].startswith("Compared board to board") and lines[5].lstrip().startswith("fp8_128x128 uses")
    assert len(lines) == 6
    bad = run_cli("cost", "--workload", "deepbench_gemm_tran", "--design", "tpu_v1")
    assert bad.returncode == 2 and "did you mean deepbench_gemm_train" in bad.stderr
    bad = run_cli("cost", "--workload", "deepbench_gemm_train", "--design", "tpu_v1", "--gemm", "8,8,8")
    assert bad.returncode == 2 and "give no --gemm" in bad.stderr


GPUS = [d for d in ("gpu_v100", "gpu_p100", "gpu_t4") if d in list_designs(None)]


@pytest.mark.skipif(not GPUS, reason="no GPU designs in the catalog")
@pytest.mark.parametrize("design", GPUS)
def test_every_suite_prices_on_gpu_designs_in_deepbenchs_precisions(design):
    int8_dot = load_design(design).int8_path is not None
    for name in PRICED:
        s = load_suite(name)
        for precision in s.precisions or [None]:
            if precision == "int8" and not int8_dot:  # GP100 (sm_60): no DP4A, no int32-accumulating path
                with pytest.raises(OperationError, match=r"int8_fp32math \(int8 x int8 -> float32\)"):
                    suite_costs(s, design, precision=precision)
                continue
            df = suite_costs(s, design, precision=precision)
            assert len(df) == len(s) and (df["design"] == design).all()
            assert (df["time_us"] > 0).all() and np.isfinite(df[["energy_j", "dram_bytes"]]).all().all()
            np.testing.assert_allclose(df["tflops"], s.flops() / (df["time_us"] * 1e6), rtol=1e-12)
            if s.kind != "sparse_gemm":  # a model that counts other work than DeepBench says so
                differs = ~np.isclose(df["tops"], df["tflops"], rtol=1e-6)
                assert (df["note"].str.contains("x DeepBench's flops") == differs).all()
            if s.kind == "rnn":  # the GPU model runs them without input projection, as DeepBench
                np.testing.assert_allclose(df["tops"], df["tflops"], rtol=1e-9)


@pytest.mark.skipif("gpu_v100" not in list_designs(None), reason="no gpu_v100 design")
def test_asic_and_gpu_side_by_side_and_the_issues_command():
    out = run_cli("cost", "--workload", "deepbench_gemm_train", "--design", "gpu_v100",
                  "--formats", "act=fp16,weight=fp16,acc=fp32", "--json")
    # fp16 on the bf16 array: emulated at a stated slowdown; on the GPU emulate is moot
    df = suite_costs("deepbench_gemm_train", ["dc_bf16_128x128", "gpu_v100"], "act=fp16,weight=fp16,acc=fp32,emulate=2")
    assert df["design"].value_counts().to_dict() == {"dc_bf16_128x128": 160, "gpu_v100": 160}
    assert (df["format_act"] == "float16").all()
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) == 160 and rows[0]["design"] == "gpu_v100" and rows[0]["M"] == 1760
    assert [r["time_us"] for r in rows] == df["time_us"][160:].tolist()


@pytest.mark.slow
def test_every_suite_prices_on_every_catalog_design_in_every_precision():
    """Issue 4's done-criterion: every DeepBench suite runs on every GPU and systolic design."""
    designs = list_designs(None)
    assert any(d.startswith("gpu_") for d in designs) and "tpu_v1" in designs
    rows = 0
    for name in list_suites():
        suite = load_suite(name)
        if suite.kind == "allreduce":  # priced on link topologies (tests/system)
            continue
        for design in designs:
            for precision in suite.precisions or [None]:
                # a precision a systolic design does not execute runs emulated at a stated slowdown
                df = suite_costs(suite, design, "emulate=8", precision=precision)
                assert len(df) == len(suite.table), (name, design, precision)
                assert (df.time_us > 0).all() and (df.energy_j > 0).all(), (name, design, precision)
                assert df.bound.isin(BOUNDS).all()
                rows += len(df)
    assert rows > 20_000
