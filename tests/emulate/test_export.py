"""Export of weight codes and scales under every kind of weight recipe, and serving on them
(:mod:`asicsim.emulate.export`, :mod:`asicsim.emulate.serving`), against outside references:
ml_dtypes' fp8 decoding, numpy integer arithmetic, the OCP MX v1.0 scale rule."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import asicsim
from asicsim.emulate.export import (
    canonical,
    dequantize_codes,
    export_codes,
    export_tensor,
)
from asicsim.emulate.export_io import load_codes, save_codes
from asicsim.emulate.policy import RoleSpec
from asicsim.emulate.recipes import load_recipe
from asicsim.emulate.role_rounding import round_role
from asicsim.emulate.serving import serve

RNG = np.random.default_rng(34)
W = RNG.standard_normal((40, 24)).astype(np.float32)  # (in, out): contraction axis 0


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["int8_ptq_tensor", "int8_ptq_channel", "fp8_deepseek_v3", "mxfp8", "mxfp4",
                                    "mxfp6", "nvfp4", "int4_w_g128", "w4a8_g128", "bf16", "fixed16_rn"])
def test_every_weight_recipe_dequantizes_to_the_emulated_weight(recipe):
    pol = load_recipe(recipe)
    params = {"dense": W, "conv": RNG.standard_normal((3, 3, 4, 8)).astype(np.float32), "bias": W[0]}
    back = dequantize_codes(export_codes(params, pol))
    for name, axes in (("dense", (0,)), ("conv", (0, 1, 2))):
        want = round_role(jnp.asarray(params[name]), pol.role("weight"), axis=axes)
        assert np.array_equal(_bits(back[name]), _bits(want)), name
    assert back["bias"] is params["bias"]


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


def test_save_and_load_round_trip(tmp_path):
    codes = export_codes({"a": {"w": W, "b": W[0]}}, "nvfp4")
    save_codes(tmp_path / "m.npz", codes)
    flat = load_codes(tmp_path / "m.npz")
    assert set(flat) == {"a/w", "a/b"} and flat["a/w"].scale_format == "float8_e4m3fn"
    assert np.array_equal(_bits(dequantize_codes(flat)["a/w"]), _bits(dequantize_codes(codes)["a"]["w"]))


def _mlp(p, x):
    return jax.nn.relu(x @ p["w1"] + p["b1"][None, :]) @ p["w2"]


PARAMS = {"w1": W, "b1": np.zeros(24, np.float32), "w2": RNG.standard_normal((24, 10)).astype(np.float32)}
X = RNG.standard_normal((5, 40)).astype(np.float32)
INT8_POW2 = {"format": "int8", "scaling": "group", "group_size": 1024, "scale_format": "e8m0"}


@pytest.mark.parametrize("roles, mode", [
    ({"weight": INT8_POW2, "act": INT8_POW2, "acc": "fp32"}, "int"),  # per-channel/per-token 2**e scales
    ({"weight": "mxfp8_e4m3", "act": "mxfp8_e4m3", "acc": "fp32", "out": "bf16"}, "table"),
])
def test_served_model_is_bit_identical_to_the_emulated_one(roles, mode):
    pol = load_recipe({"name": "t", "roles": roles})
    served = serve(_mlp, export_codes(PARAMS, pol), pol)
    y = served(X)
    assert [g["mode"] for g in served.gemms] == [mode, mode]
    assert np.array_equal(_bits(y), _bits(asicsim.emulate(_mlp, pol)(PARAMS, X)))


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
    (RoleSpec(format="fp8_e4m3", scaling="delayed"), "scaling = 'delayed'"),
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
    from asicsim.emulate.export_io import onnx_qdq

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
    from asicsim.emulate.export_io import onnx_qdq

    with pytest.raises(ValueError, match="2-d int8 weights with fp32 scales"):
        onnx_qdq(export_codes({"w": W}, "mxfp8"))
