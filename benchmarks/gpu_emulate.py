"""Issue 20's GPU figures in one command: emulation on a GPU, against the GPU's own native paths.

    python benchmarks/gpu_emulate.py [--quick] [--skip-tests] [--json OUT.json]

Run on a machine with a CUDA GPU (jax[cuda]); ``--quick`` shrinks every size so the script can be
checked on a CPU (tests/test_gpu_emulate_script.py does). It prints four parts, each a markdown
table, for benchmarks/RESULTS.md with the device and date it prints:

1. **The numerics and emulation tests on the device**: ``pytest tests/numerics tests/emulate``
   run with the default backend (the GPU); the closing line (passed / failed).
2. **Step time** (item 14): one jitted ``lax.scan`` of training steps, timed interleaved against
   the anchor, the *native bf16* step (the same model and optax optimizer, parameters kept in fp32
   and cast to bf16 at every GEMM input, XLA's bf16 GEMMs with fp32 accumulation: what a user of
   plain JAX mixed precision runs). Models: an MLP 4096 wide (4 hidden layers, batch 256) and a
   4-layer transformer (d_model 1024, 16 heads, context 256, batch 16, asicsim's workloads
   ``transformer``). Recipes bf16, fp8_hybrid, mxfp8, mxfp4 through
   :func:`asicsim.emulate.make_train_step`. Aim: <= 1.3x the anchor. Also the compile time
   (``lower`` + ``compile``) of the transformer's step under mxfp8 (aim <= 15 s).
3. **Bit-exact MAC orders vs cuBLAS** (item 16): the Pallas kernel of the sequential and
   chunked orders (:mod:`asicsim.numerics.mac_kernel`) and the XLA loops it replaces, for
   bf16 and fp16 accumulators and bf16 -> fp32, at n^3 = 1024^3 and 2048^3, against
   ``jnp.matmul`` on bf16 inputs with fp32 accumulation (cuBLAS). Aim: <= 10x. With the bits
   that differ between the kernel and the loops, and from the CPU backend (aim 0).
4. **Same bits on CPU and GPU** (item 15): every scaling (tensor, channel, block, delayed and
   static amax, MX blocks holding inf and NaN, stochastic rounding) applied to the same arrays on
   the GPU and on the CPU backend of the same process; the count of elements whose bits differ
   (aim: 0 everywhere).
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ["bf16", "fp8_hybrid", "mxfp8", "mxfp4"]


def _device_line() -> str:
    d = jax.devices()[0]
    return (f"device: {d.platform} {getattr(d, 'device_kind', '')}; host {platform.processor() or platform.machine()}; "
            f"jax {jax.__version__}; date {time.strftime('%Y-%m-%d')}")


# --- 1. tests on the device ----------------------------------------------------------------------

def run_tests() -> dict:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/numerics", "tests/emulate"]
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    failed = [ln for ln in lines if ln.startswith("FAILED")]
    return {"command": " ".join(cmd[1:]), "exit": p.returncode, "summary": lines[-1] if lines else p.stderr[-500:],
            "failed": failed, "seconds": time.perf_counter() - t}


# --- 2. step time ----------------------------------------------------------------------------------

def _mlp(width: int, layers: int, classes: int = 10):
    def init(key):
        ks = jax.random.split(jax.random.key(key), layers + 1)
        p = {f"fc{i}": jax.random.normal(ks[i], (width, width), jnp.float32) / np.sqrt(width) for i in range(layers)}
        p["out"] = jax.random.normal(ks[-1], (width, classes), jnp.float32) / np.sqrt(width)
        return p

    def loss(p, batch):
        x, y = batch
        h = x
        for i in range(layers):
            h = jax.nn.relu(h @ p[f"fc{i}"])
        logp = jax.nn.log_softmax((h @ p["out"]).astype(jnp.float32))
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=-1))
    return init, loss


def _transformer(d_model: int, layers: int, heads: int, context: int, vocab: int = 256):
    from asicsim.workloads.models import transformer

    m = transformer(vocab, context=context, d_model=d_model, heads=heads, layers=layers)

    def loss(p, batch):
        logits = m.apply(p, batch[:, :-1])
        logp = jax.nn.log_softmax(logits.astype(jnp.float32))
        return -jnp.mean(jnp.take_along_axis(logp, batch[:, 1:, None], axis=-1))
    return m.init, loss


def _bf16_native(loss):
    """The anchor's loss: fp32 parameters cast to bf16 where used, XLA's bf16 GEMMs."""
    def cast(t):
        return jax.tree_util.tree_map(lambda v: v.astype(jnp.bfloat16) if v.dtype == jnp.float32 else v, t)
    return lambda p, batch: loss(cast(p), cast(batch))


def _scan(step, batches):
    def run(state):
        return lax.scan(step, state, batches)
    return jax.jit(run)


def _plain_step(loss, tx):
    def step(state, batch):
        params, opt = state
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt = tx.update(grads, opt, params)
        return (optax.apply_updates(params, updates), opt), value
    return step


def _timed(fn, args: tuple, repeat: int) -> float:
    """Best of ``repeat`` runs of ``fn(*args)`` after one warm-up (compile) call."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return best


