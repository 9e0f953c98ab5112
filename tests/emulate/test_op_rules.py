"""Per-op rules (issue 34 item 7): ``[[layers]]`` rules naming a vector role round the non-GEMM
ops whose name (name scope / primitive, :mod:`asicsim._src.emulate.op_rules`) they match. Checked on
a Flax Linen transformer block: a softmax in bf16 while the layer norms, GELU, residual adds and
GEMMs stay fp32, bit for bit against the same block with a hand-written bf16 softmax (each step
rounded as microxcaling's softmax rounds it: inputs once, every result); a layer norm kept fp32
under a bf16 recipe; how ops are named in plain JAX; unused rules; bad rules."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.emulate import RecipeError, emulate, load_recipe, op_trace
from asicsim._src.emulate.layer_report import layer_report
from asicsim._src.emulate.layer_rules import UnusedLayerRule

FP32 = {"weight": "fp32", "act": "fp32", "acc": "fp32"}


def _bf16(t):
    return t.astype(jnp.bfloat16).astype(jnp.float32)


def bf16_softmax(s):
    """jax.nn.softmax's steps, each operand and result rounded to bf16 (round to nearest even)."""
    s = _bf16(s)
    m = _bf16(jnp.max(s, axis=-1, keepdims=True))
    e = _bf16(jnp.exp(_bf16(s - jax.lax.stop_gradient(m))))
    return _bf16(e / _bf16(jnp.sum(e, axis=-1, keepdims=True)))


class Block(nn.Module):
    """Pre-norm attention (one head) and a GELU MLP; the softmax in a ``named_scope``."""

    softmax: Callable = jax.nn.softmax

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm(name="ln1")(x)
        q, k, v = (nn.Dense(16, name=n)(h) for n in ("query", "key", "value"))
        s = jnp.einsum("bqd,bkd->bqk", q, k) / 4.0
        with jax.named_scope("softmax"):
            p = self.softmax(s)
        x = x + nn.Dense(16, name="out")(jnp.einsum("bqk,bkd->bqd", p, v))
        return x + nn.Dense(16, name="fc2")(nn.gelu(nn.Dense(32, name="fc1")(nn.LayerNorm(name="ln2")(x))))


X = jax.random.normal(jax.random.key(1), (2, 6, 16)) * 3
V = Block().init(jax.random.key(0), X)
SOFTMAX_BF16 = {"roles": FP32, "layers": [{"match": "*/softmax/*", "roles": {"vector": "bf16"}}]}


def block_fn(v, x):
    return Block().apply(v, x)


def test_softmax_in_bf16_and_nothing_else_bit_for_bit():
    got = np.asarray(emulate(block_fn, load_recipe(SOFTMAX_BF16))(V, X))
    want = np.asarray(Block(softmax=bf16_softmax).apply(V, X))
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, np.asarray(block_fn(V, X)))  # the softmax was rounded


def test_the_report_lists_the_ops_and_the_trace_their_formats():
    pol = load_recipe(SOFTMAX_BF16)
    rep = layer_report(block_fn, pol, V, X)
    ruled = [(e["op"], e["formats"]) for e in rep.ops if e["rule"] is not None]
    assert ruled == [("Block/softmax/reduce_max", {"reduction": "bf16"}), ("Block/softmax/max", {"vector": "bf16"}),
                     ("Block/softmax/sub", {"vector": "bf16"}), ("Block/softmax/exp", {"transcendental": "bf16"}),
                     ("Block/softmax/reduce_sum", {"reduction": "bf16"}), ("Block/softmax/div", {"vector": "bf16"})]
    others = {e["op"] for e in rep.ops if e["rule"] is None}
    assert "Block/ln1/rsqrt" in others and "Block/ln2/reduce_sum" in others and "Block/tanh" in others
    assert all(e["formats"] == {} for e in rep.ops if e["rule"] is None)
    assert [e["rule"] for e in rep.gemms] == [None] * 8 and rep.unused == ()  # GEMMs never consult an op rule
    tr = op_trace(block_fn, pol, V, X, elementwise=True).query("kind == 'elementwise'")
    fmt = dict(zip(tr.primitive, tr.format_out, strict=False))
    assert (fmt["exp"], fmt["rsqrt"], fmt["tanh"]) == ("bfloat16", "float32", "float32")


