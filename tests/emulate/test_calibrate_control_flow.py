"""Issue 29 item 15: calibration sees what loops and branches compute.

``calibrate()`` through a ``lax.while_loop`` (a KV-cache generation loop) recorded 0 static rows
and said nothing (or died in JAX's reverse mode, or on integer tokens as the output). Now every
execution of a GEMM operand with static scaling is observed: a loop's row gets the largest amax
over all its iterations and batches, whatever the trip count. Checked against the same model
unrolled in Python (straight-line code: one row per GEMM per step, the loop's row their max),
against amaxes known in closed form for every structural primitive the emulator runs (while,
fori_loop, scan, cond, switch, checkpoint, custom_vjp, nested loops, layer scans), and an
operand no batch reached is named (warning + ``Policy.uncalibrated``), never scaled dynamically
in silence.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from asicsim._src.emulate import emulate, load_recipe
from asicsim._src.emulate.ptq import UncalibratedSites, calibrate, observe_amax

V, D, T, B = 12, 8, 4, 2
RNG = np.random.default_rng(0)
GEN = {"emb": jnp.asarray(RNG.normal(size=(V, D)), jnp.float32),
       **{k: jnp.asarray(RNG.normal(size=(D, D)) / np.sqrt(D), jnp.float32) for k in ("wq", "wk", "wv")},
       "out": jnp.asarray(RNG.normal(size=(D, V)), jnp.float32)}


def decode_step(p, i, tok, kc, vc):
    """One decode step with a KV cache: 7 GEMMs (embedding as one-hot x table, q, k, v,
    scores, context, logits), the next token by argmax."""
    x = jax.nn.one_hot(tok, V) @ p["emb"]
    q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
    kc = lax.dynamic_update_slice(kc, k[:, None], (0, i, 0))
    vc = lax.dynamic_update_slice(vc, v[:, None], (0, i, 0))
    s = jnp.where(jnp.arange(T) <= i, jnp.einsum("bd,btd->bt", q, kc), -1e9)
    ctx = jnp.einsum("bt,btd->bd", jax.nn.softmax(s), vc)
    return jnp.argmax(ctx @ p["out"], -1).astype(jnp.int32), kc, vc


def generate(p, batch, out: str = "tokens"):
    """Up to T tokens from a prompt token, as many as the batch asks (a data-dependent trip
    count); returns the tokens (integers) or the key cache (floats)."""
    tok0, n = batch

    def body(c):
        i, tok, kc, vc, toks = c
        tok, kc, vc = decode_step(p, i, tok, kc, vc)
        return i + 1, tok, kc, vc, toks.at[:, i].set(tok)

    zeros = jnp.zeros((B, T, D), jnp.float32)
    c = lax.while_loop(lambda c: c[0] < n, body, (0, tok0, zeros, zeros, jnp.zeros((B, T), jnp.int32)))
    return c[4] if out == "tokens" else c[2]


def generate_unrolled(p, batch, n: int):
    tok, kc, vc = batch[0], jnp.zeros((B, T, D), jnp.float32), jnp.zeros((B, T, D), jnp.float32)
    toks = []
    for i in range(n):
        tok, kc, vc = decode_step(p, i, tok, kc, vc)
        toks.append(tok)
    return jnp.stack(toks, 1)


def rows(pol) -> np.ndarray:
    return np.asarray([v for _, v in pol.static_scales], np.float64)


def unrolled_reference(step_fn, params, batches, k: int) -> np.ndarray:
    """The loop's rows from the unrolled model (straight-line code, int8_ptq_tensor): per batch,
    rows t*k + j of its n steps; the loop's row j is their max over t and batches."""
    ref = np.zeros((k, 3))
    for b in batches:
        n = int(b[1])
        u = calibrate(lambda p, bb, n=n: step_fn(p, bb, n), params, [b], "int8_ptq_tensor")
        ref = np.maximum(ref, rows(u).reshape(n, k, 3).max(axis=0))
    return ref


