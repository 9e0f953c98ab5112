"""Export of weight codes and scales under every kind of weight recipe, and serving on them
(:mod:`asicsim._src.emulate.export`, :mod:`asicsim._src.emulate.serving`), against outside references:
ml_dtypes' fp8 decoding, numpy integer arithmetic, the OCP MX v1.0 scale rule."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import asicsim
from asicsim._src.emulate.export import (
    canonical,
    dequantize_codes,
    export_codes,
    export_tensor,
)
from asicsim._src.emulate.export_io import load_codes, save_codes
from asicsim._src.emulate.policy import RoleSpec
from asicsim._src.emulate.recipes import load_recipe
from asicsim._src.emulate.role_rounding import round_role
from asicsim._src.emulate.serving import serve

RNG = np.random.default_rng(34)
W = RNG.standard_normal((40, 24)).astype(np.float32)  # (in, out): contraction axis 0


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["int8_ptq_tensor", "int8_ptq_channel", "fp8_deepseek_v3", "fp8_hybrid", "mxfp8", "mxfp4",
                                    "mxfp6", "nvfp4", "int4_w_g128", "w4a8_g128", "bf16", "fixed16_rn"])
def test_every_weight_recipe_dequantizes_to_the_emulated_weight(recipe, tmp_path):
    """Through an .npz file and back: every field of every scale kind survives it."""
    pol = load_recipe(recipe)
    params = {"dense": W, "conv": RNG.standard_normal((3, 3, 4, 8)).astype(np.float32), "bias": W[0]}
    codes = export_codes(params, pol)
    save_codes(tmp_path / "m.npz", codes)
    back = dequantize_codes(load_codes(tmp_path / "m.npz"))
    for name, axes in (("dense", (0,)), ("conv", (0, 1, 2))):
        want = round_role(jnp.asarray(params[name]), pol.role("weight"), axis=axes)
        assert np.array_equal(_bits(back[name]), _bits(want)), name
    assert np.array_equal(back["bias"], params["bias"]) and dequantize_codes(codes)["bias"] is params["bias"]


def test_fp8_codes_decode_by_ml_dtypes_and_int8_codes_match_numpy():
    fp8 = export_tensor(W, RoleSpec(format="fp8_e4m3", scaling="tensor"), (0,))
    assert fp8.codes.dtype == np.uint8 and fp8.scale_kind == "fp32" and fp8.scales.shape == (1, 1)
    q = fp8.codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    s = np.float32(np.abs(W).max()) / np.float32(448)  # amax / max, float32 (numpy: correctly rounded)
    assert fp8.scales[0, 0] == s
    assert np.array_equal(_bits(q * s), _bits(dequantize_codes({"w": fp8})["w"]))  # one float32 product
    ref8 = np.clip(W / s, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(fp8.codes, ref8)

    i8 = export_tensor(W, RoleSpec(format="int8", scaling="channel"), (0,))
    s = np.abs(W).max(axis=0).astype(np.float32) / np.float32(127)  # one scale per output channel
    assert np.array_equal(i8.scales[:, 0], s)
    assert i8.codes.dtype == np.int8 and np.array_equal(i8.codes, np.clip(np.rint(W / s), -127, 127).astype(np.int8))


def test_mx_codes_follow_the_ocp_scale_rule():
    """OCP MX v1.0 section 6.3: X = 2**(floor(log2 amax) - emax_elem) per 32 elements along K,
    elements = x / X cast (RNE, saturating) to E4M3 (ml_dtypes)."""
    mx = export_codes({"w": W}, "mxfp8_ocp")["w"]
    c = W.T.astype(np.float64)  # canonical (N, K)
    blocks = np.pad(c, ((0, 0), (0, 64 - 40))).reshape(24, 2, 32)
    e = np.floor(np.log2(np.abs(blocks).max(axis=-1))) - 8
    assert mx.scale_kind == "pow2" and np.array_equal(mx.scales, e.astype(np.int32))
    x = np.clip(blocks / 2.0 ** e[..., None], -448, 448).reshape(24, 64)[:, :40]
    ref = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(np.asarray(canonical(jnp.asarray(mx.codes), (0,))), ref)


def _mlp(p, x):
    return jax.nn.relu(x @ p["w1"] + p["b1"][None, :]) @ p["w2"]


PARAMS = {"w1": W, "b1": np.zeros(24, np.float32), "w2": RNG.standard_normal((24, 10)).astype(np.float32)}
X = RNG.standard_normal((5, 40)).astype(np.float32)
INT8_POW2 = {"format": "int8", "scaling": "group", "group_size": 1024, "scale_format": "e8m0"}


SMALL = {"w1": W[:32, :16], "b1": np.zeros(16, np.float32), "w2": W[:16, 16:]}  # K = 32, 16: one MX block


@pytest.mark.parametrize("roles, mode", [
    ({"weight": "mxint8", "act": "mxint8", "acc": "fp32"}, "int"),  # int8 codes k * 2**-6, one 2**e per row
    pytest.param({"weight": INT8_POW2, "act": INT8_POW2, "acc": "fp32"}, "int", marks=pytest.mark.slow),
    ({"weight": "mxfp8_e4m3", "act": "mxfp8_e4m3", "acc": "fp32", "out": "bf16"}, "table"),
    pytest.param({"weight": {"format": "fp8_e4m3", "scaling": "delayed"}, "act": {"format": "fp8_e4m3",
                  "scaling": "delayed"}, "acc": "fp32", "out": "bf16"}, "table", marks=pytest.mark.slow),  # fp8_hybrid
])
def test_served_model_is_bit_identical_to_the_emulated_one(roles, mode):
    """int: an int32 dot_general of the codes, scaled after; exact, so equal to the emulated float
    GEMM (K * 127 * 127 < 2**24, one power-of-two scale per row of either operand)."""
    pol = load_recipe({"name": "t", "roles": roles})
    served = serve(_mlp, export_codes(SMALL, pol), pol)
    y = served(X[:, :32])
    assert [g["mode"] for g in served.gemms] == [mode, mode]
    assert np.array_equal(_bits(y), _bits(asicsim.emulate(_mlp, pol)(SMALL, X[:, :32])))


@pytest.mark.slow  # 16 s on 2 cores; test_served_model_is_bit_identical_to_the_emulated_one covers int8 by default
def test_integer_gemm_is_numpys_and_fp32_scales_agree_within_rounding():
    roles = {"weight": {"format": "int8", "scaling": "channel"}, "act": {"format": "int8", "scaling": "tensor"},
             "acc": "fp32"}
    pol = load_recipe({"name": "t", "roles": roles})

    def one(p, x):
        return x @ p["w1"]

    codes = export_codes(PARAMS, pol)
    y = np.asarray(serve(one, codes, pol)(X))
    a = export_tensor(X, pol.role("act"), (1,))
    acc = a.codes.astype(np.int64) @ codes["w1"].codes.astype(np.int64)  # numpy's exact integer GEMM
    assert np.array_equal(y, (acc.astype(np.float32) * a.scales[0, 0]) * codes["w1"].scales[:, 0])
    e = np.asarray(asicsim.emulate(one, pol)(PARAMS, X))
    assert np.max(np.abs(y - e)) <= 2.0**-20 * np.max(np.abs(e))


@pytest.mark.parametrize("spec, fragment", [
    (RoleSpec(format="int8", scaling="tensor", rounding="sr"), "stochastic rounding"),
    (RoleSpec(format="fp8_e4m3", scaling="delayed", margin=1), "scaling = 'delayed' with a margin"),
    (RoleSpec(format="mxfp8_e4m3", rotation=16), "a rotation"),
])
def test_unexportable_roles_are_refused(spec, fragment):
    with pytest.raises(ValueError, match=fragment):
        export_tensor(W, spec, (0,))


@pytest.mark.parametrize("call, fragment", [
    (lambda: export_codes({"w": W}, "fp8_wang2018"), "first_last"),
    (lambda: export_codes({"w": W}, "mxfp8", axis=5), "axis=5"),
    (lambda: export_codes({"w": W}, "mxfp8", axis=(0, 1)), "leaves no output axis"),
    (lambda: serve(lambda p, x: x @ p["w"].T, export_codes({"w": W}, "mxfp8"), "mxfp8")(X[:, :24]), "transpose"),
    (lambda: serve(lambda p, x: x @ p["w"], {"w": W}, "mxfp8_bf16_vector"), "non-GEMM ops"),
    (lambda: serve(lambda p, x: x @ p["w"], {"w": W}, {"name": "t", "first_last": {"weight": "bf16"},
                                                      "roles": {"weight": "fp8_e4m3", "act": "bf16", "acc": "fp32"}}),
     "first_last"),
    (lambda: serve(lambda p, x: jax.lax.scan(lambda c, _: (c * 2, None), x, None, length=2)[0] @ p["w"], {"w": W},
                   dataclasses.replace(load_recipe("int8_ptq_tensor"), static_scales=((0, (1.0, 1.0, 0.0)),)))(X),
     "straight-line models only"),
])
def test_bad_exports_and_serves_say_why(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()


@pytest.mark.parametrize("recipe", ["int8_ptq_tensor", "int8_ptq_channel"])
def test_onnx_qdq_dequantizes_as_we_do(recipe):
    """onnxruntime's DequantizeLinear (an outside implementation of (q - 0) * scale) gives our
    dequantized weights bit for bit; its MatMul gives x @ w (its own summation order)."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from asicsim._src.emulate.export_io import onnx_qdq

    codes = export_codes({"dense": W, "eqx": np.ascontiguousarray(W.T)}, recipe,
                         axis=lambda path, leaf: (0,) if path == "dense" else (1,))
    model = onnx_qdq(codes)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = RNG.standard_normal((3, 40)).astype(np.float32)
    got = dict(zip([o.name for o in session.get_outputs()],
                   session.run(None, {"dense.x": x, "eqx.x": x}), strict=True))
    back = dequantize_codes(codes)
    assert np.array_equal(_bits(got["dense.w"]), _bits(back["dense"]))
    assert np.array_equal(_bits(got["eqx.w"]), _bits(back["eqx"].T))
    np.testing.assert_allclose(got["dense.y"], x @ np.asarray(back["dense"]), rtol=1e-5, atol=1e-5)


