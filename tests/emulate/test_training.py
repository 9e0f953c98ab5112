"""make_train_step: loss-scaling dynamics by hand, master weights vs in-format updates (the stall
Micikevicius 2018 and Gupta 2015 describe), stochastic rounding's unbiased updates, delayed
scaling's amax history, keys never reused, and use under jit and lax.scan."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest

from asicsim._src.emulate import LossScaling, list_recipes, load_recipe, make_train_step
from asicsim._src.emulate.loss_scaling import ScaleState, all_finite, norm_and_finite, update_scale
from asicsim._src.emulate.training import MAX_SITES, master_is_params
from asicsim._src.numerics.exact_div import divide


def linear_loss(p, x):
    """d loss / d w = x summed: with x = ones, every weight sees gradient 1 (through a GEMM)."""
    return jnp.sum(x @ p["w"])


ONE = jnp.ones((1, 1))


def run(policy, params, lr, steps, batch=ONE, loss=linear_loss, key=0):
    init, step = make_train_step(loss, policy, optax.sgd(lr))
    state = init(params, jax.random.key(key))
    state, metrics = jax.jit(lambda s: jax.lax.scan(lambda c, _: step(c, batch), s, None, length=steps))(state)
    return state, metrics


def test_dynamic_loss_scaling_rule_by_hand():
    ls = LossScaling(kind="dynamic", init=8.0, growth_interval=3, factor=2.0)
    s = ScaleState(jnp.float32(8.0), jnp.int32(0))
    seen = []
    for finite in [False, True, True, True, True, False, True]:
        s, skip = update_scale(ls, s, jnp.bool_(finite))
        seen.append((float(s.scale), int(s.good_steps), bool(skip)))
    assert seen == [(4.0, 0, True), (4.0, 1, False), (4.0, 2, False), (8.0, 0, False), (8.0, 1, False),
                    (4.0, 0, True), (4.0, 1, False)]
    for kind in ("none", "static"):
        s2, skip = update_scale(LossScaling(kind=kind), ScaleState(jnp.float32(8.0), jnp.int32(0)), jnp.bool_(False))
        assert float(s2.scale) == 8.0 and not bool(skip)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_all_finite_sees_any_inf_or_nan(bad):
    """Under jit, in float32 and bfloat16 leaves, at any position, in leaves reduced in 32-element
    pieces first and in a 0-d one; the largest finite values are finite, empty leaves too."""
    check = jax.jit(all_finite)
    big = {"a": jnp.full((5, 7), 3.4e38), "b": jnp.full(3, -3.0e38, jnp.bfloat16), "n": jnp.arange(3),
           "long": jnp.full((3, 96), -np.finfo(np.float32).max),  # (reduced in 32-lane pieces first)
           "s": jnp.float32(2.0**-149), "empty": jnp.zeros((0, 4))}
    assert bool(check(big))
    for leaf, i in (("a", (0, 0)), ("a", (4, 6)), ("b", 1), ("long", (2, 95)), ("long", (1, 40)), ("s", ())):
        tree = dict(big, **{leaf: big[leaf].at[i].set(bad)})
        assert not bool(check(tree)), (leaf, i)
    assert bool(check({"empty": jnp.zeros((0,))})) and bool(check({}))


def test_grad_norm_is_the_float64_norm_of_the_gradients():
    """The ``grad_norm`` metric against numpy's float64 norm of the same gradients (jax.grad of a
    float32 model, as the ``fp32`` recipe computes them), within float32 summation error."""
    k1, k2, k3 = jax.random.split(jax.random.key(3), 3)
    p = {"w1": jax.random.normal(k1, (40, 64)), "b1": jnp.zeros(64), "w2": jax.random.normal(k2, (64, 3)) * 0.1}
    x = jax.random.normal(k3, (256, 40))
    loss = lambda p, x: jnp.mean((jnp.tanh(x @ p["w1"] + p["b1"][None]) @ p["w2"] - 1.0) ** 2)  # noqa: E731
    init, step = make_train_step(loss, "fp32", optax.sgd(0.0))
    _, m = jax.jit(step)(init(p, jax.random.key(0)), x)
    g = jax.grad(loss)(p, x)
    want = np.sqrt(sum(np.sum(np.asarray(v, np.float64) ** 2) for v in jax.tree_util.tree_leaves(g)))
    assert float(m["grad_norm"]) == pytest.approx(want, rel=1e-5)
    norm, finite = norm_and_finite({"a": jnp.array([3.0, 0.0]), "b": jnp.array([[4.0]], jnp.bfloat16), "n": jnp.arange(2)})
    assert float(norm) == 5.0 and bool(finite)


def test_overflow_is_checked_on_the_unscaled_gradients():
    """As AMP's GradScaler: a gradient finite while scaled (here by 2**-20) that overflows when the
    scale is divided out is an overflow, and the norm reports it. Before, the scaled gradients
    were checked: one jitted step reported no overflow and applied an inf gradient (inside a
    scan XLA happened to reassociate the products so that the scaled gradient was inf too)."""
    pol = dataclasses.replace(load_recipe("fp32"), loss_scaling=LossScaling(kind="static", init=2.0**-20))
    loss = lambda p, x: jnp.sum(x @ p["w"]) * jnp.float32(1e30)  # noqa: E731 (its gradient: 1e40 x)
    init, step = make_train_step(loss, pol, optax.sgd(1e-4))
    state = init({"w": jnp.ones((1, 1))}, jax.random.key(0))
    _, m = jax.jit(step)(state, jnp.full((1, 1), 1e10))
    assert bool(m["overflow"]) and not bool(m["skipped"])  # static: reported, applied
    assert float(m["grad_norm"]) == np.inf
    _, m = jax.jit(step)(state, jnp.ones((1, 1)))
    assert not bool(m["overflow"]) and float(m["grad_norm"]) == pytest.approx(1e30)


def test_a_power_of_two_scale_is_divided_out_by_its_reciprocal_bit_for_bit():
    """fp16_mixed's scales are powers of two (init 2**15, factor 2, clipped to [2**-24, 2**64]):
    the step multiplies the gradients by the exact reciprocal (which XLA fuses into their
    consumers) and gets the quotient's bits, on random bit patterns, subnormal and overflowing
    results included."""
    from asicsim._src.emulate.training import _unscale

    rng = np.random.default_rng(5)
    g = rng.integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for e in (-24, -3, 0, 7, 15, 40, 64):
        scale = jnp.float32(2.0**e)
        inv = jax.jit(lambda s: divide(np.float32(1), s))(scale)
        by_product = jax.jit(lambda g, s, i: _unscale(g, unscaled=False, scale=s, inv=i))(g, scale, inv)
        by_quotient = jax.jit(lambda g, s: _unscale(g, unscaled=False, scale=s))(g, scale)
        np.testing.assert_array_equal(np.asarray(by_product).view(np.uint32), np.asarray(by_quotient).view(np.uint32))
    assert float(inv) == 2.0**-64


def test_overflow_skips_the_step_and_halves_then_grows():
    # the gradient entering the GEMM is 100 * scale, rounded to fp16: inf above 65504, so scales
    # 2^15 .. 2^10 overflow (6 skipped steps), 2^9 = 512 is clean; after 3 clean steps it doubles
    # to 1024, which overflows again
    pol = dataclasses.replace(load_recipe("fp16_mixed"),
                              loss_scaling=LossScaling(kind="dynamic", init=2.0**15, growth_interval=3))
    loss = lambda p, x: jnp.sum(x @ p["w"]) * jnp.float32(100.0)  # noqa: E731
    state, m = run(pol, {"w": jnp.ones((1, 1))}, 1e-4, 12, loss=loss)
    scales = [float(v) for v in m["loss_scale"]]
    assert scales == [2.0**15, 2.0**14, 2.0**13, 2.0**12, 2.0**11, 2.0**10, 512, 512, 512, 1024, 512, 512]
    assert [bool(v) for v in m["skipped"]] == [True] * 6 + [False] * 3 + [True] + [False] * 2
    assert [bool(v) for v in m["overflow"]] == [bool(v) for v in m["skipped"]]
    # only the 5 clean steps moved the weight (fp32 master): 1 - 5 * 100 * 1e-4
    np.testing.assert_allclose(float(state.master["w"][0, 0]), 1 - 5 * 100 * 1e-4, rtol=1e-5)
    assert np.all(np.isfinite(m["loss"]))


def test_a_master_copy_equal_to_the_params_is_kept_once():
    """fp8 and MX recipes round their weights at each GEMM, so with float32 parameters the master
    copy equals ``params``: the state keeps ``params`` only (``master`` None; a second equal output
    of the jitted step was a copy of every weight per step). With bfloat16 parameters, or a plain
    weight role (bf16), the master copy is kept. The weights move as the optimizer says: SGD's
    ``w - lr * g`` with ``g`` the emulated loss's gradient, bit for bit."""
    from asicsim._src.emulate import emulate

    loss = lambda p, x: jnp.mean((x @ p["w"]) ** 2)  # noqa: E731
    p, x = {"w": jnp.full((4, 3), 0.75)}, jnp.linspace(-1.0, 1.0, 8).reshape(2, 4)
    for recipe in ("fp8_hybrid", "mxfp8"):
        init, step = make_train_step(loss, recipe, optax.sgd(0.5))
        state = init(p, 0)
        assert master_is_params(p, load_recipe(recipe)) and state.master is None
        new, _ = jax.jit(step)(state, x)
        assert new.master is None
        g = jax.jit(jax.grad(emulate(loss, recipe)))(p, x)["w"]
        np.testing.assert_array_equal(new.params["w"], p["w"] - 0.5 * g)
    bf16_params = {"w": p["w"].astype(jnp.bfloat16)}
    assert not master_is_params(bf16_params, load_recipe("fp8_hybrid"))
    assert make_train_step(loss, "fp8_hybrid", optax.sgd(0.5))[0](bf16_params, 0).master is not None
    assert not master_is_params(p, load_recipe("bf16")) and run("bf16", p, 0.1, 1, batch=x, loss=loss)[0].master is not None


