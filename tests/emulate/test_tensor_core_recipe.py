"""Recipes whose GEMMs run as a named GPU's tensor cores compute them (issue 33 item 5):
``tensor_core = "h100"`` feeds the preset MAC the operands' codes and applies their scales to
the float32 result, as cuBLASLt/CUTLASS do (asicsim/_src/emulate/tensor_core_gemm.py)."""

from __future__ import annotations

import dataclasses
import re
import tomllib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest

from asicsim._src.emulate import emulate, load_recipe, make_train_step
from asicsim._src.emulate.policy import RecipeError, RoleSpec
from asicsim._src.emulate.recipe_toml import recipe_toml
from asicsim._src.emulate.recipes import policy_from_table
from asicsim._src.emulate.role_rounding import round_role
from asicsim._src.emulate.tensor_core_gemm import role_codes
from asicsim._src.emulate.tracing import op_trace
from asicsim._src.numerics import get_format, matmul, quantize, tensor_core
from asicsim._src.numerics.random import key_words
from asicsim._src.numerics.tc_ref import tensorcore_ref

HYBRID = load_recipe("fp8_hybrid")
H100 = dataclasses.replace(HYBRID, tensor_core="h100")
E4M3, E5M2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def _product32(codes, scale):
    """float32 codes * scale correctly rounded (exact in float64, then one rounding)."""
    return (np.asarray(codes, np.float64) * np.float64(np.float32(scale))).astype(np.float32)


CODE_CASES = [  # (role spec, amax given to the rounding)
    (RoleSpec("fp8_e4m3"), None),
    (RoleSpec("fp8_e4m3", scaling="tensor"), None),
    (RoleSpec("fp8_e5m2", scaling="tensor", rounding="sr"), None),
    (RoleSpec("fp8_e4m3", scaling="delayed"), 3.7),
    (RoleSpec("fp8_e4m3", scaling="delayed", margin=2), 3.7),
    (RoleSpec("fp8_e5m2", scaling="delayed"), 0.0),  # no estimate yet: the current amax
    (RoleSpec("fp8_e4m3", scaling="delayed"), None),
    (RoleSpec("fp8_e4m3", scaling="static"), 2.5),  # elements beyond the amax saturate
    (RoleSpec("int8", scaling="static", margin=1), 2.5),
    (RoleSpec("bf16"), None),
]


@pytest.mark.parametrize("spec, amax", CODE_CASES, ids=[f"{s.format}-{s.scaling}-{s.rounding}-{a}" for s, a in CODE_CASES])
def test_codes_times_scale_are_the_rounded_values(spec, amax):
    """The codes are on the role's format, and codes * scale (one float32 rounding) is what
    round_role gives, bit for bit: they are the quantiser's own codes, not values divided back."""
    x = jax.random.normal(jax.random.key(3), (24, 40)) * 1.3
    words = key_words(jax.random.key(5)) if spec.stochastic else None
    codes, scale = role_codes(x, spec, amax=None if amax is None else jnp.float32(amax), words=words)
    codes, scale = np.asarray(codes), np.float32(scale)
    assert np.array_equal(_bits(quantize(codes, spec.format, saturate=True)), _bits(codes))
    want = round_role(x, spec, amax=None if amax is None else jnp.float32(amax), words=words)
    assert np.array_equal(_bits(_product32(codes, scale)), _bits(want))
    if spec.scaling != "none":
        assert scale != 1 and np.max(np.abs(codes)) > np.max(np.abs(np.asarray(want)))  # scaled up to the format


def _tensor_codes(x, dtype):
    """fp32 tensor scaling's codes and scale, from numpy and ml_dtypes (scale = amax / max,
    codes = x / scale cast round-to-nearest; the data keep |x / scale| within max)."""
    x = np.asarray(x, np.float32)
    scale = np.float32(np.max(np.abs(x))) / np.float32(ml_dtypes.finfo(dtype).max)
    return (x / scale).astype(dtype).astype(np.float32), scale


