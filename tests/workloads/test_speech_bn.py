"""Deep Speech 2's sequence-wise batch norm and row convolution (asicsim._src.workloads.speech_layers)
in the ds2 model: statistics against numpy over the valid frames only, padding invariance,
running averages through training, the row convolution against a numpy loop and its lookahead
(no output reads further than tau frames ahead), and the batch norm rounded in fp16 by a recipe's
op rule, bit for bit against the same steps rounded by hand (ml_dtypes' float16 rounding)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from asicsim._src.emulate import emulate, load_recipe
from asicsim._src.emulate.layer_report import layer_report
from asicsim._src.workloads import speech_layers as sl
from asicsim._src.workloads import tasks, training
from asicsim._src.workloads.models import make_model
from asicsim._src.workloads.runner import Runner
from asicsim._src.workloads.workload import Workload

SIZES = {"channels": [4, 4], "kernels": [[3, 5], [3, 3]], "strides": [[2, 2], [1, 2]], "hidden": 8, "layers": 2}
FP32 = {"weight": "fp32", "act": "fp32", "acc": "fp32"}
FP16_BN = {"roles": FP32, "layers": [{"match": "*_bn/*", "roles": {"vector": "fp16"}}]}


def _inputs(seed=0, b=4, t=30, f=12):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(b, t, f)), jnp.float32)
    return x, jnp.asarray([t, 21, 9, 14][:b], jnp.int32)


def test_statistics_are_over_valid_frames_only():
    rng = np.random.default_rng(1)
    t, b, c = 7, 3, 5
    x = rng.normal(size=(t, b, c)).astype(np.float32) * 3 + 2
    lengths = np.array([7, 4, 2])
    mask = np.arange(t)[:, None] < lengths[None, :]
    x[~mask] = 1e4  # padding: must not enter the statistics
    p = {"gamma": jnp.asarray(rng.uniform(0.5, 2, c), jnp.float32), "beta": jnp.asarray(rng.normal(size=c), jnp.float32)}
    y, (mean, var) = jax.jit(sl.seq_batch_norm)(jnp.asarray(x), jnp.asarray(mask[:, :, None]), p)
    valid = x[mask].astype(np.float64)  # (valid frames, C): batch AND time
    np.testing.assert_allclose(mean, valid.mean(0), rtol=1e-6)
    np.testing.assert_allclose(var, valid.var(0), rtol=1e-5)  # biased (1/m), Ioffe & Szegedy Algorithm 1
    ref = (valid - valid.mean(0)) / np.sqrt(valid.var(0) + sl.BN_EPS) * np.asarray(p["gamma"]) + np.asarray(p["beta"])
    np.testing.assert_allclose(np.asarray(y)[mask], ref, rtol=1e-5, atol=1e-5)


def test_model_output_ignores_padding_and_running_statistics_reproduce_the_batch():
    model = make_model("ds2", (30, 12), 6, **SIZES, batch_norm=True)
    params = model.init(0)
    x, n = _inputs()

    @jax.jit
    def train_mode(p, inp):
        stats: dict = {}
        return model.apply(p, inp, stats=stats), stats

    apply = jax.jit(model.apply)
    logits, stats = train_mode(params, (x, n))
    assert set(stats) == {"gru0", "gru1"} and stats["gru0"][0].shape == (2 * 3 * 8,)
    frames = np.asarray(model.out_frames(n))
    more = jnp.pad(x, ((0, 0), (0, 10), (0, 0)), constant_values=7.0)  # more (and louder) padding
    longer = apply(params, (more, n))
    for i in range(len(frames)):
        np.testing.assert_allclose(longer[i, : frames[i]], logits[i, : frames[i]], rtol=1e-5, atol=1e-5)
    # inference with running statistics equal to this batch's: the training-mode output
    running = {k: {"mean": m, "var": v} for k, (m, v) in stats.items()}
    np.testing.assert_array_equal(apply(sl.with_running(params, running), (x, n)), logits)
    # inference normalises each utterance by the running statistics alone: the batch does not matter
    alone = apply(sl.with_running(params, running), (x[1:2], n[1:2]))
    np.testing.assert_allclose(alone[0, : frames[1]], logits[1, : frames[1]], rtol=1e-5, atol=1e-5)
    # the batch norm replaces the projection bias; without the option the parameters are as before
    assert "bx" not in params["gru0"] and set(params["gru0"]["bn"]) == {"gamma", "beta"}
    plain = make_model("ds2", (30, 12), 6, **SIZES).init(0)
    assert "bn" not in plain["gru0"] and "bx" in plain["gru0"]


def test_running_averages_follow_each_step_and_skip_skipped_ones():
    r = {"gru0": sl.running_init(3)}
    batch = {"gru0": (jnp.asarray([1.0, 2.0, -4.0]), jnp.asarray([0.5, 4.0, 9.0]))}
    got = sl.update_running(r, batch, jnp.bool_(False))["gru0"]
    np.testing.assert_allclose(got["mean"], 0.01 * np.array([1.0, 2.0, -4.0]), rtol=1e-6)
    np.testing.assert_allclose(got["var"], 0.99 + 0.01 * np.array([0.5, 4.0, 9.0]), rtol=1e-6)
    kept = sl.update_running(r, batch, jnp.bool_(True))["gru0"]
    np.testing.assert_array_equal(kept["mean"], r["gru0"]["mean"])
    np.testing.assert_array_equal(kept["var"], r["gru0"]["var"])


def _synthetic():
    from tests.workloads.test_speech_model import synthetic_speech

    return synthetic_speech(n_train=32, n_test=8)


@pytest.mark.slow  # ~10-30 s (compiling a training chunk): the default run stays under 10 minutes
def test_training_steps_carry_the_running_statistics():
    data = _synthetic()
    w = Workload(name="bn_tiny", dataset="speech", model="ds2", sizes={**SIZES, "batch_norm": True},
                 optimizer="adam", lr=1e-3, batch=8, steps=2, eval_every=2)
    model = make_model("ds2", data.feature_shape, data.num_classes, **w.sizes)
    runner = Runner(w, load_recipe("fp32"), data, model, training.make_optimizer("adam", 1e-3), stats=False)
    params = model.init(0)
    state = runner.init(params, 1)
    assert isinstance(state, sl.NormState)
    idx = jnp.asarray([np.arange(8)])
    state, m = runner.chunk(state, runner.train_data, idx)
    assert "aux" not in m and not bool(m["skipped"][0])
    stats: dict = {}
    model.apply(params, tasks.model_input("ctc", runner.make_batch(runner.train_data, idx[0])), stats=stats)
    for layer, (mean, var) in stats.items():
        np.testing.assert_allclose(state.running[layer]["mean"], 0.01 * mean, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(state.running[layer]["var"], 0.99 + 0.01 * var, rtol=1e-5)
    inf = sl.inference_params(state)
    assert inf[sl.RUNNING] is state.running and inf["gru0"] is state.params["gru0"]


def test_row_convolution_against_a_loop_and_its_lookahead():
    rng = np.random.default_rng(2)
    t, b, c, tau = 6, 2, 3, 2
    h = rng.normal(size=(t, b, c)).astype(np.float32)
    w = rng.normal(size=(tau + 1, c)).astype(np.float32)
    lengths = np.array([6, 4])
    mask = (np.arange(t)[:, None] < lengths[None, :])[:, :, None]
    got = np.asarray(sl.row_conv(jnp.asarray(h), jnp.asarray(w), jnp.asarray(mask)))
    ref = np.zeros_like(h, np.float64)
    for i in range(b):
        for s in range(t):
            for j in range(tau + 1):
                if s + j < lengths[i]:  # frames past the utterance read as zero
                    ref[s, i] += w[j] * h[s + j, i]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    # in the unidirectional model, a change at the first recurrent layer's input frame s reaches
    # the outputs from frame s - tau on, never before
    model = make_model("ds2", (30, 12), 6, **{**SIZES, "layers": 1}, bidirectional=False, lookahead=tau)
    params = model.init(0)
    x, n = _inputs(b=1)
    s = 9
    sink: dict = {}
    base = model.apply(params, (x, n), sink=sink)
    bump = jnp.zeros_like(sink["gru0_in"]).at[:, s].set(1.0)
    moved = jax.jit(model.apply)(params, (x, n), {"gru0_in": bump})
    base = jax.jit(model.apply)(params, (x, n), {"gru0_in": jnp.zeros_like(bump)})
    diff = np.abs(np.asarray(moved - base))[0].max(-1)
    assert diff[: s - tau].max() == 0.0 and diff[s - tau] > 0
    assert params["rowconv"].shape == (tau + 1, 8) and "fwd_wh" in params["gru0"] and "bwd_wh" not in params["gru0"]


@pytest.mark.parametrize("sizes,fragment", [
    ({"lookahead": 2}, "lookahead = 2: allowed only with bidirectional = false"),
    ({"bidirectional": False, "lookahead": -1}, "lookahead = -1: allowed: an integer >= 0"),
    ({"bidirectional": False, "lookahead": True}, "lookahead = True"),
    ({"batch_norm": 1}, "batch_norm = 1: allowed: true or false"),
    ({"bidirectional": "no"}, "bidirectional = 'no': allowed: true or false"),
])
def test_bad_options_are_named(sizes, fragment):
    with pytest.raises(ValueError, match=fragment):
        make_model("ds2", (30, 12), 6, **SIZES, **sizes)


@pytest.mark.parametrize("field,value,fragment", [
    ("batch_norm", "yes", "model.batch_norm = 'yes': allowed: true or false"),
    ("lookahead", -3, "model.lookahead = -3: allowed: an integer in 0 .."),
    ("lookahead", 2, "model.lookahead = 2: allowed only with bidirectional = false"),
])
def test_workload_files_check_the_options(field, value, fragment):
    from asicsim._src.workloads.workload_checks import size_problems

    problems = size_problems("ds2", {**SIZES, field: value})
    assert any(fragment in p for p in problems), problems
    assert size_problems("ds2", {**SIZES, "batch_norm": True, "bidirectional": False, "lookahead": 3}) == []


def _f16(t):
    return t.astype(jnp.float16).astype(jnp.float32)


def f16_batch_norm(x, mask, p):
    """seq_batch_norm's steps, each operand and result rounded to fp16 (round to nearest even),
    as the emulator's vector roles round them (a value read by several ops rounded once)."""
    x, gamma, beta = _f16(x), _f16(p["gamma"])[None, None], _f16(p["beta"])[None, None]
    m = mask.astype(jnp.float32)
    n = _f16(jnp.maximum(_f16(jnp.sum(m)), 1.0))
    mean = _f16(_f16(jnp.sum(_f16(x * m), axis=(0, 1))) / n)
    xc = _f16(x - mean[None, None])
    var = _f16(_f16(jnp.sum(_f16(_f16(jnp.square(xc)) * m), axis=(0, 1))) / n)
    inv = _f16(lax.rsqrt(_f16(var + _f16(jnp.float32(sl.BN_EPS)))))
    return _f16(_f16(_f16(xc * inv[None, None]) * gamma) + beta)