def test_onnx_qdq_refuses_what_it_cannot_write():
    pytest.importorskip("onnx")
    from asicsim._src.emulate.export_io import onnx_qdq

    with pytest.raises(ValueError, match="2-d int8 weights with fp32 scales"):
        onnx_qdq(export_codes({"w": W}, "mxfp8"))


def _linen():
    import flax.linen as nn

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(8)(nn.relu(nn.Dense(32)(x)))

    m = MLP()
    return m.apply, m.init(jax.random.key(0), X[:, :16]), None


def _nnx():
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.a, self.b = nnx.Linear(16, 32, rngs=rngs), nnx.Linear(32, 8, rngs=rngs)

        def __call__(self, x):
            return self.b(nnx.relu(self.a(x)))

    graph, state = nnx.split(MLP(nnx.Rngs(0)))
    return lambda s, x: nnx.merge(graph, s)(x), state, None


def _equinox():
    import equinox as eqx

    params, static = eqx.partition(eqx.nn.MLP(16, 8, 32, 1, key=jax.random.key(1)), eqx.is_array)
    return lambda p, x: jax.vmap(eqx.combine(p, static))(x), params, -1  # (out, in) weights


@pytest.mark.slow
@pytest.mark.parametrize("make", [_linen, _nnx, _equinox])
def test_models_as_users_write_them_serve_bit_identically(make):
    apply, params, axis = make()
    pol = load_recipe("mxfp8")
    served = serve(apply, export_codes(params, pol, axis=axis), pol)
    x = X[:, :16]
    y = served(x)
    assert [g["mode"] for g in served.gemms] == ["table", "table"]
    assert np.array_equal(_bits(y), _bits(asicsim.emulate(apply, pol)(params, x)))
    assert np.array_equal(_bits(jax.jit(served)(x)), _bits(y))  # traceable


