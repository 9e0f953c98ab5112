"""GPU baseline: designs/gpu_*.toml, the GpuDesign spec, the cost model's hand cases, and its error
on DeepBench's measured sheets (asicsim/_src/hw/gpu_model.py, benchmarks/gpu_calibration.py)."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from benchmark_scripts import load_benchmark

import asicsim as sim
from asicsim._src.hw import gpu_model as gm
from asicsim._src.hw.cost import parse_formats
from asicsim._src.hw.design_files import designs_dir, list_designs, load_design
from asicsim._src.hw.gpu import DesignError, GpuDesign, precision_path
from asicsim._src.hw.gpu_cost import gpu_cost_many, resolve_gpu_formats
from asicsim._src.hw.gpu_model import load_fit
from asicsim._src.hw.operations import AllReduce, Conv, Elementwise, Gemm, OperationError, Rnn
from asicsim.cli import main

ROOT = Path(__file__).resolve().parents[2]
GPUS_CSV = ROOT / "data" / "gpus.csv"
MEASURED = ROOT / "data" / "deepbench" / "measured"
GPU_NAMES = list_designs("gpu")

#: A fit with no second-order effects, for hand calculations: 90 % of peak, no tile or CTA
#: overhead, a 5 us launch, a hard max of compute and memory, no power cap (tiny energy per op);
#: no generation's own constants (``name@Gen``), so the shared values below hold for every GPU.
HAND = {k: v for k, v in load_fit().items() if "@" not in k} | {"eff_simt": 0.9, "eff_tensor": 0.9, "eff_dp4a": 0.9, "tile_cost": 0.0,
                     "cta_k_overhead": 0.0, "launch_us": 5.0, "bw_eff": 1.0, "smax_p": 60.0, "smax_p_stream": 60.0,
                     "e_simt_pj_12nm": 1e-3}


def hand_cost(op, design="gpu_v100", formats=None, fit=HAND):
    return gpu_cost_many([op], load_design(design), formats, fit=fit)[0]


# --- designs --------------------------------------------------------------------------------
def test_every_gpu_of_the_csv_has_a_design():
    expected = {"gpu_m40", "gpu_titanx_maxwell", "gpu_titanx_pascal", "gpu_titanxp", "gpu_gtx1080ti",
                "gpu_p4", "gpu_p100", "gpu_p100_sxm2", "gpu_v100", "gpu_t4", "gpu_a100", "gpu_a100_80gb",
                "gpu_h100", "gpu_h200", "gpu_b200"}
    assert set(GPU_NAMES) == expected
    assert not set(GPU_NAMES) & set(list_designs())  # the default listing is the systolic catalog
    assert set(list_designs(None)) == set(list_designs()) | expected
    with pytest.raises(ValueError, match="kind"):
        list_designs("tpu")


@pytest.mark.parametrize("name", GPU_NAMES)
def test_gpu_design_loads_and_names_its_sources(name):
    d = load_design(name)
    assert isinstance(d, GpuDesign) and d.name == name and d.kind == "gpu"
    assert d.fp32_tflops > 0 and d.bandwidth_gbps > 0 and d.l2_mib > 0 and d.sm_count > 0
    assert d.source and d.description
    text = (designs_dir() / f"{name}.toml").read_text()
    for line in text.splitlines():  # every number carries a comment with its source
        key = line.split("=")[0].strip()
        if "=" in line and not line.startswith("#") and key not in (
                "name", "kind", "description", "source", "variant", "architecture", "process_name"):
            assert "#" in line, f"{name}: {line!r} has no source comment"
    assert hash(d) == hash(load_design(designs_dir() / f"{name}.toml"))


def test_gpu_designs_match_the_csv():
    with GPUS_CSV.open() as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        name = "gpu_" + r["gpu"].lower()
        if r["gpu"] == "P100" and "SXM2" in r["variant"]:
            name = "gpu_p100_sxm2"
        if r["gpu"] == "A100" and "80GB" in r["variant"]:
            name = "gpu_a100_80gb"
        d = load_design(name)
        assert d.fp32_tflops == float(r["fp32_tflops"]), name
        assert d.bandwidth_gbps == float(r["mem_bw_gbs"]), name
        assert d.tdp_w == float(r["tdp_w"]), name
        for col, field in (("fp16_bf16_tensor_dense_tflops", "fp16_tensor_tflops"),
                           ("tf32_tensor_dense_tflops", "tf32_tflops"), ("fp8_tensor_dense_tflops", "fp8_tflops")):
            assert getattr(d, field) == (float(r[col]) if r[col] else None), (name, field)


def test_mac_presets_are_the_tensor_core_numerics():
    assert load_design("gpu_v100").mac_spec() == sim.MacSpec.parse("v100")
    assert load_design("gpu_a100").mac_spec() == sim.MacSpec.parse("a100")
    assert load_design("gpu_h100").mac_spec() == sim.MacSpec.parse("h100")
    assert load_design("gpu_p100").mac_spec() is None


def test_bad_gpu_file_reports_every_field(tmp_path):
    text = (designs_dir() / "gpu_v100.toml").read_text()
    text = (text.replace("sm_count = 80", "sm_count = 0").replace('mem_type = "HBM2"', 'mem_type = "HBM9"')
            .replace('int8_path = "dp4a"', 'int8_path = "magic"').replace('mac_preset = "v100"', 'mac_preset = "x"')
            + "warp_size = 32\neff_simt = 1.5\n")
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(DesignError) as err:
        load_design(p)
    fields = {f for f, _, _ in err.value.problems}
    assert fields == {"sm_count", "mem_type", "int8_path", "mac_preset", "warp_size", "eff_simt"}
    assert str(p) in str(err.value) and "HBM9" in str(err.value)
    p.write_text('name = "x"\nkind = "gpu"\n')
    with pytest.raises(DesignError, match="required"):
        load_design(p)
    p.write_text('name = "x"\nkind = "fpga"\n')
    with pytest.raises(DesignError, match="kind"):
        load_design(p)


# --- precision paths ------------------------------------------------------------------------
@pytest.mark.parametrize("design, formats, path, peak_tflops", [
    ("gpu_p100", None, "fp32", 9.3),
    ("gpu_p100", "act=fp16,weight=fp16,acc=fp32", "fp16_fp32math", 9.3),  # DeepBench's P100 'fp16'
    ("gpu_p100", "act=fp16,weight=fp16,acc=fp16", "fp16_half2", 18.7),
    ("gpu_m40", "act=int8,weight=int8,acc=fp32", "int8_fp32math", 7.0),  # cublasSgemmEx: int8 in, fp32 math
    ("gpu_a100", "act=int8,weight=int8,acc=fp32", "int8_fp32math", 19.5),  # fp32 accumulation asked
    ("gpu_a100", "act=int4,weight=int8", "int8_tensor", 624.0),  # int4 extends to int8; acc int32
    ("gpu_b200", "act=mxfp8_e4m3,weight=mxfp8_e5m2,acc=fp32", "mxfp8_tensor", 4500.0),
    ("gpu_b200", "act=mxfp8_e4m3_up,weight=mxfp8_e4m3,acc=fp32", "mxfp8_tensor", 4500.0),  # scale rule: software
    ("gpu_titanx_pascal", "act=int8,weight=int8,acc=int32", "int8_dp4a", 44.0),
    ("gpu_t4", "act=int8,weight=int8,acc=int32", "int8_tensor", 130.0),
    ("gpu_t4", "act=fp16,weight=fp16,acc=fp32", "fp16_tensor", 65.0),
    ("gpu_v100", "act=bf16,weight=bf16,acc=fp32", "bf16_fp32math", 15.7),  # no bf16 tensor cores
    ("gpu_a100", "act=bf16,weight=bf16,acc=fp32", "fp16_tensor", 312.0),
    ("gpu_a100", "act=tf32,weight=tf32,acc=fp32", "tf32_tensor", 156.0),
    ("gpu_h100", "act=fp8_e4m3,weight=fp8_e4m3,acc=fp32", "fp8_tensor", 1978.9),
    ("gpu_v100", "act=fp8_e4m3,weight=fp8_e4m3,acc=fp32,emulate=2", "emulated", 62.5),  # stated: 1/2 of fp16's
    ("gpu_h100", "act=fp8_e4m3,weight=fp8_e4m3,acc=fp32,emulate=2", "fp8_tensor", 1978.9),  # native wins
])
def test_precision_path(design, formats, path, peak_tflops):
    d = load_design(design)
    p = precision_path(d, resolve_gpu_formats(d, formats), parse_formats(formats).get("emulate"))
    assert p.name == path and p.peak_ops_per_s == pytest.approx(peak_tflops * 1e12)
    r = sim.cost(Gemm(256, 256, 256), design, formats)
    assert r.formats["path"] == path and r.pes * r.clock_hz == pytest.approx(peak_tflops * 1e12 / 2)


def test_t4_dp4a_library_path_is_four_times_fp32():
    d = dataclasses.replace(load_design("gpu_t4"), int8_path="dp4a")
    p = precision_path(d, resolve_gpu_formats(d, "act=int8,weight=int8,acc=int32"))
    assert p.name == "int8_dp4a" and p.peak_ops_per_s == pytest.approx(4 * 8.1e12)


# --- hand-calculated cases -----------------------------------------------------------------
def test_large_gemm_is_compute_bound_at_the_achievable_peak():
    n = 8192
    r = hand_cost(Gemm(n, n, n))
    ideal = 2 * n**3 / (0.9 * 15.7e12)  # fp32 on V100 at 90 % of the datasheet peak
    assert r.bound == "compute"
    assert r.cycles_compute / r.clock_hz == pytest.approx(ideal, rel=1e-9)
    # wave quantization of 8192^2 outputs over 80 SMs costs at most 2 %
    assert ideal + 5e-6 <= r.time_s <= 1.02 * ideal + 5e-6
    assert r.utilization == pytest.approx(0.9, rel=0.02)


def test_skinny_gemm_is_bandwidth_bound_at_bytes_over_bandwidth():
    r = hand_cost(Gemm(1, 16384, 16384), formats="act=fp16,weight=fp16,acc=fp32")
    nbytes = 2 * (16384 * 16384 + 16384 + 16384)  # fp16 weights once, the vector in, the row out
    assert r.dram_bytes == pytest.approx(nbytes)
    assert r.bound == "bandwidth"
    assert r.time_s == pytest.approx(nbytes / 900e9 + 5e-6, rel=1e-3)  # hard max: smax_p = 60
    assert r.traffic["dram.filter.reads_bytes"] == pytest.approx(2 * 16384 * 16384)


def test_tiny_gemm_sits_at_the_launch_floor():
    r = hand_cost(Gemm(8, 8, 8))
    # 5 us launch + one 32x32 tile of K = 8 on one SM: 2 * 32 * 32 * 8 / (0.9 * 15.7e12 / 80) = 93 ns
    assert r.time_s == pytest.approx(5e-6 + 2 * 32 * 32 * 8 / (0.9 * 15.7e12 / 80), rel=1e-3)
    assert r.bound == "occupancy" and r.dram_bytes == 3 * 64 * 4  # residency rule: A, B in, C out once
    assert r.traffic["l2_bytes"] >= 3 * 64 * 4  # A, B and C once (plus any split-K partials)
    (warm,) = gpu_cost_many([Gemm(8, 8, 8)], load_design("gpu_v100"), fit=HAND, operands="warm")
    assert warm.dram_bytes == 0 and warm.time_s == pytest.approx(r.time_s, rel=1e-3)  # back-to-back calls


def test_wave_quantization(monkeypatch):
    """One 128x128 tile, no split-K: 80 tiles fill V100's 80 SMs once, 81 need two waves."""
    monkeypatch.setattr(gm, "TILES", np.array([(128.0, 128.0)]))
    monkeypatch.setattr(gm, "SPLITS", np.array([1.0]))
    k = 4096
    one, two = (hand_cost(Gemm(128 * m, 128, k)) for m in (80, 81))
    per_wave = 2 * 128 * 128 * k / (0.9 * 15.7e12 / 80)
    assert (one.time_s - 5e-6) == pytest.approx(per_wave, rel=1e-9)
    assert (two.time_s - 5e-6) == pytest.approx(2 * per_wave, rel=1e-9)
    assert two.cycles_compute / one.cycles_compute == pytest.approx(81 / 80)
    assert two.mapping_efficiency == pytest.approx(81 / 160)


