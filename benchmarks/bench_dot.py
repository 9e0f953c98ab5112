"""Bit-exact ``dot`` vs float32 BLAS (``jax.jit(jnp.dot)``) at 512 x 512 x 512, in one run.

The anchor is XLA's float32 GEMM on the same float32 arrays; each MAC row reports its time and
the ratio BLAS time / MAC time (1.0 = as fast as BLAS). A bit-exact MAC rounds after every one
of the M*N*K additions, so it cannot use a GEMM kernel: it is an elementwise loop over K.
``path`` says which exact kernel ran (``f32``: float32 arithmetic, taken when provably exact;
``f64``: the general float64 kernel; ``int32``/``int64``: integer MACs; see
``asicsim/_src/numerics/fast32.py``). The machine is shared: compare ratios, not absolute times.

    python benchmarks/bench_dot.py [--n 512] [--repeat 5]
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
from asicsim._src.numerics import fast32
from asicsim._src.numerics.mac import MacSpec
from asicsim._src.numerics.matmul import _Int32

CASES = [
    "a=bf16,b=bf16,acc=bf16,order=sequential",  # the headline case
    "a=bf16,b=bf16,acc=fp32,order=sequential",
    "a=bf16,b=bf16,acc=bf16,order=chunk:32",
    "a=bf16,b=bf16,acc=fp32,order=chunk:32",
    "a=bf16,b=bf16,acc=bf16,order=tree",
    "a=fp8_e4m3,b=fp8_e4m3,acc=fp16,order=sequential",
    "a=fp32,b=fp32,acc=fp32,order=sequential",  # products need float64: general kernel
    "v100",
    "a=int8,b=int8,acc=int32,order=sequential,overflow=saturate",
    "a=bf16,b=bf16,acc=fp32,order=fast,out=bf16",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32))
    b = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32))
    ints = [jnp.asarray(rng.integers(-128, 128, (n, n)).astype(np.float32)) for _ in range(2)]
    blas = jax.jit(jnp.dot)
    blas_t = best_of(lambda: blas(a, b).block_until_ready(), args.repeat)
    print(f"# dot {n}x{n}x{n}: bit-exact MAC model vs float32 BLAS")
    print(f"machine: {platform.processor() or platform.machine()}, {jax.device_count()} JAX device(s), "
          f"jax {jax.__version__}, date {time.strftime('%Y-%m-%d')}")
    print(f"\nfloat32 BLAS jax.jit(jnp.dot): {blas_t * 1e3:.2f} ms ({2 * n**3 / blas_t / 1e9:.1f} GFLOP/s)\n")
    print("| MAC | path | ms | G MAC/s | BLAS time / MAC time |")
    print("|---|---|---|---|---|")
    for text in CASES:
        mac = MacSpec.parse(text)
        x, y = (ints if mac.integer else (a, b))
        if mac.order_kind == "fast":
            path = "BLAS+round (not exact)"
        elif mac.integer:
            path = "int32" if _Int32.fits(mac) else "int64"
        else:
            q = lambda v, f, mac=mac: sim.quantize(v, mac.spec(f))  # noqa: E731
            path = "f32" if fast32.eligible(mac) and bool(fast32.safe(q(x, "a_fmt"), q(y, "b_fmt"), mac)) else "f64"
        reps = args.repeat if path != "f64" else max(1, args.repeat // 2)
        t = best_of(lambda mac=mac, x=x, y=y: sim.dot(x, y, mac).block_until_ready(), reps)
        print(f"| `{text}` | {path} | {t * 1e3:.1f} | {n**3 / t / 1e9:.2f} | {blas_t / t:.3f} |", flush=True)


if __name__ == "__main__":
    main()
