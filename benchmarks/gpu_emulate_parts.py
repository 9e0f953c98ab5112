"""The parts of ``benchmarks/gpu_emulate.py``: each measures one thing and hands every row to
``on_row`` as soon as it exists, so a part stopped at its deadline keeps what it measured.

Models: an MLP (``mlp``) and asicsim's ``transformer`` workload; the anchor is the *native bf16*
step (the same model and optax optimizer, parameters kept in fp32 and cast to bf16 at every GEMM
input, XLA's bf16 GEMMs with fp32 accumulation: what a user of plain JAX mixed precision runs).
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _timing import best_of  # benchmarks/ is on sys.path when run as a script
from jax import lax

#: Every shipped training recipe, and why the others are not timed (a test holds the two lists
#: to the catalog, so a new recipe is not left out in silence).
TRAINING_RECIPES = ["bf16", "fp16_mixed", "fp8_hybrid", "fp8_wang2018", "fp8_deepseek_v3", "mxfp8", "mxfp6",
                    "mxfp4", "mxfp8_bf16_vector", "nvfp4"]
NOT_TIMED = {
    "fp32": "the reference numerics, not a reduced-precision recipe",
    "bf16_nomaster": "an ablation of bf16 (no fp32 master copy): same GEMM numerics",
    "fp16_nomaster": "an ablation of fp16_mixed: same GEMM numerics",
    "fp16_noscale": "an ablation of fp16_mixed (no loss scaling): same GEMM numerics",
    "fixed16_rn": "Gupta et al.'s fixed-point reproduction, not a GPU training recipe",
    "fixed16_sr": "Gupta et al.'s fixed-point reproduction, not a GPU training recipe",
    "mxfp8_ocp": "mxfp8 with the OCP spec's E5M2 gradients: same kernels as mxfp8",
    "tensorcore_fp16": "a MAC-order recipe (tensor-core accumulation), timed by exact_orders",
    "int8_ptq_channel": "post-training quantization, not trained",
    "int8_ptq_entropy": "post-training quantization, not trained",
    "int8_ptq_tensor": "post-training quantization, not trained",
    "int4_w_g128": "weight-only post-training quantization, not trained",
    "w4a8_g128": "post-training quantization, not trained",
    "int8_lsq": "learned step sizes: the steps (TrainState.lsq) are state this script does not keep yet",
    "int4_lsq": "learned step sizes: the steps (TrainState.lsq) are state this script does not keep yet",
}
#: ``--quick`` times three of them (one per kind of scaling), so the check of the script stays short.
QUICK_RECIPES = ["bf16", "fp8_hybrid", "mxfp4"]


def mlp(width: int, layers: int, classes: int = 10):
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


def transformer(d_model: int, layers: int, heads: int, context: int, vocab: int = 256):
    from asicsim._src.workloads.models import transformer as make

    m = make(vocab, context=context, d_model=d_model, heads=heads, layers=layers)

    def loss(p, batch):
        logits = m.apply(p, batch[:, :-1])
        logp = jax.nn.log_softmax(logits.astype(jnp.float32))
        return -jnp.mean(jnp.take_along_axis(logp, batch[:, 1:, None], axis=-1))
    return m.init, loss


def bf16_native(loss):
    """The anchor's loss: fp32 parameters cast to bf16 where used, XLA's bf16 GEMMs."""
    def cast(t):
        return jax.tree_util.tree_map(lambda v: v.astype(jnp.bfloat16) if v.dtype == jnp.float32 else v, t)
    return lambda p, batch: loss(cast(p), cast(batch))


def plain_step(loss, tx):
    def step(state, batch):
        params, opt = state
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt = tx.update(grads, opt, params)
        return (optax.apply_updates(params, updates), opt), value
    return step


def timed(fn, args: tuple, repeat: int) -> float:
    """Best of ``repeat`` runs of ``fn(*args)`` after one warm-up (compile) call."""
    return best_of(lambda: jax.block_until_ready(fn(*args)), repeat)


def _compiled(fn, *args):
    t = time.perf_counter()
    out = jax.jit(fn).lower(*args).compile()
    return out, time.perf_counter() - t


def _interleaved(f, g, arg_f, arg_g, repeat: int) -> tuple[float, float]:
    """Best times of ``f(arg_f)`` and ``g(arg_g)`` run alternately (the machine drifts alike for both)."""
    jax.block_until_ready(f(arg_f))
    jax.block_until_ready(g(arg_g))
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for i, (fn, a) in enumerate(((f, arg_f), (g, arg_g))):
            t = time.perf_counter()
            jax.block_until_ready(fn(a))
            best[i] = min(best[i], time.perf_counter() - t)
    return best[0], best[1]


def step_times(quick: bool, steps: int, repeat: int, recipes=None, on_row=None) -> list[dict]:
    """One row per (model, recipe): a jitted ``lax.scan`` of ``steps`` training steps against the
    native bf16 scan, timed interleaved, and both compile times (aims: <= 1.3x and <= 2x)."""
    from asicsim._src.emulate import make_train_step

    if quick:
        cases = {"mlp 64 wide": (mlp(64, 2), "mlp", 8), "transformer d64": (transformer(64, 2, 4, 16), "lm", 4)}
    else:
        cases = {"mlp 4096 wide": (mlp(4096, 4), "mlp", 256),
                 "transformer d1024 x4": (transformer(1024, 4, 16, 256), "lm", 16)}
    recipes = recipes or (QUICK_RECIPES if quick else TRAINING_RECIPES)
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

        def scanned(step, batches=batches):
            return lambda carry: lax.scan(step, carry, batches)
        anchor_state = (params, tx.init(params))
        anchor, anchor_compile = _compiled(scanned(plain_step(bf16_native(loss), tx)), anchor_state)
        for recipe in recipes:
            init_state, step = make_train_step(loss, recipe, tx)
            state = init_state(params, 1)
            fn, compile_s = _compiled(scanned(step), state)
            t_anchor, t_recipe = _interleaved(anchor, fn, anchor_state, state, repeat)
            row = {"model": name, "recipe": recipe, "anchor_ms": 1e3 * t_anchor / steps,
                   "step_x": t_recipe / t_anchor, "compile_s": compile_s, "compile_x": compile_s / anchor_compile}
            rows.append(row)
            if on_row:
                on_row(row)
    return rows


EXACT_MACS = {  # label -> MacSpec text: narrow accumulators (the native FMA) and bf16 -> fp32
    "bf16 acc sequential": "a=bf16,b=bf16,acc=bf16,order=sequential",
    "bf16 acc chunk:32": "a=bf16,b=bf16,acc=bf16,order=chunk:32",
    "fp16 acc sequential": "a=fp16,b=fp16,acc=fp16,order=sequential",
    "bf16 -> fp32 sequential": "a=bf16,b=bf16,acc=fp32,order=sequential",
    "bf16 acc rtz sequential": "a=bf16,b=bf16,acc=bf16,order=sequential,acc_rounding=rtz",
}
CPU_ROWS = 64  # rows of the product recomputed on the CPU backend (rows are independent)


def exact_orders(quick: bool, repeat: int, on_row=None) -> list[dict]:
    """Each bit-exact MAC at n^3 on the default device: the path the GPU proved for it (``native``
    packed FMA, ``portable`` float32 kernel, or ``xla`` loops) and the XLA loops, as multiples of
    cuBLAS bf16; the elements whose bits differ between the two, and from the CPU backend on
    CPU_ROWS rows (aims: <= 10x, 0 bits)."""
    from asicsim._src.numerics import MacSpec, kernel_probe
    from asicsim._src.numerics.matmul import _matmul3d

    cpu = jax.devices("cpu")[0]
    rows = []
    for n in ((64, 128) if quick else (1024, 2048)):
        a = jax.random.normal(jax.random.key(1), (1, n, n), jnp.float32).astype(jnp.bfloat16)
        b = jax.random.normal(jax.random.key(2), (1, n, n), jnp.float32).astype(jnp.bfloat16)
        blas = jax.jit(functools.partial(jnp.matmul, preferred_element_type=jnp.float32))
        t_blas = timed(blas, (a, b), repeat)
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
            t_kern = timed(kern, (fa, fb), repeat)
            row = {"n": n, "mac": label, "cublas_bf16_ms": 1e3 * t_blas, "kernel_ms": 1e3 * t_kern,
                   "kernel_x": t_kern / t_blas, "xla_loop_x": timed(loop, (fa, fb), max(1, repeat // 2)) / t_blas,
                   "path": path if jax.default_backend() == "gpu" else "xla (no GPU)",
                   "bits_differ_loop": int(np.sum(bits(k_out) != bits(l_out))),
                   "bits_differ_cpu": int(np.sum(bits(k_out)[:, :CPU_ROWS] != bits(c_out)))}
            rows.append(row)
            if on_row:
                on_row(row)
    return rows


def _bit_cases():
    from asicsim._src.emulate.policy import RoleSpec

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
    from asicsim._src.emulate.role_rounding import round_role

    return round_role(x, spec, axis=axis, **arrays)


def same_bits(on_row=None) -> list[dict]:
    """Every scaling applied to the same arrays on the default device and on the CPU backend of
    the same process: the elements whose bits differ (aim 0)."""
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
        row = {"case": name, "elements": x.size, "bits_differ": int(np.sum(out[0] != out[1])),
               "devices": f"{other.platform} vs cpu" if devices != {"cpu"} else "cpu vs cpu (no GPU)"}
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


QUANTIZE_FORMATS = ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "mxfp8_e4m3",
                    "mxfp4_e2m1"]


def quantize_speed(quick: bool, repeat: int, on_row=None) -> list[dict]:
    """``asicsim.quantize`` (fp32 -> format -> fp32, input donated) per format and rounding, in
    G elements/s and as a share of the same run's copy speed (``x * 2`` under jit; aims: element
    formats >= 1, MX >= 0.9 on a GPU)."""
    import asicsim as sim

    n = 2**16 if quick else 2**28
    x = jax.random.normal(jax.random.key(0), (4096, n // 4096), jnp.float32)
    key = jax.random.key(1)

    def speed(fn, *extra) -> float:
        f = jax.jit(fn, donate_argnums=0)
        state = {"v": jnp.array(x)}

        def run(_):
            state["v"] = f(state["v"], *extra)
            return state["v"]
        return n / timed(run, (None,), repeat) / 1e9

    copy = speed(lambda v: v * 2)
    rows = []
    for fmt in QUANTIZE_FORMATS:
        for rounding in ("rne", "sr"):
            g = speed(lambda v, k, fmt=fmt, r=rounding: sim.quantize(v, fmt, r, key=k if r == "sr" else None), key)
            row = {"format": fmt, "rounding": rounding, "g_elem_s": g, "copy_g_elem_s": copy, "of_copy": g / copy}
            rows.append(row)
            if on_row:
                on_row(row)
    return rows


def table(rows: list[dict]) -> str:
    """Rows as a markdown table (columns in first-seen order)."""
    if not rows:
        return "(none)"
    cols = list(dict.fromkeys(k for r in rows for k in r))

    def fmt(v) -> str:
        return f"{v:.3g}" if isinstance(v, float) else str(v)
    return "\n".join(["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|",
                      *("| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows)])