BATCHES = [(jnp.array([1, 5], jnp.int32), jnp.int32(2)), (jnp.array([3, 7], jnp.int32), jnp.int32(3))]


@pytest.mark.slow  # ~40 s on 2 cores; the while loop is also calibrated in the structural-primitive test below
def test_kv_cache_generation_loop_is_calibrated_over_every_iteration():
    # the old code: "grad requires real-valued outputs" (the loop returns tokens)
    pol = calibrate(generate, GEN, BATCHES, "int8_ptq_tensor")
    assert pol.uncalibrated == ()
    np.testing.assert_array_equal(rows(pol), unrolled_reference(generate_unrolled, GEN, BATCHES, 7))
    assert rows(pol)[0, 0] == 1.0 and np.all(rows(pol)[:, 0] > 0)  # the one-hot tokens; every row


@pytest.mark.slow  # ~15 s: two more calibrations of the loop
def test_the_same_loop_with_a_float_output_and_its_scales_in_use():
    # the old code: JAX's "Reverse-mode differentiation does not work for lax.while_loop"
    def cache(p, b):
        return generate(p, b, "cache")

    pol = calibrate(cache, GEN, BATCHES, "int8_ptq_tensor")
    assert pol.static_scales == calibrate(generate, GEN, BATCHES, "int8_ptq_tensor").static_scales
    x = BATCHES[1]  # the loop's GEMMs scale by them: not what the uncalibrated recipe gives
    assert not np.array_equal(np.asarray(emulate(cache, pol)(GEN, x)), np.asarray(emulate(cache, "int8_ptq_tensor")(GEN, x)))


@pytest.mark.slow  # ~15 s: two passes of two calibrations
def test_histogram_calibrators_see_every_iteration_too():
    entropy = load_recipe("int8_ptq_entropy")
    pol = calibrate(generate, GEN, BATCHES, entropy)
    top = rows(calibrate(generate, GEN, BATCHES, dataclasses.replace(entropy, calibration_method="max")))
    assert pol.uncalibrated == () and len(pol.static_scales) == 7
    assert np.all(rows(pol)[:, 0] > 0) and np.all(rows(pol)[:, 0] <= top[:, 0])  # entropy: at most the max


@pytest.mark.slow  # ~15 s: a Flax attention decoder, calibrated and unrolled
def test_a_flax_decoder_with_its_kv_cache_in_a_while_loop():
    nn = pytest.importorskip("flax.linen")

    class Step(nn.Module):
        @nn.compact
        def __call__(self, tok):  # (B,) tokens -> (B, V) logits: one decode step
            x = nn.Dense(D, use_bias=False, name="embed")(jax.nn.one_hot(tok, V))[:, None]
            h = nn.MultiHeadDotProductAttention(num_heads=2, decode=True, name="attn")(x, x)
            return nn.Dense(V, name="head")(jnp.tanh(h[:, 0]))

    model = Step()
    variables = model.init(jax.random.key(0), jnp.zeros((B,), jnp.int32))
    params, cache0 = {"params": variables["params"]}, variables["cache"]

    def step(p, tok, cache):
        logits, upd = model.apply({**p, "cache": cache}, tok, mutable=["cache"])
        return jnp.argmax(logits, -1).astype(jnp.int32), upd["cache"]

    def flax_generate(p, batch):
        tok0, n = batch

        def body(c):
            i, tok, cache, toks = c
            tok, cache = step(p, tok, cache)
            return i + 1, tok, cache, toks.at[:, i].set(tok)

        init = (0, tok0, jax.tree.map(jnp.zeros_like, cache0), jnp.zeros((B, T), jnp.int32))
        return lax.while_loop(lambda c: c[0] < n, body, init)[3]

    def flax_unrolled(p, batch, n):
        tok, cache, toks = batch[0], jax.tree.map(jnp.zeros_like, cache0), []
        for _ in range(n):
            tok, cache = step(p, tok, cache)
            toks.append(tok)
        return jnp.stack(toks, 1)

    pol = calibrate(flax_generate, params, BATCHES, "int8_ptq_tensor")
    assert pol.uncalibrated == () and len(pol.static_scales) == 8  # embed, q, k, v, 2 einsums, out, head
    np.testing.assert_array_equal(rows(pol), unrolled_reference(flax_unrolled, params, BATCHES, 8))


