"""The shipped precision recipes: each loads, says what it is and where it comes from, and runs a
forward + backward pass on a tiny MLP; the formats and accumulation each one claims are checked
by hand-computable cases (fp8 hybrid's E4M3 forward / E5M2 backward, Wang 2018's chunked fp16
accumulation, the V100 tensor-core MAC, int8 PTQ per channel vs per tensor)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import asicsim as sim
from asicsim._src.emulate import emulate, list_recipes, load_recipe, round_role
from asicsim._src.emulate.ptq import calibrate, quantize_params

ISSUE_RECIPES = ["fp32", "bf16", "fp16_mixed", "fp16_nomaster", "bf16_nomaster", "fp8_hybrid", "fp8_wang2018",
                 "fixed16_rn", "fixed16_sr", "int8_ptq_tensor", "int8_ptq_channel", "mxfp8", "mxfp6", "mxfp4",
                 "tensorcore_fp16"]


def mlp_params():
    k1, k2 = jax.random.split(jax.random.key(0))
    return {"w1": jax.random.normal(k1, (32, 16)) * 0.3, "b1": jnp.zeros(16),
            "w2": jax.random.normal(k2, (16, 4)) * 0.3}


X = jax.random.normal(jax.random.key(1), (8, 32))


def mlp_loss(p, x):
    h = jax.nn.relu(x @ p["w1"] + p["b1"][None])
    return jnp.mean((h @ p["w2"]) ** 2)


def test_every_issue_recipe_ships_with_a_description_and_source():
    assert set(ISSUE_RECIPES) <= set(list_recipes())
    for name in list_recipes():
        pol = load_recipe(name)
        assert pol.name == name
        assert len(pol.description) > 40 and len(pol.source) > 10, name


@pytest.mark.parametrize("name", ISSUE_RECIPES)
def test_recipe_runs_forward_and_backward(name):
    pol = load_recipe(name)
    kw = {"asicsim_key": jax.random.key(3)} if pol.stochastic else {}
    f = emulate(mlp_loss, pol)
    loss, grads = jax.jit(jax.value_and_grad(lambda p: f(p, X, **kw)))(mlp_params())
    ref = mlp_loss(mlp_params(), X)
    assert np.isfinite(loss) and abs(float(loss) - float(ref)) < 0.25 * float(ref) + 0.05
    for k, g in grads.items():
        assert np.all(np.isfinite(g)), k
    assert float(jnp.sum(jnp.abs(grads["w1"]))) > 0
    if name != "fp32":
        assert float(loss) != float(ref)  # something was rounded


def test_role_formats_of_the_paper_recipes():
    fmt = lambda r, role: load_recipe(r)[role].spec.name  # noqa: E731
    assert fmt("fp8_hybrid", "act") == fmt("fp8_hybrid", "weight") == "float8_e4m3fn"
    assert fmt("fp8_hybrid", "grad") == "float8_e5m2"
    assert load_recipe("fp8_hybrid")["act"].scaling == "delayed"
    assert fmt("fp8_wang2018", "act") == fmt("fp8_wang2018", "grad") == "float8_e5m2"
    assert load_recipe("fp8_wang2018").mac_order == "chunk:64" and fmt("fp8_wang2018", "acc") == "float16"
    assert load_recipe("fp8_wang2018")["update"].rounding == "sr" and not load_recipe("fp8_wang2018").has_master
    assert fmt("fixed16_rn", "weight") == fmt("fixed16_sr", "update") == "q7.8"
    assert load_recipe("fixed16_rn")["update"].rounding == "rne" and load_recipe("fixed16_sr")["update"].rounding == "sr"
    assert load_recipe("fp16_mixed").has_master and load_recipe("fp16_mixed").loss_scaling.kind == "dynamic"
    assert not load_recipe("fp16_nomaster").has_master and not load_recipe("bf16_nomaster").has_master
    assert load_recipe("int8_ptq_channel")["weight"].scaling == "channel"
    assert load_recipe("int8_ptq_tensor")["act"].scaling == "static"
    assert fmt("mxfp4", "weight") == "mxfp4" and fmt("mxfp6", "act") == "mxfp6_e2m3"


def test_fp8_hybrid_is_e4m3_forward_and_e5m2_backward():
    # 1x1x1 GEMM with the delayed scale pinned to 1 (amax estimate = the format's max):
    # x = 1.1 is 1.125 in E4M3 (3 mantissa bits) but 1.0 in E5M2; the cotangent 1.1 the other way
    f = emulate(lambda w, x: jnp.sum((x @ w) * jnp.float32(1.1)), "fp8_hybrid")
    meta = jnp.zeros((4, 3), jnp.float32).at[0].set(jnp.float32([448.0, 448.0, 57344.0]))
    w, x = jnp.ones((1, 1)), jnp.full((1, 1), 1.1)
    y = emulate(lambda w, x: x @ w, "fp8_hybrid")(w, x, asicsim_amax=meta)
    assert float(y[0, 0]) == 1.125  # forward operand in E4M3
    dw, dx = jax.grad(f, argnums=(0, 1))(w, x, asicsim_amax=meta)
    assert float(dx[0, 0]) == 1.0  # cotangent 1.1 rounded to E5M2 (1.125 in E4M3) times w = 1
    assert float(dw[0, 0]) == 1.125  # E5M2 cotangent (1.0) times the E4M3 operand (1.125)
    # the amax gradient is what delayed scaling records: |x|, |w| and |cotangent|
    seen = jax.grad(lambda m: f(w, x, asicsim_amax=m))(meta)
    np.testing.assert_allclose(seen[0], [1.1, 1.0, 1.1], rtol=1e-6)
    # a stale (small) amax estimate saturates: x = 3 with an estimate of 1 comes out as 1
    small = meta.at[0, 0].set(1.0)
    assert float(emulate(lambda w, x: x @ w, "fp8_hybrid")(w, 3 * x, asicsim_amax=small)[0, 0]) == 1.0


def test_dx_leaves_its_gemm_in_grad_out_which_defaults_to_grad():
    # dX_i = g_i * w (one product, exact in fp32): in fp8_hybrid it leaves the GEMM in bf16
    # (grad_out); a recipe without grad_out rounds it to grad (E5M2, current scale) instead
    pol = load_recipe("fp8_hybrid")
    assert pol.role("grad_out").format == "bf16"
    no_grad_out = dataclasses.replace(pol, roles=tuple((r, s) for r, s in pol.roles if r != "grad_out"))
    assert no_grad_out.role("grad_out") == pol.role("grad")
    meta = jnp.zeros((4, 3), jnp.float32).at[0].set(jnp.float32([448.0, 448.0, 57344.0]))  # unit scales
    w, x = jnp.full((1, 1), 1.1), jnp.ones((8, 1))
    c = jax.random.uniform(jax.random.key(3), (8, 1), minval=1.0, maxval=2.0)

    def dx(policy):
        f = emulate(lambda w, x: jnp.sum((x @ w) * c), policy)
        return np.asarray(jax.grad(f, argnums=1)(w, x, asicsim_amax=meta))

    g = np.asarray(c).astype(ml_dtypes.float8_e5m2).astype(np.float32)
    product = g * np.float32(1.125)  # w in E4M3
    assert np.array_equal(dx(pol), product.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert not np.array_equal(dx(no_grad_out), dx(pol))


def test_delayed_scaling_computes_as_transformer_engine():
    """The bits of Transformer Engine's DelayedScaling: sf = (448 / amax) in float32, the E4M3 cast
    of x * sf (saturating, as TE's cast), dequantized by scale_inv = 1 / sf. Dividing by
    amax / 448 instead gives other bits for some estimates (asserted, so this can fail); the
    estimates below the true amax (10.1) saturate."""
    pol = load_recipe("fp8_hybrid")
    x = (np.random.default_rng(4).standard_normal(4096) * 2.5).astype(np.float32)
    differs = 0
    for est in (3.0, 6.7, 11.0):  # 1 / sf and amax / 448 are different floats for 6.7 and 11
        got = np.asarray(round_role(jnp.asarray(x), pol["act"], amax=jnp.float32(est)))
        sf = np.float32(448) / np.float32(est)
        q = np.clip(x * sf, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
        want = q * (np.float32(1) / sf)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        scale = np.float32(est) / np.float32(448)
        divided = np.clip(x / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale
        differs += int((divided != want).sum())
    assert differs > 0


@pytest.mark.parametrize("shape", [(100, 18), (1000, 75)])  # the integer path, the float path
def test_amax_is_the_largest_magnitude(shape):
    """The amax delayed scaling falls back to and the amax taps record: max |x| over values from
    2**-120 to 2**100 of both signs, inf where one is. A NaN gives NaN on the integer path (small
    tensors), NaN or the largest other magnitude on the float path. The integer path also keeps
    a subnormal amax (XLA:CPU's float max may read it as 0)."""
    from asicsim._src.emulate.role_rounding import INT_AMAX_BELOW, _amax

    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-120, 100, shape)).astype(np.float32)
    amax = jax.jit(_amax)
    finite_max = float(np.max(np.abs(x)))
    assert float(amax(x)) == finite_max > 0
    assert float(amax(np.zeros(shape, np.float32))) == 0.0
    small = np.prod(shape) < INT_AMAX_BELOW
    for i, j in [(0, 0), (7, 1), (-1, -1), (50, 17)]:
        y = x.copy()
        y[i, j] = -np.nan if i else np.nan
        got = float(amax(y))
        assert np.isnan(got) if small else (np.isnan(got) or got == float(np.nanmax(np.abs(y))))
    x[5, 3] = -np.inf
    assert float(amax(x)) == np.inf
    if small:
        tiny = np.zeros(shape, np.float32)
        tiny[3, 2], tiny[9, 9] = np.float32(-3e-42), np.float32(1e-45)
        assert np.asarray(amax(tiny)).view(np.uint32) == np.float32(3e-42).view(np.uint32)


