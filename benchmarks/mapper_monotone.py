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

``--grid`` asks the same of the array sizes a design sweep steps through, not only twice the
array: ResNet-18's layers (SCALE-Sim topology ``tests/hw/golden/inputs/Resnet18.csv``) on
edge_int8_32x32 with operands bypassing unused rows and columns, ``latency``, one
:func:`asicsim._src.hw.gemm_sweep` over rows x cols (multiples of ``--step`` up to ``--top``) x
os/ws/is; every pair of sizes along one side, the other side fixed, is one comparison per
(layer, other side, dataflow), and every pair of square arrays one per (layer, dataflow). The
mapper's levels hold a larger array both of whose sides are the same ``2^k`` times the smaller's
(asicsim/_src/hw/mapper_folds.py): those square pairs are counted apart.

    python benchmarks/mapper_monotone.py --grid [--step 8] [--top 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools

import numpy as np
from bench_cost_sweep import TOPOLOGY  # benchmarks/ is on sys.path

import asicsim as sim
from asicsim._src.hw import gemm_sweep, load_design, read_scalesim_topology, topology_operations

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


def worse_pairs(cycles: np.ndarray, sides: np.ndarray, axis: int) -> list[tuple]:
    """``(smaller side, larger side, comparisons, worse, worst ratio)`` for every pair of
    ``sides`` along ``axis`` of ``cycles`` (the other axes: the comparisons): worse where the
    larger side's cycles exceed the smaller's by more than 1e-9 relative."""
    out = []
    for i, j in itertools.combinations(range(len(sides)), 2):
        small, large = np.take(cycles, i, axis=axis), np.take(cycles, j, axis=axis)
        ratio = large / small
        bad = ratio > 1 + 1e-9
        out.append((int(sides[i]), int(sides[j]), int(ratio.size), int(bad.sum()),
                    float(ratio[bad].max()) if bad.any() else 1.0))
    return out


def power_of_two_apart(small: int, large: int) -> bool:
    q, r = divmod(large, small)
    return r == 0 and q & (q - 1) == 0


def grid(step: int = 8, top: int = 64, design: str = "edge_int8_32x32", ops=None) -> dict:
    """Larger arrays on a sweep's grid (module docstring): per kind of pair (one side larger;
    both, ``2^k`` times; both, otherwise), the comparisons, how many are worse and the worst
    ratio, with the worst pairs of sides."""
    d = bypassing(load_design(design))
    ops = topology_operations(read_scalesim_topology(TOPOLOGY)) if ops is None else ops
    sides = np.arange(step, top + 1, step)
    cycles = np.asarray(gemm_sweep(ops, d, objective="latency", rows=sides[:, None, None],
                                   cols=sides[None, :, None], dataflow=np.arange(3)[None, None, :]).cycles)
    square = cycles[np.arange(len(sides)), np.arange(len(sides))]  # (sides, dataflow, layers)
    kinds = {"one side": [], "square, 2^k": [], "square, other": []}
    for axis, name in ((0, "rows"), (1, "cols")):
        kinds["one side"] += [(name, *row) for row in worse_pairs(cycles, sides, axis)]
    for row in worse_pairs(square, sides, 0):
        kinds["square, 2^k" if power_of_two_apart(row[0], row[1]) else "square, other"].append(("both", *row))
    out = {}
    for kind, rows in kinds.items():
        bad = sorted(((worst, f"{name} {small} -> {large}", n_bad) for name, small, large, _, n_bad, worst in rows
                      if n_bad), reverse=True)
        out[kind] = {"comparisons": sum(r[3] for r in rows), "worse": sum(r[4] for r in rows),
                     "worst": max((r[5] for r in rows), default=1.0), "pairs": bad}
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gemms", nargs="?", type=int, default=30)
    ap.add_argument("--grid", action="store_true", help="larger arrays on a sweep's grid of sides (module docstring)")
    ap.add_argument("--step", type=int, default=8)
    ap.add_argument("--top", type=int, default=64)
    args = ap.parse_args()
    if not args.grid:
        main(args.gemms)
    else:
        for kind, row in grid(args.step, args.top).items():
            print(f"{kind:10s} {row['worse']:5d} of {row['comparisons']} comparisons worse, worst {row['worst']:.4f}x; "
                  f"worst pairs: {row['pairs'][:5]}")
