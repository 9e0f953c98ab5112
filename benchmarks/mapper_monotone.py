"""How often the mapper's choice gets worse on its own objective when the hardware gets better.

Random GEMMs (seed 7, each side 8..2047) on edge_int8_32x32, dc_bf16_128x128 and tpu_v1; for each
objective (latency: cycles, energy: total energy, dram: bytes) counts the GEMMs whose chosen
schedule is worse after: 2x every buffer, 2x the DRAM bandwidth, 2x the array's rows and columns at
fixed buffers (energy not counted: more PEs have more static power), and int4 instead of int8
operands on edge_int8_32x32. Energy under larger buffers or more bandwidth is not held by physics
either (larger SRAMs cost more per access, a wider DRAM interface more idle power). A larger array
also lengthens the one-time fill/drain (``2R + C - 2`` cycles once per GEMM: operands and results
cross the whole array), which no schedule avoids; the array line also counts the GEMMs worse by
more than that. The "bypass" array line makes the designs' operands bypass unused rows and columns
(``array.bypass_unused``: fill/drain of the used block only), where no allowance is due.

    python benchmarks/mapper_monotone.py [GEMMs, default 30]
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

import asicsim as sim
from asicsim._src.hw import load_design

METRIC = {"latency": lambda r: r.cycles, "energy": lambda r: r.energy_total_pj, "dram": lambda r: r.dram_bytes}


def buffers(d, k):
    return dataclasses.replace(d, buffers=tuple(dataclasses.replace(b, capacity_kib=b.capacity_kib * k)
                                                for b in d.buffers))


def bandwidth(d, k):
    return dataclasses.replace(d, dram=dataclasses.replace(d.dram, bandwidth_gbps=d.dram.bandwidth_gbps * k))


def array(d, k):
    return dataclasses.replace(d, array=dataclasses.replace(d.array, rows=d.array.rows * k, cols=d.array.cols * k))


def bypassing(d):
    return dataclasses.replace(d, array=dataclasses.replace(d.array, bypass_unused=True,
                                                            bypass_unused_source="benchmark: what-if"))


def main(n: int) -> None:
    rng = np.random.default_rng(7)
    ops = [sim.Gemm(*map(int, rng.integers(8, 2048, 3))) for _ in range(n)]
    designs = [load_design(x) for x in ("edge_int8_32x32", "dc_bf16_128x128", "tpu_v1")]
    for name, change in (("buffers x2", lambda d: buffers(d, 2)), ("bandwidth x2", lambda d: bandwidth(d, 2)),
                         ("array x2 (fixed buffers)", lambda d: array(d, 2)),
                         ("array x2, bypass", lambda d: array(d, 2))):
        for obj in ("latency", "energy", "dram"):
            if name.startswith("array") and obj == "energy":
                continue
            worse, worst, total, beyond = 0, 1.0, 0, 0
            for d in designs:
                d = bypassing(d) if "bypass" in name else d
                before = sim.hw.cost_many(ops, d, objective=obj)
                after = sim.hw.cost_many(ops, change(d), objective=obj)
                # the larger array's longer fill/drain (none where operands bypass unused PEs)
                fill = 0 if d.array.bypass_unused else 2 * d.array.rows + d.array.cols
                for a, b in zip(before, after, strict=True):
                    total += 1
                    r = METRIC[obj](b) / METRIC[obj](a)
                    worse += r > 1 + 1e-9
                    worst = max(worst, r)
                    beyond += obj == "latency" and b.cycles > a.cycles * (1 + 1e-9) + fill
            extra = f"; {beyond} beyond the one-time fill/drain" if name.startswith("array") and obj == "latency" else ""
            print(f"{name:26s} {obj:8s} worse in {worse:3d} of {total}, worst {worst:.3f}x{extra}", flush=True)
    edge = designs[0]
    for obj in ("latency", "energy", "dram"):
        worse, worst = 0, 1.0
        for op in ops:
            a = sim.cost(op, edge, "act=int8,weight=int8", objective=obj)
            b = sim.cost(op, edge, "act=int4,weight=int4", objective=obj)
            r = METRIC[obj](b) / METRIC[obj](a)
            worse += r > 1 + 1e-9
            worst = max(worst, r)
        print(f"{'int4 vs int8 (edge)':26s} {obj:8s} worse in {worse:3d} of {len(ops)}, worst {worst:.3f}x", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