def test_tensor_core_alignment_pads_k(monkeypatch):
    monkeypatch.setattr(gm, "TILES", np.array([(128.0, 128.0)]))
    monkeypatch.setattr(gm, "SPLITS", np.array([1.0]))
    f16 = "act=fp16,weight=fp16,acc=fp32"
    a, b = (hand_cost(Gemm(128 * 80, 128, k), formats=f16) for k in (4096, 4090))
    # K = 4090 (aligned to 2 elements, 4 bytes, not 8) is padded to the MMA step and runs on the
    # unaligned fallback, whose loads are 4 bytes wide instead of 16
    slow = HAND["unaligned_eff"] * (4 / 16) ** HAND["unaligned_exp"]
    assert b.cycles_compute / b.mapping_efficiency == pytest.approx(a.cycles_compute / a.mapping_efficiency / slow)
    assert any("alignment" in n for n in b.notes) and not any("alignment" in n for n in a.notes)


#: The dimensions cuBLAS checks per layout (a_t, b_t): lda = K if A is transposed else M, ldb = N
#: if B is transposed else K, ldc = M (column-major, as DeepBench calls it).
CHECKED = {(False, False): {0, 2}, (False, True): {0, 1}, (True, False): {0, 2}, (True, True): {0, 1, 2}}