def test_no_master_bf16_stalls_while_the_fp32_master_does_not():
    # a weight of 1.0 with updates of 1e-4: half an ulp of bf16 below 1.0 is 2^-10 ~ 1e-3, so
    # round-to-nearest puts it back at 1.0 every step; the fp32 master moves by 50e-4
    p = {"w": jnp.ones((1, 1))}
    s_nm, _ = run("bf16_nomaster", p, 1e-4, 50)
    s_m, _ = run("bf16", p, 1e-4, 50)
    assert float(s_nm.params["w"][0, 0]) == 1.0 and s_nm.master is None
    np.testing.assert_allclose(float(s_m.master["w"][0, 0]), 1 - 50e-4, rtol=1e-5)
    assert float(s_m.params["w"][0, 0]) == float(ml_dtypes.bfloat16(1 - 50e-4))  # working copy: bf16
    assert float(s_m.params["w"][0, 0]) < 1.0
    # fp16 too (ulp below 1.0 is 2^-11; 1e-4 is under half of it)
    fp16_nm = dataclasses.replace(load_recipe("fp16_nomaster"), loss_scaling=LossScaling())
    s16, _ = run(fp16_nm, p, 1e-4, 50)
    assert float(s16.params["w"][0, 0]) == 1.0
    s16m, _ = run(dataclasses.replace(load_recipe("fp16_mixed"), loss_scaling=LossScaling()), p, 1e-4, 50)
    assert float(s16m.params["w"][0, 0]) == float(np.float16(1 - 50e-4))


