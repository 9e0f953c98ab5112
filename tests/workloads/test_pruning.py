"""Pruning during training (asicsim._src.workloads.prune_rules, .pruning, .prune_price): the schedules
against the papers' formulas computed by hand, the masks' exact properties, pruned weights that
stay zero through training steps, bad rules named, and pricing that uses the measured sparsity."""

from __future__ import annotations

import itertools
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asicsim._src.emulate import op_trace
from asicsim._src.emulate.layer_rules import leaf_paths
from asicsim._src.emulate.training import make_train_step
from asicsim._src.hw.family import cost_designs
from asicsim._src.hw.operations import Gemm
from asicsim._src.workloads.deepbench import WorkloadError
from asicsim._src.workloads.pricing import trace_costs, workload_trace
from asicsim._src.workloads.prune_price import sparse_trace
from asicsim._src.workloads.prune_rules import (
    PruneRule,
    cubic_counts,
    cubic_sparsity,
    narang_fractions,
    narang_theta,
    narang_threshold,
    rule_from_table,
)
from asicsim._src.workloads.pruning import (
    Pruner,
    nm_mask,
    smallest_mask,
    weight_sparsity,
    with_pruning,
)
from asicsim._src.workloads.training import build, make_optimizer
from asicsim._src.workloads.workload import load_workload

# --- the schedules, by hand ----------------------------------------------------------------------


def test_narang_theta_and_threshold_by_hand():
    # Section 3.1: theta = 2 q freq / (2 (ramp - start) + 3 (end - ramp)); q = 1/2, freq 10,
    # start 100, ramp 300, end 500: 10 / (400 + 600) = 1/100
    theta = narang_theta(0.5, 100, 300, 500, 10)
    assert theta == pytest.approx(float(Fraction(1, 100)), rel=1e-15)
    # eps = theta (itr - start + 1) / freq before the ramp: itr 100 -> 1/1000, itr 299 -> 200/1000
    assert narang_threshold(100, theta, 100, 300, 10) == pytest.approx(1e-3, rel=1e-14)
    assert narang_threshold(299, theta, 100, 300, 10) == pytest.approx(0.2, rel=1e-14)
    # from the ramp: (theta (ramp - start + 1) + phi (itr - ramp + 1)) / freq, phi = 1.5 theta:
    # itr 300: (201 + 1.5) / 1000 = 0.2025; itr 499: (201 + 300) / 1000 = 0.501
    assert narang_threshold(300, theta, 100, 300, 10) == pytest.approx(float(Fraction(2025, 10000)), rel=1e-14)
    assert narang_threshold(499, theta, 100, 300, 10) == pytest.approx(0.501, rel=1e-14)
    assert narang_threshold(300, theta, 100, 300, 10, ramp_factor=2.0) == pytest.approx(0.203, rel=1e-14)


def test_cubic_schedule_by_hand():
    # Zhu & Gupta Eq. (1): s_t = s_f + (s_i - s_f)(1 - (t - t0)/(n dt))^3; s_f 0.9, t0 100, end 500:
    # t = 200: 0.9 - 0.9 (3/4)^3 = 0.9 x 37/64
    assert cubic_sparsity(200, 0.9, 100, 500) == pytest.approx(0.9 * 37 / 64, rel=1e-15)
    assert cubic_sparsity(100, 0.9, 100, 500, initial=0.2) == 0.2
    assert cubic_sparsity(500, 0.9, 100, 500) == 0.9
    r = PruneRule("cubic", start=100, end=500, every=100, sparsity=0.9)
    assert r.update_steps() == [100, 200, 300, 400, 500]
    # 1000 weights: round(1000 s_t) at t = 100 .. 500: 0, 0.9 (1 - 27/64), 0.9 (1 - 1/8), 0.9 (1 - 1/64), 900
    assert cubic_counts(r, 1000) == [0, 520, 788, 886, 900]


def test_narang_updates_stop_before_end_and_nm_once():
    r = PruneRule("narang", start=10, ramp=20, end=40, every=10, sparsity=0.9)
    assert r.update_steps() == [10, 20, 30]  # start <= itr < end
    nm = PruneRule("2:4", start=7)
    assert (nm.update_steps(), nm.end, nm.final_sparsity) == ([7], 7, 0.5)


