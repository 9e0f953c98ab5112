"""asicsim.emulate: the transformation on plain JAX, Flax (linen, nnx) and Equinox; composition
with jit/grad/vmap/scan; a jaxpr walk proving every GEMM went through the emulated path; the op
trace; recipes and their errors."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import linen, nnx

from asicsim._src.emulate import RecipeError, emulate, list_recipes, load_recipe, op_trace


def representable(x, dtype) -> bool:
    x = np.asarray(x, np.float32)
    return bool(np.array_equal(x, x.astype(dtype).astype(np.float32)))


def params(seed=0):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    return {"w1": jax.random.normal(k1, (8, 16)), "b1": jnp.zeros(16),
            "w2": jax.random.normal(k2, (16, 16)) * 0.3, "w3": jax.random.normal(k3, (16, 4))}


X = jax.random.normal(jax.random.key(1), (5, 8))


def mlp(p, x):
    h = jax.nn.relu(x @ p["w1"] + p["b1"][None])

    def body(c, _):
        return jnp.tanh(c @ p["w2"]), None

    h, _ = jax.lax.scan(body, h, None, length=3)
    return h @ p["w3"]


def loss(p, x):
    return jnp.sum(mlp(p, x) ** 2)


def test_fp32_recipe_is_the_identity():
    p = params()
    assert np.array_equal(emulate(mlp, "fp32")(p, X), mlp(p, X))
    g0, g1 = jax.grad(loss)(p, X), jax.grad(emulate(loss, "fp32"))(p, X)
    for k in p:
        np.testing.assert_allclose(g1[k], g0[k], rtol=1e-6, atol=1e-6)


def test_bf16_outputs_and_gradients_are_bf16():
    p = params()
    y = emulate(mlp, "bf16")(p, X)
    assert representable(y, ml_dtypes.bfloat16) and not np.array_equal(y, mlp(p, X))
    g = jax.grad(emulate(loss, "bf16"))(p, X)
    # dW of a GEMM is rounded to wgrad; w2's gradient also sums over the 3 scan steps (an fp32 add
    # outside any GEMM), and b1's is a reduction, not a GEMM
    assert representable(g["w1"], ml_dtypes.bfloat16) and representable(g["w3"], ml_dtypes.bfloat16)
    assert not representable(jax.grad(loss)(p, X)["w1"], ml_dtypes.bfloat16)


def test_operands_are_rounded_before_the_product():
    # one GEMM: the emulated result equals fp32 math on bf16-rounded operands, rounded to bf16
    p = params()
    a, w = X, p["w1"]
    q = lambda v: np.asarray(v, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    want = q(q(a).astype(np.float64) @ q(w).astype(np.float64))
    got = emulate(lambda p, x: x @ p["w1"], "bf16")(p, a)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_composes_with_jit_grad_vmap_and_scan():
    p = params()
    f = emulate(loss, "bf16")
    assert jax.jit(f)(p, X) == f(p, X)
    gj = jax.jit(jax.grad(f))(p, X)
    g = jax.grad(f)(p, X)
    for k in p:
        np.testing.assert_allclose(gj[k], g[k], rtol=1e-6)
    batched = jax.vmap(f, in_axes=(None, 0))(p, jnp.stack([X, 2 * X]))
    np.testing.assert_allclose(batched, [f(p, X), f(p, 2 * X)], rtol=1e-6)

    def outer(c, x):  # an emulated function inside an outer lax.scan
        return c + f(p, x), None

    total, _ = jax.lax.scan(outer, 0.0, jnp.stack([X, X]))
    np.testing.assert_allclose(total, 2 * f(p, X), rtol=1e-6)


def test_equinox_model():
    m = eqx.nn.MLP(8, 3, 16, 2, key=jax.random.key(0))

    def eloss(model, x):
        return jnp.sum(jax.vmap(model)(x) ** 2)

    e = emulate(eloss, "bf16")
    assert not np.isclose(e(m, X), eloss(m, X), rtol=1e-7)
    g = eqx.filter_grad(e)(m, X)
    assert representable(g.layers[0].weight, ml_dtypes.bfloat16)
    t = op_trace(eloss, "bf16", m, X)
    # Equinox computes W @ x: the trace puts the activation first (M = batch of 5... vmapped rows)
    assert list(t.lhs_role) == ["act"] * 3 and list(t.rhs_role) == ["weight"] * 3
    assert list(t.K) == [8, 16, 16] and list(t.N) == [16, 16, 3]


def test_flax_linen_with_conv_and_nnx():
    class Net(linen.Module):
        @linen.compact
        def __call__(self, x):
            x = linen.relu(linen.Dense(16)(x))
            x = linen.Conv(4, (3,))(jnp.repeat(x[..., None, :], 5, axis=-2))
            return linen.Dense(3)(x.reshape(x.shape[0], -1))

    net = Net()
    v = net.init(jax.random.key(0), X)

    def lloss(v, x):
        return jnp.sum(net.apply(v, x) ** 2)

    g = jax.jit(jax.grad(emulate(lloss, "bf16")))(v, X)
    assert representable(g["params"]["Conv_0"]["kernel"], ml_dtypes.bfloat16)
    t = op_trace(lloss, "bf16", v, X, training=True)
    assert list(t.kind) == ["gemm"] * 3 + ["conv"] * 3 + ["gemm"] * 3
    conv = t[(t.kind == "conv") & (t.role == "forward")].iloc[0]
    assert (conv.M, conv.N, conv.K) == (5 * 5, 4, 3 * 16)  # batch x length, filters, window x channels

    class N(nnx.Module):
        def __init__(self, rngs):
            self.l1, self.l2 = nnx.Linear(8, 16, rngs=rngs), nnx.Linear(16, 3, rngs=rngs)

        def __call__(self, x):
            return self.l2(nnx.relu(self.l1(x)))

    gdef, state = nnx.split(N(nnx.Rngs(0)))

    def nloss(state, x):
        return jnp.sum(nnx.merge(gdef, state)(x) ** 2)

    assert representable(jax.grad(emulate(nloss, "bf16"))(state, X)["l1"]["kernel"][...],
                         ml_dtypes.bfloat16)


def _jaxprs_in(params):
    """The jaxprs among an equation's parameters (jax.extend.core.jaxprs_in_params, which
    jax < 0.9 does not export, written out)."""
    for v in params.values():
        for x in v if isinstance(v, tuple | list) else (v,):
            if isinstance(x, jax.extend.core.ClosedJaxpr):
                yield x.jaxpr
            elif isinstance(x, jax.extend.core.Jaxpr):
                yield x


def _walk(jaxpr, inside_vjp=False, prim="dot_general"):
    """(``prim`` equations outside any custom_vjp_call, inside one), recursively."""
    outside = inside = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == prim:
            inside += inside_vjp
            outside += not inside_vjp
        for sub in _jaxprs_in(eqn.params):
            o, i = _walk(sub, inside_vjp or name.startswith("custom_vjp"), prim)
            outside, inside = outside + o, inside + i
    return outside, inside


def test_jaxpr_walk_every_gemm_is_emulated():
    """AQT-style: in the emulated function's jaxpr every dot_general sits inside the emulated
    GEMM's custom VJP, one per GEMM of the original, and the trace names the recipe's formats."""
    p = params()
    original = jax.make_jaxpr(mlp)(p, X).jaxpr
    n_orig = sum(_walk(original))
    assert n_orig == 3
    emulated = jax.make_jaxpr(emulate(mlp, "bf16"))(p, X).jaxpr
    outside, inside = _walk(emulated)
    assert outside == 0 and inside >= n_orig
    # (the backward GEMMs are checked by value: test_bf16_outputs_and_gradients_are_bf16)
    t = op_trace(mlp, "bf16", p, X)
    assert set(t.format_lhs) == {"bfloat16"} and set(t.format_acc) == {"float32"}
    assert list(t["count"]) == [1, 3, 1]  # the scan body runs 3 times


def test_jaxpr_walk_every_convolution_is_emulated():
    """The same for convolutions: each is carried out inside the emulated GEMM's custom VJP as
    its im2col GEMM, and none is left, in the forward function or in its gradient (whose
    backward GEMMs are the custom VJP's own, inlined by ``grad``)."""
    w = jax.random.normal(jax.random.key(2), (3, 4, 6))

    def net(w, x):
        return jnp.sum(jax.lax.conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC")) ** 2)

    x = jax.random.normal(jax.random.key(3), (2, 9, 4))
    assert _walk(jax.make_jaxpr(net)(w, x).jaxpr, prim="conv_general_dilated") == (1, 0)
    forward = jax.make_jaxpr(emulate(net, "bf16"))(w, x).jaxpr
    assert _walk(forward, prim="conv_general_dilated") == (0, 0)
    # one GEMM per platform branch (tensor_cores: float32 on the CPU, narrow inputs elsewhere)
    assert _walk(forward) == (0, 2)
    backward = jax.make_jaxpr(jax.grad(emulate(net, "bf16")))(w, x).jaxpr
    assert _walk(backward, prim="conv_general_dilated") == (0, 0)


def test_op_trace_training_rows_and_macs():
    p = params()
    t = op_trace(loss, "bf16", p, X, training=True)
    assert list(t.role[:3]) == ["forward", "grad-input", "grad-weight"]
    assert (t.groupby("role").macs.sum() == t[t.role == "forward"].macs.sum()).all()
    assert t[t.role == "forward"].macs.sum() == 5 * 8 * 16 + 3 * 5 * 16 * 16 + 5 * 16 * 4


def test_recipes_load_and_bad_recipes_say_what_is_wrong():
    assert {"fp32", "bf16"} <= set(list_recipes())
    for name in list_recipes():
        assert load_recipe(name).role("acc") is not None
    with pytest.raises(RecipeError) as err:
        load_recipe({"roles": {"weight": "bf16", "act": "bf17", "acc": {"format": "fp32", "rounding": "up"},
                               "gradient": "fp16"}, "colour": 1})
    text = str(err.value)
    for bit in ("roles.act.format", "bf17", "roles.acc.rounding", "roles.gradient", "colour"):
        assert bit in text, bit
    with pytest.raises(RecipeError, match="did you mean 'bf16'"):
        load_recipe("bf61")
    with pytest.raises(ValueError, match="stochastic rounding"):
        emulate(mlp, {"roles": {"weight": {"format": "bf16", "rounding": "sr"}, "act": "bf16",
                                "acc": "fp32"}})(params(), X)


class _FlatTreeGroups:
    """What jax 0.11's ``ft_in`` answers to ``unpack()``: one group per (consts, carry, xs), each
    with a length (jax/_src/flattree.py, FlatTree.unpack and __len__)."""

    def __init__(self, *sizes):
        self.sizes = sizes

    def unpack(self):
        return tuple(range(n) for n in self.sizes)


def test_scan_operand_counts_read_both_jax_parameter_layouts():
    from asicsim._jax_compat import scan_operand_counts

    w = jnp.ones((3, 3))

    def f(c0, xs):  # w is closed over: a const of the scan; the carry is a pair
        def body(c, x):
            return (c[0] + x @ w, c[1] * 2.0), c[0].sum()
        return jax.lax.scan(body, c0, xs)

    closed = jax.make_jaxpr(f)((jnp.zeros(3), jnp.float32(1)), jnp.ones((4, 3)))
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert scan_operand_counts(eqn.params) == (1, 2)  # the installed jax's own layout
    # jax 0.11 binds scan with ft_in = ft.pack((consts, carry, xs)) and no num_consts/num_carry
    # (jax/_src/lax/control_flow/loops.py); use jax's FlatTree where it exists.
    try:
        from jax._src import flattree as ft
        groups = ft.pack((ft.nones(2), ft.nones(3), ft.nones(1)))
    except ImportError:
        groups = _FlatTreeGroups(2, 3, 1)
    assert scan_operand_counts({"ft_in": groups, "jaxpr": None}) == (2, 3)


def test_scan_with_consts_carries_and_xs_is_emulated_like_the_plain_scan():
    # A scan whose body closes over a weight, carries a pair and emits ys: under fp32 the emulated
    # function must equal the plain one (operand grouping read right), and under bf16 the GEMM
    # inside the scan must be rounded (it differs from fp32).
    w = jnp.asarray(np.random.default_rng(0).normal(size=(5, 5)).astype(np.float32))

    def f(h0, xs):
        def body(c, x):
            h, n = c
            h = jnp.tanh(x + h @ w)
            return (h, n + 1.0), h.sum()
        (h, n), ys = jax.lax.scan(body, (h0, jnp.float32(0)), xs)
        return h, n, ys

    h0 = jnp.full((2, 5), 0.3, jnp.float32)
    xs = jnp.asarray(np.random.default_rng(1).normal(size=(6, 2, 5)).astype(np.float32))
    plain = f(h0, xs)
    same = emulate(f, "fp32")(h0, xs)
    for a, b in zip(plain, same, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    low = emulate(f, "bf16")(h0, xs)
    assert float(low[1]) == 6.0
    assert not np.array_equal(np.asarray(low[0]), np.asarray(plain[0]))