# --- every structural primitive: GEMM operands known in closed form ------------------------------
# h is scaled by 1.5 per iteration outside the GEMMs (float32, as numpy does it), each GEMM reads h
# (or a fixed multiple of it): the static scale of its row is the largest |h| over every execution.

W = jnp.asarray(RNG.normal(size=(D, D)), jnp.float32)
X1 = jnp.asarray(RNG.normal(size=(B, D)), jnp.float32)
X2 = jnp.asarray(RNG.normal(size=(B, D)) * 3, jnp.float32)


def amax_of(x, times: int = 0, factor: float = 1.0) -> float:
    """max |x * 1.5 ** t| over t < times (t = 0 only when times is 0), times ``factor``, in float32."""
    h, best = np.asarray(x, np.float32), 0.0
    for _ in range(max(times, 1)):
        best = max(best, float(np.abs(h * np.float32(factor)).max()))
        h = h * np.float32(1.5)
    return best


def while_fn(w, b):
    x, n = b

    def body(c):
        return c[0] + 1, c[1] * 1.5, c[2] + c[1] @ w

    return lax.while_loop(lambda c: c[0] < n, body, (0, x, jnp.zeros((B, D))))[2]


def fori_static(w, b):
    return lax.fori_loop(0, 4, lambda i, c: (c[0] * 1.5, c[1] + c[0] @ w), (b[0], jnp.zeros((B, D))))[1]


def fori_traced(w, b):
    return lax.fori_loop(0, b[1], lambda i, c: (c[0] * 1.5, c[1] + c[0] @ w), (b[0], jnp.zeros((B, D))))[1]


def time_scan(w, b):
    xs = jnp.stack([b[0], 2 * b[0], -0.5 * b[0]])
    return lax.scan(lambda c, x: (c + x @ w, None), jnp.zeros((B, D)), xs)[0]


def cond_fn(w, b):  # branch 0 (false) is row 0, branch 1 (true) row 1
    return lax.cond(b[1] > 2, lambda h: (2 * h) @ w, lambda h: h @ w, b[0])


def remat_fn(w, b):
    return jax.checkpoint(lambda h: (h * 3) @ w)(b[0])


def nested_jit(w, b):
    return jax.jit(lambda h: (h * 3) @ w)(b[0])


@jax.custom_vjp
def half_gemm(h, w):
    return (h * 0.5) @ w


half_gemm.defvjp(lambda h, w: (half_gemm(h, w), (h, w)), lambda r, g: (g @ r[1].T * 0.5, (r[0] * 0.5).T @ g))


def custom_vjp_fn(w, b):
    return half_gemm(b[0], w)


def while_in_scan(w, b):
    def outer(c, x):
        inner = lax.while_loop(lambda s: s[0] < b[1], lambda s: (s[0] + 1, s[1] * 1.5, s[2] + s[1] @ w),
                               (0, x, jnp.zeros((B, D))))
        return c + inner[2], None

    return lax.scan(outer, jnp.zeros((B, D)), jnp.stack([b[0], 2 * b[0]]))[0]


def scan_in_while(w, b):
    def body(c):
        ys = lax.scan(lambda a, x: (a + x @ w, None), jnp.zeros((B, D)), jnp.stack([c[1], -2 * c[1]]))[0]
        return c[0] + 1, c[1] * 1.5, c[2] + ys

    return lax.while_loop(lambda c: c[0] < b[1], body, (0, b[0], jnp.zeros((B, D))))[2]


