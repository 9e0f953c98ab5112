"""The ops outside the GEMMs in a format (roles vector, transcendental, reduction): every result
and every gradient at it on the format's grid (ml_dtypes), bit-identical to the same model
written by hand with a straight-through bf16 rounding after each op; recipes without the roles
unchanged."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import linen
from jax import lax

from asicsim._src.emulate import RecipeError, emulate, list_recipes, load_recipe, op_trace
from asicsim._src.emulate.vector_roles import vector_rounder

BF16 = ml_dtypes.bfloat16
HI = lax.Precision.HIGHEST
FP32_GEMMS = {"weight": "fp32", "act": "fp32", "out": "fp32", "acc": "fp32", "grad": "fp32", "wgrad": "fp32"}
VEC = load_recipe({"name": "vec", "roles": {**FP32_GEMMS, "vector": "bf16"}})


def on_grid(x, dtype=BF16) -> bool:
    x = np.asarray(x, np.float32)
    return bool(np.array_equal(x, x.astype(dtype).astype(np.float32)))


@jax.custom_vjp
def bf16(x):
    """The oracle's rounding: a cast to bfloat16 and back (XLA's convert rounds to nearest even),
    straight-through, the cotangent rounded the same way."""
    return x.astype(jnp.bfloat16).astype(jnp.float32)


bf16.defvjp(lambda x: (bf16(x), None), lambda _, g: (g.astype(jnp.bfloat16).astype(jnp.float32),))


def model(p, x, r=lambda v: v):
    """A pre-LN MLP block with a residual and a softmax head, in plain JAX. With ``r`` a rounding,
    the hand-written reference: ``r`` after every elementwise op and reduction, and once on each
    tensor an op reads that no op wrote (the input, a parameter before its broadcast, a GEMM
    result)."""
    x = r(x)
    mu = r(r(jnp.sum(x, -1, keepdims=True)) / 16.0)
    d = r(x - mu)
    var = r(r(jnp.sum(r(jnp.square(d)), -1, keepdims=True)) / 16.0)
    n = r(d * r(lax.rsqrt(r(var + 1e-5))))
    n = r(n * jnp.broadcast_to(r(p["g"]), n.shape))
    n = r(n + jnp.broadcast_to(r(p["b"]), n.shape))
    h = r(r(jnp.dot(n, p["w1"], precision=HI)) + jnp.broadcast_to(r(p["b1"]), (n.shape[0], 32)))
    h = r(jnp.tanh(h))
    z = r(r(jnp.dot(h, p["w2"], precision=HI)) + x)  # residual
    m = r(jnp.max(z, -1, keepdims=True))
    e = r(jnp.exp(r(z - lax.stop_gradient(m))))
    return r(e / r(jnp.sum(e, -1, keepdims=True))), n, h


def make(seed=0):
    k = jax.random.split(jax.random.key(seed), 5)
    p = {"g": 1 + 0.1 * jax.random.normal(k[0], (16,)), "b": 0.1 * jax.random.normal(k[1], (16,)),
         "w1": jax.random.normal(k[2], (16, 32)) * 0.3, "b1": jnp.full((32,), 0.01),
         "w2": jax.random.normal(k[3], (32, 16)) * 0.3}
    return p, jax.random.normal(k[4], (6, 16)) * 2 + 0.5


def test_every_result_and_the_input_gradient_are_bf16_and_match_the_hand_rounded_model():
    p, x = make()
    cot = jax.random.normal(jax.random.key(9), (6, 16))
    emu = emulate(model, VEC)
    outs = emu(p, x)
    for o in outs:
        assert on_grid(o)
    ref = model(p, x, bf16)
    for a, b in zip(outs, ref, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not on_grid(model(p, x)[0])  # the plain model is off the grid: the roles did it

    def loss(f):
        return lambda p, x: jnp.sum(f(p, x)[0] * cot)

    g = jax.grad(loss(emu), argnums=(0, 1))(p, x)
    g_ref = jax.grad(loss(lambda p, x: model(p, x, bf16)), argnums=(0, 1))(p, x)
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(g_ref), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert on_grid(g[1]) and not on_grid(jax.grad(loss(model), argnums=1)(p, x))
    for k in ("g", "b", "b1"):  # parameters read by vector ops: rounded at the source, as their gradients
        assert on_grid(g[0][k])


@pytest.mark.slow  # default run's time budget
def test_jax_softmax_and_a_flax_model_run_on_the_grid():
    class Block(linen.Module):
        @linen.compact
        def __call__(self, x):
            h = linen.Dense(32)(linen.LayerNorm()(x))
            # x is read by the layer norm and, sliced, by relu: rounded once, at its source
            return jax.nn.softmax(linen.Dense(8)(jax.nn.gelu(h)) + jax.nn.relu(x[..., :8]))

    x = jax.random.normal(jax.random.key(1), (4, 16))
    net = Block()
    p = net.init(jax.random.key(0), x)
    for recipe in (VEC, "mxfp8_bf16_vector"):
        f = emulate(net.apply, recipe)
        y = f(p, x)
        assert on_grid(y) and np.all(np.isfinite(y))
        np.testing.assert_allclose(np.asarray(y), np.asarray(net.apply(p, x)), atol=0.05)
        gx = jax.grad(lambda x, f=f: jnp.sum(f(p, x) * jnp.arange(8.0)[None]))(x)
        assert on_grid(gx) and np.all(np.isfinite(gx)) and np.any(gx != 0)


def test_narrow_roles_take_their_primitives_only():
    # transcendental in E5M2, reduction in fp16, no vector: tanh reads and writes E5M2, the sum
    # writes fp16, the add is left in float32
    pol = load_recipe({"name": "narrow", "roles": {**FP32_GEMMS, "transcendental": "fp8_e5m2",
                                                   "reduction": "fp16"}})
    x = jax.random.normal(jax.random.key(2), (5, 7))

    def q(v, dtype):
        return np.asarray(v, np.float32).astype(dtype).astype(np.float32)

    t, s = emulate(lambda x: (jnp.tanh(x) + 0.1, jnp.sum(x, -1)), pol)(x)
    want_t = q(jnp.tanh(q(x, ml_dtypes.float8_e5m2)), ml_dtypes.float8_e5m2) + np.float32(0.1)
    np.testing.assert_array_equal(np.asarray(t), want_t)
    np.testing.assert_array_equal(np.asarray(s), q(jnp.sum(q(x, np.float16), -1), np.float16))
    assert not on_grid(t, ml_dtypes.float8_e5m2)


def test_integers_and_data_movement_are_never_rounded():
    pol = load_recipe({"name": "v8", "roles": {**FP32_GEMMS, "vector": "fp8_e4m3"}})
    x = jax.random.normal(jax.random.key(3), (4, 6))
    n = jnp.arange(5, dtype=jnp.int32) * 1000 + 1

    def f(x, n):
        return x.T.reshape(-1)[::2], n * 3 + 7, jnp.argmax(x, -1), jnp.where(x > 0, x, x[::-1])

    got, want = emulate(f, pol)(x, n), f(x, n)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_stochastic_vector_rounding_needs_a_key_and_uses_it():
    pol = load_recipe({"name": "vsr", "roles": {**FP32_GEMMS, "vector": {"format": "bf16", "rounding": "sr"}}})
    x = jax.random.normal(jax.random.key(4), (64,))
    f = emulate(lambda x: x * 1.001 + 0.3, pol)
    a, b = f(x, asicsim_key=jax.random.key(1)), f(x, asicsim_key=jax.random.key(2))
    assert on_grid(a) and on_grid(b) and not np.array_equal(a, b)
    with pytest.raises(ValueError, match="pass a key"):
        f(x)


def test_recipes_without_vector_roles_are_unchanged():
    # their interpreter has no vector rounder, so their jaxprs are the ones of the old code path
    assert [r for r in list_recipes() if vector_rounder(load_recipe(r)) is not None] == ["mxfp8_bf16_vector"]
    p, x = make()

    def jaxpr(pol, vector=None):
        if vector is not None:
            pol = dataclasses.replace(pol, roles=(*pol.roles, ("vector", load_recipe(vector)["act"])))
        return str(jax.make_jaxpr(jax.grad(lambda p: jnp.sum(emulate(model, pol)(p, x)[0])))(p))

    for name in ("fp32", "bf16"):  # an fp32 vector role rounds nothing: the same jaxpr
        assert jaxpr(load_recipe(name)) == jaxpr(load_recipe(name), vector="fp32")
    assert jaxpr(load_recipe("bf16")) != jaxpr(load_recipe("bf16"), vector="bf16")


def test_op_trace_prices_vector_ops_in_their_role():
    p, x = make()
    tr = op_trace(model, "mxfp8_bf16_vector", p, x, elementwise=True)
    ew = tr[tr.kind == "elementwise"]
    assert len(ew) and set(ew.format_out) == {"bfloat16"} and set(ew.format_lhs) == {"bfloat16"}
    tr32 = op_trace(model, "fp32", p, x, elementwise=True)
    assert set(tr32[tr32.kind == "elementwise"].format_out) == {"float32"}


def test_bad_vector_roles_say_what_is_allowed():
    with pytest.raises(RecipeError, match=r"roles\.vector\.scaling.*no amax history"):
        load_recipe({"name": "x", "roles": {**FP32_GEMMS, "vector": {"format": "fp8_e4m3", "scaling": "delayed"}}})
    with pytest.raises(RecipeError, match=r"first_last\.transcendental.*a GEMM role"):
        load_recipe({"name": "x", "roles": FP32_GEMMS, "first_last": {"transcendental": "bf16"}})
    with pytest.raises(RecipeError, match=r"roles\.vectr.*a role from"):
        load_recipe({"name": "x", "roles": {**FP32_GEMMS, "vectr": "bf16"}})


def test_scan_while_cond_and_jit_run_with_vector_roles():
    def f(p, x):
        def body(c, _):
            return jnp.tanh(c @ p["w"] + 0.1), jnp.sum(c)

        h, ys = lax.scan(body, x, None, length=3)
        h = lax.fori_loop(0, x.shape[0], lambda i, c: c * 0.9 + 0.01, h)
        h = lax.cond(jnp.sum(h) > 0, lambda h: jnp.exp(-h), lambda h: h * 2.0, h)
        return jnp.sum(h * h) + jnp.sum(ys), h

    p = {"w": jax.random.normal(jax.random.key(0), (8, 8)) * 0.3}
    x = jax.random.normal(jax.random.key(1), (4, 8))
    (v, h), g = jax.jit(jax.value_and_grad(emulate(f, VEC), has_aux=True))(p, x)
    assert on_grid(h) and on_grid(v) and not on_grid(f(p, x)[1])
    np.testing.assert_allclose(float(v), float(f(p, x)[0]), rtol=0.02)
    assert np.all(np.isfinite(g["w"]))