# --- the masks -----------------------------------------------------------------------------------

_ARRAYS = st.lists(st.floats(-8, 8, allow_nan=False, width=32), min_size=48, max_size=48).map(
    lambda v: np.asarray(v, np.float32).reshape(16, 3))  # one shape: one compilation per N:M
_NM = {nm: jax.jit(lambda w, nm=nm: nm_mask(w, nm[0], nm[1], axis=0)) for nm in [(2, 4), (1, 4), (4, 8), (3, 8)]}
_SMALLEST = jax.jit(smallest_mask)


@settings(max_examples=60, deadline=None)
@given(_ARRAYS, st.sampled_from(sorted(_NM)))
def test_nm_mask_keeps_n_largest_of_every_m(w, nm):
    n, m = nm
    keep = np.asarray(_NM[nm](jnp.asarray(w)))
    groups_k = keep.T.reshape(w.shape[1], -1, m)  # groups of m consecutive entries along axis 0
    groups_w = np.abs(w).T.reshape(w.shape[1], -1, m)
    assert (groups_k.sum(-1) == n).all()  # exactly N of every M kept
    kept = np.where(groups_k, groups_w, np.inf).min(-1)
    dropped = np.where(groups_k, -np.inf, groups_w).max(-1)
    assert (kept >= dropped).all()  # the kept ones are the largest magnitudes


@settings(max_examples=60, deadline=None)
@given(_ARRAYS, st.data())
def test_smallest_mask_prunes_exactly_k_and_keeps_earlier_prunes(w, data):
    size = w.size
    old = np.asarray(data.draw(st.lists(st.booleans(), min_size=size, max_size=size))).reshape(w.shape)
    k = data.draw(st.integers(int((~old).sum()), size))
    keep = np.asarray(_SMALLEST(jnp.asarray(w), jnp.asarray(old), jnp.int32(k)))
    assert (~keep).sum() == k
    assert not (keep & ~old).any()  # a pruned weight is never revived
    new = ~keep & old
    if new.any() and keep.any():
        assert np.abs(w)[new].max() <= np.abs(w)[keep].min()


# --- pruning through training steps ----------------------------------------------------------------


def _tiny_training(rules, steps=12, recipe="fp32"):
    """A least-squares layer trained with Adam under ``rules``: (per-step weights, final state)."""
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.normal(size=(8, 6)), jnp.float32), "b": jnp.zeros(6, jnp.float32)}
    x = jnp.asarray(rng.normal(size=(16, 8)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(16, 6)), jnp.float32)

    def loss(p, batch):
        return jnp.mean((batch[0] @ p["w"] + p["b"][None, :] - batch[1]) ** 2)

    init, step = with_pruning(*make_train_step(loss, recipe, make_optimizer("adam", 0.05)), rules)
    state = init(params, 0)
    step = jax.jit(step)
    seen = []
    for _ in range(steps):
        state, _ = step(state, (x, y))
        seen.append(np.asarray(state.params["w"]))
    return seen, state


def test_cubic_pruning_exact_at_end_and_pruned_weights_stay_zero():
    rules = [PruneRule("cubic", start=2, end=8, every=2, sparsity=0.75, match="w")]
    seen, state = _tiny_training(rules)
    zeros = [int((w == 0).sum()) for w in seen]
    assert zeros[1] == 0 and zeros[7] == 36 == round(0.75 * 48)  # step 2: s_i = 0; step 8: exactly 75 %
    assert zeros[7:] == [36] * 5  # no update after the end step, no weight revived
    for before, after in itertools.pairwise(seen):
        assert (after[before == 0] == 0).all()  # once zero, zero at every later step
    assert np.asarray(state.params["b"]).any()  # the bias is no weight matrix: never pruned
    assert weight_sparsity(state.params) == {"w": 0.75}


def test_two_four_pattern_holds_at_every_step_after_start():
    seen, _ = _tiny_training([PruneRule("2:4", start=3, match="w")])
    assert not (seen[1] == 0).any()
    for w in seen[2:]:
        assert ((w.T.reshape(6, 2, 4) != 0).sum(-1) <= 2).all()  # along the input (contraction) axis
        assert (w == 0).sum() == 24


