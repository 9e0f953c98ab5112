"""Fake-quantization throughput: fp32 -> format -> fp32 on 16 M elements, in one run.

Anchors measured in the same run (the machine is shared and noisy, so compare ratios; every
figure is also printed as a ratio to the copy, "x copy", > 1 = faster than the copy):
a numpy copy into an existing buffer (the memory-bandwidth limit) and ml_dtypes ``astype``
round trips. asicsim runs under ``jax.jit`` with the input buffer donated, so XLA writes the
result in place instead of allocating a fresh 64 MiB output per call.

Timing: ``--repeat`` rounds, each timing the copy and then every case once, so each case's
ratio to the copy is taken within one round (the load of a shared machine drifts between
rounds); the tables give the median over rounds of those ratios, and the median G elem/s.
Aims (issue 37 item 5): element formats >= 1 x copy for rne and sr, MX >= 0.8, 30x ml_dtypes.

    python benchmarks/bench_quantize.py [--n 16777216] [--repeat 10] [--compare-kernel] [--passes]
        [--sr-words] [--vector-width 512]

``--passes`` prints, instead of timing, each case's optimised HLO (compiled for the default
backend): its kernels (top-level instructions that are not free, ``hlo_passes.count_passes``)
and the bytes they read and write as copies of the tensor (1 = one fp32 read + one fp32 write).
``--sr-words`` times, instead, SR with its words (``hash_bits``) against the same rule fed a
one-op word: the share of SR's time a cheaper generator could save. ``--vector-width`` compiles
every asicsim case with ``compiler_options={"xla_cpu_prefer_vector_width": W}`` (XLA:CPU's default
is 256; 512 suits AVX-512 CPUs), as a user's ``jax.jit`` can.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import asicsim as sim
from asicsim._src.numerics.grid_rounding import round_to_grid
from asicsim._src.numerics.random import hash_bits, key_words
from asicsim._src.numerics.rounding import F32, parse_rounding

CASES = [
    ("bfloat16", {}),
    ("float16", {}),
    ("float8_e4m3fn", {}),
    ("float8_e5m2", {}),
    ("float4_e2m1fn", {}),
    ("mxfp8_e4m3", {}),
    ("mxfp4_e2m1", {}),
    ("int8", {"axis": 0}),  # per-channel (one scale per row)
]
ML_DTYPES = {
    "bfloat16": ml_dtypes.bfloat16,
    "float16": np.float16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float4_e2m1fn": ml_dtypes.float4_e2m1fn,
}


def asicsim_runner(x: np.ndarray, fmt: str, kwargs: dict, rounding: str):
    def step(v, k):
        return sim.quantize(v, fmt, rounding, key=k if rounding == "sr" else None, **kwargs)

    run = _donated_runner(x, step)
    run()  # compile
    return run


def interleaved(runs: dict, repeat: int) -> dict:
    """Median seconds and median ratio to ``runs["copy"]`` of each runner over ``repeat`` rounds,
    each round timing the copy first, then every runner once."""
    times = {name: [] for name in runs}
    ratios = {name: [] for name in runs}
    for _ in range(repeat):
        t_copy = None
        for name, run in runs.items():
            t = time.perf_counter()
            run()
            dt = time.perf_counter() - t
            t_copy = dt if name == "copy" else t_copy
            times[name].append(dt)
            ratios[name].append(t_copy / dt)
    return {name: (float(np.median(times[name])), float(np.median(ratios[name]))) for name in runs}


#: XLA compiler options of every jitted case (``--vector-width``)
COMPILER_OPTIONS: dict = {}


def _donated_runner(x: np.ndarray, step):
    """A call of jitted ``step(v, key)`` on a donated 4096-row copy of ``x`` (after a compile)."""
    key = jax.random.key(0)
    f = jax.jit(step, donate_argnums=0, **({"compiler_options": COMPILER_OPTIONS} if COMPILER_OPTIONS else {}))
    state = {"v": jax.device_put(x.reshape(4096, -1))}

    def run():
        state["v"] = f(state["v"], key)
        state["v"].block_until_ready()

    run.state = state  # (the last result: state["v"])
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


def sr_words(x: np.ndarray, repeat: int) -> None:
    """How much of SR's time the random words take: quantize's SR against the same rule
    (``fast_sr_float32``) fed a one-op word (``i * 0x9E3779B9 + seed``, no mixing: the most any
    cheaper generator could gain), and the words alone (``x ^ words``), in one interleaved run."""
    from asicsim._src.numerics.fast_rounding32 import fast_sr_float32

    def one_op(k, shape):
        i = jax.lax.iota(jnp.uint32, int(np.prod(shape))).reshape(shape)
        return i * np.uint32(0x9E3779B9) + key_words(k)[0]

    def xor(words):
        def step(v, k):
            bits = jax.lax.bitcast_convert_type(v, jnp.uint32) ^ words(k, v.shape)
            return jax.lax.bitcast_convert_type(bits, jnp.float32)
        return step

    def rule(fmt):
        spec = sim.get_format(fmt)
        return lambda v, k: fast_sr_float32(v, spec, parse_rounding("sr"), spec.saturate, one_op(k, v.shape))

    out = np.empty_like(x)
    runs = {"copy": lambda: np.copyto(out, x),
            "words alone: hash_bits": _donated_runner(x, xor(lambda k, shape: hash_bits(key_words(k), shape))),
            "words alone: one-op word": _donated_runner(x, xor(one_op))}
    for fmt in ("bfloat16", "float8_e4m3fn", "float4_e2m1fn"):
        runs[f"{fmt} sr: quantize (hash_bits)"] = _donated_runner(
            x, lambda v, k, fmt=fmt: sim.quantize(v, fmt, "sr", key=k))
        runs[f"{fmt} sr: one-op word"] = _donated_runner(x, rule(fmt))
        runs[f"{fmt} rne"] = _donated_runner(x, lambda v, k, fmt=fmt: sim.quantize(v, fmt))
    best = dict.fromkeys(runs, float("inf"))  # the fastest of each: the least disturbed by the load
    for _ in range(repeat):
        for name, run in runs.items():
            t = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - t)
    print(f"\nSR's words, {x.size / 2**20:g} M elements, fastest of {repeat} interleaved rounds:\n")
    print("| case | ns / element | x copy |\n|---|---|---|")
    for name, t in best.items():
        print(f"| {name} | {t * 1e9 / x.size:.3f} | {best['copy'] / t:.2f} |")


def pass_rows(n: int, cases=CASES) -> list[dict]:
    """Kernels and traffic (in copies of the tensor) of each case's optimised HLO."""
    from hlo_passes import count_passes

    rows, key = [], jax.random.key(0)
    for fmt, kwargs in cases:
        for rounding in ("rne", "sr"):
            def step(v, k, fmt=fmt, kwargs=kwargs, rounding=rounding):
                return sim.quantize(v, fmt, rounding, key=k if rounding == "sr" else None, **kwargs)
            arg = jax.ShapeDtypeStruct((4096, n // 4096), jnp.float32)
            got = count_passes(jax.jit(step, donate_argnums=0).lower(arg, key).compile().as_text())
            rows.append({"format": fmt + (" per-channel" if kwargs else ""), "rounding": rounding,
                         "kernels": got["other_instructions"], "copies": got["traffic_mb"] * 1e6 / (8 * n)})
    return rows


def passes(n: int) -> None:
    print(f"# quantize's optimised HLO, {n / 2**20:.0f} M float32 elements (4096 rows)\n")
    print("| format | rounding | kernels | traffic (copies) |\n|---|---|---|---|")
    for r in pass_rows(n):
        print(f"| {r['format']} | {r['rounding']} | {r['kernels']} | {r['copies']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16 * 2**20)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--compare-kernel", action="store_true",
                        help="also time SR by the general integer kernel against quantize, alternating")
    parser.add_argument("--passes", action="store_true", help="count kernels and traffic in the HLO instead")
    parser.add_argument("--sr-words", action="store_true",
                        help="instead, time SR with its words against a one-op word (the generator's share)")
    parser.add_argument("--vector-width", type=int, choices=(128, 256, 512),
                        help="XLA:CPU's preferred vector width for the asicsim cases (default: XLA's own)")
    args = parser.parse_args()
    if args.vector_width:
        COMPILER_OPTIONS["xla_cpu_prefer_vector_width"] = args.vector_width
    if args.passes:
        passes(args.n)
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.n, dtype=np.float32)
    if args.sr_words:
        sr_words(x, args.repeat)
        return
    out = np.empty_like(x)
    runs = {"copy": lambda: np.copyto(out, x)}
    for fmt, kwargs in CASES:
        for rounding in ("rne", "sr"):
            runs[fmt, rounding] = asicsim_runner(x, fmt, kwargs, rounding)
        if fmt in ML_DTYPES:
            runs[fmt, "ml_dtypes"] = lambda dt=ML_DTYPES[fmt]: x.astype(dt).astype(np.float32)
    res = interleaved(runs, args.repeat)
    copy_t = res["copy"][0]
    gps = lambda t: args.n / t / 1e9  # noqa: E731
    print(f"# quantize throughput, {args.n / 2**20:.0f} M float32 elements, median of {args.repeat} rounds")
    print(f"machine: {platform.processor() or platform.machine()}, {jax.device_count()} JAX device(s), "
          f"jax {jax.__version__}, date {time.strftime('%Y-%m-%d %H:%M')}, "
          f"compiler options {COMPILER_OPTIONS or 'XLA defaults'}")
    print(f"\nnumpy copy (memory limit): {gps(copy_t):.2f} G elem/s\n")
    print("x copy: the median over rounds of (copy time / case time) in the same round; last column: "
          "asicsim rne over ml_dtypes (aims: element formats >= 1 x copy, MX >= 0.8, >= 30x ml_dtypes).\n")
    print("| format | rne G/s | rne x copy | sr G/s | sr x copy | ml_dtypes astype G/s | ml_dtypes x copy "
          "| rne / ml_dtypes |")
    print("|---|---|---|---|---|---|---|---|")
    for fmt, kwargs in CASES:
        (rne, rne_x), (sr, sr_x) = res[fmt, "rne"], res[fmt, "sr"]
        ml = ml_ratio = over_ml = "-"
        if fmt in ML_DTYPES:
            ml_t, ml_x = res[fmt, "ml_dtypes"]
            ml, ml_ratio, over_ml = f"{gps(ml_t):.3f}", f"{ml_x:.3f}", f"{ml_t / rne:.1f}x"
        label = fmt + (" per-channel" if kwargs else "")
        print(f"| {label} | {gps(rne):.2f} | {rne_x:.2f} | {gps(sr):.2f} | {sr_x:.2f} | {ml} "
              f"| {ml_ratio} | {over_ml} |")
    if args.compare_kernel:
        compare_kernel(x, args.repeat, copy_t)

if __name__ == "__main__":
    main()
