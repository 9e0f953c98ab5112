"""Throughput of the physical cost model over ResNet-18: a vectorised design sweep and the scalar path.

1. :func:`asicsim._src.hw.gemm_sweep` over ResNet-18's 21 layers (SCALE-Sim topology
   ``tests/hw/golden/inputs/Resnet18.csv``) on a catalog design (default ``dc_bf16_128x128``):
   array rows x cols (multiples of ``--step`` from ``--step`` to 256: powers of two and the sizes
   in between) x dataflow {os, ws, is} x buffer_scale (2^-4 .. 2^3, every buffer's capacity scaled)
   x PE formats (the design with those formats as its native mode; one ``gemm_sweep`` call per
   format and chunk of rows). A design point is one
   (rows, cols, dataflow, buffer_scale, formats) combination priced on every layer. Prints design
   points per minute and microseconds per design point (wall and CPU), and the best design point
   by total energy and by total cycles over the network (so the output is used).
2. :func:`asicsim.cost_table` on the same layers for one design point (the design as catalogued)
   per format: the scalar, non-vectorised path, in ms per network per design point; beside it
   ``gemm_sweep`` for that one design point (no grid), for comparison.
3. ``--networks``: :func:`asicsim._src.hw.cost_many` of ResNet-18 (the topology above), ResNet-50 (He et
   al. 2016, Table 1, 224x224, batch 1; stride on the 3x3 convolutions) and one GPT-2 small block
   (d_model 768, 12 heads, 1024 tokens: QKV, scores and values per head, projection, MLP 4x) on
   ``--network-design`` (default ``edge_int8_32x32``), CPU ms per network, beside a numpy anchor
   timed alternately in the same run (5 products of 256x256 float64 matrices), and per design point
   of a :func:`asicsim._src.hw.gemm_sweep` of the network over 384 design points of that design.

Both run for the mapping ``--objective`` (default: the default objective, ``balanced``) and, in the
same run, for an ``--anchor`` objective (default ``energy``, the default before issue 30), so the
ratio of the two is measured under the same load of a shared machine.

    python benchmarks/bench_cost_sweep.py [--design dc_bf16_128x128] [--step 8] [--rows-per-chunk 32] [--repeat 20]
                                          [--objective balanced] [--anchor energy] [--networks]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import platform
import resource
import time
from pathlib import Path

import numpy as np

from asicsim import Conv, Gemm, cost_table
from asicsim._src.hw import (
    cost_many,
    gemm_sweep,
    load_design,
    read_scalesim_topology,
    topology_operations,
)
from asicsim._src.hw.objectives import DEFAULT_OBJECTIVE, OBJECTIVES

TOPOLOGY = Path(__file__).resolve().parents[1] / "tests" / "hw" / "golden" / "inputs" / "Resnet18.csv"
# each a variant of the design with these PE formats (its native full-rate mode)
FORMATS = {
    "int8": ("int8", "int8", "int32"),
    "fp8_e4m3": ("float8_e4m3fn", "float8_e4m3fn", "fp32"),
    "bf16": ("bf16", "bf16", "fp32"),
    "mxfp8_e4m3": ("mxfp8_e4m3", "mxfp8_e4m3", "fp32"),
    "mxint8": ("mxint8", "mxint8", "fp32"),
}


@functools.cache
def with_pe(design: str, fname: str):
    """``design`` with PE formats ``FORMATS[fname]``: the design point the format names."""
    d = load_design(design)
    a, b, acc = FORMATS[fname]
    return dataclasses.replace(d, name=f"{d.name}_{fname}",
                               pe=dataclasses.replace(d.pe, a_format=a, b_format=b, acc_format=acc, modes=()))
DATAFLOWS = ("os", "ws", "is")
BUFFER_SCALES = 2.0 ** np.arange(-4, 4)  # 1/16 .. 8


def bench_sweep(ops, design: str, step: int, rows_per_chunk: int, objective: str) -> tuple[float, float]:
    side = np.arange(step, 257, step)
    cols = side[None, :, None, None]
    dfs = np.arange(len(DATAFLOWS))[None, None, :, None]
    scales = BUFFER_SCALES[None, None, None, :]
    grid = (side.size, side.size, len(DATAFLOWS), BUFFER_SCALES.size)
    points = int(np.prod(grid)) * len(FORMATS)
    best = {"energy_pj": (np.inf, None), "cycles": (np.inf, None)}
    t0, c0 = time.perf_counter(), time.process_time()
    for fname in FORMATS:
        for start in range(0, side.size, rows_per_chunk):
            rows = side[start:start + rows_per_chunk, None, None, None]
            r = gemm_sweep(ops, with_pe(design, fname), rows=rows, cols=cols, dataflow=dfs, buffer_scale=scales,
                           objective=objective)
            for key in best:
                total = getattr(r, key).sum(axis=-1)
                i = np.unravel_index(int(total.argmin()), total.shape)
                if total[i] < best[key][0]:
                    best[key] = (float(total[i]), (fname, int(rows[i[0], 0, 0, 0]), int(side[i[1]]),
                                                   DATAFLOWS[i[2]], float(BUFFER_SCALES[i[3]])))
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"objective {objective}; design {design}: rows x cols {side[0]}..{side[-1]} step {step} ({side.size} x {side.size}) "
          f"x dataflow {{{', '.join(DATAFLOWS)}}} x buffer_scale 1/16..8 ({BUFFER_SCALES.size}) "
          f"x formats {{{', '.join(FORMATS)}}}")
    print(f"{'design points':>13s} {'layers':>6s} {'wall s':>7s} {'CPU s':>7s} {'points/min (wall)':>17s} "
          f"{'points/min (CPU)':>16s} {'us/point (wall)':>15s} {'us/point (CPU)':>14s} {'peak RSS MiB':>12s}")
    print(f"{points:13,d} {len(ops):6d} {dt:7.2f} {cpu:7.2f} {points / dt * 60:17,.0f} "
          f"{points / cpu * 60:16,.0f} {dt / points * 1e6:15.2f} {cpu / points * 1e6:14.2f} {rss_mib:12,.0f}")
    for key, unit in (("energy_pj", "pJ"), ("cycles", "cycles")):
        value, (fname, rows, cols_, df, scale) = best[key]
        print(f"best by total {key.removesuffix('_pj')}: {value:,.0f} {unit} at {fname}, {rows}x{cols_}, "
              f"{df}, buffer_scale {scale:g}")
    return dt, cpu


def _mean_s(fn, repeat: int) -> tuple[float, float]:
    """(CPU, wall) seconds per call, mean of ``repeat`` after one warm-up (design and format caches)."""
    fn()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - c0) / repeat, (time.perf_counter() - t0) / repeat


def bench_scalar(ops, design: str, repeat: int, objective: str) -> float:
    print(f"objective {objective}; one design point ({design} as catalogued), ms per network (mean of {repeat}): the scalar path "
          "cost_table(ops, design, formats), and gemm_sweep with no grid for comparison")
    print(f"{'formats':12s} {'cost_table CPU ms':>17s} {'wall ms':>8s} {'gemm_sweep CPU ms':>17s} {'wall ms':>8s}")
    total = 0.0
    for fname in FORMATS:
        table = _mean_s(functools.partial(cost_table, ops, with_pe(design, fname), objective=objective), repeat)
        sweep = _mean_s(functools.partial(gemm_sweep, ops, with_pe(design, fname), objective=objective), repeat)
        print(f"{fname:12s} {table[0] * 1e3:17.2f} {table[1] * 1e3:8.2f} {sweep[0] * 1e3:17.2f} "
              f"{sweep[1] * 1e3:8.2f}")
        total += table[0]
    return total


def resnet50() -> list:
    """ResNet-50's convolutions and classifier (He et al. 2016, Table 1; 224x224, batch 1)."""
    ops = [Conv(224, 224, 3, 64, 7, 7, stride=2, padding=3)]
    size, inp = 56, 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            stride = 2 if b == 0 and width != 64 else 1
            out = size // stride
            ops += [Conv(size, size, inp, width, 1, 1), Conv(size, size, width, width, 3, 3, stride=stride, padding=1),
                    Conv(out, out, width, 4 * width, 1, 1)]
            if b == 0:
                ops.append(Conv(size, size, inp, 4 * width, 1, 1, stride=stride))
            size, inp = out, 4 * width
    return [*ops, Gemm(1, 1000, 2048)]