STRUCTURES = [  # (function, {row: expected lhs amax over the batches (X1, 3) and (X2, 1)})
    (while_fn, {0: max(amax_of(X1, 3), amax_of(X2, 1))}),
    (fori_static, {0: max(amax_of(X1, 4), amax_of(X2, 4))}),
    (fori_traced, {0: max(amax_of(X1, 3), amax_of(X2, 1))}),
    (time_scan, {0: max(amax_of(X1, factor=2), amax_of(X2, factor=2))}),
    (cond_fn, {0: amax_of(X2), 1: amax_of(X1, factor=2)}),
    (remat_fn, {0: max(amax_of(X1, factor=3), amax_of(X2, factor=3))}),
    (nested_jit, {0: max(amax_of(X1, factor=3), amax_of(X2, factor=3))}),
    (custom_vjp_fn, {0: max(amax_of(X1, factor=0.5), amax_of(X2, factor=0.5))}),
    (while_in_scan, {0: max(amax_of(X1, 3, 2), amax_of(X2, 1, 2))}),
    (scan_in_while, {0: max(amax_of(X1, 3, 2), amax_of(X2, 1, 2))}),
]


def all_structures(w, b):
    """Every structure of STRUCTURES one after the other (their rows in that order)."""
    return sum(fn(w, b) for fn, _ in STRUCTURES)


@pytest.mark.parametrize("method", ["max", pytest.param("percentile", marks=pytest.mark.slow)])
def test_every_structural_primitive_is_calibrated_over_all_its_executions(method):
    pol = dataclasses.replace(load_recipe("int8_ptq_tensor"), calibration_method=method,
                              calibration_percentile=100.0 if method == "percentile" else 99.99)
    # the old code: JAX's "Reverse-mode differentiation does not work for lax.while_loop"
    cal = calibrate(all_structures, W, [(X1, jnp.int32(3)), (X2, jnp.int32(1))], pol)
    assert cal.uncalibrated == ()
    got = rows(cal)
    want = [(fn.__name__, amax) for fn, by_row in STRUCTURES for _, amax in sorted(by_row.items())]
    assert got.shape == (len(want), 3) and not got[:, 1:].any()  # the weight: its own amax (tensor)
    for row, (name, amax) in enumerate(want):
        if method == "max":
            assert got[row, 0] == amax, name
        else:  # the 100th percentile: the edge of the top non-empty bin of 2048 over [0, max]
            assert got[row, 0] == pytest.approx(amax, rel=2 / 2048), name
    seen = observe_amax(all_structures, "int8_ptq_tensor", W, (X1, jnp.int32(3)))  # every operand, one call
    ran = [name != "cond_fn" or row == 5 for row, (name, _) in enumerate(want)]  # (X1, 3) takes branch 1
    assert [bool(v) for v in seen[:len(want), 0] > 0] == ran
    assert np.all(seen[:len(want), 1][ran] == float(jnp.abs(W).max()))


def switch_fn(w, b):
    return lax.switch(b[1], [lambda h: h @ w, lambda h: (2 * h) @ w, lambda h: (3 * h) @ w], b[0])


def test_an_operand_no_batch_reached_is_named_not_scaled_dynamically_in_silence():
    batches = [(X1, jnp.int32(0)), (X2, jnp.int32(2))]  # branch 1 is never taken
    with pytest.warns(UncalibratedSites, match=r"1 GEMM operand\(s\) \(row 1 lhs\) never executed"):
        pol = calibrate(switch_fn, W, batches, "int8_ptq_tensor")
    assert pol.uncalibrated == ((1, 0),)
    assert rows(pol)[:, 0].tolist() == [amax_of(X1), 0.0, amax_of(X2, factor=3)]
    # a loop that never iterates on any batch, after a GEMM that runs
    def loop_after(w, b):
        return while_fn(w, (b[0] @ w, jnp.int32(0)))

    with pytest.warns(UncalibratedSites, match=r"row 1 lhs\) never executed"):
        pol = calibrate(loop_after, W, batches, "int8_ptq_tensor")
    assert pol.uncalibrated == ((1, 0),)
    zeros = [(jnp.zeros((B, D)), jnp.int32(0))]
    with pytest.warns(UncalibratedSites, match=r"row 0 lhs\) only ever zero"):
        assert calibrate(switch_fn, W, zeros, "int8_ptq_tensor").uncalibrated == ((0, 0), (1, 0), (2, 0))