def test_fixed_point_sr_updates_are_unbiased_and_rn_stalls():
    # q7.8 step is 2^-8 ~ 3.9e-3; updates of 1e-3 are below half a step: RN never moves the
    # weights, SR moves each by 1e-3 in expectation (2000 weights, 20 steps: mean 0.98)
    p = {"w": jnp.ones((1, 2000))}
    s_rn, _ = run("fixed16_rn", p, 1e-3, 20)
    s_sr, _ = run("fixed16_sr", p, 1e-3, 20)
    assert np.all(np.asarray(s_rn.params["w"]) == 1.0)
    w = np.asarray(s_sr.params["w"])
    assert np.all(w * 256 == np.round(w * 256))  # still on the q7.8 grid
    assert abs(float(w.mean()) - 0.98) < 0.002
    assert len(np.unique(w)) > 3  # different weights rounded differently


def test_stochastic_rounding_keys_differ_per_step_and_seed():
    p = {"w": jnp.ones((1, 2000))}
    a, _ = run("fixed16_sr", p, 1e-3, 1, key=0)
    b, _ = run("fixed16_sr", p, 1e-3, 1, key=1)
    two, _ = run("fixed16_sr", p, 1e-3, 2, key=0)
    wa, wb = np.asarray(a.params["w"]), np.asarray(b.params["w"])
    assert not np.array_equal(wa, wb)
    # two steps: the second step's rounding is independent of the first's
    moved1, moved2 = wa < 1.0, np.asarray(two.params["w"]) < np.asarray(a.params["w"]) - 1e-3
    assert 0.1 < moved1.mean() < 0.4 and moved2.sum() > 0