def test_layer_rules_choose_each_weights_format():
    pol = load_recipe({"name": "t", "roles": {"weight": "mxfp8_e4m3", "act": "bf16", "acc": "fp32"},
                       "layers": [{"match": "w2", "roles": {"weight": {"format": "int8", "scaling": "channel"}}}]})
    codes = export_codes({"w1": W, "w2": PARAMS["w2"]}, pol)
    assert (codes["w1"].scale_kind, codes["w1"].element) == ("pow2", "float8_e4m3fn")
    assert (codes["w2"].scale_kind, codes["w2"].element, codes["w2"].scales.shape) == ("fp32", "int8", (10, 1))


def test_bf16_weights_dequantize_and_serve_in_their_dtype():
    """A bf16 weight's emulated GEMM reads its rounded values cast back to bf16 (int8 times an
    fp32 scale is not a bf16 value): the export dequantizes to the same bf16 values."""
    pol = load_recipe("int8_ptq_channel")
    p = {"w": jnp.asarray(W[:16, :8], jnp.bfloat16)}
    x = jnp.asarray(X[:, :16], jnp.bfloat16)
    codes = export_codes(p, pol)
    assert codes["w"].dtype == "bfloat16" and dequantize_codes(codes)["w"].dtype == jnp.bfloat16

    def f(p, x):
        return x @ p["w"]

    y, e = serve(f, codes, pol, integer=False)(x), asicsim.emulate(f, pol)(p, x)
    assert y.dtype == e.dtype == jnp.bfloat16 and np.array_equal(_bits(y.astype(jnp.float32)), _bits(e.astype(jnp.float32)))