@pytest.mark.parametrize(("fn", "batches", "recipe", "message"), [
    (while_fn, [(X1, jnp.int32(0))], "int8_ptq_tensor", r"no GEMM operand with static scaling ran on the "
                                                        r"calibration batches \(1 GEMM operand\(s\) \(row 0 lhs\)"),
    (while_fn, [(X1, jnp.int32(2))], "bf16", "recipe 'bf16' has no role with scaling = 'static'"),
    (lambda w, b: b[0] * 2.0, [(X1, jnp.int32(2))], "int8_ptq_tensor",
     "has no GEMM or convolution operand with static scaling"),
])
def test_calibration_that_cannot_calibrate_says_why(fn, batches, recipe, message):
    with pytest.raises(ValueError, match=message):
        calibrate(fn, W, batches, recipe)


def mlp(p, x):
    return jax.nn.relu(x @ p["w1"]) @ p["w2"]


def test_roles_are_the_sites_own_under_layer_rules():
    """The histogram calibrators took each operand's role from the recipe, not from its GEMM's
    layer rule: a static role that only a rule names was never observed."""
    pol = load_recipe({"name": "rule_static", "roles": {"weight": "bf16", "act": "bf16", "acc": "fp32"},
                       "layers": [{"match": "w2", "roles": {"act": {"format": "int8", "scaling": "static"}}}],
                       "calibration": {"method": "percentile", "percentile": 100.0}})
    p = {"w1": W, "w2": W * 0.5}
    cal = calibrate(mlp, p, [X1, X2], pol)
    first = emulate(lambda p, x: x @ p["w1"], dataclasses.replace(pol, layers=()))  # w1: the recipe's roles
    want = max(float(jnp.abs(jax.nn.relu(first(p, x))).max()) for x in (X1, X2))
    # the 100th percentile: the edge of the top non-empty bin of 2048 over [0, max]
    assert rows(cal)[0].tolist() == [0.0, 0.0, 0.0] and rows(cal)[1, 0] == pytest.approx(want, rel=2 / 2048)


@pytest.mark.slow  # ~3 s: two calibrations in two passes
def test_layer_scan_rows_are_per_layer_for_the_histogram_calibrators():
    """A scan over stacked layers: each layer its own row, for the histogram calibrators too (they
    numbered the middle layers by their site inside the iteration: rows 1 and 2 landed on row 0)."""
    params = (jnp.stack([W * s for s in (0.3, 0.5, 0.7, 0.9)]), jnp.asarray([1.0, 2.0, 3.0, 4.0]))

    def scanned(p, x):
        return lax.scan(lambda h, ws: (jnp.tanh(h @ ws[0]) * ws[1], None), x, p)[0]

    def unrolled(p, x):
        for i in range(4):
            x = jnp.tanh(x @ p[0][i]) * p[1][i]
        return x

    pol = dataclasses.replace(load_recipe("int8_ptq_tensor"), calibration_method="percentile")  # max: test_layer_rows
    a, b = calibrate(scanned, params, [X1, X2], pol), calibrate(unrolled, params, [X1, X2], pol)
    assert len(a.static_scales) == 4 and a.static_scales == b.static_scales
    assert len({v[0] for _, v in a.static_scales}) == 4  # four layers, four amaxes


def test_infer_says_which_rows_calibration_did_not_reach():
    from asicsim._src.workloads.post_training import _calibrate

    pol, how = _calibrate(load_recipe("int8_ptq_tensor"), switch_fn, W, [(X1, jnp.int32(0)), (X2, jnp.int32(2))])
    assert pol.uncalibrated == ((1, 0),)
    assert how == ("max calibration on 2 training batches; 1 GEMM operand(s) with static scaling it did not "
                   "observe (rows [1]: never reached, or only zeros) scale by their current amax")