def gpt2_block(tokens: int = 1024, d: int = 768, heads: int = 12) -> list:
    """One GPT-2 small block's GEMMs (Radford et al. 2019: d_model 768, 12 heads, MLP 4x)."""
    h = d // heads
    return ([Gemm(tokens, 3 * d, d)] + [Gemm(tokens, tokens, h) for _ in range(heads)]
            + [Gemm(tokens, h, tokens) for _ in range(heads)] + [Gemm(tokens, d, d), Gemm(tokens, 4 * d, d),
                                                                  Gemm(tokens, d, 4 * d)])


def _numpy_anchor() -> None:
    a = np.random.default_rng(0).standard_normal((256, 256))
    for _ in range(5):
        a = a @ a
        a /= np.abs(a).max()


def bench_networks(design: str, repeat: int, objective: str) -> None:
    nets = {"ResNet-18": topology_operations(read_scalesim_topology(TOPOLOGY)), "ResNet-50": resnet50(),
            "GPT-2 block": gpt2_block()}
    print(f"objective {objective}; cost_many per network on {design}, CPU ms (mean of {repeat}, after one warm-up), "
          "beside a numpy anchor timed alternately; 'cold': the mapper's kept candidates and choices and the bounds' cache "
          "cleared before each call (a design point priced for the first time), 'warm': the same network again")
    side = np.arange(8, 65, 8)
    grid = dict(rows=side[:, None, None, None], cols=side[None, :, None, None], dataflow=np.arange(3)[None, None, :, None],
                buffer_scale=np.array([0.5, 1.0])[None, None, None, :])
    points = side.size ** 2 * 3 * 2
    print(f"'grid': gemm_sweep of the network over {points} design points of {design} (rows, cols 8..64 step 8 x "
          "os/ws/is x buffer_scale 0.5, 1; caches cleared), CPU ms per design point, once per repeat")
    print(f"{'network':12s} {'GEMMs':>5s} {'cold CPU ms':>11s} {'warm CPU ms':>11s} {'anchor CPU ms':>13s} "
          f"{'cold / anchor':>13s} {'grid CPU ms/point':>17s}")
    for name, ops in nets.items():
        run = functools.partial(cost_many, ops, design, objective=objective)
        run()
        cold = warm = anchor = 0.0
        for _ in range(repeat):
            warm += _mean_s(run, 1)[0]
            c0 = time.process_time()
            _clear_caches()
            run()
            cold += time.process_time() - c0
            anchor += _mean_s(_numpy_anchor, 1)[0]
        swept = 0.0
        for _ in range(repeat):
            _clear_caches()
            c0 = time.process_time()
            gemm_sweep(ops, design, objective=objective, **grid)
            swept += time.process_time() - c0
        print(f"{name:12s} {len(ops):5d} {cold / repeat * 1e3:11.2f} {warm / repeat * 1e3:11.2f} "
              f"{anchor / repeat * 1e3:13.2f} {cold / anchor:13.2f} {swept / repeat / points * 1e3:17.3f}")


