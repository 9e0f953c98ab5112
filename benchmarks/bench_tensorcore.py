"""Tensor-core matmul (GPU presets, bit-exact) vs the sequential-order float32 kernel, on CPU.

Both run ``sim.matmul`` on the same (n, n) x (n, n) operands: the preset
(``asicsim.numerics.tensor_core(gpu, fmt, out)``, the float64 block kernel of
``numerics/tensorcore.py``) and ``a=<fmt>,acc=fp32,order=sequential`` (the exact float32 path of
``numerics/fast32.py`` where it applies, as for fp16/bf16/fp8 operands). Issue 33 item 6 asks
for the tensor-core time within 20x of the sequential one. The machine is shared: compare ratios.

    python benchmarks/bench_tensorcore.py [--n 512] [--repeat 3]
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import best_of  # benchmarks/ is on sys.path when run as a script

import asicsim as sim
from asicsim.numerics import fast32, tensor_core
from asicsim.numerics.mac import MacSpec

CASES = [  # (gpu, input format, output format)
    ("v100", "fp16", "fp32"),
    ("a100", "bf16", "fp32"),
    ("a100", "tf32", "fp32"),
    ("h100", "fp16", "fp32"),
    ("h100", "fp16", "fp16"),
    ("h100", "fp8_e4m3", "fp32"),
    ("b200", "fp8_e5m2", "fp32"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.n
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