def test_fp16_batch_norm_through_an_op_rule_bit_for_bit():
    rng = np.random.default_rng(3)
    t, b, c = 5, 3, 4
    # fp16 values in [0.5, 4): every sum of a few of them is exact in float32, so the reference's
    # summation order cannot differ from XLA's
    x = (rng.integers(512, 4096, size=(t, b, c)) / 1024).astype(np.float32)
    mask = jnp.asarray((np.arange(t)[:, None] < np.array([5, 3, 1])[None, :])[:, :, None])
    p = {"gamma": jnp.asarray(rng.uniform(0.5, 2, c), jnp.float32), "beta": jnp.asarray(rng.normal(size=c), jnp.float32)}

    def bn(x, mask, p):
        return sl.seq_batch_norm(x, mask, p, name="layer_bn")[0]

    got = np.asarray(emulate(bn, load_recipe(FP16_BN))(jnp.asarray(x), mask, p))
    want = np.asarray(f16_batch_norm(jnp.asarray(x), mask, p))
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, np.asarray(bn(jnp.asarray(x), mask, p)))  # it was rounded
    assert np.all(got == got.astype(np.float16))


def test_a_recipe_rounds_the_models_batch_norms_and_nothing_else():
    model = make_model("ds2", (30, 12), 6, **{**SIZES, "layers": 1}, batch_norm=True)
    params = model.init(0)
    x, n = _inputs()
    pol = load_recipe(FP16_BN)
    rep = layer_report(model.apply, pol, params, (x, n))
    ruled = [e for e in rep.ops if e["rule"] is not None]
    assert {e["op"].split("/")[0] for e in ruled} == {"gru0_bn"}
    assert {e["primitive"] for e in ruled} >= {"reduce_sum", "sub", "mul", "rsqrt", "add", "div"}
    assert all(set(e["formats"].values()) == {"fp16"} for e in ruled)
    assert all(e["formats"] == {} for e in rep.ops if e["rule"] is None)
    fp16 = np.asarray(emulate(model.apply, pol)(params, (x, n)))
    fp32 = np.asarray(emulate(model.apply, load_recipe({"roles": FP32}))(params, (x, n)))
    assert np.isfinite(fp16).all() and not np.array_equal(fp16, fp32)
    np.testing.assert_allclose(fp16, fp32, atol=0.05)  # fp16 rounding, not a different model