def test_a_rule_keeps_the_layer_norms_in_fp32_under_a_bf16_recipe():
    pol = load_recipe({"roles": {**FP32, "vector": "bf16"},
                       "layers": [{"match": "Block/ln?/*", "roles": {"vector": "fp32"}}]})
    rep = layer_report(block_fn, pol, V, X)
    ln = [e for e in rep.ops if e["op"].startswith(("Block/ln1/", "Block/ln2/"))]
    assert ln and all(e["rule"] == "Block/ln?/*" and e["formats"] == {} for e in ln)
    rest = [e for e in rep.ops if e not in ln]
    assert rest and all(e["rule"] is None and set(e["formats"].values()) == {"bf16"} for e in rest)


def bf16_gelu(x):
    """jax.nn.gelu's tanh approximation step by step (its jaxpr: integer_pow, mul, add, mul, tanh,
    add, mul, mul), the input and every result rounded to bf16, the scalar constants left in
    float32 (as microxcaling's vec ops leave a scalar constant)."""
    x = _bf16(x)
    inner = _bf16(0.7978845834732056 * _bf16(x + _bf16(0.044714998453855515 * _bf16(x ** 3))))
    return _bf16(x * _bf16(0.5 * _bf16(1.0 + _bf16(jnp.tanh(inner)))))


def test_a_gelu_in_bf16_by_a_rule_bit_for_bit():
    """A rule naming a GELU's scope rounds its ops (vector role: arithmetic and, without a
    transcendental role, its tanh) and nothing else: against the hand-written bf16 GELU; the GEMM
    before it and the scaling after it stay fp32."""
    def f(w, x):
        h = x @ w
        with jax.named_scope("gelu"):
            h = jax.nn.gelu(h)
        return h * 3.0

    w, x = jax.random.normal(jax.random.key(2), (16, 8)), X[0]
    pol = load_recipe({"roles": FP32, "layers": [{"match": "gelu/*", "roles": {"vector": "bf16"}}]})
    got = np.asarray(emulate(f, pol)(w, x))
    np.testing.assert_array_equal(got, np.asarray(bf16_gelu(x @ w) * 3.0))
    assert not np.array_equal(got, np.asarray(f(w, x)))  # the GELU was rounded


