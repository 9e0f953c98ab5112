"""The gradient GEMMs' own roles (grad_dx, grad_dw, weight_dx, act_dw, act_dx): each gradient GEMM
reads its operands in its own formats (AQT's dlhs/drhs, microxcaling's ``*_bp`` formats), checked
against float64 GEMMs of ml_dtypes-rounded operands; recipes without them are unchanged."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.emulate import Policy, RecipeError, RoleSpec, emulate, load_recipe

BF16, E4M3, E5M2, F16 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float16


def q(v, dtype) -> np.ndarray:
    """``v`` (float32) rounded to ``dtype`` by ml_dtypes (round to nearest even), as float64."""
    return np.asarray(v, np.float32).astype(dtype).astype(np.float64)


def draw(seed: int, shape) -> np.ndarray:
    """Magnitudes in [0.5, 2) with random signs: every product of two operands of at most 8
    significant bits, and every partial sum of 8 of them, is a float32 (the GEMM is exact)."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def policy(**roles) -> Policy:
    base = {"weight": "bf16", "act": "bf16", "out": "fp32", "acc": "fp32", "grad": "fp16", "grad_out": "fp32",
            "wgrad": "fp32"}
    return load_recipe({"name": "bwd", "roles": {**base, **roles}})


SPLIT = policy(grad_dx="fp8_e4m3", grad_dw="fp8_e5m2", weight_dx="fp8_e5m2", act_dw="fp8_e4m3")
X, W, G = draw(0, (4, 8)), draw(1, (8, 6)), draw(2, (4, 6))


def vjp(pol, fn, *args, cot=G, **kw):
    y, back = jax.vjp(lambda *a: emulate(fn, pol, weights=None if fn is attention else 0)(*a, **kw), *args)
    return np.asarray(y), [np.asarray(g) for g in back(jnp.asarray(cot))]


def dense(w, x):
    return x @ w


def attention(q_, k_):
    return q_ @ k_.T


def test_each_gradient_gemm_reads_its_own_formats():
    y, (dw, dx) = vjp(SPLIT, dense, W, X)
    np.testing.assert_array_equal(y, q(X, BF16) @ q(W, BF16))  # forward: act and weight
    # dX = dY W^T: dY in grad_dx (E4M3), W in weight_dx (E5M2) from the *unrounded* weight
    np.testing.assert_array_equal(dx, q(G, E4M3) @ q(W, E5M2).T)
    # dW = X^T dY: X in act_dw (E4M3), dY in grad_dw (E5M2)
    np.testing.assert_array_equal(dw, q(X, E4M3).T @ q(G, E5M2))
    # the test tells the unrounded operand from the forward-rounded one, and grad from grad_dx
    assert not np.array_equal(q(W, E5M2), q(q(W, BF16), E5M2))
    assert not np.array_equal(dx, q(G, F16) @ q(W, BF16).T)


def test_weight_stored_out_in_and_both_gradients():
    # an (out, in) weight on the left (Equinox's Linear): roles follow the operand, not its side
    wt = np.ascontiguousarray(W.T)
    y, (dw, dx) = vjp(SPLIT, lambda w, x: (w @ x.T).T, wt, X)
    np.testing.assert_array_equal(y, q(X, BF16) @ q(W, BF16))
    np.testing.assert_array_equal(dx, q(G, E4M3) @ q(W, E5M2).T)
    np.testing.assert_array_equal(dw, (q(X, E4M3).T @ q(G, E5M2)).T)


def test_two_activations_use_act_dx_and_grad_dx():
    # attention scores: both gradient GEMMs are dX GEMMs (no weight): grad_dx, and act_dx for the
    # other operand; grad_dw and act_dw do not apply
    pol = policy(grad_dx="fp8_e4m3", grad_dw="fp32", act_dx="fp8_e5m2", act_dw="fp32")
    a, b, g = draw(3, (4, 8)), draw(4, (6, 8)), draw(5, (4, 6))
    _, (da, db) = vjp(pol, attention, a, b, cot=g)
    np.testing.assert_array_equal(da, q(g, E4M3) @ q(b, E5M2))
    np.testing.assert_array_equal(db, q(g, E4M3).T @ q(a, E5M2))


def test_absent_roles_keep_the_forward_rounded_operands():
    # only grad_dw set: dX reads grad (fp16) and the bf16 forward weight, as before
    _, (dw, dx) = vjp(policy(grad_dw="fp8_e5m2"), dense, W, X)
    np.testing.assert_array_equal(dx, q(G, F16) @ q(W, BF16).T)
    np.testing.assert_array_equal(dw, q(X, BF16).T @ q(G, E5M2))