@pytest.mark.parametrize(("formats", "align"), [("act=fp16,weight=fp16,acc=fp32", 8),
                                                 ("act=bfloat16,weight=bfloat16,acc=fp32", 8),
                                                 ("act=fp8_e4m3,weight=fp8_e4m3,acc=fp32", 16),
                                                 ("act=int8,weight=int8,acc=int32", 16),
                                                 ("act=tf32,weight=tf32,acc=fp32", 4)])
@pytest.mark.parametrize("layout", sorted(CHECKED))
def test_alignment_rule_per_path(formats, align, layout):
    """Each tensor-core path falls back when a leading dimension is off its multiple of 16 bytes
    (data/measured/h100/README.md: fp16/bf16 off multiples of 8 ran up to 6x slower than padded;
    fp8 needs 16; H200 int8 at 8 mod 16 runs at 0.4 of the rate at 0 mod 16) and only then: the
    H100's NN GEMMs with N = 1500 (a multiple of 4) ran at the aligned rate (the old rule on
    gcd(M, N, K) priced them 2.2-2.5x slow). SIMT never falls back."""
    d = load_design("gpu_h100")
    base = 4096
    a_t, b_t = layout

    def cost(shape):
        return gpu_cost_many([Gemm(*shape, a_transposed=a_t, b_transposed=b_t)], d, formats, fit=HAND)[0]

    fast = cost([base, base, base])
    for dim in range(3):
        shape = [base, base, base]
        shape[dim] = base - align // 2  # a multiple of align/2, not of align
        slow = cost(shape)
        if dim in CHECKED[layout]:
            assert slow.time_s > 1.5 * fast.time_s, (formats, shape)
            assert any("alignment" in n for n in slow.notes)
        else:
            assert slow.time_s < 1.01 * fast.time_s and not slow.notes, (formats, shape)
        ok = [base, base, base]
        ok[dim] = base - align
        assert not cost(ok).notes
    simt = gpu_cost_many([Gemm(base, base, base - 1)], d, None, fit=HAND)[0]
    assert not simt.notes


