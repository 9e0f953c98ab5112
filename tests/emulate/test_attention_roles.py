"""Attention roles (issue 34 item 4): Q K^T and P V read their operands as roles ``query``,
``key``, ``probabilities``, ``value`` where the model marks them (``attention_role``), with
per-(sequence, head) scaling (``scaling = "head"``); a recipe without them gives the same bits
as the unmarked model. Oracles: ml_dtypes' float8_e4m3fn casts and a numpy int8 fake-quant
(float32 scale amax / 127, round half to even, code * scale), per (batch, head) slice."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from asicsim._src.emulate import (
    RecipeError,
    attention_role,
    emulate,
    list_recipes,
    load_recipe,
    op_trace,
)
from asicsim._src.workloads import models
from asicsim._src.workloads.models import transformer

ROLES4 = ("query", "key", "probabilities", "value")


def _qk(q, k):
    return jnp.einsum("bqhd,bkhd->bhqk", attention_role(q, "query"), attention_role(k, "key"))


def _pv(p, v):
    return jnp.einsum("bhqk,bkhd->bqhd", attention_role(p, "probabilities"), attention_role(v, "value"))


def _recipe(**roles):
    return {"name": "t", "roles": {"weight": "fp32", "act": "fp32", "acc": "fp32", **roles}}


def _data(seed=0, shape=(2, 5, 3, 8)):
    rng = np.random.default_rng(seed)
    scales = np.float32([1.0, 30.0, 0.01])[None, None, :, None]  # heads of very different range
    return [jnp.asarray(rng.standard_normal(shape).astype(np.float32) * scales) for _ in range(2)]


def _e4m3(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)


def _int8_fake_quant(x):
    """numpy int8 fake quantization of one group: s = fl32(amax / 127), round half to even of
    fl32(x / s), clipped, times s in float32 (numpy's float32 division and product are IEEE)."""
    x = np.asarray(x, np.float32)
    s = np.float32(np.abs(x).max()) / np.float32(127)
    codes = np.clip(np.round(x / s), -128, 127).astype(np.float32)  # np.round: half to even
    return codes * s


def _marked_vs_unmarked(monkeypatch, names):
    """The marked transformer under each recipe of ``names`` (none has attention roles) gives the
    same logits and gradients as the same model with the marks removed (the previous code)."""
    model = transformer(17, context=8, d_model=16, heads=2, layers=1)
    params = model.init(0)
    x = jnp.asarray(np.random.default_rng(1).integers(0, 17, (2, 8)), jnp.int32)

    def run(recipe):
        pol = load_recipe(recipe)
        kw = {"asicsim_key": jax.random.key(3)} if pol.stochastic else {}
        fn = emulate(model.apply, pol, weights=0)
        loss = lambda p: jnp.sum(fn(p, x, **kw) ** 2)  # noqa: E731
        return jax.jit(jax.value_and_grad(loss))(params)

    marked = {n: run(n) for n in names}
    with monkeypatch.context() as m:
        m.setattr(models, "attention_role", lambda x, role: x)
        for n in names:
            a, b = jax.tree_util.tree_leaves(marked[n]), jax.tree_util.tree_leaves(run(n))
            assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True)), n


def _training_recipes():
    # learned-step recipes need their steps passed (asicsim_lsq): test_lsq_recipes.py
    return [n for n in list_recipes() if not load_recipe(n).inference_only and not load_recipe(n).lsq]


def test_unmarked_attention_gemms_keep_recipes_bit_identical():
    """Per-tensor (fp8_hybrid), block (mxfp8, re-rounded for the gradient GEMMs) and stochastic
    (fixed16_sr) recipes; every shipped one: the slow test below."""
    _gemms_marked_vs_unmarked(["fp8_hybrid", "mxfp8", "fixed16_sr"])


@pytest.mark.slow  # every shipped training recipe, run eagerly: a minute on 2 cores
def test_unmarked_attention_gemms_keep_every_shipped_recipe_bit_identical():
    _gemms_marked_vs_unmarked(_training_recipes())


def _gemms_marked_vs_unmarked(names):
    """Q K^T and P V with their operands marked, under each recipe of ``names`` (none has
    attention roles): the same values and gradients as unmarked."""
    q, k = _data()
    p = jax.nn.softmax(_qk(q, k), axis=-1)

    def both(a, b, c, marks=True):
        mark = attention_role if marks else (lambda x, role: x)
        s = jnp.einsum("bqhd,bkhd->bhqk", mark(a, "query"), mark(b, "key"))
        return jnp.sum(s ** 2) + jnp.sum(jnp.einsum("bhqk,bkhd->bqhd", mark(c, "probabilities"), mark(b, "value")) ** 2)

    for name in names:
        pol = load_recipe(name)
        kw = {"asicsim_key": jax.random.key(3)} if pol.stochastic else {}
        fns = [emulate(functools.partial(both, marks=m), pol, weights=None) for m in (True, False)]
        out = [jax.value_and_grad(lambda *xs, f=f, kw=kw: f(*xs, **kw), argnums=(0, 1, 2))(q, k, p) for f in fns]
        a, b = (jax.tree_util.tree_leaves(o) for o in out)
        assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True)), name


