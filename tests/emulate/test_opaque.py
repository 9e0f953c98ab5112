"""Issue 29 item 13: GEMMs the emulation cannot see (a Pallas kernel, an ffi call, a callback,
cuDNN's fused attention) ran silently unemulated: mxfp4 output bit-identical to fp32, no op-trace
row, no warning. Now each is an error naming the primitive and the recipe option ``opaque`` that
passes it through, with a warning (:mod:`asicsim._src.emulate.opaque`)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

from asicsim._src.emulate import (
    OpaqueError,
    OpaquePrimitive,
    RecipeError,
    emulate,
    load_recipe,
    op_trace,
)

W = jax.random.normal(jax.random.key(0), (16, 8))
X = jax.random.normal(jax.random.key(1), (4, 16))


def _matmul_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)


def _scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def pallas_gemm(w, x):
    out = jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32)
    return pl.pallas_call(_matmul_kernel, out_shape=out, interpret=True)(x, w)


def host_gemm(w, x):
    out = jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32)
    return jax.pure_callback(lambda a, b: np.asarray(b) @ np.asarray(a), out, w, x)


def ffi_gemm(w, x):
    return jax.ffi.ffi_call("user_gemm", jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32))(x, w)


def io_gemm(w, x):
    out = jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32)
    return jax.experimental.io_callback(lambda a, b: np.asarray(b) @ np.asarray(a), out, w, x)


@jax.custom_vjp
def _fused(w, x):  # a fused op with a hand-written backward around a black box (as cuDNN's attention)
    return host_gemm(w, x)


_fused.defvjp(lambda w, x: (host_gemm(w, x), (w, x)), lambda res, g: (res[1].T @ g, g @ res[0].T))


def ragged(w, x):
    return lax.ragged_dot(x, jnp.stack([w, w]), jnp.array([2, 2], jnp.int32))


def sharded(w, x):
    mesh = jax.make_mesh((1,), ("d",))
    spec = jax.sharding.PartitionSpec()
    return jax.shard_map(lambda a, b: b @ a, mesh=mesh, in_specs=(spec, spec), out_specs=spec)(w, x)


OPAQUE = [  # (function, the primitive the error names, a fragment of what it says)
    (pallas_gemm, "pallas_call", "has a 'dot_general' inside"),
    (host_gemm, "pure_callback", "cannot look into"),
    (io_gemm, "io_callback", "cannot look into"),
    (ffi_gemm, "ffi_call", "cannot look into"),
    (_fused, "pure_callback", "runs inside 'custom_vjp_call'"),
    (ragged, "ragged_dot_general", "a GEMM the emulation does not implement"),
    (sharded, "shard_map", "has a 'dot_general' inside"),
]


@pytest.mark.parametrize(("fn", "name", "what"), OPAQUE, ids=[o[1] + "/" + o[0].__name__ for o in OPAQUE])
def test_a_gemm_the_emulation_cannot_see_is_refused_by_name(fn, name, what):
    for run in (lambda: op_trace(fn, "mxfp4", W, X), lambda: jax.make_jaxpr(emulate(fn, "mxfp4"))(W, X)):
        with pytest.raises(OpaqueError) as err:
            run()
        assert f"cannot emulate {name!r}" in str(err.value) and what in str(err.value)
        assert f"opaque = [{name!r}]" in str(err.value)


@pytest.mark.parametrize("fn", [pallas_gemm, host_gemm, _fused], ids=["pallas_call", "pure_callback", "custom_vjp"])
def test_the_recipe_option_opaque_passes_it_through_with_a_warning(fn):
    name = "pallas_call" if fn is pallas_gemm else "pure_callback"
    pol = dataclasses.replace(load_recipe("mxfp4"), opaque=(name,))
    with pytest.warns(OpaquePrimitive, match=rf"'{name}' ran unemulated .* not in the op trace"):
        got = emulate(fn, pol)(W, X)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(fn(W, X)))  # the model's own numbers
    with pytest.warns(OpaquePrimitive):
        assert len(op_trace(fn, pol, W, X)) == 0


def test_what_hides_no_gemm_is_left_alone():
    # a Pallas kernel without a GEMM, a debug callback (no results): nothing the recipe changes
    def f(w, x):
        jax.debug.callback(lambda v: None, x)
        y = pl.pallas_call(_scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)
        return y @ w

    trace = op_trace(f, "mxfp4", W, X)
    assert len(trace) == 1 and trace.format_lhs.iloc[0] == "mxfp4"
    np.testing.assert_array_equal(np.asarray(emulate(f, "mxfp4")(W, X)), np.asarray(emulate(lambda w, x: (x * 2.0) @ w,
                                                                                            "mxfp4")(W, X)))


def test_a_recipe_file_names_its_opaque_primitives(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('name = "r"\nopaque = ["pallas_call"]\n[roles]\nweight = "bf16"\nact = "bf16"\nacc = "fp32"\n')
    assert load_recipe(path).opaque == ("pallas_call",)


@pytest.mark.parametrize(("value", "fragment"), [
    ("pallas_call", "opaque = 'pallas_call'"),
    ([""], "opaque = ('',)"),
    ([3], "opaque = (3,)"),
    ([" pallas_call"], "a list of primitive names"),
])
def test_bad_opaque_lists(value, fragment):
    with pytest.raises(RecipeError) as err:
        load_recipe({"roles": {"weight": "bf16", "act": "bf16", "acc": "fp32"}, "opaque": value})
    assert fragment in str(err.value)
