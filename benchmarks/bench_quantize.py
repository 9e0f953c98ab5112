"""Fake-quantization throughput: fp32 -> format -> fp32 on 16 M elements, in one run.

Anchors measured in the same run (the machine is shared and noisy, so compare ratios; every
figure is also printed as a ratio to the copy, "x copy", > 1 = faster than the copy):
a numpy copy into an existing buffer (the memory-bandwidth limit) and ml_dtypes ``astype``
round trips. asicsim runs under ``jax.jit`` with the input buffer donated, so XLA writes the
result in place instead of allocating a fresh 64 MiB output per call.

    python benchmarks/bench_quantize.py [--n 16777216] [--repeat 10] [--compare-kernel]
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from _timing import best_of  # benchmarks/ is on sys.path when run as a script

import asicsim as sim
from asicsim.numerics.grid_rounding import round_to_grid
from asicsim.numerics.random import hash_bits, key_words
from asicsim.numerics.rounding import F32, parse_rounding

CASES = [
    ("bfloat16", {}),
    ("float16", {}),
    ("float8_e4m3fn", {}),
    ("float8_e5m2", {}),
    ("float4_e2m1fn", {}),
    ("mxfp8_e4m3", {}),
    ("int8", {"axis": 0}),  # per-channel (one scale per row)
]
ML_DTYPES = {
    "bfloat16": ml_dtypes.bfloat16,
    "float16": np.float16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float4_e2m1fn": ml_dtypes.float4_e2m1fn,
}


def bench_asicsim(x: np.ndarray, fmt: str, kwargs: dict, rounding: str, repeat: int) -> float:
    def step(v, k):
        return sim.quantize(v, fmt, rounding, key=k if rounding == "sr" else None, **kwargs)

    return best_of(_donated_runner(x, step), repeat)


def _donated_runner(x: np.ndarray, step):
    """A call of jitted ``step(v, key)`` on a donated 4096-row copy of ``x`` (after a compile)."""
    key = jax.random.key(0)
    f = jax.jit(step, donate_argnums=0)
    state = {"v": jax.device_put(x.reshape(4096, -1))}

    def run():
        state["v"] = f(state["v"], key)
        state["v"].block_until_ready()

    return run


def _kernel_sr(fmt: str):
    """SR by the general integer kernel (``round_to_grid``) with the same words: the path
    ``quantize`` took for float formats before ``fast_sr_float32``."""
    spec = sim.get_format(fmt)

    def step(v, k):
        bits = jax.lax.bitcast_convert_type(v, jnp.uint32)
        rand = hash_bits(key_words(k), v.shape)
        out = round_to_grid(jnp, F32, bits, spec, parse_rounding("sr"), spec.saturate, rand)
        return jax.lax.bitcast_convert_type(out, jnp.float32)

    return step


def compare_kernel(x: np.ndarray, repeat: int, copy_t: float) -> None:
    """SR: the general kernel against ``quantize``'s fast path, calls alternating in one process
    (robust to the machine's load drifting between separate runs)."""
    gps = lambda t: x.size / t / 1e9  # noqa: E731
    fmts = [f for f, kwargs in CASES if f in ML_DTYPES]
    runs = {}
    for fmt in fmts:
        runs[fmt, "kernel"] = _donated_runner(x, _kernel_sr(fmt))
        runs[fmt, "fast"] = _donated_runner(x, lambda v, k, fmt=fmt: sim.quantize(v, fmt, "sr", key=k))
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            t = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - t)
    print("\nSR, general kernel vs quantize's path, alternating calls (same words, same bits):\n")
    print("| format | kernel G/s | quantize G/s | quantize / kernel | x copy kernel -> quantize |")
    print("|---|---|---|---|---|")
    for fmt in fmts:
        k, q = best[fmt, "kernel"], best[fmt, "fast"]
        print(f"| {fmt} | {gps(k):.2f} | {gps(q):.2f} | {k / q:.2f} | {copy_t / k:.2f} -> {copy_t / q:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16 * 2**20)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--compare-kernel", action="store_true",
                        help="also time SR by the general integer kernel against quantize, alternating")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.n, dtype=np.float32)
    out = np.empty_like(x)
    copy_t = best_of(lambda: np.copyto(out, x), args.repeat)
    gps = lambda t: args.n / t / 1e9  # noqa: E731
    print(f"# quantize throughput, {args.n / 2**20:.0f} M float32 elements")
    print(f"machine: {platform.processor() or platform.machine()}, {jax.device_count()} JAX device(s), "
          f"jax {jax.__version__}, date {time.strftime('%Y-%m-%d')}")
    print(f"\nnumpy copy (memory limit): {gps(copy_t):.2f} G elem/s\n")
    print("Each figure also as a ratio to the copy above (x copy); last column: asicsim rne over ml_dtypes.\n")
    print("| format | rne G/s | rne x copy | sr G/s | sr x copy | ml_dtypes astype G/s | ml_dtypes x copy "
          "| rne / ml_dtypes |")
    print("|---|---|---|---|---|---|---|---|")
    for fmt, kwargs in CASES:
        rne = bench_asicsim(x, fmt, kwargs, "rne", args.repeat)
        sr = bench_asicsim(x, fmt, kwargs, "sr", args.repeat)
        ml = ml_ratio = over_ml = "-"
        if fmt in ML_DTYPES:
            dt = ML_DTYPES[fmt]
            ml_t = best_of(lambda dt=dt: x.astype(dt).astype(np.float32), max(2, args.repeat // 3))
            ml, ml_ratio, over_ml = f"{gps(ml_t):.3f}", f"{copy_t / ml_t:.3f}", f"{ml_t / rne:.1f}x"
        label = fmt + (" per-channel" if kwargs else "")
        print(f"| {label} | {gps(rne):.2f} | {copy_t / rne:.2f} | {gps(sr):.2f} | {copy_t / sr:.2f} | {ml} "
              f"| {ml_ratio} | {over_ml} |")
    if args.compare_kernel:
        compare_kernel(x, args.repeat, copy_t)


if __name__ == "__main__":
    main()
