"""Bad recipes, one row per case: a recipe table (as a TOML file gives it) or an object built in
code, and what the error must say (the field, and what is allowed)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import optax
import pytest

from asicsim._src.emulate import (
    LossScaling,
    Policy,
    RecipeError,
    RoleSpec,
    emulate,
    load_recipe,
    make_train_step,
)
from asicsim._src.emulate.fields import AmaxCompute, RoleScaling


def recipe(act=None, **top):
    """A recipe table with a good weight/acc and ``act`` (a role table) and top-level ``top``."""
    return {"roles": {"weight": "fp16", "act": act or "fp16", "acc": "fp32"}, **top}


def delayed(**kw):
    return {"format": "fp8_e4m3", "scaling": "delayed", **kw}


BAD_TABLES = [
    (recipe({"format": "fp16", "rounding": "SRX"}), ["roles.act.rounding", "rne, rna, rtz, rup, rdn, sr"]),
    (recipe({"format": "fp16", "rounding": "sr99"}), ["roles.act.rounding", "sr{N} (1 <= N <= 32)"]),
    (recipe({"format": "fp16", "rounding": 3}), ["roles.act.rounding = 3"]),
    (recipe({"format": "fp16", "scaling": "tensr"}), ["roles.act.scaling = 'tensr'", "none | tensor | channel"]),
    (recipe({"format": "fp16", "scaling": None}), ["roles.act.scaling = None"]),
    (recipe({"format": "fp8_e4m3", "scaling": "block", "block_size": 0}), ["roles.act.block_size = 0", ">= 1"]),
    (recipe({"format": "fp8_e4m3", "scaling": "block", "block_size": True}), ["roles.act.block_size = True"]),
    (recipe({"format": "fp8_e4m3", "scaling": "block"}), ["roles.act.block_size = None", "required"]),
    (recipe({"format": "fp8_e4m3", "block_size": 32}), ["roles.act.block_size = 32", "only with scaling = 'block'"]),
    (recipe(delayed(amax_history=0)), ["roles.act.amax_history = 0", "integer >= 1"]),
    (recipe(delayed(amax_history="16")), ["roles.act.amax_history = '16'"]),
    (recipe({"format": "bf16", "amax_history": 8}), ["roles.act.amax_history = 8", "only with scaling = 'delayed'"]),
    (recipe(delayed(amax_compute="mean")), ["roles.act.amax_compute = 'mean'", "max | most_recent"]),
    (recipe(delayed(margin=-1)), ["roles.act.margin = -1", "0 .. 127"]),
    (recipe(delayed(margin=1.5)), ["roles.act.margin = 1.5"]),
    (recipe(delayed(margin=200)), ["roles.act.margin = 200", "0 .. 127"]),
    (recipe({"format": "fp16", "margin": 2}), ["roles.act.margin = 2", "only with scaling = 'delayed' or 'static'"]),
    (recipe({"format": "fp16", "saturate": "yes"}), ["roles.act.saturate = 'yes'", "true or false"]),
    (recipe({"format": "fp17"}), ["roles.act.format = 'fp17'"]),
    (recipe({"rounding": "sr"}), ["roles.act.format = '<missing>'"]),
    (recipe({"format": "fp16", "colour": 1}), ["roles.act.colour", "no such field"]),
    (recipe(first_last="fp16"), ["first_last = 'fp16'", "a table of role = format"]),
    (recipe(first_last={"act": {"format": "fp16", "rounding": "nearest"}}), ["first_last.act.rounding"]),
    (recipe(first_last={"input": "fp16"}), ["first_last.input", "a role from"]),
    (recipe(loss_scaling={"kind": "dynamic", "factor": 0}), ["loss_scaling.factor = 0", "> 1"]),
    (recipe(loss_scaling={"kind": "dynamic", "factor": 1.0}), ["loss_scaling.factor = 1.0", "> 1"]),
    (recipe(loss_scaling={"kind": "dynamic", "factor": 0.5}), ["loss_scaling.factor = 0.5"]),
    (recipe(loss_scaling={"kind": "dynamic", "factor": math.nan}), ["loss_scaling.factor = nan"]),
    (recipe(loss_scaling={"kind": "static", "init": math.inf}), ["loss_scaling.init = inf", "finite number > 0"]),
    (recipe(loss_scaling={"kind": "static", "init": 0}), ["loss_scaling.init = 0"]),
    (recipe(loss_scaling={"kind": "static", "init": -8.0}), ["loss_scaling.init = -8.0"]),
    (recipe(loss_scaling={"kind": "static", "init": True}), ["loss_scaling.init = True"]),
    (recipe(loss_scaling={"kind": "static", "init": 1e39}), ["loss_scaling.init = 1e+39"]),
    (recipe(loss_scaling={"kind": "dynamic", "init": 1e-30}), ["loss_scaling.init = 1e-30", "kind = 'dynamic'"]),
    (recipe(loss_scaling={"kind": "dynamic", "growth_interval": 0}), ["loss_scaling.growth_interval = 0"]),
    (recipe(loss_scaling={"kind": "dynamic", "growth_interval": 1.5}), ["loss_scaling.growth_interval = 1.5"]),
    (recipe(loss_scaling={"kind": "dynamic", "growth_interval": "2000"}), ["loss_scaling.growth_interval = '2000'"]),
    (recipe(loss_scaling={"kind": "dyn"}), ["loss_scaling.kind = 'dyn'", "none | static | dynamic"]),
    (recipe(loss_scaling={"kind": "dynamic", "scale": 2}), ["loss_scaling.scale", "no such field"]),
    (recipe(loss_scaling=3), ["loss_scaling = 3", "a table"]),
    (recipe(mac="v100"), ["mac = 'v100'", "a table"]),
    (recipe(calibration={"batches": 0}), ["calibration.batches = 0", "an integer in 1 .. 10000"]),
    # issue 29 item 18
    (recipe(calibration={"batches": 10**12}), ["calibration.batches = 1000000000000", "an integer in 1 .. 10000"]),
    ({"roles": {"weight": "fp32", "act": "fp32", "acc": "fp8_e4m3"}},
     ["roles.acc = 'float8_e4m3fn'", "holding every value of weight (float32), act (float32): the same kind"]),
    ({"roles": {"weight": "fp16", "act": "fp16", "acc": "int32"}}, ["roles.acc = 'int32'", "act (float16)"]),
    ({"roles": {"weight": "fp16", "act": "fp16", "acc": "fp16", "grad": "bf16"}}, ["roles.acc = 'float16'",
                                                                                  "grad (bfloat16)"]),
    ({"roles": {"weight": "fp16", "act": "fp16", "acc": "mxfp8_e4m3"}}, ["roles.acc = 'mxfp8_e4m3'", "a scalar format"]),
    (recipe(first_last={"acc": "bf16"}), ["first_last.acc = 'bfloat16'", "weight (float16)"]),
    (recipe(layers=[{"match": "*", "roles": {"acc": "bf16"}}]), ["layers[0].roles.acc = 'bfloat16'", "act (float16)"]),
    ({"roles": {"weight": "bf16", "act": "bf16", "acc": "fp32", "master": "int8"}},
     ["roles.master = 'int8'", "a float format holding every value of the weight format (bfloat16)"]),
    ({"roles": {"weight": "bf16", "act": "bf16", "acc": "fp32", "master": "fp16"}}, ["roles.master = 'float16'"]),
    (recipe({"format": "mxfp8_e4m3", "scaling": "block", "block_size": 7}),
     ["roles.act.scaling = 'block'", "mxfp8_e4m3 has its own blocks (32)"]),
    (recipe(name=3), ["name = 3", "a non-empty string"]),
    ({"roles": "fp16"}, ["roles = 'fp16'", "a table of role = format"]),
    ({"roles": {"weight": "fp16", "acc": "fp32"}}, ["roles.act = '<missing>'", "required role"]),
    ({"roles": {"weight": delayed(amax_history=4), "act": delayed(amax_history=8), "acc": "fp32"}},
     ["roles.weight.amax_history = 4", "roles.act.amax_history = 8", "the same for every delayed role"]),
]


@pytest.mark.parametrize("table, expected", BAD_TABLES)
def test_bad_recipe_table(table, expected):
    with pytest.raises(RecipeError) as err:
        load_recipe(table)
    for bit in expected:
        assert bit in str(err.value), (bit, str(err.value))


def test_format_files_named_in_a_recipe_resolve_beside_it(tmp_path, monkeypatch):
    """A recipe's format paths are relative to the recipe file's folder (issue 29 item 21), and a
    byte-order mark at its start is no TOML error."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "my8.toml").write_text('name = "my8"\nkind = "int"\nbits = 8\n')
    (tmp_path / "r" / "mine.toml").write_bytes(
        b'\xef\xbb\xbf[roles]\nweight = "my8.toml"\nact = { format = "my8.toml" }\nacc = "fp32"\n'
        b'[[layers]]\nmatch = "*"\nroles = { weight = "my8.toml" }\n')
    monkeypatch.chdir(tmp_path)
    pol = load_recipe("r/mine.toml")
    assert pol.role("weight").spec.name == pol.role("act").spec.name == "my8"