def step_times(quick: bool, steps: int, repeat: int) -> list[dict]:
    from asicsim.emulate import make_train_step

    if quick:
        cases = {"mlp 64 wide": (_mlp(64, 2), "mlp", 8), "transformer d64": (_transformer(64, 2, 4, 16), "lm", 4)}
    else:
        cases = {"mlp 4096 wide": (_mlp(4096, 4), "mlp", 256),
                 "transformer d1024 x4": (_transformer(1024, 4, 16, 256), "lm", 16)}
    rows = []
    for name, ((init, loss), kind, batch) in cases.items():
        key = jax.random.key(0)
        if kind == "mlp":
            width = init(0)["fc0"].shape[0]
            batches = (jax.random.normal(key, (steps, batch, width), jnp.float32),
                       jax.random.randint(key, (steps, batch), 0, 10))
        else:
            context = init(0)["pos"].shape[0]
            batches = jax.random.randint(key, (steps, batch, context + 1), 0, 256)
        tx = optax.adam(1e-4)
        params = init(0)
        anchor = _scan(_plain_step(_bf16_native(loss), tx), batches)
        t_anchor = _timed(anchor, ((params, tx.init(params)),), repeat)
        row = {"model": name, "anchor_ms": 1e3 * t_anchor / steps}
        for recipe in RECIPES:
            init_state, step = make_train_step(loss, recipe, tx)
            state = init_state(params, 1)
            fn = _scan(step, batches)
            if recipe == "mxfp8" and kind == "lm":
                t = time.perf_counter()
                fn.lower(state).compile()
                row["compile_mxfp8_s"] = time.perf_counter() - t
            row[f"{recipe}_x"] = _timed(fn, (state,), repeat) / t_anchor
        rows.append(row)
    return rows


# --- 3. bit-exact MAC orders vs cuBLAS -----------------------------------------------------------

EXACT_MACS = {  # label -> MacSpec text: narrow accumulators (the native FMA) and bf16 -> fp32
    "bf16 acc sequential": "a=bf16,b=bf16,acc=bf16,order=sequential",
    "bf16 acc chunk:32": "a=bf16,b=bf16,acc=bf16,order=chunk:32",
    "fp16 acc sequential": "a=fp16,b=fp16,acc=fp16,order=sequential",
    "bf16 -> fp32 sequential": "a=bf16,b=bf16,acc=fp32,order=sequential",
    "bf16 acc rtz sequential": "a=bf16,b=bf16,acc=bf16,order=sequential,acc_rounding=rtz",
}
CPU_ROWS = 64  # rows of the product recomputed on the CPU backend (rows are independent)


