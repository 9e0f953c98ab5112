"""Every figure the mapper's choices produce, saved or compared bit for bit (issue 31 item 4: the
mapper made fast without moving a figure).

The cases: every systolic design in ``designs/`` (and two with ``psum_spill``) x ResNet-18 (SCALE-Sim's 21 layers), ResNet-50 and
one GPT-2 block (``benchmarks/bench_cost_sweep.py``) x every objective through
:func:`asicsim._src.hw.cost_many`; a random GEMM and conv grid (``--gemms``, seed 0) through
:func:`asicsim._src.hw.gemm_sweep` over array rows x cols x dataflow x buffer_scale on four designs
x every objective; and the sweep of ``bench_cost_sweep.py`` (ResNet-18, sides 64..256 step 64,
every dataflow and buffer scale, every format) under ``balanced`` and ``energy``. Every array of
each price (:meth:`asicsim._src.hw.result.Price.arrays`) is stored, so a check compares every value;
each ``cost_many`` case is priced twice, the second time through what is kept by content.

    python benchmarks/mapper_identity.py --save /tmp/ref.npz    # on the reference commit
    python benchmarks/mapper_identity.py --check /tmp/ref.npz   # on the code under test

Run both with the same numpy; ``--check`` prints every figure that differs and exits 1 on any.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cost_sweep as bench

import asicsim as sim
from asicsim._src.hw import (
    cost_many,
    gemm_sweep,
    load_design,
    read_scalesim_topology,
    topology_operations,
)
from asicsim._src.hw.design import SystolicDesign
from asicsim._src.hw.objectives import OBJECTIVES

DESIGNS = Path(__file__).resolve().parents[1] / "designs"


def systolic_designs() -> list[str]:
    out = []
    for f in sorted(DESIGNS.glob("*.toml")):
        if isinstance(load_design(f.stem), SystolicDesign):
            out.append(f.stem)
    return out


def with_spill(name: str) -> SystolicDesign:
    """``name`` with partial sums allowed in its activation buffer too (``psum_spill``: no shipped
    design sets it; the mapper then searches both homes)."""
    d = load_design(name)
    bufs = tuple(dataclasses.replace(b, psum_spill="ifmap" in b.holds) for b in d.buffers)
    return dataclasses.replace(d, name=f"{d.name}_spill", buffers=bufs)


def random_ops(n: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    ops = [sim.Gemm(*(int(x) for x in rng.integers(1, 3000, 3))) for _ in range(n)]
    ops += [sim.Gemm(int(rng.integers(1, 64)), *(int(x) for x in rng.integers(1, 5000, 2))) for _ in range(n // 4)]
    ops += [sim.Conv(int(s), int(s), int(rng.integers(1, 512)), int(rng.integers(1, 512)), 3, 3, padding=1)
            for s in rng.integers(4, 60, n // 4)]
    return ops


def cases(gemms: int):
    """(name, callable returning a Price) for every case (module docstring)."""
    nets = {"resnet18": topology_operations(read_scalesim_topology(bench.TOPOLOGY)), "resnet50": bench.resnet50(),
            "gpt2": bench.gpt2_block()}
    for d in [*systolic_designs(), with_spill("edge_int8_32x32"), with_spill("dc_bf16_128x128")]:
        for net, ops in nets.items():
            for o in OBJECTIVES:
                yield f"many/{getattr(d, 'name', d)}/{net}/{o}", lambda ops=ops, d=d, o=o: cost_many(ops, d, objective=o).price
    ops = random_ops(gemms)
    rng = np.random.default_rng(1)
    grid = dict(rows=np.sort(rng.integers(1, 257, 4))[:, None, None, None],
                cols=np.sort(rng.integers(1, 257, 3))[None, :, None, None],
                dataflow=np.arange(3)[None, None, :, None], buffer_scale=2.0 ** np.arange(-4, 4, 3)[None, None, None, :])
    for d in ("edge_int8_32x32", "dc_bf16_128x128", "tpu_v1", with_spill("edge_int8_32x32")):
        for o in OBJECTIVES:
            yield f"grid/{getattr(d, 'name', d)}/{o}", lambda d=d, o=o: gemm_sweep(ops, d, objective=o, **grid)
    side = np.arange(64, 257, 64)
    for o in ("balanced", "energy"):
        for fname in bench.FORMATS:
            yield f"sweep/{fname}/{o}", lambda fname=fname, o=o: gemm_sweep(
                nets["resnet18"], bench.with_pe("dc_bf16_128x128", fname), rows=side[:, None, None, None],
                cols=side[None, :, None, None], dataflow=np.arange(3)[None, None, :, None],
                buffer_scale=bench.BUFFER_SCALES[None, None, None, :], objective=o)


def figures(gemms: int) -> dict:
    out = {}
    for name, run in cases(gemms):
        try:
            price = run()
        except ValueError as e:  # a case with no schedule (a grid point whose buffers fit nothing): the message
            out[f"{name}|error"] = np.asarray(str(e))
            continue
        for k, v in price.arrays().items():
            out[f"{name}|{k}"] = np.asarray(v)
        if name.startswith("many/"):  # priced again: through what the mapper and pricing keep by content
            for k, v in run().arrays().items():
                out[f"{name}/again|{k}"] = np.asarray(v)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--check", type=Path)
    ap.add_argument("--gemms", type=int, default=40, help="random GEMMs of the grid cases")
    args = ap.parse_args()
    t0 = time.process_time()
    got = figures(args.gemms)
    print(f"{len(got):,d} arrays, {sum(v.size for v in got.values()):,d} values in {time.process_time() - t0:.1f} CPU s")
    if args.save:
        np.savez_compressed(args.save, **got)
        return
    ref = dict(np.load(args.check))
    bad = sorted(set(ref) ^ set(got))
    for k in sorted(set(ref) & set(got)):
        a, b = ref[k], got[k]
        same = a.tobytes() == b.tobytes() if a.dtype.kind != "O" else np.array_equal(a, b)  # bits, not values
        if a.shape != b.shape or a.dtype != b.dtype or not same:
            bad.append(k)
    for k in bad[:50]:
        print("differs:", k)
    print(f"{len(bad)} of {len(ref)} arrays differ" if bad else f"all {len(ref):,d} arrays bit-identical")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
