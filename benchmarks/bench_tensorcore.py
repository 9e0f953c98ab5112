"""Tensor-core matmul (GPU presets, bit-exact) vs the sequential-order float32 kernel, on CPU.

Both run ``sim.matmul`` on the same (n, n) x (n, n) operands: the preset
(``asicsim._src.numerics.tensor_core(gpu, fmt, out)``, the float64 block kernel of
``numerics/tensorcore.py``) and ``a=<fmt>,acc=fp32,order=sequential`` (the exact float32 path of
``numerics/fast32.py`` where it applies, as for fp16/bf16/fp8 operands). Issue 33 item 6 asks
for the tensor-core time within 20x of the sequential one. The machine is shared: compare ratios.

    python benchmarks/bench_tensorcore.py [--n 512] [--repeat 3]

``--kernel`` times the Pallas kernel of the tensor-core order (``numerics/tc_kernel.py``) on a GPU
against cuBLAS (``jnp.matmul`` on bf16 and on fp32 operands) at ``--n`` (default 2048; issue 33
item 6 asks for <= 10x cuBLAS), with the XLA path it replaces, each tile shape of
``tc_kernel.TILES``, and the bits against the CPU's XLA path; every row goes to ``--out`` (JSON
lines) the moment it exists, and no new case starts after ``--budget`` seconds. ``--quick`` (the
CPU check of the script) runs the kernel in Pallas' interpreter at n = 40 instead:

    python benchmarks/bench_tensorcore.py --kernel [--out tc_kernel.jsonl] [--budget 420] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from _timing import best_of  # benchmarks/ is on sys.path when run as a script

import asicsim as sim
from asicsim._src.numerics import fast32, tc_kernel, tensor_core
from asicsim._src.numerics.mac import MacSpec
from asicsim._src.numerics.matmul import _matmul3d

CASES = [  # (gpu, input format, output format)
    ("v100", "fp16", "fp32"),
    ("a100", "bf16", "fp32"),
    ("a100", "tf32", "fp32"),
    ("h100", "fp16", "fp32"),
    ("h100", "fp16", "fp16"),
    ("h100", "fp8_e4m3", "fp32"),
    ("b200", "fp8_e5m2", "fp32"),
]


def _bits_differ(got, want) -> int:
    """Elements whose bits differ (float32 or float64), a NaN equal to any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    word = np.uint64 if got.dtype == np.float64 else np.uint32
    same = (got.view(word) == want.view(word)) | (np.isnan(got) & np.isnan(want))
    return int((~same).sum())