def test_narang_fractions_end_at_one():
    # start 200, ramp 600, end 1000, every 50 (bench_pruning's defaults): updates 200, 250, ..., 950;
    # eps(950) / q = (0.05 x 401 + 0.075 x 351) / 50 = 0.9275 (theta = 2 q 50 / 2000 = 0.05 q):
    # a threshold that stops 7 % below q if q is not rescaled to the last update
    r = PruneRule("narang", start=200, ramp=600, end=1000, every=50, sparsity=0.9)
    theta = narang_theta(1.0, 200, 600, 1000, 50)
    assert theta == pytest.approx(0.05, rel=1e-15)
    assert narang_threshold(950, theta, 200, 600, 50) == pytest.approx(0.9275, rel=1e-14)
    f = narang_fractions(r)
    assert len(f) == 16 and f[-1] == 1.0 and f == sorted(f)
    # step 200: eps = theta / 50 = 0.001; as a fraction of 0.9275
    assert f[0] == pytest.approx(0.001 / 0.9275, rel=1e-14)


@pytest.mark.parametrize(("sparsity", "every"), [(0.5, 1), (0.75, 3), (0.9, 2)])
def test_narang_pruning_reaches_its_target_sparsity(sparsity, every):
    """The last update prunes below the target quantile of that step's weights: exactly
    round(sparsity x 48) zeros. Failed before (q taken once at the start step; here the weights
    shrink, so it overshot): 0.5 -> 31 zeros for 24, 0.75 -> 40 for 36, 0.9 -> 46 for 43."""
    rule = PruneRule("narang", start=2, ramp=4, end=10, every=every, sparsity=sparsity, match="w")
    seen, state = _tiny_training([rule])
    zeros = [int((w == 0).sum()) for w in seen]
    last = rule.update_steps()[-1]
    assert zeros[0] == 0 and zeros == sorted(zeros)  # monotone: a pruned weight stays zero
    assert zeros[last - 1:] == [round(sparsity * 48)] * (13 - last)  # reached at the last update, kept
    # q of the last update: the k-th smallest |w| with the pruned ones as zeros, i.e. the smallest kept one
    k = round(sparsity * 48)
    assert float(state.q[0]) == np.sort(np.abs(seen[last - 1]).ravel())[k]


@pytest.mark.slow
def test_every_schedule_reaches_its_target_in_a_training_run():
    """Through ``train`` (the benchmark's path, 12 s): cubic and Narang end with round(s x n) zeros
    per weight matrix, 2:4 with exactly half. Failed before: Narang's fc0/w ended at 0.647 for 0.8."""
    rules = [PruneRule("narang", start=4, ramp=8, end=16, every=4, sparsity=0.8, match="fc0/w"),
             PruneRule("cubic", start=4, end=16, every=4, sparsity=0.9, match="fc1/w"),
             PruneRule("2:4", start=4, match="out/w")]
    from asicsim._src.workloads import train

    run = train("mnist1d_mlp", "fp32", seeds=(0,), steps=20, eval_every=20, stats=False, prune=rules).runs[0]
    _, model = build(load_workload("mnist1d_mlp"))
    sizes = {p: int(np.size(x)) for p, x in zip(leaf_paths(model.init(0)), jax.tree_util.tree_leaves(model.init(0)),
                                                strict=True) if np.ndim(x) >= 2}
    assert run.sparsity == {"fc0/w": round(0.8 * sizes["fc0/w"]) / sizes["fc0/w"],
                            "fc1/w": round(0.9 * sizes["fc1/w"]) / sizes["fc1/w"], "out/w": 0.5}


# --- bad input -------------------------------------------------------------------------------------

