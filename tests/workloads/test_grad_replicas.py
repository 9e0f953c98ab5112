"""Data-parallel replicas whose gradients are each rounded before the float32 sum
(``train(..., replicas=R, grad_format=...)``, :mod:`asicsim._src.emulate.replicas`): the reduction
against an ml_dtypes oracle, a gradient that survives per-replica rounding but not the rounding
of the mean, what fp32 promises (R = 1 bit-identical; R > 1 equal up to float32 summation
order), a coarse format costing accuracy on digits, bad replica counts named."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.emulate.replicas import ReplicaError, Replicas
from asicsim._src.numerics.random import seed_words
from asicsim._src.workloads import train
from asicsim._src.workloads.grad_rounding import gradient_role, round_gradients

STEPS = 60
WORDS = seed_words(jax.random.key(3))


def _leaves(result):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(result.runs[0].params)]


def _run(**kw):
    return train("digits_mlp", "fp32", seeds=(0,), steps=STEPS, eval_every=STEPS, stats=False, keep_params=True, **kw)


@pytest.fixture(scope="module")
def plain():
    return _run()


def test_reduce_rounds_each_replica_then_the_sum():
    # oracle: ml_dtypes' round-to-nearest-even; two replicas, so the float32 sum has one order
    g = np.random.default_rng(0).standard_normal((2, 64, 33)).astype(np.float32) * 1e-3
    out = Replicas(2, gradient_role("bf16")).reduce({"w": jnp.asarray(g)}, WORDS)["w"]
    bf = ml_dtypes.bfloat16
    sent = g.astype(bf).astype(np.float32)
    want = (sent[0] + sent[1]).astype(bf).astype(np.float32) / np.float32(2)
    assert np.array_equal(np.asarray(out), want)
    # float32 on the wire: the plain mean of the replicas
    same = Replicas(2).reduce({"w": jnp.asarray(g)}, WORDS)["w"]
    assert np.array_equal(np.asarray(same), (g[0] + g[1]) / np.float32(2))


def test_a_small_gradient_survives_on_one_chip_but_not_in_the_mean():
    # e4m3's smallest subnormal is 2^-9: one chip's 0.6 x 2^-9 rounds up to 2^-9 and the mean of
    # (2^-9, 0) is 2^-10; rounding the mean gradient once (0.3 x 2^-9) flushes it to 0
    g = np.array([[0.6 * 2.0**-9], [0.0]], np.float32)
    out = Replicas(2, gradient_role("fp8_e4m3")).reduce({"w": jnp.asarray(g)}, WORDS)["w"]
    assert float(out[0]) == 2.0**-10
    tx = round_gradients(gradient_role("fp8_e4m3"))
    once, _ = tx.update({"w": jnp.asarray(g.mean(axis=0))}, tx.init(None))
    assert float(once["w"][0]) == 0.0


def test_stochastic_rounding_of_the_replicas_is_unbiased():
    # 1 + 2^-9 lies a quarter of the way from 1 to the next bf16 (1 + 2^-7): each replica sends
    # 1 or 1 + 2^-7 (a quarter up); the sum of 4 (4 + k 2^-7) is exact in bf16 up to 4 + 2^-5,
    # so the mean is 1 + k 2^-9, k ~ Binomial(4, 1/4): mean 1 + 2^-9 over the elements
    g = np.full((4, 8192), 1.0 + 2.0**-9, np.float32)
    out = np.asarray(Replicas(4, gradient_role("bf16", "sr")).reduce({"w": jnp.asarray(g)}, WORDS)["w"])
    k = (out - 1.0) / 2.0**-9
    assert set(np.unique(k)) <= {0.0, 1.0, 2.0, 3.0, 4.0}
    # E[k] = 1, sd of the mean = sqrt(4 x 3/16) / sqrt(8192) = 0.0096; bound 5 sd
    assert abs(k.mean() - 1.0) < 0.048


def test_fp32_with_one_replica_is_bit_identical_to_plain_training(plain):
    same = _run(replicas=1, grad_format="fp32")
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(plain), _leaves(same), strict=True))


def test_fp32_over_replicas_is_plain_training_up_to_summation_order(plain):
    # the mean of 4 replica means is not the mean over 32 in float32's order: not bit-identical,
    # but 60 SGD steps later the weights (|w| < 1) differ by float32 rounding (4.5e-8 measured)
    four = _run(replicas=4)
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(_leaves(plain), _leaves(four), strict=True)) < 1e-6
    assert four.settings["replicas"] == 4 and "grad_format" not in four.settings


@pytest.mark.slow
def test_a_coarse_format_costs_accuracy_on_digits():
    kw = dict(seeds=(0, 1), steps=300, eval_every=300, stats=False, replicas=4)
    base = train("digits_mlp", "fp32", **kw)
    coarse = train("digits_mlp", "fp32", **kw, grad_format="int8")
    sr = train("digits_mlp", "fp32", **kw, grad_format="int8", grad_rounding="sr")
    # int8 without a scale has a step of 1: with round-to-nearest every replica's gradient
    # (|g| << 0.5) rounds to 0 and nothing is learned (0.109, 0.067 measured); stochastic rounding
    # keeps it in expectation (0.947, 0.942; fp32 0.944, 0.936)
    assert base.mean > 0.85 and coarse.mean < base.mean - 0.3
    assert abs(sr.mean - base.mean) < 0.05


@pytest.mark.parametrize("replicas, words", [
    (0, ["replicas = 0", "integer >= 1"]),
    (5, ["replicas = 5", "batch = 32", "divisor of 32"]),
])
def test_bad_replicas_are_named(replicas, words):
    with pytest.raises(ReplicaError) as info:
        train("digits_mlp", "fp32", seeds=(0,), steps=1, stats=False, replicas=replicas)
    for w in words:
        assert w in str(info.value)


def test_aux_is_averaged_and_the_loss_is_the_replicas_mean():
    import optax

    from asicsim._src.emulate.training import make_train_step

    def loss(p, b):
        x, y = b
        h = x @ p["w"]
        return jnp.mean((h - y) ** 2), {"mu": jnp.mean(h, axis=0)}

    x = jnp.asarray(np.random.default_rng(1).standard_normal((8, 3)), jnp.float32)
    y = jnp.ones((8, 2), jnp.float32)
    w = {"w": jnp.asarray(np.random.default_rng(2).standard_normal((3, 2)), jnp.float32)}
    init, step = make_train_step(loss, "fp32", optax.sgd(0.1), has_aux=True, replicas=Replicas(2))
    _, m = jax.jit(step)(init(w, 0), (x, y))
    h = np.asarray(x @ w["w"])  # equal replicas: the mean of the two halves' means is the mean
    np.testing.assert_allclose(np.asarray(m["aux"]["mu"]), h.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(float(m["loss"]), float(np.mean((h - 1.0) ** 2)), rtol=1e-6)


def test_a_delayed_scaling_recipe_trains_over_replicas():
    # fp8_hybrid's amax history takes the largest amax any replica saw; it trains (40 steps:
    # 0.602 over 4 replicas, 0.607 on one batch, measured)
    r = train("digits_mlp", "fp8_hybrid", seeds=(0,), steps=40, eval_every=40, stats=False, replicas=4)
    assert not r.diverged and r.per_seed[0] > 0.4