@pytest.mark.parametrize("recipe", ["bf16", "fp8_hybrid", "mxfp8", "fixed16_sr"])
def test_roles_equal_to_their_fallbacks_change_no_bit(recipe):
    base = load_recipe(recipe)
    same = dict(base.roles)
    same.update(grad_dx=base["grad"], grad_dw=base["grad"], weight_dx=base["weight"], act_dw=base["act"],
                act_dx=base["act"], weight_dw=base["weight"])
    spelled = dataclasses.replace(base, roles=tuple(same.items()))
    x, w, w2 = jnp.asarray(draw(6, (4, 32))), jnp.asarray(draw(7, (32, 32))), jnp.asarray(draw(8, (32, 32)))

    def f(p, x):
        h = jnp.tanh(x @ p[0])
        return jnp.sum(((h @ h.T) @ h @ p[1]) ** 2)

    kw = {"asicsim_key": jax.random.key(1)} if base.stochastic else {}
    if base.delayed:
        kw["asicsim_amax"] = jnp.asarray([[3.0, 2.0, 4.0]] * 4)
    one = jax.grad(emulate(f, base), argnums=(0, 1))((w, w2), x, **kw)
    two = jax.grad(emulate(f, spelled), argnums=(0, 1))((w, w2), x, **kw)
    for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(two), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_delayed_backward_role_scales_by_its_tensors_amax_row():
    # weight_dx in E5M2 with delayed scaling reads the weight's amax row (rhs: column 1), scaled
    # to E5M2's max as Transformer Engine scales each format: sf = 57344 / amax
    d = {"format": "fp8_e4m3", "scaling": "delayed"}
    pol = policy(weight=d, act=d, grad={**d, "format": "fp8_e5m2"}, weight_dx={**d, "format": "fp8_e5m2"})
    amax = jnp.asarray([[2.0, 8.0, 4.0]])
    _, (_, dx) = vjp(pol, dense, W, X, asicsim_amax=amax)

    def scaled(v, fmax, est, dtype):
        sf = np.float32(fmax) / np.float32(est)
        return (np.float32(v) * sf).astype(dtype).astype(np.float32) * (np.float32(1) / sf)

    gq, wq = scaled(G, 57344, 4.0, E5M2).astype(np.float64), scaled(W, 57344, 8.0, E5M2).astype(np.float64)
    np.testing.assert_allclose(dx, gq @ wq.T, rtol=1e-6)
    fwd = scaled(W, 448, 8.0, E4M3).astype(np.float64)  # the forward-rounded weight: not what dX reads
    assert np.abs(dx - gq @ fwd.T).max() > 1e-3


def test_block_scaled_backward_roles_round_along_the_gradient_gemm():
    # MX backward roles on a forward bf16 GEMM: dX's operands blocked along dX's contraction (N)
    pol = policy(grad_dx="mxfp8_e5m2", weight_dx="mxfp8_e4m3")
    w, x, g = (jax.random.normal(jax.random.key(i), s) for i, s in enumerate([(8, 64), (4, 8), (4, 64)]))
    _, (_, dx) = vjp(pol, dense, w, x, cot=g)
    from asicsim._src.numerics import quantize

    gq = np.asarray(quantize(g, "mxfp8_e5m2", "rne", axis=-1), np.float64)
    wq = np.asarray(quantize(w, "mxfp8_e4m3", "rne", axis=-1), np.float64)
    np.testing.assert_allclose(dx, gq @ wq.T, rtol=2e-6, atol=1e-6)


def test_bad_backward_roles_say_what_is_allowed():
    with pytest.raises(RecipeError, match=r"roles\.grad_dz.*a role from .*grad_dx"):
        policy(grad_dz="bf16")
    with pytest.raises(RecipeError, match=r"roles\.weight_dx\.format"):
        policy(weight_dx="bf17")
    with pytest.raises(RecipeError, match="a role from"):
        Policy("p", (("weight", RoleSpec("bf16")), ("act", RoleSpec("bf16")), ("acc", RoleSpec("fp32")),
                     ("act_dww", RoleSpec("bf16"))))
    # the delayed roles share one history per GEMM site: a backward role must agree
    d = {"format": "fp8_e4m3", "scaling": "delayed"}
    with pytest.raises(RecipeError, match=r"roles\.act_dw\.amax_history"):
        policy(weight=d, act_dw={**d, "amax_history": 4})