class NormThenScale(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.LayerNorm(name="ln")(x) * 3.0


def test_a_layer_norm_kept_fp32_bit_for_bit():
    pol = load_recipe({"roles": {**FP32, "vector": "bf16"}, "layers": [{"match": "*/ln/*", "roles": {"vector": "fp32"}}]})
    v = NormThenScale().init(jax.random.key(0), X)
    y = emulate(lambda v, x: NormThenScale().apply(v, x), pol)(v, X)
    ln = nn.LayerNorm().apply({"params": v["params"]["ln"]}, X)  # the layer norm in plain float32
    np.testing.assert_array_equal(np.asarray(y), np.asarray(_bf16(_bf16(ln) * 3.0)))  # only the mul rounds


def test_ops_are_named_by_name_scope_and_jitted_function():
    @jax.jit
    def g(x):
        with jax.named_scope("inner"):
            return jnp.exp(x) * 2.0

    def f(x):
        with jax.named_scope("outer"):
            y = g(x)
            y = jax.lax.scan(lambda c, _: (jnp.tanh(c), None), y, None, length=2)[0]
        return y - 1.0

    pol = load_recipe({"roles": FP32, "layers": [{"match": "outer/*", "roles": {"vector": "bf16"}}]})
    rep = layer_report(f, pol, jnp.ones(4), weights=None)
    assert [(e["op"], e["rule"]) for e in rep.ops] == [
        ("outer/g/inner/exp", "outer/*"), ("outer/g/inner/mul", "outer/*"), ("outer/tanh", "outer/*"), ("sub", None)]
    x = jnp.linspace(-2, 2, 4)
    y = emulate(f, pol, weights=None)(x)
    want = _bf16(jnp.tanh(_bf16(jnp.tanh(_bf16(_bf16(jnp.exp(_bf16(x))) * 2.0))))) - 1.0
    np.testing.assert_array_equal(np.asarray(y), np.asarray(want))


def test_an_op_rule_that_matches_no_op_warns():
    # "params/*" matches every GEMM's weight path, but a rule of vector roles names ops only
    pol = load_recipe({"roles": FP32, "layers": [{"match": "params/*", "roles": {"vector": "bf16"}},
                                                 {"match": "*/softmax/*", "roles": {"vector": "bf16"}}]})
    with pytest.warns(UnusedLayerRule, match=r"\['params/\*'\] matched no GEMM \(rules of vector roles: no op\)"):
        emulate(block_fn, pol)(V, X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert layer_report(block_fn, pol, V, X).unused == ("params/*",)


def test_gemms_and_ops_each_consult_the_rules_of_their_kind():
    def f(p, x):
        with jax.named_scope("attn"):
            return jax.nn.softmax(x @ p["attn"]["w"])

    p, x = {"attn": {"w": jnp.eye(4)}}, jnp.ones((2, 4))
    # an op rule first does not take the GEMM from the GEMM rule after it, nor the reverse
    pol = load_recipe({"roles": {**FP32, "vector": "fp16"},
                       "layers": [{"match": "*", "roles": {"vector": "fp32"}}, {"match": "attn*", "roles": {"weight": "bf16"}}]})
    rep = layer_report(f, pol, p, x)
    assert [(g["rule"], g["formats"]["weight"]) for g in rep.gemms] == [("attn*", "bf16")]
    assert rep.gemms[0]["policy"].layers == () and rep.ops and all(o["formats"] == {} for o in rep.ops)
    # a rule naming both kinds of role applies to both
    both = load_recipe({"roles": FP32, "layers": [{"match": "*attn*", "roles": {"act": "bf16", "vector": "bf16"}}]})
    rep = layer_report(f, both, p, x)
    assert rep.gemms[0]["formats"]["act"] == "bf16" and {o["op"].split("/")[0] for o in rep.ops} == {"attn"}
    assert all(o["rule"] == "*attn*" and "bf16" in o["formats"].values() for o in rep.ops)


BAD_OP_RULES = [
    ({"match": "*/softmax/*", "roles": {"vector": {"format": "fp8_e4m3", "scaling": "delayed"}}},
     "layers[0].roles.vector.scaling = 'delayed'; allowed: none | tensor | channel | block (a vector op"),
    ({"match": "*/ln1/*", "roles": {"reduction": {"format": "int8", "scaling": "static"}}},
     "layers[0].roles.reduction.scaling = 'static'"),
    ({"match": "<act>", "roles": {"vector": "bf16"}}, "layers[0].match = '<act>'; allowed: a glob over op names"),
    ({"match": "<const>", "roles": {"act": "bf16", "transcendental": "bf16"}}, "<act> and <const> name GEMMs"),
    ({"match": "*/softmax/*", "roles": {"vector": {"format": "bf16", "rotation": 16}}},
     "layers[0].roles.vector.rotation = 16; allowed: only on a GEMM operand role"),
    ({"match": "*/softmax/*", "roles": {"vector": "bf17"}}, "layers[0].roles.vector.format = 'bf17'"),
]


@pytest.mark.parametrize(("rule", "says"), BAD_OP_RULES)
def test_bad_op_rules_are_named(rule, says):
    with pytest.raises(RecipeError) as err:
        load_recipe({"roles": FP32, "layers": [rule]})
    assert says in str(err.value), str(err.value)
