"""Energy per precision path calibrated to measured board power (issue 32 item 7): the H100's
8192^3 GEMMs, board energy per flop (static, memory and compute together) against
data/measured/h100/power_path.csv. Before (e_<path>_scale absent): fp32 6.91 pJ/FLOP (the issue:
"half the measured 13.3"), int8 0.646 (0.7x); fp16 1.080 and fp8 0.549 sustained, unchanged."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw.gpu_cost import gpu_price
from asicsim._src.hw.gpu_model import generation_constants, load_fit
from asicsim._src.hw.operations import Gemm

ROOT = Path(__file__).resolve().parents[2]
FORMATS = {"fp32": "act=fp32,weight=fp32,acc=fp32,out=fp32", "fp16": "act=fp16,weight=fp16,acc=fp32,out=fp16",
           "fp8": "act=fp8_e4m3,weight=fp8_e4m3,acc=fp32,out=bfloat16",
           "int8": "act=int8,weight=int8,acc=int32,out=int32"}


def measured() -> dict[str, float]:
    with (ROOT / "data" / "measured" / "h100" / "power_path.csv").open() as f:
        return {r["path"]: float(r["pj_per_flop"]) for r in csv.DictReader(f)}


def board_pj_per_flop(precision: str, **kw) -> tuple[float, float]:
    pr = gpu_price([Gemm(8192, 8192, 8192)], sim.load_design("gpu_h100"), FORMATS[precision], **kw)
    pj = sum(float(np.asarray(pr.energy[k])[0]) for k in pr.energy.components)
    return pj / (2 * 8192**3), pj * 1e-12 / pr.time_s[0]


@pytest.mark.parametrize(("precision", "tol"), [("fp32", 0.01), ("int8", 0.01), ("fp16", 0.03), ("fp8", 0.03)])
def test_board_energy_per_flop_per_path(precision, tol):
    """fp32 SIMT: 13.3 pJ/FLOP (687 W at full clock, issue 32); int8: 0.923 (issue 32's 0.7x of the
    model's 0.646); fp16 1.06 and fp8 0.56 at the 700 W cap (power_cap.csv), sustained."""
    got, _ = board_pj_per_flop(precision)
    assert got == pytest.approx(measured()[precision], rel=tol)


def test_fp32_runs_at_full_clock_below_the_cap():
    """The README: fp32 SIMT runs at the full 1980 MHz without throttling: the calibrated power is
    under the 700 W TDP (646 W at the model's 49 TFLOP/s, 687 W measured at 51.7), so no cap."""
    _, watts = board_pj_per_flop("fp32")
    assert 600 < watts < 700
    r = sim.cost(Gemm(8192, 8192, 8192), "gpu_h100", FORMATS["fp32"])
    assert "power cap" not in r.sources["compute"]


def test_path_scales_are_hoppers_own():
    fit = load_fit()
    for gen in ("Ampere", "Blackwell", "Turing"):
        c, _ = generation_constants(fit, gen)
        assert "e_fp32_scale" not in c and "e_int8_tensor_scale" not in c
    c, _ = generation_constants(fit, "Hopper")
    assert c["e_fp32_scale"] > 2.5 and c["e_int8_tensor_scale"] > 1.5
