"""Issue 20 items 3, 7 and 8: what a user's model carries in and out of an emulated function.

- An NNX module passed directly keeps its in-place updates (BatchNorm statistics, Dropout's RNG
  count); under the fp32 recipe (the user's own ops) they are bit-identical to a plain call.
- Arrays a function closes over are weights (role ``weight``), not activations.
- ``make_train_step`` keeps bf16 parameters bf16 and returns ``loss_fn``'s aux (``has_aux``); a
  loss_fn that returns something else than ``has_aux`` says (a pair, a scalar) is a clear
  TypeError (issue 29 item 16).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest

from asicsim._src.emulate import Policy, RoleSpec, emulate, make_train_step

nnx = __import__("flax.nnx", fromlist=["nnx"])
POLICY = Policy(name="weight_bf16_act_fp16", roles=(
    ("weight", RoleSpec("bf16")), ("act", RoleSpec("fp16")), ("acc", RoleSpec("fp32"))))


class Net(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(4, 3, rngs=rngs)
        self.bn = nnx.BatchNorm(3, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
        return self.drop(self.bn(self.lin(x)))


def _bits(x):
    return np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)


def _state(m):
    return jax.tree_util.tree_leaves(nnx.state(m))


def test_nnx_module_keeps_batchnorm_statistics_and_rng_counts():
    x = jnp.arange(20.0).reshape(5, 4) / 7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        plain, emulated = Net(nnx.Rngs(0, dropout=1)), Net(nnx.Rngs(0, dropout=1))
        # both in nnx.jit: one program each (eager dispatch may differ from it in the last bit)
        y_plain = nnx.jit(lambda m, x: m(x))(plain, x)
        y_emul = nnx.jit(lambda m, x: emulate(lambda m, x: m(x), "fp32")(m, x))(emulated, x)
        np.testing.assert_array_equal(np.asarray(y_emul), np.asarray(y_plain))
        for a, b in zip(_state(emulated), _state(plain), strict=True):  # old code: stats stayed 0
            np.testing.assert_array_equal(_bits(a), _bits(b))
        low = Net(nnx.Rngs(0, dropout=1))
        emulate(lambda m, x: m(x), "bf16")(low, x)
        assert np.any(np.asarray(low.bn.mean.value) != 0)


def test_closed_over_arrays_are_weights():
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=(8, 4)).astype(np.float32))
    x = jnp.asarray(rng.normal(size=(2, 8)).astype(np.float32))
    got = emulate(lambda x: x @ w, POLICY, weights=None)(x)
    xr = np.asarray(x).astype(np.float16).astype(np.float64)
    wr = np.asarray(w).astype(ml_dtypes.bfloat16).astype(np.float64)
    # float32 accumulation of 8 products of bf16 x fp16 values (19 bits each): within 2**-20
    np.testing.assert_allclose(np.asarray(got), xr @ wr, rtol=2**-20, atol=0)
    swapped = np.asarray(x).astype(ml_dtypes.bfloat16).astype(np.float64) @ np.asarray(w).astype(np.float16)
    assert np.abs(np.asarray(got) - swapped).max() > 1e-4  # roles swapped (the old code) is far off


def _loss(params, batch):
    x, y = (v.astype(params["w1"].dtype) for v in batch)
    logits = jnp.tanh(x @ params["w1"]) @ params["w2"]
    loss = jnp.mean((logits - y).astype(jnp.float32) ** 2)
    return loss, {"mean_logit": jnp.mean(logits)}


def _params(dtype):
    rng = np.random.default_rng(1)
    return {"w1": jnp.asarray(rng.normal(size=(6, 5)) / 3, dtype), "w2": jnp.asarray(rng.normal(size=(5, 2)) / 3, dtype)}


def _batch():
    rng = np.random.default_rng(2)
    return jnp.asarray(rng.normal(size=(8, 6)), jnp.float32), jnp.asarray(rng.normal(size=(8, 2)), jnp.float32)


def test_train_step_keeps_bf16_parameters_and_returns_aux():
    for recipe in ("bf16", "fp32", "fp16_mixed"):
        init, step = make_train_step(_loss, recipe, optax.sgd(0.1), has_aux=True)
        state = init(_params(jnp.bfloat16), 0)
        assert {x.dtype for x in jax.tree_util.tree_leaves(state.params)} == {jnp.dtype(jnp.bfloat16)}, recipe
        state, metrics = jax.jit(step)(state, _batch())
        assert {x.dtype for x in jax.tree_util.tree_leaves(state.params)} == {jnp.dtype(jnp.bfloat16)}, recipe
        assert set(metrics["aux"]) == {"mean_logit"} and np.isfinite(float(metrics["aux"]["mean_logit"]))
        if state.master is not None:  # the master copy stays float32
            assert {x.dtype for x in jax.tree_util.tree_leaves(state.master)} == {jnp.dtype(jnp.float32)}


def test_train_step_aux_matches_the_loss_functions_own():
    init, step = make_train_step(_loss, "fp32", optax.sgd(0.1), has_aux=True)
    state = init(_params(jnp.float32), 0)
    _, metrics = step(state, _batch())
    loss, aux = _loss(state.params, _batch())
    assert float(metrics["loss"]) == float(loss)
    assert float(metrics["aux"]["mean_logit"]) == float(aux["mean_logit"])


def _loss_alone(params, batch):
    return _loss(params, batch)[0]


def _loss_per_example(params, batch):
    x, y = batch
    return jnp.mean((jnp.tanh(x @ params["w1"]) @ params["w2"] - y) ** 2, axis=1)


def _loss_three(params, batch):
    loss, aux = _loss(params, batch)
    return loss, aux, 1.0


@pytest.mark.parametrize(("loss_fn", "has_aux", "message"), [
    # the old code: "'tuple' object has no attribute 'astype'"
    (_loss, False, r"_loss returned a tuple of 2 \(an array of shape \(\) and dtype float32, a dict\), "
                   r"not a scalar loss; .* pass make_train_step\(\.\.\., has_aux=True\)"),
    # the old code: "iteration over a 0-d array"
    (_loss_alone, True, r"has_aux=True\): _loss_alone must return a pair \(loss, aux\); it returned an "
                        r"array of shape \(\) .*pass has_aux=False"),
    (_loss_three, True, r"must return a pair \(loss, aux\); it returned a tuple of 3 .*\(loss, \(a, b\)\)"),
    (_loss_per_example, False, r"the loss that _loss_per_example returns must be a float scalar .* shape \(8,\)"),
    (lambda p, b: jnp.int32(3) + 0 * jnp.sum(b[0] @ p["w1"]).astype(jnp.int32), False,
     r"must be a float scalar .*dtype int32"),
])
def test_train_step_says_what_the_loss_function_must_return(loss_fn, has_aux, message):
    init, step = make_train_step(loss_fn, "bf16", optax.sgd(0.1), has_aux=has_aux)
    state = init(_params(jnp.float32), 0)
    with pytest.raises(TypeError, match=message):
        step(state, _batch())
