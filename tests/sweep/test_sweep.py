"""Running sweeps: records per point, resume, retry, the lock, failures of every kind recorded."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw.design_files import designs_dir
from asicsim._src.report.load import ENERGY_PARTS
from asicsim._src.sweep import SweepError, expand, load_results, load_spec
from asicsim._src.sweep.store import Store

# Both load (every field is in range: a workload file is checked when the spec loads) and fail
# when run: a kernel longer than digits' 64 pixels, and a 65536-wide transformer layer whose qkv
# weights (65536 x 196608 float64 drawn on the host) are 96 GiB.
BAD_WORKLOAD = """
name = "bad_kind"
dataset = "digits"
[model]
kind = "cnn1d"
channels = [4]
kernels = [1000]
strides = [1]
pads = [0]
"""


HUGE_WORKLOAD = """
name = "huge_mlp"
dataset = "pydoc"
[model]
kind = "transformer"
d_model = 65536
heads = 1
layers = 1
"""


def spec_text(tmp: Path) -> str:
    (tmp / "bad_kind.toml").write_text(textwrap.dedent(BAD_WORKLOAD))
    (tmp / "huge_mlp.toml").write_text(textwrap.dedent(HUGE_WORKLOAD))  # 96 GiB in one allocation
    return textwrap.dedent(f"""
        name = "small"
        seeds = [0]
        recipes = ["fp32", "bf16"]
        infer_recipes = ["int8_ptq_tensor"]
        designs = ["tpu_v1", "gpu_v100"]
        [[workloads]]
        name = "digits_mlp"
        run = ["train", "infer", "cost"]
        steps = 40
        eval_every = 20
        [[workloads]]
        name = "{tmp / 'bad_kind.toml'}"
        run = ["train"]
        [[workloads]]
        name = "digits_mlp"
        run = ["train"]
        steps = 40
        lr = 1e9
        [[workloads]]
        name = "{tmp / 'huge_mlp.toml'}"
        run = ["train"]
        [[kernels]]
        suite = "deepbench_gemm_inference_device"
        precision = "int8"
        """)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    path = tmp / "spec.toml"
    path.write_text(spec_text(tmp))
    out = tmp / "out"
    summary = sim.sweep(path, out, workers=2, progress=None)
    return path, out, summary


def test_every_point_has_one_record(swept):
    path, out, summary = swept
    points = expand(load_spec(path))
    raw = raw_records(out)
    assert sorted(r["id"] for r in raw) == sorted(p.id for p in points)  # each exactly once
    assert summary["points"] == len(points) == summary["ran"]
    res = load_results(out)
    assert len(res) == len(points) and res["id"].is_unique
    assert set(res["kind"]) == {"train", "infer", "cost", "kernels"}
    assert not list((out / "points").glob(".*.tmp"))


def test_failed_point_is_recorded_and_the_sweep_goes_on(swept):
    _, out, summary = swept
    res = load_results(out)
    bad = res[res["workload"] == "bad_kind"]
    assert len(bad) == 2  # fp32 and bf16 training of the broken workload
    assert (bad["status"] == "failed").all()
    assert bad["reason"].str.contains("cnn1d model: layer 0 has no output").all()
    oom = res[res["workload"] == "huge_mlp"]
    assert len(oom) == 2 and oom["reason"].str.startswith("out of memory (MemoryError: Unable to allocate").all()
    assert summary["failed"] == 2 + 2 and {f["kind"] for f in summary["failures"]} == {"train"}
    failing = ["bad_kind", "huge_mlp", "digits_mlp[lr=1000000000.0,steps=40]"]
    assert (res[~res["workload"].isin(failing)]["status"] == "done").all()


def test_diverged_run_is_diverged_not_failed_with_its_step_and_keeps_its_curves(swept):
    _, out, summary = swept
    res = load_results(out)
    div = res[res["workload"] == "digits_mlp[lr=1000000000.0,steps=40]"]
    assert len(div) == 2 and (div["status"] == "diverged").all() and div["diverged"].all()
    assert div["reason"].str.match(r"diverged at step \d+: ").all()
    assert (div["diverged_step"] >= 1).all() and div["diverged_cause"].notna().all()
    assert summary["diverged"] == 2 and {d["id"] for d in summary["divergences"]} == set(div["id"])
    assert not {f["id"] for f in summary["failures"]} & set(div["id"])
    curves = load_results(out, "curves")
    assert set(div["id"]) <= set(curves["id"])
    ok = res[(res["workload"] == "digits_mlp[eval_every=20,steps=40]") & (res["kind"] == "train")]
    assert len(ok) == 2 and (ok["status"] == "done").all()  # the same workload, told apart by overrides


def test_values_match_the_library_run_directly(swept):
    from asicsim._src.workloads.pricing import trace_costs, workload_trace
    from asicsim._src.workloads.training import train

    _, out, _ = swept
    res = load_results(out)
    row = res[(res["kind"] == "train") & (res["recipe"] == "bf16")
              & (res["workload"] == "digits_mlp[eval_every=20,steps=40]")].iloc[0]
    direct = train("digits_mlp", "bf16", seeds=(0,), steps=40, eval_every=20, stats=False)
    assert row["value"] == direct.runs[0].final  # bit-identical in another process
    curves = load_results(out, "curves")
    assert list(curves[curves["id"] == row["id"]]["step"]) == [20, 40]
    # tpu_v1 does not execute fp32 GEMMs: its cost point is NaN with the reason, not a partial sum
    nope = res[(res["kind"] == "cost") & (res["recipe"] == "fp32") & (res["design"] == "tpu_v1")].iloc[0]
    assert math.isnan(nope["time_s"]) and "does not execute" in nope["reason"]
    c = res[(res["kind"] == "cost") & (res["recipe"] == "fp32") & (res["design"] == "gpu_v100")].iloc[0]
    ops = trace_costs(workload_trace("digits_mlp", "fp32"), "gpu_v100", "fp32")
    assert c["time_s"] == pytest.approx(ops["time_s"].sum(), rel=1e-12)
    assert c["energy_j"] == pytest.approx(ops["energy_j"].sum(), rel=1e-12)
    parts = c[[f"energy_{p}_j" for p in ENERGY_PARTS]]
    assert float(np.nansum(parts.to_numpy(float))) == pytest.approx(c["energy_j"], rel=1e-9)
    assert c["energy_dynamic_j"] + c["energy_static_j"] == pytest.approx(c["energy_j"], rel=1e-12)
    k = res[(res["kind"] == "kernels") & (res["design"] == "gpu_v100")].iloc[0]
    kern = load_results(out, "kernels")
    assert kern[kern["id"] == k["id"]]["time_us"].sum() * 1e-6 == pytest.approx(k["time_s"])
    # int8 kernels on V100 run DP4A: 4 int8 MACs per lane per cycle, 4x the fp32 peak
    assert k["peak_ops_per_s"] == pytest.approx(4 * sim.load_design("gpu_v100").fp32_tflops * 1e12)


def raw_records(out: Path) -> list[dict]:
    """Every record in every file of the store, duplicates included."""
    raw = []
    for f in (out / "points").glob("*.json"):
        data = json.loads(f.read_text())
        raw += data["records"] if "records" in data else [data]
    return raw


def test_rerun_skips_finished_points_and_retry_failed_reruns_only_failed(swept):
    path, out, _ = swept
    before = {p.name: p.read_text() for p in (out / "points").glob("*.json")}
    again = sim.sweep(path, out, workers=2, progress=None)
    assert again["ran"] == 0 and again["skipped"] == again["points"]
    assert {p.name: p.read_text() for p in (out / "points").glob("*.json")} == before
    old = {r["id"]: r for r in Store(out).records()}
    retry = sim.sweep(path, out, workers=1, progress=None, retry_failed=True)
    assert retry["ran"] == 4 and retry["failed"] == 4 and retry["diverged"] == 2
    new = {r["id"]: r for r in Store(out).records()}
    failed_ids = {k for k, r in old.items() if r["status"] == "failed"}
    assert {k for k in old if old[k] != new[k]} == failed_ids  # only those reran, not the diverged
    assert len(load_results(out)) == len(old)  # the rerun replaced their records: none counted twice


def test_second_sweep_on_a_directory_refuses(swept, tmp_path):
    path, _, _ = swept
    out = tmp_path / "busy"
    with Store(out):
        with pytest.raises(SweepError, match="another sweep is running on this directory"):
            sim.sweep(path, out, workers=1, progress=None)
    # a lock held by a process that dies is released with it
    code = (f"from asicsim._src.sweep.store import Store; import os, signal; s = Store({str(out)!r}); s.lock(); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    subprocess.run([sys.executable, "-c", code], check=False)
    with Store(out):
        pass


def _timed_out_sweep(tmp_path: Path) -> tuple[Path, Path, str]:
    from asicsim._src.report import summary_text

    spec = tmp_path / "slow.toml"
    body = '[[workloads]]\nname = "digits_mlp"\nrun = ["train"]\nsteps = 30\neval_every = 30\n'
    spec.write_text('seeds = [0]\nrecipes = ["bf16"]\npoint_timeout_s = 1\n' + body)
    out = tmp_path / "out"
    s = sim.sweep(spec, out, workers=1, progress=None)
    assert (s["failed"], s["diverged"]) == (1, 0) and "timed out after" in s["failures"][0]["reason"]
    assert "--retry-failed" in s["failures"][0]["reason"]
    # a slow machine is no numerical verdict: a failure, not a divergence
    text = summary_text(out)
    assert "digits_mlp train bf16: no verdict: its 1 run failed (no result)" in text and "diverged" not in \
        text.replace("0 diverged", "")
    return spec, out, body


def test_timeout_fails_the_point_and_is_no_divergence(tmp_path):
    _timed_out_sweep(tmp_path)


@pytest.mark.slow
def test_retry_failed_reruns_a_timed_out_point_and_replaces_its_record(tmp_path, capsys):
    from asicsim.cli import main

    spec, out, body = _timed_out_sweep(tmp_path)
    spec.write_text('seeds = [0]\nrecipes = ["bf16"]\n' + body)  # no limit: the same point
    again = sim.sweep(spec, out, workers=1, progress=None)
    assert (again["ran"], again["failed"]) == (0, 1)  # a rerun keeps it ...
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "1", "--retry-failed", "--json"]) == 0
    retry = json.loads(capsys.readouterr().out)  # ... --retry-failed reruns it and its record replaces the old
    assert (retry["ran"], retry["done"], retry["failed"]) == (1, 1, 0)
    res = load_results(out)
    assert len(res) == 1 and res["status"].tolist() == ["done"] and 0 < res["value"].iloc[0] <= 1


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


@pytest.mark.slow
def test_killed_worker_fails_its_point_and_the_sweep_finishes(tmp_path):
    spec = tmp_path / "crash.toml"
    spec.write_text('seeds = [0]\nrecipes = ["fp32", "bf16"]\n'
                    '[[workloads]]\nname = "digits_mlp"\nrun = ["train"]\nsteps = 1500\neval_every = 1500\n')
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "asicsim", "sweep", str(spec), "--out", str(out),
                             "--workers", "1", "--json"], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        worker = None
        while worker is None and time.monotonic() < deadline:
            workers = [k for k in _children(proc.pid) if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]
            worker = workers[0] if workers else None
            time.sleep(0.2)
        assert worker is not None, "no worker process appeared"
        time.sleep(1)  # a worker is handed its job the moment it starts: it holds the first point now
        os.kill(worker, signal.SIGKILL)
        stdout, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    summary = json.loads(stdout)
    assert summary["points"] == 2 and summary["done"] == 1 and summary["failed"] == 1
    assert "worker process died (signal SIGKILL)" in summary["failures"][0]["reason"]


FP32_MODE = """[[pe.modes]]  # this copy also runs fp32 MACs (and fp16/bf16, which embed) at a stated rate
a = "fp32"
b = "fp32"
acc = "fp32"
rate = 0.25

