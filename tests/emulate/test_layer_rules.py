"""Per-layer rules (issue 20 item 10): ``[[layers]]`` picks roles by the pytree path of a GEMM's
weight, first match wins, ``[first_last]`` on top. Checked on a Flax Linen attention + MLP block
(which formats every GEMM got, by the rule report and the op trace), on an Equinox MLP (paths
without a ``params/`` prefix; the whole model bit-identical to its layers emulated one by one
under the recipe each rule names), and bad rules."""

from __future__ import annotations

import tomllib
import warnings

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from asicsim._src.emulate import Policy, RecipeError, RoleSpec, emulate, load_recipe, op_trace
from asicsim._src.emulate.layer_report import layer_report
from asicsim._src.emulate.layer_rules import UnusedLayerRule, leaf_paths
from asicsim._src.emulate.recipes import policy_from_table

# The README's example: attention in bf16, the MLP in fp8 (E4M3, per-tensor scale), the first
# and last layer in fp16, everything else fp32.
EXAMPLE = """
name = "mixed_layers"
[roles]
weight = "fp32"
act = "fp32"
acc = "fp32"

[first_last]               # applied on top of any rule
weight = "fp16"
act = "fp16"

[[layers]]                 # first match wins
match = "*/attn/*"         # glob over the weight's path, e.g. params/attn/query/kernel
roles = { weight = "bf16", act = "bf16" }

[[layers]]
match = "<act>"            # GEMMs with no weight operand: attention's q.k^T and p.v
roles = { act = "bf16" }

[[layers]]
match = "*/mlp/*"
roles = { weight = { format = "fp8_e4m3", scaling = "tensor" }, act = { format = "fp8_e4m3", scaling = "tensor" } }
"""