def test_delayed_scaling_margin_leaves_headroom_above_a_stale_amax():
    # estimate 1.0 for x = 1.5: without a margin 1.5 saturates to 1.0; with margin 1 Transformer
    # Engine's scaling factor is (448 / 1) / 2 and 1.5 rounds on E4M3's grid (672 -> 448 vs
    # 336 -> 320 times 1 / sf)
    pol = load_recipe("fp8_hybrid")
    x = jnp.full((4,), 1.5, jnp.float32)
    assert float(round_role(x, pol["act"], amax=jnp.float32(1.0))[0]) == 1.0
    spec = dataclasses.replace(pol["act"], margin=1)
    sf = np.float32(448) / np.float32(1.0) / np.float32(2)
    want = np.float32(np.float32(1.5) * sf).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * (np.float32(1) / sf)
    assert float(round_role(x, spec, amax=jnp.float32(1.0))[0]) == float(want) != 1.0
    assert load_recipe({"roles": {"weight": {"format": "fp8_e4m3", "scaling": "delayed", "margin": 2},
                                  "act": "fp8_e4m3", "acc": "fp32"}}).role("weight").margin == 2
    from asicsim._src.emulate import RecipeError
    with pytest.raises(RecipeError, match="margin"):
        load_recipe({"roles": {"weight": {"format": "fp8_e4m3", "margin": 1}, "act": "fp8_e4m3", "acc": "fp32"}})