"""


def test_design_space_priced_in_one_pass_equals_each_design_alone(tmp_path):
    from asicsim._src.workloads.deepbench import suite_costs
    from asicsim._src.workloads.pricing import trace_costs, workload_trace

    # the int8 edge design, given fp32 MACs (fp16 embeds in fp32) so the fp16 recipe runs on it
    base = tmp_path / "edge_fp32.toml"
    base.write_text((designs_dir() / "edge_int8_32x32.toml").read_text().replace(
        "[buffers.activations]", FP32_MODE + "[buffers.activations]"))
    spec = tmp_path / "space.toml"
    spec.write_text(textwrap.dedent("""
        recipes = ["fp16_mixed"]
        [[workloads]]
        name = "mnist1d_cnn"
        run = ["cost"]
        [[kernels]]
        suite = "deepbench_conv_inference_server"
        precision = "int8"
        [[design_space]]
        base = "BASE"
        vary = { "array.rows" = [8, 64], "array.dataflow" = ["os", "is"], "buffers.weights.capacity_kib" = [16, 1024] }
        """).replace("BASE", str(base)))
    out = tmp_path / "out"
    s = sim.sweep(spec, out, workers=1, progress=None)
    assert s["points"] == 16 and s["done"] == 16
    assert len(list((out / "points").glob("batch-*.json"))) == 2  # one file per job
    res = load_results(out)
    designs = dict(load_spec(spec).designs)
    trace = workload_trace("mnist1d_cnn", "fp16_mixed")
    for r in res.itertuples():
        d = designs[r.design]
        if r.kind == "cost":
            ops = trace_costs(trace, d, "fp16_mixed")
            for k in ("time_s", "energy_j", "energy_dynamic_j", "energy_static_j", "dram_bytes", "sram_bytes",
                      "macs"):
                assert getattr(r, k) == pytest.approx(float(np.nansum(ops[k])), rel=1e-12), k
        else:
            k = suite_costs("deepbench_conv_inference_server", d, precision="int8")
            assert r.energy_j == pytest.approx(k["energy_j"].sum(), rel=1e-12)
            assert r.energy_static_j == pytest.approx(k["energy_static_j"].sum(), rel=1e-12)
            assert r.energy_dynamic_j == pytest.approx(k["energy_dynamic_j"].sum(), rel=1e-9)
            assert r.time_s == pytest.approx(k["time_us"].sum() * 1e-6, rel=1e-12)
    assert len(load_results(out, "ops")) == 0  # a family keeps totals only


def test_kernel_formats_override_the_precision(tmp_path):
    from asicsim._src.workloads.deepbench import suite_costs

    spec = tmp_path / "fmt.toml"
    spec.write_text(textwrap.dedent("""
        designs = ["tpu_v1", "gpu_h100"]
        [[kernels]]
        suite = "deepbench_gemm_inference_device"
        precision = "int8"
        [[kernels]]
        suite = "deepbench_gemm_inference_device"
        formats = "act=fp8_e4m3, weight=fp8_e4m3, acc=fp32, emulate=4"
        """))
    res = load_results(sim.sweep(spec, tmp_path / "out", workers=1, progress=None)["out"])
    assert len(res) == 4 and (res["status"] == "done").all()
    fp8 = res[res["formats"].notna()].set_index("design")
    for d in ("tpu_v1", "gpu_h100"):
        # fp8 on int8-only tpu_v1: emulated at a stated slowdown (asicsim._src.hw.native); moot on a GPU
        ref = suite_costs("deepbench_gemm_inference_device", d, "act=fp8_e4m3,weight=fp8_e4m3,acc=fp32,emulate=4")
        assert fp8.loc[d, "energy_j"] == pytest.approx(ref["energy_j"].sum(), rel=1e-12)
    assert fp8.loc["gpu_h100", "peak_ops_per_s"] == pytest.approx(sim.load_design("gpu_h100").fp8_tflops * 1e12)
    with pytest.raises(SweepError, match=r"kernels\[0\].formats = 'act=int99'"):
        spec.write_text('designs = ["tpu_v1"]\n[[kernels]]\nsuite = "deepbench_gemm_inference_device"\nformats = "act=int99"\n')
        load_spec(spec)
