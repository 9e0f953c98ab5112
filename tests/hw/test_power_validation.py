"""The power model against published chips (issue 30 item 3). Each test cites its source; where
a figure misses the 20 % aim, the test states the tolerance reached and why."""

from __future__ import annotations

from collections import Counter

import pytest

import asicsim as sim
from asicsim._src.hw.efficiency import peak_tops_per_w
from asicsim._src.hw.power import component

# --- TPU v1: N. P. Jouppi et al., "In-Datacenter Performance Analysis of a Tensor Processing Unit",
# ISCA 2017, Table 2: 28 nm, 700 MHz, TDP 75 W, measured idle 28 W and busy 40 W per die.


def test_tpu_v1_idle_is_the_published_28_w_with_the_unmodelled_rest_named():
    """Idle: the components the model prices (SRAM and logic leakage, clock tree, DDR3 PHY: 3.5 W)
    are 12.5 % of the 28 W; the paper does not split its idle power, so the rest (about 24.5 W:
    the host interface, control, and whatever leakage a 28 nm HP die at temperature has beyond the
    estimates) is the one fitted figure, named ``other_idle``."""
    r = sim.cost(sim.Conv(19, 19, 256, 256, 3, 3, 1, 1, 8), "tpu_v1")
    assert r.idle_power_w["chip"] == pytest.approx(28.0)
    other = r.energy_pj["other_idle"] * 1e-12 / r.time_s
    assert 20 < other < 28 and "fitted" in r.sources["other_idle"]


@pytest.mark.parametrize("op", [sim.Conv(19, 19, 256, 256, 3, 3, 1, 1, 8), sim.Gemm(1024, 1024, 1024),
                                sim.Gemm(2048, 2048, 2048)])
def test_tpu_v1_busy_die_power_within_20_percent_of_40_w(op):
    """Busy: 40 W per die (Table 2, an average over Google's production applications); the model's
    chip scope (die: no DDR3 devices, no regulators) on busy layers: 40.7-44.2 W. Below the TDP."""
    row = sim.cost(op, "tpu_v1").row()
    assert row["power_chip_w"] == pytest.approx(40.0, rel=0.20)
    assert row["power_chip_w"] < 75.0


def test_tpu_v1_peak_efficiency_between_busy_and_tdp():
    """92 TOPS peak (Table 2) over the 40 W busy power is 2.3 TOPS/W, over the 75 W TDP 1.2. The
    model's peak chip figure (array at full rate: no buffer or DRAM accesses, 28 W idle) must lie in
    that span's upper part, above the TDP figure and within 20 % of the busy one."""
    eff = peak_tops_per_w("tpu_v1")
    assert 92 / 75 < eff["chip"] == pytest.approx(92 / 40, rel=0.20)


# --- Eyeriss v1: Y.-H. Chen, T. Krishna, J. Emer, V. Sze, IEEE JSSC 52(1) 2017, abstract and
# Table V: AlexNet's five conv layers, batch 4, 35 frames/s at 278 mW (chip, 200 MHz, 1 V), 0.0029
# DRAM accesses (16-bit) per MAC. designs/eyeriss_v1.toml says how row stationary is approximated.

ALEXNET_CONV = [sim.Conv(227, 227, 3, 96, 11, 11, stride=4, batch=4, name="conv1"),
                sim.Conv(27, 27, 96, 256, 5, 5, padding=2, groups=2, batch=4, name="conv2"),
                sim.Conv(13, 13, 256, 384, 3, 3, padding=1, batch=4, name="conv3"),
                sim.Conv(13, 13, 384, 384, 3, 3, padding=1, groups=2, batch=4, name="conv4"),
                sim.Conv(13, 13, 384, 256, 3, 3, padding=1, groups=2, batch=4, name="conv5")]
PUBLISHED_MJ_PER_FRAME = 278e-3 / 35 * 1e3  # 7.94 mJ


@pytest.fixture(scope="module")
def eyeriss():
    rs = sim.hw.cost_many(ALEXNET_CONV, "eyeriss_v1")
    assert sum(r.macs for r in rs) / 4 == pytest.approx(666e6, rel=0.01)  # JSSC: 666 M MACs per image
    return rs


def test_eyeriss_chip_energy_per_frame_within_20_percent(eyeriss):
    """Energy per frame at chip scope (the 278 mW is the chip's; DRAM is off chip): 8.31 mJ
    against 278 mW / 35 fps = 7.94 mJ (+5 %; 8.40 mJ before issue 31's mapper search)."""
    mj = sum(r.row()["energy_chip_j"] for r in eyeriss) / 4 * 1e3
    assert mj == pytest.approx(PUBLISHED_MJ_PER_FRAME, rel=0.20)


def test_eyeriss_power_and_frame_rate_state_what_misses(eyeriss):
    """Power over the model's own time misses 20 %: the model runs the layers at 45 frames/s, not
    the chip's 35, because it maps them as a weight-stationary array at 84-95 % utilization, where
    row stationary's mapping losses and the 60 MHz off-chip link are not modelled. The same energy
    over 23 % less time reads 0.377 W against 278 mW (+36 %; 0.372 W, +34 %, before issue 31's
    mapper search found faster schedules); at the paper's frame rate it is 0.29 W (+5 %, the test
    above). Tolerance reached: 37 % on power, 30 % on frame rate. (Issue 31's second pass, more
    tile steps and folds that reload only the rows they span: 46.3 frames/s, 0.383 W, 8.27 mJ a
    frame, against 45.3, 0.377 and 8.31: tolerances 33 % on frame rate, 38 % on power.)"""
    t = sum(r.time_s for r in eyeriss)
    chip_j = sum(r.row()["energy_chip_j"] for r in eyeriss)
    assert 4 / t == pytest.approx(35, rel=0.33)
    assert chip_j / t == pytest.approx(0.278, rel=0.38)