def exact_orders(quick: bool, repeat: int) -> list[dict]:
    """Each bit-exact MAC at n^3 on the default device: the path the GPU proved for it (``native``
    packed FMA, ``portable`` float32 kernel, or ``xla`` loops) and the XLA loops, as multiples of
    cuBLAS bf16; the elements whose bits differ between the two, and from the CPU backend on
    CPU_ROWS rows."""
    from asicsim.numerics import MacSpec, kernel_probe
    from asicsim.numerics.matmul import _matmul3d

    cpu = jax.devices("cpu")[0]
    rows = []
    for n in ((64, 128) if quick else (1024, 2048)):
        a = jax.random.normal(jax.random.key(1), (1, n, n), jnp.float32).astype(jnp.bfloat16)
        b = jax.random.normal(jax.random.key(2), (1, n, n), jnp.float32).astype(jnp.bfloat16)
        blas = jax.jit(functools.partial(jnp.matmul, preferred_element_type=jnp.float32))
        t_blas = _timed(blas, (a, b), repeat)
        for label, text in EXACT_MACS.items():
            mac = MacSpec.parse(text)
            grid = jnp.float16 if mac.spec("a_fmt").name == "float16" else jnp.bfloat16
            fa, fb = (x.astype(grid).astype(jnp.float32) for x in (a, b))
            kern = jax.jit(functools.partial(_matmul3d, mac=mac))
            loop = jax.jit(functools.partial(_matmul3d, mac=mac, kernel=False))
            path = kernel_probe.proven_path(mac, jax.default_backend())
            k_out, l_out = kern(fa, fb), loop(fa, fb)
            c_out = _matmul3d(jax.device_put(fa[:, :CPU_ROWS], cpu), jax.device_put(fb, cpu), mac)
            bits = lambda x: np.asarray(x).view(np.uint32)  # noqa: E731
            t_kern = _timed(kern, (fa, fb), repeat)
            rows.append({
                "n": n, "mac": label, "cublas_bf16_ms": 1e3 * t_blas, "kernel_ms": 1e3 * t_kern,
                "kernel_x": t_kern / t_blas, "xla_loop_x": _timed(loop, (fa, fb), max(1, repeat // 2)) / t_blas,
                "path": path if jax.default_backend() == "gpu" else "xla (no GPU)",
                "bits_differ_loop": int(np.sum(bits(k_out) != bits(l_out))),
                "bits_differ_cpu": int(np.sum(bits(k_out)[:, :CPU_ROWS] != bits(c_out))),
            })
    return rows


# --- 4. the same bits on CPU and GPU --------------------------------------------------------------

def _bit_cases():
    from asicsim.emulate.policy import RoleSpec

    x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    x *= np.exp2(np.random.default_rng(1).integers(-20, 20, (256, 1))).astype(np.float32)
    special = x.copy()
    special[0, :3] = (np.inf, -np.inf, np.nan)  # MX blocks holding inf and NaN
    return [
        ("int8 per tensor", x, RoleSpec("int8", scaling="tensor"), {}),
        ("int8 per channel", x, RoleSpec("int8", scaling="channel"), {"axis": 0}),
        ("uint8 per tensor", np.abs(x), RoleSpec("uint8", scaling="tensor"), {}),
        ("fp8 e4m3 per channel", x, RoleSpec("fp8_e4m3", scaling="channel"), {"axis": 0}),
        ("fp8 e4m3 delayed amax", x, RoleSpec("fp8_e4m3", scaling="delayed"), {"amax": 3.7}),
        ("int8 static amax", x, RoleSpec("int8", scaling="static"), {"amax": 0.3}),
        ("int8 blocks of 32", x, RoleSpec("int8", scaling="block", block_size=32), {}),
        ("mxfp8 e4m3 with inf/NaN", special, RoleSpec("mxfp8_e4m3"), {}),
        ("mxfp4 with inf/NaN", special, RoleSpec("mxfp4_e2m1"), {}),
        ("bf16 stochastic", x, RoleSpec("bf16", rounding="sr"), {"key": 7}),
    ]


def _round(spec, x, arrays, axis=None):
    from asicsim.emulate.role_rounding import round_role

    return round_role(x, spec, axis=axis, **arrays)


def same_bits() -> list[dict]:
    devices = {d.platform for d in jax.devices()}
    cpu = jax.devices("cpu")[0]
    other = jax.devices()[0]
    rows = []
    for name, x, spec, kw in _bit_cases():
        out = []
        for dev in (other, cpu):
            args = dict(kw)
            axis = args.pop("axis", None)
            if "key" in args:
                args["key"] = jax.device_put(jax.random.key(args["key"]), dev)
            if "amax" in args:
                args["amax"] = jax.device_put(jnp.float32(args["amax"]), dev)
            # every array an argument, put on the device: nothing is closed over (a constant on
            # another device would be an error, or a transfer)
            fn = jax.jit(functools.partial(_round, spec), static_argnames="axis")
            y = fn(jax.device_put(jnp.asarray(x), dev), args, axis=axis)
            out.append(np.asarray(y).view(np.uint32))
        rows.append({"case": name, "elements": x.size, "bits_differ": int(np.sum(out[0] != out[1])),
                     "devices": f"{other.platform} vs cpu" if devices != {"cpu"} else "cpu vs cpu (no GPU)"})
    return rows


def _table(rows: list[dict]) -> str:
    if not rows:
        return "(none)"
    cols = list(dict.fromkeys(k for r in rows for k in r))

    def fmt(v) -> str:
        return f"{v:.3g}" if isinstance(v, float) else str(v)
    return "\n".join(["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|",
                      *("| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows)])


def main(argv=None) -> dict:
    # user code runs under JAX's standard promotion (optax mixes Python floats with int32 counts)
    with jax.numpy_dtype_promotion("standard"):
        return _main(argv)


def _main(argv) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes (a check of the script on a CPU)")
    p.add_argument("--skip-tests", action="store_true", help="do not run tests/numerics and tests/emulate")
    p.add_argument("--steps", type=int, default=20, help="training steps per timed scan")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", help="also write every figure to this JSON file")
    args = p.parse_args(argv)
    out = {"device": _device_line()}
    print(f"# issue 20 on a GPU\n{out['device']}")
    if not args.skip_tests:
        out["tests"] = run_tests()
        print(f"\n## 1. tests/numerics + tests/emulate on the device\n{out['tests']['summary']} "
              f"({out['tests']['seconds']:.0f} s)")
        for ln in out["tests"]["failed"]:
            print(ln)
    steps = 2 if args.quick else args.steps
    repeat = 1 if args.quick else args.repeat
    out["step_time"] = step_times(args.quick, steps, repeat)
    print("\n## 2. training step / native bf16 step (aim <= 1.3x); mxfp8 compile time (aim <= 15 s)\n"
          + _table(out["step_time"]))
    out["exact_orders"] = exact_orders(args.quick, repeat)
    print("\n## 3. bit-exact MAC orders / cuBLAS bf16 (aim <= 10x)\n" + _table(out["exact_orders"]))
    out["same_bits"] = same_bits()
    print("\n## 4. elements whose bits differ between the device and the CPU (aim 0)\n" + _table(out["same_bits"]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
