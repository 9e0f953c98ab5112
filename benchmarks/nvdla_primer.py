"""NVDLA's published ResNet-50 frame rates: where they come from, and asicsim beside them (issue 31).

The NVDLA primer's table "Example Area and Performance with NVDLA" (nvdla.org/primer.html;
github.com/nvdla/nvdla.github.io commit 0fa0e49, primer.html) gives int8 ResNet-50 frames/s at
1 GHz for seven configurations (MACs, convolution buffer KB, SDRAM GB/s). Those figures are the
output of NVDLA's own performance estimator (github.com/nvdla/hw commit 8e06b1b,
perf/NVDLA_OpenSource_Performance.xlsx, sheet ResNet50, no-SRAM columns AO-AT), reproduced here
formula by formula on its layer table (``benchmarks/nvdla/resnet50_estimator_layers.csv``):

- per layer, time = max(DRAM cycles, MAC cycles); the network is the sum (no overlap across layers);
- DRAM KB = input + weights + output (+ the residual for 'conv + elwise'), channels rounded up to 16
  (the first layer's 3 channels x 2 x 2 stride to 16); when the weights do not fit the convolution
  buffer beside a strip of input (``weights > CBUF - strip``) they are split in CBUF-sized groups and
  the whole input is read once per group (or, where the input is the smaller operand, the reverse);
- MAC cycles = C16 * P * Q * K128 * R * S / MACs, with Winograd (3x3 layers / 2.25, weights x 16/9).

The spreadsheet folds every stride into the channels for the weights too (``C sv sh`` channels, so
a 1x1 stride-2 layer's weights count 4x, and are split and re-read as such), while its MAC count
divides the fold back out (``C16 R S / (sv sh)``). NVDLA's direct convolution runs a strided layer
with its own stride and ``C x R x S`` weights per kernel (:func:`estimator`, ``direct_strides``);
the second estimator column has that one change.

Then asicsim prices the same layers on an NVDLA-shaped design (Atomic-C x Atomic-K weight-stationary
array: nv_small.spec 8x8 for 64 MACs and nv_full.spec 64x32 for 2048 in github.com/nvdla/hw; the
other shapes are assumptions; one buffer of the table's CBUF size for ifmap and weights, one
accumulator buffer for partial sums and outputs whose size NVDLA's spec files do not give, so it is
swept) under its default (energy) objective::

    python benchmarks/nvdla_primer.py
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import asicsim as sim
from asicsim._src.hw.cost import cost_many
from asicsim._src.hw.design_parts import BufferSpec

LAYERS = Path(__file__).parent / "nvdla" / "resnet50_estimator_layers.csv"
# (MACs, CBUF KB, SDRAM GB/s, primer int8 ResNet-50 frames/s, Atomic-C x Atomic-K)
PRIMER = [(2048, 512, 20, 269, (64, 32)), (1024, 256, 15, 153, (32, 32)), (512, 256, 10, 93, (32, 16)),
          (256, 256, 5, 46, (32, 8)), (128, 256, 2, 20, (16, 8)), (64, 128, 1, 7.3, (8, 8)),
          (32, 128, 0.5, 3.6, (8, 4))]
CLOCK_MHZ = 1000  # the primer's table is for 1 GHz
FC_BATCH = 16  # the estimator's default fully-connected batch (it does not change these totals)


def layers() -> list[dict]:
    with open(LAYERS) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _c(x: float, m: int = 16) -> int:
    return math.ceil(x / m) * m


def estimator(macs: int, cbuf_kb: float, dram_gbps: float, direct_strides: bool = False) -> dict:
    """The spreadsheet's per-layer model (no on-chip SRAM): totals over ResNet-50.

    ``direct_strides``: the strided layers after the first keep their own weights, as NVDLA's
    direct convolution runs them: the driver programs the layer's own stride into the convolution
    sequencer (CSC ``D_CONV_STRIDE_EXT = conv_stride - 1`` in ``CONV_MODE_DIRECT``; only Winograd
    mode takes channel-extended data with stride 1: github.com/nvdla/sw commit 0bf766e9,
    kmd/firmware/conv.c, ``dla_conv_program``) and the weights are ``C x R x S`` bytes per kernel.
    The spreadsheet folds every stride into the channels (``C sv sh``) for the weights too, so a
    1x1 stride-2 layer's weights count ``sv sh`` = 4 times (and are split and re-read as such).
    The first layer and the input side (the whole input read) stay as the spreadsheet has them."""
    tot = {"dram_kb": 0.0, "dram_cycles": 0.0, "mac_cycles": 0.0, "cycles": 0.0, "dram_bound": 0}
    for i, r in enumerate(layers()):
        C, H, W, K, R, S, pad, sv, sh = (int(r[k]) for k in ("C", "H", "W", "K", "R", "S", "padded",
                                                             "stride_v", "stride_h"))
        U, V = int(r["U"]), int(r["V"])
        fc, elw = r["attribute"] == "fc", r["attribute"] == "conv + elwise"
        wino = R == 3 and S == 3
        c16 = _c(C * sv * sh)
        x = c16 * math.ceil(H / sv) * math.ceil(W / sh) / 1024
        strip = c16 * min(R + (1 if i == 0 else 0), math.ceil(H / sv)) * math.ceil(W / sh) / 1024
        z = U * V * _c(K) / 1024
        aa = c16 * math.ceil(R / sv) * math.ceil(S / sh) * 32 / 1024
        aa = cbuf_kb / 2 if aa >= cbuf_kb else aa
        if direct_strides and i > 0:
            aa = _c(C) * R * S * 32 / 1024
            aa = cbuf_kb / 2 if aa >= cbuf_kb else aa
            w = _c(C) * R * S * K / 1024 * (16 / 9 if wino else 1)
        else:
            w = c16 * math.ceil(R / sv) * math.ceil(S / sh) * K / 1024 * (16 / 9 if wino else 1)
        weight_side = (strip >= aa) if i == 0 else (x >= w)
        if weight_side:
            kb = math.ceil(w / (cbuf_kb - strip)) * x + w + z if w > cbuf_kb - strip else x + w + z
        else:
            kb = math.ceil(x / (cbuf_kb - aa)) * w + x + z if x > cbuf_kb - aa else x + w + z
        kb += z if elw else 0
        dram = math.ceil(kb / dram_gbps * CLOCK_MHZ)
        P = math.ceil((H if pad else H - R + 1) / sv)
        Q = math.ceil((W if pad else W - S + 1) / sh)
        batch = FC_BATCH if fc else 1
        mac = c16 * P * Q * _c(K * batch, 128) * R * S / sv / sh / macs / (2.25 if wino else 1) / batch
        tot["dram_kb"] += kb
        tot["dram_cycles"] += dram
        tot["mac_cycles"] += mac
        tot["cycles"] += max(dram, mac)
        tot["dram_bound"] += dram > mac
    tot["fps"] = CLOCK_MHZ * 1e6 / tot["cycles"]
    return tot


def asicsim_ops() -> list:
    ops = []
    for r in layers():
        C, H, W, K, R, S, pad, s = (int(r[k]) for k in ("C", "H", "W", "K", "R", "S", "padded", "stride_v"))
        if r["attribute"] == "fc":
            ops.append(sim.Gemm(1, K, C))
        else:
            ops.append(sim.Conv(H, W, C, K, R, S, s, (R - 1) // 2 if pad else 0, 1))
    return ops


def nvdla_design(shape: tuple[int, int], cbuf_kb: float, dram_gbps: float, acc_kib: float):
    base = sim.load_design("edge_int8_32x32")
    bufs = (BufferSpec(name="cbuf", holds=("ifmap", "filter"), capacity_kib=cbuf_kb, word_bits=8),
            BufferSpec(name="cacc", holds=("psum", "ofmap"), capacity_kib=acc_kib, word_bits=32))
    return dataclasses.replace(
        base, name=f"nvdla_{shape[0] * shape[1]}", clock_mhz=CLOCK_MHZ, buffers=bufs,
        array=dataclasses.replace(base.array, rows=shape[0], cols=shape[1], dataflow="ws"),
        dram=dataclasses.replace(base.dram, bandwidth_gbps=dram_gbps))


def asicsim_fps(macs: int, cbuf: float, gbps: float, shape: tuple[int, int], acc_kib: float) -> tuple[float, float]:
    """asicsim's ResNet-50 frames/s and DRAM MB on the NVDLA-shaped design (energy objective)."""
    rs = cost_many(asicsim_ops(), nvdla_design(shape, cbuf, gbps, acc_kib))
    return 1 / sum(r.time_s for r in rs), sum(r.dram_bytes for r in rs) / 1e6


