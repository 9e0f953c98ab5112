"""Where the mapper's time goes: process CPU per stage (issue 31 item 4).

1. Cold :func:`asicsim._src.hw.cost_many` of ResNet-50 on ``edge_int8_32x32`` (``balanced``; caches
   cleared before each of ``--repeat`` calls): candidate generation, stacking, twins, ``distinct``,
   measuring, search.
2. One format of the ``bench_cost_sweep.py`` sweep (ResNet-18 on dc_bf16_128x128 int8, sides
   ``--step``..256, every dataflow and buffer scale) under ``balanced`` and ``energy``: generation,
   stacking and twins, lean counts, fit checks, measuring, search.

Each stage is timed by a wrapper around the function (nested stages count in their callers too;
the wrappers add their own overhead, ~10 % cold).

    python benchmarks/mapper_stage_times.py [--step 32] [--repeat 20]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cost_sweep as bench

from asicsim._src.hw import (
    cost_many,
    gemm_sweep,
    mapper,
    mapper_passes,
    pipeline,
    read_scalesim_topology,
    topology_operations,
)

_spent: dict = {}


def _timed(mod, name: str, label: str | None = None) -> None:
    f = getattr(mod, name)

    @functools.wraps(f)
    def run(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            _spent[label or name] = _spent.get(label or name, 0.0) + time.process_time() - t

    setattr(mod, name, run)


def _timed_generator(mod, name: str) -> None:
    f = getattr(mod, name)

    def run(*a, **k):
        it = f(*a, **k)
        while True:
            t = time.process_time()
            try:
                x = next(it)
            except StopIteration:
                return
            finally:
                _spent[name] = _spent.get(name, 0.0) + time.process_time() - t
            yield x

    setattr(mod, name, run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    for mod, name, label in ((mapper, "candidates", "generation"), (mapper_passes, "distinct", None),
                             (mapper_passes, "_stack", "stack"), (mapper_passes, "aligned", "twins"),
                             (mapper_passes, "valid", "fit checks"),
                             (mapper_passes, "schedule_counts", "lean counts"),
                             (mapper_passes, "measures", "measures (all)"), (mapper_passes, "search", "search (all)"),
                             (pipeline, "best_counts", "mapper (all)")):
        _timed(mod, name, label)
    _timed_generator(mapper_passes, "stacked_chunks")
    ops = bench.resnet50()
    cost_many(ops, "edge_int8_32x32")
    _spent.clear()
    total = 0.0
    for _ in range(args.repeat):
        bench._clear_caches()
        t = time.process_time()
        cost_many(ops, "edge_int8_32x32")
        total += time.process_time() - t
    print(f"cold cost_many, ResNet-50 on edge_int8_32x32 (balanced), CPU ms per call (mean of {args.repeat}): "
          f"{total / args.repeat * 1e3:.1f}")
    for k, v in _spent.items():
        print(f"  {k:20s} {v / args.repeat * 1e3:7.2f} ms")
    r18 = topology_operations(read_scalesim_topology(bench.TOPOLOGY))
    side = np.arange(args.step, 257, args.step)
    grid = dict(rows=side[:, None, None, None], cols=side[None, :, None, None],
                dataflow=np.arange(3)[None, None, :, None], buffer_scale=bench.BUFFER_SCALES[None, None, None, :])
    points = side.size ** 2 * 3 * bench.BUFFER_SCALES.size
    for o in ("balanced", "energy"):
        _spent.clear()
        t = time.process_time()
        gemm_sweep(r18, bench.with_pe("dc_bf16_128x128", "int8"), objective=o, **grid)
        total = time.process_time() - t
        print(f"sweep of ResNet-18 on dc_bf16_128x128 int8, sides {side[0]}..256 step {args.step}, {o}: {points:,d} "
              f"points, {total:.2f} CPU s, {points / total * 60:,.0f} points/CPU-min")
        for k, v in _spent.items():
            print(f"  {k:20s} {v:7.2f} s {v / total:6.1%}")


if __name__ == "__main__":
    main()