class Mlp(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(16, name="fc2")(nn.gelu(nn.Dense(32, name="fc1")(x)))


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = x + nn.MultiHeadDotProductAttention(num_heads=2, name="attn")(x)
        return h + Mlp(name="mlp")(h)


X = jax.random.normal(jax.random.key(1), (2, 5, 16))


def block_fn(v, x):
    return Block().apply(v, x)


def test_flax_block_gemms_get_their_rules_formats():
    pol = policy_from_table(tomllib.loads(EXAMPLE))
    v = Block().init(jax.random.key(0), X)
    rep = layer_report(block_fn, pol, v, X)
    got = [(e["path"], e["rule"], e["edge"], e["formats"]["weight" if e["path"] != "<act>" else "act"])
           for e in rep.gemms]
    assert got == [
        ("params/attn/query/kernel", "*/attn/*", True, "fp16"),  # the first layer: [first_last] wins
        ("params/attn/key/kernel", "*/attn/*", False, "bf16"),
        ("params/attn/value/kernel", "*/attn/*", False, "bf16"),
        ("<act>", "<act>", False, "bf16"),  # q.k^T
        ("<act>", "<act>", False, "bf16"),  # p.v
        ("params/attn/out/kernel", "*/attn/*", False, "bf16"),
        ("params/mlp/fc1/kernel", "*/mlp/*", False, "fp8_e4m3"),
        ("params/mlp/fc2/kernel", "*/mlp/*", True, "fp16"),  # the last layer
    ]
    assert rep.unused == ()
    df = op_trace(block_fn, pol, v, X)  # what the cost model prices: the same formats
    assert list(df.format_rhs) == ["float16", "bfloat16", "bfloat16", "bfloat16", "bfloat16", "bfloat16",
                                   "float8_e4m3fn", "float16"]
    # the rules change the numbers: not the plain recipe, and the fp8 MLP not bf16
    y = emulate(block_fn, pol)(v, X)
    assert not np.array_equal(y, emulate(block_fn, policy_from_table({"roles": dict(
        weight="fp32", act="fp32", acc="fp32")}))(v, X))


def linear(layer, x):
    return jax.vmap(layer)(x)


def test_equinox_paths_and_each_layer_as_its_rule_says():
    mlp = eqx.nn.MLP(8, 4, width_size=16, depth=2, key=jax.random.key(0))
    assert [p for p in leaf_paths(mlp) if p.endswith("weight")] == ["layers/0/weight", "layers/1/weight",
                                                                   "layers/2/weight"]
    base = {"weight": "bf16", "act": "bf16", "acc": "fp32"}
    fp8 = {"weight": {"format": "fp8_e4m3", "scaling": "channel"}, "act": {"format": "fp8_e4m3", "scaling": "tensor"}}
    pol = load_recipe({"roles": base, "layers": [{"match": "layers/1/*", "roles": fp8}]})
    x = jax.random.normal(jax.random.key(1), (3, 8))
    got = emulate(lambda m, x: jax.vmap(m)(x), pol)(mlp, x)
    # oracle: the same model, each Linear emulated on its own under the recipe its rule names
    plain, mid = load_recipe({"roles": base}), load_recipe({"roles": {**base, **fp8}})
    h = x
    for i, layer in enumerate(mlp.layers):
        h = emulate(linear, mid if i == 1 else plain)(layer, h)
        h = jax.nn.relu(h) if i < 2 else h
    np.testing.assert_array_equal(got, h)
    assert not np.array_equal(got, emulate(lambda m, x: jax.vmap(m)(x), plain)(mlp, x))
    formats = [e["formats"]["weight"] for e in layer_report(lambda m, x: jax.vmap(m)(x), pol, mlp, x).gemms]
    assert formats == ["bf16", "fp8_e4m3", "bf16"]


def test_first_matching_rule_wins_and_roles_not_named_stay_the_recipes():
    pol = load_recipe({"roles": {"weight": "fp16", "act": "fp16", "acc": "fp32", "out": "fp16"},
                       "layers": [{"match": "w1", "roles": {"weight": "bf16"}},
                                  {"match": "w*", "roles": {"weight": "fp8_e5m2"}}]})
    p = {"w1": jnp.eye(4), "w2": jnp.eye(4)}
    rep = layer_report(lambda p, x: (x @ p["w1"]) @ p["w2"], pol, p, jnp.ones((2, 4)))
    assert [(e["rule"], e["formats"]["weight"], e["formats"]["act"], e["formats"]["out"]) for e in rep.gemms] == [
        ("w1", "bf16", "fp16", "fp16"), ("w*", "fp8_e5m2", "fp16", "fp16")]


def test_a_rule_that_matches_nothing_is_reported():
    pol = load_recipe({"roles": {"weight": "bf16", "act": "bf16", "acc": "fp32"},
                       "layers": [{"match": "*/atn/*", "roles": {"weight": "fp16"}},
                                  {"match": "w", "roles": {"weight": "fp16"}}]})
    f, p, x = (lambda p, x: x @ p["w"]), {"w": jnp.eye(3)}, jnp.ones((2, 3))
    with pytest.warns(UnusedLayerRule, match=r"\['\*/atn/\*'\] matched no GEMM"):
        emulate(f, pol)(p, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the report says it instead of warning
        assert layer_report(f, pol, p, x).unused == ("*/atn/*",)


def test_gemm_paths_without_a_leaf_and_policy_stays_hashable():
    from asicsim._src.emulate.operand_roles import gemm_path

    assert gemm_path(("act", "weight"), ["x", "params/w"]) == "params/w"
    assert gemm_path(("act", "act"), [None, None]) == "<act>"
    assert gemm_path(("weight", "act"), [None, None]) == "<const>"  # a weight with no leaf (closed over)
    table = {"roles": {"weight": "bf16", "act": "bf16", "acc": "fp32"},
             "layers": [{"match": "w", "roles": {"weight": "fp16"}}]}
    pol = load_recipe(table)
    assert hash(pol) == hash(load_recipe(table)) and pol == load_recipe(table)
    f = emulate(lambda p, x: x @ p["w"], pol)
    y = jax.jit(lambda p, x: f(p, x))({"w": jnp.eye(3) / 3}, jnp.ones((2, 3)))
    assert float(y[0, 0]) == float(np.float16(1 / 3))  # the rule's fp16 weight, not bf16


GOOD = {"weight": "bf16", "act": "bf16", "acc": "fp32"}
BAD_RULES = [
    ("x", ["layers = 'x'", "[[layers]] tables"]),
    ([{"roles": {"weight": "fp16"}}], ["layers[0].match = '<missing>'"]),
    ([{"match": "", "roles": {"weight": "fp16"}}], ["layers[0].match = ''", "a non-empty glob"]),
    ([{"match": 3, "roles": {"weight": "fp16"}}], ["layers[0].match = 3"]),
    ([{"match": "a", "roles": {"weight": "fp7"}}], ["layers[0].roles.weight.format = 'fp7'"]),
    ([{"match": "a", "roles": {"input": "fp16"}}], ["layers[0].roles.input", "a role from"]),
    ([{"match": "a", "roles": {}}], ["layers[0].roles = ()", "at least one role"]),
    ([{"match": "a", "roles": {"weight": "fp16"}, "when": 1}], ["layers[0].when = 1", "no such field"]),
    ([{"match": "a", "roles": {"weight": "fp16"}}, {"match": "a", "roles": {"act": "fp16"}}],
     ["layers[1].match = 'a'", "each pattern once"]),
    (["a"], ["layers[0] = 'a'", "a table with match and roles"]),
    ([{"match": "a", "roles": {"weight": "fp16"}}, {"match": "", "roles": {"weight": "fp7"}}],
     ["layers[1].match = ''", "layers[1].roles.weight.format = 'fp7'"]),
]


@pytest.mark.parametrize(("layers", "says"), BAD_RULES)
def test_bad_layer_rules_are_named(layers, says, tmp_path):
    with pytest.raises(RecipeError) as err:
        load_recipe({"roles": GOOD, "layers": layers})
    for s in says:
        assert s in str(err.value), (s, str(err.value))


def test_bad_rules_in_a_file_name_the_file_and_policies_in_code_are_checked(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('[roles]\nweight = "bf16"\nact = "bf16"\nacc = "fp32"\n[[layers]]\nmatch = "*"\n'
                    'roles = { weight = "fp9" }\n')
    with pytest.raises(RecipeError, match=r"mine\.toml.*\n.*layers\[0\]\.roles\.weight\.format = 'fp9'"):
        load_recipe(str(path))
    roles = tuple((r, RoleSpec(f)) for r, f in GOOD.items())
    with pytest.raises(RecipeError, match=r"layers\[0\]\.roles\.weight = 'bf16'; allowed: a RoleSpec"):
        Policy("p", roles, layers=(("*", (("weight", "bf16"),)),))
    with pytest.raises(RecipeError, match=r"layers\[0\] = '\*'; allowed: a \(pattern, roles\) pair"):
        Policy("p", roles, layers=("*",))
    ok = Policy("p", roles, layers=[("*", {"weight": RoleSpec("fp16")})])  # lists and mappings accepted
    assert ok.layers == (("*", (("weight", RoleSpec("fp16")),)),)


def test_a_delayed_rule_gives_the_training_step_its_amax_history():
    pol = load_recipe({"roles": GOOD, "layers": [{"match": "*", "roles": {
        "act": {"format": "fp8_e4m3", "scaling": "delayed", "amax_history": 4}}}]})
    assert pol.delayed and pol.history_settings == (4, "max")
    static = load_recipe({"roles": GOOD, "layers": [{"match": "*", "roles": {
        "act": {"format": "int8", "scaling": "static"}}}]})
    from asicsim._src.emulate import make_train_step

    with pytest.raises(RecipeError, match=r"layers\[0\]\.roles\.act\.scaling"):
        make_train_step(lambda p, b: jnp.sum(b @ p), static, None)


def test_master_weights_are_rounded_to_their_rules_weight_format():
    # the working copy was rounded to the recipe's bf16 for every leaf: a rule's fp16 layer then
    # computed with bf16 weights (bf16 then fp16: double rounding)
    import ml_dtypes
    import optax

    from asicsim._src.emulate import make_train_step

    pol = load_recipe({"roles": {**GOOD, "master": "fp32"},
                       "layers": [{"match": "w1", "roles": {"weight": "fp16"}}]})
    w = jnp.full((3, 3), 1 / 3)
    init, _ = make_train_step(lambda p, b: jnp.sum((b @ p["w1"]) @ p["w2"]), pol, optax.sgd(0.1))
    state = init({"w1": w, "w2": w}, 0)
    assert float(state.params["w1"][0, 0]) == float(np.float16(1 / 3))
    assert float(state.params["w2"][0, 0]) == float(ml_dtypes.bfloat16(1 / 3))
    assert float(state.master["w1"][0, 0]) == float(np.float32(1 / 3))


def test_a_flax_nn_scan_stack_keeps_its_path_and_peels_the_first_layer():
    L = 4

    class Layer(nn.Module):
        @nn.compact
        def __call__(self, h, _):
            return jnp.tanh(nn.Dense(8, name="dense")(h)), None

    class ScannedNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            stack = nn.scan(Layer, variable_axes={"params": 0}, split_rngs={"params": True}, length=L)
            return nn.Dense(2, name="head")(stack(name="layers")(x, None)[0])

    x = jax.random.normal(jax.random.key(1), (4, 8))
    v = ScannedNet().init(jax.random.key(0), x)
    pol = load_recipe({"roles": GOOD, "first_last": {"weight": "fp16"},
                       "layers": [{"match": "params/layers/*", "roles": {"weight": "fp8_e5m2"}}]})
    rep = layer_report(lambda v, x: ScannedNet().apply(v, x), pol, v, x)
    assert [(e["row"], e["path"], e["edge"], e["formats"]["weight"]) for e in rep.gemms] == [
        (0, "params/layers/dense/kernel", True, "fp16"),  # layer 0, run outside the scan
        (None, "params/layers/dense/kernel", False, "fp8_e5m2"),  # layers 1..3, the scan
        (L, "params/head/kernel", True, "fp16")]  # the last row
