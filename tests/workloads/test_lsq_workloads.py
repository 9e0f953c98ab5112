"""Learned step sizes (LSQ recipes) in workload training: with pruning and with batch norm, each
against the same steps composed by hand (make_train_step, a numpy 2:4 mask, Ioffe & Szegedy's
running averages), and the LSQ numerics statistics (asicsim._src.workloads.lsq_stats) against numpy
on the operands the steps round (round half to even, clip to the integer codes: Esser et al. 2020,
Eqs. 1-2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from asicsim._src.emulate import load_recipe, lsq_quantize, make_train_step
from asicsim._src.workloads.lsq_stats import LsqObserver
from asicsim._src.workloads.prune_rules import PruneRule
from asicsim._src.workloads.pruning import with_pruning
from asicsim._src.workloads.speech_layers import BN_MOMENTUM, with_running_stats

POL = load_recipe({"name": "lsq4", "roles": {"weight": {"format": "int4", "scaling": "lsq"},
                                              "act": {"format": "uint4", "scaling": "lsq"}, "acc": "fp32"}})
QN = {"int4": 8, "uint4": 0, "int8": 128}
QP = {"int4": 7, "uint4": 15, "int8": 127}


def _data(n=32, d=8, k=8, seed=0):
    rng = np.random.default_rng(seed)
    params = {"w": jnp.asarray(rng.normal(size=(d, k)), jnp.float32), "b": jnp.zeros(k, jnp.float32)}
    x = jnp.asarray(rng.normal(size=(n, d)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(n, k)), jnp.float32)
    return params, (x, y)


def _lsq_loss(p, batch):
    return jnp.mean((batch[0] @ p["w"] + p["b"][None] - batch[1]) ** 2)


def _adam():
    tx = optax.adam(0.05)

    def update(u, s, p=None):
        with jax.numpy_dtype_promotion("standard"):  # optax mixes Python floats with int32 counts
            return tx.update(u, s, p)

    return optax.GradientTransformation(tx.init, update)


def _nm_mask_numpy(w, n=2, m=4):
    """Keep the n largest |w| of every m consecutive entries along axis 0 (the contraction axis)."""
    g = np.abs(w).T.reshape(w.shape[1], -1, m)
    rank = np.argsort(np.argsort(-g, axis=-1, kind="stable"), axis=-1, kind="stable")
    return (rank < n).reshape(w.shape[1], -1).T


def test_pruning_carries_the_learned_steps_as_by_hand():
    """with_pruning over make_train_step with int8_lsq (the workload runner's composition)
    against make_train_step alone with a numpy 2:4 mask applied after each step from step 2 on:
    weights, learned steps and losses equal bit for bit; the steps move and the pattern holds.
    On the old code init(params, key, batch) was not accepted (TypeError), and workload training
    refused the combination."""
    params, batch = _data()
    rules = [PruneRule("2:4", start=2, match="w")]
    init, step = make_train_step(_lsq_loss, "int8_lsq", _adam())
    p_init, p_step = with_pruning(init, step, rules)
    pruned, hand = p_init(params, 0, batch), init(params, 0, batch)
    assert pruned.lsq is pruned.train.lsq and pruned.lsq is not None
    steps0 = [np.asarray(s) for s in pruned.lsq[0]]
    p_step, step = jax.jit(p_step), jax.jit(step)
    keep = np.ones(params["w"].shape, bool)
    for t in range(1, 6):
        pruned, m1 = p_step(pruned, batch)
        hand, m2 = step(hand, batch)
        if t >= 2:
            keep &= _nm_mask_numpy(np.asarray(hand.params["w"]))
            hand = hand._replace(params={**hand.params, "w": jnp.where(keep, hand.params["w"], 0.0)})
        assert np.array_equal(m1["loss"], m2["loss"])
        np.testing.assert_array_equal(pruned.params["w"], hand.params["w"])
        for a, b in zip(pruned.lsq[0], hand.lsq[0], strict=True):
            np.testing.assert_array_equal(a, b)
    w = np.asarray(pruned.params["w"])
    assert ((w.T.reshape(8, 2, 4) != 0).sum(-1) == 2).all()
    assert all((np.asarray(a) != b).any() for a, b in zip(pruned.lsq[0], steps0, strict=True))


def _bn_loss(p, batch):
    """A linear layer, then a batch norm over the batch (statistics as aux), then least squares."""
    h = batch[0] @ p["w"]
    mean, var = jnp.mean(h, 0), jnp.var(h, 0)
    y = (h - mean[None]) * jax.lax.rsqrt(var + 1e-5)[None] * p["g"][None] + p["b"][None]
    return jnp.mean((y - batch[1]) ** 2), {"bn": (mean, var)}


def test_batch_norm_carries_the_learned_steps_and_running_statistics_as_by_hand():
    """with_running_stats over make_train_step(has_aux=True) with an LSQ recipe against
    make_train_step alone, the running averages kept by hand (r <- 0.99 r + 0.01 batch, numpy
    float64 against float32: rtol 1e-6): steps and weights bit for bit. On the old code the
    batch (for the steps' lsq_init) could not be passed through (TypeError)."""
    params, batch = _data(seed=1)
    params = {**params, "g": jnp.ones(8, jnp.float32)}
    first = {"bn": {"mean": jnp.zeros(8, jnp.float32), "var": jnp.ones(8, jnp.float32)}}
    init, step = make_train_step(_bn_loss, POL, _adam(), has_aux=True)
    n_init, n_step = with_running_stats(init, step, first)
    state, hand = n_init(params, 0, batch), init(params, 0, batch)
    assert state.lsq is state.train.lsq and len(state.lsq[0]) == 2
    n_step, step = jax.jit(n_step), jax.jit(step)
    mean, var = np.zeros(8), np.ones(8)
    for _ in range(3):
        state, _ = n_step(state, batch)
        hand, m = step(hand, batch)
        bm, bv = (np.asarray(a, np.float64) for a in m["aux"]["bn"])
        mean, var = BN_MOMENTUM * mean + (1 - BN_MOMENTUM) * bm, BN_MOMENTUM * var + (1 - BN_MOMENTUM) * bv
        for a, b in zip(state.lsq[0], hand.lsq[0], strict=True):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(state.params["w"], hand.params["w"])
    np.testing.assert_allclose(state.running["bn"]["mean"], mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(state.running["bn"]["var"], var, rtol=1e-6)


def _numpy_stats(x, s, fmt):
    """The statistics lsq_stats documents, in numpy: r = x / s in float32 (IEEE division is
    correctly rounded), codes = round half to even of r clipped to [-Qn, Qp]."""
    x = np.asarray(x, np.float32)
    r = x / np.float32(s)
    q = np.clip(np.rint(r), -QN[fmt], QP[fmt]).astype(np.float32) * np.float32(s)
    nz = x != 0
    return {"overflow": np.mean((r > QP[fmt]) | (r < -QN[fmt])), "zero": np.mean(~nz),
            "underflow": np.sum(nz & (q == 0)) / max(nz.sum(), 1),
            "rel_error": np.sqrt(np.sum((q.astype(np.float64) - x) ** 2) / np.sum(x.astype(np.float64) ** 2))}


def _mlp_loss(p, batch):
    h = jax.nn.relu(batch[0] @ p["w1"])
    return jnp.mean((h @ p["w2"] - batch[1]) ** 2)


def _rnn_loss(p, batch):  # a time scan: x (time, batch, features), the state from 0.5
    h0 = jnp.full((batch[0].shape[1], 8), 0.5, jnp.float32)
    h = jax.lax.scan(lambda h, x: (jnp.tanh(x @ p["w1"] + h @ p["w2"]), None), h0, batch[0])[0]
    return jnp.mean((h - batch[1]) ** 2)


def test_lsq_statistics_against_numpy_on_the_operands():
    """LsqObserver (what a workload's LSQ run reports) with steps chosen to saturate and underflow:
    per operand the clipped and underflowing fractions, zeros and relative error equal numpy's on
    the operands (the hidden activation from the hand model calling lsq_quantize: the emulated
    GEMM of on-grid operands is the same float32 product); a time scan's input operand is counted
    over all its iterations. On the old code an LSQ run had no statistics."""
    rng = np.random.default_rng(3)
    x = jnp.asarray(np.maximum(rng.normal(size=(16, 8)), 0), jnp.float32)  # half zeros, uint4 inputs
    p = {"w1": jnp.asarray(rng.normal(size=(8, 8)), jnp.float32), "w2": jnp.asarray(rng.normal(size=(8, 4)), jnp.float32)}
    y = jnp.zeros((16, 4), jnp.float32)
    steps = [jnp.float32(0.1), jnp.float32(0.2), jnp.float32(0.3), jnp.float32(0.5)]
    got = LsqObserver(POL, _mlp_loss)(p, (x, y), steps)
    assert list(got) == ["act:w1", "weight:w1", "act:w2", "weight:w2"]
    h = jax.nn.relu(lsq_quantize(x, steps[0], "uint4", batch_axes=0) @ lsq_quantize(p["w1"], steps[1], "int4"))
    want = [_numpy_stats(x, 0.1, "uint4"), _numpy_stats(p["w1"], 0.2, "int4"), _numpy_stats(h, 0.3, "uint4"),
            _numpy_stats(p["w2"], 0.5, "int4")]
    for (name, g), w, s in zip(got.items(), want, steps, strict=True):
        for k in ("overflow", "zero", "underflow"):
            assert g[k] == pytest.approx(w[k], abs=1e-12), (name, k)
        assert g["rel_error"] == pytest.approx(w["rel_error"], rel=1e-5), name
        assert g["step"] == g["step_min"] == g["step_max"] == float(s)
    assert got["act:w1"]["overflow"] > 0.05 and got["weight:w1"]["overflow"] > 0.1  # the steps do saturate

    xs = jnp.asarray(rng.normal(size=(5, 16, 8)), jnp.float32)  # 5 time steps
    rnn = LsqObserver(POL, _rnn_loss)(p | {"w2": p["w1"]}, (xs, jnp.zeros((16, 8))), [jnp.float32(0.1)] * 4)
    w = _numpy_stats(xs, 0.1, "uint4")  # every frame's operand: half negative, clipped to 0
    assert rnn["act:w1"]["overflow"] == pytest.approx(w["overflow"], abs=1e-7)
    assert rnn["act:w1"]["size"] == 16 * 8  # per iteration


def test_workload_training_with_lsq_and_pruning_reports_the_steps():
    """train (what asicsim train runs) with int8_lsq and a 2:4 rule on digits_mlp, 4 steps: no
    error, every weight half zero, and numerics per LSQ operand: the weights' zeros are the pruned
    half, each step the run's (inside its channel range), the curve keeps step/overflow/rel_error.
    On the old code the run was refused ("not yet supported ... pruning or batch norm")."""
    from asicsim._src.workloads import train
    from asicsim._src.workloads.cli import _numerics_lines

    run = train("digits_mlp", "int8_lsq", seeds=(0,), steps=4, eval_every=2,
                prune=[PruneRule("2:4", start=1)]).runs[0]
    assert run.sparsity == {"fc0/w": 0.5, "out/w": 0.5} and not run.diverged
    assert sorted(run.numerics) == ["act:fc0/w", "act:out/w", "weight:fc0/w", "weight:out/w"]
    for name, s in run.numerics.items():
        assert s["scaling"] == ("lsq_channel" if name.startswith("weight") else "lsq")
        assert 0 < s["step_min"] <= s["step"] <= s["step_max"] and 0 < s["rel_error"] < 0.1
        if name.startswith("weight"):
            assert s["zero"] == 0.5
    assert [c["step"] for c in run.numerics_curve] == [2, 4]
    assert set(run.numerics_curve[-1]["tensors"]["weight:fc0/w"]) == {"step", "overflow", "rel_error"}
    assert any("learned step" in line for line in _numerics_lines(run.numerics))