def main() -> None:
    print("MACs CBUF GB/s | primer fps | estimator fps, DRAM MB, DRAM-bound layers, MAC ms, DRAM ms |"
          " estimator with direct strides fps, DRAM MB | asicsim fps (ratio to primer; to direct strides),"
          " DRAM MB for CACC 1 / 4 / 32 KiB")
    for macs, cbuf, gbps, fps, shape in PRIMER:
        e = estimator(macs, cbuf, gbps)
        d = estimator(macs, cbuf, gbps, direct_strides=True)
        cells = []
        for acc in (1, 4, 32):
            f, mb = asicsim_fps(macs, cbuf, gbps, shape, acc)
            cells.append(f"{f:.2f} ({f / fps:.2f}x; {f / d['fps']:.2f}x), {mb:.1f} MB")
        print(f"{macs:5d} {cbuf:4d} {gbps:4g} | {fps:6g} | {e['fps']:6.1f}, {e['dram_kb'] * 1024 / 1e6:6.1f}, "
              f"{e['dram_bound']:2d}/54, {e['mac_cycles'] / 1e6:6.1f}, {e['dram_cycles'] / 1e6:6.1f} | "
              f"{d['fps']:6.1f}, {d['dram_kb'] * 1024 / 1e6:6.1f} | " + " / ".join(cells))


if __name__ == "__main__":
    main()