def _clear_caches() -> None:
    """Forget what the mapper and the bounds cache by content (code before them has none)."""
    try:
        from asicsim._src.hw import conv_windows, cost, mapper_passes
        (mapper_passes.clear_cache if hasattr(mapper_passes, "clear_cache") else _mapper_cache().clear_cache)()
        conv_windows._window_cover.cache_clear()
        cost._bounds_of.cache_clear()  # operation_bounds' cache (pricing itself bounds the problem it prices)
    except (AttributeError, ImportError):
        pass


def _mapper_cache():
    """The module of the candidates and choices kept by content (i31-speed's fourth step on)."""
    from asicsim._src.hw import mapper_cache
    return mapper_cache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", default="dc_bf16_128x128")
    ap.add_argument("--step", type=int, default=8, help="array side step (sides step..256)")
    ap.add_argument("--rows-per-chunk", type=int, default=32, help="row values per gemm_sweep call")
    ap.add_argument("--repeat", type=int, default=20, help="repeats of the scalar path")
    ap.add_argument("--objective", choices=OBJECTIVES, default=DEFAULT_OBJECTIVE, help="the mapping objective timed")
    ap.add_argument("--anchor", choices=OBJECTIVES, default="energy",
                    help="an objective timed in the same run, for the ratio (default: energy)")
    ap.add_argument("--networks", action="store_true", help="only the per-network timings (part 3)")
    ap.add_argument("--network-design", default="edge_int8_32x32")
    args = ap.parse_args()
    if args.networks:
        bench_networks(args.network_design, args.repeat, args.objective)
        return
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.processor() or platform.machine()}")
    ops = topology_operations(read_scalesim_topology(TOPOLOGY))
    sweep = {o: bench_sweep(ops, args.design, args.step, args.rows_per_chunk, o) for o in (args.anchor, args.objective)}
    scalar = {o: bench_scalar(ops, args.design, args.repeat, o) for o in (args.anchor, args.objective)}
    print(f"{args.objective} / {args.anchor} in this run: sweep CPU {sweep[args.objective][1] / sweep[args.anchor][1]:.2f}x, "
          f"cost_table CPU (all formats) {scalar[args.objective] / scalar[args.anchor]:.2f}x")


if __name__ == "__main__":
    main()