def _bf16(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def test_gemms_are_the_preset_mac_on_codes_with_the_scales_after():
    """Forward (E4M3 x E4M3), dX (E5M2 x E4M3) and dW (E4M3 x E5M2) GEMMs of an emulated
    layer under fp8_hybrid + tensor_core = "h100" equal the H100 preset MAC called on the codes
    (numpy/ml_dtypes), times scale_a * scale_b in float32, rounded to bf16 (out, grad_out, wgrad)."""
    kx, kw, kg = jax.random.split(jax.random.key(0), 3)
    x = np.asarray(jax.random.normal(kx, (6, 96)), np.float32)
    w = np.asarray(jax.random.normal(kw, (96, 5)) * 0.2, np.float32)
    g = np.asarray(jax.random.normal(kg, (6, 5)) * 1e-3, np.float32)
    f = emulate(lambda w, x: x @ w, H100)
    y, (dw, dx) = jax.jit(lambda w, x, g: (f(w, x), jax.vjp(f, w, x)[1](g)))(w, x, g)
    (cx, sx), (cw, sw), (cg, sg) = _tensor_codes(x, E4M3), _tensor_codes(w, E4M3), _tensor_codes(g, E5M2)

    def gemm(a, b, fa, fb, sa, sb):
        d = np.asarray(matmul(a, b, tensor_core("h100", fa, b_fmt=fb)), np.float32)
        return _bf16(d * (np.float32(sa) * np.float32(sb)))

    assert np.array_equal(_bits(y), _bits(gemm(cx, cw, "fp8_e4m3", "fp8_e4m3", sx, sw)))
    assert np.array_equal(_bits(dx), _bits(gemm(cg, cw.T, "fp8_e5m2", "fp8_e4m3", sg, sw)))
    assert np.array_equal(_bits(dw), _bits(gemm(cx.T, cg, "fp8_e4m3", "fp8_e5m2", sx, sg)))


def test_mixed_fp8_preset_matches_the_fraction_model():
    """E5M2 x E4M3 (the hybrid backward GEMMs) on the H100's fp8 block: the kernel equals the
    scalar Fraction reference, each operand on its own format (values of both ranges)."""
    rng = np.random.default_rng(7)
    mac = tensor_core("h100", "fp8_e5m2", b_fmt="fp8_e4m3")
    a = (rng.standard_normal((4, 70)) * 2.0 ** rng.integers(-14, 14, (4, 70))).astype(E5M2).astype(np.float32)
    b = (rng.standard_normal((70, 3)) * 2.0 ** rng.integers(-6, 6, (70, 3))).astype(E4M3).astype(np.float32)
    got = np.asarray(matmul(a, b, mac), np.float32)
    want = np.float32([[tensorcore_ref(0.0, list(map(float, a[i])), list(map(float, b[:, j])), mac)
                        for j in range(3)] for i in range(4)])
    assert np.array_equal(_bits(got), _bits(want))
    assert mac.spec("a_fmt") == get_format("fp8_e5m2") and mac.spec("b_fmt") == get_format("fp8_e4m3")


@pytest.mark.slow  # compiles two training steps with 6 tensor-core GEMMs: ~20 s
def test_a_model_trains_with_the_h100_accumulator():
    """make_train_step (delayed scaling's amax history included) trains a two-layer MLP under
    fp8_hybrid on the H100's tensor cores: the loss falls, close to exact fp32 accumulation's but
    not equal, and the gradients flow to every weight (each one moves)."""
    k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
    params = {"w1": jax.random.normal(k1, (48, 32)) / 7, "w2": jax.random.normal(k2, (32, 1)) / 6}
    x = jax.random.normal(k3, (16, 48))
    y = jnp.sin(x[:, :1] * 2)

    def loss(p, batch):
        xb, yb = batch
        return jnp.mean((jnp.tanh(xb @ p["w1"]) @ p["w2"] - yb) ** 2)

    losses, moved = {}, {}
    for pol in (HYBRID, H100):
        init, step = make_train_step(loss, pol, optax.sgd(0.2))
        state, step = init(params, 0), jax.jit(step)
        master = (lambda s: s.params if s.master is None else s.master)  # noqa: E731 (fp8: params hold it)
        first, out = master(state), []
        for _ in range(4):
            state, metrics = step(state, (x, y))
            out.append(float(metrics["loss"]))
        losses[pol.tensor_core] = out
        moved[pol.tensor_core] = {k: float(jnp.max(jnp.abs(master(state)[k] - first[k]))) for k in params}
    assert losses["h100"][-1] < losses["h100"][0] and np.all(np.isfinite(losses["h100"]))
    assert losses["h100"] != losses[""] and np.allclose(losses["h100"], losses[""], rtol=0.05)
    for k in params:
        assert moved["h100"][k] > 0 and np.isclose(moved["h100"][k], moved[""][k], rtol=0.2)


def test_the_op_trace_records_the_tensor_cores():
    w, x = jnp.ones((8, 4)), jnp.ones((2, 8))
    per_gemm = dataclasses.replace(HYBRID, tensor_core={"out": "h100", "wgrad": "b200"})
    df = op_trace(lambda w, x: x @ w, per_gemm, w, x, training=True)
    assert dict(zip(df.role, df.tensor_core, strict=True)) == {"forward": "h100", "grad-input": "", "grad-weight": "b200"}
    assert set(op_trace(lambda w, x: x @ w, HYBRID, w, x, training=True).tensor_core) == {""}


@pytest.mark.slow  # three compiled forward + backward GEMMs: ~10 s
def test_per_gemm_tensor_cores_mix_with_exact_accumulation():
    """Only the dW GEMM on the H100: the forward and dX results are fp8_hybrid's own, dW differs."""
    w = jax.random.normal(jax.random.key(2), (64, 8)) * 0.2
    x = jax.random.normal(jax.random.key(3), (4, 64))
    g = jax.random.normal(jax.random.key(4), (4, 8))
    def run(pol):
        f = emulate(lambda w, x: x @ w, pol)
        return jax.jit(lambda w, x, g: (f(w, x), jax.vjp(f, w, x)[1](g)))(w, x, g)

    (y0, (dw0, dx0)), (y1, (dw1, dx1)), (_, (dw2, _)) = (
        run(p) for p in (HYBRID, dataclasses.replace(HYBRID, tensor_core={"wgrad": "h100"}),
                         dataclasses.replace(HYBRID, tensor_core="h100")))
    assert np.array_equal(_bits(y0), _bits(y1)) and np.array_equal(_bits(dx0), _bits(dx1))
    assert np.array_equal(_bits(dw1), _bits(dw2)) and not np.array_equal(_bits(dw0), _bits(dw1))


def test_recipe_files_name_the_tensor_cores():
    """The TOML key (a GPU, or a table per GEMM) reads back from the recipe's own text."""
    for tc in ("h100", {"out": "h100", "grad_out": "ada"}):
        pol = dataclasses.replace(HYBRID, tensor_core=tc)
        again = policy_from_table(tomllib.loads(recipe_toml(pol)))
        assert again == pol and again.tensor_core_gpu("out") == "h100"
    assert H100.tensor_core_gpu("grad_out") == "h100" and HYBRID.tensor_core_gpu("out") is None


def _table(**top):
    roles = {"weight": {"format": "fp8_e4m3", "scaling": "tensor"}, "act": "fp8_e4m3", "acc": "fp32",
             "grad": "fp8_e5m2", "out": "bf16"}
    return {"name": "t", "roles": {**roles, **top.pop("roles", {})}, **top}


BAD = [
    (_table(tensor_core="h900"), "a GPU with tensor-core presets: a100, a2, ada, b200, h100"),
    (_table(tensor_core={"fwd": "h100"}), "a GEMM by the role it writes: out, grad_out, wgrad"),
    (_table(tensor_core=3), "a GPU name"),
    (_table(tensor_core="a100"), "no a100 preset; a100 takes float16, bfloat16, tf32 -> float32"),
    (_table(tensor_core="h100", roles={"acc": "bf16"}), "acc = bf16: no h100 preset"),
    (_table(tensor_core="h100", roles={"act": "fp32"}), "a tensor-core input format"),
    (_table(tensor_core="h100", roles={"act": "bf16"}), "reads act = bf16 and weight = fp8_e4m3"),
    (_table(tensor_core="h100", roles={"act": {"format": "fp8_e4m3", "scaling": "channel"}}),
     "scaling none | tensor | delayed | static"),
    (_table(tensor_core="h100", roles={"act": {"format": "fp8_e4m3", "scaling": "block", "block_size": 32}}),
     "scaling none | tensor | delayed | static"),
    (_table(tensor_core="h100", roles={"act": "mxfp8_e4m3"}), "not the block format"),
    (_table(tensor_core={"wgrad": "h100"}, roles={"grad_dw": "fp16"}), "the dW GEMM under roles reads act_dw"),
    (_table(tensor_core="h100", mac={"order": "sequential"}), "absent with tensor_core"),
]


def test_an_operand_role_the_checks_did_not_see_is_refused():
    with pytest.raises(ValueError, match="needs a tensor-core input format"):
        role_codes(jnp.ones(3), RoleSpec("fp32"))
    with pytest.raises(ValueError, match=re.escape("scaling none | tensor | delayed | static")):
        role_codes(jnp.ones(3), RoleSpec("fp8_e4m3", scaling="block", block_size=2))


@pytest.mark.parametrize("table, fragment", BAD, ids=[b[1][:40] for b in BAD])
def test_bad_tensor_core_fields_are_refused_clearly(table, fragment):
    with pytest.raises(RecipeError) as err:
        policy_from_table(table)
    assert fragment in str(err.value)


@pytest.mark.slow  # six compiled V100 GEMMs: ~8 s
def test_unscaled_roles_match_the_mac_spec_path():
    """fp16 roles (no scales: the codes are the values) on tensor_core = "v100" give the bits of
    tensorcore_fp16, which runs the same preset through ``[mac] spec = "v100"`` on the rounded
    values: forward, dX and dW (a batched GEMM, so the transposes carry batch axes too)."""
    base = load_recipe("tensorcore_fp16")
    tc = dataclasses.replace(base, mac="", tensor_core="v100")
    w = jax.random.normal(jax.random.key(6), (3, 20, 5))
    x = jax.random.normal(jax.random.key(7), (3, 4, 20))
    g = jax.random.normal(jax.random.key(8), (3, 4, 5))

    def run(pol):
        f = emulate(lambda w, x: jnp.einsum("bmk,bkn->bmn", x, w), pol)
        return jax.jit(lambda w, x, g: (f(w, x), jax.vjp(f, w, x)[1](g)))(w, x, g)

    for got, want in zip(jax.tree_util.tree_leaves(run(tc)), jax.tree_util.tree_leaves(run(base)), strict=True):
        assert np.array_equal(_bits(got), _bits(want))