def test_conv_is_an_implicit_gemm():
    c = Conv(56, 56, 64, 128, 3, 3, padding=1, batch=8)
    r = hand_cost(c)
    assert r.macs == 8 * 56 * 56 * 128 * 64 * 9
    # memory: the input, filter and output tensors, not the im2col matrix
    assert r.dram_bytes == pytest.approx(4 * (8 * 56 * 56 * 64 + 128 * 64 * 9 + 8 * 56 * 56 * 128))


def test_rnn_pays_a_per_step_overhead():
    fit = HAND | {"rnn_step_us": 10.0, "rnn_call_us": 0.0}
    short, long = (hand_cost(Rnn("lstm", 256, 4, t), fit=fit) for t in (10, 20))
    per_step = (long.time_s - short.time_s) / 10
    assert per_step >= 10e-6  # at least the step overhead per extra step
    zero = hand_cost(Rnn("lstm", 256, 4, 20), fit=HAND | {"rnn_step_us": 0.0, "rnn_call_us": 0.0})
    assert long.time_s - zero.time_s == pytest.approx(20 * 10e-6)


def test_power_cap_slows_the_t4_not_the_p100():
    """A kernel whose power at full clock exceeds the TDP runs at the clock that fits: its power is
    then exactly the TDP; a memory-bound or small kernel, or a 250 W P100, stays at full clock."""
    big = Gemm(4096, 4096, 4096)
    (t4,) = sim.hw.cost_many([big], "gpu_t4")  # 70 W cannot feed 8.1 TFLOPS at boost
    assert t4.bound == "power" and "power cap" in t4.sources["compute"]
    assert t4.energy_total_pj * 1e-12 / t4.time_s == pytest.approx(70.0, rel=1e-9)
    (small,) = sim.hw.cost_many([Gemm(16, 256, 256)], "gpu_t4")
    assert small.bound != "power" and small.energy_total_pj * 1e-12 / small.time_s < 70.0
    (p100,) = sim.hw.cost_many([big], "gpu_p100")
    assert p100.bound != "power" and p100.energy_total_pj * 1e-12 / p100.time_s < 250.0