def test_eyeriss_breakdown_and_dram_traffic(eyeriss):
    """Breakdown at chip scope: JSSC reports the PE array (ALUs and scratchpads) as the chip's
    largest consumer, the global buffer well below it, and a clock network of a sizeable share;
    the model: PE array 55 %, global buffer 15 %, clock 19 %, leakage 3 %. DRAM: the model moves
    0.0056 16-bit words per MAC (0.0067 before issue 31's search) against the chip's 0.0029 (1.9x): row stationary's reuse of
    ifmap rows across PEs is not modelled; DRAM is off chip, so this leaves the chip figure."""
    e = Counter()
    for r in eyeriss:
        e.update(r.energy_pj)
    chip = sum(v for k, v in e.items() if component(k)[0] != "board")
    pe = (e["mult"] + e["add"] + e["registers"] + e["buffer.filter_spads"]) / chip
    assert pe > 0.5 and e["buffer.glb"] / chip < pe / 2
    assert 0.1 < e["clock"] / chip < 0.3 and (e["leakage.sram"] + e["leakage.logic"]) / chip < 0.1
    words_per_mac = sum(r.dram_bytes for r in eyeriss) / 2 / sum(r.macs for r in eyeriss)
    assert words_per_mac == pytest.approx(0.0029, rel=1.5)  # reached: 1.9x (see above)


# --- TPU v4: N. P. Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer for Machine
# Learning with Hardware Support for Embeddings", ISCA 2023 (arXiv:2304.01433), Table 4: 7 nm,
# measured idle 90 W and min/mean/max 121/170/192 W per chip, "for the ASIC and HBM" (no
# regulators). designs/tpu_v4.toml says what is approximated (8 MXUs as one 256x512 array) and
# where its MAC energy comes from (Jouppi et al. ISCA 2021 Table 2, Google's 7 nm figures).
ASIC_AND_HBM = ("dram", "dram_background")  # board components inside Table 4's scope


def asic_and_hbm_w(r) -> float:
    """Average power over the result's time at Table 4's scope: the chip plus the HBM's access and
    background power, without the regulators' losses."""
    inside = [v for k, v in r.energy_pj.items() if component(k)[0] != "board" or k in ASIC_AND_HBM]
    return sum(inside) * 1e-12 / r.time_s


def test_tpu_v4_idle_is_the_published_90_w_for_the_asic_and_hbm():
    """Idle: 86 W for the die (the design's static_power_w) plus 4 W for 4 HBM2 stacks = Table 4's
    90 W. The model prices SRAM and logic leakage, the clock tree and the HBM PHY (39.7 W);
    the rest (46.3 W: ICI links, PCIe, SparseCores, control) is the one fitted figure, ``other_idle``."""
    r = sim.cost(sim.Gemm(1024, 1024, 1024), "tpu_v4")
    idle = r.idle_power_w["chip"] + r.energy_pj["dram_background"] * 1e-12 / r.time_s
    assert idle == pytest.approx(90.0)
    other = r.energy_pj["other_idle"] * 1e-12 / r.time_s
    assert 30 < other < 86 and "fitted" in r.sources["other_idle"]


@pytest.mark.parametrize("n", [4096, 8192])
def test_tpu_v4_busy_power_on_dense_gemms_within_20_percent_of_the_192_w_maximum(n):
    """A dense bf16 GEMM keeps the MXUs 98-100 % busy: the most power the chip draws, so it is
    compared with Table 4's measured maximum, 192 W (the 170 W mean is over production workloads
    that keep the MXUs less busy). Model: 199 W (+3.6 %) at 4096^3, 199 W at 8192^3."""
    r = sim.cost(sim.Gemm(n, n, n), "tpu_v4")
    assert r.row()["utilization"] > 0.95
    assert asic_and_hbm_w(r) == pytest.approx(192.0, rel=0.20)


@pytest.mark.parametrize("op", [sim.Gemm(1024, 1024, 1024), sim.Gemm(2048, 2048, 2048),
                                sim.Gemm(4096, 4096, 4096), sim.Gemm(8192, 8192, 8192)])
def test_tpu_v4_busy_power_inside_the_published_range(op):
    """Every busy GEMM between Table 4's measured minimum (121 W) and maximum (192 W), each widened
    by 20 %: model 180-204 W (1024^3 at 68 % utilization: 180 W, 6 % above the 170 W mean)."""
    w = asic_and_hbm_w(sim.cost(op, "tpu_v4"))
    assert 121 * 0.8 < w < 192 * 1.2


def test_tpu_v4_mac_energy_is_googles_7nm_figure_not_the_node_scaled_default():
    """The design prices a bf16 x bf16 + fp32 MAC at 0.59 pJ (ISCA 2021 Table 2: bf16 multiply 0.21 +
    fp32 add 0.38 pJ). The cost model's node-scaled default at 7 nm is about 0.09 pJ; with it the
    dense GEMM draws about 124 W, 35 % below the 192 W maximum (see benchmarks/RESULTS.md)."""
    import dataclasses

    from asicsim._src.hw import load_design

    d = load_design("tpu_v4")
    assert d.pe.mac_energy_pj == pytest.approx(0.21 + 0.38)
    default = dataclasses.replace(d, pe=dataclasses.replace(d.pe, mac_energy_pj=None))
    w = asic_and_hbm_w(sim.cost(sim.Gemm(4096, 4096, 4096), default))
    assert w < 192 * 0.8  # the default misses the published maximum by more than 20 %