def test_priced_inference_normalises_by_running_statistics(monkeypatch):
    """Training computes each batch's statistics (reductions); the deployed model reads the
    running ones, so its priced inference trace holds no reduction."""
    from asicsim._src.workloads.pricing import workload_trace

    monkeypatch.setattr(training, "load_dataset", lambda name: _synthetic())
    w = Workload(name="bn_tiny", dataset="speech", model="ds2", sizes={**SIZES, "layers": 1, "batch_norm": True},
                 batch=4, steps=2, eval_every=2)
    reductions = {mode: int((t["primitive"] == "reduce_sum").sum())
                  for mode, t in (("train", workload_trace(w, batch=4)), ("infer", workload_trace(w, batch=4, training=False)))}
    assert reductions["train"] > 0 and reductions["infer"] == 0, reductions


@pytest.mark.slow  # ~2 min on 2 shared cores (a GRU model's LSQ training chunk, statistics and evaluation)
def test_lsq_training_with_batch_norm_and_pruning(monkeypatch):
    """train (asicsim train) with int8_lsq on a tiny batch-normalised ds2 with a 2:4 rule on the
    GRU input projections: the learned steps start positive (the GRUs' recurrent operand is zero
    at the first frame: a time scan's initial step is the mean over its frames, .lsq_sites), the
    run is finite, the pruned weights are half zero, the running statistics moved from (0, 1), and
    the statistics name every LSQ operand. On the old code the run was refused ("not yet
    supported ... pruning or batch norm"); with the refusal lifted alone its loss was NaN."""
    from asicsim._src.workloads.prune_rules import PruneRule

    monkeypatch.setattr(training, "load_dataset", lambda name: _synthetic())
    w = Workload(name="bn_tiny", dataset="speech", model="ds2", sizes={**SIZES, "batch_norm": True},
                 optimizer="adam", lr=1e-3, batch=8, steps=4, eval_every=4)
    run = training.train(w, "int8_lsq", seeds=(0,), keep_params=True,
                         prune=[PruneRule("2:4", start=1, match="gru*/wx")]).runs[0]
    assert not run.diverged and np.isfinite(run.curves["train_loss"][-1]) and np.isfinite(run.test_loss)
    assert [v for k, v in run.sparsity.items() if k.endswith("/wx")] == [0.5, 0.5]  # gru0, gru1
    running = run.params[sl.RUNNING]
    assert all(np.any(np.asarray(r["mean"]) != 0) for r in running.values())
    assert all(s["step_min"] > 0 and np.isfinite(s["rel_error"]) for s in run.numerics.values())
    assert any(k.startswith("act:") for k in run.numerics) and any(k.startswith("weight:") for k in run.numerics)
