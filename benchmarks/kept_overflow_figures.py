"""DRAM, time and energy of ResNet-50 and a GPT-2 block on every systolic design in the repo, per
mapping objective: the figures issue 31's kept-on-chip overflow fix moves (tensors kept on chip
between operations that outgrow their buffer: asicsim/_src/hw/residency.py).

    python benchmarks/kept_overflow_figures.py [--designs tpu_v1,edge_int8_32x32] [--json OUT]

Networks: ResNet-50 at batch 1 and 32 (He et al. 2016, Table 1; 224x224) and one GPT-2 small block
at 1024 and 8192 tokens (Radford et al. 2019). Prints one line per (design, network, objective):
total DRAM MB, time ms, board energy mJ, the summed DRAM lower bound MB; ``--json`` also writes
them (run it on two trees to compare)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cost_sweep import gpt2_block

from asicsim import Conv, Gemm
from asicsim._src.hw import cost_many, load_design

DESIGNS = ("tpu_v1", "tpu_v4", "edge_int8_32x32", "dc_bf16_128x128", "fp8_128x128", "eyeriss_v1",
           "scalesim_default", "scalesim_google")
OBJECTIVES = ("balanced", "dram", "energy", "latency")


def resnet50(batch: int) -> list:
    """ResNet-50's convolutions and classifier at ``batch`` (as bench_cost_sweep.resnet50 at 1)."""
    ops = [Conv(224, 224, 3, 64, 7, 7, stride=2, padding=3, batch=batch)]
    size, inp = 56, 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            stride = 2 if b == 0 and width != 64 else 1
            out = size // stride
            ops += [Conv(size, size, inp, width, 1, 1, batch=batch),
                    Conv(size, size, width, width, 3, 3, stride=stride, padding=1, batch=batch),
                    Conv(out, out, width, 4 * width, 1, 1, batch=batch)]
            if b == 0:
                ops.append(Conv(size, size, inp, 4 * width, 1, 1, stride=stride, batch=batch))
            size, inp = out, 4 * width
    return [*ops, Gemm(batch, 1000, 2048)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    nets = {"ResNet-50 b1": resnet50(1), "ResNet-50 b32": resnet50(32), "GPT-2 block 1024": gpt2_block(1024),
            "GPT-2 block 8192": gpt2_block(8192)}
    out = {}
    for name in args.designs.split(","):
        d = load_design(name)
        for net, ops in nets.items():
            for obj in OBJECTIVES:
                rs = cost_many(ops, d, objective=obj)
                row = [sum(r.dram_bytes for r in rs), sum(r.time_s for r in rs),
                       sum(r.energy_total_pj for r in rs) * 1e-12, sum(r.dram_bound_bytes for r in rs)]
                out[f"{name}|{net}|{obj}"] = row
                print(f"{name:17s} {net:17s} {obj:9s} {row[0] / 1e6:10.3f} MB {row[1] * 1e3:10.3f} ms "
                      f"{row[2] * 1e3:10.2f} mJ  bound {row[3] / 1e6:10.3f} MB", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=0))


if __name__ == "__main__":
    main()
