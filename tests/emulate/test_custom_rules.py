"""Issue 20 items 2 and 7: a user's ``jax.custom_vjp``/``custom_jvp`` GEMMs are emulated or refused
(before, mxfp4 output equalled fp32 there), ``jax.checkpoint`` stays a checkpoint, and the fp32
recipe runs the user's own GEMMs and convolutions (bit-identical, not an im2col rewrite).

The oracle of the custom_vjp test is the same layer written by hand: operands rounded with
ml_dtypes casts per role, products summed in float64 (checked exact in float32, so the float32
accumulation of any order gives the same bits)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.emulate import Policy, RoleSpec, emulate

# distinct formats per role, so a role mix-up changes the bits
POLICY = Policy(name="roles_apart", roles=(
    ("weight", RoleSpec("bf16")), ("act", RoleSpec("fp16")), ("out", RoleSpec("fp16")),
    ("acc", RoleSpec("fp32")), ("grad", RoleSpec("fp8_e5m2")), ("grad_out", RoleSpec("bf16")),
    ("wgrad", RoleSpec("fp16"))))


def _cast(x, dtype):
    return np.asarray(x, np.float32).astype(dtype).astype(np.float32)


def _exact_dot(a, b):
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    assert np.array_equal(ref, ref.astype(np.float32)), "test data must keep float32 sums exact"
    return ref.astype(np.float32)


@jax.custom_vjp
def layer(x, w):
    return jnp.tanh(x @ w)


def _layer_fwd(x, w):
    y = jnp.tanh(x @ w)
    return y, (x, w, y)


def _layer_bwd(res, g):
    x, w, y = res
    gy = g * (1 - y * y)
    return gy @ w.T, x.T @ gy


layer.defvjp(_layer_fwd, _layer_bwd)


def _data():
    rng = np.random.default_rng(0)
    x = rng.integers(-16, 17, size=(4, 16)).astype(np.float32) / 8  # few bits: exact sums
    w = rng.integers(-16, 17, size=(16, 8)).astype(np.float32) / 64
    g = rng.integers(-8, 9, size=(4, 8)).astype(np.float32) / 4
    return jnp.asarray(x), jnp.asarray(w), jnp.asarray(g)


def test_custom_vjp_forward_and_user_backward_are_emulated_per_role():
    x, w, g = _data()
    fn = emulate(lambda w, x: layer(x, w), POLICY)
    y, vjp = jax.vjp(fn, w, x)
    dw, dx = vjp(g)

    xr, wr = _cast(x, np.float16), _cast(w, ml_dtypes.bfloat16)
    y_ref = np.asarray(jnp.tanh(_cast(_exact_dot(xr, wr), np.float16)))  # the user's tanh, XLA's
    np.testing.assert_array_equal(np.asarray(y), y_ref)
    gy = np.asarray(jnp.asarray(g) * (1 - jnp.asarray(y_ref) ** 2))  # the user's elementwise rule, in float32
    gq = _cast(gy, ml_dtypes.float8_e5m2)
    # dX = dY W^T: grad x weight, written as grad_out (bf16); dW = X^T dY: act x grad, as wgrad (fp16)
    dx_ref = _cast(_exact_dot(gq, wr.T), ml_dtypes.bfloat16)
    dw_ref = _cast(_exact_dot(xr.T, gq), np.float16)
    np.testing.assert_array_equal(np.asarray(dx), dx_ref)
    np.testing.assert_array_equal(np.asarray(dw), dw_ref)
    # not fp32 any more: the old code bound the user's custom_vjp untouched
    dw32 = jax.grad(lambda w: jnp.vdot(layer(x, w), g))(w)
    assert not np.array_equal(np.asarray(dw), np.asarray(dw32))


def test_custom_vjp_under_jit_and_mx_differs_from_fp32():
    x, w, _ = _data()

    def loss(w, x):
        return jnp.sum(layer(x, w) ** 2)

    g32 = jax.grad(loss)(w, x)
    g4 = jax.jit(jax.grad(emulate(loss, "mxfp4")))(w, x)
    assert np.isfinite(np.asarray(g4)).all() and not np.array_equal(np.asarray(g4), np.asarray(g32))
    np.testing.assert_array_equal(np.asarray(jax.grad(emulate(loss, "fp32"))(w, x)), np.asarray(g32))


def test_custom_vjp_without_gemms_is_left_alone():
    @jax.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))
    x, w, _ = _data()
    fn = emulate(lambda w, x: jnp.sum(clip_grad(x @ w)), "bf16")
    dw = jax.grad(fn)(w, x)
    plain = jax.grad(lambda w, x: jnp.sum(jnp.clip(jnp.ones((4, 8)), -0.1, 0.1) * (x @ w)))(w, x)
    assert np.abs(np.asarray(dw)).max() <= np.abs(np.asarray(plain)).max() * 1.01


@jax.custom_jvp
def matmul_jvp(x, w):
    return x @ w


@matmul_jvp.defjvp
def _matmul_jvp_rule(primals, tangents):
    (x, w), (dx, dw) = primals, tangents
    return x @ w, dx @ w + x @ dw


def test_custom_jvp_gemm_forward_emulated_and_differentiation_refused():
    rng = np.random.default_rng(1)  # many bits: rounding shows
    x, w = (jnp.asarray(rng.normal(size=s).astype(np.float32)) for s in ((4, 16), (16, 8)))
    got = emulate(lambda w, x: matmul_jvp(x, w), POLICY)(w, x)
    want = emulate(lambda w, x: x @ w, POLICY)(w, x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert not np.array_equal(np.asarray(got), np.asarray(x @ w))
    with pytest.raises(NotImplementedError, match="custom_vjp"):
        jax.grad(lambda w: jnp.sum(emulate(lambda w, x: matmul_jvp(x, w), POLICY)(w, x)))(w)


def test_checkpoint_stays_a_checkpoint_with_the_same_numbers():
    x, w, _ = _data()

    def block(w, x):
        return jnp.tanh(x @ w) @ w.T

    def loss(f):
        return lambda w, x: jnp.sum(f(w, x) ** 2)

    remat = jax.checkpoint(block, policy=jax.checkpoint_policies.nothing_saveable)
    g_plain = jax.grad(emulate(loss(block), "bf16"))(w, x)
    fn = jax.grad(emulate(loss(remat), "bf16"))
    np.testing.assert_array_equal(np.asarray(fn(w, x)), np.asarray(g_plain))
    text = str(jax.make_jaxpr(fn)(w, x))
    assert "checkpoint" in text or "remat" in text  # inlined by the old code: neither appeared


def test_fp32_recipe_runs_the_users_own_convolution_and_gemm():
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.normal(size=(2, 9, 9, 3)).astype(np.float32))
    k = jnp.asarray(rng.normal(size=(3, 3, 3, 5)).astype(np.float32))
    d = jnp.asarray(rng.normal(size=(5, 4)).astype(np.float32))

    def model(params, x):
        k, d = params
        h = jax.lax.conv_general_dilated(x, k, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(jnp.tanh(jnp.mean(h, axis=(1, 2)) @ d) ** 2)

    fn = emulate(model, "fp32")
    # both jitted: one program each (eager dispatch and a jitted program may differ in the last
    # bit, with or without emulation)
    assert float(jax.jit(fn)((k, d), x)) == float(jax.jit(model)((k, d), x))
    for a, b in zip(jax.jit(jax.grad(fn))((k, d), x), jax.jit(jax.grad(model))((k, d), x), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    text = str(jax.make_jaxpr(fn)((k, d), x))
    assert "conv_general_dilated" in text  # the old code rewrote it as an im2col GEMM
