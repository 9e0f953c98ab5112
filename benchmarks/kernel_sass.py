"""What the MAC kernel compiles to on an H100, without one: instructions per MAC of its main loop.

    python benchmarks/kernel_sass.py --triton-python /path/to/venv/bin/python [--n 2048]

The Pallas kernel of the sequential/chunked orders (:mod:`asicsim._src.numerics.mac_kernel`) is
lowered for CUDA here, verified (:mod:`asicsim._src.numerics.triton_ir`), and handed as Triton IR to
a *side environment* holding the ``triton`` wheel from PyPI (``python -m venv T && T/bin/pip
install triton``), which compiles it for sm_90 with the ptxas it bundles; its ``cuobjdump``
disassembles the result. No GPU is needed. For each MAC the table gives the main k loop's
instruction mix and its instructions per MAC per thread, and the floor that issue rate sets on
an H100 SXM (132 SMs x 4 schedulers x 32 lanes x 1.98 GHz, one instruction per lane per clock):
a lower bound on the kernel's time, not a measurement. The Triton in the wheel is not the one
inside XLA, so the code XLA builds may differ in detail; benchmarks/gpu_emulate.py measures.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import re
import subprocess
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp

from asicsim._src.numerics import MacSpec, mac_kernel
from asicsim._src.numerics.triton_ir import triton_kernels

MACS = {  # label -> (MacSpec, native FMA)
    "bf16 acc, native fma": ("a=bf16,b=bf16,acc=bf16,order=sequential", True),
    "bf16 acc chunk:32, native fma": ("a=bf16,b=bf16,acc=bf16,order=chunk:32", True),
    "fp16 acc, native fma": ("a=fp16,b=fp16,acc=fp16,order=sequential", True),
    "bf16 acc, portable": ("a=bf16,b=bf16,acc=bf16,order=sequential", False),
    "bf16 acc rtz, portable": ("a=bf16,b=bf16,acc=bf16,order=sequential,acc_rounding=rtz", False),
    "bf16 -> fp32": ("a=bf16,b=bf16,acc=fp32,order=sequential", False),
}
ISSUE_PER_S = 132 * 4 * 32 * 1.98e9  # H100 SXM: thread instructions per second at one per clock

# Runs in the side environment: Triton IR text in, the cubin's SASS (cuobjdump) out.
_COMPILE = r"""
import subprocess, sys, pathlib
from triton._C.libtriton import ir
from triton.backends.compiler import GPUTarget, Language
from triton.backends.nvidia.compiler import CUDABackend
src, num_warps = sys.argv[1], int(sys.argv[2])
ctx = ir.context(); ir.load_dialects(ctx)
backend = CUDABackend(GPUTarget("cuda", 90, 32)); backend.load_dialects(ctx)
module = ir.parse_mlir_module(src, ctx); module.context = ctx
stages = {}
backend.add_stages(stages, backend.parse_options({"num_warps": num_warps, "num_stages": 1}), Language.TRITON)
for stage in stages.values():
    module = stage(module, {})
cubin = pathlib.Path(src).with_suffix(".cubin"); cubin.write_bytes(module)
import triton.backends.nvidia as nv
tool = pathlib.Path(nv.__file__).parent / "bin" / "cuobjdump"
print(subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout)
"""


def main_loop(sass: str) -> collections.Counter:
    """The opcode counts of the innermost k loop: the shortest backward branch's body that holds
    multiply-adds (HFMA2 or FFMA; a chunked order's outer loop holds the inner one)."""
    ins = [(int(m[1], 16), m[2].strip()) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    loops = []
    for addr, text in ins:
        target = re.search(r"BRA\b.*?0x([0-9a-f]+)", text)
        if target and int(target[1], 16) < addr:
            body = [t for a, t in ins if int(target[1], 16) <= a <= addr]
            loops.append(collections.Counter(_opcode(t) for t in body))
    macs = [c for c in loops if any(k.startswith(("HFMA2", "FFMA")) for k in c)]
    return min(macs, key=lambda c: sum(c.values()))


def _opcode(text: str) -> str:
    words = text.split()
    return words[1] if words[0].startswith("@") else words[0]


def analyse(triton_python: str, n: int) -> list[dict]:
    a = jnp.ones((1, n, n), jnp.float32)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, (text, native) in MACS.items():
            mac = MacSpec.parse(text)
            (kernel,) = triton_kernels(functools.partial(mac_kernel.accumulate, mac=mac, native=native), a, a)
            src = Path(tmp) / "kernel.ttir"
            src.write_text(kernel)
            sass = subprocess.run([triton_python, "-c", _COMPILE, str(src), str(mac_kernel.NUM_WARPS)],
                                  capture_output=True, text=True, check=True).stdout
            ops = main_loop(sass)
            pack = 2 if native else 1
            words = mac_kernel.TILE_ROWS * mac_kernel.TILE_WORDS // (32 * mac_kernel.NUM_WARPS)
            macs = words * pack * mac_kernel.UNROLL  # per thread per loop pass
            per_mac = sum(ops.values()) / macs
            loads = sum(v for k, v in ops.items() if k.startswith("LDG")) / mac_kernel.UNROLL
            rows.append({"mac": label, "loop_instructions": sum(ops.values()), "macs_per_thread": macs,
                         "instructions_per_mac": round(per_mac, 2), "loads_per_k_step": loads,
                         "top": ", ".join(f"{k} {v}" for k, v in ops.most_common(4)),
                         f"issue_floor_ms_{n}^3": round(1e3 * n**3 * per_mac / ISSUE_PER_S, 3)})
    return rows


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--triton-python", required=True, help="python of a venv with `pip install triton`")
    p.add_argument("--n", type=int, default=2048, help="n for n^3 in the issue-rate floor")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)
    rows = analyse(args.triton_python, args.n)
    cols = list(rows[0])
    print(f"jax {jax.__version__}; sm_90 via the side environment's triton\n")
    print("| " + " | ".join(cols) + " |\n" + "|---" * len(cols) + "|")
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