BAD_RULES = [
    ({"schedule": "random", "start": 1}, "schedule = 'random': allowed: narang | cubic | N:M"),
    ({"schedule": "4:2", "start": 1}, "schedule = '4:2': allowed: N:M with 0 < N < M"),
    ({"schedule": "cubic", "start": 0, "end": 10, "sparsity": 0.5}, "start = 0: allowed: an integer >= 1"),
    ({"schedule": "cubic", "start": 1, "end": 11, "sparsity": 1.0}, "sparsity = 1.0: allowed: a fraction of zeros in (0, 1)"),
    ({"schedule": "cubic", "start": 10, "end": 5, "sparsity": 0.5}, "end = 5: allowed: an integer step > start (10)"),
    ({"schedule": "cubic", "start": 1, "end": 11, "every": 3, "sparsity": 0.5},
     "every = 3: allowed: a divisor of end - start (10)"),
    ({"schedule": "cubic", "start": 1, "end": 11, "sparsity": 0.5, "ramp": 5}, "ramp, ramp_factor: allowed: only for"),
    ({"schedule": "cubic", "start": 1, "end": 11, "sparsity": 0.5, "initial_sparsity": 0.6},
     "initial_sparsity = 0.6: allowed: a fraction in [0, sparsity]"),
    ({"schedule": "narang", "start": 10, "end": 40, "ramp": 50, "sparsity": 0.9},
     "ramp = 50: allowed: an integer step in [start, end] (10, 40)"),
    ({"schedule": "narang", "start": 10, "end": 40, "ramp": 20, "sparsity": 0.9, "ramp_factor": 0},
     "ramp_factor = 0: allowed: a finite number > 0"),
    ({"schedule": "2:4", "start": 1, "sparsity": 0.5}, "sparsity = 0.5: allowed: not given for an N:M schedule"),
    ({"schedule": "2:4", "start": 1, "end": 9}, "end = 9: allowed: not given, or start (1)"),
    ({"schedule": "cubic", "start": 1, "end": 11, "sparsity": 0.5, "spasity": 1}, "prune[0].spasity: no such field"),
    ({"start": 1}, "prune[0]: schedule and start are required"),
    ({"schedule": "cubic", "start": 1, "end": 11, "sparsity": 0.5, "match": ""}, "match = '': allowed: a glob"),
]


@pytest.mark.parametrize(("table", "fragment"), BAD_RULES)
def test_bad_rules_say_field_value_allowed(table, fragment):
    with pytest.raises(WorkloadError, match="prune") as err:
        rule_from_table(0, table)
    assert fragment in str(err.value)


def test_bad_rules_against_the_workload_and_model(tmp_path):
    rule = PruneRule("cubic", start=10, end=900, every=10, sparsity=0.5)
    with pytest.raises(WorkloadError, match=r"prune\[0\]\.end = 900: allowed: at most steps \(100\)"):
        load_workload("mnist1d_gru").replace(steps=100, prune=(rule,))
    params = {"fwd": {"wh": jnp.zeros((6, 18)), "bh": jnp.zeros(18)}}
    with pytest.raises(WorkloadError, match=r"prune\[0\]\.match = '\*/bh': matches no weight matrix .*'fwd/wh'"):
        Pruner([PruneRule("2:4", start=1, match="*/bh")], params)
    with pytest.raises(WorkloadError, match=r"weight 'fwd/wh' of shape \(6, 18\) has no axis -2 .* multiple of 4"):
        Pruner([PruneRule("2:4", start=1)], params)
    toml = (tmp_path / "w.toml")
    toml.write_text('dataset = "mnist1d"\n[model]\nkind = "gru"\n[train]\nsteps = 50\n'
                    '[[prune]]\nschedule = "cubic"\nstart = 5\nend = 25\nevery = 5\nsparsity = 1.5\n')
    with pytest.raises(WorkloadError, match=r"w\.toml: prune\[0\]: .*sparsity = 1\.5: allowed"):
        load_workload(str(toml))
    toml.write_text(toml.read_text().replace("1.5", "0.5"))
    assert load_workload(str(toml)).prune == (PruneRule("cubic", start=5, end=25, every=5, sparsity=0.5),)


# --- the measured sparsity in pricing ------------------------------------------------------------


def test_trace_records_each_gemms_weight_path():
    _, model = build(load_workload("mnist1d_gru"))
    trace = op_trace(model.apply, "bf16", model.init(0), jnp.zeros((4, 40)))
    assert trace["weight_path"].tolist() == ["fwd/wx", "fwd/wh", "bwd/wx", "bwd/wh", "out/w"]