@pytest.mark.slow  # the transformer's gradient: about a minute per recipe on 2 cores
def test_unmarked_roles_keep_recipes_of_every_kind_bit_identical(monkeypatch):
    """One recipe of each scaling mechanism (every shipped one, GEMMs alone: the test above):
    delayed per-tensor scales (fp8_hybrid), two-level blocks with a rotation and stochastic
    rounding (nvfp4), and a bit-exact MAC order that rounds inside each GEMM (tensorcore_fp16;
    its gradient compiles in ~16 s of CPU time since issue 37, 75 s before: benchmarks/RESULTS.md)."""
    _marked_vs_unmarked(monkeypatch, ["fp8_hybrid", "nvfp4", "tensorcore_fp16"])


@pytest.mark.parametrize("role", ROLES4)
def test_each_role_rounds_only_its_operand(role):
    q, k = _data()
    fn = _qk if role in ("query", "key") else _pv
    if fn is _pv:  # P (batch, head, query, key) in [0, 1), V (batch, key, head, dim)
        q = jax.nn.softmax(_qk(q, k), axis=-1)
    y = emulate(fn, _recipe(**{role: "fp8_e4m3"}), weights=None)(q, k)
    first = role in ("query", "probabilities")
    ref = fn(*((_e4m3(q), k) if first else (q, _e4m3(k))))
    np.testing.assert_array_equal(y, ref)
    assert not np.array_equal(y, fn(q, k))


def test_head_scaling_scales_each_sequence_and_head_alone():
    q, k = _data()
    y = emulate(_qk, _recipe(query={"format": "int8", "scaling": "head"}), weights=None)(q, k)
    qn = np.asarray(q)
    ref_q = np.empty_like(qn)
    for b in range(qn.shape[0]):
        for h in range(qn.shape[2]):
            ref_q[b, :, h] = _int8_fake_quant(qn[b, :, h])
    np.testing.assert_array_equal(y, _qk(jnp.asarray(ref_q), k))
    # per tensor, the 0.01-range head is nearly all zeros; per head it keeps ~7 bits
    per_tensor = emulate(_qk, _recipe(query={"format": "int8", "scaling": "tensor"}), weights=None)(q, k)
    exact = _qk(q, k)
    small = (slice(None), 2)
    err_head = np.abs(np.asarray(y - exact)[small]).max()
    err_tensor = np.abs(np.asarray(per_tensor - exact)[small]).max()
    assert err_head < err_tensor / 20


def test_gradients_read_attention_operands_as_act_dx():
    """The roles are forward only: with act fp32 the gradient GEMMs read the unrounded operands."""
    q, k = _data()
    pol = _recipe(query="fp8_e4m3", key={"format": "int8", "scaling": "head"})
    g = jax.grad(lambda a, b: jnp.sum(emulate(_qk, pol, weights=None)(a, b) * 1.5), argnums=(0, 1))(q, k)
    ref = jax.grad(lambda a, b: jnp.sum(_qk(a, b) * 1.5), argnums=(0, 1))(q, k)
    for u, v in zip(g, ref, strict=True):
        np.testing.assert_array_equal(u, v)


def test_marks_follow_reshapes_and_nested_calls_and_spare_weights():
    q, k = _data()

    @jax.jit
    def inner(a, b):  # a nested call: the marks travel into it
        return jnp.einsum("bqhd,bkhd->bhqk", a.reshape(a.shape), b)

    def fn(w, a, b):
        a = attention_role(a, "query").astype(jnp.float32)
        return inner(jnp.transpose(jnp.transpose(a, (1, 0, 2, 3)), (1, 0, 2, 3)), b), attention_role(w, "value") @ w

    w = jnp.eye(4, dtype=jnp.float32) * 1.1
    pol = _recipe(query="fp8_e4m3", value="int8", weight="bf16")
    y, ww = emulate(fn, pol, weights=0)(w, q, k)
    np.testing.assert_array_equal(y, _qk(_e4m3(q), k))
    bf = np.asarray(w).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(ww, bf @ bf)  # a marked weight stays a weight


def test_op_trace_names_the_attention_roles_and_formats():
    q, k = _data()
    pol = _recipe(query="fp8_e4m3", key="bf16")
    trace = op_trace(_qk, pol, q, k, weights=None)
    gemm = trace[trace["kind"] == "gemm"].iloc[0]
    assert (gemm["lhs_role"], gemm["rhs_role"]) == ("query", "key")
    assert (gemm["format_lhs"], gemm["format_rhs"]) == ("float8_e4m3fn", "bfloat16")


@pytest.mark.parametrize("roles, fragment", [
    ({"act": {"format": "int8", "scaling": "head"}}, "only on an attention role"),
    ({"query": {"format": "int8", "scaling": "heads"}}, "scaling"),
    ({"probabilities": {"format": "fp8_e4m3", "rotation": 16}}, "only on a GEMM operand role"),
    ({"keys": "bf16"}, "a role from"),
])
def test_bad_attention_roles(roles, fragment):
    with pytest.raises(RecipeError, match=fragment):
        load_recipe(_recipe(**roles))


def test_attention_role_refuses_an_unknown_role():
    with pytest.raises(ValueError, match="allowed: \\['query', 'key', 'probabilities', 'value'\\]"):
        attention_role(jnp.ones(3), "queries")
