"""The tensor-core kernel's outputs on random inputs, to compare two versions bit for bit.

Every preset of ``asicsim._src.numerics.tensor_core`` (and the mixed fp8 pairs) and 13 generic
``tensorcore:k`` specs covering every block option (sticky bits, late c, flushing, product
limit, saturation, the product exponent, fp16/bf16 accumulators), each on 6 random cases:
operands spread over up to 29 binades with zeros and -0, some with inf/NaN, with and without
``c``, a K that leaves a short last block, and an output wide enough to run in column tiles.

    git worktree add --detach /tmp/old <commit>
    (cd /tmp/old && PYTHONPATH=$PWD python $OLDPWD/benchmarks/tensorcore_bits.py --save /tmp/tc_old.npz)
    PYTHONPATH=$PWD python benchmarks/tensorcore_bits.py --check /tmp/tc_old.npz
"""
from __future__ import annotations

import sys

import jax
import numpy as np

import asicsim as sim
from asicsim._src.numerics import tensor_core
from asicsim._src.numerics.mac import MacSpec
from asicsim._src.numerics.tc_presets import MIXED_FP8, PRESETS

jax.config.update("jax_enable_x64", True)
GEN = [  # generic specs covering every option of the block
    "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rtz",
    "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rne,guard_bits=1,tc_sticky=true",
    "a=bf16,acc=fp32,order=tensorcore:8,acc_rounding=rne,guard_bits=3,tc_sticky=true,tc_exponent=operands",
    "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rup,tc_flush=both,tc_exponent=operands",
    "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rdn,tc_flush=in,tc_product_limit=true",
    "a=fp32,acc=fp32,order=tensorcore:4,acc_rounding=rtz,tc_exponent=operands,tc_flush=out",
    "a=fp16,acc=fp16,order=tensorcore:4,acc_rounding=rne,guard_bits=3,tc_exponent=operands,tc_product_limit=true",
    "a=fp16,acc=fp16,order=tensorcore:4,acc_rounding=rtz,tc_exponent=operands",
    "a=fp8_e4m3,acc=fp32,order=tensorcore:16,acc_rounding=rne,tc_late_c=rtz,tc_exponent=operands",
    "a=fp8_e5m2,acc=fp32,order=tensorcore:8,acc_rounding=rne,tc_late_c=rne,tc_sticky=true",
    "a=fp16,acc=bf16,order=tensorcore:4,acc_rounding=rne,guard_bits=2,tc_exponent=operands",
    "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rtz,saturate=true,tc_exponent=operands",
    "a=fp16,acc=fp32,order=tensorcore:4,acc_rounding=rna,tc_exponent=operands",
]


def specs():
    out = [(f"{g}/{a}/{o}", tensor_core(g, a, o)) for g, a, o in PRESETS]
    out += [(f"{g}/mixed", MacSpec.parse(PRESETS[g, MIXED_FP8[0], "float32"][0] + f",b={MIXED_FP8[1]}"))
            for g in ("h100", "ada")]
    return out + [(s, MacSpec.parse(s)) for s in GEN]


def inputs(seed, m, k, n, special):
    rng = np.random.default_rng(seed)
    def arr(shape, spread):
        x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
        x[rng.random(shape) < 0.08] = 0.0
        x[rng.random(shape) < 0.03] *= -0.0
        if special:
            x[rng.random(shape) < 0.002] = np.inf
            x[rng.random(shape) < 0.002] = -np.inf
            x[rng.random(shape) < 0.001] = np.nan
        return x
    a, b = arr((m, k), 14 if seed % 2 else 4), arr((k, n), 14 if seed % 2 else 4)
    c = arr((m, n), 30 if seed % 2 else 6).astype(np.float32)
    return a.astype(np.float32), b.astype(np.float32), c


CASES = [(0, 16, 37, 24, False, False), (1, 16, 37, 24, False, True), (2, 8, 70, 9000, False, True),
         (3, 20, 64, 30, True, True), (4, 12, 33, 16, True, False), (5, 32, 128, 40, False, True)]


def run():
    res = {}
    for name, mac in specs():
        for seed, m, k, n, special, withc in CASES:
            a, b, c = inputs(seed, m, k, n, special)
            d = sim.matmul(a, b, mac, c=c if withc else None)
            res[f"{name}|{seed}"] = np.asarray(d)
    return res


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    res = run()
    if mode == "--save":
        np.savez(path, **res)
        print(len(res), "saved")
    else:
        old = np.load(path)
        bad, total = 0, 0
        for key, d in res.items():
            o = old[key]
            dv, ov = d.view(np.uint32 if d.dtype == np.float32 else np.uint64), o.view(np.uint32 if o.dtype == np.float32 else np.uint64)
            diff = int((dv != ov).sum())
            total += d.size
            if diff:
                bad += diff
                print("DIFF", key, diff, "of", d.size)
        print(f"{len(res)} outputs, {total} elements, {bad} differ bitwise")