def kernel_rows(n: int, repeat: int, quick: bool, out, budget: float) -> list[dict]:
    """The kernel's rows (see the module doc), each written to ``out`` as soon as it exists."""
    start, rows = time.perf_counter(), []
    device = jax.devices()[0]
    on_gpu = device.platform == "gpu"

    def emit(row):
        row = {"device": f"{device.platform} {getattr(device, 'device_kind', '')}", "n": n, **row}
        rows.append(row)
        print(json.dumps(row), flush=True)
        if out is not None:
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")

    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, n, n), dtype=np.float32) * 2.0 ** rng.integers(-8, 9, (1, n, n)).astype(np.float32)
    b = rng.standard_normal((1, n, n), dtype=np.float32)
    a16, b16 = jnp.asarray(a[0], jnp.bfloat16), jnp.asarray(b[0], jnp.bfloat16)
    t_bf16 = best_of(lambda: jnp.matmul(a16, b16, preferred_element_type=jnp.float32).block_until_ready(), repeat)
    a32, b32 = jnp.asarray(a[0]), jnp.asarray(b[0])  # on the device: no copies in the timings
    t_f32 = best_of(lambda: jnp.matmul(a32, b32).block_until_ready(), repeat)
    emit({"what": "cublas", "bf16_ms": t_bf16 * 1e3, "fp32_ms": t_f32 * 1e3})
    cpu = jax.devices("cpu")[0]
    for gpu, fmt, out_fmt in CASES:
        if time.perf_counter() - start > budget:
            emit({"what": "stopped", "reason": f"budget of {budget} s spent before {gpu}, {fmt}, {out_fmt}"})
            break
        mac = tensor_core(gpu, fmt, out_fmt)
        row = {"what": "preset", "preset": f"{gpu}, {fmt}, {out_fmt}", "kernel": tc_kernel.applies(mac)}
        qa = np.asarray(sim.quantize(a, mac.spec("a_fmt")))
        qb = np.asarray(sim.quantize(b, mac.spec("b_fmt")))
        if not on_gpu:  # the CPU check of the script: the interpreted kernel against the XLA path
            if row["kernel"]:
                got = np.asarray(tc_kernel.accumulate(qa, qb, mac, interpret=True))
                want = np.asarray(tc_kernel.reference(qa, qb, mac))
                row["interpret_f64_bits_differ"] = _bits_differ(got, want)
            emit(row)
            continue
        qa_cpu, qb_cpu = qa, qb
        qa, qb = jnp.asarray(qa), jnp.asarray(qb)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = np.asarray(_matmul3d(qa, qb, mac))  # the first call proves the kernel on the device
        row["warnings"] = [str(w.message) for w in caught]
        want = np.asarray(_matmul3d(jax.device_put(qa_cpu, cpu), jax.device_put(qb_cpu, cpu), mac))
        row["bits_differ_vs_cpu"] = _bits_differ(got, want)
        row["kernel_ms"] = best_of(lambda mac=mac, qa=qa, qb=qb: _matmul3d(qa, qb, mac).block_until_ready(), repeat) * 1e3
        row["vs_cublas_bf16"] = row["kernel_ms"] / (t_bf16 * 1e3)
        emit(dict(row))
        row["xla_ms"] = best_of(
            lambda mac=mac, qa=qa, qb=qb: _matmul3d(qa, qb, mac, kernel=False).block_until_ready(), 1) * 1e3
        emit(dict(row, what="preset+xla"))
        if row["kernel"]:
            for tile in tc_kernel.TILES:
                def run(mac=mac, tile=tile, qa=qa, qb=qb):
                    return tc_kernel.accumulate(qa, qb, mac, tile=tile).block_until_ready()

                try:
                    emit({"what": "tile", "preset": row["preset"], "tile": tile, "ms": best_of(run, repeat) * 1e3})
                except Exception as e:  # a tile Triton cannot compile (registers): say so, go on
                    emit({"what": "tile", "preset": row["preset"], "tile": tile, "error": repr(e)[:300]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None, help="512; with --kernel 2048 (--quick: 40)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kernel", action="store_true", help="the Pallas kernel against cuBLAS (a GPU)")
    parser.add_argument("--quick", action="store_true", help="with --kernel: the CPU check, interpreted")
    parser.add_argument("--out", default=None, help="with --kernel: JSON lines, one per row as it exists")
    parser.add_argument("--budget", type=float, default=420.0, help="with --kernel: seconds before no new case")
    args = parser.parse_args()
    if args.kernel:
        n = args.n or (40 if args.quick else 2048)
        if jax.devices()[0].platform != "gpu" and not args.quick:
            parser.error("--kernel times the kernel on a GPU; on a CPU run --kernel --quick")
        kernel_rows(n, 1 if args.quick else args.repeat, args.quick, args.out, args.budget)
        return
    n = args.n or 512
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32))
    b = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32))
    print(f"# matmul {n}x{n}x{n}: tensor-core presets vs sequential order, fp32 accumulator")
    print(f"machine: {platform.processor() or platform.machine()}, {jax.device_count()} JAX device(s), "
          f"jax {jax.__version__}, date {time.strftime('%Y-%m-%d')}\n")
    print("| preset (gpu, a = b, out) | tensor core ms | sequential MAC | path | sequential ms | ratio |")
    print("|---|---|---|---|---|---|")
    for gpu, fmt, out in CASES:
        tc = tensor_core(gpu, fmt, out)
        seq = MacSpec.parse(f"a={fmt},acc=fp32,order=sequential")
        qa, qb = sim.quantize(a, seq.spec("a_fmt")), sim.quantize(b, seq.spec("b_fmt"))
        path = "f32" if fast32.eligible(seq) and bool(fast32.safe(qa, qb, seq)) else "f64"
        t_tc = best_of(lambda tc=tc: sim.matmul(a, b, tc).block_until_ready(), args.repeat)
        t_seq = best_of(lambda seq=seq: sim.matmul(a, b, seq).block_until_ready(), args.repeat)
        print(f"| {gpu}, {fmt}, {out} | {t_tc * 1e3:.1f} | `{seq}` | {path} | {t_seq * 1e3:.1f} | "
              f"{t_tc / t_seq:.1f} |", flush=True)


if __name__ == "__main__":
    main()