@pytest.mark.parametrize(("formats", "tflops"), [("act=fp16,weight=fp16,acc=fp32", 662),
                                                 ("act=fp8_e4m3,weight=fp8_e4m3,acc=fp32", 1248)])
def test_h100_tensor_cores_hit_the_700w_cap_at_8192_cubed(formats, tflops):
    """Measured on an H100 SXM under sustained load (data/measured/h100/power_cap.csv): fp16 662 and
    fp8 1248 TFLOP/s at 8192^3, the SM clock lowered to stay at 700 W (the datasheet: 989 and 1979)."""
    (r,) = sim.hw.cost_many([Gemm(8192, 8192, 8192)], "gpu_h100", formats)
    assert r.bound == "power"
    assert 2 * r.macs / r.time_s / 1e12 == pytest.approx(tflops, rel=0.10)
    assert r.energy_total_pj * 1e-12 / r.time_s == pytest.approx(700.0, rel=1e-9)


def test_h100_fp32_simt_runs_at_full_clock():
    """The same card runs fp32 SIMT GEMMs at the full 1980 MHz without throttling (README there):
    the largest fp32 GEMMs of the set reach 50 TFLOP/s of the 67 datasheet."""
    (r,) = sim.hw.cost_many([Gemm(8192, 8192, 8192)], "gpu_h100")
    assert r.bound == "compute" and r.energy_total_pj * 1e-12 / r.time_s < 700.0
    assert 2 * r.macs / r.time_s / 1e12 == pytest.approx(50, rel=0.10)


@pytest.mark.parametrize("design", ["gpu_t4", "gpu_v100", "gpu_h100", "gpu_m40"])
def test_energy_within_tdp_and_sourced(design):
    ops = [Gemm(4096, 4096, 4096), Gemm(1, 4096, 4096), Conv(28, 28, 128, 128, 3, 3, padding=1, batch=32),
           Rnn("gru", 512, 16, 10), Elementwise(1 << 20, 2, 2)]
    d = load_design(design)
    fit = load_fit()
    for r in sim.hw.cost_many(ops, design, "act=fp16,weight=fp16,acc=fp32"):
        assert r.energy_total_pj <= d.tdp_w * r.time_s * 1e12 * (1 + 1e-9)
        # the static power, split by scope (chip, memory background, regulators), sums to the model's
        assert r.energy_static_pj == pytest.approx(fit["static_fraction"] * d.tdp_w * r.time_s * 1e12)
        assert set(r.sources) == set(r.energy_pj) and all(s.strip() for s in r.sources.values())
        assert r.cycles == pytest.approx(r.time_s * r.clock_hz)
        assert all(math.isfinite(v) for v in r.energy_pj.values())