def test_int_serving_runs_int8_dot_generals():
    pol = load_recipe({"name": "t", "roles": {"weight": "mxint8", "act": "mxint8", "acc": "fp32"}})
    jaxpr = str(jax.make_jaxpr(serve(_mlp, export_codes(SMALL, pol), pol))(X[:, :32]))
    assert jaxpr.count("preferred_element_type=int32") == 2 and "i8[5,32]" in jaxpr


@pytest.mark.parametrize("recipe", ["int8_ptq_tensor", pytest.param("int8_ptq_entropy", marks=pytest.mark.slow)])
def test_calibrated_int8_model_serves_bit_identically(recipe):
    """PTQ as deployed: calibrate, export, serve; each GEMM row's activation scale is the
    calibrated one (rows numbered as asicsim.emulate numbers them)."""
    from asicsim._src.emulate.ptq import calibrate

    batches = [RNG.standard_normal((5, 32)).astype(np.float32) for _ in range(2)]
    pol = calibrate(_mlp, SMALL, batches, recipe)
    codes = export_codes(SMALL, pol)
    x = 3 * X[:, :32]  # beyond the calibrated range: saturates as the emulated model does
    e = np.asarray(asicsim.emulate(_mlp, pol)(SMALL, x))
    exact = serve(_mlp, codes, pol, integer=False)
    assert np.array_equal(_bits(exact(x)), _bits(e))
    assert [(g["row"], g["mode"]) for g in exact.gemms] == [(0, "table"), (1, "table")]
    served = serve(_mlp, codes, pol)  # int8 x int8 -> int32, fp32 scales after: within float32 rounding
    y = np.asarray(served(x))
    assert [g["mode"] for g in served.gemms] == ["int", "int"]
    assert np.max(np.abs(y - e)) <= 2.0**-19 * np.max(np.abs(e))


def test_an_lsq_trained_model_exports_codes_and_its_learned_steps():
    """int8_lsq (int8 weights, a learned step per output channel) after two training steps: each
    weight exported as LSQ's codes, numpy's round half to even of clip(w / step, -128, 127) (Esser
    et al. 2020, Eqs. 1-2), with the learned steps as its (N, 1) fp32 scales; dequantized, bit
    for bit lsq_quantize(w, step). Without the steps the export is refused, naming where they
    come from. On the old code LSQ weights could not be exported."""
    import optax

    from asicsim._src.emulate import lsq_quantize, make_train_step
    from asicsim._src.emulate.lsq_export import lsq_weight_steps

    rng = np.random.default_rng(0)
    params = {"w1": jnp.asarray(rng.normal(size=(8, 6)), jnp.float32),
              "w2": jnp.asarray(rng.normal(size=(6, 3)), jnp.float32)}
    batch = (jnp.asarray(rng.normal(size=(16, 8)), jnp.float32), jnp.asarray(rng.normal(size=(16, 3)), jnp.float32))

    def loss(p, b):
        return jnp.mean((jnp.tanh(b[0] @ p["w1"]) @ p["w2"] - b[1]) ** 2)

    init, step = make_train_step(loss, "int8_lsq", optax.sgd(0.1))
    state = init(params, 0, batch)
    stepj = jax.jit(step)
    for _ in range(2):
        state, _ = stepj(state, batch)
    steps = lsq_weight_steps(loss, "int8_lsq", state.lsq[0], state.params, batch)
    assert sorted(steps) == ["w1", "w2"] and steps["w1"].shape == (1, 6)
    codes = export_codes(state.params, "int8_lsq", lsq_steps=steps)
    for k in ("w1", "w2"):
        w, s = np.asarray(state.params[k]), steps[k]
        wc = codes[k]
        assert wc.codes.dtype == np.int8 and wc.scale_kind == "fp32"
        np.testing.assert_array_equal(wc.codes, np.clip(np.rint(w / s), -128, 127).astype(np.int8))
        np.testing.assert_array_equal(wc.scales, s.reshape(-1, 1))
        np.testing.assert_array_equal(np.asarray(dequantize_codes(codes)[k]), np.asarray(lsq_quantize(w, s, "int8")))
    with pytest.raises(ValueError, match="lsq_steps=lsq_weight_steps"):
        export_codes(state.params, "int8_lsq")