def test_pricing_uses_the_measured_sparsity():
    design = "dc_bf16_128x128"
    trace = workload_trace("mnist1d_gru", "bf16", batch=1, training=True)
    sparse = sparse_trace(trace, {"fwd/wh": 0.75, "bwd/wh": 0.75, "out/w": 0.5})  # wh: one shape
    dense_rows, rows = (trace_costs(t, design, "bf16") for t in (trace, sparse))
    g = sparse[sparse["kind"] == "gemm"].reset_index(drop=True)
    assert g.loc[(g.weight_path == "out/w") & (g.role != "grad-weight"), "weight_sparsity"].tolist() == [0.5, 0.5]
    assert g.loc[g.role == "grad-weight", "weight_sparsity"].eq(0).all()  # dW reads no weight
    fmts = {"act": "bfloat16", "weight": "bfloat16", "acc": "float32", "out": "bfloat16"}
    gemm_rows = rows[rows.kind == "gemm"]
    for r in g[g.weight_sparsity > 0].itertuples():
        one = cost_designs([Gemm(int(r.M), int(r.N), int(r.K), weight_sparsity=float(r.weight_sparsity),
                                 sparse_format="bitmask")], [design], fmts)
        got = gemm_rows[(gemm_rows.role == r.role) & (gemm_rows.M == r.M) & (gemm_rows.N == r.N)
                        & (gemm_rows.K == r.K)]
        assert len(got) == (2 if r.weight_path.endswith("wh") else 1)
        assert (got.dram_bytes / got.reps).tolist() == pytest.approx([float(one.dram_bytes[0, 0])] * len(got),
                                                                      rel=1e-12)
    out_fwd = (rows.role == "forward") & (rows.kind == "gemm") & (rows.K == 480)
    assert rows.loc[out_fwd, "dram_bytes"].iloc[0] < dense_rows.loc[out_fwd, "dram_bytes"].iloc[0]
    with pytest.raises(WorkloadError, match=r"weight sparsity given for \['nope'\]: no GEMM of the trace reads"):
        sparse_trace(trace, {"nope": 0.5})
    with pytest.raises(WorkloadError, match=r"weight sparsity of 'out/w' = 1.0: allowed: a fraction"):
        sparse_trace(trace, {"out/w": 1.0})


def test_a_pruned_workload_checks_as_its_fields_too():
    """A sweep checks a workload's overrides on ``dataclasses.asdict`` of it (rules as dicts)."""
    import dataclasses
    import types

    from asicsim._src.workloads.workload import workload_problems

    w = load_workload("mnist1d_gru").replace(prune=[PruneRule("2:4", start=5, match="out/w")])
    assert workload_problems(types.SimpleNamespace(**dataclasses.asdict(w))) == []
    bad = types.SimpleNamespace(**{**dataclasses.asdict(w), "steps": 3})
    assert workload_problems(bad) == ["prune[0].end = 5: allowed: at most steps (3): the schedule must finish "
                                      "within the run"]
    assert "prune = 'x': allowed: a tuple" in workload_problems(types.SimpleNamespace(**{**dataclasses.asdict(w),
                                                                                      "prune": "x"}))[0]


def test_loss_regression_is_judged_after_the_last_mask_update():
    """Pruning raises the loss by design: the divergence watch judges regression from its end."""
    from asicsim._src.workloads.divergence import DivergenceWatch

    losses = np.concatenate([np.linspace(2.3, 1.0, 40), np.full(40, 2.0), np.linspace(2.0, 1.2, 20)])
    found = []
    for until in (0, 80):
        watch = DivergenceWatch(100, 10.0, pruning_until=until)
        watch.chunk(0, {"loss": losses})
        found.append(watch.found)
    assert found[0] is not None and "loss regression" in found[0]["cause"] and found[0]["step"] <= 80
    assert found[1] is None  # after step 80 the loss only improves


def test_a_master_copy_is_pruned_too():
    """fp16_mixed keeps an fp32 master copy: pruned in it as in the fp16-rounded working weights."""
    seen, state = _tiny_training([PruneRule("cubic", start=2, end=4, every=2, sparsity=0.5, match="w")],
                                 steps=6, recipe="fp16_mixed")
    master = np.asarray(state.train.master["w"])
    assert (master == 0).sum() == 24 and ((seen[-1] == 0) == (master == 0)).all()