def test_public_api_table_and_cli(capsys):
    df = sim.cost_table([Gemm(1024, 1024, 1024), Conv(14, 14, 16, 32, 3, 3)], ["gpu_v100", "tpu_v1"]).frame()
    assert list(df.design) == ["gpu_v100", "gpu_v100", "tpu_v1", "tpu_v1"]
    assert main(["cost", "--design", "gpu_v100", "--gemm", "1024,1024,1024", "--formats",
                 "act=fp16,weight=fp16,acc=fp32", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["design"] == "gpu_v100" and row["format_path"] == "fp16_tensor" and row["time_us"] > 0
    with pytest.raises(OperationError, match="all-reduce"):
        sim.cost(AllReduce(1000, 8), "gpu_v100")


def test_sparse_gemm_uses_the_sparse_kernel():
    dense = hand_cost(Gemm(16, 4096, 4096))
    csr = hand_cost(Gemm(16, 4096, 4096, weight_sparsity=0.95, sparse_format="csr"))
    assert csr.macs_performed == pytest.approx(0.05 * dense.macs)
    assert dense.macs_performed == dense.macs


# --- calibration ----------------------------------------------------------------------------


def test_calibration_error_on_the_measured_sets():
    """The shipped constants on DeepBench's 4 948 GEMM-based rows (V100's 320 GEMMs and 472 convs included) and the H100 set's 973 (see
    benchmarks/RESULTS.md): per device the median |ln(pred/meas)| <= 0.24 and p90 <= 0.75, overall
    median <= 0.20, and better than the datasheet roofline on every device (the shipped fit:
    0.15-0.23 and 0.49-0.74; the roofline 0.85-1.11 and 1.86-2.94)."""
    gc = load_benchmark("gpu_calibration")
    groups = gc.groups_of(gc.all_rows())
    fit = load_fit()
    errs, naive = {}, {}
    for g in groups:
        errs.setdefault(g.device, []).append(np.abs(np.log(g.predict(fit) / g.measured)))
        naive.setdefault(g.device, []).append(np.abs(np.log(g.naive() / g.measured)))
    allerr = np.concatenate([e for v in errs.values() for e in v])
    assert len(allerr) == 4156 + 320 + 472 + 973  # V100: 320 GEMMs, 472 GEMM-based convs (issue 32 item 3)
    assert np.median(allerr) <= 0.20
    for dev, e in errs.items():
        e, n = np.concatenate(e), np.concatenate(naive[dev])
        assert np.median(e) <= 0.24 and np.quantile(e, 0.9) <= 0.75, dev
        assert np.median(e) < np.median(n) and np.quantile(e, 0.9) < np.quantile(n, 0.9), dev
    for g in groups[:2] + [g for g in groups if g.device == "H100"]:  # the fast path is the public one
        assert np.allclose(g.predict_public(fit), g.predict(fit), rtol=1e-9)


def test_generation_constants_borrow_the_nearest_generation():
    """A GPU of a generation without measurements (V100: Volta) takes each generation constant from
    the nearest generation that has it, the earlier on a tie, and says so in the result's notes."""
    from asicsim._src.hw.gpu_model import generation_constants

    fit = {"launch_us": 9.0, "launch_us@Pascal": 5.0, "launch_us@Turing": 2.0, "launch_us@Hopper": 3.0}
    assert generation_constants(fit, "Pascal")[0]["launch_us"] == 5.0
    assert generation_constants(fit, "Volta") == ({"launch_us": 5.0}, {"launch_us": "Pascal"})  # tie: earlier
    assert generation_constants(fit, "Ampere")[0]["launch_us"] == 2.0  # Turing is 1 away, Hopper 1: earlier
    assert generation_constants(fit, "Blackwell")[0]["launch_us"] == 3.0
    assert generation_constants({"launch_us": 9.0}, "Hopper")[0]["launch_us"] == 9.0  # shared fallback
    r = sim.cost(Gemm(256, 256, 256), "gpu_v100")
    assert any("no Volta-generation measurements" in n for n in r.notes)
    assert not sim.cost(Gemm(256, 256, 256), "gpu_h100").notes


@pytest.mark.slow  # ~10 s: the script's imports and measured rows
def test_calibration_shows_progress(monkeypatch, capsys):
    # it printed nothing for 900 s on a busy machine: a progress line on stderr, per stage and,
    # within a fit, at every evaluation (a line every few seconds in a log)
    from asicsim._src.cli_progress import StepProgress

    gc = load_benchmark("gpu_calibration")
    rows = gc.all_rows()
    some = [r for r in rows if (r["device"], r["precision"]) == (rows[0]["device"], rows[0]["precision"])][:12]
    monkeypatch.setattr(gc, "all_rows", lambda: some)
    monkeypatch.setattr(StepProgress, "QUIET_S", 0.0)
    monkeypatch.setattr(StepProgress, "EVERY", 0.0)
    ticks = []

    def fake_refit(groups, start, table, tick=None):  # the least-squares fits, their heartbeats only
        for _ in range(3):
            tick()
            ticks.append(len(groups))
        return dict(start)

    monkeypatch.setattr(gc, "refit", fake_refit)
    gc.main(["--refit"])
    out = capsys.readouterr()
    n = 4 + len(gc.DESIGNS)
    lines = out.err.splitlines()
    assert lines[0].startswith("gpu_calibration: ") and f"/{n} stages (rows, fit, predictions" in lines[0]
    assert any(f" 2/{n} stages" in x for x in lines) and lines[-1].endswith("finished")
    assert len(ticks) == 3 * (1 + len(gc.DESIGNS)) and len(lines) >= len(ticks)  # a line per heartbeat
    assert "all rows fit: median" in out.out and "gpu_calibration:" not in out.out
