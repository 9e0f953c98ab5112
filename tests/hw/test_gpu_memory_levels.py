"""A GPU's bytes per memory level (asicsim/_src/hw/gpu_model.py): DRAM by the residency rule the
systolic designs follow (each operation's inputs read from DRAM once, outputs written once, plus
the re-reads of an L2-blocked schedule past L2), L2 <-> SM traffic by the tiles, and the
measurement protocol's warm operands. Figures are hand-computed from the shapes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import asicsim as sim
from asicsim._src.hw.cost import operation_bounds
from asicsim._src.hw.design_files import load_design
from asicsim._src.hw.gpu_cost import gpu_cost_many
from asicsim._src.hw.operations import Conv, Gemm, Rnn

BF16 = "act=bfloat16,weight=bfloat16,acc=fp32,out=bfloat16"


def test_a_gemm_that_fits_l2_moves_its_compulsory_bytes():
    (r,) = sim.hw.cost_many([Gemm(512, 768, 1024)], "gpu_h100", BF16)
    compulsory = 2 * (512 * 1024 + 1024 * 768 + 512 * 768)
    assert r.dram_bytes == compulsory == r.dram_bound_bytes and r.dram_bound == "compulsory"
    assert r.traffic["l2_bytes"] >= compulsory  # every tile's operands pass through L2
    assert r.sram_array_bytes == r.traffic["l2_bytes"]  # the on-chip level the report draws


def test_the_same_rule_as_a_systolic_design_that_keeps_nothing_on_chip():
    """With every operand off chip between operations (DramSpec.holds = all three), the systolic
    compulsory bound and the GPU's compulsory bytes are the same figure."""
    base = load_design("dc_bf16_128x128")
    d = dataclasses.replace(base, dram=dataclasses.replace(base.dram, holds=("ifmap", "filter", "ofmap")))
    for op in (Gemm(512, 768, 1024), Gemm(64, 4096, 4096), Conv(28, 28, 64, 128, 3, 3, padding=1, batch=4)):
        gpu = sim.hw.cost_many([op], "gpu_h100", BF16)[0]
        assert gpu.dram_bound_bytes == pytest.approx(float(operation_bounds(op, d, BF16).compulsory)), op.label


def test_past_l2_a_gemm_rereads_as_a_blocked_schedule():
    """16384^3 fp32 on an H100 (0.85 x 50 MiB of L2 usable): the re-reads of a schedule blocked on
    the L2, 2 MNK e / sqrt(S / e) bytes plus C, are more than the compulsory 3 x 1 GiB and at most
    what the SMs read from L2."""
    n, e = 16384, 4
    (r,) = sim.hw.cost_many([Gemm(n, n, n)], "gpu_h100")
    s = 0.85 * 50 * 2**20
    blocked = 2 * n**3 * e / np.sqrt(s / e) + n * n * e
    assert r.dram_bytes == pytest.approx(blocked, rel=1e-9)
    assert 3 * n * n * e == r.dram_bound_bytes < r.dram_bytes < r.traffic["l2_bytes"]


def test_rnn_weights_come_from_dram_once_when_they_fit_l2():
    """An LSTM layer's 4 x 1024 x 1024 recurrent weights (8 MiB in bf16) fit an H100's L2: read once
    before the 50 steps; on a V100 (6 MiB of L2) they are read at every step."""
    op = Rnn("lstm", 1024, 8, 50)
    w = 4 * 1024 * 1024 * 2
    x = 50 * 8 * 1024 * 2  # the input projection's operands: x (T*B x H), W (H x 4H), gates out
    proj = x + w + 50 * 8 * 4096 * 2
    h100, v100 = (sim.hw.cost_many([op], g, BF16)[0] for g in ("gpu_h100", "gpu_v100"))
    assert h100.dram_bytes == pytest.approx(proj + w)
    assert v100.dram_bytes >= proj + 50 * w
    assert h100.dram_bound_bytes == v100.dram_bound_bytes == pytest.approx(proj + w)


def test_warm_operands_are_the_measurement_protocol():
    """DeepBench and the H100 set time back-to-back calls on the same operands: what fits stays in
    L2 (no DRAM bytes, no compulsory traffic) and streams from L2, faster than from DRAM."""
    d = load_design("gpu_h100")
    op = Gemm(4096, 16, 4096)  # a GEMV-like shape: memory-bound
    cold, warm = (gpu_cost_many([op], d, BF16, operands=o)[0] for o in ("cold", "warm"))
    assert warm.dram_bytes == 0 == warm.dram_bound_bytes and cold.dram_bytes > 0
    assert warm.time_s < cold.time_s
    with pytest.raises(ValueError, match="operands"):
        gpu_cost_many([op], d, BF16, operands="hot")


def test_memory_streams_at_the_published_copy_rate():
    """H100: 2.90 TB/s published device-copy rate, not the datasheet's 3.35 (designs/gpu_h100.toml);
    a design without one streams at the fitted bw_eff x datasheet."""
    from asicsim._src.hw.gpu_model import dram_rate, load_fit

    h100 = load_design("gpu_h100")
    assert dram_rate(h100, load_fit()) == 2.90e12
    v100 = load_design("gpu_v100")
    assert dram_rate(v100, load_fit()) == pytest.approx(900e9 * load_fit()["bw_eff"])
    with pytest.raises(sim.hw.DesignError, match="copy_bandwidth_gbps"):
        dataclasses.replace(h100, copy_bandwidth_gbps=4000.0)  # above the datasheet's 3350
