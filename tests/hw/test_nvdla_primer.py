"""NVDLA's published ResNet-50 frame rates (issue 31, item 5), measured by benchmarks/nvdla_primer.py.

The primer's table (nvdla.org/primer.html) is the output of NVDLA's performance spreadsheet, which the
benchmark reproduces formula by formula. Its 64- and 32-MAC figures (7.3 and 3.6 frames/s) are
DRAM-bound, and 49 of their 125.5 MB per frame come from one assumption of the spreadsheet: every
stride is folded into the channels for the weights too, so a 1x1 stride-2 layer's weights count 4x
and are split and re-read as such. NVDLA's direct convolution takes the layer's own stride (its
driver programs ``conv_stride - 1`` into the sequencer in direct mode; github.com/nvdla/sw,
kmd/firmware/conv.c). With the spreadsheet otherwise unchanged, asicsim's NVDLA-shaped design is
within 20 % of it at every configuration; against the primer's own figure it is not at 64 and 32
MACs (the strict xfail below)."""


import pytest
from benchmark_scripts import load_benchmark

BENCH = load_benchmark("nvdla_primer")
SMALL = [row for row in BENCH.PRIMER if row[0] <= 64]


@pytest.mark.parametrize("row", BENCH.PRIMER, ids=lambda r: f"{r[0]}MACs")
def test_spreadsheet_reproduces_the_primer(row):
    """The primer's frames/s are the spreadsheet's, to the primer's rounding (269, 153, 93, 46, 20,
    7.3, 3.6 against 268.8, 152.6, 93.0, 46.5, 20.0, 7.3, 3.6)."""
    macs, cbuf, gbps, fps, _ = row
    assert BENCH.estimator(macs, cbuf, gbps)["fps"] == pytest.approx(fps, rel=0.015)


def test_folded_strides_are_the_small_configurations_dram():
    """At 64 MACs / 128 KB / 1 GB/s the spreadsheet moves 128.5 MB a frame; with the strided
    layers' own weights 74.2 MB, and the frame rate rises from 7.3 to 11.9 (DRAM-bound both)."""
    folded, direct = BENCH.estimator(64, 128, 1), BENCH.estimator(64, 128, 1, direct_strides=True)
    assert folded["dram_kb"] * 1024 / 1e6 == pytest.approx(128.5, abs=0.1)
    assert direct["dram_kb"] * 1024 / 1e6 == pytest.approx(74.2, abs=0.1)
    assert direct["fps"] == pytest.approx(11.9, abs=0.05)
    assert direct["mac_cycles"] == folded["mac_cycles"]  # the fold changes bytes, not MACs


@pytest.mark.parametrize("acc_kib", [1, 4, 32])
@pytest.mark.parametrize("row", SMALL, ids=lambda r: f"{r[0]}MACs")
def test_small_configurations_within_20_percent(row, acc_kib):
    """asicsim's frames/s at 64 and 32 MACs are within 20 % of the spreadsheet with NVDLA's direct
    strides (1.16x and 1.17x), whatever the accumulator buffer NVDLA's spec files do not size."""
    macs, cbuf, gbps, _, shape = row
    fps, _ = BENCH.asicsim_fps(macs, cbuf, gbps, shape, acc_kib)
    assert fps / BENCH.estimator(macs, cbuf, gbps, direct_strides=True)["fps"] == pytest.approx(1.0, rel=0.2)


@pytest.mark.parametrize("row", BENCH.PRIMER, ids=lambda r: f"{r[0]}MACs")
def test_every_configuration_within_20_percent(row):
    """With 32 KiB accumulators, every configuration is within 20 % of the spreadsheet with
    direct strides (1.01-1.17x; smaller accumulators starve the large arrays: RESULTS.md)."""
    macs, cbuf, gbps, _, shape = row
    fps, _ = BENCH.asicsim_fps(macs, cbuf, gbps, shape, 32)
    assert fps / BENCH.estimator(macs, cbuf, gbps, direct_strides=True)["fps"] == pytest.approx(1.0, rel=0.2)


@pytest.mark.xfail(strict=True, reason="the primer's figure folds strided weights 4x (module docstring)")
@pytest.mark.parametrize("row", SMALL, ids=lambda r: f"{r[0]}MACs")
def test_small_configurations_against_the_primer_itself(row):
    """Against the primer's own 7.3 and 3.6 frames/s asicsim is 1.90x and 1.93x."""
    macs, cbuf, gbps, primer_fps, shape = row
    fps, _ = BENCH.asicsim_fps(macs, cbuf, gbps, shape, 32)
    assert fps / primer_fps == pytest.approx(1.0, rel=0.2)