def test_fp8_e4m3_operands_are_representable_at_unit_scale():
    pol = load_recipe("fp8_hybrid")
    a = jax.random.normal(jax.random.key(5), (64,))
    q = round_role(a, pol["act"], amax=jnp.float32(448.0))
    assert np.array_equal(q, np.asarray(a).astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    g = round_role(a, pol["grad"], amax=jnp.float32(57344.0))
    assert np.array_equal(g, np.asarray(a).astype(ml_dtypes.float8_e5m2).astype(np.float32))


def _mx(v, fmt, axis):
    return np.asarray(sim.quantize(jnp.asarray(v, jnp.float32), fmt, "rne", axis=axis), np.float64)


def _bf16(v):
    return np.asarray(jnp.asarray(v, jnp.float32).astype(jnp.bfloat16).astype(jnp.float32), np.float64)


# the batched case (lead (3,)) runs in the slow step: ~6 s, the same code path with a batch axis
@pytest.mark.parametrize("lead", [(), pytest.param((3,), marks=pytest.mark.slow)])
def test_mx_gradient_gemms_block_each_operand_along_their_own_contraction_axis(lead):
    # as microxcaling's MX linear: dW = Q(X along M)^T Q(dY along M), dX = Q(dY along N) Q(W along N)^T,
    # each quantized from the unrounded tensor (wide-ranging X, so the block axis matters); with a
    # leading axis, M is (3, 70) flattened: K of the dW GEMM as the hardware lays it out
    k1, k2, k3, k4 = jax.random.split(jax.random.key(11), 4)
    x = jax.random.normal(k1, (*lead, 70, 40)) * jnp.exp(2 * jax.random.normal(k3, (*lead, 70, 40)))
    w = jax.random.normal(k2, (40, 50))
    c = jax.random.normal(k4, (*lead, 70, 50)) * jnp.exp(jax.random.normal(k3, (*lead, 70, 50)))
    f = emulate(lambda p, x: x @ p["w"], "mxfp8_ocp")  # E5M2 gradients, OCP's scale rule
    dx, dw = jax.grad(lambda x, w: jnp.sum(f({"w": w}, x) * c), argnums=(0, 1))(x, w)
    x2, c2 = x.reshape(-1, 40), c.reshape(-1, 50)
    want_dw = _bf16(_mx(x2, "mxfp8_e4m3", 0).T @ _mx(c2, "mxfp8_e5m2", 0))
    want_dx = _bf16(_mx(c2, "mxfp8_e5m2", 1) @ _mx(w, "mxfp8_e4m3", 1).T).reshape(x.shape)  # grad_out bf16
    # up to the fp32 accumulation order: one unit in the last place of the output format
    np.testing.assert_allclose(dw, want_dw, rtol=2**-7, atol=0)
    np.testing.assert_allclose(dx, want_dx, rtol=2**-7, atol=0)
    assert np.mean(np.asarray(dx) == want_dx) > 0.99 and np.mean(np.asarray(dw) == want_dw) > 0.99
    # reusing the forward roundings (X blocked along K, dY along N) gives another dW
    reused = _bf16(_mx(x2, "mxfp8_e4m3", 1).T @ _mx(c2, "mxfp8_e5m2", 1))
    assert np.max(np.abs(reused - want_dw) / np.abs(want_dw)) > 0.05


def test_mx_gradients_do_not_depend_on_how_the_gemm_is_written():
    # x @ W and (W^T x^T)^T (the weight on the left, as Equinox's Linear) are the same GEMM: the
    # same blocks in every GEMM, forward and backward, so the same gradients up to the fp32
    # accumulation order
    k1, k2, k3 = jax.random.split(jax.random.key(12), 3)
    x = jax.random.normal(k1, (70, 40)) * jnp.exp(2 * jax.random.normal(k3, (70, 40)))
    w = jax.random.normal(k2, (40, 50))
    c = jax.random.normal(k3, (70, 50)) * jnp.exp(jax.random.normal(k1, (70, 50)))
    right = emulate(lambda p, x: x @ p["w"], "mxfp8")
    left = emulate(lambda p, x: (p["w"].T @ x.T).T, "mxfp8")

    def grads(f):
        return jax.grad(lambda x, w: jnp.sum(f({"w": w}, x) * c), argnums=(0, 1))(x, w)

    for a, b in zip(grads(right), grads(left), strict=True):
        np.testing.assert_allclose(a, b, rtol=2**-7, atol=0)
        assert np.mean(np.asarray(a) == np.asarray(b)) > 0.99


def test_blocks_run_along_several_contraction_axes_flattened():
    # x (4, 8, 16) . w (8, 16, 5) over both K axes, listed out of order: blocks of 32 run along
    # K = (16, 8) flattened in dimension-number order, the same pairing for both operands
    x = jax.random.normal(jax.random.key(3), (4, 8, 16)) * jnp.exp(2 * jax.random.normal(jax.random.key(4), (4, 8, 16)))
    w = jax.random.normal(jax.random.key(5), (8, 16, 5))
    dn = (((2, 1), (1, 0)), ((), ()))
    got = emulate(lambda w, x: jax.lax.dot_general(x, w, dn), "mxfp8_ocp")(w, x)
    xk = _mx(jnp.transpose(x, (0, 2, 1)).reshape(4, 128), "mxfp8_e4m3", 1)
    wk = _mx(jnp.transpose(w, (1, 0, 2)).reshape(128, 5), "mxfp8_e4m3", 0)
    np.testing.assert_allclose(got, _bf16(xk @ wk), rtol=2**-7, atol=0)
    blocked_last = _mx(x, "mxfp8_e4m3", 2)  # blocks along one axis only: another product
    assert not np.allclose(_bf16(jnp.transpose(blocked_last, (0, 2, 1)).reshape(4, 128) @ wk), got, rtol=2**-7)


def test_wang2018_chunked_fp16_accumulation_beats_sequential_fp16():
    # a long dot product of ones: sequential fp16 accumulation stalls at 2048 (2048 + 1 rounds back
    # to 2048); chunks of 64 summed separately reach the exact 4096
    k = 4096
    x, w = jnp.ones((1, k)), jnp.ones((k, 1))
    chunk = load_recipe("fp8_wang2018")
    seq = dataclasses.replace(chunk, mac_order="sequential")
    got_chunk = float(emulate(lambda w, x: x @ w, chunk)(w, x)[0, 0])
    got_seq = float(emulate(lambda w, x: x @ w, seq)(w, x)[0, 0])
    assert got_seq == 2048.0 and got_chunk == 4096.0
    # random positive terms: chunked is closer to the exact sum than sequential
    v = jnp.asarray(sim.quantize(jax.random.uniform(jax.random.key(2), (1, k), minval=0.5, maxval=1.5), "fp8_e5m2"))
    exact = float(jnp.sum(v.astype(jnp.float32)))
    e_chunk = abs(float(emulate(lambda w, x: x @ w, chunk)(w, v)[0, 0]) - exact)
    e_seq = abs(float(emulate(lambda w, x: x @ w, seq)(w, v)[0, 0]) - exact)
    assert e_chunk < 0.1 * e_seq and e_seq > 100


def test_bit_exact_mac_order_on_batched_dot_general_and_its_backward():
    pol = dataclasses.replace(load_recipe("fp8_wang2018"), mac_order="sequential")
    a = sim.quantize(jax.random.normal(jax.random.key(0), (3, 5, 70)), "fp8_e5m2")
    b = sim.quantize(jax.random.normal(jax.random.key(1), (3, 70, 4)), "fp8_e5m2")
    got = emulate(lambda b, a: jnp.einsum("bmk,bkn->bmn", a, b), pol)(b, a)
    mac = sim.MacSpec(a_fmt="fp32", acc="fp16", order="sequential")
    want = jnp.stack([sim.matmul(a[i], b[i], mac) for i in range(3)])
    assert np.array_equal(got, want)
    g = jax.grad(lambda b: jnp.sum(emulate(lambda b, a: jnp.einsum("bmk,bkn->bmn", a, b), pol)(b, a)))(b)
    assert g.shape == b.shape and np.all(np.isfinite(g))


def test_tensorcore_fp16_runs_the_v100_mac():
    a = jax.random.normal(jax.random.key(0), (4, 64))
    w = jax.random.normal(jax.random.key(1), (64, 3))
    got = emulate(lambda w, a: a @ w, "tensorcore_fp16")(w, a)
    want = sim.quantize(sim.matmul(a, w, "v100"), "fp16")
    assert np.array_equal(got, want)
    fast = sim.quantize(jnp.dot(sim.quantize(a, "fp16"), sim.quantize(w, "fp16"),
                                precision=jax.lax.Precision.HIGHEST), "fp16")
    assert np.max(np.abs(got - fast)) < 0.05  # close to, but computed differently from, fp32 sums


def test_ptq_per_channel_beats_per_tensor_on_uneven_channels():
    k1, k2 = jax.random.split(jax.random.key(7))
    w = jax.random.normal(k1, (32, 8)) * (10.0 ** jnp.linspace(-3, 1, 8))[None, :]  # ranges 1e-3 .. 10
    params = {"w": w}
    apply = lambda p, x: x @ p["w"]  # noqa: E731
    batches = [jax.random.normal(jax.random.fold_in(k2, i), (16, 32)) for i in range(4)]
    x = batches[0]
    ref = apply(params, x)

    def err(name):
        pol = calibrate(apply, params, batches, name)
        assert pol.static_scales and pol.static_scales[0][1][0] > 0  # an activation scale per site
        y = emulate(apply, pol)(params, x)
        assert np.array_equal(y, emulate(apply, pol)(quantize_params(params, pol), x))
        rel = jnp.abs(y - ref) / jnp.max(jnp.abs(ref), axis=0, keepdims=True)
        return float(jnp.max(rel[:, :4]))  # the small-range channels

    e_channel, e_tensor = err("int8_ptq_channel"), err("int8_ptq_tensor")
    assert e_channel < 0.05 and e_tensor > 0.5 and e_channel < 0.1 * e_tensor


def test_new_recipe_fields_are_checked_all_at_once():
    from asicsim._src.emulate import RecipeError

    bad = {"roles": {"weight": {"format": "int8", "scaling": "statc"}, "act": "int8", "acc": "fp32"},
           "mac": {"order": "chunky:3", "spec": "v200", "colour": 1}, "calibration": {"batches": 0}}
    with pytest.raises(RecipeError) as err:
        load_recipe(bad)
    text = str(err.value)
    for bit in ("roles.weight.scaling", "mac.order", "mac.spec", "mac.colour", "calibration.batches"):
        assert bit in text, bit
    ok = load_recipe({"roles": {"weight": "fp16", "act": "fp16", "acc": "fp16"}, "mac": {"order": "chunk:8"}})
    assert ok.mac_spec().order == "chunk:8" and ok.mac_spec().spec("acc").name == "float16"
    assert load_recipe("tensorcore_fp16").mac_spec().order == "tensorcore:4"
    assert load_recipe("fp32").mac_spec() is None


def test_delayed_scaling_history_settings_must_agree_and_apply_to_delayed_roles_only():
    from asicsim._src.emulate import RecipeError

    delayed = {"format": "fp8_e4m3", "scaling": "delayed"}
    bad = {"roles": {"weight": {**delayed, "amax_history": 4}, "act": {**delayed, "amax_history": 16},
                     "acc": "fp32", "grad": {"format": "bf16", "amax_history": 8}}}
    with pytest.raises(RecipeError) as err:
        load_recipe(bad)
    problems = {field for field, _, _ in err.value.problems}
    assert problems == {"roles.weight.amax_history", "roles.act.amax_history", "roles.grad.amax_history"}
    ok = load_recipe({"roles": {"weight": {**delayed, "amax_history": 4}, "act": {**delayed, "amax_history": 4},
                                "acc": "fp32"}})
    assert ok.role("act").amax_history == 4
    with pytest.raises(RecipeError) as err:
        load_recipe({"roles": {"weight": {**delayed, "amax_compute": "mean"}, "act": delayed, "acc": "fp32"}})
    assert err.value.problems == [("roles.weight.amax_compute", "mean", "max | most_recent")]
    with pytest.raises(RecipeError) as err:
        load_recipe({"roles": {"weight": {**delayed, "amax_compute": "most_recent"}, "act": delayed, "acc": "fp32"}})
    assert {f for f, _, _ in err.value.problems} == {"roles.weight.amax_compute", "roles.act.amax_compute"}


def test_first_and_last_layer_overrides_follow_the_gemm_sites():
    from asicsim._src.emulate import op_trace

    p = {f"w{i}": jnp.full((8, 8), 0.05) for i in range(4)}

    def net(p, x):
        h = x @ p["w0"]

        def body(c, _):
            return jnp.tanh(c @ p["w1"]) @ p["w2"], None

        h, _ = jax.lax.scan(body, h, None, length=3)
        return h @ p["w3"]

    df = op_trace(net, "fp8_wang2018", p, jnp.ones((2, 8)))
    assert list(df.format_rhs) == ["float16", "float8_e5m2", "float8_e5m2", "float16"]
    assert list(df.format_lhs) == ["float16", "float8_e5m2", "float8_e5m2", "float16"]
    x = jnp.full((1, 8), 1.1)  # 1.1 is 1.0996... in fp16, 1.0 in E5M2
    y = emulate(net, "fp8_wang2018")(p, x)
    y_plain = emulate(net, dataclasses.replace(load_recipe("fp8_wang2018"), first_last=()))(p, x)
    assert not np.array_equal(y, y_plain)


def test_stochastic_rounding_in_the_first_and_last_layer_only_takes_the_key():
    # the policy said "not stochastic" (roles only), so a key given was dropped and the first GEMM
    # asked for one
    pol = load_recipe({"roles": {"weight": "fp16", "act": "fp16", "acc": "fp32"},
                       "first_last": {"act": {"format": "q7.8", "rounding": "sr"}}})
    assert pol.stochastic
    f = emulate(lambda w, x: (x @ w) @ w, pol)
    w, x = jnp.eye(4), jnp.full((3, 4), 1 / 3)
    outs = {float(f(w, x, asicsim_key=jax.random.key(k))[0, 0]) for k in range(8)}
    assert outs <= {85 / 256, 86 / 256} and len(outs) == 2


def test_calibration_under_stochastic_rounding_needs_no_key():
    pol = load_recipe({"roles": {"weight": {"format": "int8", "scaling": "tensor"}, "acc": "fp32",
                                 "act": {"format": "int8", "scaling": "static", "rounding": "sr"}}})
    apply = lambda p, x: x @ p  # noqa: E731
    batches = [jnp.full((2, 3), v) for v in (1.0, -4.0)]
    cal = calibrate(apply, jnp.ones((3, 2)), batches, pol)
    # the largest |act| over the batches; the weight scales by its own amax (tensor): no static scale
    (site, (lhs, rhs, _)), = cal.static_scales
    assert (site, lhs, rhs) == (0, 4.0, 0.0)