def test_opt_state_is_rounded_and_adam_runs_in_bf16():
    init, step = make_train_step(linear_loss, "bf16_nomaster", optax.adam(1e-2))
    s = init({"w": jnp.full((1, 4), 3.0)}, jax.random.key(0))
    with jax.numpy_dtype_promotion("standard"):  # optax's adam bias correction mixes int and float
        for _ in range(3):
            s, _ = jax.jit(step)(s, ONE * 1.37)
    mu = np.asarray(s.opt_state[0].mu["w"])
    assert np.array_equal(mu, mu.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert float(s.params["w"][0, 0]) < 3.0


def test_fp8_hybrid_keeps_an_amax_history_per_site():
    x = jax.random.normal(jax.random.key(0), (4, 8)) * 5

    def loss(p, x):
        return jnp.mean(jnp.tanh(x @ p["w1"]) @ p["w2"])

    p = {"w1": jax.random.normal(jax.random.key(1), (8, 6)), "w2": jax.random.normal(jax.random.key(2), (6, 3))}
    init, step = make_train_step(loss, "fp8_hybrid", optax.sgd(0.1))
    s = init(p, jax.random.key(0))
    assert s.amax_history.shape == (MAX_SITES, 16, 3) and float(jnp.max(s.amax_history)) == 0
    s, m = jax.jit(step)(s, x)
    h = np.asarray(s.amax_history)
    np.testing.assert_allclose(h[0, 0, :2], [np.max(np.abs(x)), np.max(np.abs(p["w1"]))], rtol=1e-6)
    assert h[1, 0, 2] > 0 and np.all(h[2:] == 0) and np.all(h[:, 1:] == 0)
    s, m = jax.jit(step)(s, x)
    assert np.all(np.asarray(s.amax_history)[:2, 1] == h[:2, 0])  # the history shifts
    assert np.isfinite(m["loss"])


def test_delayed_scaling_most_recent_amax_uses_the_newest_entry():
    from asicsim._src.emulate.training import amax_estimate

    h = jnp.asarray(np.random.default_rng(0).random((3, 5, 3)).astype(np.float32))
    np.testing.assert_array_equal(amax_estimate(h, "most_recent"), h[:, 0])
    np.testing.assert_array_equal(amax_estimate(h, "max"), h.max(axis=1))
    # one GEMM whose history holds a small newest amax and a large older one: "max" scales as
    # by the large one alone, "most_recent" as by the small one alone (and saturates)
    pol = load_recipe("fp8_hybrid")
    recent = dataclasses.replace(pol, roles=tuple(
        (r, dataclasses.replace(s, amax_compute="most_recent") if s.scaling == "delayed" else s) for r, s in pol.roles))
    x = jax.random.normal(jax.random.key(0), (4, 8)) * 3
    p = {"w": jax.random.normal(jax.random.key(1), (8, 3))}

    def loss_with(policy, small, big):
        init, step = make_train_step(lambda p, x: jnp.mean((x @ p["w"]) ** 2), policy, optax.sgd(0.0))
        s = init(p, jax.random.key(2))
        hist = s.amax_history.at[0, 0].set(small).at[0, 1].set(big)
        return float(jax.jit(step)(s._replace(amax_history=hist), x)[1]["loss"])

    small, big = jnp.full(3, 0.5), jnp.full(3, 20.0)
    assert loss_with(pol, small, big) == loss_with(pol, big, 0.0)
    assert loss_with(recent, small, big) == loss_with(pol, small, 0.0) != loss_with(pol, small, big)


@pytest.mark.parametrize("name", ["fp32", "fp16_mixed", "fp8_hybrid", "fixed16_sr"])
def test_train_step_in_scan_matches_a_python_loop(name):
    x = jax.random.normal(jax.random.key(0), (8, 5))
    p = {"w": jax.random.normal(jax.random.key(1), (5, 3)) * 0.5}
    loss = lambda p, x: jnp.mean((x @ p["w"] - 1.0) ** 2)  # noqa: E731
    init, step = make_train_step(loss, name, optax.sgd(0.05))
    s0 = init(p, jax.random.key(2))
    s_scan, ms = jax.jit(lambda s: jax.lax.scan(lambda c, _: step(c, x), s, None, length=4))(s0)
    s = s0
    jstep = jax.jit(step)
    for _ in range(4):
        s, m = jstep(s, x)
    np.testing.assert_allclose(s_scan.params["w"], s.params["w"], rtol=1e-6)
    assert set(m) == {"loss", "loss_scale", "overflow", "skipped", "grad_norm"}
    assert float(ms["loss"][-1]) < float(ms["loss"][0])
    assert int(s_scan.step) == 4


@pytest.mark.parametrize("name", [n for n in list_recipes() if not n.startswith("int8_ptq")])
def test_every_training_recipe_trains_a_tiny_mlp(name):
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    p = {"w1": jax.random.normal(k1, (8, 16)) * 0.4, "b1": jnp.zeros(16), "w2": jax.random.normal(k2, (16, 1)) * 0.4}
    x = jax.random.normal(k3, (64, 8))
    y = jnp.sum(x[:, :3], axis=1, keepdims=True)

    def loss(p, b):
        h = jax.nn.relu(b[0] @ p["w1"] + p["b1"][None])
        return jnp.mean((h @ p["w2"] - b[1]) ** 2)

    init, step = make_train_step(loss, name, optax.sgd(0.05))
    state = init(p, 1, (x, y))  # the batch: learned-step recipes (int8_lsq) initialise their steps on it
    s, m = jax.jit(lambda s: jax.lax.scan(lambda c, _: step(c, (x, y)), s, None, length=15))(state)
    losses = np.asarray(m["loss"])
    skipped = np.asarray(m["skipped"])  # dynamic loss scaling may overflow at first (init 2^16)
    assert np.all(np.isfinite(losses)) and not np.any(skipped[5:]) and np.all(np.diff(skipped.astype(int)) <= 0)
    assert losses[-1] < 0.7 * losses[0], losses
    assert int(s.step) == 15


def test_delayed_scaling_amax_inside_a_scan_is_the_largest_over_iterations():
    from asicsim._src.emulate import emulate

    xs = jnp.stack([jnp.full((2, 3), v) for v in (1.0, -7.0, 2.0, 0.5)])  # amax per step 1, 7, 2, .5

    def f(w, xs):
        def body(c, x):
            return c + jnp.sum(x @ w), None

        return jax.lax.scan(body, jnp.float32(0), xs)[0] + jnp.sum(xs[0] @ (2 * w))

    w = jnp.ones((3, 4))
    seen = jax.grad(lambda m: emulate(f, "fp8_hybrid")(w, xs, asicsim_amax=m))(jnp.zeros((4, 3), jnp.float32))
    # site 0: the GEMM in the scan body (max over iterations, not the sum 10.5); site 1: after it
    np.testing.assert_allclose(seen[0, :2], [7.0, 1.0])
    np.testing.assert_allclose(seen[1, :2], [1.0, 2.0])
    assert np.all(seen[2:] == 0)


def _scan_bodies(jaxpr):
    """Every scan body in ``jaxpr``, nested calls and scans included."""
    for eqn in jaxpr.eqns:
        for v in eqn.params.values():
            inner = getattr(v, "jaxpr", v)
            if hasattr(inner, "eqns"):
                if eqn.primitive.name == "scan":
                    yield inner
                yield from _scan_bodies(inner)


def test_delayed_scaling_rounds_a_scan_constant_weight_once_outside_the_loop():
    # A GRU-like recurrence: the scan-constant weight's delayed-scaling estimate is the same in
    # every iteration, so its rounding (a division by the scale, in the weight's shape) is
    # hoisted out of the loop, forward and backward; the amax it records is still the max.
    w = jax.random.normal(jax.random.key(1), (6, 18))
    xs = jax.random.normal(jax.random.key(2), (5, 4, 6))

    def f(w, xs):
        def body(h, x):
            h = jnp.tanh(x + h @ w[:, :6])
            return h, jnp.sum(h)
        return jnp.sum(jax.lax.scan(body, jnp.zeros((4, 6)), xs)[1])

    from asicsim._src.emulate import emulate

    def run(w, m):
        return emulate(f, "fp8_hybrid")(w, xs, asicsim_amax=m)

    m = jnp.zeros((2, 3), jnp.float32).at[0].set(jnp.array([3.0, 2.5, 0.7]))
    jaxpr = jax.make_jaxpr(jax.value_and_grad(run, argnums=(0, 1)))(w, m).jaxpr
    bodies = list(_scan_bodies(jaxpr))
    assert len(bodies) >= 2  # the forward scan and its transpose
    for body in bodies:
        assert not [e for e in body.eqns if e.primitive.name == "div" and e.outvars[0].aval.shape == (6, 6)]
    _, (_, seen) = jax.value_and_grad(run, argnums=(0, 1))(w, m)
    assert float(seen[0, 1]) == float(jnp.max(jnp.abs(w[:, :6])))


def test_delayed_scaling_with_more_sites_than_the_history_keeps_says_so():
    """A model with more GEMM sites than the TrainState's history rows is an error naming the
    ``max_sites`` it needs, not a silent fall-back to current scaling for the extra sites."""
    def loss(p, b):
        h = b
        for _ in range(3):
            h = jnp.tanh(h @ p)
        return jnp.sum(h)

    p, batch = jnp.eye(4) * 0.5, jnp.ones((2, 4))
    init, step = make_train_step(loss, "fp8_hybrid", optax.sgd(0.1), max_sites=2)
    with pytest.raises(ValueError, match=r"3 GEMM/convolution sites .* rows for 2.*max_sites=3"):
        step(init(p, 0), batch)
    init, step = make_train_step(loss, "fp8_hybrid", optax.sgd(0.1), max_sites=3)
    state, _ = step(init(p, 0), batch)
    assert (np.asarray(state.amax_history[:, 0]) > 0).all()  # every site recorded its amax
