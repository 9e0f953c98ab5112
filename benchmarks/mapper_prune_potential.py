"""How much of the mapper's measuring a branch and bound on the cheap floors could skip (issue 31
item 4): an upper limit, not a prune.

For every (candidate, element) pair the mapper measures, the floor of its objective from
:mod:`asicsim._src.hw.mapper_bounds` (DRAM transfer and a compute floor: no folds) is compared with the
value the search finally chose for that element (for ``balanced``, its first pass: the latency,
with the 5 % slack, since a pair within it may win the second pass). A branch and bound can skip a
pair only where the floor is above the best found *so far*, which is never below the final
choice, so the fractions printed bound what any order of the candidates could skip: "pairs" per
(candidate, element), and "rows" per candidate over its whole chunk (what can be skipped without
gathering the surviving pairs first, a cost of the order of measuring them).

    python benchmarks/mapper_prune_potential.py [--step 64]
"""

from __future__ import annotations

import argparse
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
    mapper_cache,
    mapper_passes,
    pipeline,
    read_scalesim_topology,
    topology_operations,
)
from asicsim._src.hw.counts import Schedule, schedule_counts
from asicsim._src.hw.mapper_bounds import floors
from asicsim._src.hw.objectives import BALANCED_SLACK, OBJECTIVES

_seen: list = []  # (floor, measured primary) per chunk of the current best_counts call
_state: dict = {}


def _hook():
    measures, best_counts, schedule_energy = mapper_passes.measures, mapper.best_counts, pipeline.schedule_energy

    def energy(c, bpe, rates):  # the pipeline's score: keep its rates for the energy floor
        _state["rates"] = rates
        return schedule_energy(c, bpe, rates)

    def measured(p, hw, s, score_energy):
        out = measures(p, hw, s, score_energy)
        c = schedule_counts(p, hw, Schedule(np.maximum(s.family, 0), s.Mt, s.Nt, s.Kt, s.double_buffered,
                                            s.psum_spill, s.Ma, s.Na, s.streamed, s.tile_share, s.fold_rows, s.fold_cols), lean=True)
        f = floors(p, hw, c, _state["rates"])[_state["objective"]]
        key = "latency" if _state["objective"] == "balanced" else _state["objective"]
        assert np.all(np.broadcast_to(f, out[key].shape) <= out[key])  # the floor holds
        _seen.append(np.broadcast_to(f, out[key].shape))
        return out

    def chosen(p, hw, objective, score_energy=None, energy_key=None):  # nothing kept: searched each time
        if mapper_passes.by_dataflow(p, hw) is not None:  # split: each dataflow comes back here
            return best_counts(p, hw, objective, score_energy)
        _seen.clear()
        c = best_counts(p, hw, objective, score_energy)
        value = {"latency": c.busy_cycles + c.cycles_stall, "balanced": (c.busy_cycles + c.cycles_stall)
                 * (1 + BALANCED_SLACK), "dram": c.dram_bytes, "energy": None}[objective]
        if value is None:
            value = score_energy(c)
        for f in _seen:  # every (candidate, element) pair
            f = np.broadcast_to(f, np.broadcast_shapes(f.shape, (f.shape[0], *np.shape(value))))
            skip = f > value * (1 + 1e-9)
            _state["pairs"] += f.size
            _state["skip"] += int(skip.sum())
            _state["rows"] += f.shape[0]
            _state["skip_rows"] += int(skip.reshape(f.shape[0], -1).all(axis=1).sum())
        return c

    mapper_passes.measures, mapper.best_counts, pipeline.best_counts = measured, chosen, chosen
    pipeline.schedule_energy = energy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", type=int, default=64, help="array side step of the sweep (sides step..256)")
    args = ap.parse_args()
    _hook()
    r18 = topology_operations(read_scalesim_topology(bench.TOPOLOGY))
    side = np.arange(args.step, 257, args.step)
    grid = dict(rows=side[:, None, None, None], cols=side[None, :, None, None],
                dataflow=np.arange(3)[None, None, :, None], buffer_scale=bench.BUFFER_SCALES[None, None, None, :])
    cases = {"ResNet-50 on edge_int8_32x32 (cost_many)": lambda o: cost_many(bench.resnet50(), "edge_int8_32x32", objective=o),
             f"ResNet-18 sweep on dc_bf16_128x128 int8, sides {side[0]}..256 step {args.step}":
                 lambda o: gemm_sweep(r18, bench.with_pe("dc_bf16_128x128", "int8"), objective=o, **grid)}
    print(f"{'case':64s} {'objective':9s} {'pairs':>11s} {'skippable':>9s} {'rows':>7s} {'skippable':>9s} {'CPU s':>6s}")
    for name, run in cases.items():
        for o in OBJECTIVES:
            _state.update(objective=o, pairs=0, skip=0, rows=0, skip_rows=0)
            mapper_cache.clear_cache()
            t0 = time.process_time()
            run(o)
            print(f"{name:64s} {o:9s} {_state['pairs']:11,d} {_state['skip'] / _state['pairs']:9.1%} "
                  f"{_state['rows']:7,d} {_state['skip_rows'] / _state['rows']:9.1%} {time.process_time() - t0:6.1f}")


if __name__ == "__main__":
    main()
