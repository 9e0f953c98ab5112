"""Learned step sizes (``scaling = "lsq"``) at GEMMs inside control flow, each model written as users
write it (a scan over stacked layers, an RNN's time scan, a ``while_loop``, a ``cond``, a
``jax.checkpoint``'d layer), against the same model calling ``lsq_quantize`` itself: the steps
:mod:`asicsim._src.emulate.lsq_sites` documents (per layer in a layer scan, one for every iteration of a
time scan or loop, per branch of a cond) trained by the same adam, bit for bit after 3 steps."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_lsq_recipes import _digits, _recipe

from asicsim._src.emulate import emulate, lsq_init, lsq_quantize, make_train_step
from asicsim._src.emulate.transform import init_lsq_steps

WF, AF = "int4", "uint4"  # the recipe _recipe() builds: int4 weights, uint4 activations


def _q(x, s, act=True):
    return lsq_quantize(x, s, AF if act else WF, batch_axes=0 if act else ())


def _init(n_layers=2, hidden=16):
    ks = jax.random.split(jax.random.key(1), 6)
    return {"w_in": jax.random.normal(ks[0], (64, hidden)) * 0.125,
            "ws": jax.random.normal(ks[1], (n_layers, hidden, hidden)) * 0.25,
            "w_out": jax.random.normal(ks[2], (hidden, 10)) * 0.25,
            "w_alt": jax.random.normal(ks[3], (hidden, 10)) * 0.25}


def _xent(logits, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


# --- a scan over stacked layers: a step per layer, stacked (layers, ...) --------------------------
def layers_model(p, batch):
    h = jax.nn.relu(batch[0] @ p["w_in"])
    h = jax.lax.scan(lambda h, w: (jax.nn.relu(h @ w), None), h, p["ws"])[0]
    return _xent(h @ p["w_out"], batch[1])


def layers_hand(p, batch):
    s = p["s"]
    h = jax.nn.relu(_q(batch[0], s[0]) @ _q(p["w_in"], s[1], False))
    h = jax.lax.scan(lambda h, ws: (jax.nn.relu(_q(h, ws[1]) @ _q(ws[0], ws[2], False)), None),
                     h, (p["ws"], s[2], s[3]))[0]
    return _xent(_q(h, s[4]) @ _q(p["w_out"], s[5], False), batch[1])


# --- an RNN's time scan: one step per operand for every time step ----------------------------------
def _frames(x):
    return x.reshape(x.shape[0], 4, 16).transpose(1, 0, 2)  # (time, batch, 16)


def rnn_model(p, batch):
    w_x, w_h = p["w_in"][:16], p["ws"][0]
    h0 = jnp.full((batch[0].shape[0], 16), 0.5, jnp.float32)
    h = jax.lax.scan(lambda h, x: (jnp.tanh(x @ w_x + h @ w_h), None), h0, _frames(batch[0]))[0]
    return _xent(h @ p["w_out"], batch[1])


def rnn_hand(p, batch):
    s = p["s"]
    w_x, w_h = p["w_in"][:16], p["ws"][0]
    h0 = jnp.full((batch[0].shape[0], 16), 0.5, jnp.float32)

    def cell(h, x):
        return jnp.tanh(_q(x, s[0]) @ _q(w_x, s[1], False) + _q(h, s[2]) @ _q(w_h, s[3], False)), None

    h = jax.lax.scan(cell, h0, _frames(batch[0]))[0]
    return _xent(_q(h, s[4]) @ _q(p["w_out"], s[5], False), batch[1])


# --- a while loop: the same layer applied twice ----------------------------------------------------
def while_model(p, batch):
    h = jax.nn.relu(batch[0] @ p["w_in"])
    _, h = jax.lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, jax.nn.relu(c[1] @ p["ws"][0])), (0, h))
    return _xent(h @ p["w_out"], batch[1])


def while_hand(p, batch):
    s = p["s"]
    h = jax.nn.relu(_q(batch[0], s[0]) @ _q(p["w_in"], s[1], False))
    _, h = jax.lax.while_loop(lambda c: c[0] < 2, lambda c: (
        c[0] + 1, jax.nn.relu(_q(c[1], s[2]) @ _q(p["ws"][0], s[3], False))), (0, h))
    return _xent(_q(h, s[4]) @ _q(p["w_out"], s[5], False), batch[1])


# --- a cond: each branch its own steps, branch 0 (lax.cond's false branch) first ------------------
def cond_model(p, batch):
    h = jax.nn.relu(batch[0] @ p["w_in"])
    logits = jax.lax.cond(jnp.mean(batch[0]) > 0.1, lambda h: h @ p["w_out"], lambda h: h @ p["w_alt"], h)
    return _xent(logits, batch[1])


def cond_hand(p, batch):
    s = p["s"]
    h = jax.nn.relu(_q(batch[0], s[0]) @ _q(p["w_in"], s[1], False))
    logits = jax.lax.cond(jnp.mean(batch[0]) > 0.1, lambda h: _q(h, s[4]) @ _q(p["w_out"], s[5], False),
                          lambda h: _q(h, s[2]) @ _q(p["w_alt"], s[3], False), h)
    return _xent(logits, batch[1])


# --- a jax.checkpoint'd (remat) layer ---------------------------------------------------------------
def remat_model(p, batch):
    h = jax.checkpoint(lambda x, w: jax.nn.relu(x @ w))(batch[0], p["w_in"])
    return _xent(h @ p["w_out"], batch[1])


def remat_hand(p, batch):
    s = p["s"]
    h = jax.checkpoint(lambda x, w: jax.nn.relu(_q(x, s[0]) @ _q(w, s[1], False)))(batch[0], p["w_in"])
    return _xent(_q(h, s[2]) @ _q(p["w_out"], s[3], False), batch[1])


def _initial(name, p, x):
    """The initial steps by hand (lsq_init, Section 2.1) where .lsq_sites says they are taken."""
    i = lambda a, act=True: lsq_init(a, AF if act else WF)  # noqa: E731
    h = jax.nn.relu(x @ p["w_in"])  # fp32: the recipe's first GEMM is exact only on its own grid,
    # so later activations are compared loosely below; the first ones exactly
    if name == "layers":
        h1 = jax.nn.relu(h @ p["ws"][0])
        h2 = jax.nn.relu(h1 @ p["ws"][1])
        return [i(x), i(p["w_in"], False), jnp.stack([i(h), i(h1)]), jnp.stack([i(w, False) for w in p["ws"]]),
                i(h2), i(p["w_out"], False)]
    if name == "rnn":  # a time scan's: the mean over its iterations (of the frames: all frames')
        h = jnp.full((x.shape[0], 16), 0.5)
        hs = []
        for xt in _frames(x):
            hs.append(i(h))
            h = jnp.tanh(xt @ p["w_in"][:16] + h @ p["ws"][0])
        steps = [i(_frames(x)), i(p["w_in"][:16], False), jnp.mean(jnp.stack(hs)), i(p["ws"][0], False)]
        return [*steps, i(h), i(p["w_out"], False)]
    if name == "while":
        h2 = jax.nn.relu(jax.nn.relu(h @ p["ws"][0]) @ p["ws"][0])
        return [i(x), i(p["w_in"], False), i(h), i(p["ws"][0], False), i(h2), i(p["w_out"], False)]
    if name == "cond":  # both branches, the one not taken too
        return [i(x), i(p["w_in"], False), i(h), i(p["w_alt"], False), i(h), i(p["w_out"], False)]
    return [i(x), i(p["w_in"], False), i(h), i(p["w_out"], False)]


MODELS = {"layers": (layers_model, layers_hand), "rnn": (rnn_model, rnn_hand), "cond": (cond_model, cond_hand),
          "remat": (remat_model, remat_hand)}  # a while loop has no reverse-mode derivative: forward below


@pytest.mark.parametrize("name", list(MODELS))
def test_lsq_in_control_flow_trains_as_the_hand_written_model(name):
    """make_train_step on the recipe against the hand-written model, same adam, same initial
    steps: losses, weights and steps equal bit for bit after 3 steps; the initial steps are
    lsq_init where the module says. On the old code every model was refused ("not yet")."""
    model, hand_loss = MODELS[name]
    batch = _digits(64)
    p0 = _init()
    tx = optax.adam(1e-2)
    init, step = make_train_step(model, _recipe(), tx)
    state = init(p0, 0, batch)
    steps0 = list(state.lsq[0])
    want = jax.jit(_initial, static_argnums=0)(name, p0, batch[0])
    assert [s.shape for s in steps0] == [w.shape for w in want]
    for k, (got, ref) in enumerate(zip(steps0, want, strict=True)):
        # inputs and weights: the same float32 mean; later activations: of rounded operands
        np.testing.assert_allclose(got, ref, rtol=1e-6 if k < 2 or k % 2 else 0.3)

    hand = {**p0, "s": steps0}
    opt = tx.init(hand)

    @jax.jit
    def hand_step(p, o):
        loss, g = jax.value_and_grad(hand_loss)(p, batch)
        upd, o = tx.update(g, o, p)
        return optax.apply_updates(p, upd), o, loss

    stepj = jax.jit(step)
    with jax.numpy_dtype_promotion("standard"):
        for _ in range(3):
            state, metrics = stepj(state, batch)
            hand, opt, loss = hand_step(hand, opt)
            assert np.array_equal(metrics["loss"], loss)
    # cond: measured, the losses equal bit for bit, one step and w_in apart from step 2 on (XLA:CPU
    # sums the gradient of the taken branch in another order than in the hand model; adam's
    # division by sqrt(v) magnifies it): 1 ulp on jax 0.10.2, 10 ulp on one of w_in's 1024 on 0.8.0
    same = np.testing.assert_array_equal if name != "cond" else (
        lambda a, b: np.testing.assert_array_max_ulp(np.asarray(a), np.asarray(b), maxulp=16))
    for got, ref in zip(state.lsq[0], hand["s"], strict=True):
        same(got, ref)
    for k in p0:
        same(state.params[k], hand[k])
    moved = [bool(np.any(np.asarray(a) != np.asarray(b))) for a, b in zip(steps0, state.lsq[0], strict=True)]
    if name == "cond":  # the branch not taken (branch 0) gets no gradient: its steps stay
        assert moved == [True, True, False, False, True, True]
    else:
        assert all(moved)


def test_an_rnn_from_a_zero_state_starts_from_positive_steps_and_trains():
    """An RNN whose state starts at 0 (as every GRU/LSTM here does): the recurrent operand is zero
    at the first time step, so a first-iteration initial step would be lsq_init(0) = 0 and every
    forward NaN. The time scan's initial step is the mean over iterations of lsq_init of each
    step's operand (by hand below: 0 for h_0, then lsq_init(h_t) of the fp32 recurrence, loosely:
    the emulated h_t are of rounded operands); the frames' and weights' exactly as lsq_init of
    all frames / of the weight; a training step's loss is finite. On the old code the recurrent
    step was 0 and the loss NaN."""
    def zero_rnn(p, batch):
        h0 = jnp.zeros((batch[0].shape[0], 16), jnp.float32)
        h = jax.lax.scan(lambda h, x: (jnp.tanh(x @ p["w_in"][:16] + h @ p["ws"][0]), None), h0,
                         _frames(batch[0]))[0]
        return _xent(h @ p["w_out"], batch[1])

    batch, p0 = _digits(32), _init()
    init, step = make_train_step(zero_rnn, _recipe(), optax.adam(1e-2))
    state = init(p0, 0, batch)
    got = [np.asarray(s) for s in state.lsq[0]]
    h, hs = jnp.zeros((32, 16)), []
    for xt in _frames(batch[0]):
        hs.append(float(lsq_init(h, AF)) if np.any(np.asarray(h)) else 0.0)
        h = jnp.tanh(xt @ p0["w_in"][:16] + h @ p0["ws"][0])
    assert hs[0] == 0.0 and got[2] > 0
    np.testing.assert_allclose(got[2], np.mean(hs), rtol=0.3)
    np.testing.assert_allclose(got[0], lsq_init(_frames(batch[0]), AF), rtol=1e-6)
    np.testing.assert_allclose(got[3], lsq_init(p0["ws"][0], WF), rtol=1e-6)  # float32 means: jit vs eager
    with jax.numpy_dtype_promotion("standard"):  # optax's adam mixes Python floats with int32 counts
        state, metrics = jax.jit(step)(state, batch)
    assert np.isfinite(metrics["loss"]) and all(np.isfinite(np.asarray(s)).all() for s in state.lsq[0])


def test_a_while_loop_takes_one_step_per_operand_for_every_iteration():
    """A while loop (no reverse-mode derivative in JAX: forward only): the initial steps are the
    first iteration's (_initial), and with given steps the emulated loss equals the hand model's."""
    batch, p0 = _digits(64), _init()
    steps = jax.jit(lambda p, b: init_lsq_steps(while_model, _recipe(), p, b))(p0, batch)
    want = jax.jit(_initial, static_argnums=0)("while", p0, batch[0])
    for k, (got, ref) in enumerate(zip(steps, want, strict=True)):
        np.testing.assert_allclose(got, ref, rtol=1e-6 if k < 2 or k % 2 else 0.3)
    steps = [s * f for s, f in zip(steps, (1.1, 0.9, 1.2, 0.8, 1.0, 1.3), strict=True)]
    got = jax.jit(lambda p, s: emulate(while_model, _recipe())(p, batch, asicsim_lsq=s))(p0, steps)
    assert np.array_equal(got, jax.jit(while_hand)({**p0, "s": steps}, batch))


def test_nested_layer_scans_take_steps_per_layer_of_each():
    """A scan of scans over (2, 3) stacked weights: each weight's step is its own layer's
    (shape (2, 3)), equal to lsq_init of that weight; given steps are indexed the same way."""
    ws = jax.random.normal(jax.random.key(2), (2, 3, 8, 8))
    x = jax.random.normal(jax.random.key(3), (4, 8))

    def f(ws, x):
        inner = lambda h, w: (jnp.tanh(h @ w), None)  # noqa: E731
        return jax.lax.scan(lambda h, w2: (jax.lax.scan(inner, h, w2)[0], None), x, ws)[0]

    pol = _recipe()
    s_act, s_w = jax.jit(lambda ws, x: tuple(init_lsq_steps(f, pol, ws, x, weights=0)))(ws, x)
    assert s_act.shape == s_w.shape == (2, 3)
    want = np.array([[lsq_init(ws[i, j], WF) for j in range(3)] for i in range(2)])
    np.testing.assert_allclose(s_w, want, rtol=1e-6)

    def hand(ws, x, sa, sw):
        def inner(h, a):
            return jnp.tanh(_q(h, a[1]) @ _q(a[0], a[2], False)), None
        return jax.lax.scan(lambda h, a: (jax.lax.scan(inner, h, a)[0], None), x, (ws, sa, sw))[0]

    sa, sw = s_act * 1.1, s_w * 0.9
    got = jax.jit(lambda *a: emulate(f, pol)(*a[:2], asicsim_lsq=list(a[2:])))(ws, x, sa, sw)
    assert np.array_equal(got, jax.jit(hand)(ws, x, sa, sw))


def test_a_custom_vjp_with_lsq_operands_is_refused():
    """A user's custom_vjp gives the gradients inside it: an LSQ step there would get none."""
    @jax.custom_vjp
    def f(x, w):
        return x @ w

    f.defvjp(lambda x, w: (x @ w, (x, w)), lambda r, g: (g @ r[1].T, r[0].T @ g))
    w, x = jnp.ones((4, 4)), jnp.ones((2, 4))
    with pytest.raises(ValueError, match="inside a custom_vjp or custom_jvp function"):
        jax.jit(emulate(f, _recipe()))(x, w, asicsim_lsq=[jnp.float32(1)] * 2)


def test_a_step_driven_below_zero_is_clamped_to_the_minimum():
    """An update that drives every step negative (an optimizer adding -10 to everything): the
    steps are clamped to LSQ_MIN_STEP = 1e-5 after the update (as quant_mp's LSQ clamps its scale
    to eps = 1e-5), so the next loss is finite. On the old code the steps went to about -10 and
    the next loss was NaN (lsq_quantize's output for an invalid traced step)."""
    from test_lsq_recipes import _loss, _params

    from asicsim._src.emulate.lsq_sites import LSQ_MIN_STEP

    down = optax.GradientTransformation(lambda p: optax.EmptyState(),
                                        lambda u, s, p=None: (jax.tree_util.tree_map(lambda a: jnp.full_like(a, -10.0), u), s))
    init, step = make_train_step(_loss, _recipe(), down)
    batch = _digits(32)
    state = init(_params(), 0, batch)
    stepj = jax.jit(step)
    state, _ = stepj(state, batch)
    assert all(np.all(np.asarray(s) == np.float32(LSQ_MIN_STEP)) for s in state.lsq[0])
    state, metrics = stepj(state, batch)
    assert np.isfinite(metrics["loss"])
