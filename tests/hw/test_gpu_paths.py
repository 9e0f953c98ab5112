"""GPU designs execute natively only the precision paths their architecture has (asicsim._src.hw.gpu_paths):
anything else is the error a systolic design gives, or emulated at a slowdown the caller states."""

from __future__ import annotations

import math

import pytest

import asicsim as sim
from asicsim._src.hw.design_files import list_designs, load_design
from asicsim._src.hw.gpu_paths import native_modes
from asicsim._src.hw.operations import Elementwise, Gemm, OperationError

G = Gemm(256, 256, 256)
FP8 = "act=fp8_e4m3,weight=fp8_e4m3,acc=fp32"

#: Each shipped GPU's native paths, from its architecture (the design files cite the whitepapers).
SIMT_LIBRARY = {"fp32", "fp16_fp32math", "bf16_fp32math", "int8_fp32math"}
PATHS = {
    "Maxwell": SIMT_LIBRARY,
    "Pascal/GP100": SIMT_LIBRARY | {"fp16_half2"},
    "Pascal/DP4A": SIMT_LIBRARY | {"int8_dp4a"},
    "Volta": SIMT_LIBRARY | {"fp16_tensor", "int8_dp4a"},
    "Turing": SIMT_LIBRARY | {"fp16_tensor", "int8_tensor"},
    "Ampere": SIMT_LIBRARY | {"tf32_tensor", "fp16_tensor", "bf16 fp16_tensor", "int8_tensor"},
    "Hopper": SIMT_LIBRARY | {"tf32_tensor", "fp16_tensor", "bf16 fp16_tensor", "int8_tensor", "fp8_tensor"},
    "Blackwell": SIMT_LIBRARY | {"tf32_tensor", "fp16_tensor", "bf16 fp16_tensor", "int8_tensor", "fp8_tensor",
                                 "mxfp8_tensor"},
}
GENERATION = {"gpu_m40": "Maxwell", "gpu_titanx_maxwell": "Maxwell", "gpu_p100": "Pascal/GP100",
              "gpu_p100_sxm2": "Pascal/GP100", "gpu_p4": "Pascal/DP4A", "gpu_gtx1080ti": "Pascal/DP4A",
              "gpu_titanx_pascal": "Pascal/DP4A", "gpu_titanxp": "Pascal/DP4A", "gpu_v100": "Volta",
              "gpu_t4": "Turing", "gpu_a100": "Ampere", "gpu_a100_80gb": "Ampere", "gpu_h100": "Hopper",
              "gpu_h200": "Hopper", "gpu_b200": "Blackwell"}


def test_every_shipped_gpu_lists_its_architectures_paths():
    assert set(GENERATION) == set(list_designs("gpu"))
    for name, gen in GENERATION.items():
        modes = native_modes(load_design(name))
        got = {("bf16 " if m.pairs[0][0] == "bf16" and m.name == "fp16_tensor" else "") + m.name for m in modes}
        assert got == PATHS[gen], name


@pytest.mark.parametrize("design, formats, message", [
    # Volta has no fp8 path (the case): the error names the chip's paths
    ("gpu_v100", FP8, r"GPU 'gpu_v100' does not execute act=float8_e4m3fn x weight=float8_e4m3fn -> "
                      r"acc=float32; its native paths: fp16_tensor \(float16 x float16"),
    ("gpu_a100", FP8, "does not execute act=float8_e4m3fn"),
    ("gpu_t4", "act=fp8_e5m2,weight=fp8_e5m2,acc=fp32", "or ask for software emulation: emulate=S"),
    ("gpu_p100", FP8, "fp16_half2"),
    ("gpu_h100", "act=fp8_e5m2,weight=fp8_e5m2,acc=fp32", "does not execute act=float8_e5m2 x weight=float8_e5m2"),
    ("gpu_h100", "act=mxfp8_e4m3,weight=mxfp8_e4m3,acc=fp32", "does not execute act=mxfp8_e4m3"),
    ("gpu_h100", "act=float8_e4m3fnuz,weight=float8_e4m3fnuz,acc=fp32", "act=float8_e4m3fnuz"),
    ("gpu_h100", "act=fp4,weight=fp4,acc=fp32", "does not execute act=float4_e2m1fn"),
    ("gpu_h100", "act=e4m3,weight=e4m3,acc=fp32", "act=float8_e4m3 x"),  # IEEE-like E4M3 (max 240, inf)
    ("gpu_v100", "act=fp16,weight=int8,acc=fp32", "act=float16 x weight=int8"),  # weight-only: a software path
    ("gpu_m40", "act=int8,weight=int8,acc=int32", r"int8_fp32math \(int8 x int8 -> float32\)"),
    ("gpu_v100", "act=int16,weight=int16,acc=int32", "act=int16 x weight=int16"),
    ("gpu_v100", FP8 + ",emulate=auto", "emulate=auto derives a slowdown only on a systolic design"),
    ("gpu_v100", FP8 + ",emulate=0.5", "emulate = '0.5'; allowed"),
])
def test_formats_a_gpu_does_not_execute_are_an_error(design, formats, message):
    with pytest.raises(OperationError, match=message):
        sim.cost(G, design, formats)
    assert math.isnan(load_design(design).peak_ops_per_s(formats)) or "emulate=" in formats


def test_emulation_runs_at_the_stated_slowdown_of_the_fastest_path():
    r = sim.cost(G, "gpu_v100", FP8 + ",emulate=4")
    assert r.formats["path"] == "emulated" and r.pes * r.clock_hz * 2 == pytest.approx(125e12 / 4)
    assert "stated slowdown of 4" in r.sources["compute"]
    assert load_design("gpu_v100").peak_ops_per_s(FP8 + ",emulate=4") == pytest.approx(125e12 / 4)
    native = sim.cost(G, "gpu_h100", FP8 + ",emulate=4")  # a chip with the path ignores emulate
    assert native.formats["path"] == "fp8_tensor"


def test_vector_work_in_any_format_runs_on_the_simt_cores():
    (r,) = sim.hw.cost_many([Elementwise(4096, 2)], load_design("gpu_v100"), FP8)
    assert r.time_s > 0 and r.formats["path"] == "fp32"


def test_integer_operands_accumulate_in_int32_by_default():
    r = sim.cost(G, "gpu_a100", "act=int8,weight=int8")
    assert r.formats["path"] == "int8_tensor" and r.formats["acc"] == "int32"
