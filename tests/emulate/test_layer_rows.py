"""Rows per layer (issue 20 items 4 and 5): a scan over stacked layers numbers its GEMMs as if
unrolled, so delayed scaling keeps an amax history per layer, static scales are per layer and
``[first_last]`` means the first and last layer. The oracle is the same model written as a Python
loop over the layers (no scan): every figure must agree bit for bit."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from asicsim._src.emulate import emulate, make_train_step
from asicsim._src.emulate.ptq import calibrate
from asicsim._src.emulate.site_rows import count_rows

L, D = 4, 8
SCALES = np.array([1e-3, 1e2, 1e-3, 1e2], np.float32)  # layers of very different magnitudes


def stacked_params():
    w = jax.random.normal(jax.random.key(0), (L, D, D)) * (SCALES[:, None, None] / np.sqrt(D))
    return {"w": w, "b": jnp.full((L, D), 0.01), "out": jax.random.normal(jax.random.key(3), (D, 2))}


X = jax.random.normal(jax.random.key(1), (16, D))


def scanned(p, x, reverse=False):
    def body(h, wb):
        w, b = wb
        return jnp.tanh(h @ w + b[None]), jnp.sum(h)

    h, _ = jax.lax.scan(body, x, (p["w"], p["b"]), reverse=reverse)
    return jnp.mean((h @ p["out"]) ** 2)


def unrolled(p, x, reverse=False):
    h = x
    for i in (reversed(range(L)) if reverse else range(L)):
        h = jnp.tanh(h @ p["w"][i] + p["b"][i][None])
    return jnp.mean((h @ p["out"]) ** 2)


def losses(loss_fn, params, policy="fp8_hybrid", steps=4, lr=1e-3):
    init, step = make_train_step(loss_fn, policy, optax.sgd(lr))
    state, step = init(params, 0), jax.jit(step)
    out = []
    for _ in range(steps):
        state, m = step(state, X)
        out.append(float(m["loss"]))
    return out, state


def assert_same_gemms(p1, p2, h1, h2):
    """GEMM weights and the forward amax bit-identical; the bias and the gradient amax come from
    fp32 elementwise backward code that XLA compiles differently in a loop body and unrolled
    (plain JAX's own scan and loop gradients differ by up to 1.5e-5 here), within 2 ulp."""
    for k in ("w", "out"):
        np.testing.assert_array_equal(p1[k], p2[k])
    np.testing.assert_allclose(p1["b"], p2["b"], rtol=2.5e-7, atol=0)
    np.testing.assert_array_equal(h1[..., :2], h2[..., :2])
    np.testing.assert_allclose(h1[..., 2], h2[..., 2], rtol=2.5e-7, atol=0)


def test_stacked_layers_train_like_the_unrolled_model_under_delayed_scaling():
    # one amax row shared by the 4 layers scaled everything by the 1e2 layers' amax: the 1e-3
    # layers flushed to zero in E4M3 from step 2 (the old code: 1.5e-4 then 1.6e-2, 0.128, ...)
    p = stacked_params()
    got, s_scan = losses(scanned, p)
    want, s_loop = losses(unrolled, p)
    assert got == want
    assert_same_gemms(s_scan.params, s_loop.params, s_scan.amax_history, s_loop.amax_history)
    rhs = np.asarray(s_scan.amax_history[:L, 3, 1])  # step 1's |w| per layer, in execution order
    np.testing.assert_allclose(rhs, np.abs(np.asarray(p["w"])).max(axis=(1, 2)), rtol=1e-6)


def test_a_reverse_stacked_scan_numbers_its_layers_in_execution_order():
    p = stacked_params()
    f_scan, f_loop = (lambda q, x: scanned(q, x, True)), (lambda q, x: unrolled(q, x, True))
    seen = [jax.grad(lambda m, f=f: emulate(f, "fp8_hybrid")(p, X, asicsim_amax=m))(jnp.zeros((8, 3)))
            for f in (f_scan, f_loop)]
    np.testing.assert_array_equal(seen[0][:, :2], seen[1][:, :2])
    np.testing.assert_allclose(seen[0][:, 2], seen[1][:, 2], rtol=2.5e-7, atol=0)
    assert float(seen[0][0, 1]) == float(jnp.max(jnp.abs(p["w"][L - 1])))  # row 0: the last layer, run first


def test_row_count_multiplies_nested_layer_scans_and_keeps_one_row_for_time_loops():
    def nested(p, x, loop=True):
        def outer(h, w2):  # w2: (3, D, D), a group of 3 layers
            return jax.lax.scan(lambda g, w: (g @ w, None), h, w2)[0] @ p["shared"], None

        h = jax.lax.scan(outer, x, p["w"])[0]  # 2 groups x (3 layers + 1 shared) = 8 rows
        h = jax.lax.scan(lambda g, _: (g @ p["shared"], None), h, None, length=5)[0]  # time loop: 1
        if not loop:
            return h @ p["shared"]
        n = jnp.sum(x > -100).astype(jnp.int32)  # a traced trip count: a while loop
        return jax.lax.fori_loop(0, n, lambda i, g: g @ p["shared"], h)  # while: 1

    p = {"w": jnp.ones((2, 3, D, D)) * 0.1, "shared": jnp.eye(D)}
    closed = jax.make_jaxpr(nested)(p, X)
    leaves = len(jax.tree_util.tree_leaves(p))
    assert count_rows(closed.jaxpr, [1] * leaves + [0]) == 2 * (3 + 1) + 1 + 1
    assert count_rows(closed.jaxpr) == (1 + 1) + 1 + 1  # no weights known: every scan counted once
    with pytest.raises(ValueError, match=r"10 GEMM/convolution sites .* rows for 9"):
        emulate(nested, "fp8_hybrid")(p, X, asicsim_amax=jnp.zeros((9, 3)))
    # (no reverse mode through a while loop: the same rows with a GEMM in its place)
    f = emulate(lambda q, x: nested(q, x, loop=False), "fp8_hybrid")
    seen = jax.grad(lambda m: jnp.sum(f(p, X, asicsim_amax=m)))(jnp.zeros((10, 3)))
    assert (np.asarray(seen[:, :2]) > 0).all()  # every row saw its operands


class Block(nn.Module):
    @nn.compact
    def __call__(self, h, _):
        return jnp.tanh(nn.Dense(D, name="dense")(h)), None


class ScannedNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=L)
        h, _ = stack(name="layers")(x, None)
        return nn.Dense(2, name="head")(h)


class LoopNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = x
        for i in range(L):
            h, _ = Block(name=f"layers_{i}")(h, None)
        return nn.Dense(2, name="head")(h)


def test_flax_nn_scan_trains_like_the_unrolled_flax_model():
    v_scan = ScannedNet().init(jax.random.key(0), X)
    k = v_scan["params"]["layers"]["dense"]["kernel"]  # (L, D, D): rescale the layers unevenly
    v_scan["params"]["layers"]["dense"]["kernel"] = k * SCALES[:, None, None]
    layers = v_scan["params"]["layers"]["dense"]
    v_loop = {"params": {"head": v_scan["params"]["head"],
                         **{f"layers_{i}": {"dense": {"kernel": layers["kernel"][i], "bias": layers["bias"][i]}}
                            for i in range(L)}}}
    assert np.allclose(ScannedNet().apply(v_scan, X), LoopNet().apply(v_loop, X), atol=1e-6)
    got, _ = losses(lambda v, x: jnp.mean(ScannedNet().apply(v, x) ** 2), v_scan)
    want, _ = losses(lambda v, x: jnp.mean(LoopNet().apply(v, x) ** 2), v_loop)
    assert got == want


@pytest.mark.parametrize("reverse", [False, pytest.param(True, marks=pytest.mark.slow)])  # ~5 s each
def test_first_last_are_the_first_and_last_layer_of_a_stacked_scan(reverse):
    # fp8_wang2018 keeps the first and last layer in fp16: the scan body's one GEMM site was both,
    # so every layer ran in fp16 (old code); now layers 1..L-2 run in E5M2, bit-identical to the loop
    p = stacked_params()
    p["out"] = p["out"] * 0.5

    def last_in_scan(q, x, f):  # the scan holds the last row too: no GEMM after it
        return f({**q, "out": jnp.eye(D)}, x, reverse)

    for fn in (lambda q, x, f: f(q, x, reverse), last_in_scan):
        f_scan, f_loop = (lambda q, x, fn=fn: fn(q, x, scanned)), (lambda q, x, fn=fn: fn(q, x, unrolled))
        v1, g1 = jax.value_and_grad(emulate(f_scan, "fp8_wang2018"))(p, X)
        v2, g2 = jax.value_and_grad(emulate(f_loop, "fp8_wang2018"))(p, X)
        assert float(v1) == float(v2)
        assert_same_gemms(g1, g2, np.zeros((1, 3)), np.zeros((1, 3)))


def test_calibrated_static_scales_are_per_layer():
    p = stacked_params()
    apply_scan, apply_loop = (lambda q, x: scanned(q, x)), (lambda q, x: unrolled(q, x))
    batches = [X, 2 * X]
    cal_scan = calibrate(apply_scan, p, batches, "int8_ptq_tensor")
    cal_loop = calibrate(apply_loop, p, batches, "int8_ptq_tensor")
    assert cal_scan.static_scales == cal_loop.static_scales
    assert len(cal_scan.static_scales) == L + 1  # a row per layer and the head
    assert float(emulate(apply_scan, cal_scan)(p, X)) == float(emulate(apply_loop, cal_loop)(p, X))