def test_a_bad_recipe_file_names_the_file_and_every_field(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('first_last = "fp16"\n[roles]\nweight = "fp16"\nact = { format = "fp16", rounding = "SRX" }\n'
                    'acc = "fp32"\n[loss_scaling]\nkind = "dynamic"\nfactor = 0\n', encoding="utf-8")
    with pytest.raises(RecipeError) as err:
        load_recipe(str(path))
    assert str(err.value).startswith(f"{path}: 3 invalid recipe field(s)")
    assert [f for f, _, _ in err.value.problems] == ["roles.act.rounding", "first_last", "loss_scaling.factor"]
    path.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(RecipeError, match="not UTF-8"):
        load_recipe(str(path))


GOOD = RoleSpec("fp16")
BAD_OBJECTS = [
    (lambda: RoleSpec("fp16", rounding="nearest"), ["RoleSpec", "rounding = 'nearest'", "rne, rna"]),
    (lambda: RoleSpec("nope"), ["format = 'nope'"]),
    (lambda: RoleSpec("fp8_e4m3", scaling="block"), ["block_size = None", "required by scaling = 'block'"]),
    (lambda: RoleSpec("fp8_e4m3", scaling="tensor", margin=3), ["margin = 3", "only with"]),
    (lambda: RoleSpec("fp8_e4m3", saturate=1), ["saturate = 1"]),
    (lambda: LossScaling(kind="dynamic", factor=0), ["LossScaling", "factor = 0", "> 1"]),
    (lambda: LossScaling(kind="static", init=float("inf")), ["init = inf"]),
    (lambda: LossScaling(kind="Dynamic ", growth_interval=-5), ["growth_interval = -5"]),
    (lambda: Policy("p", roles=(("weight", GOOD),)), ["recipe 'p'", "roles.act = '<missing>'", "roles.acc"]),
    (lambda: Policy("p", roles=(("weight", GOOD), ("act", GOOD), ("acc", GOOD), ("wieght", GOOD))),
     ["roles.wieght", "a role from"]),
    (lambda: Policy("p", roles=(("weight", "fp16"), ("act", GOOD), ("acc", GOOD))), ["roles.weight = 'fp16'",
                                                                                      "a RoleSpec"]),
    (lambda: Policy("p", roles=(("weight", GOOD), ("act", GOOD), ("acc", GOOD), ("act", GOOD))),
     ["roles.act", "once per role"]),
    (lambda: Policy("p", roles={"weight": GOOD, "act": GOOD, "acc": GOOD}, mac_order="chunky:3"), ["mac.order"]),
    (lambda: Policy("p", roles={"weight": GOOD, "act": GOOD, "acc": GOOD}, loss_scaling="dynamic"),
     ["loss_scaling = 'dynamic'", "a LossScaling"]),
    (lambda: Policy("p", roles={"weight": GOOD, "act": GOOD, "acc": GOOD}, calibration_batches=0),
     ["calibration.batches = 0"]),
    (lambda: Policy("p", roles={"weight": RoleSpec("fp32"), "act": GOOD, "acc": RoleSpec("fp8_e4m3")}),
     ["roles.acc = 'float8_e4m3fn'", "weight (float32)"]),
    (lambda: Policy("p", roles={"weight": GOOD, "act": GOOD, "acc": RoleSpec("fp32"), "master": RoleSpec("int8")}),
     ["roles.master = 'int8'"]),
    (lambda: RoleSpec("mxfp4", scaling="block", block_size=7), ["scaling = 'block'", "mxfp4 has its own blocks"]),
    (lambda: Policy("p", roles={"weight": RoleSpec("fp8_e4m3", scaling="delayed", amax_history=4), "act": GOOD,
                                "acc": GOOD}, first_last={"act": RoleSpec("fp8_e4m3", scaling="delayed")}),
     ["roles.weight.amax_history = 4", "first_last.act.amax_history = 16", "the same for every delayed role"]),
]


@pytest.mark.parametrize("build, expected", BAD_OBJECTS)
def test_objects_built_in_code_are_checked_at_construction(build, expected):
    with pytest.raises(RecipeError) as err:
        build()
    for bit in expected:
        assert bit in str(err.value), (bit, str(err.value))


def test_names_are_normalised_and_typed():
    spec = RoleSpec("q7.8", rounding=" SR ", scaling="Tensor", amax_compute="MAX")
    assert spec.rounding == "sr" and spec.stochastic and not RoleSpec("fp16", rounding="RNE").stochastic
    assert spec.scaling is RoleScaling.TENSOR and spec.scaling == "tensor" and f"{spec.scaling}" == "tensor"
    assert spec.amax_compute is AmaxCompute.MAX
    assert RoleSpec("fp16", rounding="SR8").rounding.parsed.bits == 8
    assert spec == RoleSpec("q7.8", rounding="sr", scaling="tensor")
    assert LossScaling(kind="DYNAMIC", init=8, factor=4).init == 8.0
    pol = Policy("p", roles={"weight": GOOD, "act": GOOD, "acc": GOOD},
                 first_last={"act": RoleSpec("fp16", rounding="sr")})
    assert isinstance(pol.roles, tuple) and pol.stochastic  # a first/last-layer role counts too
    hash(pol)


def test_an_upper_case_rounding_name_runs_stochastic_rounding():
    # "SR" passed the loader but the emulated call then said "stochastic rounding needs a key"
    pol = load_recipe(recipe({"format": "q7.8", "rounding": "SR"}))
    assert pol.stochastic
    f = emulate(lambda w, x: x @ w, pol)
    w, x = jnp.eye(4), jnp.full((3, 4), 1 / 3)
    outs = {float(f(w, x, asicsim_key=jax.random.key(k))[0, 0]) for k in range(8)}
    assert outs <= {85 / 256, 86 / 256} and len(outs) == 2  # 1/3 lands on either neighbour


@pytest.mark.parametrize("name", ["int8_ptq_tensor", "int8_ptq_channel"])
def test_training_under_an_inference_recipe_is_an_error(name):
    with pytest.raises(RecipeError, match=f"recipe '{name}' is for inference only") as err:
        make_train_step(lambda p, x: jnp.sum(x @ p), name, optax.sgd(0.1))
    assert "roles.act.scaling = 'static'" in str(err.value) and "asicsim infer" in str(err.value)
