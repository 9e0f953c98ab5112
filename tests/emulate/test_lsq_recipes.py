"""Learned step sizes as a recipe role (``scaling = "lsq"``/``"lsq_channel"``): the emulated GEMMs
and ``make_train_step`` against a hand-written model that calls ``lsq_quantize`` itself (the
function-level API, checked against the paper's gradients in test_lsq.py), bit for bit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_lsq import ref_forward

from asicsim._src.emulate import (
    RecipeError,
    RoleSpec,
    emulate,
    load_recipe,
    lsq_init,
    lsq_quantize,
    make_train_step,
)
from asicsim._src.emulate.export import export_tensor
from asicsim._src.emulate.lsq_sites import InitialStepsWarning
from asicsim._src.emulate.transform import init_lsq_steps, round_role
from asicsim._src.workloads import train


def _recipe(weight="lsq", wf="int4", af="uint4", **extra):
    return load_recipe({"name": f"lsq_{weight}", "roles": {"weight": {"format": wf, "scaling": weight},
                                                          "act": {"format": af, "scaling": "lsq"}, "acc": "fp32"},
                        **extra})


def _digits(n=128):
    from sklearn.datasets import load_digits

    d = load_digits()
    return jnp.asarray(d.data[:n] / 16.0, jnp.float32), jnp.asarray(d.target[:n], jnp.int32)


def _params(hidden=16):
    k1, k2 = jax.random.split(jax.random.key(0))
    return {"w1": jax.random.normal(k1, (64, hidden)) * 0.125, "b1": jnp.zeros(hidden),
            "w2": jax.random.normal(k2, (hidden, 10)) * 0.125, "b2": jnp.zeros(10)}


def _mlp(p, x):
    return jax.nn.relu(x @ p["w1"] + p["b1"][None]) @ p["w2"] + p["b2"][None]


def _loss(p, batch):
    return optax.softmax_cross_entropy_with_integer_labels(_mlp(p, batch[0]), batch[1]).mean()


def _hand_loss(p, batch, wf="int4", af="uint4"):
    """The same MLP quantizing its own GEMM operands with lsq_quantize, steps in ``p["s"]`` in the
    order the emulated GEMMs meet them (first GEMM's act then weight, then the second's)."""
    x, y = batch
    s = p["s"]
    h = jax.nn.relu(lsq_quantize(x, s[0], af, batch_axes=0) @ lsq_quantize(p["w1"], s[1], wf) + p["b1"][None])
    logits = lsq_quantize(h, s[2], af, batch_axes=0) @ lsq_quantize(p["w2"], s[3], wf) + p["b2"][None]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


@pytest.mark.parametrize("weight", ["lsq", pytest.param("lsq_channel", marks=pytest.mark.slow)])  # ~10 s each
def test_training_equals_a_hand_written_lsq_model_bit_for_bit(weight):
    """make_train_step on an LSQ recipe (int4 weights, uint4 activations) against the model that
    calls lsq_quantize itself, trained by the same adam from the same initial steps: the same
    steps, weights and losses bit for bit; the steps are the paper's lsq_init of the first batch's
    operands and they move. On the old code the recipe was refused (no scaling 'lsq')."""
    batch = _digits()
    p0 = _params()
    tx = optax.adam(1e-2)
    init, step = make_train_step(_loss, _recipe(weight), tx)
    state = init(p0, 0, batch)
    steps0 = state.lsq[0]
    axis = 1 if weight == "lsq_channel" else None

    @jax.jit  # eagerly, op by op, exact division is slow
    def paper_init(p, x, s):
        # the second GEMM's activation: computed with the first GEMM's initial steps
        h = jax.nn.relu(lsq_quantize(x, s[0], "uint4") @ lsq_quantize(p["w1"], s[1], "int4") + p["b1"][None])
        return [lsq_init(x, "uint4"), lsq_init(p["w1"], "int4", axis=axis), lsq_init(h, "uint4"),
                lsq_init(p["w2"], "int4", axis=axis)]

    want = paper_init(p0, batch[0], steps0)
    for got, ref in zip(steps0, want, strict=True):  # a float32 mean: its last bit may differ under jit
        np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert [s.shape for s in steps0] == [(), (1, 16) if axis else (), (), (1, 10) if axis else ()]

    hand = {**p0, "s": list(steps0)}
    opt = tx.init(hand)

    @jax.jit
    def hand_step(p, o):
        loss, g = jax.value_and_grad(_hand_loss)(p, batch)
        upd, o = tx.update(g, o, p)
        return optax.apply_updates(p, upd), o, loss

    stepj = jax.jit(step)
    with jax.numpy_dtype_promotion("standard"):  # optax's adam bias correction mixes int and float
        for _ in range(3):
            state, metrics = stepj(state, batch)
            hand, opt, hand_loss = hand_step(hand, opt)
            assert np.array_equal(metrics["loss"], hand_loss)
    for got, ref in zip(state.lsq[0], hand["s"], strict=True):
        assert np.array_equal(got, ref)
    for k in p0:
        assert np.array_equal(state.params[k], hand[k]), k
    for s0, s3 in zip(steps0, state.lsq[0], strict=True):  # learned: every step moved
        assert np.all(np.asarray(s3) != np.asarray(s0))


@pytest.mark.slow  # 15-80 s: 200 steps
def test_lsq_recipe_trains_the_digits_mlp_from_scratch():
    """int4 weights (a step per output channel) and uint4 activations with learned steps, from
    random weights, 200 full-batch adam steps on 1400 digits: test accuracy above 0.95 (measured
    0.9824; test_lsq.py's fp32 MLP on the same split must pass 0.95 too), on the int4 grid."""
    x, y = _digits(1797)
    perm = np.random.default_rng(0).permutation(len(y))  # the split of test_lsq.py's digits test
    x, y = x[perm], y[perm]
    xtr, ytr, xte, yte = x[:1400], y[:1400], x[1400:], y[1400:]
    pol = _recipe("lsq_channel")
    init, step = make_train_step(_loss, pol, optax.adam(1e-2))
    state = init(_params(32), 0, (xtr, ytr))

    @jax.jit
    def run(state):
        return jax.lax.scan(lambda s, _: step(s, (xtr, ytr)), state, None, length=200)

    with jax.numpy_dtype_promotion("standard"):
        state, metrics = run(state)
    logits = jax.jit(emulate(_mlp, pol))(state.params, xte, asicsim_lsq=state.lsq[0])
    acc = float(np.mean(np.argmax(logits, -1) == yte))
    print(f"digits MLP, int4 lsq_channel weights / uint4 lsq activations: test accuracy {acc:.4f}, "
          f"loss {float(metrics['loss'][0]):.3f} -> {float(metrics['loss'][-1]):.3f}")
    assert acc > 0.95
    wq = np.asarray(lsq_quantize(state.params["w1"], state.lsq[0][1], "int4"))
    assert max(len(np.unique(col)) for col in wq.T) <= 16  # each column on its own int4 grid


def test_forward_is_the_int_grid_times_the_step():
    """A GEMM with an identity lhs returns its LSQ-rounded weight: round(clip(w/s)) * s on the
    int4 codes per output channel (test_lsq.ref_forward, numpy), the activation role fp32."""
    w = jnp.asarray(np.random.default_rng(1).normal(size=(8, 5)), jnp.float32)
    pol = load_recipe({"name": "w", "roles": {"weight": {"format": "int4", "scaling": "lsq_channel"},
                                              "act": "fp32", "acc": "fp32"}})
    eye = jnp.eye(8, dtype=jnp.float32)
    (s,) = init_lsq_steps(lambda w, x: x @ w, pol, w, eye)
    np.testing.assert_array_equal(s, lsq_init(w, "int4", axis=1))
    s = s * 1.3  # any positive step, not only the initial one
    got = jax.jit(emulate(lambda w, x: x @ w, pol))(w, eye, asicsim_lsq=[s])
    want, _, k = ref_forward(w, np.broadcast_to(s, w.shape), "int4")
    np.testing.assert_array_equal(got, want)
    assert k.min() >= -8 and k.max() <= 7 and len(np.unique(k)) > 4


def test_a_call_without_steps_warns_that_they_are_initial():
    """emulate without asicsim_lsq rounds with lsq_init of the call's own operands: said in a
    warning (a trained model evaluated so would silently lose its learned steps)."""
    with pytest.warns(InitialStepsWarning, match="2 step.s. are lsq_init of this call's operands"):
        jax.jit(emulate(lambda w, x: x @ w, _recipe()))(W, X)


def _layers(ws, x):  # a scan over stacked layers: a step per layer (lsq_sites)
    return jax.lax.scan(lambda h, w: (h @ w, None), x, ws)[0]


def _jit_dot(pol, steps):
    """x @ w emulated under jit (the checks run while tracing: no slow eager GEMM)."""
    return jax.jit(lambda w, x, s: emulate(lambda w, x: x @ w, pol)(w, x, asicsim_lsq=s))(W, X, steps)


W = jnp.ones((4, 4), jnp.float32)
X = jnp.ones((2, 4), jnp.float32)
BAD = [
    (lambda: RoleSpec("fp8_e4m3", scaling="lsq"), "an integer format without fraction bits"),
    (lambda: RoleSpec("q3.4", scaling="lsq"), "an integer format without fraction bits"),
    (lambda: RoleSpec("mxint8", scaling="lsq"), "an integer format without fraction bits"),
    (lambda: RoleSpec("int4", scaling="lsq", rounding="sr"), "rne with scaling = 'lsq'"),
    (lambda: RoleSpec("int4", scaling="lsq_channel", saturate=True), "LSQ clips to its codes"),
    (lambda: RoleSpec("int4", scaling="lsq", rotation=16), "learned scales are of the unrotated tensor"),
    (lambda: RoleSpec("int4", scaling="lsq", block_size=32), "only with scaling = 'block'"),
    (lambda: RoleSpec("int4", scaling="lsq", margin=1), "only with scaling = 'delayed' or 'static'"),
    (lambda: load_recipe({"roles": {"weight": "int8", "act": "int8", "acc": "fp32",
                                                           "grad": {"format": "int8", "scaling": "lsq"}}}),
     "roles.grad.scaling = 'lsq'"),
    (lambda: load_recipe({"roles": {"weight": "int8", "acc": "fp32",
                                                              "act": {"format": "int8", "scaling": "lsq_channel"}}}),
     "only on role weight"),
    (lambda: load_recipe({"roles": {"weight": "int8", "act": "int8", "acc": "fp32"},
                          "layers": [{"match": "w1", "roles": {"out": {"format": "int8", "scaling": "lsq"}}}]}),
     "only on a forward GEMM operand role"),
    (lambda: _recipe(tensor_core="h100"), "not with tensor_core"),
    (lambda: make_train_step(_loss, _recipe(), optax.sgd(0.1))[0](_params(), 0),
     "needs the first batch"),
    (lambda: _jit_dot(_recipe(), [jnp.float32(1)]),
     "has 1 step(s) but the function has more LSQ operands"),
    (lambda: _jit_dot(_recipe(), [jnp.float32(1)] * 3),
     "has 2 LSQ operand(s)"),
    (lambda: _jit_dot(_recipe(), [jnp.float32(1), jnp.ones(4)]),
     "asicsim_lsq[1] (the weight of a dot_general) has shape (4,); expected ()"),
    (lambda: _jit_dot(_recipe("lsq_channel"), [jnp.float32(1)] * 2),
     "expected (1, 4)"),
    (lambda: emulate(lambda w, x: x @ w, _recipe())(W, X, asicsim_lsq=[jnp.float32(-1), jnp.float32(1)]),
     "a step must be positive and finite"),
    (lambda: jax.jit(emulate(_layers, _recipe()))(jnp.ones((3, 4, 4)), X, asicsim_lsq=[jnp.float32(1)] * 2),
     "has shape (); expected (3,) (scaling = 'lsq', operand shape (2, 4), a step per layer of 1 layer scan(s))"),
    (lambda: init_lsq_steps(lambda w, x: x @ w, _recipe(), jnp.zeros((4, 4)), X), "nonzero finite value"),
    (lambda: round_role(W, RoleSpec("int4", scaling="lsq")), "rounds GEMM operands of an emulated function only"),
    (lambda: export_tensor(W, RoleSpec("int4", scaling="lsq_channel"), (0,)), "learned steps are training state"),
]


@pytest.mark.parametrize(("call", "fragment"), BAD)
def test_bad_inputs(call, fragment):
    with pytest.raises((RecipeError, ValueError)) as err:
        call()
    assert fragment in str(err.value)


@pytest.mark.slow  # 150 steps of digits_mlp: ~40 s on 2 busy cores
def test_workload_training_with_a_shipped_lsq_recipe():
    """asicsim._src.workloads.train (what asicsim train runs) with int4_lsq on digits_mlp: the steps
    start from the first batch, train with the weights, and the evaluation uses them (without
    them it would warn, an error under pytest's filterwarnings). Measured, seed 0, 150 steps:
    test accuracy 0.9053 (fp32 0.8914; 300 steps: int4_lsq 0.9526, int8_lsq 0.9443, fp32
    0.9443). On the old code the recipe was refused."""
    res = train("digits_mlp", "int4_lsq", seeds=(0,), steps=150, eval_every=150)
    run = res.runs[0]
    print(f"digits_mlp int4_lsq 150 steps: test accuracy {run.final:.4f}")
    assert run.final > 0.85 and not run.diverged
    assert set(run.numerics) == {"act:fc0/w", "weight:fc0/w", "act:out/w", "weight:out/w"}  # lsq_stats


def test_lsq_roles_round_trip_through_toml(tmp_path):
    """A recipe with learned-step roles is written as TOML and read back equal (recipe_toml)."""
    from asicsim._src.emulate.recipe_toml import recipe_toml

    pol = _recipe("lsq_channel")
    path = tmp_path / "lsq.toml"
    path.write_text(recipe_toml(pol))
    assert 'scaling = "lsq_channel"' in path.read_text()
    assert load_recipe(str(path)) == pol and pol.lsq and not load_recipe("fp32").lsq
